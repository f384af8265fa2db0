# Split the database into config["shards"] stable shards.  A sequence's shard
# depends only on its id, and a shard file is byte-identical when its content
# did not change, so after a database update only the changed shards are
# scored again: Snakemake skips a job whose newer input has the checksum it had
# when the output was made (for files below max-checksum-file-size, see
# profiles/default).
#
# A checkpoint, not a rule: otherwise Snakemake decides at DAG-build time that
# every score_shard job must rerun because its shard is "updated by another
# job".  After a checkpoint finishes, Snakemake re-evaluates the jobs whose
# input went through checkpoints.shard_db.get() (score_shard, see
# common.smk:shard_file) and then compares checksums.  A dry run still lists
# every scoring job after a database change; the real run skips the unchanged.
#
# The step parses the database in one worker process per CPU it may run on
# (its affinity mask: the machine, or a SLURM job's --cpus-per-task); it runs
# before any other job, so the rule counts one thread.


checkpoint shard_db:
    input:
        database=DATABASE,
    output:
        shards=shard_files(),
        info="results/shards/database.json",
        stats="results/stats/shard_db.json",
    log:
        "results/logs/shard_db.log",
    benchmark:
        "results/benchmarks/shard_db.tsv"
    threads: 1
    params:
        shards=config["shards"],
        out_dir=lambda wildcards, output: os.path.dirname(output.info),
    shell:
        "swgpu shard {input.database:q} --shards {params.shards}"
        " --out-dir {params.out_dir:q} --stats {output.stats:q} > {log:q} 2>&1"
