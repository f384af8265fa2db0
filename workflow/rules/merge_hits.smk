# Merge the shards' hits: top-k per query over the whole database, bit scores
# and E-values computed with the size of the whole database (database.json),
# or config["dbsize"] residues (BLAST's -dbsize).  The tables are about to
# change: the manifest of the last complete run (results/swgpu-run.json, rule
# release) goes first, so that it never lists tables of two runs.


rule merge_hits:
    input:
        hits=shard_hit_tables,
        queries=QUERIES,
        info="results/shards/database.json",
    output:
        hits="results/hits.tsv",
        stats="results/stats/merge_hits.json",
    log:
        "results/logs/merge_hits.log",
    benchmark:
        "results/benchmarks/merge_hits.tsv"
    threads: 1
    params:
        scoring=scoring_options(),
        top_k=config["top_k"],
        max_evalue=config["max_evalue"],
        dbsize=f"--dbsize {config['dbsize']}" if config.get("dbsize") else "",
        manifest=MANIFEST,
    shell:
        "rm -f {params.manifest:q}; swgpu merge --queries {input.queries:q} --database-info {input.info:q}"
        " --out {output.hits:q} --stats {output.stats:q} {params.scoring}"
        " --top-k {params.top_k} --max-evalue {params.max_evalue} {params.dbsize}"
        " {input.hits:q} > {log:q} 2>&1"
