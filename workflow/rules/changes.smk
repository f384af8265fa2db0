# What changed since the previous scan: results/changes.tsv (new, gone and
# changed-score hits per query, with both scores).  Runs after the traceback
# so that it describes a finished scan.


rule changes:
    input:
        hits="results/hits.tsv",
        alignments="results/alignments.tsv",
        previous="results/previous/scan.json",
        queries=QUERIES,
    output:
        changes=report(
            "results/changes.tsv",
            caption="../report/changes_table.rst",
            category="Changes since the previous scan",
        ),
    log:
        "results/logs/changes.log",
    threads: 1
    shell:
        "swgpu changes --hits {input.hits:q} --previous {input.previous:q}"
        " --queries {input.queries:q} --out {output.changes:q} > {log:q} 2>&1"
