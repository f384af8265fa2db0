# Align every merged hit (on the CPU) and write the alignment table.  A corrupt
# shard found here is moved aside as in score_shard.smk, to be rebuilt.
#
# After a re-scan, rows of the previous scan's table (results/previous/, kept
# by keep_previous) are reused for hits with the same query, subject and score
# whose query and subject sequences, scoring scheme and alignment code are
# unchanged, as recorded in results/alignments.fingerprints.json (written with
# the table; not a declared output).  The table is byte-identical to a full
# traceback.


rule traceback:
    input:
        hits="results/hits.tsv",
        queries=config["queries"],
        shards=shard_files(),
    output:
        alignments="results/alignments.tsv",
    params:
        scoring=scoring_options(),
        quarantine=QUARANTINE_DIR,
        previous="results/previous/alignments.tsv",
    log:
        "results/logs/traceback.log",
    benchmark:
        "results/benchmarks/traceback.tsv"
    threads: config["threads"]
    shell:
        "( swgpu traceback-incremental --hits {input.hits:q} --queries {input.queries:q}"
        " --out {output.alignments:q} --previous {params.previous:q}"
        " {params.scoring} --threads {threads}"
        " {input.shards:q}"
        " || {{ swgpu check-shards --quarantine {params.quarantine:q} {input.shards:q}; exit 1; }}"
        " ) > {log:q} 2>&1"
