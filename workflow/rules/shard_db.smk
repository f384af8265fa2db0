# Split the database into config["shards"] stable shards.  A sequence's shard
# depends only on its id, and a shard file is byte-identical when its content
# did not change, so after a database update only the changed shards are
# scored again: Snakemake skips a job whose newer input has the checksum it had
# when the output was made (profiles/default: max-checksum-file-size).
#
# Receipts.  Snakemake checksums (sha256) each input of a job when the job
# ends, once for every output of the job, so big files as inputs cost seconds
# a run (on bench200M: the 230 MB database x 6 outputs of the shard step, the
# 200 MB of shards x 2 outputs of a scoring job; minutes at TrEMBL's size).
# So the rules take small receipts as inputs and pass the big files' paths as
# parameters:
#   * the database is not an input at all: its content digest is a parameter
#     of this step (DATABASE_CONTENT: the Snakefile, common.smk,
#     swgpu_tools/steps/receipt.py), computed by our threads only when the
#     file's size, times or inode changed.  Snakemake runs the step when the
#     digest changed (a new release; the params trigger); a `touch` runs
#     nothing.  So Snakemake never reads the database (its sha256 of it cost
#     0.3-0.8 s of each new release's run: once when it built the DAG, once
#     when the job ended).  The step writes the database's receipt last,
#     results/shards/source.json (`swgpu shard --receipt`: path, size, digest),
#     the record of the release the shards hold.  (Until 2026-11-29 a rule of
#     its own, database_source, wrote it as this step's input: one job more
#     before the first step, ~0.1-0.3 s of every new release's run);
#   * each shard: results/shards/shard-NNNN.json (its digest, sequences and
#     residues), written with the shard: the same bytes when the shard's
#     content is the same, whatever the shard file's size.
#
# A checkpoint, not a rule: otherwise Snakemake decides at DAG-build time that
# every score_shard job must rerun because its shard is "updated by another
# job".  After a checkpoint finishes, Snakemake re-evaluates the jobs whose
# input went through checkpoints.shard_db.get() (score_shard, see
# common.smk:shard_receipts) and then compares the receipts' checksums.  A dry
# run still lists every scoring job after a database change; the real run
# skips the unchanged.
#
# The step parses the database in one worker process per CPU it may run on
# (its affinity mask: the machine, or a SLURM job's --cpus-per-task); it runs
# before any other job, so the rule counts one thread.


checkpoint shard_db:
    output:
        shards=shard_files(),
        receipts=shard_receipt_files(),
        info="results/shards/database.json",
        stats="results/stats/shard_db.json",
        source="results/shards/source.json",
    log:
        "results/logs/shard_db.log",
    benchmark:
        "results/benchmarks/shard_db.tsv"
    threads: 1
    params:
        database=DATABASE,
        content=DATABASE_CONTENT,
        shards=config["shards"],
        out_dir=lambda wildcards, output: os.path.dirname(output.info),
    shell:
        "swgpu shard {params.database:q} --shards {params.shards}"
        " --out-dir {params.out_dir:q} --stats {output.stats:q}"
        " --receipt {output.source:q} --content {params.content:q} > {log:q} 2>&1"
