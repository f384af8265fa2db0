# Align every merged hit (on the CPU) and write the alignment table, in every
# format of config["formats"].  A corrupt shard found here is moved aside as in
# score_shard.smk, to be rebuilt.
#
# results/internal/alignments.reuse.tsv keeps, per alignment, its coordinates,
# CIGAR and the hashes of both sequences; after a re-scan, alignments of hits
# whose query, subject, score, sequences and alignment code are unchanged are
# taken from the newest kept release (results/history/, rule history) instead
# of computed again.  The tables are byte-identical to a full traceback.  As
# in merge_hits.smk, the last run's manifest goes before the tables change.


rule traceback:
    input:
        hits="results/hits.tsv",
        queries=QUERIES,
        shards=shard_files(),
    output:
        alignments="results/alignments.tsv",
        extra=alignment_format_files(),
        internal="results/internal/alignments.reuse.tsv",
        stats="results/stats/traceback.json",
    log:
        "results/logs/traceback.log",
    benchmark:
        "results/benchmarks/traceback.tsv"
    threads: config["threads"]
    params:
        scoring=scoring_options(),
        outputs=lambda wildcards: output_options(),
        quarantine=QUARANTINE_DIR,
        previous="results/history",
        manifest=MANIFEST,
    shell:
        "rm -f {params.manifest:q}; ( swgpu traceback --hits {input.hits:q} --queries {input.queries:q}"
        " --out {output.alignments:q} {params.outputs}"
        " --internal {output.internal:q} --previous {params.previous:q}"
        " --stats {output.stats:q} {params.scoring} --threads {threads}"
        " {input.shards:q}"
        " || {{ swgpu check-shards --quarantine {params.quarantine:q} {input.shards:q}; exit 1; }}"
        " ) > {log:q} 2>&1"
