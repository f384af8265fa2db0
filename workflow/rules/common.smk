# Helpers shared by the rules: config access, the shard list, the command-line
# options derived from the config, and the backend (GPU or CPU) decision.
# Functions only; no rules here (snakemake --lint wants them apart).

import os
from pathlib import Path
import shlex
import shutil
import subprocess


# ---------------------------------------------------------------------------
# shards
# ---------------------------------------------------------------------------

#: Shard numbers as they appear in file names: "0000", "0001", ...
SHARD_IDS = [f"{i:04d}" for i in range(config["shards"])]


#: Where corrupt shard files are moved (then rebuilt by shard_db on the next run).
QUARANTINE_DIR = "results/shards/corrupt"


def shard_files():
    """The shard files written by rule shard_db, in shard order."""
    return expand("results/shards/shard-{shard}.swdb", shard=SHARD_IDS)


def shard_file(wildcards):
    """Input of a score_shard job: its shard, through the shard_db checkpoint.

    Going through the checkpoint makes Snakemake re-evaluate the scoring jobs
    once the shards are (re)written, so that a shard whose content (checksum)
    did not change is not scored again (see shard_db.smk).
    """
    checkpoints.shard_db.get()
    return f"results/shards/shard-{wildcards.shard}.swdb"


def shard_hit_tables():
    """The per-shard hit tables written by rule score_shard, in shard order."""
    return expand("results/hits/shard-{shard}.tsv", shard=SHARD_IDS)


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


# ---------------------------------------------------------------------------
# backend: GPU or CPU
# ---------------------------------------------------------------------------
#
# Decided once, when the DAG is built, only to set `resources: gpu=1` on the
# scoring jobs that will use a GPU (so that `--resources gpu=N` and cluster
# executors can count them).  The `swgpu` command itself makes the final
# choice at run time from the same `backend` value:
#
#   backend: cpu   -> never a GPU job.
#   backend: gpu   -> always a GPU job (swgpu fails clearly if none is usable).
#   backend: auto  -> a GPU job when `nvidia-smi -L` lists a GPU on the machine
#                     that builds the DAG and CUDA_VISIBLE_DEVICES does not hide
#                     them all.  This is cheap (no CUDA initialisation inside
#                     Snakemake).  If it is wrong in either direction the
#                     results are the same; only the scheduling differs.
#                     On a cluster the submitting host rarely has a GPU: set
#                     backend: gpu there (profiles/slurm does).


def gpu_visible():
    """True when this machine shows at least one NVIDIA GPU to new processes."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1", "NoDevFiles"):
        return False
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return False
    try:
        listing = subprocess.run(
            [nvidia_smi, "-L"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return listing.returncode == 0 and "GPU" in listing.stdout


def scoring_uses_gpu():
    """Whether score_shard jobs are planned on a GPU (see the comment above)."""
    backend = config["backend"]
    if backend == "auto":
        return gpu_visible()
    return backend == "gpu"


#: GPUs each score_shard job takes: 1 on a GPU, else 0.
SCORE_GPUS = 1 if scoring_uses_gpu() else 0


def scoring_backends_used():
    """The distinct "backend: ..." lines of the scoring logs (what ran where, and why)."""
    seen = []
    for log in sorted(Path("results/logs/score_shard").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "] backend: " in line:
                text = line.split("] backend: ", 1)[1]
                if text not in seen:
                    seen.append(text)
    return seen
