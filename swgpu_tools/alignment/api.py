"""The alignment entry points: one pair (:func:`align`), many pairs (:func:`align_many`,
:func:`align_pairs`).

Every entry point takes the scoring as a :class:`~swgpu_tools.scoring.ScoringScheme`
(``align_many(queries, database, qi, si, scheme)``) or, as before, as a
matrix and two gap costs (checked once, :func:`.params.kernel_scoring`).
"""

from __future__ import annotations

import time

import numpy as np

from ..sequences import EncodedSequences
from .batch import align_batch
from .cost import batch_backend, mark_gpu_used
from .modes import MODE_GLOBAL, MODE_LOCAL, Alignment, mode_code
from .pair_lanes import PAIR_LANES_DEFAULT
from .params import check_range, kernel_scoring
from .scalar import locate
from .traceback import TRACEBACK_CELL_LIMIT, traceback
from .warm import notice


def results(info: np.ndarray, parts) -> list[Alignment]:
    """The Alignment objects of a batch (info and parts of :func:`.batch.align_batch`)."""
    source = np.zeros(info.shape[0], dtype=np.int64)
    for p, (_, _, mask) in enumerate(parts):
        source[mask] = p
    out = []
    for k, p in enumerate(source.tolist()):
        score, qs, qe, ss, se, count = (int(x) for x in info[k])
        if count < 0:
            raise AssertionError(f"traceback of pair {k} did not reproduce score {score}")
        ops, room = parts[p][0], parts[p][1]
        out.append(
            Alignment(score, qs, qe, ss, se, ops[room[k + 1] - count : room[k + 1]].tobytes())
        )
    return out


def align(
    query_codes: np.ndarray,
    subject_codes: np.ndarray,
    matrix,
    gap_open: int | None = None,
    gap_extend: int | None = None,
    *,
    mode: str = "local",
    cell_limit: int = TRACEBACK_CELL_LIMIT,
) -> Alignment:
    """Best alignment of two code arrays (uint8 matrix codes) in ``mode``.

    matrix: a ScoringScheme, or a square int matrix with ``gap_open`` and
    ``gap_extend``.  mode: ``"local"`` (Smith-Waterman), ``"global"``
    (Needleman-Wunsch) or ``"semiglobal"`` (the whole query against any part
    of the subject, as SSEARCH's glsearch).  Tie rules: see
    :mod:`swgpu_tools.alignment`.  cell_limit: direction bytes kept at once
    before rows are recomputed from checkpoints.
    """
    code = mode_code(mode)
    matrix, gap_open, gap_extend = kernel_scoring(matrix, gap_open, gap_extend)
    q = np.ascontiguousarray(query_codes, dtype=np.uint8)
    s = np.ascontiguousarray(subject_codes, dtype=np.uint8)
    check_range(len(q) + len(s), matrix, gap_open, gap_extend)
    best, qs, qe, ss, se = locate(q, s, matrix, gap_open, gap_extend, code)
    if code == MODE_LOCAL and best <= 0:
        return Alignment(0, 0, 0, 0, 0, b"")
    ops = np.zeros((qe - qs) + (se - ss), dtype=np.uint8)
    score, count = traceback(
        q[qs:qe], s[ss:se], matrix, gap_open, gap_extend, max(1, int(cell_limit)), ops
    )
    if code == MODE_GLOBAL:
        best = score
    elif score != best:
        raise AssertionError(f"traceback score {score} != best {best}")
    return Alignment(
        int(best), int(qs), int(qe), int(ss), int(se), ops[len(ops) - count :].tobytes()
    )


def align_local(
    query_codes: np.ndarray,
    subject_codes: np.ndarray,
    matrix,
    gap_open: int | None = None,
    gap_extend: int | None = None,
    *,
    cell_limit: int = TRACEBACK_CELL_LIMIT,
) -> Alignment:
    """Best local alignment of two code arrays (uint8 matrix codes); see :func:`align`."""
    return align(
        query_codes,
        subject_codes,
        matrix,
        gap_open,
        gap_extend,
        mode="local",
        cell_limit=cell_limit,
    )


def align_many(
    queries,
    database,
    query_index,
    subject_index,
    matrix,
    gap_open: int | None = None,
    gap_extend: int | None = None,
    threads: int | None = None,
    *,
    cell_limit: int | None = None,
    mode: str = "local",
    ends=None,
    pair_lanes: bool | None = None,
    backend: str = "auto",
    stats: dict | None = None,
    scores=None,
) -> list[Alignment]:
    """Align the pairs (queries[query_index[k]], database[subject_index[k]]) in parallel.

    queries, database: :class:`~swgpu_tools.sequences.EncodedSequences`.
    matrix: a ScoringScheme, or a square int matrix with ``gap_open`` and
    ``gap_extend``.
    threads: Numba threads to use (default: the current setting).
    cell_limit: traceback bytes per alignment before checkpointing (default
    :data:`TRACEBACK_CELL_LIMIT` divided among the threads).
    mode, ends, pair_lanes, backend, stats: as in :func:`align_pairs`.
    scores: each pair's best local score where known (a database search's, as
    the traceback step has them), or None.  Database hits (local mode, several
    pairs per query, CPU) then find their end cells with less work; the
    alignments are the same, and a score that is not the pair's best only costs
    the time of the pass without it.
    Returns one :class:`Alignment` per pair, in input order.
    """
    return align_arrays(
        queries.codes,
        queries.offsets,
        database.codes,
        database.offsets,
        query_index,
        subject_index,
        matrix,
        gap_open,
        gap_extend,
        threads,
        cell_limit,
        mode,
        ends,
        pair_lanes,
        backend,
        stats,
        scores,
    )


def align_pairs(
    pairs,
    matrix,
    gap_open: int | None = None,
    gap_extend: int | None = None,
    threads: int | None = None,
    *,
    cell_limit: int | None = None,
    mode: str = "local",
    ends=None,
    pair_lanes: bool | None = None,
    backend: str = "auto",
    stats: dict | None = None,
) -> list[Alignment]:
    """Align ``(query_codes, subject_codes)`` pairs in parallel (see :func:`align_many`).

    mode: ``"local"``, ``"global"`` or ``"semiglobal"`` (see :func:`align`).

    backend: where the score-only passes (steps 1 and 2 of
    :mod:`swgpu_tools.alignment`: the best score, the end and the start of each
    alignment) run: ``"auto"`` (the GPU when :mod:`swgpu_tools.backend` finds
    one usable, the mode is local or semi-global and the GPU is expected to be
    faster for the batch, start-up included, :func:`.cost.batch_backend`; else
    the CPU), ``"gpu"`` (raises :class:`~swgpu_tools.errors.InputError` when
    no GPU is usable; global mode still runs on the CPU) or ``"cpu"``.  The
    traceback always runs on the CPU threads.  The alignments are the same
    whichever backend runs (see :func:`.cost.pair_backend`).

    ends (the hook for an external forward pass; overrides ``backend``): an
    (n, 3) integer array of (best score, query end, subject end) per pair,
    ends exclusive, as the forward pass would find them (the tie rules of
    :mod:`swgpu_tools.alignment`).  The CPU forward pass is then skipped; the
    reverse pass and the traceback still run here.  Local and semi-global
    modes only (global mode has no forward pass); for semi-global the query
    end is the query length.

    pair_lanes: run the passes PAIR_LANES pairs at a time in SIMD lanes
    (default :data:`.pair_lanes.PAIR_LANES_DEFAULT`); False: scalar passes,
    pair by pair.  Both give the very same alignments.

    stats: a dict that gets ``backend`` ("cpu", "gpu" or "ends"), ``reason``,
    (with ``"auto"``, a batch whose GPU passes fail runs on the CPU and the
    reason says why), and seconds: ``gpu_s`` (GPU score passes with their
    transfers), ``cpu_s`` (everything else) and ``gpu`` (the GPU step's own
    timings).
    """
    pairs = list(pairs)
    qs = [np.ascontiguousarray(p[0], dtype=np.uint8) for p in pairs]
    ss = [np.ascontiguousarray(p[1], dtype=np.uint8) for p in pairs]

    q, s = EncodedSequences.from_codes(qs), EncodedSequences.from_codes(ss)
    idx = np.arange(len(pairs), dtype=np.int64)
    return align_arrays(
        q.codes,
        q.offsets,
        s.codes,
        s.offsets,
        idx,
        idx,
        matrix,
        gap_open,
        gap_extend,
        threads,
        cell_limit,
        mode,
        ends,
        pair_lanes,
        backend,
        stats,
    )


def align_arrays(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    threads,
    cell_limit,
    mode="local",
    ends=None,
    pair_lanes=None,
    backend="auto",
    stats=None,
    scores=None,
) -> list[Alignment]:
    """:func:`align_many` on concatenated codes and offsets (see :mod:`.batch`)."""
    import numba

    t_start = time.perf_counter()
    code = mode_code(mode)
    matrix, gap_open, gap_extend = kernel_scoring(matrix, gap_open, gap_extend)
    qidx = np.ascontiguousarray(qidx, dtype=np.int64)
    sidx = np.ascontiguousarray(sidx, dtype=np.int64)
    qoff = np.ascontiguousarray(qoff, dtype=np.int64)
    soff = np.ascontiguousarray(soff, dtype=np.int64)
    if qidx.shape != sidx.shape:
        raise ValueError("query_index and subject_index must have the same length")
    if len(qidx) == 0:
        return []
    if stats is None:
        stats = {}
    stats["gpu_s"] = 0.0
    choice = None
    if ends is None:
        choice = "to choose"
        ends = np.zeros((0, 3), dtype=np.int64)
    else:
        stats["backend"], stats["reason"] = "ends", "end cells given (ends=...)"
        ends = np.ascontiguousarray(ends, dtype=np.int64)
        if code == MODE_GLOBAL:
            raise ValueError("ends are for local and semi-global modes only")
        if ends.shape != (len(qidx), 3):
            raise ValueError(f"ends must have shape ({len(qidx)}, 3), got {ends.shape}")
    if scores is not None:
        # a writable copy: a read-only array (pandas') would be another Numba type to compile
        scores = np.array(scores, dtype=np.int64)
        if scores.shape != qidx.shape:
            raise ValueError(f"scores must have shape ({len(qidx)},), got {scores.shape}")
    if pair_lanes is None:
        pair_lanes = PAIR_LANES_DEFAULT
    qlen = qoff[qidx + 1] - qoff[qidx]
    slen = soff[sidx + 1] - soff[sidx]
    check_range(int((qlen + slen).max()), matrix, gap_open, gap_extend)
    nthreads = numba.get_num_threads() if threads is None else max(1, int(threads))
    if choice is not None:
        choice = batch_backend(backend, mode, qlen, slen, nthreads)
        stats["backend"], stats["reason"] = choice.name, choice.reason
    if choice is not None and choice.name == "gpu":
        from ..kernels import gpu

        t0 = time.perf_counter()
        stats["gpu"] = {}
        try:
            ends = gpu.pair_regions(
                qcodes,
                qoff,
                scodes,
                soff,
                qidx,
                sidx,
                matrix,
                gap_open,
                gap_extend,
                "local" if code == MODE_LOCAL else "semiglobal",
                timings=stats["gpu"],
            )
        except Exception as exc:  # e.g. no GPU memory left: "auto" falls back to the CPU
            if str(backend).lower() != "auto":
                raise
            stats["backend"] = "cpu"
            stats["reason"] = f"the GPU failed ({type(exc).__name__}: {exc}); the CPU ran the batch"
        else:
            mark_gpu_used()
        stats["gpu_s"] = time.perf_counter() - t0
    if cell_limit is None:
        cell_limit = max(1 << 22, TRACEBACK_CELL_LIMIT // nthreads)
    # query-shared lanes where pairs share queries (database hits), else pair lanes
    query_lanes = len(qidx) >= 4 * len(np.unique(qidx))
    notice("hits" if query_lanes and code == MODE_LOCAL else "pairs")
    info, parts, fallbacks = align_batch(
        np.ascontiguousarray(qcodes, dtype=np.uint8),
        qoff,
        np.ascontiguousarray(scodes, dtype=np.uint8),
        soff,
        qidx,
        sidx,
        matrix,
        gap_open,
        gap_extend,
        max(1, int(cell_limit)),
        nthreads,
        code,
        ends,
        bool(query_lanes),
        bool(pair_lanes),
        scores,
    )
    out = results(info, parts)
    stats["band_fallbacks"] = int(fallbacks.sum())
    stats["cpu_s"] = time.perf_counter() - t_start - stats["gpu_s"]
    return out
