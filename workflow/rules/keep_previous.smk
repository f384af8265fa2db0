# Keep the last scan's tables before a re-scan replaces them.
#
# Snakemake deletes a job's outputs before the job runs, so merge_hits cannot
# keep the old results/hits.tsv itself.  This rule has the same inputs and
# parameters as merge_hits, so it reruns exactly when the merge will, and
# merge_hits takes its marker as an input, so it runs first: it copies
# results/hits.tsv and results/internal/alignments.parquet (still the last complete scan)
# to results/previous/.  Only the marker results/previous/scan.json is a
# declared output; the copies are not, so Snakemake never deletes them, and
# when the current tables are not a complete scan (first run; a run killed
# between merge and traceback) the older snapshot is kept as it is.


rule keep_previous:
    input:
        hits=shard_hit_tables(),
        queries=QUERIES,
        info="results/shards/database.json",
    output:
        marker="results/previous/scan.json",
    params:
        scoring=scoring_options(),
        top_k=config["top_k"],
        max_evalue=config["max_evalue"],
        current_hits="results/hits.tsv",
        current_internal="results/internal/alignments.parquet",
        out_dir=lambda wildcards, output: os.path.dirname(output.marker),
    log:
        "results/logs/keep_previous.log",
    threads: 1
    shell:
        "swgpu keep-previous --hits {params.current_hits:q}"
        " --internal {params.current_internal:q} --out-dir {params.out_dir:q}"
        " --marker {output.marker:q} > {log:q} 2>&1"
