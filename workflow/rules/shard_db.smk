# Split the database into config["shards"] stable shards.  A sequence's shard
# depends only on its id, and a shard file is byte-identical when its content
# did not change, so after a database update only the changed shards are
# scored again (Snakemake compares input checksums; see profiles/default).


rule shard_db:
    input:
        database=config["database"],
    output:
        shards=shard_files(),
        info="results/shards/database.json",
    params:
        shards=config["shards"],
        out_dir=lambda wildcards, output: os.path.dirname(output.info),
    log:
        "results/logs/shard_db.log",
    benchmark:
        "results/benchmarks/shard_db.tsv"
    threads: 1
    shell:
        "swgpu shard {input.database:q} --shards {params.shards}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"
