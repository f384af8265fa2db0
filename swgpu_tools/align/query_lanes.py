"""Query-shared lanes: the score passes of up to ALN_LANES subjects of one query at once.

Database hits share queries: the forward pass (best score and end cell) and
the reverse pass (start cell) of ALN_LANES subjects of one query run in the
lanes of one AVX2 register (16 int16 lanes, or 8 int32 lanes where int16
could overflow), with the column pass of the search kernel
(:func:`swgpu_tools.kernels.simd.make_column_pass`, tracking each column's
best cell).  The lanes compute the cells of :mod:`.scalar` with the same tie
rules, so the alignments are identical.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..kernels.simd import make_column_pass
from .scalar import reverse_start

#: Pairs of one query aligned in lock-step by the forward and reverse passes:
#: one AVX2 register of int16 lanes (16), or of int32 lanes (8) where int16
#: could overflow; and subject columns per pass over the query.
ALN_LANES = 16
ALN_COLS = 2
column_pass_track = make_column_pass(None, ALN_COLS, True)
I16_MAX = 32767


@njit(cache=True, nogil=True, boundscheck=False)
def lanes_pass(q, scodes, soff, subjects, matrix, gap_open, gap_extend, reverse, ends_q,
               ends_s, target, out_best, out_a, out_b, probe):
    """Forward or reverse score-only pass for up to L subjects of one query.

    Lanes have the dtype of ``probe``: L = 16 int16 lanes or 8 int32 lanes
    (one AVX2 register).  Returns False if an int16 lane may have overflowed
    (a best score within max(matrix) of 32767, or a query longer than 32766);
    the caller then reruns with int32 lanes, which are exact.  Every column
    keeps its own best and the first row reaching it; columns are merged in
    order with a strict comparison, so each lane reports the first maximum in
    column-major order.

    Forward (``reverse`` False): local alignment of q with subject l; gives
    out_best[l] and the end (out_a[l], out_b[l]) = (query_end, subject_end).

    Reverse: q[:ends_q[l]] and s_l[:ends_s[l]] read backwards, as a local
    alignment in which the cell of the two last residues gets a bonus of 1
    through its diagonal.  Every local alignment scores at most target[l]
    (the best score), so the cells reaching target[l] + 1 are exactly the
    starts of the optimal alignments ending at that end cell.  Gives the spans
    (out_a[l], out_b[l]) = (query span, subject span) of the first one; stops
    once every lane has found its start.
    """
    L = 32 // probe.itemsize
    narrow = probe.itemsize == 2
    nsub = subjects.shape[0]
    na = matrix.shape[0]
    top = 0  # reverse: rows are q[top-1], q[top-2], ... after one dummy row
    if reverse:
        for l in range(nsub):
            top = max(top, ends_q[l])
    m = top + 1 if reverse else q.shape[0]
    # compact query alphabet: profile rows only for the letters present (+ dummy)
    slot = np.full(na, -1, dtype=np.int64)
    nl = 0
    qc = np.empty(m, dtype=np.uint8)
    for i in range(m):
        if reverse and i == 0:
            continue
        code = q[top - i] if reverse else q[i]
        if slot[code] < 0:
            slot[code] = nl
            nl += 1
        qc[i] = slot[code]
    if reverse:
        qc[0] = nl  # dummy row 0 scores 0: its H stays 0 (its diagonal is 0)
        nl += 1
    if narrow and m >= I16_MAX:
        return False
    # matT[c, a]: subject code c (or pad = na) against compact query letter a
    pad = min(0, matrix.min())
    matT = np.zeros((na + 1, nl), dtype=probe.dtype)
    for c in range(na):
        for x in range(na):
            if slot[x] >= 0:
                matT[c, slot[x]] = matrix[x, c]
    for x in range(na):
        if slot[x] >= 0:
            matT[na, slot[x]] = pad
    starts = np.zeros(L, dtype=np.int64)
    lens = np.zeros(L, dtype=np.int64)
    ncols = 0
    for l in range(nsub):
        starts[l] = soff[subjects[l]]
        lens[l] = ends_s[l] if reverse else soff[subjects[l] + 1] - starts[l]
        ncols = max(ncols, lens[l])
    ncols = (ncols + ALN_COLS - 1) // ALN_COLS * ALN_COLS
    oe = gap_open + gap_extend
    H = np.zeros(m * L, dtype=probe.dtype)  # H of the previous column (diagonals)
    E = np.full(m * L, -oe, dtype=probe.dtype)
    if reverse:
        for l in range(nsub):  # the bonus, on the diagonal into the anchor cell
            H[(top - ends_q[l]) * L + l] = 1
    pstride = nl * L
    prof = np.empty(ALN_COLS * pstride, dtype=probe.dtype)
    bc = np.empty(ALN_COLS * L, dtype=probe.dtype)
    ic = np.empty(ALN_COLS * L, dtype=probe.dtype)
    G = np.zeros(L, dtype=np.int64)
    I = np.zeros(L, dtype=np.int64)
    J = np.zeros(L, dtype=np.int64)
    for j in range(0, ncols, ALN_COLS):
        for c in range(ALN_COLS):
            jj = j + c
            for l in range(L):
                if jj >= lens[l]:
                    r = na
                elif reverse:
                    r = scodes[starts[l] + lens[l] - 1 - jj]
                else:
                    r = scodes[starts[l] + jj]
                for x in range(nl):
                    prof[c * pstride + x * L + l] = matT[r, x]
                bc[c * L + l] = G[l]
                ic[c * L + l] = 0
        column_pass_track(qc, prof, pstride, H, E, bc, ic, oe, gap_extend)
        for c in range(ALN_COLS):
            for l in range(L):
                if bc[c * L + l] > G[l]:
                    G[l] = bc[c * L + l]
                    I[l] = ic[c * L + l]
                    J[l] = j + c
        if reverse:
            done = True
            for l in range(nsub):
                if G[l] <= target[l]:
                    done = False
            if done:
                break
    if narrow:
        limit = I16_MAX - max(0, matrix.max())
        for l in range(nsub):
            if G[l] >= limit:
                return False
    for l in range(nsub):
        out_best[l] = G[l]
        if reverse:
            out_a[l] = ends_q[l] - top + I[l]
            out_b[l] = J[l] + 1
        else:
            out_a[l] = I[l] + 1 if G[l] > 0 else 0
            out_b[l] = J[l] + 1 if G[l] > 0 else 0
    return True


@njit(cache=True, nogil=True, boundscheck=False)
def fits_int16(matrix, gap_open, gap_extend):
    """Whether int16 lanes can hold every value below their overflow flag."""
    return (gap_open + 2 * gap_extend <= 30000 and matrix.min() >= -30000
            and 0 <= matrix.max() <= 1000)


@njit(cache=True, nogil=True, boundscheck=False)
def locate_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, narrow_ok):
    """(best, qs, qe, ss, se) per subject (rows), by the tie rules; up to ALN_LANES subjects.

    int16 lanes first where they fit; any pass that may have overflowed is
    redone with int32 lanes, 8 subjects at a time.
    """
    n = subjects.shape[0]
    res = np.zeros((n, 5), dtype=np.int64)
    p16 = np.zeros(1, dtype=np.int16)
    p32 = np.zeros(1, dtype=np.int32)
    best = np.zeros(ALN_LANES, dtype=np.int64)
    qe = np.zeros(ALN_LANES, dtype=np.int64)
    se = np.zeros(ALN_LANES, dtype=np.int64)
    ok = False
    if narrow_ok:
        ok = lanes_pass(q, scodes, soff, subjects, matrix, gap_open, gap_extend, False,
                        qe, se, best, best, qe, se, p16)
    if not ok:
        for lo in range(0, n, 8):
            hi = min(n, lo + 8)
            lanes_pass(q, scodes, soff, subjects[lo:hi], matrix, gap_open, gap_extend, False,
                       qe, se, best, best[lo:], qe[lo:], se[lo:], p32)
    live = 0
    for l in range(n):
        if best[l] > 0:
            live += 1
    if live == 0:
        return res
    rsub = np.empty(live, dtype=np.int64)
    rqe = np.empty(live, dtype=np.int64)
    rse = np.empty(live, dtype=np.int64)
    rbest = np.empty(live, dtype=np.int64)
    k = 0
    for l in range(n):
        if best[l] > 0:
            rsub[k] = subjects[l]
            rqe[k] = qe[l]
            rse[k] = se[l]
            rbest[k] = best[l]
            k += 1
    found = np.zeros(ALN_LANES, dtype=np.int64)
    spa = np.zeros(ALN_LANES, dtype=np.int64)
    spb = np.zeros(ALN_LANES, dtype=np.int64)
    ok = False
    if narrow_ok:
        ok = lanes_pass(q, scodes, soff, rsub, matrix, gap_open, gap_extend, True,
                        rqe, rse, rbest, found, spa, spb, p16)
    if not ok:
        for lo in range(0, live, 8):
            hi = min(live, lo + 8)
            lanes_pass(q, scodes, soff, rsub[lo:hi], matrix, gap_open, gap_extend, True,
                       rqe[lo:hi], rse[lo:hi], rbest[lo:hi], found[lo:], spa[lo:], spb[lo:],
                       p32)
    for k in range(live):
        if found[k] != rbest[k] + 1:  # cannot happen; the scalar pass to be safe
            s = scodes[soff[rsub[k]]:soff[rsub[k] + 1]]
            spa[k], spb[k] = reverse_start(q, s, rqe[k], rse[k], rbest[k], matrix,
                                           gap_open, gap_extend, False)
    k = 0
    for l in range(n):
        res[l, 0] = best[l]
        if best[l] > 0:
            res[l, 1] = qe[l] - spa[k]
            res[l, 2] = qe[l]
            res[l, 3] = se[l] - spb[k]
            res[l, 4] = se[l]
            k += 1
    return res


@njit(cache=True, nogil=True, boundscheck=False)
def locate_chunk_query(c, nchunks, qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open,
                       gap_extend, perm, item_start, info):
    """Local regions of chunk c's items, pairs of one query in query-shared lanes."""
    narrow_ok = fits_int16(matrix, gap_open, gap_extend)
    for t in range(c, item_start.shape[0] - 1, nchunks):
        ks = perm[item_start[t]:item_start[t + 1]]
        qi = qidx[ks[0]]
        q = qcodes[qoff[qi]:qoff[qi + 1]]
        subjects = np.empty(ks.shape[0], dtype=np.int64)
        for l in range(ks.shape[0]):
            subjects[l] = sidx[ks[l]]
        res = locate_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, narrow_ok)
        for l in range(ks.shape[0]):
            for col in range(5):
                info[ks[l], col] = res[l, col]
