"""Many queries per launch against a small subject set (a re-scan's delta, a small database).

:meth:`.searcher.GpuSearcher.search` scores one query at a time: each query
has its own partition launches, score histogram and top-k round trip, a fixed
cost of a few milliseconds that a large database hides and a small one does
not (a re-scan's 1,663 new and changed sequences x 2,000 queries took 9.1 s,
74 GCUPS; RESULTS-workflow.md, run F4b).  Here the queries are sorted by
length and cut into a few blocks; one launch per partition scores a whole
block, up to :data:`MAX_QUERIES` queries (the batched kernels of
``templates/score_kernel.py.in``: warp task ``wt`` serves query ``wt % n_q``);
each row's top k (of each segment of subjects: a re-scan's shards) are chosen
with the same tie rule (score descending, then subject index): on the GPU where
every segment has at most :data:`~.codegen.TOPK_CAP` subjects
(``segment_topk_kernel`` of ``templates/aux_kernels.py.in``: only the chosen
hits come back), else on the host from the whole score block
(:func:`..topk.top_rows`).  Pairs whose packed (s16, h16) score may have
overflowed are re-scored with the 32-bit kernels, as in the one-query path.  Two
blocks are in flight: the host takes one block's hits while the GPU scores the
next.
"""

from __future__ import annotations

import os
import time

import numpy as np

from .. import gpu_chooses_hits
from ..gpu_intrinsics import SIM
from ..topk import segment_places, top_rows
from . import cache, chains, qp2_blocks
from .codegen import PAIRED_MODES, TOPK_CAP

#: Largest subject count scored in batches under 'auto' (the score block of a
#: launch is queries x subjects).
MAX_SUBJECTS = 1 << 17
#: Under 'auto', batches are used while one unit's scan in the one-unit-at-a-time
#: path is this small: subject residues x the unit's rows (:func:`.chains.unit_rows`:
#: a chain of short queries, or one query).  Measured on an H100 (RESULTS-gpu.md,
#: run 145): uniprot20k (9.1 M residues, 3.7e10 cells per chain) batched 1.2x faster
#: than chains; a 50 M-residue shard (2.0e11) chains 1.23x faster than batches, both
#: for the 500 UniProt queries and for 144-aa ones.  The bound lies between
#: (about the geometric mean; not measured there).
MAX_CELLS_PER_UNIT = 8e10
#: Queries per launch: at most this many, and the score block at most
#: :data:`SCORE_WORDS` int32 words.
MAX_QUERIES = 4096
SCORE_WORDS = 1 << 25
#: Blocks a search is cut into (at least :data:`MIN_BLOCK` queries each).
BLOCKS = 4
MIN_BLOCK = 64
#: Threads per block of ``segment_topk_kernel`` (the simulator runs each as a thread).
TOPK_THREADS = 32 if SIM else 256


def topk_on_gpu(segments: np.ndarray, k: int) -> bool:
    """Whether the GPU chooses each row's best ``k`` of each segment (``segments``: start
    columns, then the subject count): every segment at most :data:`~.codegen.TOPK_CAP`
    subjects, and :func:`~swgpu_tools.kernels.gpu_chooses_hits`."""
    if not gpu_chooses_hits() or k <= 0 or len(segments) < 2:
        return False
    return int(np.diff(segments).max()) <= TOPK_CAP


def use_batches(searcher, qlens) -> bool:
    """Whether ``searcher`` scores these queries in batches: its ``batch`` (True or
    False), else ``$SWGPU_BATCH`` ('0' or '1'), else by size (resident database
    of at most :data:`MAX_SUBJECTS` subjects whose scan per unit of the
    one-unit-at-a-time path is at most :data:`MAX_CELLS_PER_UNIT` cells)."""
    if searcher.n == 0 or len(qlens) == 0 or searcher._stream is not None:
        return False
    choice = searcher.batch
    if choice == "auto":
        env = os.environ.get("SWGPU_BATCH", "")
        choice = {"0": False, "1": True}.get(env, "auto")
    if choice != "auto":
        return bool(choice)
    if searcher.record is not None:  # per-partition profiling: the one-query path
        return False
    cells = searcher.total_residues * chains.unit_rows(float(np.mean(qlens)))
    return searcher.n <= MAX_SUBJECTS and cells <= MAX_CELLS_PER_UNIT


def _chunks(searcher, qlens) -> list:
    """(plan length, query indices) per launch block: the queries sorted by length,
    longest first, cut into about :data:`BLOCKS` blocks (so that the host's top-k of
    one overlaps the GPU's next), each planned for its median length (a plan is
    exact for any query length; the length only steers the shapes), at most the
    capacity (:data:`MAX_QUERIES`, :data:`SCORE_WORDS`) each.  One block per plan
    bucket instead was slower (RESULTS-gpu.md, run 20: 26 blocks, 0.42 s against
    0.33 s for 2,000 queries x 1,663 subjects)."""
    cap = max(1, min(MAX_QUERIES, SCORE_WORDS // max(searcher.n, 1)))
    live = np.flatnonzero(qlens > 0)
    live = live[np.argsort(-qlens[live], kind="stable")]
    size = min(cap, max(MIN_BLOCK, -(-len(live) // BLOCKS)))
    out = []
    for i in range(0, len(live), size):
        members = live[i : i + size]
        out.append((searcher._lrep(int(np.median(qlens[members]))), members))
    return out


def _whole(searcher, qlens) -> list:
    """(None, query indices) per launch of the qp2 blocks path: the queries with residues
    in as few launches as the score block allows (a launch's tiles balance among its
    blocks: one launch for everything is best)."""
    cap = max(1, SCORE_WORDS // max(searcher.n, 1))
    live = np.flatnonzero(qlens > 0)
    return [(None, live[i : i + cap]) for i in range(0, len(live), cap)]


def _rescored(searcher, rows, cols, members, qcodes, qoffs, tables, slot) -> np.ndarray:
    """The 32-bit scores of the pairs (row ``rows[i]`` of the block, its query
    ``members[rows[i]]``; subject ``cols[i]``)."""
    out = np.empty(len(rows), np.int32)
    t32 = tables.get("s32")
    if t32 is None:
        t32 = tables["s32"] = searcher._table("s32", tables["letters"])
    d_scores = slot.member(0, searcher.n)[0]  # the re-scores' row (the slot may hold more)
    for r in np.unique(rows).tolist():
        qi = int(members[r])
        q = qcodes[qoffs[qi] : qoffs[qi + 1]]
        mine = rows == r
        sub = cols[mine]
        parts = searcher.plan("s32", len(q), subset=sub)
        st = slot.stream
        searcher._launch(
            "s32",
            parts,
            searcher._qoff(q, t32, st),
            len(q),
            t32,
            slot,
            streams=[st],
            scores=d_scores,
        )
        slot.synchronize()
        out[mine] = d_scores.copy_to_host()[sub]
    return out


def _rescore_packed(searcher, block, members, qcodes, qoffs, tables, slot, limit=None) -> int:
    """Re-score with 32-bit kernels the pairs of ``block`` (rows: ``members``) whose
    packed (s16 or h16) score may have overflowed (at or above ``limit``, by default the
    searcher's); returns how many."""
    limit = searcher.overflow_limit if limit is None else limit
    rows, cols = np.nonzero(block >= limit)
    if len(rows):
        block[rows, cols] = _rescored(searcher, rows, cols, members, qcodes, qoffs, tables, slot)
    return len(rows)


def _rescore_chosen(searcher, cols, vals, k, segs, offs, d_block, members, *rest, limit=None):
    """The GPU's choice (``cols``, ``vals``: a row per member, each segment's best at
    ``offs``) with the pairs whose packed score may have overflowed re-scored in 32
    bits; returns how many.  Such a pair's exact score is at least the limit, and
    every other pair's is below it, so each segment's chosen set holds them all and
    stays right; only their order is made again.  Unless a segment's every chosen
    pair overflowed and some were left out: that row is chosen again on the host
    from its whole row of scores (``d_block``, still on the GPU), re-scored."""
    limit = searcher.overflow_limit if limit is None else limit
    n = searcher.n
    over = vals >= limit
    if not over.any():
        return 0
    kk = np.diff(offs)
    full = kk > 0
    ran_out = ((vals[:, offs[1:][full] - 1] >= limit) & (np.diff(segs)[full] > kk[full])).any(1)
    count = 0
    for r in np.flatnonzero(ran_out).tolist():
        row = d_block[r * n : (r + 1) * n].copy_to_host().reshape(1, n)
        count += _rescore_packed(searcher, row, members[r : r + 1], *rest, limit=limit)
        _, c, v = top_rows(row, k, segs)
        cols[r], vals[r] = c, v
    rows, idx = np.nonzero(over & ~ran_out[:, None])
    if not len(rows):
        return count
    vals[rows, idx] = _rescored(searcher, rows, cols[rows, idx], members, *rest)
    g = np.searchsorted(offs, idx, side="right") - 1  # each pair's segment
    for r, gg in sorted(set(zip(rows.tolist(), g.tolist()))):
        a, b = offs[gg], offs[gg + 1]
        o = np.lexsort((cols[r, a:b], -vals[r, a:b].astype(np.int64)))
        cols[r, a:b], vals[r, a:b] = cols[r, a:b][o], vals[r, a:b][o]
    return count + len(rows)


def search(searcher, qcodes, qoffs, top_k, progress=None, segments=None):
    """Top ``top_k`` hits of each query, many queries per launch (see the module);
    with ``segments`` (start subject of each segment, and the subject count), the
    top ``top_k`` of each segment, by segment (as :func:`..topk.top_rows` gives them)."""
    from numba import cuda

    from .. import TopHits

    s = searcher
    n, mode = s.n, s.mode
    nq = len(qoffs) - 1
    qlens = np.diff(qoffs)
    tables = s._query_tables(qcodes)
    # two queries a register, a tile a block (qp2_blocks.py), or the batched kernels
    packed = qp2_blocks.wanted(s, qlens)
    s.batch_path = "qp2 blocks" if packed else "batched"
    limit = qp2_blocks.limit(s) if packed else s.overflow_limit
    table = tables[mode]
    if packed:
        chunks = _whole(s, qlens)
    else:
        s._compile_ahead(qlens, batched=True)
        d_qoffs, qstarts = s._qoffs_all(qcodes, qoffs, table)
        chunks = _chunks(s, qlens)
    k = min(int(top_k), n)
    segs = np.asarray([0, n] if segments is None else segments, dtype=np.int64)
    cap = max((len(m) for _, m in chunks), default=1)
    d_out = [cuda.device_array(cap * n, dtype=np.int32) for _ in range(2)]
    on_gpu = topk_on_gpu(segs, k)
    offs = segment_places(segs, k)
    per_row = int(offs[-1])  # hits a row gives
    # what comes back per block: the GPU's choice (columns, scores), or every score
    width = per_row if on_gpu else n
    d_back = [
        [cuda.device_array(cap * width, dtype=np.int32) for _ in range(2)] if on_gpu else [d]
        for d in d_out
    ]
    h_back = [
        [
            np.zeros(cap * width, np.int32)
            if SIM
            else cuda.pinned_array(cap * width, dtype=np.int32)
            for _ in d
        ]
        for d in d_back
    ]
    if on_gpu:
        d_segs, d_offs = cuda.to_device(segs), cuda.to_device(offs)
        topk_kernel = cache.aux().segment_topk_kernel
    # every query gets per_row hits: a row each, in query order
    hit_cols = np.empty((nq, per_row), np.int32)
    hit_vals = np.empty((nq, per_row), np.int32)
    empty = np.flatnonzero(qlens == 0)  # no residues: every score is 0
    hit_cols[empty] = np.concatenate(
        [np.arange(a, min(a + k, b)) for a, b in zip(segs[:-1], segs[1:])]
    )
    hit_vals[empty] = 0
    done = nq - sum(len(m) for _, m in chunks)
    tq = np.zeros(nq)
    t_scan = t_last = time.perf_counter()
    s.plan_seconds = 0.0
    s.rescored = 0
    s.batch_seconds = {"wait": 0.0, "host": 0.0, "launch": 0.0, "blocks": len(chunks)}
    s.topk_on_gpu = on_gpu
    kernel_marks: list = []  # (start, end) events of the qp2 blocks kernels

    def finish(slot, j, members):
        nonlocal done, t_last
        t0 = time.perf_counter()
        slot.synchronize(scans=True)
        t1 = time.perf_counter()
        m = len(members)
        if on_gpu:
            cols = h_back[j][0][: m * per_row].reshape(m, per_row).astype(np.int64)
            vals = h_back[j][1][: m * per_row].reshape(m, per_row).copy()
            if mode in PAIRED_MODES:
                s.rescored += _rescore_chosen(
                    s,
                    cols,
                    vals,
                    k,
                    segs,
                    offs,
                    d_out[j],
                    members,
                    qcodes,
                    qoffs,
                    tables,
                    slot,
                    limit=limit,
                )
        else:
            block = h_back[j][0][: m * n].reshape(m, n).copy()
            if mode in PAIRED_MODES:
                s.rescored += _rescore_packed(
                    s, block, members, qcodes, qoffs, tables, slot, limit=limit
                )
            _, cols, vals = top_rows(block, k, segs)
        hit_cols[members] = cols.reshape(m, per_row)
        hit_vals[members] = vals.reshape(m, per_row)
        s.batch_seconds["wait"] += t1 - t0
        s.batch_seconds["host"] += time.perf_counter() - t1
        now = time.perf_counter()
        w = qlens[members].astype(np.float64)
        tq[members] += (now - t_last) * w / w.sum()
        t_last = now
        done += len(members)
        if progress is not None:
            progress(done, nq)

    pending = None
    for ci, (r, members) in enumerate(chunks):
        j = ci % 2
        slot = s._slot(j)
        st = slot.stream
        m = len(members)
        if packed:
            t_launch = time.perf_counter()
            sub = [qcodes[qoffs[q] : qoffs[q + 1]] for q in members.tolist()]
            marks = [] if SIM else [cuda.event(), cuda.event()]  # the kernel's GPU time
            if marks:
                marks[0].record(st)
            s.qp2_blocks_plan = qp2_blocks.launch(s, sub, d_out[j], st)
            if marks:
                marks[1].record(st)
                kernel_marks.append(marks)
        else:
            t0 = time.perf_counter()
            parts = s.plan(mode, r, batched=True)
            s.plan_seconds += time.perf_counter() - t0
            t_launch = time.perf_counter()
            d_qbase = cuda.to_device(qstarts[members].astype(np.int32), stream=st)
            d_qlens = cuda.to_device(qlens[members].astype(np.int32), stream=st)
            if not SIM:
                st.synchronize()  # the scan streams read them
            used = s._launch(
                mode,
                parts,
                d_qoffs,
                int(qlens[members].max()),
                table,
                slot,
                batch=(d_qbase, d_qlens, m, d_out[j]),
            )
            slot.after(used)
        if on_gpu:
            dc, dv = d_back[j]
            topk_kernel[m * (len(segs) - 1), TOPK_THREADS, st](
                d_out[j], n, d_segs, d_offs, k, dc, dv
            )
        for d, h in zip(d_back[j], h_back[j]):
            d[: m * width].copy_to_host(h[: m * width], stream=st)
        s.batch_seconds["launch"] += time.perf_counter() - t_launch
        if pending is not None:
            finish(*pending)
        pending = (slot, j, members)
    if pending is not None:
        finish(*pending)
    if kernel_marks:
        s.batch_seconds["kernel"] = sum(a.elapsed_time(b) for a, b in kernel_marks) / 1e3
    s.scan_seconds = time.perf_counter() - t_scan
    s.timings = [(qi, int(qlens[qi]), float(tq[qi])) for qi in range(nq)]
    return TopHits(
        np.repeat(np.arange(nq, dtype=np.int32), per_row),
        hit_cols.reshape(-1),
        hit_vals.reshape(-1),
    )
