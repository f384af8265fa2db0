# swgpu: exact Smith-Waterman screening of protein queries against a database.
#
#   shard_db     database FASTA     -> results/shards/shard-NNNN.swdb + database.json
#   score_shard  queries x 1 shard  -> results/hits/shard-NNNN.tsv      (one job per shard)
#   merge_hits   all shard hits     -> results/hits.tsv                 (top-k, E-values)
#   traceback    merged hits        -> results/alignments.tsv
#   keep_previous before a re-merge: last scan's tables -> results/previous/
#   changes      hits vs previous   -> results/changes.tsv
#   plots        tables, benchmarks -> results/plots/*.png (snakemake --report report.html)
#
# Every step is a thin shell call to the installed `swgpu` command; all logic
# lives in the swgpu_tools package.  See workflow/README.md and config/README.md.
#
# The target rule is defined here, in the root Snakefile, on purpose: Snakemake
# takes the first rule of the Snakefile it is given as the default target.

from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


# config/config.yaml is read when it exists relative to the working directory.
# Elsewhere, give the configuration explicitly:
#   snakemake --directory WORKDIR --configfile WORKDIR/config.yaml ...
if Path("config/config.yaml").exists():

    configfile: "config/config.yaml"


# Everything the configuration can get wrong is checked here, before any job
# (workflow/rules/config.smk).
include: "workflow/rules/config.smk"


wildcard_constraints:
    shard=r"[0-9][0-9][0-9][0-9]+",


# Small steps run where Snakemake runs, never as cluster jobs.
localrules:
    all,
    keep_previous,
    changes,
    plots,


# GPUs count per machine, not across a cluster (also set in profiles/default,
# repeated here so that it holds with --workflow-profile none).
resource_scopes:
    gpu="local",


include: "workflow/rules/common.smk"
include: "workflow/rules/shard_db.smk"
include: "workflow/rules/score_shard.smk"
include: "workflow/rules/merge_hits.smk"
include: "workflow/rules/traceback.smk"
include: "workflow/rules/keep_previous.smk"
include: "workflow/rules/changes.smk"
include: "workflow/rules/plots.smk"


# snakemake --report report.html: a self-contained page with the plots of rule
# plots, changes.tsv and the configuration (workflow/report/workflow.rst).
report: "workflow/report/workflow.rst"


rule all:
    input:
        "results/hits.tsv",
        "results/alignments.tsv",
        "results/changes.tsv",
        rules.plots.output,
    default_target: True


onsuccess:
    print(
        "swgpu finished:\n"
        f"  hits:       {Path('results/hits.tsv').resolve()}\n"
        f"  alignments: {Path('results/alignments.tsv').resolve()}\n"
        f"  changes:    {Path('results/changes.tsv').resolve()} (since the previous scan,"
        f" kept in {Path('results/previous').resolve()})\n"
        f"  plots:      {Path('results/plots').resolve()}"
        " (snakemake --report report.html for one page with them)"
    )
    for line in scoring_backends_used():
        print(f"  scoring:    {line}")
