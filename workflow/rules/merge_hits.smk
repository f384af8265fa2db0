# Merge the shards' hits: top-k per query over the whole database, bit scores
# and E-values computed with the size of the whole database (database.json).
# `previous` (keep_previous.smk) makes the snapshot of the last scan run first;
# the merge does not read it.


rule merge_hits:
    input:
        hits=shard_hit_tables(),
        queries=QUERIES,
        info="results/shards/database.json",
        previous="results/previous/scan.json",
    output:
        hits="results/hits.tsv",
        stats="results/stats/merge_hits.json",
    params:
        scoring=scoring_options(),
        top_k=config["top_k"],
        max_evalue=config["max_evalue"],
        dbsize=f"--dbsize {config['dbsize']}" if config.get("dbsize") else "",
    log:
        "results/logs/merge_hits.log",
    benchmark:
        "results/benchmarks/merge_hits.tsv"
    threads: 1
    shell:
        "swgpu merge --queries {input.queries:q} --database-info {input.info:q}"
        " --out {output.hits:q} --stats {output.stats:q} {params.scoring}"
        " --top-k {params.top_k} --max-evalue {params.max_evalue} {params.dbsize}"
        " {input.hits:q} > {log:q} 2>&1"
