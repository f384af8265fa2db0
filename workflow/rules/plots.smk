# Plots for the report (snakemake --report report.html): score and E-value
# distributions per query, hits per query, per-shard time and GCUPS, changes
# since the previous scan.  Captions are in workflow/report/.


rule plots:
    input:
        hits="results/hits.tsv",
        changes="results/changes.tsv",
        stats=expand("results/stats/score_shard/shard-{shard}.json", shard=SHARD_IDS),
    output:
        scores=report("results/plots/scores.png", caption="../report/scores.rst",
                      category="Hits"),
        evalues=report("results/plots/evalues.png", caption="../report/evalues.rst",
                       category="Hits"),
        per_query=report("results/plots/hits_per_query.png",
                         caption="../report/hits_per_query.rst", category="Hits"),
        shards=report("results/plots/shards.png", caption="../report/shards.rst",
                      category="Performance"),
        changes=report("results/plots/changes.png", caption="../report/changes.rst",
                       category="Changes since the previous scan"),
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.scores),
    log:
        "results/logs/plots.log",
    threads: 1
    shell:
        "swgpu plots --hits {input.hits:q} --changes {input.changes:q}"
        " --out-dir {params.out_dir:q} {input.stats:q} > {log:q} 2>&1"
