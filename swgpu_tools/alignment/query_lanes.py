"""Query-shared lanes: the score passes of up to ALN_LANES subjects of one query at once.

Database hits share queries: the forward pass (best score and end cell) and
the reverse pass (start cell) of ALN_LANES subjects of one query run in the
lanes of one AVX2 register (16 int16 lanes, or 8 int32 lanes where int16
could overflow), with the column pass of the search kernel
(:func:`swgpu_tools.kernels.simd.make_column_pass`, tracking each column's
best cell) and column profiles built by byte shuffles.  The lanes compute the
cells of :mod:`.scalar` with the same tie rules, so the alignments are
identical.  The forward pass also samples its DP values on a grid, for the
bands of :mod:`.band` (:mod:`.hits` puts it all together).
"""

from __future__ import annotations

import os

import numpy as np
from numba import njit

from ..kernels.simd import (
    HAVE_AVX2,
    HAVE_AVX512VL,
    copy_register,
    make_column_pass,
    make_profile_shuffle,
)

#: Pairs of one query aligned in lock-step by the forward and reverse passes:
#: one AVX2 register of int16 lanes (16), or of int32 lanes (8) where int16
#: could overflow; and subject columns per pass over the query: 4 where the CPU
#: has 32 vector registers (AVX512VL: each column's diagonal, gap, best and row
#: stay in registers; per row the loads and stores of H and E serve 4 columns),
#: else 2.  The 20 benchmark queries' 1,046 alignments, the same with either: on
#: one thread of the 2-core VM 1.28-1.35 s against 1.44-1.50 s with 2 (8: no
#: better); on an H200 host's 16 threads 0.22-0.25 s against 0.24-0.26 s, but
#: 10 % slower there on one thread (RESULTS-workflow.md, run 179).
#: ``SWGPU_ALN_COLS=2`` or ``4`` sets it (tests of the other count; the
#: kernel cache folder then differs, :func:`swgpu_tools.cache.source_digest`).
ALN_LANES = 16
ALN_COLS = (
    int(os.environ["SWGPU_ALN_COLS"])
    if os.environ.get("SWGPU_ALN_COLS") in ("2", "4")
    else 4
    if HAVE_AVX512VL
    else 2
)
column_pass_track = make_column_pass(None, ALN_COLS, True)
column_pass_split = make_column_pass(None, ALN_COLS, False, split=True)
profile16 = make_profile_shuffle(16)
I16_MAX = 32767
#: The forward pass samples its DP values every GRID_STEP rows and columns
#: (the bounds of :mod:`.band`), in at most GRID_BYTES per pass (the step is
#: doubled for longer pairs).
GRID_STEP = 8
GRID_BYTES = 32 << 20


@njit(cache=True, nogil=True, boundscheck=False)
def grid_shape(m, soff, subjects, lanes):
    """The grid of the forward pass of a query of length m against ``subjects``.

    Returns (nc, nr, step, ncols): int32 (nc, nr, lanes) samples every
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
    return (ncols + step - 1) // step + 1, (m + step - 1) // step + 1, step, ncols


@njit(cache=True, nogil=True, boundscheck=False)
def grid_view(buf, nc, nr, lanes):
    """An (nc, nr, lanes) grid in the front of ``buf`` (reused between passes: no new
    memory to fault in), with row 0 and column 0 zero (the DP's border)."""
    grid = buf[: nc * nr * lanes].reshape((nc, nr, lanes))
    for r in range(nr):
        for l in range(lanes):
            grid[0, r, l] = 0
    for c in range(nc):
        for l in range(lanes):
            grid[c, 0, l] = 0
    return grid


def forward_grid(m, soff, subjects, lanes):
    """A zeroed grid for one forward pass (tests): (grid, step, ncols)."""
    nc, nr, step, ncols = grid_shape(m, soff, subjects, lanes)
    return np.zeros((nc, nr, lanes), dtype=np.int32), step, ncols


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _grab(grid, gc, H, step, m):
    """grid[gc, r, :] = H of row min(r * step, m), all lanes (r >= 1): one register each."""
    nr = grid.shape[1]
    L = grid.shape[2]
    for r in range(1, nr):
        copy_register(grid, (gc * nr + r) * L, H, (min(r * step, m) - 1) * L)


@njit(cache=True, nogil=True, boundscheck=False)
def lanes_pass(
    q,
    scodes,
    soff,
    subjects,
    matrix,
    gap_open,
    gap_extend,
    reverse,
    ends_q,
    ends_s,
    target,
    out_best,
    out_a,
    out_b,
    probe,
    grid,
    step,
    known,
):
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

    Forward, where ``known`` holds every lane's best score (a search's: known[l]
    for subject l): :func:`_known_columns`, the same results with less work; a
    known score that proves wrong is ignored (the tracked pass then runs).
    ``known`` empty: unknown.
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
    mmin, mmax = matrix_range(matrix)
    pad = min(0, mmin)
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
    shuffle = HAVE_AVX2 and L == 16 and na + 1 <= 32 and mmin >= -128 and mmax <= 127
    if shuffle:
        inter = np.full(ncols * L, na, dtype=np.uint8)
        for l in range(nsub):
            for jj in range(lens[l]):
                inter[jj * L + l] = (
                    scodes[starts[l] + lens[l] - 1 - jj] if reverse else scodes[starts[l] + jj]
                )
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
    # what the column profiles are made from (:func:`_block_profile`)
    src = (shuffle, inter, table8, prof, pstride, matT, scodes, starts, lens, reverse, na, nl)
    fast = not reverse and 0 < nsub <= known.shape[0]
    for l in range(nsub if fast else 0):
        if known[l] < 0 or (narrow and known[l] >= I16_MAX - max(0, mmax)):
            fast = False  # unknown, or int16 lanes may overflow: the tracked pass says so
    if fast:
        fast = _known_columns(
            qc, src, H, E, bc, ic, oe, gap_extend, known, nsub, ncols, G, I, J, grid, step, m
        )
        if not fast:  # a known score was wrong: the tracked pass, from the start
            for x in range(m * L):
                H[x] = 0
                E[x] = -oe
            for l in range(L):
                G[l] = 0
                I[l] = 0
                J[l] = 0
    for j in range(0, 0 if fast else ncols, ALN_COLS):
        _block_profile(j, src)
        for c in range(ALN_COLS):
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
                _grab(grid, (col + step - 1) // step, H, step, m)
        if reverse:
            done = True
            for l in range(nsub):
                if G[l] <= target[l]:
                    done = False
            if done:
                break
    if narrow:
        limit = I16_MAX - max(0, mmax)
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
def _block_profile(j, src):
    """The column profiles of pass columns j .. j + ALN_COLS - 1 into ``prof``; ``src``:
    (shuffle, inter, table8, prof, pstride, matT, scodes, starts, lens, reverse, na, nl)
    as :func:`lanes_pass` makes them."""
    shuffle, inter, table8, prof, pstride, matT, scodes, starts, lens, reverse, na, nl = src
    L = prof.shape[0] // (ALN_COLS * nl)
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


@njit(cache=True, nogil=True, boundscheck=False)
def _known_columns(
    qc, src, H, E, bc, ic, oe, gap_extend, known, nsub, ncols, G, I, J, grid, step, m
):
    """The forward pass of :func:`lanes_pass` for lanes whose best scores are known.

    Each block of ALN_COLS columns runs the column pass without tracking (only
    each lane's maximum: fewer instructions a cell), reading H and E and writing
    the next columns to a second pair of arrays.  A block that brings a lane to
    its known score runs again with tracking from the columns before it, which
    gives the first cell reaching that score in column-major order: the end, as
    the tracked pass finds it.  The pass runs to the last column, so that every
    maximum is checked: it returns False where a lane's maximum is not its known
    score (G, I, J and the grid are then to be discarded).  (Stopping once every
    lane has its end would save ~7 % more, but a score below the best would then
    give an alignment of that lower score unnoticed.)
    """
    L = bc.shape[0] // ALN_COLS
    prof, pstride = src[3], src[4]
    capture = grid.shape[0] > 0
    H2 = np.empty_like(H)
    E2 = np.empty_like(E)
    bl = np.empty(L, dtype=H.dtype)
    found = np.zeros(L, dtype=np.int64)
    top = I16_MAX if H.itemsize == 2 else 2147483647
    for j in range(0, ncols, ALN_COLS):
        _block_profile(j, src)
        for l in range(L):
            bl[l] = 0
        column_pass_split(qc, prof, pstride, H, E, H2, E2, bl, oe, gap_extend)
        hit = False
        for l in range(nsub):
            if bl[l] > G[l]:
                G[l] = bl[l]
            if found[l] == 0 and bl[l] >= known[l]:
                hit = True
        if hit:  # again with tracking, in place: the first cell reaching the score
            for c in range(ALN_COLS):
                for l in range(L):
                    bc[c * L + l] = known[l] - 1 if l < nsub and found[l] == 0 else top
                    ic[c * L + l] = 0
            column_pass_track(qc, prof, pstride, H, E, bc, ic, oe, gap_extend)
            for l in range(nsub):
                if found[l] != 0 or bl[l] < known[l]:
                    continue
                for c in range(ALN_COLS):
                    if bc[c * L + l] >= known[l]:
                        I[l] = ic[c * L + l]
                        J[l] = j + c
                        found[l] = 1
                        break
        else:  # the new columns are the ones written
            H, H2 = H2, H
            E, E2 = E2, E
        col = j + ALN_COLS  # H now holds DP column col (rows 1 .. m)
        if capture and (col % step == 0 or col == ncols):
            _grab(grid, (col + step - 1) // step, H, step, m)
    for l in range(nsub):
        if found[l] == 0 or G[l] != known[l]:
            return False
    return True


@njit(cache=True, nogil=True, boundscheck=False)
def fits_int16(matrix, gap_open, gap_extend):
    """Whether int16 lanes can hold every value below their overflow flag."""
    mmin, mmax = matrix_range(matrix)
    return gap_open + 2 * gap_extend <= 30000 and mmin >= -30000 and 0 <= mmax <= 1000


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def matrix_range(matrix):
    """(smallest, largest) substitution score.  (A loop: NumPy's min/max cost
    Numba more compilation.)"""
    lo = matrix[0, 0]
    hi = matrix[0, 0]
    for a in range(matrix.shape[0]):
        for b in range(matrix.shape[1]):
            lo = min(lo, matrix[a, b])
            hi = max(hi, matrix[a, b])
    return np.int64(lo), np.int64(hi)
