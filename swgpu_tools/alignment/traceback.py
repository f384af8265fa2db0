"""Traceback of an aligned region: a global affine (Gotoh) alignment of two segments.

Step 3 of :mod:`swgpu_tools.alignment`: once the score passes have located the
region (start and end of the alignment), the region is filled with direction
bits (1 byte a cell: :mod:`.cells`) and traced back from its end.

**Tie rule** (all modes): from the end cell backwards, at a cell a diagonal
(``M``) step is preferred to ending a ``D`` gap, which is preferred to ending
an ``I`` gap; inside a gap, opening (coming from the cell's H) is preferred to
extending, i.e. a gap is ended as soon as that is optimal.

Memory at any length: when the region has more than ``cell_limit`` cells
(default :data:`TRACEBACK_CELL_LIMIT` bytes), rows are processed in blocks of
at most ``cell_limit`` direction bytes, last block first, each recomputed from
a checkpoint (the DP row H, F at its first row).  Checkpoints form levels
(:func:`checkpoint_plan`): level 1 holds up to K rows over the whole matrix,
level 2 up to K rows inside the current level-1 block, and so on, with d * K
rows kept in all (at most about ``cell_limit`` bytes; two rows per level at
least).  Memory is therefore O(cell_limit + d * K * n) whatever the lengths,
for (d + 1) score passes at most; a block is recomputed only left of the
traceback's current column.  The result is the very alignment the one-block
traceback gives (same values, same tie rule).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cells import E_EXTEND, F_EXTEND, H_DIAG, H_FROM_E, H_FROM_F, H_MASK, NEG, OP_D, OP_I, OP_M

#: Most traceback cells (bytes) kept at once for one alignment; longer
#: regions are traced back in row blocks with checkpoints.
TRACEBACK_CELL_LIMIT = 200_000_000


@njit(cache=True, nogil=True, boundscheck=False)
def fill_rows(q, s, r0, r1, H, F, bits, matrix, gap_open, gap_extend):
    """Advance the global DP from row r0 to row r1 (H, F: row r0 in, row r1 out).

    q, s are the segments; rows are 1..len(q), columns 0..len(s).  If ``bits``
    has rows, bits[i - r0 - 1, j] gets the direction bits of cell (i, j).
    """
    n = s.shape[0]
    oe = gap_open + gap_extend
    ext = gap_extend
    keep = bits.shape[0] > 0
    for i in range(r0 + 1, r1 + 1):
        row = matrix[q[i - 1]]
        diag = H[0]
        h_left = -(gap_open + i * gap_extend)
        H[0] = h_left
        F[0] = h_left
        e = NEG
        k = i - r0 - 1
        for j in range(1, n + 1):
            t = 0
            e_ext = e - ext
            e_open = h_left - oe
            if e_ext > e_open:
                e = e_ext
                t |= E_EXTEND
            else:
                e = e_open
            f_ext = F[j] - ext
            f_open = H[j] - oe
            if f_ext > f_open:
                f = f_ext
                t |= F_EXTEND
            else:
                f = f_open
            h = diag + row[s[j - 1]]
            if e > h:
                h = e
                t |= H_FROM_E
            if f > h:
                h = f
                t = (t & ~H_MASK) | H_FROM_F
            diag = H[j]
            H[j] = h
            F[j] = f
            h_left = h
            if keep:
                bits[k, j] = t


@njit(cache=True, nogil=True, boundscheck=False)
def init_row0(n, gap_open, gap_extend, H, F):
    H[0] = 0
    F[0] = NEG
    for j in range(1, n + 1):
        H[j] = -(gap_open + j * gap_extend)
        F[j] = NEG


@njit(cache=True, nogil=True, boundscheck=False)
def checkpoint_plan(m, n, cell_limit):
    """(rows per direction-bit block, checkpoint levels d, checkpoints per level K).

    Blocks of ``rb`` rows keep at most ``cell_limit`` direction bytes.  With
    more than one block, checkpoint rows (H and F, 8 bytes a column) are kept
    in d levels of at most K rows each (level l splits a level l-1 block into
    K parts; the last level's parts are the bit blocks): the smallest d for
    which d * K checkpoint rows fit in ``cell_limit`` bytes (K >= 2).
    """
    w = n + 1
    rb = max(1, min(m, cell_limit // w))
    nb = (m + rb - 1) // rb
    if nb <= 1:
        return max(1, m), 0, 1
    rb = (m + nb - 1) // nb  # balance the blocks
    d = 1
    while True:
        k = 2
        p = 2**d
        while p < nb:  # smallest k with k**d >= nb
            k += 1
            p = k**d
        if d * k * 8 * w <= cell_limit or k <= 2:
            return rb, d, k
        d += 1


@njit(cache=True, nogil=True, boundscheck=False)
def load_block(p, jc, q, s, matrix, gap_open, gap_extend, sizes, d, K, ckH, ckF, base, bits, H, F):
    """Make ``bits`` hold the direction bits of the block containing DP row p + 1.

    Only columns 0..jc are computed (a traceback at column jc never goes
    right).  Checkpoint levels 1..d are refreshed top-down where the block
    containing p changed (each block of each level is computed once per
    traceback, as the traceback only goes up).  Returns the block's first row
    r0 (its bits row k is DP row r0 + 1 + k).
    """
    m = q.shape[0]
    w = jc + 1
    sj = s[:jc]
    Hj = H[:w]
    Fj = F[:w]
    nobits = np.empty((0, 0), dtype=np.uint8)
    for lv in range(1, d + 1):
        kp = (p - base[lv - 1]) // sizes[lv - 1]
        r0 = base[lv - 1] + kp * sizes[lv - 1]
        if base[lv] == r0:
            continue
        src = 0 if lv == 1 else 1 + (lv - 2) * K + kp
        _copy_row(ckH, ckF, src, Hj, Fj, w, True)
        rend = min(m, r0 + sizes[lv - 1])
        r = r0
        k = 0
        while True:
            _copy_row(ckH, ckF, 1 + (lv - 1) * K + k, Hj, Fj, w, False)
            if r + sizes[lv] >= rend:
                break
            fill_rows(q, sj, r, r + sizes[lv], Hj, Fj, nobits, matrix, gap_open, gap_extend)
            r += sizes[lv]
            k += 1
        base[lv] = r0
        for l2 in range(lv + 1, d + 1):
            base[l2] = -1
    kp = (p - base[d]) // sizes[d]
    r0 = base[d] + kp * sizes[d]
    src = 0 if d == 0 else 1 + (d - 1) * K + kp
    _copy_row(ckH, ckF, src, Hj, Fj, w, d >= 0)
    fill_rows(q, sj, r0, min(m, r0 + sizes[d]), Hj, Fj, bits, matrix, gap_open, gap_extend)
    return r0


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _copy_row(ckH, ckF, row, H, F, w, load):
    """H, F[:w] = checkpoint row ``row`` (load), or the reverse.  (Loops: array slice
    assignments cost seconds of Numba compilation.)"""
    if load:
        for j in range(w):
            H[j] = ckH[row, j]
            F[j] = ckF[row, j]
    else:
        for j in range(w):
            ckH[row, j] = H[j]
            ckF[row, j] = F[j]


@njit(cache=True, nogil=True, inline="always")
def trace_step(t, state, i, j, pos, ops):
    """One step back through direction bits ``t`` of cell (i, j).

    state 0: in H (follow the H source), 1: in a D gap (E), 2: in an I gap (F).
    Writes an operation at ops[pos - 1] when it consumes a column; returns the
    new (state, i, j, pos).
    """
    if state == 0:
        src = t & H_MASK
        if src == H_DIAG:
            pos -= 1
            ops[pos] = OP_M
            i -= 1
            j -= 1
        elif src == H_FROM_E:
            state = 1
        else:
            state = 2
    elif state == 1:
        pos -= 1
        ops[pos] = OP_D
        if not (t & E_EXTEND):
            state = 0
        j -= 1
    else:
        pos -= 1
        ops[pos] = OP_I
        if not (t & F_EXTEND):
            state = 0
        i -= 1
    return state, i, j, pos


@njit(cache=True, nogil=True, boundscheck=False)
def traceback(q, s, matrix, gap_open, gap_extend, cell_limit, ops):
    """Global alignment of segments q, s; ops written backwards into ``ops``.

    Returns (score, number of ops); the ops are ops[len(ops) - count:].
    Memory: at most ``cell_limit`` direction bytes plus the checkpoint rows of
    :func:`checkpoint_plan` (at most about ``cell_limit`` bytes more, and at
    least 2 rows a level), whatever the lengths: DP rows are recomputed from
    checkpoints, (d + 1) passes over the matrix at most.
    """
    m = q.shape[0]
    n = s.shape[0]
    pos = ops.shape[0]
    if m == 0 or n == 0:
        for _ in range(n):
            pos -= 1
            ops[pos] = OP_D
        for _ in range(m):
            pos -= 1
            ops[pos] = OP_I
        k = m + n
        return (-(gap_open + k * gap_extend) if k > 0 else 0), k
    rb, d, K = checkpoint_plan(m, n, cell_limit)
    sizes = np.empty(d + 1, dtype=np.int64)
    sizes[d] = rb
    for lv in range(d - 1, -1, -1):
        sizes[lv] = sizes[lv + 1] * K
    ckH = np.empty((1 + d * K, n + 1), dtype=np.int32)  # row 0, then K per level
    ckF = np.empty_like(ckH)
    H = np.empty(n + 1, dtype=np.int32)
    F = np.empty(n + 1, dtype=np.int32)
    init_row0(n, gap_open, gap_extend, H, F)
    _copy_row(ckH, ckF, 0, H, F, n + 1, m < 0)
    base = np.full(d + 1, -1, dtype=np.int64)
    base[0] = 0
    bits = np.empty((rb, n + 1), dtype=np.uint8)
    loaded = load_block(
        m - 1, n, q, s, matrix, gap_open, gap_extend, sizes, d, K, ckH, ckF, base, bits, H, F
    )
    score = H[n]  # the block holding the last row was computed over all columns
    i = m
    j = n
    state = 0  # 0: H, 1: E (op D), 2: F (op I)
    while i > 0 or j > 0:
        if i == 0:  # only subject residues left
            pos -= 1
            ops[pos] = OP_D
            j -= 1
            continue
        if j == 0:  # only query residues left
            pos -= 1
            ops[pos] = OP_I
            i -= 1
            continue
        if i - 1 < loaded:
            loaded = load_block(
                i - 1,
                j,
                q,
                s,
                matrix,
                gap_open,
                gap_extend,
                sizes,
                d,
                K,
                ckH,
                ckF,
                base,
                bits,
                H,
                F,
            )
        state, i, j, pos = trace_step(bits[i - loaded - 1, j], state, i, j, pos, ops)
    return score, ops.shape[0] - pos
