"""How many CPUs this process may use (a basic fact, below every layer that runs threads)."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: all of a workstation,
    ``--cpus-per-task`` under SLURM), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1
