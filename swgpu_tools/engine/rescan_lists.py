"""A re-scan's hit lists, all queries at once: each kept query's stored hits that
are still in the shard, merged with its hits among the new and changed
sequences, and cut where they stop being exact (the rules are those of
:mod:`swgpu_tools.engine.increment`).

One compiled pass over every query (Numba, no GIL, queries on all threads)
instead of a Python loop with a sort per query: 2,000 queries of ~1,000 hits
took about 1 s a shard on an H100 host that way.

Order: score descending, then accession ascending, as integers: ``rank[j]``
is subject j's place among the shard's accessions, and a cut-off
(score, accession) becomes (score, ``below``), the number of the shard's
accessions before the cut-off's accession.  A hit ranks above a cut-off when
its score is higher, or equal with ``rank < below``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

prange = range  # numba.prange once the kernel is compiled (see _kernel)

#: Scores and ranks are packed into one int64 sort key: both below 2^31.
_SHIFT = 31
_TOP = (1 << 31) - 1


@dataclass
class Cutoffs:
    """Per kept query: where its stored list stopped being exact, and where its
    delta list did (has_* False: no such cut-off)."""

    has_prev: np.ndarray  # bool
    prev_score: np.ndarray  # int64
    prev_below: np.ndarray  # int64
    has_delta: np.ndarray  # bool
    delta_score: np.ndarray  # int64
    delta_below: np.ndarray  # int64


def _merge_lists(
    pq,
    prev_off,
    prev_sub,
    prev_score,
    prev_to_new,
    rank,
    d_off,
    d_sub,
    d_score,
    has_prev,
    prev_cut_score,
    prev_cut_below,
    has_delta,
    delta_cut_score,
    delta_cut_below,
    keep,
    top_k,
    out_start,
    out_sub,
    out_score,
    out_len,
    out_state,
):  # pragma: no cover - compiled
    n = pq.shape[0]
    for i in prange(n):  # queries in parallel: each writes only its own output
        most = prev_off[pq[i] + 1] - prev_off[pq[i]] + d_off[i + 1] - d_off[i]
        ka = np.empty(most, np.int64)
        kb = np.empty(most, np.int64)
        sa = np.empty(most, np.int64)
        sb = np.empty(most, np.int64)
        km = np.empty(most, np.int64)
        sm = np.empty(most, np.int64)
        # the stored hits still in the shard, and the delta's, as (key, subject)
        na = 0
        for j in range(prev_off[pq[i]], prev_off[pq[i] + 1]):
            s = prev_to_new[prev_sub[j]]
            if s >= 0:
                ka[na] = ((_TOP - np.int64(prev_score[j])) << _SHIFT) | rank[s]
                sa[na] = s
                na += 1
        nb = 0
        for j in range(d_off[i], d_off[i + 1]):
            s = d_sub[j]
            kb[nb] = ((_TOP - np.int64(d_score[j])) << _SHIFT) | rank[s]
            sb[nb] = s
            nb += 1
        # merge (each list is sorted where the shard is sorted by accession; else sort)
        ok = True
        for j in range(1, na):
            if ka[j] < ka[j - 1]:
                ok = False
                break
        for j in range(1, nb):
            if kb[j] < kb[j - 1]:
                ok = False
                break
        m = na + nb
        if ok:
            a = 0
            b = 0
            for j in range(m):
                if b >= nb or (a < na and ka[a] < kb[b]):
                    km[j] = ka[a]
                    sm[j] = sa[a]
                    a += 1
                else:
                    km[j] = kb[b]
                    sm[j] = sb[b]
                    b += 1
        else:
            for j in range(na):
                km[j] = ka[j]
                sm[j] = sa[j]
            for j in range(nb):
                km[na + j] = kb[j]
                sm[na + j] = sb[j]
            order = np.argsort(km[:m])
            sm[:m] = sm[:m][order]
            km[:m] = km[:m][order]
        # the stricter cut-off: the higher score, then the earlier accession
        bound = False
        bs = np.int64(0)
        bb = np.int64(0)
        if has_prev[i]:
            bound, bs, bb = True, prev_cut_score[i], prev_cut_below[i]
        if has_delta[i]:
            ds, db = delta_cut_score[i], delta_cut_below[i]
            if not bound or ds > bs or (ds == bs and db < bb):
                bound, bs, bb = True, ds, db
        exact = m
        if bound:
            exact = 0
            while exact < m:
                sc = _TOP - (km[exact] >> _SHIFT)
                r = km[exact] & ((np.int64(1) << _SHIFT) - 1)
                if sc > bs or (sc == bs and r < bb):
                    exact += 1
                else:
                    break
        complete = (not bound) and m <= keep
        take = min(exact, keep)
        if complete or take >= top_k:
            o = out_start[i]
            for j in range(take):
                out_sub[o + j] = sm[j]
                out_score[o + j] = _TOP - (km[j] >> _SHIFT)
            out_len[i] = take
            out_state[i] = 2 if complete else 1
        else:
            out_len[i] = 0
            out_state[i] = 0  # the margin ran out: score the query against the whole shard


_COMPILED: list = []


def _kernel():
    """:func:`_merge_lists` compiled (Numba is imported on first use: a scoring job
    starts its GPU while it reads, and importing Numba first would delay that)."""
    if not _COMPILED:
        import numba

        globals()["prange"] = numba.prange  # (``range`` until Numba is imported)
        _COMPILED.append(
            numba.njit(cache=True, nogil=True, parallel=True, boundscheck=False)(_merge_lists)
        )
    return _COMPILED[0]


def merge_lists(pq, previous, prev_to_new, rank, d_off, d_sub, d_score, cuts: Cutoffs, keep, top_k):
    """Per kept query i (stored as query ``pq[i]`` of ``previous``; its delta hits
    ``d_sub[d_off[i]:d_off[i+1]]``, best first): (starts, lengths, subjects,
    scores, state), the merged exact lists in CSR form; state 2: complete (the
    list holds every subject of the shard), 1: exact but cut, 0: the margin ran
    out (no list: score the query against the whole shard)."""
    pq = np.ascontiguousarray(pq, dtype=np.int64)
    d_off = np.ascontiguousarray(d_off, dtype=np.int64)
    prev_off = np.ascontiguousarray(previous.hit_offsets, dtype=np.int64)
    n = len(pq)
    cap = np.minimum(prev_off[pq + 1] - prev_off[pq] + np.diff(d_off), keep) if n else np.zeros(0)
    out_start = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(cap[:-1], out=out_start[1:])
    total = int(cap.sum()) if n else 0
    out_sub = np.empty(total, dtype=np.int64)
    out_score = np.empty(total, dtype=np.int64)
    out_len = np.zeros(n, dtype=np.int64)
    out_state = np.zeros(n, dtype=np.int8)
    if n:
        if len(rank) >= 1 << _SHIFT:
            raise ValueError("a shard of 2^31 sequences or more")
        _kernel()(
            pq,
            prev_off,
            np.ascontiguousarray(previous.hit_subjects, dtype=np.int64),
            np.ascontiguousarray(previous.hit_scores, dtype=np.int64),
            np.ascontiguousarray(prev_to_new, dtype=np.int64),
            np.ascontiguousarray(rank, dtype=np.int64),
            d_off,
            np.ascontiguousarray(d_sub, dtype=np.int64),
            np.ascontiguousarray(d_score, dtype=np.int64),
            np.ascontiguousarray(cuts.has_prev, dtype=np.bool_),
            np.ascontiguousarray(cuts.prev_score, dtype=np.int64),
            np.ascontiguousarray(cuts.prev_below, dtype=np.int64),
            np.ascontiguousarray(cuts.has_delta, dtype=np.bool_),
            np.ascontiguousarray(cuts.delta_score, dtype=np.int64),
            np.ascontiguousarray(cuts.delta_below, dtype=np.int64),
            int(keep),
            int(top_k),
            out_start,
            out_sub,
            out_score,
            out_len,
            out_state,
        )
    return out_start, out_len, out_sub, out_score, out_state


def entry_points():
    """The Numba functions of this module (for the precompile)."""
    return (_kernel(),)


def precompile() -> None:
    """Compile (or load from the disk cache) :func:`_merge_lists`, on a tiny case."""

    class _Previous:
        hit_offsets = np.array([0, 1], dtype=np.int64)
        hit_subjects = np.array([0], dtype=np.int64)
        hit_scores = np.array([5], dtype=np.int64)

    no = np.zeros(1, dtype=bool)
    zero = np.zeros(1, dtype=np.int64)
    merge_lists(
        np.zeros(1, np.int64),
        _Previous,
        np.array([0], np.int64),
        np.array([0, 1], np.int64),
        np.array([0, 1], np.int64),
        np.array([1], np.int64),
        np.array([3], np.int64),
        Cutoffs(no, zero, zero, no, zero, zero),
        2,
        1,
    )
