"""Pair lanes: PAIR_LANES independent (query, subject) pairs in the int32 lanes of one register.

For batches of pairs that do not share queries (``swgpu align``): pairs of
similar shapes are aligned 8 at a time in the int32 lanes of one AVX2
register (:func:`.pair_row.make_pair_row_pass`, an LLVM-IR row pass: the substitution
scores gathered per lane, or letters compared for match/mismatch matrices),
for the forward and reverse score passes and for the direction-bit fill of the
traceback; each lane is then traced back on its own.  The lanes compute the
cells of :mod:`.scalar` and :mod:`.traceback` with the same tie rules, so the
alignments are identical (``pair_lanes=False`` runs the scalar code).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cells import NEG, OP_D, OP_I
from .modes import MODE_LOCAL, MODE_SEMIGLOBAL
from .pair_row import (  # noqa: F401  (PAIR_LANES_DEFAULT: re-exported)
    PAD_SCORE,
    PAIR_LANES,
    PAIR_LANES_DEFAULT,
    pair_row_fill,
    pair_row_fill_id,
    pair_row_global,
    pair_row_global_id,
    pair_row_local,
    pair_row_local_id,
)
from .scalar import reverse_start
from .traceback import trace_step


def pair_matrix(matrix, transpose=False):
    """The pair lanes' matrix: (flat int32 array, row stride w, identity flag).

    A match/mismatch matrix (one value on the diagonal, one elsewhere) gives
    (match, mismatch, padding code), w = 1 and True: the lanes compare letters
    instead of gathering scores.  Any other matrix gives the flat matrix with
    one more letter (code na, the padding, scoring PAD_SCORE), w = na + 1
    and False.  The padding code is na in both cases.
    """
    na = matrix.shape[0]
    diag = np.diag(matrix)
    off = matrix[~np.eye(na, dtype=bool)]
    if na >= 2 and np.all(diag == diag[0]) and np.all(off == off[0]):
        return np.array([diag[0], off[0], na], dtype=np.int32), 1, True
    ext = np.full((na + 1, na + 1), PAD_SCORE, dtype=np.int32)
    ext[:na, :na] = matrix.T if transpose else matrix
    return ext.ravel().copy(), na + 1, False


@njit(cache=True, nogil=True, boundscheck=False)
def pl_pack(codes, starts, lens, nl, width, reverse, pad):
    """Lane-interleaved letters: out[k * PAIR_LANES + l] = k-th letter of lane l (or pad)."""
    out = np.full(max(1, width) * PAIR_LANES, pad, dtype=np.uint8)
    for l in range(nl):
        st = starts[l]
        ln = lens[l]
        for k in range(ln):
            out[k * PAIR_LANES + l] = codes[st + ln - 1 - k] if reverse else codes[st + k]
    return out


@njit(cache=True, nogil=True, boundscheck=False)
def pl_rowoff(rows, i, w, rowoff):
    for l in range(PAIR_LANES):
        rowoff[l] = np.int32(rows[(i - 1) * PAIR_LANES + l]) * w


@njit(cache=True, nogil=True, boundscheck=False)
def pl_state(n):
    """Score rows of a pair-lane pass over n columns: H, F ((n + 1) x PAIR_LANES), the
    per-lane best (value, row, column), no direction bits, and the row offsets."""
    L = PAIR_LANES
    H = np.zeros((n + 1) * L, dtype=np.int32)
    F = np.full((n + 1) * L, NEG, dtype=np.int32)
    tb = np.zeros(L, dtype=np.int32)
    ti = np.zeros(L, dtype=np.int32)
    tj = np.zeros(L, dtype=np.int32)
    nobits = np.zeros(0, dtype=np.uint8)
    rowoff = np.empty(L, dtype=np.int32)
    return H, F, tb, ti, tj, nobits, rowoff


@njit(cache=True, nogil=True, boundscheck=False)
def pl_forward(
    qcodes,
    qst,
    qln,
    scodes,
    sst,
    sln,
    nl,
    mf,
    mft,
    w,
    ident,
    pad,
    gap_open,
    gap_extend,
    mode,
    best,
    qe,
    se,
):
    """Forward pass of up to PAIR_LANES pairs: best and end (exclusive) per lane.

    Local: first maximum in column-major order (as :func:`.scalar.forward_end`): the
    pass runs transposed (rows are subject positions, with the transposed
    matrix ``mft``), where that is the first maximum in row-major order.
    Semi-global: best cell of each lane's last row, smallest subject end (as
    :func:`.scalar.forward_end_semi`).
    """
    L = PAIR_LANES
    local = mode == MODE_LOCAL
    m = 0
    n = 0
    for l in range(nl):
        m = max(m, sln[l] if local else qln[l])
        n = max(n, qln[l] if local else sln[l])
    if local:
        rows = pl_pack(scodes, sst, sln, nl, m, False, pad)
        cols = pl_pack(qcodes, qst, qln, nl, n, False, pad)
    else:
        rows = pl_pack(qcodes, qst, qln, nl, m, False, pad)
        cols = pl_pack(scodes, sst, sln, nl, n, False, pad)
    H, F, tb, ti, tj, nobits, rowoff = pl_state(n)
    oe = gap_open + gap_extend
    for l in range(nl):
        best[l] = 0
        qe[l] = 0
        se[l] = 0
    for i in range(1, m + 1):
        pl_rowoff(rows, i, w, rowoff)
        if local and ident:
            pair_row_local_id(rowoff, cols, mft, H, F, nobits, n, 0, tb, ti, tj, i, oe, gap_extend)
        elif local:
            pair_row_local(rowoff, cols, mft, H, F, nobits, n, 0, tb, ti, tj, i, oe, gap_extend)
        else:
            if ident:
                pair_row_global_id(
                    rowoff,
                    cols,
                    mf,
                    H,
                    F,
                    nobits,
                    n,
                    -(gap_open + i * gap_extend),
                    tb,
                    ti,
                    tj,
                    i,
                    oe,
                    gap_extend,
                )
            else:
                pair_row_global(
                    rowoff,
                    cols,
                    mf,
                    H,
                    F,
                    nobits,
                    n,
                    -(gap_open + i * gap_extend),
                    tb,
                    ti,
                    tj,
                    i,
                    oe,
                    gap_extend,
                )
            for l in range(nl):
                if qln[l] == i:  # this lane's last row
                    b = H[l]
                    bj = 0
                    for j in range(1, sln[l] + 1):
                        if H[j * L + l] > b:
                            b = H[j * L + l]
                            bj = j
                    best[l] = b
                    qe[l] = i
                    se[l] = bj
    if local:
        for l in range(nl):
            if tb[l] > 0:
                best[l] = tb[l]
                qe[l] = tj[l]
                se[l] = ti[l]


@njit(cache=True, nogil=True, boundscheck=False)
def pl_reverse(
    qcodes,
    qst,
    scodes,
    sst,
    nl,
    mft,
    w,
    ident,
    pad,
    gap_open,
    gap_extend,
    mode,
    best,
    qe,
    se,
    span_q,
    span_s,
):
    """Reverse pass of up to PAIR_LANES pairs: the spans of the start (tie rules of the module doc).

    Rows are the reversed subject prefixes s[:se] (subject span b), columns
    the reversed query prefixes q[:qe] (query span a), with the transposed
    matrix ``mft``, so that row-major order is the column-major order of
    :func:`.scalar.reverse_start`; stops once every lane has its start.  Local: the
    reversed local alignment with a bonus of 1 into the anchor cell (as
    :func:`.query_lanes.lanes_pass`); the first cell reaching best + 1.  Semi-global:
    global DP, the first row b with G[b][qe] == best.  Returns False if a lane
    found nothing (cannot happen; the caller then uses the scalar pass).
    """
    L = PAIR_LANES
    m = 0
    n = 0
    for l in range(nl):
        m = max(m, se[l])
        n = max(n, qe[l])
    rows = pl_pack(scodes, sst, se, nl, m, True, pad)
    cols = pl_pack(qcodes, qst, qe, nl, n, True, pad)
    H, F, tb, ti, tj, nobits, rowoff = pl_state(n)
    oe = gap_open + gap_extend
    found = np.zeros(L, dtype=np.bool_)
    for l in range(nl, L):
        found[l] = True
    if mode == MODE_LOCAL:
        for l in range(nl):
            H[l] = 1  # the bonus, on the diagonal into the anchor cell
    else:
        for a in range(1, n + 1):
            for l in range(L):
                H[a * L + l] = -(gap_open + a * gap_extend)
        for l in range(nl):
            g0 = -(gap_open + qe[l] * gap_extend) if qe[l] > 0 else 0
            if g0 == best[l]:
                found[l] = True
                span_q[l] = qe[l]
                span_s[l] = 0
    remaining = 0
    for l in range(L):
        if not found[l]:
            remaining += 1
    b = 0
    while remaining > 0 and b < m:
        b += 1
        pl_rowoff(rows, b, w, rowoff)
        if mode == MODE_LOCAL:
            if ident:
                pair_row_local_id(
                    rowoff, cols, mft, H, F, nobits, n, 0, tb, ti, tj, b, oe, gap_extend
                )
            else:
                pair_row_local(rowoff, cols, mft, H, F, nobits, n, 0, tb, ti, tj, b, oe, gap_extend)
            for l in range(nl):
                if not found[l] and tb[l] > best[l]:
                    found[l] = True
                    remaining -= 1
                    span_q[l] = tj[l]
                    span_s[l] = ti[l]
        else:
            if ident:
                pair_row_global_id(
                    rowoff,
                    cols,
                    mft,
                    H,
                    F,
                    nobits,
                    n,
                    -(gap_open + b * gap_extend),
                    tb,
                    ti,
                    tj,
                    b,
                    oe,
                    gap_extend,
                )
            else:
                pair_row_global(
                    rowoff,
                    cols,
                    mft,
                    H,
                    F,
                    nobits,
                    n,
                    -(gap_open + b * gap_extend),
                    tb,
                    ti,
                    tj,
                    b,
                    oe,
                    gap_extend,
                )
            for l in range(nl):
                if not found[l] and b <= se[l] and H[qe[l] * L + l] == best[l]:
                    found[l] = True
                    remaining -= 1
                    span_q[l] = qe[l]
                    span_s[l] = b
    return remaining == 0


@njit(cache=True, nogil=True, boundscheck=False)
def pl_traceback(
    qcodes,
    qst,
    qln,
    scodes,
    sst,
    sln,
    nl,
    mf,
    w,
    ident,
    pad,
    gap_open,
    gap_extend,
    ops,
    room_end,
    scores,
    counts,
):
    """Global alignments (traceback) of up to PAIR_LANES segment pairs (all non-empty).

    One lane-interleaved fill with direction bits (1 byte per cell and lane,
    as :func:`.traceback.traceback` without checkpoints: the caller keeps groups small),
    then each lane's traceback with the rule of :func:`.traceback.traceback`; lane l
    writes its ops backwards ending at ops[room_end[l]].
    """
    L = PAIR_LANES
    m = 0
    n = 0
    for l in range(nl):
        m = max(m, qln[l])
        n = max(n, sln[l])
    rows = pl_pack(qcodes, qst, qln, nl, m, False, pad)
    cols = pl_pack(scodes, sst, sln, nl, n, False, pad)
    stride = (n + 1) * L
    H = np.empty(stride, dtype=np.int32)
    F = np.full(stride, NEG, dtype=np.int32)
    for j in range(n + 1):
        for l in range(L):
            H[j * L + l] = -(gap_open + j * gap_extend) if j > 0 else 0
    bits = np.empty((m, stride), dtype=np.uint8)
    d = np.zeros(L, dtype=np.int32)
    rowoff = np.empty(L, dtype=np.int32)
    oe = gap_open + gap_extend
    for i in range(1, m + 1):
        pl_rowoff(rows, i, w, rowoff)
        if ident:
            pair_row_fill_id(
                rowoff,
                cols,
                mf,
                H,
                F,
                bits[i - 1],
                n,
                -(gap_open + i * gap_extend),
                d,
                d,
                d,
                i,
                oe,
                gap_extend,
            )
        else:
            pair_row_fill(
                rowoff,
                cols,
                mf,
                H,
                F,
                bits[i - 1],
                n,
                -(gap_open + i * gap_extend),
                d,
                d,
                d,
                i,
                oe,
                gap_extend,
            )
        for l in range(nl):
            if qln[l] == i:
                scores[l] = H[sln[l] * L + l]
    for l in range(nl):
        pos = room_end[l]
        i = qln[l]
        j = sln[l]
        state = 0
        while i > 0 or j > 0:
            if i == 0:
                pos -= 1
                ops[pos] = OP_D
                j -= 1
                continue
            if j == 0:
                pos -= 1
                ops[pos] = OP_I
                i -= 1
                continue
            state, i, j, pos = trace_step(bits[i - 1, j * L + l], state, i, j, pos, ops)
        counts[l] = room_end[l] - pos


@njit(cache=True, nogil=True, boundscheck=False)
def locate_group(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    ks,
    mf,
    mft,
    w,
    ident,
    matrix,
    gap_open,
    gap_extend,
    mode,
    info,
    ends,
):
    """Locate the aligned region of the pairs ks (at most PAIR_LANES) in pair lanes.

    ``ends`` of shape (n, 3) (an external forward pass): the reverse pass only.
    """
    L = PAIR_LANES
    nl = ks.shape[0]
    qst = np.zeros(L, dtype=np.int64)
    qln = np.zeros(L, dtype=np.int64)
    sst = np.zeros(L, dtype=np.int64)
    sln = np.zeros(L, dtype=np.int64)
    for l in range(nl):
        k = ks[l]
        qst[l] = qoff[qidx[k]]
        qln[l] = qoff[qidx[k] + 1] - qst[l]
        sst[l] = soff[sidx[k]]
        sln[l] = soff[sidx[k] + 1] - sst[l]
    best = np.zeros(L, dtype=np.int64)
    qe = np.zeros(L, dtype=np.int64)
    se = np.zeros(L, dtype=np.int64)
    pad = matrix.shape[0]
    if ends.shape[0] == qidx.shape[0]:  # from an external (GPU) forward pass
        for l in range(nl):
            best[l] = ends[ks[l], 0]
            qe[l] = ends[ks[l], 1]
            se[l] = ends[ks[l], 2]
    else:
        pl_forward(
            qcodes,
            qst,
            qln,
            scodes,
            sst,
            sln,
            nl,
            mf,
            mft,
            w,
            ident,
            pad,
            gap_open,
            gap_extend,
            mode,
            best,
            qe,
            se,
        )
    # reverse pass for the lanes with something to align
    live = np.zeros(L, dtype=np.int64)
    nlive = 0
    for l in range(nl):
        if mode != MODE_LOCAL or best[l] > 0:
            live[nlive] = l
            nlive += 1
    rq = np.zeros(L, dtype=np.int64)
    rs = np.zeros(L, dtype=np.int64)
    rb = np.zeros(L, dtype=np.int64)
    rqs = np.zeros(L, dtype=np.int64)
    rss = np.zeros(L, dtype=np.int64)
    for r in range(nlive):
        l = live[r]
        rq[r] = qe[l]
        rs[r] = se[l]
        rb[r] = best[l]
        rqs[r] = qst[l]
        rss[r] = sst[l]
    a = np.zeros(L, dtype=np.int64)
    b = np.zeros(L, dtype=np.int64)
    ok = True
    if nlive > 0:
        ok = pl_reverse(
            qcodes,
            rqs,
            scodes,
            rss,
            nlive,
            mft,
            w,
            ident,
            pad,
            gap_open,
            gap_extend,
            mode,
            rb,
            rq,
            rs,
            a,
            b,
        )
    for r in range(nlive):
        l = live[r]
        if not ok:  # cannot happen; the scalar pass to be safe
            q = qcodes[qst[l] : qst[l] + qln[l]]
            s = scodes[sst[l] : sst[l] + sln[l]]
            a[r], b[r] = reverse_start(
                q, s, qe[l], se[l], best[l], matrix, gap_open, gap_extend, mode == MODE_SEMIGLOBAL
            )
        k = ks[l]
        info[k, 0] = best[l]
        info[k, 1] = qe[l] - a[r]
        info[k, 2] = qe[l]
        info[k, 3] = se[l] - b[r]
        info[k, 4] = se[l]


@njit(cache=True, nogil=True, boundscheck=False)
def traceback_group(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    ks,
    mf,
    w,
    ident,
    pad,
    gap_open,
    gap_extend,
    info,
    ops,
    room,
):
    """Traceback of the regions of the pairs ks (at most PAIR_LANES, non-empty) in pair lanes."""
    L = PAIR_LANES
    nl = ks.shape[0]
    qst = np.zeros(L, dtype=np.int64)
    qln = np.zeros(L, dtype=np.int64)
    sst = np.zeros(L, dtype=np.int64)
    sln = np.zeros(L, dtype=np.int64)
    end = np.zeros(L, dtype=np.int64)
    for l in range(nl):
        k = ks[l]
        qst[l] = qoff[qidx[k]] + info[k, 1]
        qln[l] = info[k, 2] - info[k, 1]
        sst[l] = soff[sidx[k]] + info[k, 3]
        sln[l] = info[k, 4] - info[k, 3]
        end[l] = room[k + 1]
    scores = np.zeros(L, dtype=np.int64)
    counts = np.zeros(L, dtype=np.int64)
    pl_traceback(
        qcodes,
        qst,
        qln,
        scodes,
        sst,
        sln,
        nl,
        mf,
        w,
        ident,
        pad,
        gap_open,
        gap_extend,
        ops,
        end,
        scores,
        counts,
    )
    return scores, counts


@njit(cache=True, nogil=True, boundscheck=False)
def locate_chunk_pairs(
    c,
    nchunks,
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    mode,
    perm,
    item_start,
    mf,
    mft,
    w,
    ident,
    info,
    ends,
):
    """Regions of chunk c's groups of PAIR_LANES pairs, in pair lanes (from ``ends`` if given)."""
    for t in range(c, item_start.shape[0] - 1, nchunks):
        ks = perm[item_start[t] : item_start[t + 1]]
        locate_group(
            qcodes,
            qoff,
            scodes,
            soff,
            qidx,
            sidx,
            ks,
            mf,
            mft,
            w,
            ident,
            matrix,
            gap_open,
            gap_extend,
            mode,
            info,
            ends,
        )
