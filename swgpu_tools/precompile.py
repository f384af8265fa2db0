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
    lines = []
    t = time.perf_counter()
    from .kernels import cpu

    if hasattr(cpu, "precompile"):
        cpu.precompile()
    else:  # compile by use: a tiny search
        _tiny_cpu_search()
    lines.append(f"CPU search kernels ready in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    from . import align as alignment

    if hasattr(alignment, "precompile"):
        alignment.precompile()
    else:
        _tiny_alignments()
    lines.append(f"CPU alignment kernels ready in {time.perf_counter() - t:.1f} s")
    if gpu:
        from .kernels import gpu as gpu_kernels

        done = gpu_kernels.precompile(jobs=jobs)
        lines.append(f"compiled {done['kernels']} GPU kernels in {done['seconds']:.1f} s with "
                     f"{done['jobs']} processes ({done['failed_children']} failed)")
    return lines


def _tiny_sets():
    from .scoring import ScoringScheme
    from .sequences import SequenceSet

    scheme = ScoringScheme()
    seqs = SequenceSet.from_sequences(["a", "b"], [b"MKTAYIAKQRQISFVKSHFSRQ", b"MKTAHIAKQRQ"])
    return scheme, scheme.encode(seqs)


def _tiny_cpu_search() -> None:
    from .kernels import cpu

    scheme, enc = _tiny_sets()
    cpu.search(enc, enc, scheme.matrix, scheme.gap_open, scheme.gap_extend, 1)


def _tiny_alignments() -> None:
    import numpy as np

    from .align import align_many

    scheme, enc = _tiny_sets()
    idx = np.array([0, 1], dtype=np.int64)
    for mode in ("local", "global", "semiglobal"):
        align_many(enc, enc, idx, idx[::-1].copy(), scheme.matrix, scheme.gap_open,
                   scheme.gap_extend, mode=mode, backend="cpu")
