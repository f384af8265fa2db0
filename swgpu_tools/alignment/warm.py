"""Compiling the alignment kernels once per machine: cache state, notices, precompile.

The alignment code is Numba functions cached on disk (see
:mod:`swgpu_tools.kernels.jitcache`).  Two kinds of runs use different
entry points: ``"hits"`` (database hits, the workflow's traceback step and
:class:`~swgpu_tools.kernels.cpu.CpuBackend.pair_regions`) and ``"pairs"``
(``swgpu align``: batches of independent pairs, any mode).  Rarely used
paths (int32 lanes, fallbacks, large single regions) compile only when a run
needs them; :func:`.warmup.precompile` compiles them all ahead.
"""

from __future__ import annotations

from ..kernels.jitcache import cache_warm, notice_compiling

KINDS = ("hits", "pairs")


def entry_points(kind: str):
    """The Numba functions a run of ``kind`` calls from Python first."""
    from ..io import fields
    from ..kernels import seqhash
    from . import batch, hits, query_lanes

    if kind == "hits":  # the traceback step: its reuse keys, alignments, table's columns
        return (
            seqhash._hash_chunk,
            query_lanes.fits_int16,
            hits.hits_chunk,
            batch.traceback_chunk,
            fields._consumed,
            fields._cigar_kernel,
            fields._columns_kernel,
        )
    if kind == "pairs":
        return (batch.locate_chunk_pairs, batch.traceback_chunk)
    raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")


def is_compiled(kind: str = "hits") -> bool:
    """Whether the alignment kernels of ``kind`` load from the disk cache (compiles nothing)."""
    return cache_warm(entry_points(kind))


_waited: set[str] = set()
#: Seconds this process waited for a background compile, by kind (its statistics).
waited_s: dict[str, float] = {}


def notice(kind: str) -> bool:
    """Log once per process that the kernels of ``kind`` are compiling, if the cache is
    cold; first, once per process, wait for a background compile of them
    (:mod:`.background`, started by the warm process of a first run)."""
    if kind == "hits" and kind not in _waited:
        _waited.add(kind)
        if not is_compiled(kind):
            from .background import wait

            waited_s[kind] = round(wait(kind), 3)
    what = {"hits": "database hits", "pairs": "pairs"}[kind]
    return notice_compiling(f"CPU alignment kernels for {what}", entry_points(kind))
