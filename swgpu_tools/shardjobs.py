"""Which shards each scoring job scores: a job is a run of consecutive shards.

A job's name is its shards' numbers, ``"0002"`` for one shard and
``"0000-0003"`` for shards 0 to 3; the job's hit table and statistics are named
after it (``results/hits/shard-<name>.npz``).  One process scoring several
shards pays the start-up (process, CUDA context, kernels) once, and reads the
next shard while the current one is scored.

The names carry the shards, so any process (a cluster job, the health check,
the report) knows a job's shards from its name alone.
"""

from __future__ import annotations

import math
import re

_NAME = re.compile(r"(\d{4,})(?:-(\d{4,}))?")


def job_name(first: int, last: int) -> str:
    """``"NNNN"`` for one shard, ``"NNNN-MMMM"`` for shards ``first``..``last``."""
    return f"{first:04d}" if first == last else f"{first:04d}-{last:04d}"


def job_shards(name: str) -> list[int]:
    """The shard numbers of job ``name``; ValueError for a name that is not one."""
    m = _NAME.fullmatch(str(name))
    if not m:
        raise ValueError(f"not a scoring job name: {name!r} (NNNN or NNNN-MMMM)")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) else first
    if last < first:
        raise ValueError(f"not a scoring job name: {name!r} (its last shard comes first)")
    return list(range(first, last + 1))


def plan_jobs(n_shards: int, per_job: int) -> list[str]:
    """Names of the jobs that score ``n_shards`` shards, ``per_job`` shards each
    (the last job may hold fewer)."""
    if n_shards < 1 or per_job < 1:
        raise ValueError(f"need shards and shards per job >= 1, got {n_shards}, {per_job}")
    return [job_name(a, min(a + per_job, n_shards) - 1) for a in range(0, n_shards, per_job)]


def auto_per_job(n_shards: int, slots: int | None) -> int:
    """Shards per job when the configuration leaves it to swgpu: the shards spread
    evenly over ``slots`` scoring jobs that can run at once (GPUs, or CPU jobs
    that fit the cores); one shard per job where that number is not known
    (``None``, e.g. a cluster whose GPUs the submitting host cannot see)."""
    if not slots or slots < 1:
        return 1
    return max(1, math.ceil(n_shards / slots))
