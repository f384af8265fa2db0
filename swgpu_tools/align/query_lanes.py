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

from ..kernels.simd import HAVE_AVX2, make_column_pass, make_profile_shuffle
from .band import backward_band, forward_band_traceback
from .scalar import reverse_start
from .traceback import traceback

#: Pairs of one query aligned in lock-step by the forward and reverse passes:
#: one AVX2 register of int16 lanes (16), or of int32 lanes (8) where int16
#: could overflow; and subject columns per pass over the query.
ALN_LANES = 16
ALN_COLS = 2
column_pass_track = make_column_pass(None, ALN_COLS, True)
profile16 = make_profile_shuffle(16)
I16_MAX = 32767
#: Database hits scoring at least BAND_MIN_SCORE get their start and
#: traceback on the bands of :mod:`.band` (long alignments: a tiny part of
#: their region); weaker ones (short regions) the reverse pass in lanes and
#: the traceback of their whole region.
BAND_MIN_SCORE = 200
#: The forward pass samples its DP values every GRID_STEP rows and columns
#: (the bounds of :mod:`.band`), in at most GRID_BYTES per pass (the step is
#: doubled for longer pairs).
GRID_STEP = 8
GRID_BYTES = 32 << 20


@njit(cache=True, nogil=True, boundscheck=False)
def forward_grid(m, soff, subjects, lanes):
    """An empty grid for the forward pass of a query of length m against ``subjects``.

    Returns (grid, step, ncols): int32 (nc, nr, lanes), sampling every
    ``step`` rows and columns (GRID_STEP, doubled until the grid fits
    GRID_BYTES), ncols the pass's columns.
    """
    ncols = 0
    for l in range(subjects.shape[0]):
        ncols = max(ncols, soff[subjects[l] + 1] - soff[subjects[l]])
    ncols = (ncols + ALN_COLS - 1) // ALN_COLS * ALN_COLS
    step = GRID_STEP
    while (ncols // step + 2) * (m // step + 2) * lanes * 4 > GRID_BYTES:
        step *= 2
    nr = (m + step - 1) // step + 1
    nc = (ncols + step - 1) // step + 1
    return np.zeros((nc, nr, lanes), dtype=np.int32), step, ncols


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _grab(g, H, step, m, lanes):
    """g[r, l] = H of row min(r * step, m), lane l (r >= 1); ``lanes`` a literal."""
    for r in range(1, g.shape[0]):
        base = (min(r * step, m) - 1) * lanes
        for l in range(lanes):
            g[r, l] = H[base + l]


@njit(cache=True, nogil=True, boundscheck=False)
def lanes_pass(q, scodes, soff, subjects, matrix, gap_open, gap_extend, reverse, ends_q,
               ends_s, target, out_best, out_a, out_b, probe, grid, step):
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

    Forward, where ``grid`` has rows: grid[c, r, l] (int32) gets lane l's DP
    value at row min(r * step, len(q)), column min(c * step, ncols) (ncols:
    the longest subject rounded up to ALN_COLS, :func:`pass_shape`): the
    samples :func:`.band.prefix_bound` reads.
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
    # column profiles by byte shuffles (16 int16 lanes, an int8 matrix, AVX2):
    # the lanes' letters interleaved, column j of lane l at inter[j * L + l]
    shuffle = (HAVE_AVX2 and L == 16 and na + 1 <= 32 and matrix.min() >= -128
               and matrix.max() <= 127)
    if shuffle:
        inter = np.full(ncols * L, na, dtype=np.uint8)
        for l in range(nsub):
            for jj in range(lens[l]):
                inter[jj * L + l] = (scodes[starts[l] + lens[l] - 1 - jj] if reverse
                                     else scodes[starts[l] + jj])
        table8 = np.zeros((nl, 32), dtype=np.int8)
        for x in range(nl):
            for c in range(na + 1):
                table8[x, c] = matT[c, x]
    else:
        inter = np.zeros(0, dtype=np.uint8)
        table8 = np.zeros((0, 32), dtype=np.int8)
    bc = np.empty(ALN_COLS * L, dtype=probe.dtype)
    ic = np.empty(ALN_COLS * L, dtype=probe.dtype)
    capture = not reverse and grid.shape[0] > 0
    G = np.zeros(L, dtype=np.int64)
    I = np.zeros(L, dtype=np.int64)
    J = np.zeros(L, dtype=np.int64)
    for j in range(0, ncols, ALN_COLS):
        for c in range(ALN_COLS):
            jj = j + c
            if shuffle:
                profile16(inter, jj * L, table8, prof, c * pstride)
            else:
                for l in range(L):
                    if jj >= lens[l]:
                        r = na
                    elif reverse:
                        r = scodes[starts[l] + lens[l] - 1 - jj]
                    else:
                        r = scodes[starts[l] + jj]
                    for x in range(nl):
                        prof[c * pstride + x * L + l] = matT[r, x]
            for l in range(L):
                bc[c * L + l] = G[l]
                ic[c * L + l] = 0
        column_pass_track(qc, prof, pstride, H, E, bc, ic, oe, gap_extend)
        for c in range(ALN_COLS):
            for l in range(L):
                if bc[c * L + l] > G[l]:
                    G[l] = bc[c * L + l]
                    I[l] = ic[c * L + l]
                    J[l] = j + c
        if capture:
            col = j + ALN_COLS  # H now holds DP column col (rows 1 .. m)
            if col % step == 0 or col == ncols:
                g = grid[(col + step - 1) // step]
                if narrow:
                    _grab(g, H, step, m, 16)
                else:
                    _grab(g, H, step, m, 8)
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
def band_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, best, qe, se, grid,
               step, ncols, strong, do_trace, cell_limit, res, counts, ops, room_end,
               fallbacks):
    """Start (and, with ``do_trace``, traceback) of the ``strong`` lanes on the bands of :mod:`.band`.

    res[l] = (best, qs, qe, ss, se); lane l's operations are written
    backwards ending at ops[room_end[l]], counts[l] is their number.
    fallbacks[l] = 1 where a band was too large (or anything unexpected
    happened) and the scalar passes ran instead.
    """
    m = q.shape[0]
    lo = np.empty(m + 1, dtype=np.int64)
    hi = np.empty(m + 1, dtype=np.int64)
    hoff = np.empty(m + 1, dtype=np.int64)
    for l in range(subjects.shape[0]):
        if not strong[l]:
            continue
        sub = subjects[l]
        s = scodes[soff[sub]:soff[sub + 1]]
        a, b, _, hvals = backward_band(q, s, qe[l], se[l], best[l], matrix, gap_open,
                                       gap_extend, grid[:, :, l], step, step, m, ncols, lo,
                                       hi, hoff, cell_limit)
        banded = a >= 0
        if not banded:
            a, b = reverse_start(q, s, qe[l], se[l], best[l], matrix, gap_open, gap_extend,
                                 False)
            fallbacks[l] = 1
        res[l, 0] = best[l]
        res[l, 1] = qe[l] - a
        res[l, 2] = qe[l]
        res[l, 3] = se[l] - b
        res[l, 4] = se[l]
        if not do_trace:
            continue
        x = q[qe[l] - a:qe[l]]
        y = s[se[l] - b:se[l]]
        count = -1
        if banded:
            score, count = forward_band_traceback(x, y, matrix, gap_open, gap_extend,
                                                  best[l], lo, hi, hoff, hvals, ops,
                                                  room_end[l], cell_limit)
            if count >= 0 and score != best[l]:
                count = -1
        if count < 0:
            fallbacks[l] = 1
            score, count = traceback(x, y, matrix, gap_open, gap_extend, cell_limit,
                                     ops[:room_end[l]])
            if score != best[l]:
                count = -1  # must not happen; reported by the caller
        counts[l] = count


@njit(cache=True, nogil=True, boundscheck=False)
def reverse_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, narrow_ok, best, qe,
                  se, res):
    """Starts of the alignments ending at (qe[l], se[l]) with scores best[l]: the reverse pass
    in lanes (int16 where it fits, else int32 8 at a time); res[l] = (best, qs, qe, ss, se)."""
    n = subjects.shape[0]
    found = np.zeros(ALN_LANES, dtype=np.int64)
    spa = np.zeros(ALN_LANES, dtype=np.int64)
    spb = np.zeros(ALN_LANES, dtype=np.int64)
    nogrid = np.zeros((0, 0, 0), dtype=np.int32)
    ok = False
    if narrow_ok:
        ok = lanes_pass(q, scodes, soff, subjects, matrix, gap_open, gap_extend, True, qe, se,
                        best, found, spa, spb, np.zeros(1, np.int16), nogrid, 1)
    if not ok:
        for lo in range(0, n, 8):
            hi = min(n, lo + 8)
            lanes_pass(q, scodes, soff, subjects[lo:hi], matrix, gap_open, gap_extend, True,
                       qe[lo:hi], se[lo:hi], best[lo:hi], found[lo:], spa[lo:], spb[lo:],
                       np.zeros(1, np.int32), nogrid, 1)
    for k in range(n):
        if found[k] != best[k] + 1:  # cannot happen; the scalar pass to be safe
            s = scodes[soff[subjects[k]]:soff[subjects[k] + 1]]
            spa[k], spb[k] = reverse_start(q, s, qe[k], se[k], best[k], matrix, gap_open,
                                           gap_extend, False)
        res[k, 0] = best[k]
        res[k, 1] = qe[k] - spa[k]
        res[k, 2] = qe[k]
        res[k, 3] = se[k] - spb[k]
        res[k, 4] = se[k]


@njit(cache=True, nogil=True, boundscheck=False)
def locate_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, narrow_ok, do_trace,
                 cell_limit, band_min, res, counts, ops, room_end, fallbacks):
    """Regions (and tracebacks) of up to ALN_LANES subjects of query q.

    The forward pass in int16 lanes where they fit, else (or where one may
    have overflowed) in int32 lanes, 8 subjects at a time.  Then, per lane:
    best score 0: nothing (count 0); at least ``band_min``: start (and
    traceback with ``do_trace``) on the bands, :func:`band_lanes`; between:
    the start from the reverse pass in lanes (:func:`reverse_lanes`), count
    -2 (the caller traces these back with the batch machinery: short regions,
    cheap in pair lanes).
    """
    n = subjects.shape[0]
    best = np.zeros(ALN_LANES, dtype=np.int64)
    qe = np.zeros(ALN_LANES, dtype=np.int64)
    se = np.zeros(ALN_LANES, dtype=np.int64)
    strong = np.zeros(ALN_LANES, dtype=np.bool_)
    m = q.shape[0]
    ok = False
    if narrow_ok:
        grid, step, ncols = forward_grid(m, soff, subjects, 16)
        ok = lanes_pass(q, scodes, soff, subjects, matrix, gap_open, gap_extend, False, qe, se,
                        best, best, qe, se, np.zeros(1, np.int16), grid, step)
        if ok:
            for l in range(n):
                strong[l] = best[l] >= band_min
            band_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, best, qe, se,
                       grid, step, ncols, strong, do_trace, cell_limit, res, counts, ops,
                       room_end, fallbacks)
    if not ok:
        for lo in range(0, n, 8):
            hi = min(n, lo + 8)
            grid, step, ncols = forward_grid(m, soff, subjects[lo:hi], 8)
            lanes_pass(q, scodes, soff, subjects[lo:hi], matrix, gap_open, gap_extend, False,
                       qe, se, best, best[lo:], qe[lo:], se[lo:], np.zeros(1, np.int32), grid,
                       step)
            for l in range(lo, hi):
                strong[l] = best[l] >= band_min
            band_lanes(q, scodes, soff, subjects[lo:hi], matrix, gap_open, gap_extend,
                       best[lo:], qe[lo:], se[lo:], grid, step, ncols, strong[lo:], do_trace,
                       cell_limit, res[lo:hi], counts[lo:hi], ops, room_end[lo:hi],
                       fallbacks[lo:hi])
    weak = np.zeros(n, dtype=np.int64)
    nweak = 0
    for l in range(n):
        if best[l] <= 0:
            for col in range(5):
                res[l, col] = 0
            counts[l] = 0
        elif not strong[l]:
            weak[nweak] = l
            nweak += 1
    if nweak == 0:
        return
    wsub = np.empty(nweak, dtype=np.int64)
    wbest = np.empty(nweak, dtype=np.int64)
    wqe = np.empty(nweak, dtype=np.int64)
    wse = np.empty(nweak, dtype=np.int64)
    for k in range(nweak):
        l = weak[k]
        wsub[k] = subjects[l]
        wbest[k] = best[l]
        wqe[k] = qe[l]
        wse[k] = se[l]
    wres = np.zeros((nweak, 5), dtype=np.int64)
    reverse_lanes(q, scodes, soff, wsub, matrix, gap_open, gap_extend, narrow_ok, wbest, wqe,
                  wse, wres)
    for k in range(nweak):
        l = weak[k]
        for col in range(5):
            res[l, col] = wres[k, col]
        counts[l] = -2


@njit(cache=True, nogil=True, boundscheck=False)
def locate_chunk_query(c, nchunks, qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open,
                       gap_extend, perm, item_start, item_chunk, do_trace, cell_limit, band_min,
                       info, ops, room, fallbacks):
    """Local regions (and tracebacks) of chunk c's items: pairs of one query in query lanes.

    Item t belongs to chunk item_chunk[t]; pair k's operations end at
    ops[room[k + 1]]; info[k, 5]: their number, or -2 where the region is
    still to be traced back (:func:`locate_lanes`).
    """
    narrow_ok = fits_int16(matrix, gap_open, gap_extend)
    res = np.zeros((ALN_LANES, 5), dtype=np.int64)
    counts = np.zeros(ALN_LANES, dtype=np.int64)
    room_end = np.zeros(ALN_LANES, dtype=np.int64)
    flags = np.zeros(ALN_LANES, dtype=np.int64)
    for t in range(item_start.shape[0] - 1):
        if item_chunk[t] != c:
            continue
        ks = perm[item_start[t]:item_start[t + 1]]
        qi = qidx[ks[0]]
        q = qcodes[qoff[qi]:qoff[qi + 1]]
        n = ks.shape[0]
        subjects = np.empty(n, dtype=np.int64)
        for l in range(n):
            subjects[l] = sidx[ks[l]]
            room_end[l] = room[ks[l] + 1]
            flags[l] = 0
        locate_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, narrow_ok,
                     do_trace, cell_limit, band_min, res[:n], counts[:n], ops, room_end[:n],
                     flags[:n])
        for l in range(n):
            k = ks[l]
            for col in range(5):
                info[k, col] = res[l, col]
            info[k, 5] = counts[l]
            fallbacks[k] = flags[l]
