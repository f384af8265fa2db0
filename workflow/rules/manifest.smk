# The outputs as one set: results/swgpu-run.json is written last, after every
# table, and lists each output with its size and digest.  A reader that checks
# it (swgpu_tools.io.outputset.read_manifest) never takes files of two runs for
# one set: while a run is under way the manifest is removed first
# (common.smk), and afterwards it names exactly this run's files.


rule manifest:
    input:
        hits="results/hits.tsv",
        alignments="results/alignments.tsv",
        extra=alignment_format_files(),
        changes="results/changes.tsv",
        history="results/history/current.json",
        plots=rules.plots.output,
    output:
        manifest="results/swgpu-run.json",
    log:
        "results/logs/manifest.log",
    benchmark:
        "results/benchmarks/manifest.tsv"
    threads: 1
    shell:
        "swgpu write-manifest --out {output.manifest:q} {input.hits:q} {input.alignments:q}"
        " {input.extra:q} {input.changes:q} > {log:q} 2>&1"
