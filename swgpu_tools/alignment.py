"""Pairwise alignment with traceback (CPU): local, global and semi-global.

:class:`Alignment` is what every traceback returns and what the output tables
are written from.  Coordinates are 0-based, end-exclusive; the tables convert
them to BLAST's 1-based inclusive form.

Scoring is the one of the kernels (:mod:`swgpu_tools.kernels`): substitution
matrix plus BLAST-style affine gaps, a gap of k residues costing
``gap_open + k * gap_extend`` (linear gaps: ``gap_open = 0``).  The score of a
local alignment returned here equals the kernel score of the pair.

Modes (``mode=``; :data:`MODES`)
--------------------------------
* ``"local"`` (Smith-Waterman): the best-scoring pair of segments; score >= 0.
* ``"global"`` (Needleman-Wunsch): both sequences end to end.
* ``"semiglobal"``: the whole query against any part of the subject (gaps at
  both ends of the subject are free), as SSEARCH's glsearch; in Biopython
  terms a global PairwiseAligner with ``end_deletion_score = 0`` and the
  subject as target.

Every mode has the same three steps; only the region differs.

How an alignment is found (:func:`align`)
-----------------------------------------
1. Locate the end.  Local: forward score-only pass over the whole matrix
   (linear memory): the best score and its end cell.  **Tie rule for the
   end:** the first maximum in column-major order, i.e. the smallest subject
   end, then the smallest query end.  (:func:`align_many` runs this pass for
   ALN_LANES subjects of one query at once in SIMD lanes; :func:`align` runs
   scalar versions of passes 1 and 2; both follow the same tie rules.)
   Semi-global: a scalar forward pass whose row 0 is 0 (free subject prefix);
   the end is the best cell of the last row, **the smallest subject end** on
   ties.  Global: the end is the corner, nothing to locate.
2. Locate the start.  Reverse score-only pass from that end cell (linear
   memory, stops early): alignments of the reversed prefixes anchored at the
   end cell; the first cell, in column-major order of (subject span, query
   span), whose score equals the best gives the start.  **Tie rule for the
   start:** among the optimal alignments ending at that end cell, the
   shortest subject span, then the shortest query span (largest
   subject_start, then largest query_start).  (:func:`align_many` runs this
   pass in SIMD lanes too: a local alignment of the reversed prefixes with a
   bonus of 1 on the anchor cell, see :func:`_lanes_pass`.)  Semi-global:
   only cells spanning the whole query count; **the shortest subject span**.
   Global: the start is (0, 0).
3. Traceback on that sub-rectangle only: a global affine (Gotoh) alignment of
   the two segments, whose optimum is the best score of the mode (local: every
   optimal alignment of the rectangle starts and ends with an ``M`` column, a
   gap at either end could be dropped to score higher; semi-global: it does
   not start or end with a ``D``).  So the traceback costs what the aligned
   region costs, not what the whole pair costs.  Traceback keeps 1 byte per
   cell (direction bits of the three matrices).
   **Tie rule in the traceback** (all modes): from the end cell backwards, at
   a cell a diagonal (``M``) step is preferred to ending a ``D`` gap, which is
   preferred to ending an ``I`` gap; inside a gap, opening (coming from the
   cell's H) is preferred to extending, i.e. a gap is ended as soon as that
   is optimal.

Memory at any length: when the rectangle has more than ``cell_limit`` cells
(default :data:`TRACEBACK_CELL_LIMIT` bytes), rows are processed in blocks of
at most ``cell_limit`` direction bytes, last block first, each recomputed
from a checkpoint (the DP row H, F at its first row).  Checkpoints form
levels (:func:`_checkpoint_plan`): level 1 holds up to K rows over the whole
matrix, level 2 up to K rows inside the current level-1 block, and so on,
with d * K rows kept in all (at most about ``cell_limit`` bytes; two rows per
level at least).  Memory is therefore O(cell_limit + d * K * n) whatever the
lengths, for (d + 1) score passes at most; a block is recomputed only left of
the traceback's current column.  The result is the very alignment the
one-block traceback gives (same values, same tie rule).

A local pair whose best score is 0 (nothing aligns positively) gives score
0, empty operations and all coordinates 0.

:func:`align_many` and :func:`align_pairs` align many pairs in parallel
(Numba ``prange``; the functions release the GIL).  GPU hook: their ``ends``
argument takes each pair's (best, query end, subject end) from a forward pass
run elsewhere (a GPU batch scorer is not part of this package yet); the CPU
then runs steps 2 and 3 only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .kernels.cpu import _make_column_pass

#: Pairs of one query aligned in lock-step by the forward and reverse passes:
#: one AVX2 register of int16 lanes (16), or of int32 lanes (8) where int16
#: could overflow; and subject columns per pass over the query.
ALN_LANES = 16
ALN_COLS = 2
_column_pass_track = _make_column_pass(None, ALN_COLS, True)
_I16_MAX = 32767

#: Alignment modes (see the module doc) and the names the API accepts.
MODE_LOCAL = 0
MODE_GLOBAL = 1
MODE_SEMIGLOBAL = 2
MODES = ("local", "global", "semiglobal")
_MODE_CODES = {"local": MODE_LOCAL, "global": MODE_GLOBAL, "semiglobal": MODE_SEMIGLOBAL,
               "semi-global": MODE_SEMIGLOBAL, "glsearch": MODE_SEMIGLOBAL}

#: Most traceback cells (bytes) kept at once for one alignment; longer
#: regions are traced back in row blocks with checkpoints.
TRACEBACK_CELL_LIMIT = 200_000_000

_NEG = -(1 << 30)  # "minus infinity" that cannot overflow int32 when decreased a little

# traceback bits of one cell
_H_DIAG = 0
_H_FROM_E = 1  # H came from E: a gap in the query (op D, subject residues)
_H_FROM_F = 2  # H came from F: a gap in the subject (op I, query residues)
_H_MASK = 3
_E_EXTEND = 4
_F_EXTEND = 8

_OP_M = 77  # ord("M")
_OP_I = 73  # ord("I")
_OP_D = 68  # ord("D")


@dataclass
class Alignment:
    """One optimal alignment (local, global or semi-global) of a query with a subject.

    operations: one byte per alignment column:
      b"M"  a query residue aligned with a subject residue (identical or not),
      b"I"  a query residue against a gap in the subject,
      b"D"  a subject residue against a gap in the query.
    """

    score: int
    query_start: int
    query_end: int
    subject_start: int
    subject_end: int
    operations: bytes


# ---------------------------------------------------------------------------
# score-only passes
# ---------------------------------------------------------------------------
@njit(cache=True, nogil=True, boundscheck=False)
def _forward_end(q, s, matrix, gap_open, gap_extend):
    """(best, query_end, subject_end) of the best local alignment; ends exclusive.

    Rows are query positions, columns subject positions; the first maximum in
    column-major order wins (smallest subject end, then smallest query end),
    as in the lane version :func:`_lanes_pass`.  E runs along the
    subject (op D), F along the query.
    """
    m = q.shape[0]
    n = s.shape[0]
    oe = gap_open + gap_extend
    ext = gap_extend
    H = np.zeros(n + 1, dtype=np.int32)  # H[i-1][j], then H[i][j]
    F = np.full(n + 1, _NEG, dtype=np.int32)
    best = 0
    bi = 0
    bj = 0
    for i in range(1, m + 1):
        row = matrix[q[i - 1]]
        diag = 0  # H[i-1][0]
        h_left = 0  # H[i][0]
        e = _NEG
        for j in range(1, n + 1):
            e = max(e - ext, h_left - oe)
            f = max(F[j] - ext, H[j] - oe)
            h = diag + row[s[j - 1]]
            if e > h:
                h = e
            if f > h:
                h = f
            if h < 0:
                h = 0
            diag = H[j]
            H[j] = h
            F[j] = f
            h_left = h
            if h > best or (h == best and j < bj):
                best = h
                bi = i
                bj = j
    return best, bi, bj


@njit(cache=True, nogil=True, boundscheck=False)
def _lanes_pass(q, scodes, soff, subjects, matrix, gap_open, gap_extend, reverse, ends_q,
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
    if narrow and m >= _I16_MAX:
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
        _column_pass_track(qc, prof, pstride, H, E, bc, ic, oe, gap_extend)
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
        limit = _I16_MAX - max(0, matrix.max())
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
def _reverse_start(q, s, qe, se, best, matrix, gap_open, gap_extend, full_query=False):
    """Spans (a, b) of the alignment ending at (qe, se) with score ``best``.

    Global-at-the-end DP of q[:qe] reversed against s[:se] reversed, scanned
    column by column (subject span b outer, query span a inner); the first
    cell whose score is ``best``, i.e. the shortest subject span, then the
    shortest query span (as :func:`_lanes_pass`).  ``full_query`` (semi-global
    mode): only cells with a == qe count (the whole query prefix is aligned),
    from subject span 0 up: the shortest subject span.
    """
    oe = gap_open + gap_extend
    ext = gap_extend
    G = np.empty(qe + 1, dtype=np.int32)  # G[.][b-1], then G[.][b]
    E = np.full(qe + 1, _NEG, dtype=np.int32)  # gap along the subject, per query span
    G[0] = 0
    for a in range(1, qe + 1):
        G[a] = -(gap_open + a * gap_extend)
    if full_query and G[qe] == best:
        return qe, 0
    for b in range(1, se + 1):
        sc = s[se - b]
        diag = G[0]
        g_up = -(gap_open + b * gap_extend)  # G[0][b]: a gap of b subject residues
        G[0] = g_up
        f = _NEG
        for a in range(1, qe + 1):
            f = max(f - ext, g_up - oe)
            e = max(E[a] - ext, G[a] - oe)
            g = diag + matrix[q[qe - a], sc]
            if e > g:
                g = e
            if f > g:
                g = f
            diag = G[a]
            G[a] = g
            E[a] = e
            g_up = g
            if g == best and not full_query:
                return a, b
        if full_query and G[qe] == best:
            return qe, b
    return -1, -1  # unreachable for a correct best


@njit(cache=True, nogil=True, boundscheck=False)
def _forward_end_semi(q, s, matrix, gap_open, gap_extend):
    """(best, subject_end) of the best semi-global alignment (whole query, free subject ends).

    Row 0 is 0 everywhere (a free subject prefix); the best of the last row,
    first maximum (smallest subject end, 0 included: the whole query against
    gaps).
    """
    m = q.shape[0]
    n = s.shape[0]
    oe = gap_open + gap_extend
    ext = gap_extend
    H = np.zeros(n + 1, dtype=np.int32)
    F = np.full(n + 1, _NEG, dtype=np.int32)
    for i in range(1, m + 1):
        row = matrix[q[i - 1]]
        diag = H[0]
        h_left = -(gap_open + i * gap_extend)
        H[0] = h_left
        e = _NEG
        for j in range(1, n + 1):
            e = max(e - ext, h_left - oe)
            f = max(F[j] - ext, H[j] - oe)
            h = diag + row[s[j - 1]]
            if e > h:
                h = e
            if f > h:
                h = f
            diag = H[j]
            H[j] = h
            F[j] = f
            h_left = h
    best = H[0]
    bj = 0
    for j in range(1, n + 1):
        if H[j] > best:
            best = H[j]
            bj = j
    return best, bj


# ---------------------------------------------------------------------------
# traceback on the rectangle (global affine alignment of two segments)
# ---------------------------------------------------------------------------
@njit(cache=True, nogil=True, boundscheck=False)
def _fill_rows(q, s, r0, r1, H, F, bits, matrix, gap_open, gap_extend):
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
        e = _NEG
        k = i - r0 - 1
        for j in range(1, n + 1):
            t = 0
            e_ext = e - ext
            e_open = h_left - oe
            if e_ext > e_open:
                e = e_ext
                t |= _E_EXTEND
            else:
                e = e_open
            f_ext = F[j] - ext
            f_open = H[j] - oe
            if f_ext > f_open:
                f = f_ext
                t |= _F_EXTEND
            else:
                f = f_open
            h = diag + row[s[j - 1]]
            if e > h:
                h = e
                t |= _H_FROM_E
            if f > h:
                h = f
                t = (t & ~_H_MASK) | _H_FROM_F
            diag = H[j]
            H[j] = h
            F[j] = f
            h_left = h
            if keep:
                bits[k, j] = t


@njit(cache=True, nogil=True, boundscheck=False)
def _init_row0(n, gap_open, gap_extend, H, F):
    H[0] = 0
    F[0] = _NEG
    for j in range(1, n + 1):
        H[j] = -(gap_open + j * gap_extend)
        F[j] = _NEG


@njit(cache=True, nogil=True, boundscheck=False)
def _checkpoint_plan(m, n, cell_limit):
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
        p = 2 ** d
        while p < nb:  # smallest k with k**d >= nb
            k += 1
            p = k ** d
        if d * k * 8 * w <= cell_limit or k <= 2:
            return rb, d, k
        d += 1


@njit(cache=True, nogil=True, boundscheck=False)
def _load_block(p, jc, q, s, matrix, gap_open, gap_extend, sizes, d, K, ckH, ckF, base,
                bits, H, F):
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
        Hj[:] = ckH[src, :w]
        Fj[:] = ckF[src, :w]
        rend = min(m, r0 + sizes[lv - 1])
        r = r0
        k = 0
        while True:
            ckH[1 + (lv - 1) * K + k, :w] = Hj
            ckF[1 + (lv - 1) * K + k, :w] = Fj
            if r + sizes[lv] >= rend:
                break
            _fill_rows(q, sj, r, r + sizes[lv], Hj, Fj, nobits, matrix, gap_open, gap_extend)
            r += sizes[lv]
            k += 1
        base[lv] = r0
        for l2 in range(lv + 1, d + 1):
            base[l2] = -1
    kp = (p - base[d]) // sizes[d]
    r0 = base[d] + kp * sizes[d]
    src = 0 if d == 0 else 1 + (d - 1) * K + kp
    Hj[:] = ckH[src, :w]
    Fj[:] = ckF[src, :w]
    _fill_rows(q, sj, r0, min(m, r0 + sizes[d]), Hj, Fj, bits, matrix, gap_open, gap_extend)
    return r0


@njit(cache=True, nogil=True, boundscheck=False)
def _traceback(q, s, matrix, gap_open, gap_extend, cell_limit, ops):
    """Global alignment of segments q, s; ops written backwards into ``ops``.

    Returns (score, number of ops); the ops are ops[len(ops) - count:].
    Memory: at most ``cell_limit`` direction bytes plus the checkpoint rows of
    :func:`_checkpoint_plan` (at most about ``cell_limit`` bytes more, and at
    least 2 rows a level), whatever the lengths: DP rows are recomputed from
    checkpoints, (d + 1) passes over the matrix at most.
    """
    m = q.shape[0]
    n = s.shape[0]
    pos = ops.shape[0]
    if m == 0 or n == 0:
        for _ in range(n):
            pos -= 1
            ops[pos] = _OP_D
        for _ in range(m):
            pos -= 1
            ops[pos] = _OP_I
        k = m + n
        return (-(gap_open + k * gap_extend) if k > 0 else 0), k
    rb, d, K = _checkpoint_plan(m, n, cell_limit)
    sizes = np.empty(d + 1, dtype=np.int64)
    sizes[d] = rb
    for lv in range(d - 1, -1, -1):
        sizes[lv] = sizes[lv + 1] * K
    ckH = np.empty((1 + d * K, n + 1), dtype=np.int32)  # row 0, then K per level
    ckF = np.empty_like(ckH)
    H = np.empty(n + 1, dtype=np.int32)
    F = np.empty(n + 1, dtype=np.int32)
    _init_row0(n, gap_open, gap_extend, H, F)
    ckH[0] = H
    ckF[0] = F
    base = np.full(d + 1, -1, dtype=np.int64)
    base[0] = 0
    bits = np.empty((rb, n + 1), dtype=np.uint8)
    loaded = _load_block(m - 1, n, q, s, matrix, gap_open, gap_extend, sizes, d, K, ckH, ckF,
                         base, bits, H, F)
    score = H[n]  # the block holding the last row was computed over all columns
    i = m
    j = n
    state = 0  # 0: H, 1: E (op D), 2: F (op I)
    while i > 0 or j > 0:
        if i == 0:  # only subject residues left
            pos -= 1
            ops[pos] = _OP_D
            j -= 1
            continue
        if j == 0:  # only query residues left
            pos -= 1
            ops[pos] = _OP_I
            i -= 1
            continue
        if i - 1 < loaded:
            loaded = _load_block(i - 1, j, q, s, matrix, gap_open, gap_extend, sizes, d, K,
                                 ckH, ckF, base, bits, H, F)
        t = bits[i - loaded - 1, j]
        if state == 0:
            src = t & _H_MASK
            if src == _H_DIAG:
                pos -= 1
                ops[pos] = _OP_M
                i -= 1
                j -= 1
            elif src == _H_FROM_E:
                state = 1
            else:
                state = 2
        elif state == 1:
            pos -= 1
            ops[pos] = _OP_D
            if not (t & _E_EXTEND):
                state = 0
            j -= 1
        else:
            pos -= 1
            ops[pos] = _OP_I
            if not (t & _F_EXTEND):
                state = 0
            i -= 1
    return score, ops.shape[0] - pos


# ---------------------------------------------------------------------------
# one pair, many pairs
# ---------------------------------------------------------------------------
@njit(cache=True, nogil=True, boundscheck=False)
def _locate(q, s, matrix, gap_open, gap_extend, mode=MODE_LOCAL):
    """(best, query_start, query_end, subject_start, subject_end) by the tie rules.

    Global mode: the whole rectangle, best unknown (0) until the traceback.
    """
    if mode == MODE_GLOBAL:
        return 0, 0, q.shape[0], 0, s.shape[0]
    if mode == MODE_SEMIGLOBAL:
        best, se = _forward_end_semi(q, s, matrix, gap_open, gap_extend)
        qe = q.shape[0]
        a, b = _reverse_start(q, s, qe, se, best, matrix, gap_open, gap_extend, True)
        return best, 0, qe, se - b, se
    best, qe, se = _forward_end(q, s, matrix, gap_open, gap_extend)
    if best <= 0:
        return 0, 0, 0, 0, 0
    a, b = _reverse_start(q, s, qe, se, best, matrix, gap_open, gap_extend)
    return best, qe - a, qe, se - b, se


@njit(cache=True, nogil=True, boundscheck=False)
def _start_from_end(q, s, best, qe, se, matrix, gap_open, gap_extend, mode):
    """Like :func:`_locate` from a known (best, query end, subject end)."""
    if mode == MODE_GLOBAL:
        return 0, 0, q.shape[0], 0, s.shape[0]
    if mode == MODE_SEMIGLOBAL:
        a, b = _reverse_start(q, s, qe, se, best, matrix, gap_open, gap_extend, True)
        return best, 0, qe, se - b, se
    if best <= 0:
        return 0, 0, 0, 0, 0
    a, b = _reverse_start(q, s, qe, se, best, matrix, gap_open, gap_extend)
    return best, qe - a, qe, se - b, se


@njit(cache=True, nogil=True, boundscheck=False)
def _fits_int16(matrix, gap_open, gap_extend):
    """Whether int16 lanes can hold every value below their overflow flag."""
    return (gap_open + 2 * gap_extend <= 30000 and matrix.min() >= -30000
            and 0 <= matrix.max() <= 1000)


@njit(cache=True, nogil=True, boundscheck=False)
def _locate_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, narrow_ok):
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
        ok = _lanes_pass(q, scodes, soff, subjects, matrix, gap_open, gap_extend, False,
                         qe, se, best, best, qe, se, p16)
    if not ok:
        for lo in range(0, n, 8):
            hi = min(n, lo + 8)
            _lanes_pass(q, scodes, soff, subjects[lo:hi], matrix, gap_open, gap_extend, False,
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
        ok = _lanes_pass(q, scodes, soff, rsub, matrix, gap_open, gap_extend, True,
                         rqe, rse, rbest, found, spa, spb, p16)
    if not ok:
        for lo in range(0, live, 8):
            hi = min(live, lo + 8)
            _lanes_pass(q, scodes, soff, rsub[lo:hi], matrix, gap_open, gap_extend, True,
                        rqe[lo:hi], rse[lo:hi], rbest[lo:hi], found[lo:], spa[lo:], spb[lo:],
                        p32)
    for k in range(live):
        if found[k] != rbest[k] + 1:  # cannot happen; the scalar pass to be safe
            s = scodes[soff[rsub[k]]:soff[rsub[k] + 1]]
            spa[k], spb[k] = _reverse_start(q, s, rqe[k], rse[k], rbest[k], matrix,
                                            gap_open, gap_extend)
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


@njit(cache=True, nogil=True, parallel=True)
def _align_batch(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                 cell_limit, nchunks, perm, item_start, mode, ends):
    """Align pairs (qidx[k], sidx[k]) in ``mode``.

    perm/item_start: work items of the local forward pass, pairs
    perm[item_start[t]:item_start[t + 1]] share one query (at most ALN_LANES).
    ends: (n, 3) int64 (best, query_end, subject_end) per pair from an
    external forward pass (the GPU hook, see :func:`align_pairs`), or (0, 3).
    """
    n = qidx.shape[0]
    info = np.zeros((n, 6), dtype=np.int64)  # score, qs, qe, ss, se, n_ops
    nitems = item_start.shape[0] - 1
    narrow_ok = _fits_int16(matrix, gap_open, gap_extend)
    if ends.shape[0] == n or mode != MODE_LOCAL:
        # one pair at a time: global (nothing to locate), semi-global (scalar
        # passes) or ends given (reverse pass only)
        given = ends.shape[0] == n
        for c in prange(nchunks):
            for k in range(c, n, nchunks):
                q = qcodes[qoff[qidx[k]]:qoff[qidx[k] + 1]]
                s = scodes[soff[sidx[k]]:soff[sidx[k] + 1]]
                if given:
                    r = _start_from_end(q, s, ends[k, 0], ends[k, 1], ends[k, 2], matrix,
                                        gap_open, gap_extend, mode)
                else:
                    r = _locate(q, s, matrix, gap_open, gap_extend, mode)
                info[k, 0] = r[0]
                info[k, 1] = r[1]
                info[k, 2] = r[2]
                info[k, 3] = r[3]
                info[k, 4] = r[4]
    else:
        for c in prange(nchunks):
            for t in range(c, nitems, nchunks):
                ks = perm[item_start[t]:item_start[t + 1]]
                qi = qidx[ks[0]]
                q = qcodes[qoff[qi]:qoff[qi + 1]]
                subjects = np.empty(ks.shape[0], dtype=np.int64)
                for l in range(ks.shape[0]):
                    subjects[l] = sidx[ks[l]]
                res = _locate_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend,
                                    narrow_ok)
                for l in range(ks.shape[0]):
                    for col in range(5):
                        info[ks[l], col] = res[l, col]
    # room for the longest possible operation string of every pair
    room = np.zeros(n + 1, dtype=np.int64)
    for k in range(n):
        room[k + 1] = room[k] + (info[k, 2] - info[k, 1]) + (info[k, 4] - info[k, 3])
    ops = np.zeros(room[n], dtype=np.uint8)
    for c in prange(nchunks):
        for k in range(c, n, nchunks):
            if info[k, 0] > 0 or mode != MODE_LOCAL:
                q = qcodes[qoff[qidx[k]] + info[k, 1]:qoff[qidx[k]] + info[k, 2]]
                s = scodes[soff[sidx[k]] + info[k, 3]:soff[sidx[k]] + info[k, 4]]
                score, count = _traceback(q, s, matrix, gap_open, gap_extend, cell_limit,
                                          ops[room[k]:room[k + 1]])
                info[k, 5] = count
                if mode == MODE_GLOBAL:
                    info[k, 0] = score
                elif score != info[k, 0]:
                    info[k, 5] = -1  # must not happen; reported by the caller
    return info, ops, room


def _mode_code(mode) -> int:
    try:
        return _MODE_CODES[str(mode).lower()]
    except KeyError:
        raise ValueError(f"unknown alignment mode {mode!r}; use one of {', '.join(MODES)}") from None


def _check_params(matrix, gap_open, gap_extend):
    matrix = np.ascontiguousarray(matrix, dtype=np.int32)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError("matrix must be a square array")
    gap_open, gap_extend = int(gap_open), int(gap_extend)
    if gap_open < 0 or gap_extend < 0 or gap_open + gap_extend <= 0:
        raise ValueError("gap costs must be >= 0 and not both 0")
    return matrix, gap_open, gap_extend


def _check_range(longest_pair, matrix, gap_open, gap_extend):
    """int32 DP values must stay far from _NEG (and from int32's limits)."""
    worst = int(np.abs(matrix).max(initial=0)) + gap_open + gap_extend
    if longest_pair * worst >= (1 << 29):
        raise ValueError(
            f"scores of a pair of {longest_pair:,} residues in all could exceed the 32-bit "
            f"range with these costs")


def _results(info, ops, room):
    out = []
    for k in range(info.shape[0]):
        score, qs, qe, ss, se, count = (int(x) for x in info[k])
        if count < 0:
            raise AssertionError(f"traceback of pair {k} did not reproduce score {score}")
        out.append(Alignment(score, qs, qe, ss, se, ops[room[k + 1] - count:room[k + 1]].tobytes()))
    return out


def align(query_codes: np.ndarray, subject_codes: np.ndarray, matrix, gap_open: int,
          gap_extend: int, *, mode: str = "local", cell_limit: int = TRACEBACK_CELL_LIMIT
          ) -> Alignment:
    """Best alignment of two code arrays (uint8 matrix codes) in ``mode``.

    mode: ``"local"`` (Smith-Waterman), ``"global"`` (Needleman-Wunsch) or
    ``"semiglobal"`` (the whole query against any part of the subject, as
    SSEARCH's glsearch).  Tie rules: see the module doc.  cell_limit: direction
    bytes kept at once before rows are recomputed from checkpoints.
    """
    code = _mode_code(mode)
    matrix, gap_open, gap_extend = _check_params(matrix, gap_open, gap_extend)
    q = np.ascontiguousarray(query_codes, dtype=np.uint8)
    s = np.ascontiguousarray(subject_codes, dtype=np.uint8)
    _check_range(len(q) + len(s), matrix, gap_open, gap_extend)
    best, qs, qe, ss, se = _locate(q, s, matrix, gap_open, gap_extend, code)
    if code == MODE_LOCAL and best <= 0:
        return Alignment(0, 0, 0, 0, 0, b"")
    ops = np.zeros((qe - qs) + (se - ss), dtype=np.uint8)
    score, count = _traceback(q[qs:qe], s[ss:se], matrix, gap_open, gap_extend,
                              max(1, int(cell_limit)), ops)
    if code == MODE_GLOBAL:
        best = score
    elif score != best:
        raise AssertionError(f"traceback score {score} != best {best}")
    return Alignment(int(best), int(qs), int(qe), int(ss), int(se), ops[len(ops) - count:].tobytes())


def align_local(query_codes: np.ndarray, subject_codes: np.ndarray, matrix,
                gap_open: int, gap_extend: int, *, cell_limit: int = TRACEBACK_CELL_LIMIT
                ) -> Alignment:
    """Best local alignment of two code arrays (uint8 matrix codes); see the module doc."""
    return align(query_codes, subject_codes, matrix, gap_open, gap_extend, mode="local",
                 cell_limit=cell_limit)


def align_many(queries, database, query_index, subject_index, matrix, gap_open: int,
               gap_extend: int, threads: int | None = None, *,
               cell_limit: int | None = None, mode: str = "local", ends=None
               ) -> list[Alignment]:
    """Align the pairs (queries[query_index[k]], database[subject_index[k]]) in parallel.

    queries, database: :class:`~swgpu_tools.sequences.EncodedSequences`.
    threads: Numba threads to use (default: the current setting).
    cell_limit: traceback bytes per alignment before checkpointing (default
    :data:`TRACEBACK_CELL_LIMIT` divided among the threads).
    mode, ends: as in :func:`align_pairs`.
    Returns one :class:`Alignment` per pair, in input order.
    """
    return _align_arrays(queries.codes, queries.offsets, database.codes, database.offsets,
                         query_index, subject_index, matrix, gap_open, gap_extend,
                         threads, cell_limit, mode, ends)


def align_pairs(pairs, matrix, gap_open: int, gap_extend: int, threads: int | None = None,
                *, cell_limit: int | None = None, mode: str = "local", ends=None
                ) -> list[Alignment]:
    """Align ``(query_codes, subject_codes)`` pairs in parallel (see :func:`align_many`).

    mode: ``"local"``, ``"global"`` or ``"semiglobal"`` (see :func:`align`).

    ends (the hook for an external, e.g. GPU, forward pass; not used by this
    package yet): an (n, 3) integer array of (best score, query end, subject
    end) per pair, ends exclusive, as the forward pass would find them (the
    tie rules of the module doc).  The CPU forward pass is then skipped; the
    reverse pass and the traceback still run here.  Local and semi-global
    modes only (global mode has no forward pass); for semi-global the query
    end is the query length.
    """
    pairs = list(pairs)
    qs = [np.ascontiguousarray(p[0], dtype=np.uint8) for p in pairs]
    ss = [np.ascontiguousarray(p[1], dtype=np.uint8) for p in pairs]

    def pack(parts):
        off = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=off[1:])
        codes = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        return codes, off

    qc, qo = pack(qs)
    sc, so = pack(ss)
    idx = np.arange(len(pairs), dtype=np.int64)
    return _align_arrays(qc, qo, sc, so, idx, idx, matrix, gap_open, gap_extend,
                         threads, cell_limit, mode, ends)


def _align_arrays(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                  threads, cell_limit, mode="local", ends=None):
    import numba

    code = _mode_code(mode)
    matrix, gap_open, gap_extend = _check_params(matrix, gap_open, gap_extend)
    qidx = np.ascontiguousarray(qidx, dtype=np.int64)
    sidx = np.ascontiguousarray(sidx, dtype=np.int64)
    qoff = np.ascontiguousarray(qoff, dtype=np.int64)
    soff = np.ascontiguousarray(soff, dtype=np.int64)
    if qidx.shape != sidx.shape:
        raise ValueError("query_index and subject_index must have the same length")
    if len(qidx) == 0:
        return []
    if ends is None:
        ends = np.zeros((0, 3), dtype=np.int64)
    else:
        ends = np.ascontiguousarray(ends, dtype=np.int64)
        if code == MODE_GLOBAL:
            raise ValueError("ends are for local and semi-global modes only")
        if ends.shape != (len(qidx), 3):
            raise ValueError(f"ends must have shape ({len(qidx)}, 3), got {ends.shape}")
    qlen = qoff[qidx + 1] - qoff[qidx]
    slen = soff[sidx + 1] - soff[sidx]
    _check_range(int((qlen + slen).max()), matrix, gap_open, gap_extend)
    previous = numba.get_num_threads()
    nthreads = previous if threads is None else max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
    if cell_limit is None:
        cell_limit = max(1 << 22, TRACEBACK_CELL_LIMIT // nthreads)
    try:
        numba.set_num_threads(nthreads)
        nchunks = max(1, min(len(qidx), 4 * nthreads))
        # local forward-pass work items: pairs of one query, similar subject lengths
        perm = np.lexsort((-slen, qidx)).astype(np.int64)
        new_query = np.flatnonzero(np.diff(qidx[perm])) + 1
        bounds = [0]
        for lo, hi in zip(np.r_[0, new_query], np.r_[new_query, len(perm)]):
            bounds.extend(range(int(lo) + ALN_LANES, int(hi), ALN_LANES))
            bounds.append(int(hi))
        item_start = np.asarray(bounds, dtype=np.int64)
        info, ops, room = _align_batch(
            np.ascontiguousarray(qcodes, dtype=np.uint8), qoff,
            np.ascontiguousarray(scodes, dtype=np.uint8), soff,
            qidx, sidx, matrix, gap_open, gap_extend, max(1, int(cell_limit)), nchunks, perm,
            item_start, code, ends)
    finally:
        numba.set_num_threads(previous)
    return _results(info, ops, room)
