# Align every merged hit (on the CPU) and write the alignment table.  A corrupt
# shard found here is moved aside as in score_shard.smk, to be rebuilt.


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
    log:
        "results/logs/traceback.log",
    benchmark:
        "results/benchmarks/traceback.tsv"
    threads: config["threads"]
    shell:
        "( swgpu traceback --hits {input.hits:q} --queries {input.queries:q}"
        " --out {output.alignments:q} {params.scoring} --threads {threads}"
        " {input.shards:q}"
        " || {{ swgpu check-shards --quarantine {params.quarantine:q} {input.shards:q}; exit 1; }}"
        " ) > {log:q} 2>&1"
