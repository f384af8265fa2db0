# Align every merged hit (on the CPU) and write the alignment table.


rule traceback:
    input:
        hits="results/hits.tsv",
        queries=config["queries"],
        shards=shard_files(),
    output:
        alignments="results/alignments.tsv",
    params:
        scoring=scoring_options(),
    log:
        "results/logs/traceback.log",
    benchmark:
        "results/benchmarks/traceback.tsv"
    threads: config["threads"]
    shell:
        "swgpu traceback --hits {input.hits:q} --queries {input.queries:q}"
        " --out {output.alignments:q} {params.scoring} --threads {threads}"
        " {input.shards:q} > {log:q} 2>&1"
