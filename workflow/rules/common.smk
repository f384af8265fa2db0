# Helpers shared by the rules: config access, the shard list, the command-line
# options derived from the config, and the backend (GPU or CPU) decision.
# Functions only; no rules here (snakemake --lint wants them apart).

import os
from pathlib import Path
import shlex
import sys

# ---------------------------------------------------------------------------
# inputs (paths with braces are file names, not wildcards)
# ---------------------------------------------------------------------------


def _input_path(key):
    """config[key] as a rule input.  Snakemake reads braces in a path as wildcards
    (there is no escape in input paths), so a path with braces is used through
    a symbolic link results/inputs/<key>.<suffix> to it."""
    path = str(config[key])
    if "{" not in path and "}" not in path:
        return path
    suffix = ".fasta.gz" if path.endswith(".gz") else ".fasta"
    link = f"results/inputs/{key}{suffix}"
    target = os.path.abspath(path)
    if not (os.path.islink(link) and os.readlink(link) == target):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        tmp = f"{link}.{os.getpid()}.tmp"
        os.symlink(target, tmp)
        os.replace(tmp, link)
    if workflow.is_main_process:
        print(
            f"swgpu: the {key} path {path!r} has braces, which Snakemake reads as "
            f"wildcards; reading it through the link {link}",
            file=sys.stderr,
        )
    return link


DATABASE = _input_path("database")
QUERIES = _input_path("queries")


def database_content_digest():
    """The database's content digest, a parameter of rule shard_db (see
    shard_db.smk): computed only when the file's size, times or inode changed since
    the digest noted in .snakemake/swgpu/database-stamp.json.  A new file that is
    truncated or not FASTA is refused here, before any job."""
    from swgpu_tools.steps.receipt import database_content

    return database_content(DATABASE, ".snakemake/swgpu/database-stamp.json")


# ---------------------------------------------------------------------------
# shards
# ---------------------------------------------------------------------------

#: Shard numbers as they appear in file names: "0000", "0001", ...
SHARD_IDS = [f"{i:04d}" for i in range(config["shards"])]


#: Where corrupt shard files are moved (then rebuilt by shard_db on the next run).
QUARANTINE_DIR = "results/shards/corrupt"
#: Written last by rule finish (its release step); removed first by that rule.
MANIFEST = "results/swgpu-run.json"

#: Separates the steps of `swgpu run-steps` (rule finish).
from swgpu_tools.cli import STEP_SEPARATOR


def dry_run():
    """Whether this is a dry run.  While the Snakefile is parsed, workflow.dryrun is
    still False (Snakemake sets it when the run starts); the output settings
    already say it."""
    settings = getattr(workflow, "output_settings", None)
    return bool(getattr(settings, "dryrun", False)) or workflow.dryrun


def check_earlier_results():
    """Damaged results of earlier runs (a corrupt shard, a truncated table, a kept
    release that differs from its manifest) are found now and removed, so that
    this run makes them again (swgpu_tools/health.py).  Not in a dry run, which
    changes nothing."""
    if workflow.is_main_process and not dry_run():
        from swgpu_tools.health import check_results

        for line in check_results("results", config["shards"]):
            print(f"swgpu: {line}", file=sys.stderr)


def shard_files():
    """The shard files written by rule shard_db, in shard order."""
    return expand("results/shards/shard-{shard}.swdb", shard=SHARD_IDS)


def _job_shards(wildcards):
    """The shard numbers of a score_shard job, from its name (swgpu_tools.shardjobs)."""
    from swgpu_tools.shardjobs import job_shards

    return [f"{k:04d}" for k in job_shards(wildcards.shard)]


def shard_receipt_files():
    """The shards' receipts (digest, sequences, residues), written by rule shard_db."""
    return expand("results/shards/shard-{shard}.json", shard=SHARD_IDS)


def job_shard_files(wildcards):
    """The shard files of a score_shard job (read by path: see shard_receipts)."""
    return expand("results/shards/shard-{s}.swdb", s=_job_shards(wildcards))


def shard_receipts(wildcards):
    """Input of a score_shard job: its shards' receipts, through the shard_db
    checkpoint (see shard_db.smk: receipts).

    Going through the checkpoint makes Snakemake re-evaluate the scoring jobs
    once the shards are (re)written, so that a job whose shards' content
    (receipts' checksums) did not change is not run again (see shard_db.smk).
    """
    checkpoints.shard_db.get()
    return expand("results/shards/shard-{s}.json", s=_job_shards(wildcards))


def state_file(shard_id):
    """The re-scan memory file of shard ``shard_id`` ("0002"; not a declared output)."""
    return f"results/state/shard-{shard_id}.npz"


def shard_states(wildcards):
    """The re-scan memory files of a score_shard job's shards (not declared outputs)."""
    return " ".join(shlex.quote(state_file(s)) for s in _job_shards(wildcards))


def shard_hit_tables(wildcards=None):
    """The hit tables written by rule score_shard, one per job, in shard order."""
    return expand("results/hits/shard-{job}.npz", job=score_jobs())


def score_job_stats(wildcards=None):
    """The statistics files written by rule score_shard, one per job."""
    return expand("results/stats/score_shard/shard-{job}.json", job=score_jobs())


# ---------------------------------------------------------------------------
# Snakemake's exit
# ---------------------------------------------------------------------------


def rate_limiter_off_where_jobs_run_here():
    """Turn Snakemake's job-rate limiter off in a run whose jobs run on this machine
    (called from the Snakefile's onstart hook, after the scheduler is made).

    The limiter (--max-jobs-per-timespan, default 100/1s) wakes the scheduler
    with a threading.Timer of the timespan on every pass, and the last of those
    timers, a non-daemon thread, holds the finished process for up to a second:
    about 1 s of every run, 15-20% of a small re-scan.  It protects a cluster's
    scheduler from floods of submissions; a local run has nothing to protect.
    A cluster run's main process keeps it.
    """
    scheduler = getattr(workflow, "scheduler", None)
    if workflow.local_exec and hasattr(scheduler, "job_rate_limiter"):
        scheduler.job_rate_limiter = None


# ---------------------------------------------------------------------------
# warm start (config warm_start; swgpu_tools/warm)
# ---------------------------------------------------------------------------

_WARM = []


def start_warm_process(early=False):
    """Start `swgpu warm-serve` for a local run's jobs, once: while the Snakefile is
    parsed (early) where Snakemake parses it to run jobs here, so that its GPU
    standby starts beside the DAG's making; else from onstart (only when jobs
    will run).  A cluster run's jobs run elsewhere: nothing."""
    if _WARM or not config["warm_start"]:
        return
    if early:
        from swgpu_tools.warm.launch import snakemake_runs_jobs_here

        if (
            not workflow.is_main_process
            or workflow.remote_exec
            or dry_run()
            or not snakemake_runs_jobs_here()
        ):
            return
    elif not workflow.local_exec or workflow.remote_exec:
        return
    from swgpu_tools.warm.launch import start

    # with a GPU: a standby process starts it at once, for the first scoring job;
    # where every shard has its re-scan state, for a re-scan's searches
    standby = f"{config['matrix']}:{config['gap_open']}:{config['gap_extend']}"
    _WARM.append(
        start(
            "results/logs/warm-start.log",
            gpu=bool(SCORE_GPUS),
            standby=standby if config["backend"] != "cpu" else None,
            rescan=all(os.path.exists(state_file(s)) for s in SHARD_IDS),
            cuda=config["backend"] != "cpu",
        )
    )
    mark_start("warm_started")


def stop_warm_process():
    """Stop it (onsuccess, onerror); jobs started afterwards run their own."""
    from swgpu_tools.warm.launch import stop

    while _WARM:
        stop(_WARM.pop())


# ---------------------------------------------------------------------------
# options passed to `swgpu`
# ---------------------------------------------------------------------------


def scoring_options():
    """--matrix/--gap-open/--gap-extend, shared by score-shard, merge and traceback.

    BLAST convention: a gap of length k costs gap_open + k * gap_extend.
    """
    return (
        f"--matrix {shlex.quote(str(config['matrix']))} "
        f"--gap-open {config['gap_open']} --gap-extend {config['gap_extend']}"
    )


def output_options():
    """--columns/--no-header/--format of the traceback step, from the config."""
    formats = ",".join(dict.fromkeys(["tsv", *config["formats"]]))
    header = "" if config["header"] else " --no-header"
    return f"--columns {shlex.quote(str(config['columns']))}{header} --format {formats}"


def release_option():
    """--release NAME when the config names the database release."""
    release = config.get("release")
    return f"--release {shlex.quote(str(release))}" if release else ""


def config_json():
    """The configuration as one line of JSON (kept in each release's manifest)."""
    import json

    return json.dumps(config, sort_keys=True, default=str)


ALIGNMENT_SUFFIXES = {"sam": ".sam", "parquet": ".parquet", "pairwise": ".txt"}


def alignment_format_files():
    """The alignment files besides results/alignments.tsv, one per extra format."""
    return [
        f"results/alignments{ALIGNMENT_SUFFIXES[f]}"
        for f in dict.fromkeys(config["formats"])
        if f != "tsv"
    ]


# ---------------------------------------------------------------------------
# backend: GPU or CPU, and how many scoring jobs at once
# ---------------------------------------------------------------------------
#
# Decided once, when the DAG is built, by swgpu_tools.backend.workflow_gpus
# (nvidia-smi -L and CUDA_VISIBLE_DEVICES; no CUDA inside Snakemake):
#
#   backend: cpu   -> scoring jobs are CPU jobs (gpu=0): --cores and threads
#                     limit them, nothing else.
#   backend: gpu   -> GPU jobs (gpu=1); swgpu fails clearly if none is usable.
#   backend: auto  -> GPU jobs when a GPU is listed, else CPU jobs.
#
# With N GPUs listed, Snakemake's `gpu` resource is set to N on this machine
# (one scoring job per GPU; each job locks its own GPU at run time), unless
# the user gave it (`--resources gpu=K`, command line or a profile).  The
# `swgpu` command makes the final backend choice at run time from the same
# `backend` value, so a wrong guess changes only the scheduling, never the
# results.  On a cluster the submitting host rarely has a GPU: set
# backend: gpu there (profiles/slurm does); `gpu` is a local resource, so the
# count here does not cap what a cluster executor submits.


def _import_backend():
    """swgpu_tools.backend (the Snakefile made the package importable)."""
    from swgpu_tools import backend

    return backend


GPU_PLAN = _import_backend().workflow_gpus(config["backend"])

#: GPUs each score_shard job takes: 1 on a GPU, else 0.
SCORE_GPUS = GPU_PLAN.per_job

_gpu_given = "gpu" in workflow.global_resources
if GPU_PLAN.machine is not None and not _gpu_given:
    workflow.register_resource("gpu", GPU_PLAN.machine)
if workflow.is_main_process:
    _gpu = workflow.global_resources.get("gpu")
    print(
        _import_backend().workflow_gpus_line(GPU_PLAN, _gpu and _gpu.value, _gpu_given),
        file=sys.stderr,
    )


def _scoring_slots():
    """Scoring jobs that run at once on this machine: GPUs for GPU jobs, else the
    CPU jobs that fit --cores; None on a cluster (each job gets its own node share).

    Every process that builds this DAG must plan the same jobs: a cluster job's
    own Snakemake (remote mode, where local_exec is true) evaluates the merge's
    inputs again, so remote mode plans like the cluster run that submitted it.
    """
    if not workflow.local_exec or workflow.remote_exec:
        return None
    if SCORE_GPUS:
        gpu = workflow.global_resources.get("gpu")
        return gpu.value if gpu is not None else None
    cores = workflow.global_resources.get("_cores")
    cores = getattr(cores, "value", cores)
    return max(1, int(cores) // int(config["threads"])) if cores else None


_SCORE_JOBS = []


def score_jobs():
    """The score_shard jobs, by name: "0002" scores shard 2, "0000-0003" shards 0 to 3.

    Decided when the DAG is built (input functions), not when this file is
    parsed: only then does Snakemake know whether jobs run here or on a cluster.
    """
    if not _SCORE_JOBS:
        from swgpu_tools.shardjobs import auto_per_job, plan_jobs

        per_job = config["shards_per_job"]
        if per_job == "auto":
            per_job = auto_per_job(config["shards"], _scoring_slots())
        _SCORE_JOBS.append(plan_jobs(config["shards"], min(int(per_job), config["shards"])))
        jobs = _SCORE_JOBS[0]
        if workflow.is_main_process and len(jobs) < config["shards"]:
            print(
                f"swgpu: {config['shards']} shards in {len(jobs)} scoring "
                f"job{'s' if len(jobs) > 1 else ''} (shards_per_job: {config['shards_per_job']})",
                file=sys.stderr,
            )
    return list(_SCORE_JOBS[0])


def scoring_backends_used():
    """The distinct backends (with their reasons) of the scoring jobs, from their
    statistics files (results/stats/score_shard/*.json)."""
    import json

    seen = []
    for path in sorted(Path("results/stats/score_shard").glob("*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        text = f"{rec.get('backend')} ({rec.get('reason')})"
        if text not in seen:
            seen.append(text)
    return seen
