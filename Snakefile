# swgpu: exact Smith-Waterman screening of protein queries against a database.
#
#   shard_db     database FASTA     -> results/shards/shard-NNNN.swdb (+ a receipt
#                shard-NNNN.json each: the rules take receipts, not big files, as
#                inputs; see shard_db.smk) + database.json + source.json (the
#                database's receipt; the step runs when its content digest changed)
#   score_shard  queries x shards   -> results/hits/shard-NNNN[-MMMM].npz (a run of shards
#                per job, config shards_per_job;
#                results/state/ keeps what a re-scan of the next release reuses)
#   finish       four steps in one job (one process, `swgpu run-steps`):
#                merge      all shard hits -> results/hits.tsv     (top-k, E-values)
#                traceback  merged hits    -> results/alignments.tsv (+ .sam/.parquet/.txt)
#                release    this scan as a release -> results/history/<release>/,
#                           results/changes.tsv (vs the previous release),
#                           results/swgpu-run.json (the tables, written last)
#                plots      tables, stats JSON -> results/plots/ (snakemake --report)
#
# Every step is a thin shell call to the installed `swgpu` command; all logic
# lives in the swgpu_tools package.  See workflow/README.md and config/README.md.
#
# The target rule is defined here, in the root Snakefile, on purpose: Snakemake
# takes the first rule of the Snakefile it is given as the default target.

import sys
from pathlib import Path

from snakemake.utils import min_version
from swgpu_tools.io.stepstats import mark_start
from swgpu_tools.warm.launch import heap_frozen_for_exit, params_check_without_pandas

min_version("9.0")
mark_start("parse_start")
# Snakemake's params check (a run over existing outputs) without importing pandas
params_check_without_pandas()


# config/config.yaml is read when it exists relative to the working directory.
# Elsewhere, give the configuration explicitly:
#   snakemake --directory WORKDIR --configfile WORKDIR/config.yaml ...
if Path("config/config.yaml").exists():

    configfile: "config/config.yaml"


# Everything the configuration can get wrong is checked here, before any job
# (workflow/rules/config.smk).
include: "workflow/rules/config.smk"


wildcard_constraints:
    shard=r"[0-9][0-9][0-9][0-9]+(?:-[0-9][0-9][0-9][0-9]+)?",


# The target runs where Snakemake runs, never as a cluster job.
localrules:
    all,


# GPUs count per machine, not across a cluster (also set in profiles/default,
# repeated here so that it holds with --workflow-profile none).
resource_scopes:
    gpu="local",


include: "workflow/rules/common.smk"


# A run of jobs here: the warm process (and its GPU standby) starts now, beside
# the rest of the parse and the making of the DAG; otherwise from onstart.
start_warm_process(early=True)

# The database's digest (a new release file is checked, and refused if truncated
# or not FASTA) and the check of earlier results, beside the warm process's start.
# A refused release stops the parse at once: the warm process, just started, ends
# before it writes anything (results/ stays as it was, its log included).
DATABASE_CONTENT = database_content_digest()
check_earlier_results()
# then the scoring scheme (its imports are ~0.1 s: the warm process starts first)
check_scoring_scheme()


include: "workflow/rules/shard_db.smk"
include: "workflow/rules/score_shard.smk"
include: "workflow/rules/finish.smk"


# snakemake --report report.html: a self-contained page with the plots of rule
# finish, changes.tsv and the configuration (workflow/report/workflow.rst).
report: "workflow/report/workflow.rst"


rule all:
    default_target: True
    input:
        rules.finish.output,


onstart:
    from swgpu_tools.io.stepstats import write_start_marks

    mark_start("onstart")
    # jobs run here: no job-rate limiter, whose last timer delays the exit by ~1 s
    rate_limiter_off_where_jobs_run_here()
    # one process with the steps' imports loaded; jobs' commands run in its children
    # (started here unless the parse started it: see above)
    start_warm_process()
    # where the time before the first job went (Snakemake's start as data)
    write_start_marks("results/stats/snakemake_start.json")


onerror:
    # a SLURM time limit: say which rule needs more time, and how
    # (Snakemake 9 hands over a list of log files)
    from swgpu_tools.cluster import advice_for_logs

    stop_warm_process()
    for line in advice_for_logs(log):
        print(f"swgpu: {line}", file=sys.stderr)


onsuccess:
    from swgpu_tools.health import note_outputs

    stop_warm_process()
    # the tables as Snakemake left them (touched): the next start need not digest them
    note_outputs("results")
    print(
        "swgpu finished:\n"
        f"  hits:       {Path('results/hits.tsv').resolve()}\n"
        f"  alignments: {Path('results/alignments.tsv').resolve()}\n"
        f"  changes:    {Path('results/changes.tsv').resolve()} (since the previous release;"
        f" releases kept in {Path('results/history').resolve()})\n"
        f"  plots:      {Path('results/plots').resolve()}"
        " (snakemake --report report.html for one page with them)"
    )
    for line in scoring_backends_used():
        print(f"  scoring:    {line}")
    # the process's teardown collects none of what it holds now (0.4 s on two cores)
    heap_frozen_for_exit()


# the Snakefile's parse ends here (results/stats/snakemake_start.json)
mark_start("parse_end")
