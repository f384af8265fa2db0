# Everything after scoring, in one job: four steps, one process
# (`swgpu run-steps`), so that Python, the package and the compiled alignment
# kernels start once instead of four times.  Each step is still one `swgpu`
# command (the same options as on its own) and one function of
# swgpu_tools.steps, and writes its own statistics file (results/stats/).
#
# 1. merge: the shards' hits -> results/hits.tsv: top-k per query over the
#    whole database, bit scores and E-values computed with the size of the
#    whole database (database.json), or config["dbsize"] residues (BLAST's
#    -dbsize).
# 2. traceback: every merged hit aligned on the CPU -> results/alignments.tsv,
#    in every format of config["formats"].  results/internal/alignments.reuse.tsv
#    keeps, per alignment, its coordinates, CIGAR and the hashes of both
#    sequences; after a re-scan, alignments of hits whose query, subject, score,
#    sequences and alignment code are unchanged are taken from the newest kept
#    release (results/history/) instead of computed again; the tables are
#    byte-identical to a full traceback.  A corrupt shard found here is moved
#    aside (--quarantine), to be rebuilt by the next run.
# 3. release: keep this release in results/history/<release>/ (hits.tsv,
#    alignments.tsv, alignments.reuse.tsv, manifest.json) and name it in
#    results/history/current.json.  <release> is config["release"] when given
#    (e.g. 2026_05), else "db-" and the database's content digest, so re-running
#    one release under other filters replaces its entry.  The release folders
#    are not declared outputs: Snakemake never deletes them.  Prune old
#    releases with `swgpu changes --prune N`.  results/changes.tsv compares this
#    release with the previous release (the newest other one kept), never with
#    an earlier run of this release; `swgpu run-steps` computes it after the
#    merge, in a forked process beside the traceback.  results/swgpu-run.json lists the tables
#    with their sizes and digests, written last; it is removed first, before
#    any table changes, so a reader that checks it never takes files of two
#    runs for one set.
# 4. plots: pictures and tables for the report (snakemake --report
#    report.html), from the final tables and the steps' statistics files (JSON;
#    never log text): score and E-value distributions over all hits, hits per
#    query (sorted curve and histogram), the queries with the most hits,
#    per-shard seconds and GCUPS, seconds per step, changes since the previous
#    release; per query and per step, a sortable table (HTML, shown in the
#    report) and the same as TSV.  Every picture has a fixed size (<= 2000 px a
#    side) whatever the number of queries or shards.  `swgpu run-steps` draws
#    them ahead in a forked process (the hits' after the merge, the changes'
#    and the steps' as soon as their inputs are written); the step draws what
#    is left.  Captions are in workflow/report/.
#
# Inputs are receipts (see shard_db.smk): Snakemake checksums every input once
# for each of this job's ~20 outputs.  The scoring jobs' hit tables (50 MB for
# 2,000 queries: 1 GB of checksums) are read by path, and their statistics
# files, written with them, are the inputs.  The shards are read too (the hit
# subjects' records); results/hits.tsv follows them through the scoring jobs,
# and database.json, written with the shards, orders this job after the shard
# step.
#
# Every step's statistics, shown in the report when they exist.
STEP_STATS = [
    "results/stats/shard_db.json",
    "results/stats/merge_hits.json",
    "results/stats/traceback.json",
]


rule finish:
    input:
        stats=score_job_stats,
        queries=QUERIES,
        info="results/shards/database.json",
    output:
        hits="results/hits.tsv",
        merge_stats="results/stats/merge_hits.json",
        alignments="results/alignments.tsv",
        extra=alignment_format_files(),
        internal="results/internal/alignments.reuse.tsv",
        traceback_stats="results/stats/traceback.json",
        marker="results/history/current.json",
        changes=report(
            "results/changes.tsv",
            caption="../report/changes_table.rst",
            category="Changes since the previous release",
            labels={"content": "table: new, gone and changed hits (TSV)"},
        ),
        manifest=MANIFEST,
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
        changes_png=report(
            "results/plots/changes.png",
            caption="../report/changes.rst",
            category="Changes since the previous release",
            labels={"content": "summary (picture)"},
        ),
        plots_stats="results/stats/plots.json",
    log:
        "results/logs/finish.log",
    benchmark:
        "results/benchmarks/finish.tsv"
    threads: config["threads"]
    params:
        scoring=scoring_options(),
        top_k=config["top_k"],
        max_evalue=config["max_evalue"],
        dbsize=f"--dbsize {config['dbsize']}" if config.get("dbsize") else "",
        outputs=lambda wildcards: output_options(),
        quarantine=QUARANTINE_DIR,
        history=lambda wildcards, output: os.path.dirname(output.marker),
        release=lambda wildcards: release_option(),
        config=lambda wildcards: config_json(),
        shards=shard_files(),
        hits=shard_hit_tables,
        step_stats=STEP_STATS,
        plots_dir=lambda wildcards, output: os.path.dirname(output.scores),
        then=STEP_SEPARATOR,
    shell:
        "rm -f {output.manifest:q}; swgpu run-steps"
        " merge --queries {input.queries:q} --database-info {input.info:q}"
        " --out {output.hits:q} --stats {output.merge_stats:q} {params.scoring}"
        " --top-k {params.top_k} --max-evalue {params.max_evalue} {params.dbsize}"
        " --threads {threads} {params.hits:q}"
        " {params.then} traceback --hits {output.hits:q} --queries {input.queries:q}"
        " --out {output.alignments:q} {params.outputs}"
        " --internal {output.internal:q} --previous {params.history:q}"
        " --stats {output.traceback_stats:q} {params.scoring} --threads {threads}"
        " --quarantine {params.quarantine:q} {params.shards:q}"
        " {params.then} release --hits {output.hits:q} --alignments {output.alignments:q}"
        " --internal {output.internal:q} --database-info {input.info:q}"
        " --queries {input.queries:q} --history {params.history:q}"
        " --marker {output.marker:q} --changes {output.changes:q}"
        " --manifest {output.manifest:q} {params.release} --config-json {params.config:q}"
        " {output.extra:q}"
        " {params.then} plots --hits {output.hits:q} --changes {output.changes:q}"
        " --queries {input.queries:q} --out-dir {params.plots_dir:q}"
        " --stats {output.plots_stats:q} {input.stats:q} {params.step_stats:q}"
        " > {log:q} 2>&1"
