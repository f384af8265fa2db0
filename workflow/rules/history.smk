# Keep every scanned database release: results/history/<release>/ (hits.tsv,
# alignments.tsv, the full alignment table, manifest.json) and the marker
# results/history/current.json naming the current release.  <release> is
# config["release"] when given (e.g. 2026_05), else "db-" and the database's
# content digest, so re-running one release under other filters replaces its
# entry.  The release folders are not declared outputs: Snakemake never
# deletes them.  Prune old releases with `swgpu changes --prune N`.


rule history:
    input:
        hits="results/hits.tsv",
        alignments="results/alignments.tsv",
        internal="results/internal/alignments.reuse.tsv",
        info="results/shards/database.json",
    output:
        marker="results/history/current.json",
    params:
        history=lambda wildcards, output: os.path.dirname(output.marker),
        release=lambda wildcards: release_option(),
        config=lambda wildcards: config_json(),
    log:
        "results/logs/history.log",
    benchmark:
        "results/benchmarks/history.tsv"
    threads: 1
    shell:
        "swgpu record-release --hits {input.hits:q} --alignments {input.alignments:q}"
        " --internal {input.internal:q} --database-info {input.info:q}"
        " --history {params.history:q} --marker {output.marker:q} {params.release}"
        " --config-json {params.config:q} > {log:q} 2>&1"
