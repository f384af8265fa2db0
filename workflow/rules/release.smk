# The scan as a database release, in one job (three small steps, one start-up):
#
# * history: keep this release in results/history/<release>/ (hits.tsv,
#   alignments.tsv, alignments.reuse.tsv, manifest.json) and name it in
#   results/history/current.json.  <release> is config["release"] when given
#   (e.g. 2026_05), else "db-" and the database's content digest, so re-running
#   one release under other filters replaces its entry.  The release folders
#   are not declared outputs: Snakemake never deletes them.  Prune old releases
#   with `swgpu changes --prune N`.
# * changes: results/changes.tsv, this release against the previous release
#   (the newest other one kept), never against an earlier run of this release.
# * manifest: results/swgpu-run.json lists the tables with their sizes and
#   digests, written last; merge_hits and traceback remove it before they
#   change a table, so a reader that checks it never takes files of two runs
#   for one set.


rule release:
    input:
        hits="results/hits.tsv",
        alignments="results/alignments.tsv",
        extra=alignment_format_files(),
        internal="results/internal/alignments.reuse.tsv",
        info="results/shards/database.json",
        queries=QUERIES,
    output:
        marker="results/history/current.json",
        changes=report(
            "results/changes.tsv",
            caption="../report/changes_table.rst",
            category="Changes since the previous release",
            labels={"content": "table: new, gone and changed hits (TSV)"},
        ),
        manifest=MANIFEST,
    log:
        "results/logs/release.log",
    benchmark:
        "results/benchmarks/release.tsv"
    threads: 1
    params:
        history=lambda wildcards, output: os.path.dirname(output.marker),
        release=lambda wildcards: release_option(),
        config=lambda wildcards: config_json(),
    shell:
        "swgpu release --hits {input.hits:q} --alignments {input.alignments:q}"
        " --internal {input.internal:q} --database-info {input.info:q}"
        " --queries {input.queries:q} --history {params.history:q}"
        " --marker {output.marker:q} --changes {output.changes:q}"
        " --manifest {output.manifest:q} {params.release} --config-json {params.config:q}"
        " {input.extra:q} > {log:q} 2>&1"
