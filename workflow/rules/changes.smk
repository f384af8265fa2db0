# What changed since the previous database release: results/changes.tsv (new,
# gone and changed-score hits per query, with both scores).  The current
# release (results/history/current.json) is compared with the newest other
# release kept in results/history/, never with an earlier run of the same
# release.


rule changes:
    input:
        hits="results/hits.tsv",
        current="results/history/current.json",
        queries=QUERIES,
    output:
        changes=report(
            "results/changes.tsv",
            caption="../report/changes_table.rst",
            category="Changes since the previous release",
            labels={"content": "table: new, gone and changed hits (TSV)"},
        ),
    params:
        history=lambda wildcards, input: os.path.dirname(input.current),
    log:
        "results/logs/changes.log",
    benchmark:
        "results/benchmarks/changes.tsv"
    threads: 1
    shell:
        "swgpu changes --hits {input.hits:q} --current {input.current:q}"
        " --history {params.history:q} --queries {input.queries:q}"
        " --out {output.changes:q} > {log:q} 2>&1"
