"""Exact traceback of a local alignment on a band: only the cells near its optimal paths.

After the forward pass (:mod:`.query_lanes`) a database hit has its best score
S and its end cell; the rest of the alignment -- the start (step 2 of
:mod:`swgpu_tools.alignment`) and the traceback (step 3) -- needs only the cells
that can lie on an optimal path.  Both are computed here on such a band, with
the very values and tie rules of the full computation, so the alignments are
identical to :func:`.scalar.reverse_start` + :func:`.traceback.traceback`.

Why a band is exact
-------------------
Let W be the DP computed on a set B of cells, with every cell outside B taken
as minus infinity.  W never exceeds the full DP's value.  If B holds every
cell of every optimal path, then along an optimal path W equals the full
value (its prefix lies in B); at each cell of an optimal path the candidates
that reach the cell's value are themselves on optimal paths (exact), the
others are smaller in both computations: every comparison, hence every
direction bit and tie, comes out the same.  So the start found and the path
traced back are the full computation's.

Which cells to keep (the pruning): a cell whose value plus an upper bound of
what can still be added to it stays below S cannot be on an optimal path.
By induction along an optimal path its cells are never pruned (their value is
exact, and value + bound >= value + the true rest = S), so pruning keeps B
large enough.

* Backward band (:func:`backward_band`): the global DP of the reversed
  prefixes anchored at the end cell, as :func:`.scalar.reverse_start`, row
  by row (query span a, subject span b), keeping the cells whose value plus a
  bound of the best local alignment *ending just before them* reaches S.
  That bound comes from the forward pass: its local DP values sampled on a
  grid (every ``K`` columns and ``R`` rows, :func:`prefix_bound`; between grid
  points a value is at most the next grid point's value plus the cost of the
  gaps leading there).  The first cell, column-major in (b, a), whose value
  is S is the start, as in the scalar pass.
* Forward fill (:func:`forward_band_traceback`): the global DP of the region
  (start to end) on the rows' column intervals of the backward band (every
  optimal path of the region is an optimal path of the backward band), with
  direction bits for those cells only, then the traceback of
  :mod:`.traceback`.

Cost: the cells of the bands (typically under 1% of the region for strong
hits) instead of the region twice (reverse pass, traceback fill).  Memory:
one byte per band cell (bits) and a few rows; a band over ``cell_limit``
bytes, or anything unexpected, falls back to the scalar passes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cells import NEG, OP_D, OP_I
from .traceback import trace_step


@njit(cache=True, nogil=True, boundscheck=False)
def prefix_bound(grid, i, j, R, K, m, ncols, gap_open, gap_extend):
    """Upper bound of the forward local DP value at position (i, j) (i <= m, j <= ncols).

    grid[c, r] is the value at row min(r * R, m), column min(c * K, ncols)
    (row 0 and column 0 hold 0); a path from (i, j) to the grid point at or
    after it (gaps along the subject, then along the query) costs at most the
    slack added.  (:func:`backward_band` computes the same per row and
    column, with tables.)
    """
    if i <= 0 or j <= 0:
        return 0
    r = (i + R - 1) // R
    c = (j + K - 1) // K
    return (
        np.int64(grid[c, r])
        + _slack(i, r * R, m, gap_open, gap_extend)
        + _slack(j, c * K, ncols, gap_open, gap_extend)
    )


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _slack(x, x2, top, gap_open, gap_extend):
    """Cost of a gap from position x to the grid line min(x2, top) at or after it."""
    x2 = min(x2, top)
    return gap_open + (x2 - x) * gap_extend if x2 > x else 0


@njit(cache=True, nogil=True, boundscheck=False)
def backward_band(
    q, s, qe, se, best, matrix, gap_open, gap_extend, grid, R, K, m, ncols, lo, hi, hoff, limit
):
    """The start of the best local alignment ending at (qe, se), on the backward band.

    q, s: the whole query and subject; grid, R, K, m, ncols: the forward
    pass's samples (:func:`prefix_bound`).  Row a (query span a) keeps the
    subject spans b in [lo[a], hi[a]] (-1 where none; the rows stop after the
    first empty one); the value of position (a, b) is hvals[hoff[a] + b]
    (minus infinity where pruned).  Returns (a, b, cells, hvals): the spans
    of the start (the first cell in column-major order whose value is
    ``best``, as :func:`.scalar.reverse_start`), or (-1, -1, cells, hvals)
    when not found or when the band outgrew ``limit`` cells (the caller then
    runs the scalar pass).
    """
    oe = gap_open + gap_extend
    # prefix_bound by tables: grid column and slack of each subject position
    # j = se - b; per row, the grid row and its slack.  A cell is kept where
    # its value plus the bound reaches best, or its gap values do with
    # gap_open more (a gap of the prefix may continue into the cell's gap).
    gcol = np.empty(se + 1, dtype=np.int64)
    cslack = np.empty(se + 1, dtype=np.int64)
    for j in range(se + 1):
        c = (j + K - 1) // K
        gcol[j] = c
        cslack[j] = _slack(j, c * K, ncols, gap_open, gap_extend)
    # two rows of H and V (the gap along the query), minus infinity outside
    # their kept intervals
    Hp = np.full(se + 2, NEG, dtype=np.int32)
    Vp = np.full(se + 2, NEG, dtype=np.int32)
    Hc = np.full(se + 2, NEG, dtype=np.int32)
    Vc = np.full(se + 2, NEG, dtype=np.int32)
    for a in range(qe + 1):
        lo[a] = -1
        hi[a] = -1
    hvals = np.empty(max(1024, 8 * (se + 1)), dtype=np.int32)
    cells = 0
    # Only the end position of row 0 and column 0 can be on an optimal path (an
    # optimal local alignment starts and ends with a match): the other border
    # cells stay minus infinity.
    Hp[0] = 0
    hvals[0] = 0
    hoff[0] = 0
    pos = 1
    plo = 0
    phi = 0
    lo[0] = 0
    hi[0] = 0
    qlo = 1  # the kept interval of the row held by Hc (none yet)
    qhi = 0
    found_a = -1
    found_b = se + 1
    for a in range(1, qe + 1):
        qa = q[qe - a]
        i = qe - a
        r = (i + R - 1) // R
        need = best - _slack(i, r * R, m, gap_open, gap_extend)
        for x in range(qlo, qhi + 1):
            Hc[x] = NEG
            Vc[x] = NEG
        start = max(1, plo)
        if pos + se + 1 - start > hvals.shape[0]:
            grown = np.empty(2 * hvals.shape[0] + se + 1, dtype=np.int32)
            for x in range(pos):  # (a loop: slice assignments compile slowly)
                grown[x] = hvals[x]
            hvals = grown
        hoff[a] = pos - start
        nlo = -1
        nhi = -1
        hleft = NEG
        g_h = NEG  # gap along the subject (from the left)
        b = start
        while b <= se:
            if b > phi + 1 and hleft == NEG and g_h == NEG:
                break
            g_h = max(g_h - gap_extend, hleft - oe)
            v = max(Vp[b] - gap_extend, Hp[b] - oe)
            g = max(Hp[b - 1] + matrix[qa, s[se - b]], v, g_h)
            j = se - b
            bound = grid[gcol[j], r] + cslack[j]
            if g + bound >= need or max(v, g_h) + gap_open + bound >= need:
                Hc[b] = g
                Vc[b] = v
                hvals[pos] = g
                hleft = g
                if nlo < 0:
                    nlo = b
                nhi = b
                if g == best and (b < found_b or (b == found_b and a < found_a)):
                    found_a = a
                    found_b = b
            else:
                hvals[pos] = NEG
                hleft = NEG
                g_h = NEG
            pos += 1
            b += 1
        cells += b - start
        lo[a] = nlo
        hi[a] = nhi
        if nlo < 0:
            break
        qlo, qhi = plo, phi
        plo, phi = nlo, nhi
        Hp, Hc = Hc, Hp
        Vp, Vc = Vc, Vp
        if cells > limit:
            return -1, -1, cells, hvals
    if found_a < 0:
        return -1, -1, cells, hvals
    return found_a, found_b, cells, hvals


@njit(cache=True, nogil=True, boundscheck=False)
def forward_band_traceback(
    x, y, matrix, gap_open, gap_extend, best, lo, hi, hoff, hvals, ops, end, limit
):
    """Global alignment of the region segments x, y on the backward band; ops end at ops[end].

    Position (i, j) of the region is position (a, b) = (m - i, n - j) of the
    backward band (m, n: the segment lengths), whose value (the best way from
    there to the end) is hvals[hoff[a] + b] for b in [lo[a], hi[a]].  A cell
    is kept where its value plus that one (plus gap_open for a gap that may
    continue) reaches ``best``; every other cell is minus infinity.  Direction
    bits and the traceback are those of :func:`.traceback.fill_rows` and
    :func:`.traceback.traceback`.  Returns (score, number of ops), or
    (score, -1) when the bits would exceed ``limit`` bytes or the traceback
    would leave the kept cells (the caller then runs the scalar traceback).
    """
    m = x.shape[0]
    n = y.shape[0]
    oe = gap_open + gap_extend
    # bits of row i for the columns of the band's row a = m - i
    rlo = np.empty(m + 1, dtype=np.int64)
    rhi = np.empty(m + 1, dtype=np.int64)
    roff = np.zeros(m + 2, dtype=np.int64)
    for i in range(m + 1):
        a = m - i
        if lo[a] < 0:
            rlo[i] = 1
            rhi[i] = 0
        else:
            rlo[i] = max(0, n - hi[a])
            rhi[i] = min(n, n - lo[a])
        roff[i + 1] = roff[i] + max(0, rhi[i] - rlo[i] + 1)
    if roff[m + 1] > limit:
        return NEG, -1
    bits = np.full(roff[m + 1], 255, dtype=np.uint8)
    Hp = np.full(n + 2, NEG, dtype=np.int32)
    Fp = np.full(n + 2, NEG, dtype=np.int32)
    Hc = np.full(n + 2, NEG, dtype=np.int32)
    Fc = np.full(n + 2, NEG, dtype=np.int32)
    Hp[0] = 0  # the start
    plo = 0
    phi = 0
    qlo = 1
    qhi = 0
    for i in range(1, m + 1):
        row = matrix[x[i - 1]]
        a = m - i
        for k in range(qlo, qhi + 1):
            Hc[k] = NEG
            Fc[k] = NEG
        j = max(1, plo, rlo[i])
        last = rhi[i]
        base = roff[i] - rlo[i]
        vbase = hoff[a] + n  # hvals index of column j: vbase - j
        nlo = -1
        nhi = -1
        e = NEG
        hl = NEG
        while j <= last:
            if j > phi + 1 and hl == NEG and e == NEG:
                break
            t = 0
            e_ext = e - gap_extend
            e_open = hl - oe
            if e_ext > e_open:
                e = e_ext
                t |= 4
            else:
                e = e_open
            f_ext = Fp[j] - gap_extend
            f_open = Hp[j] - oe
            if f_ext > f_open:
                f = f_ext
                t |= 8
            else:
                f = f_open
            h = Hp[j - 1] + row[y[j - 1]]
            if e > h:
                h = e
                t |= 1
            if f > h:
                h = f
                t = (t & ~3) | 2
            rest = hvals[vbase - j]
            if h + rest >= best or max(e, f) + rest + gap_open >= best:
                Hc[j] = h
                Fc[j] = f
                hl = h
                bits[base + j] = t
                if nlo < 0:
                    nlo = j
                nhi = j
            else:
                hl = NEG
                e = NEG
            j += 1
        if nlo < 0:
            return NEG, -1
        qlo, qhi = plo, phi
        plo, phi = nlo, nhi
        Hp, Hc = Hc, Hp
        Fp, Fc = Fc, Fp
    score = Hp[n] if plo <= n <= phi else NEG
    pos = end
    i = m
    j = n
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
        if j < rlo[i] or j > rhi[i]:
            return score, -1
        t = bits[roff[i] + j - rlo[i]]
        if t == 255:
            return score, -1
        state, i, j, pos = trace_step(t, state, i, j, pos, ops)
    return score, end - pos
