"""Compiling every kernel into the disk cache ahead of a run (``swgpu backend --precompile``).

A first run on a machine compiles the Numba kernels it needs (seconds to a
minute); they are cached under :func:`swgpu_tools.cache.cache_dir`, once per
machine kind.  :func:`precompile_all` does it up front: the CPU search and
alignment kernels, and the GPU kernels when a GPU is usable.
"""

from __future__ import annotations

import time

from .logs import get_logger

log = get_logger(__name__)


def precompile_all(gpu: bool, jobs: int | None = None) -> list[str]:
    """Compile the CPU kernels and, with ``gpu``, the GPU kernels; one line per part."""
    from .alignment.warmup import precompile as precompile_align
    from .engine import rescan_lists
    from .kernels import cpu, topk

    lines = []
    t = time.perf_counter()
    cpu.precompile()
    rescan_lists.precompile()  # a re-scan's merge of kept and new hits
    topk.precompile()  # the best hits of a GPU search's score blocks, on the host
    lines.append(f"CPU search kernels ready in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    precompile_align()
    lines.append(f"CPU alignment kernels ready in {time.perf_counter() - t:.1f} s")
    if gpu:
        from .kernels import gpu as gpu_kernels

        done = gpu_kernels.precompile(jobs=jobs)
        lines.append(
            f"compiled {done['kernels']} GPU kernels in {done['seconds']:.1f} s with "
            f"{done['jobs']} processes ({done['failed_children']} failed)"
        )
    return lines
