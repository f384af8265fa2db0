"""Many queries per launch against a small subject set (a re-scan's delta, a small database).

:meth:`.searcher.GpuSearcher.search` scores one query at a time: each query
has its own partition launches, score histogram and top-k round trip, a fixed
cost of a few milliseconds that a large database hides and a small one does
not (a re-scan's 1,663 new and changed sequences x 2,000 queries took 9.1 s,
74 GCUPS; RESULTS-workflow.md, run F4b).  Here the queries are sorted by
length and cut into a few blocks; one launch per partition scores a whole
block, up to :data:`MAX_QUERIES` queries (the batched kernels of
``templates/score_kernel.py.in``: warp task ``wt`` serves query ``wt % n_q``);
the whole (queries x subjects) score block comes back to the host, and the
top k of each row are chosen there with the same tie rule (score descending,
then subject index).  Pairs whose packed (s16, h16) score may have overflowed are
re-scored with the 32-bit kernels, as in the one-query path.  Two blocks are
in flight: the host chooses one block's hits while the GPU scores the next.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..gpu_intrinsics import SIM
from ..topk import top_rows
from . import chains
from .codegen import PAIRED_MODES

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


def _rescore_packed(searcher, block, members, qcodes, qoffs, tables, slot) -> int:
    """Re-score with 32-bit kernels the pairs of ``block`` (rows: ``members``) whose
    packed (s16 or h16) score may have overflowed; returns how many."""
    rows, cols = np.nonzero(block >= searcher.overflow_limit)
    if len(rows) == 0:
        return 0
    t32 = tables.get("s32")
    if t32 is None:
        t32 = tables["s32"] = searcher._table("s32", tables["letters"])
    d_scores = slot.member(0, searcher.n)[0]  # the re-scores' row (the slot may hold more)
    for r in np.unique(rows).tolist():
        qi = int(members[r])
        q = qcodes[qoffs[qi] : qoffs[qi + 1]]
        sub = cols[rows == r]
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
        block[r, sub] = d_scores.copy_to_host()[sub]
    return len(rows)


def search(searcher, qcodes, qoffs, top_k, progress=None, segments=None):
    """Top ``top_k`` hits of each query, many queries per launch (see the module);
    with ``segments`` (start subject of each segment, and the subject count), the
    top ``top_k`` of each segment, by segment (:func:`..topk.top_rows`)."""
    from numba import cuda

    from .. import TopHits

    s = searcher
    n, mode = s.n, s.mode
    nq = len(qoffs) - 1
    qlens = np.diff(qoffs)
    tables = s._query_tables(qcodes)
    s._compile_ahead(qlens, batched=True)
    table = tables[mode]
    d_qoffs, qstarts = s._qoffs_all(qcodes, qoffs, table)
    k = min(int(top_k), n)
    segs = np.asarray([0, n] if segments is None else segments, dtype=np.int64)
    chunks = _chunks(s, qlens)
    cap = max((len(m) for _, m in chunks), default=1)
    d_out = [cuda.device_array(cap * n, dtype=np.int32) for _ in range(2)]
    h_out = [
        np.zeros(cap * n, np.int32) if SIM else cuda.pinned_array(cap * n, dtype=np.int32)
        for _ in range(2)
    ]
    hits: list = [None] * nq
    for qi in np.flatnonzero(qlens == 0).tolist():  # no residues: every score is 0
        cols = np.concatenate([np.arange(a, min(a + k, b)) for a, b in zip(segs[:-1], segs[1:])])
        hits[qi] = (cols.astype(np.int64), np.zeros(len(cols), np.int32))
    done = nq - sum(len(m) for _, m in chunks)
    tq = np.zeros(nq)
    t_scan = t_last = time.perf_counter()
    s.plan_seconds = 0.0
    s.rescored = 0
    s.batch_seconds = {"wait": 0.0, "host": 0.0, "launch": 0.0, "blocks": len(chunks)}

    def finish(slot, buf, members):
        nonlocal done, t_last
        t0 = time.perf_counter()
        slot.synchronize(scans=True)
        t1 = time.perf_counter()
        block = buf[: len(members) * n].reshape(len(members), n).copy()
        if mode in PAIRED_MODES:
            s.rescored += _rescore_packed(s, block, members, qcodes, qoffs, tables, slot)
        _, cols, vals = top_rows(block, k, segs)
        s.batch_seconds["wait"] += t1 - t0
        s.batch_seconds["host"] += time.perf_counter() - t1
        per = len(cols) // max(len(members), 1)  # every row gives as many
        for r, qi in enumerate(members.tolist()):
            hits[qi] = (cols[r * per : (r + 1) * per], vals[r * per : (r + 1) * per])
        now = time.perf_counter()
        w = qlens[members].astype(np.float64)
        tq[members] += (now - t_last) * w / w.sum()
        t_last = now
        done += len(members)
        if progress is not None:
            progress(done, nq)

    pending = None
    for ci, (r, members) in enumerate(chunks):
        slot = s._slot(ci % 2)
        t0 = time.perf_counter()
        parts = s.plan(mode, r, batched=True)
        s.plan_seconds += time.perf_counter() - t0
        st = slot.stream
        t_launch = time.perf_counter()
        d_qbase = cuda.to_device(qstarts[members].astype(np.int32), stream=st)
        d_qlens = cuda.to_device(qlens[members].astype(np.int32), stream=st)
        if not SIM:
            st.synchronize()  # the scan streams read them
        m = len(members)
        used = s._launch(
            mode,
            parts,
            d_qoffs,
            int(qlens[members].max()),
            table,
            slot,
            batch=(d_qbase, d_qlens, m, d_out[ci % 2]),
        )
        slot.after(used)
        d_out[ci % 2][: m * n].copy_to_host(h_out[ci % 2][: m * n], stream=st)
        s.batch_seconds["launch"] += time.perf_counter() - t_launch
        if pending is not None:
            finish(*pending)
        pending = (slot, h_out[ci % 2], members)
    if pending is not None:
        finish(*pending)
    s.scan_seconds = time.perf_counter() - t_scan
    s.timings = [(qi, int(qlens[qi]), float(tq[qi])) for qi in range(nq)]
    return TopHits.from_per_query(hits)
