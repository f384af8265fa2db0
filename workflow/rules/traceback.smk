# Align every merged hit (on the CPU) and write the alignment table, in every
# format of config["formats"].  A corrupt shard found here is moved aside as in
# score_shard.smk, to be rebuilt.
#
# results/internal/alignments.reuse.tsv keeps, per alignment, its coordinates,
# CIGAR and the hashes of both sequences; after a re-scan, alignments of hits
# whose query, subject, score, sequences and alignment code are unchanged are
# taken from the newest kept release (results/history/, rule history) instead
# of computed again.  The tables are byte-identical to a full traceback.  As
# in merge_hits.smk, the last run's manifest goes before the tables change.
#
# The shards are read (the hit subjects' records) but not declared as inputs:
# results/hits.tsv already follows them (through the scoring jobs and the
# merge), and as inputs Snakemake would hash all of them (sha256, up to
# max-checksum-file-size) for its records after every traceback job: 0.9 s a
# run on bench200M, minutes on a TrEMBL-sized database.  database.json, written
# with the shards, orders this job after the shard step.


rule traceback:
    input:
        hits="results/hits.tsv",
        queries=QUERIES,
        info="results/shards/database.json",
    output:
        alignments="results/alignments.tsv",
        extra=alignment_format_files(),
        internal="results/internal/alignments.reuse.tsv",
        stats="results/stats/traceback.json",
    log:
        "results/logs/traceback.log",
    benchmark:
        "results/benchmarks/traceback.tsv"
    threads: config["threads"]
    params:
        scoring=scoring_options(),
        outputs=lambda wildcards: output_options(),
        quarantine=QUARANTINE_DIR,
        previous="results/history",
        manifest=MANIFEST,
        shards=shard_files(),
    shell:
        "rm -f {params.manifest:q}; ( swgpu traceback --hits {input.hits:q} --queries {input.queries:q}"
        " --out {output.alignments:q} {params.outputs}"
        " --internal {output.internal:q} --previous {params.previous:q}"
        " --stats {output.stats:q} {params.scoring} --threads {threads}"
        " {params.shards:q}"
        " || {{ swgpu check-shards --quarantine {params.quarantine:q} {params.shards:q}; exit 1; }}"
        " ) > {log:q} 2>&1"
