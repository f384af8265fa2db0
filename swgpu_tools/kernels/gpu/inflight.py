"""One unit of queries in flight in a slot: its start and its top hits.

A unit is one query or a chain of several (:mod:`.chains`).  :func:`start` queues
its scan into a :class:`~.slots.QuerySlot` (the partition kernels on the slot's
scan streams), then each member's score histogram and overflow list, and one copy of
all the histograms to the host; it does not wait.  :func:`rescore` waits for them and
re-scores with 32-bit kernels the pairs whose packed score may have overflowed;
:func:`select` chooses each member's top k on the GPU (a threshold from its histogram,
then a compaction of the scores at or above it) and brings them back in one copy.
So a unit costs two host round trips whatever its number of members.
"""

from __future__ import annotations

import numpy as np

from ..gpu_intrinsics import SIM
from .codegen import HIST_BINS


def _grid(n: int) -> tuple[int, int]:
    return (min(1024, -(-n // 256)), 256) if not SIM else (1, 32)


def start(s, rows, queries: list, tables, slot) -> None:
    """Queue the scan of a unit into ``slot``: ``rows`` (row offsets on the GPU or None,
    rows, member starts on the GPU or None for one query), ``queries`` (each member's
    original codes); then the members' histograms and their copy to the host."""
    d_qoff, T, d_mstart = rows
    m = len(queries)
    slot.reserve(m)
    slot.queries = [(q, len(q)) for q in queries]
    slot.hists = [None] * m
    n = s.n
    if n == 0:
        return
    st = slot.stream
    mode = s.mode
    if T == 0:  # one query with no residues: every score is 0
        s._fill(slot.member(0, n)[0], n, 0, st)
    else:
        table = tables[mode]
        if d_qoff is None:
            d_qoff = s._qoff(queries[0], table, st)
        chain = None if d_mstart is None else (d_mstart, m)
        slot.after(s._launch(mode, s.plan(mode, T), d_qoff, T, table, slot, chain=chain))
    histograms(s, slot, m, s.overflow_limit)


def histograms(s, slot, m: int, limit: int) -> None:
    """Queue the score histograms of ``slot``'s ``m`` members, each with the list of
    subjects scored at or above ``limit`` (may have overflowed), and their copy to the
    host, on the slot's stream."""
    n, st = s.n, slot.stream
    h = HIST_BINS + 1
    s._fill(slot.d_aux, m * h, 0, st)
    grid, block = _grid(n)
    for j in range(m):
        d_scores, d_ovf, d_aux = slot.member(j, n)
        s.aux.hist_kernel[grid, block, st](d_scores, n, d_aux, limit, d_ovf)
    slot.d_aux[: m * h].copy_to_host(slot.h_aux[: m * h], stream=st)


def rescore(s, slot, tables) -> int:
    """Wait for ``slot``'s histograms; re-score with 32-bit kernels (on the slot's stream)
    each member's pairs that may have overflowed the packed kernel's range; returns how
    many.  Their scores stay in the last bin of the histogram."""
    if s.n == 0:
        return 0
    slot.synchronize()
    h = HIST_BINS + 1
    total = 0
    for j, (q, L) in enumerate(slot.queries):
        aux = slot.h_aux[j * h : (j + 1) * h]
        novf = int(aux[HIST_BINS])
        slot.hists[j] = aux[:HIST_BINS].astype(np.int64)
        if novf == 0 or L == 0:
            continue
        st = slot.stream
        d_scores, d_ovf, _ = slot.member(j, s.n)
        flagged = d_ovf[:novf].copy_to_host(stream=st)
        slot.synchronize()
        t32 = tables.get("s32")
        if t32 is None:
            t32 = tables["s32"] = s._table("s32", tables["letters"])
        parts = s.plan("s32", L, subset=flagged)
        s._launch("s32", parts, s._qoff(q, t32, st), L, t32, slot, streams=[st], scores=d_scores)
        total += novf
    return total


def select(s, slot, top_k) -> list:
    """(subject indices, scores) of each member's best ``top_k`` in ``slot``, tie-broken
    (score descending, then subject index); after :func:`rescore`."""
    n = s.n
    m = len(slot.queries)
    k = min(int(top_k), n)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int32))
    if k <= 0 or any(hist is None for hist in slot.hists):
        return [empty] * m
    thr, need = [], []
    for hist in slot.hists:
        ge = np.cumsum(hist[::-1])[::-1]  # ge[b] = count of scores with bin >= b
        t = int(np.flatnonzero(ge >= k).max()) if (ge >= k).any() else 0
        thr.append(t)
        need.append(int(ge[t]))
    d_sel, h_sel = slot.sel_buffers(max(1024, 4 * k, max(need)), m)
    cap = slot.sel_cap
    w = 1 + 2 * cap
    st = slot.stream
    s._fill(d_sel, m * w, 0, st)
    grid, block = _grid(n)
    for j in range(m):
        d_scores = slot.member(j, n)[0]
        s.aux.select_kernel[grid, block, st](d_scores, n, thr[j], d_sel[j * w : (j + 1) * w], cap)
    d_sel[: m * w].copy_to_host(h_sel[: m * w], stream=st)
    slot.synchronize()
    out = []
    for j in range(m):
        base = j * w
        cnt = int(h_sel[base])
        assert cnt == need[j], (cnt, need[j])
        idx = h_sel[base + 1 : base + 1 + cnt].astype(np.int64)
        sc = h_sel[base + 1 + cap : base + 1 + cap + cnt].copy()
        order = np.lexsort((idx, -sc.astype(np.int64)))[:k]
        out.append((idx[order], sc[order]))
    return out
