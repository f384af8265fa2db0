# Pictures and tables for the report (snakemake --report report.html), from
# the final tables and the steps' statistics files (JSON; never log text):
# score and E-value distributions over all hits, hits per query (sorted curve
# and histogram), the queries with the most hits, per-shard seconds and GCUPS,
# seconds per step, changes since the previous scan; per query and per step,
# a sortable table (HTML, shown in the report) and the same as TSV.  Every
# picture has a fixed size (<= 2000 px a side) whatever the number of queries
# or shards.  Captions are in workflow/report/.

#: Statistics of the other steps, shown when they exist (not every step writes one).
STEP_STATS = [
    "results/stats/shard_db.json",
    "results/stats/merge_hits.json",
    "results/stats/traceback.json",
]


rule plots:
    input:
        hits="results/hits.tsv",
        changes="results/changes.tsv",
        queries=QUERIES,
        stats=score_job_stats,
    output:
        scores=report(
            "results/plots/scores.png",
            caption="../report/scores.rst",
            category="Hits",
            labels={"content": "distribution: scores"},
        ),
        evalues=report(
            "results/plots/evalues.png",
            caption="../report/evalues.rst",
            category="Hits",
            labels={"content": "distribution: E-values"},
        ),
        per_query=report(
            "results/plots/hits_per_query.png",
            caption="../report/hits_per_query.rst",
            category="Hits",
            labels={"content": "distribution: hits per query"},
        ),
        top_queries=report(
            "results/plots/top_queries.png",
            caption="../report/top_queries.rst",
            category="Hits",
            labels={"content": "top queries by hits"},
        ),
        queries_html=report(
            "results/plots/queries.html",
            caption="../report/queries.rst",
            category="Hits",
            labels={"content": "table: per query (sortable)"},
        ),
        queries_tsv=report(
            "results/plots/queries.tsv",
            caption="../report/queries.rst",
            category="Hits",
            labels={"content": "table: per query (TSV, download)"},
        ),
        shards=report(
            "results/plots/shards.png",
            caption="../report/shards.rst",
            category="Performance",
            labels={"content": "scoring jobs: time and GCUPS"},
        ),
        steps=report(
            "results/plots/steps.png",
            caption="../report/steps.rst",
            category="Performance",
            labels={"content": "steps: time"},
        ),
        steps_html=report(
            "results/plots/steps.html",
            caption="../report/steps_table.rst",
            category="Performance",
            labels={"content": "table: per step (sortable)"},
        ),
        steps_tsv="results/plots/steps.tsv",
        changes=report(
            "results/plots/changes.png",
            caption="../report/changes.rst",
            category="Changes since the previous release",
            labels={"content": "summary (picture)"},
        ),
        stats="results/stats/plots.json",
    log:
        "results/logs/plots.log",
    benchmark:
        "results/benchmarks/plots.tsv"
    threads: 1
    params:
        step_stats=STEP_STATS,
        out_dir=lambda wildcards, output: os.path.dirname(output.scores),
    shell:
        "swgpu plots --hits {input.hits:q} --changes {input.changes:q}"
        " --queries {input.queries:q} --out-dir {params.out_dir:q} --stats {output.stats:q}"
        " {input.stats:q} {params.step_stats:q} > {log:q} 2>&1"
