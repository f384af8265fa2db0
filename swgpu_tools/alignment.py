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

:func:`align_many` and :func:`align_pairs` align many pairs in parallel:
threads running Numba functions that release the GIL, as many as
``threads`` (default: Numba's thread count).  Batches run in SIMD lanes:
where many pairs share a query (database hits), steps 1 and 2 run ALN_LANES
subjects of one query at once (:func:`_lanes_pass`); otherwise PAIR_LANES
(8) independent pairs of similar lengths share one register of int32 lanes
(:func:`_make_pair_row_pass`, the substitution scores gathered per lane),
for steps 1 and 2 and for the direction-bit fill of step 3 (then each lane
is traced back on its own).  The lanes compute the very same cells as the
scalar code, so the alignments are identical (``pair_lanes=False`` runs the
scalar code).

GPU (``backend=``, :func:`pair_backend`, :func:`_batch_backend`): in local
and semi-global modes, steps 1 and 2 of a batch (the score-only passes) run
on the GPU (:func:`swgpu_tools.kernels.gpu.pair_regions`, one thread per
pair, the same cells and tie rules, so the alignments are identical) when
one is usable and, with ``"auto"``, when an estimate expects it to be faster
than the CPU, its start-up included; step 3, the traceback, then runs on the
CPU threads as above.  Global mode stays on the
CPU: it has no steps 1 and 2, and its traceback recomputes the whole matrix
anyway.  The ``ends`` argument is the hook for a forward pass run elsewhere:
each pair's (best, query end, subject end); the CPU then runs steps 2 and 3
(step 2 in pair lanes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .kernels.cpu import _make_column_pass, _splat, _vmax

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


@njit(cache=True, nogil=True, inline="always")
def _trace_step(t, state, i, j, pos, ops):
    """One step back through direction bits ``t`` of cell (i, j).

    state 0: in H (follow the H source), 1: in a D gap (E), 2: in an I gap (F).
    Writes an operation at ops[pos - 1] when it consumes a column; returns the
    new (state, i, j, pos).
    """
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
    return state, i, j, pos


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
        state, i, j, pos = _trace_step(bits[i - loaded - 1, j], state, i, j, pos, ops)
    return score, ops.shape[0] - pos


# ---------------------------------------------------------------------------
# pair lanes: PAIR_LANES independent pairs per SIMD register (batches)
# ---------------------------------------------------------------------------
#: Pairs aligned in lock-step by the batch passes (8 int32 lanes = one AVX2
#: register), each lane its own (query, subject) pair.
PAIR_LANES = 8
#: Substitution score of the padding letter (past the end of a shorter pair
#: of a group): cells there never win a local maximum and are never read by a
#: lane's own traceback.
_PAD_SCORE = -(1 << 20)
#: Whether batches use pair lanes (:func:`_align_batch`); the scalar passes
#: give the very same alignments (tests compare both).
PAIR_LANES_DEFAULT = True


def _make_pair_row_pass(clamp, track, keep_bits, ident=False):
    """Build an intrinsic computing one DP row for PAIR_LANES pairs (int32 lanes).

    ``_pass(rowoff, cols, mf, H, F, bits, n, hb, best, bi, bj, row, oe, ext)``:

    * rowoff: int32[8], the row letter of each lane times the row stride of
      ``mf`` (a flat int32 matrix); cols: uint8, the column letters, lane-
      interleaved (column j of lane l at [(j - 1) * 8 + l]); the substitution
      score is a gather ``mf[rowoff + col]``;
    * H, F: int32, lane-interleaved, columns 0..n: the previous row in, this
      row out; H[0] is replaced by the boundary ``hb`` (the same for every
      lane), after being read as the diagonal of column 1;
    * the cell recurrences and direction bits are those of :func:`_fill_rows`
      (E along the row, F along the column, ties as there); ``clamp``: H is
      at least 0 (local);
    * keep_bits: bits[j * 8 + l] gets the direction bits of column j;
    * track 1: per lane, the first maximum in column-major order (a cell
      replaces (best, bi, bj) if greater, or equal with a smaller column);
      track 2: the first maximum in row-major order (strictly greater);
      bi/bj get ``row`` and the column.
    * ident (match/mismatch matrices): no gather; ``rowoff`` holds the row
      letters themselves and mf = (match, mismatch, padding code): the score
      is match for equal letters, mismatch otherwise, _PAD_SCORE where either
      letter is the padding.
    """

    def typer(typingctx, rowoff, cols, mf, H, F, bits, ncols, hb, best, bi, bj, row, oe, ext):
        sig = types.void(rowoff, cols, mf, H, F, bits, types.int64, types.int64, best, bi, bj,
                         types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            tys = signature.args

            def arr(k):
                return context.make_array(tys[k])(context, builder, args[k])

            ro, ca, ma, ha, fa, ba = (arr(k) for k in range(6))
            i1, i8, i32, i64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
            L = PAIR_LANES
            v32 = ir.VectorType(i32, L)
            v64 = ir.VectorType(i64, L)
            v8 = ir.VectorType(i8, L)
            vptr = ir.VectorType(i32.as_pointer(), L)
            p32, p8 = v32.as_pointer(), v8.as_pointer()
            n = args[6]
            hb = _splat(builder, builder.trunc(args[7], i32), v32)
            oe_v = _splat(builder, builder.trunc(args[12], i32), v32)
            ext_v = _splat(builder, builder.trunc(args[13], i32), v32)
            rowoff = builder.load(builder.bitcast(ro.data, p32), align=4)
            hbase = builder.bitcast(ha.data, p32)
            fbase = builder.bitcast(fa.data, p32)
            cbase = builder.bitcast(ca.data, p8)
            bbase = builder.bitcast(ba.data, p8)
            gather = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(v32, [vptr, i32, ir.VectorType(i1, L), v32]),
                "llvm.masked.gather.v8i32.v8p0i32")
            mbase = _splat(builder, builder.ptrtoint(ma.data, i64), v64)
            all_on = ir.Constant(ir.VectorType(i1, L), [1] * L)
            four = ir.Constant(v64, [4] * L)
            zero = ir.Constant(v32, [0] * L)

            def const(x):
                return ir.Constant(v32, [x] * L)

            if ident:  # per row: padding rows score _PAD_SCORE everywhere
                mp = builder.bitcast(ma.data, i32.as_pointer())
                vals = [builder.load(builder.gep(mp, [ir.Constant(i64, k)])) for k in range(3)]
                padv = _splat(builder, vals[2], v32)
                pad_row = builder.icmp_signed("==", rowoff, padv)
                row_match = builder.select(pad_row, const(_PAD_SCORE), _splat(builder, vals[0], v32))
                row_mis = builder.select(pad_row, const(_PAD_SCORE), _splat(builder, vals[1], v32))
            diag0 = builder.load(hbase, align=4)
            builder.store(hb, hbase, align=4)
            if track:
                ptrs = [builder.bitcast(arr(k).data, p32) for k in (8, 9, 10)]
                carried0 = [builder.load(p, align=4) for p in ptrs]
                row_v = _splat(builder, builder.trunc(args[11], i32), v32)
            else:
                carried0 = []
            entry = builder.block
            loop = builder.append_basic_block("pair_row_loop")
            done = builder.append_basic_block("pair_row_done")
            builder.cbranch(builder.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)

            builder.position_at_end(loop)
            j = builder.phi(i64)
            diag = builder.phi(v32)
            hl = builder.phi(v32)
            e = builder.phi(v32)
            carried = [builder.phi(v32) for _ in carried0]
            col = builder.load(builder.gep(cbase, [builder.sub(j, ir.Constant(i64, 1))]), align=1)
            if ident:
                colv = builder.zext(col, v32)
                sub = builder.select(builder.icmp_signed("==", rowoff, colv), row_match, row_mis)
                sub = builder.select(builder.icmp_signed("==", colv, padv), const(_PAD_SCORE), sub)
            else:
                idx = builder.zext(builder.add(rowoff, builder.zext(col, v32)), v64)
                addrs = builder.inttoptr(builder.add(mbase, builder.mul(idx, four)), vptr)
                sub = builder.call(gather, [addrs, ir.Constant(i32, 4), all_on, zero])
            e_ext = builder.sub(e, ext_v)
            e_open = builder.sub(hl, oe_v)
            ce = builder.icmp_signed(">", e_ext, e_open)
            e2 = builder.select(ce, e_ext, e_open)
            hp = builder.gep(hbase, [j])
            fp = builder.gep(fbase, [j])
            up = builder.load(hp, align=4)
            f_ext = builder.sub(builder.load(fp, align=4), ext_v)
            f_open = builder.sub(up, oe_v)
            cf = builder.icmp_signed(">", f_ext, f_open)
            f2 = builder.select(cf, f_ext, f_open)
            hd = builder.add(diag, sub)
            be = builder.icmp_signed(">", e2, hd)
            h = builder.select(be, e2, hd)
            bf = builder.icmp_signed(">", f2, h)
            h = builder.select(bf, f2, h)
            if clamp:
                h = _vmax(builder, h, zero)
            builder.store(h, hp, align=4)
            builder.store(f2, fp, align=4)
            if keep_bits:
                t = builder.select(bf, const(_H_FROM_F), builder.select(be, const(_H_FROM_E), zero))
                t = builder.or_(t, builder.select(ce, const(_E_EXTEND), zero))
                t = builder.or_(t, builder.select(cf, const(_F_EXTEND), zero))
                builder.store(builder.trunc(t, v8), builder.gep(bbase, [j]), align=1)
            new = []
            if track:
                b0, bi0, bj0 = carried
                j_v = _splat(builder, builder.trunc(j, i32), v32)
                better = builder.icmp_signed(">", h, b0)
                if track == 1:
                    tie = builder.and_(builder.icmp_signed("==", h, b0),
                                       builder.icmp_signed("<", j_v, bj0))
                    better = builder.or_(better, tie)
                new = [builder.select(better, h, b0), builder.select(better, row_v, bi0),
                       builder.select(better, j_v, bj0)]
            j_next = builder.add(j, ir.Constant(i64, 1))
            j.add_incoming(ir.Constant(i64, 1), entry)
            j.add_incoming(j_next, loop)
            diag.add_incoming(diag0, entry)
            diag.add_incoming(up, loop)
            hl.add_incoming(hb, entry)
            hl.add_incoming(h, loop)
            e.add_incoming(const(_NEG), entry)
            e.add_incoming(e2, loop)
            for phi, v0, v1 in zip(carried, carried0, new):
                phi.add_incoming(v0, entry)
                phi.add_incoming(v1, loop)
            builder.cbranch(builder.icmp_signed("<=", j_next, n), loop, done)

            builder.position_at_end(done)
            if track:
                outs = []
                for v0, v1 in zip(carried0, new):  # phis first, then stores
                    o = builder.phi(v32)
                    o.add_incoming(v0, entry)
                    o.add_incoming(v1, loop)
                    outs.append(o)
                for p, o in zip(ptrs, outs):
                    builder.store(o, p, align=4)
            return context.get_dummy_value()

        return sig, codegen

    name = f"_pair_row_pass_c{int(clamp)}_t{track}_b{int(keep_bits)}_i{int(ident)}"
    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


_pair_row_fill = _make_pair_row_pass(False, 0, True)
_pair_row_global = _make_pair_row_pass(False, 0, False)
_pair_row_local = _make_pair_row_pass(True, 2, False)
_pair_row_fill_id = _make_pair_row_pass(False, 0, True, True)
_pair_row_global_id = _make_pair_row_pass(False, 0, False, True)
_pair_row_local_id = _make_pair_row_pass(True, 2, False, True)


def _pair_matrix(matrix, transpose=False):
    """The pair lanes' matrix: (flat int32 array, row stride w, identity flag).

    A match/mismatch matrix (one value on the diagonal, one elsewhere) gives
    (match, mismatch, padding code), w = 1 and True: the lanes compare letters
    instead of gathering scores.  Any other matrix gives the flat matrix with
    one more letter (code na, the padding, scoring _PAD_SCORE), w = na + 1
    and False.  The padding code is na in both cases.
    """
    na = matrix.shape[0]
    diag = np.diag(matrix)
    off = matrix[~np.eye(na, dtype=bool)]
    if na >= 2 and np.all(diag == diag[0]) and np.all(off == off[0]):
        return np.array([diag[0], off[0], na], dtype=np.int32), 1, True
    ext = np.full((na + 1, na + 1), _PAD_SCORE, dtype=np.int32)
    ext[:na, :na] = matrix.T if transpose else matrix
    return ext.ravel().copy(), na + 1, False


@njit(cache=True, nogil=True, boundscheck=False)
def _pl_pack(codes, starts, lens, nl, width, reverse, pad):
    """Lane-interleaved letters: out[k * PAIR_LANES + l] = k-th letter of lane l (or pad)."""
    out = np.full(max(1, width) * PAIR_LANES, pad, dtype=np.uint8)
    for l in range(nl):
        st = starts[l]
        ln = lens[l]
        for k in range(ln):
            out[k * PAIR_LANES + l] = codes[st + ln - 1 - k] if reverse else codes[st + k]
    return out


@njit(cache=True, nogil=True, boundscheck=False)
def _pl_rowoff(rows, i, w, rowoff):
    for l in range(PAIR_LANES):
        rowoff[l] = np.int32(rows[(i - 1) * PAIR_LANES + l]) * w


@njit(cache=True, nogil=True, boundscheck=False)
def _pl_state(n):
    """Score rows of a pair-lane pass over n columns: H, F ((n + 1) x PAIR_LANES), the
    per-lane best (value, row, column), no direction bits, and the row offsets."""
    L = PAIR_LANES
    H = np.zeros((n + 1) * L, dtype=np.int32)
    F = np.full((n + 1) * L, _NEG, dtype=np.int32)
    tb = np.zeros(L, dtype=np.int32)
    ti = np.zeros(L, dtype=np.int32)
    tj = np.zeros(L, dtype=np.int32)
    nobits = np.zeros(0, dtype=np.uint8)
    rowoff = np.empty(L, dtype=np.int32)
    return H, F, tb, ti, tj, nobits, rowoff


@njit(cache=True, nogil=True, boundscheck=False)
def _pl_forward(qcodes, qst, qln, scodes, sst, sln, nl, mf, mft, w, ident, pad, gap_open,
                gap_extend, mode, best, qe, se):
    """Forward pass of up to PAIR_LANES pairs: best and end (exclusive) per lane.

    Local: first maximum in column-major order (as :func:`_forward_end`): the
    pass runs transposed (rows are subject positions, with the transposed
    matrix ``mft``), where that is the first maximum in row-major order.
    Semi-global: best cell of each lane's last row, smallest subject end (as
    :func:`_forward_end_semi`).
    """
    L = PAIR_LANES
    local = mode == MODE_LOCAL
    m = 0
    n = 0
    for l in range(nl):
        m = max(m, sln[l] if local else qln[l])
        n = max(n, qln[l] if local else sln[l])
    if local:
        rows = _pl_pack(scodes, sst, sln, nl, m, False, pad)
        cols = _pl_pack(qcodes, qst, qln, nl, n, False, pad)
    else:
        rows = _pl_pack(qcodes, qst, qln, nl, m, False, pad)
        cols = _pl_pack(scodes, sst, sln, nl, n, False, pad)
    H, F, tb, ti, tj, nobits, rowoff = _pl_state(n)
    oe = gap_open + gap_extend
    for l in range(nl):
        best[l] = 0
        qe[l] = 0
        se[l] = 0
    for i in range(1, m + 1):
        _pl_rowoff(rows, i, w, rowoff)
        if local and ident:
            _pair_row_local_id(rowoff, cols, mft, H, F, nobits, n, 0, tb, ti, tj, i, oe,
                               gap_extend)
        elif local:
            _pair_row_local(rowoff, cols, mft, H, F, nobits, n, 0, tb, ti, tj, i, oe, gap_extend)
        else:
            if ident:
                _pair_row_global_id(rowoff, cols, mf, H, F, nobits, n,
                                    -(gap_open + i * gap_extend), tb, ti, tj, i, oe, gap_extend)
            else:
                _pair_row_global(rowoff, cols, mf, H, F, nobits, n, -(gap_open + i * gap_extend),
                                 tb, ti, tj, i, oe, gap_extend)
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
def _pl_reverse(qcodes, qst, scodes, sst, nl, mft, w, ident, pad, gap_open, gap_extend, mode,
                best, qe, se, span_q, span_s):
    """Reverse pass of up to PAIR_LANES pairs: the spans of the start (tie rules of the module doc).

    Rows are the reversed subject prefixes s[:se] (subject span b), columns
    the reversed query prefixes q[:qe] (query span a), with the transposed
    matrix ``mft``, so that row-major order is the column-major order of
    :func:`_reverse_start`; stops once every lane has its start.  Local: the
    reversed local alignment with a bonus of 1 into the anchor cell (as
    :func:`_lanes_pass`); the first cell reaching best + 1.  Semi-global:
    global DP, the first row b with G[b][qe] == best.  Returns False if a lane
    found nothing (cannot happen; the caller then uses the scalar pass).
    """
    L = PAIR_LANES
    m = 0
    n = 0
    for l in range(nl):
        m = max(m, se[l])
        n = max(n, qe[l])
    rows = _pl_pack(scodes, sst, se, nl, m, True, pad)
    cols = _pl_pack(qcodes, qst, qe, nl, n, True, pad)
    H, F, tb, ti, tj, nobits, rowoff = _pl_state(n)
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
        _pl_rowoff(rows, b, w, rowoff)
        if mode == MODE_LOCAL:
            if ident:
                _pair_row_local_id(rowoff, cols, mft, H, F, nobits, n, 0, tb, ti, tj, b, oe,
                                   gap_extend)
            else:
                _pair_row_local(rowoff, cols, mft, H, F, nobits, n, 0, tb, ti, tj, b, oe,
                                gap_extend)
            for l in range(nl):
                if not found[l] and tb[l] > best[l]:
                    found[l] = True
                    remaining -= 1
                    span_q[l] = tj[l]
                    span_s[l] = ti[l]
        else:
            if ident:
                _pair_row_global_id(rowoff, cols, mft, H, F, nobits, n,
                                    -(gap_open + b * gap_extend), tb, ti, tj, b, oe, gap_extend)
            else:
                _pair_row_global(rowoff, cols, mft, H, F, nobits, n,
                                 -(gap_open + b * gap_extend), tb, ti, tj, b, oe, gap_extend)
            for l in range(nl):
                if not found[l] and b <= se[l] and H[qe[l] * L + l] == best[l]:
                    found[l] = True
                    remaining -= 1
                    span_q[l] = qe[l]
                    span_s[l] = b
    return remaining == 0


@njit(cache=True, nogil=True, boundscheck=False)
def _pl_traceback(qcodes, qst, qln, scodes, sst, sln, nl, mf, w, ident, pad, gap_open,
                  gap_extend, ops, room_end, scores, counts):
    """Global alignments (traceback) of up to PAIR_LANES segment pairs (all non-empty).

    One lane-interleaved fill with direction bits (1 byte per cell and lane,
    as :func:`_traceback` without checkpoints: the caller keeps groups small),
    then each lane's traceback with the rule of :func:`_traceback`; lane l
    writes its ops backwards ending at ops[room_end[l]].
    """
    L = PAIR_LANES
    m = 0
    n = 0
    for l in range(nl):
        m = max(m, qln[l])
        n = max(n, sln[l])
    rows = _pl_pack(qcodes, qst, qln, nl, m, False, pad)
    cols = _pl_pack(scodes, sst, sln, nl, n, False, pad)
    stride = (n + 1) * L
    H = np.empty(stride, dtype=np.int32)
    F = np.full(stride, _NEG, dtype=np.int32)
    for j in range(n + 1):
        for l in range(L):
            H[j * L + l] = -(gap_open + j * gap_extend) if j > 0 else 0
    bits = np.empty((m, stride), dtype=np.uint8)
    d = np.zeros(L, dtype=np.int32)
    rowoff = np.empty(L, dtype=np.int32)
    oe = gap_open + gap_extend
    for i in range(1, m + 1):
        _pl_rowoff(rows, i, w, rowoff)
        if ident:
            _pair_row_fill_id(rowoff, cols, mf, H, F, bits[i - 1], n,
                              -(gap_open + i * gap_extend), d, d, d, i, oe, gap_extend)
        else:
            _pair_row_fill(rowoff, cols, mf, H, F, bits[i - 1], n, -(gap_open + i * gap_extend),
                           d, d, d, i, oe, gap_extend)
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
                ops[pos] = _OP_D
                j -= 1
                continue
            if j == 0:
                pos -= 1
                ops[pos] = _OP_I
                i -= 1
                continue
            state, i, j, pos = _trace_step(bits[i - 1, j * L + l], state, i, j, pos, ops)
        counts[l] = room_end[l] - pos


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


@njit(cache=True, nogil=True, boundscheck=False)
def _locate_group(qcodes, qoff, scodes, soff, qidx, sidx, ks, mf, mft, w, ident, matrix,
                  gap_open, gap_extend, mode, info, ends):
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
        _pl_forward(qcodes, qst, qln, scodes, sst, sln, nl, mf, mft, w, ident, pad, gap_open,
                    gap_extend, mode, best, qe, se)
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
        ok = _pl_reverse(qcodes, rqs, scodes, rss, nlive, mft, w, ident, pad, gap_open,
                         gap_extend, mode, rb, rq, rs, a, b)
    for r in range(nlive):
        l = live[r]
        if not ok:  # cannot happen; the scalar pass to be safe
            q = qcodes[qst[l]:qst[l] + qln[l]]
            s = scodes[sst[l]:sst[l] + sln[l]]
            a[r], b[r] = _reverse_start(q, s, qe[l], se[l], best[l], matrix, gap_open,
                                        gap_extend, mode == MODE_SEMIGLOBAL)
        k = ks[l]
        info[k, 0] = best[l]
        info[k, 1] = qe[l] - a[r]
        info[k, 2] = qe[l]
        info[k, 3] = se[l] - b[r]
        info[k, 4] = se[l]


@njit(cache=True, nogil=True, boundscheck=False)
def _traceback_group(qcodes, qoff, scodes, soff, qidx, sidx, ks, mf, w, ident, pad, gap_open,
                     gap_extend, info, ops, room):
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
    _pl_traceback(qcodes, qst, qln, scodes, sst, sln, nl, mf, w, ident, pad, gap_open,
                  gap_extend, ops, end, scores, counts)
    return scores, counts


@njit(cache=True, nogil=True, boundscheck=False)
def _locate_chunk_scalar(c, nchunks, qcodes, qoff, scodes, soff, qidx, sidx, matrix,
                         gap_open, gap_extend, mode, ends, perm, info):
    """Locate the regions of chunk c's pairs one by one, scalar passes (from ``ends`` if given)."""
    given = ends.shape[0] == qidx.shape[0]
    for t in range(c, perm.shape[0], nchunks):
        k = perm[t]
        q = qcodes[qoff[qidx[k]]:qoff[qidx[k] + 1]]
        s = scodes[soff[sidx[k]]:soff[sidx[k] + 1]]
        if given:
            r = _start_from_end(q, s, ends[k, 0], ends[k, 1], ends[k, 2], matrix, gap_open,
                                gap_extend, mode)
        else:
            r = _locate(q, s, matrix, gap_open, gap_extend, mode)
        for col in range(5):
            info[k, col] = r[col]


@njit(cache=True, nogil=True, boundscheck=False)
def _locate_chunk_query(c, nchunks, qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open,
                        gap_extend, perm, item_start, info):
    """Local regions of chunk c's items, pairs of one query in query-shared lanes."""
    narrow_ok = _fits_int16(matrix, gap_open, gap_extend)
    for t in range(c, item_start.shape[0] - 1, nchunks):
        ks = perm[item_start[t]:item_start[t + 1]]
        qi = qidx[ks[0]]
        q = qcodes[qoff[qi]:qoff[qi + 1]]
        subjects = np.empty(ks.shape[0], dtype=np.int64)
        for l in range(ks.shape[0]):
            subjects[l] = sidx[ks[l]]
        res = _locate_lanes(q, scodes, soff, subjects, matrix, gap_open, gap_extend, narrow_ok)
        for l in range(ks.shape[0]):
            for col in range(5):
                info[ks[l], col] = res[l, col]


@njit(cache=True, nogil=True, boundscheck=False)
def _locate_chunk_pairs(c, nchunks, qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open,
                        gap_extend, mode, perm, item_start, mf, mft, w, ident, info, ends):
    """Regions of chunk c's groups of PAIR_LANES pairs, in pair lanes (from ``ends`` if given)."""
    for t in range(c, item_start.shape[0] - 1, nchunks):
        ks = perm[item_start[t]:item_start[t + 1]]
        _locate_group(qcodes, qoff, scodes, soff, qidx, sidx, ks, mf, mft, w, ident, matrix,
                      gap_open, gap_extend, mode, info, ends)


@njit(cache=True, nogil=True, boundscheck=False)
def _traceback_chunk(c, nchunks, qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open,
                     gap_extend, cell_limit, mode, perm, item_start, ngroups, mf, w, ident, info,
                     ops, room):
    """Traceback of chunk c's work items: groups in pair lanes, then single regions."""
    nitems = item_start.shape[0] - 1
    for t in range(c, nitems, nchunks):
        ks = perm[item_start[t]:item_start[t + 1]]
        if t < ngroups:
            scores, counts = _traceback_group(qcodes, qoff, scodes, soff, qidx, sidx, ks, mf, w,
                                              ident, matrix.shape[0], gap_open, gap_extend,
                                              info, ops, room)
        else:
            scores = np.zeros(1, dtype=np.int64)
            counts = np.zeros(1, dtype=np.int64)
            k = ks[0]
            q = qcodes[qoff[qidx[k]] + info[k, 1]:qoff[qidx[k]] + info[k, 2]]
            s = scodes[soff[sidx[k]] + info[k, 3]:soff[sidx[k]] + info[k, 4]]
            scores[0], counts[0] = _traceback(q, s, matrix, gap_open, gap_extend, cell_limit,
                                              ops[room[k]:room[k + 1]])
        for l in range(ks.shape[0]):
            k = ks[l]
            info[k, 5] = counts[l]
            if mode == MODE_GLOBAL:
                info[k, 0] = scores[l]
            elif scores[l] != info[k, 0]:
                info[k, 5] = -1  # must not happen; reported by the caller


def _run_chunks(fn, nchunks, nthreads, *args):
    """Run fn(c, nchunks, *args) for every chunk c on ``nthreads`` threads.

    The chunk functions are Numba-compiled with ``nogil=True``, so the
    threads run in parallel; each chunk takes every nchunks-th work item.
    (A thread pool rather than Numba's ``prange``: each parallel Numba
    function costs seconds of compilation, and the result is the same.)
    """
    if nchunks <= 0:
        return
    if nthreads <= 1 or nchunks == 1:
        for c in range(nchunks):
            fn(c, nchunks, *args)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(nthreads, nchunks)) as pool:
        for _ in pool.map(lambda c: fn(c, nchunks, *args), range(nchunks)):
            pass


def _shape_order(alen, blen, eligible):
    """Eligible pair indices ordered so that PAIR_LANES consecutive ones have similar shapes.

    Key: the first length in buckets of 32, then the second length.
    """
    idx = np.flatnonzero(eligible)
    return idx[np.lexsort((blen[idx], alen[idx] // 32))].astype(np.int64)


def _items(order, size):
    """item_start over ``order`` in items of ``size``."""
    return np.r_[np.arange(0, len(order), size), len(order)].astype(np.int64)


def _align_batch(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                 cell_limit, nthreads, mode, ends, query_lanes, pair_lanes):
    """Align pairs (qidx[k], sidx[k]) in ``mode``; returns (info, ops, room).

    info[k] = (score, qs, qe, ss, se, number of ops); pair k's ops are
    ops[room[k + 1] - count:room[k + 1]].  Locating the regions (steps 1-2 of
    the module doc):

    * ``ends`` given ((n, 3) int64: best, query end, subject end per pair from
      an external forward pass, e.g. :func:`swgpu_tools.kernels.gpu.pair_ends`;
      else shape (0, 3)): the reverse pass only, PAIR_LANES pairs of similar
      end cells at once with ``pair_lanes`` (:func:`_locate_group`), else
      pair by pair; (n, 5) (best, qs, qe, ss, se per pair, e.g.
      :func:`swgpu_tools.kernels.gpu.pair_regions`): nothing to locate;
    * global mode: nothing to locate;
    * local mode with ``query_lanes`` (many pairs per query, e.g. database
      hits): pairs of one query, ALN_LANES at a time, in query-shared lanes
      (:func:`_locate_lanes`);
    * otherwise, with ``pair_lanes``: PAIR_LANES pairs of similar shapes at
      once (:func:`_locate_group`); without: scalar passes, pair by pair.

    Traceback (step 3): regions of similar shapes PAIR_LANES at a time
    (:func:`_traceback_group`) where the group's direction bytes fit
    ``cell_limit``; larger regions one at a time with checkpoints
    (:func:`_traceback`).  Work items are dealt round-robin to 4 chunks per
    thread, run on ``nthreads`` threads (:func:`_run_chunks`).
    """
    n = len(qidx)
    nchunks = 4 * nthreads
    qlen = qoff[qidx + 1] - qoff[qidx]
    slen = soff[sidx + 1] - soff[sidx]
    info = np.zeros((n, 6), dtype=np.int64)
    mf, w, ident = _pair_matrix(matrix)
    mft = _pair_matrix(matrix, transpose=True)[0]
    given = ends.shape[0] == n
    if mode == MODE_GLOBAL:
        info[:, 2] = qlen
        info[:, 4] = slen
    elif given and ends.shape[1] == 5:  # whole regions given (GPU forward + reverse passes)
        info[:, :5] = ends
    else:
        if given and pair_lanes:
            # reverse passes only: groups of similar end cells (the reversed prefixes)
            perm = _shape_order(ends[:, 2], ends[:, 1], np.ones(n, dtype=bool))
            item_start = _items(perm, PAIR_LANES)
            _run_chunks(_locate_chunk_pairs, min(nchunks, len(item_start) - 1), nthreads,
                        qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                        mode, perm, item_start, mf, mft, w, ident, info, ends)
        elif given or not (pair_lanes or (query_lanes and mode == MODE_LOCAL)):
            _run_chunks(_locate_chunk_scalar, min(nchunks, n), nthreads, qcodes, qoff, scodes,
                        soff, qidx, sidx, matrix, gap_open, gap_extend, mode, ends,
                        np.argsort(-(qlen * slen), kind="stable"), info)
        elif mode == MODE_LOCAL and query_lanes:
            # pairs of one query, similar subject lengths, ALN_LANES at a time
            perm = np.lexsort((-slen, qidx)).astype(np.int64)
            new_query = np.flatnonzero(np.diff(qidx[perm])) + 1
            bounds = [0]
            for lo, hi in zip(np.r_[0, new_query], np.r_[new_query, len(perm)]):
                bounds.extend(range(int(lo) + ALN_LANES, int(hi), ALN_LANES))
                bounds.append(int(hi))
            item_start = np.asarray(bounds, dtype=np.int64)
            _run_chunks(_locate_chunk_query, min(nchunks, len(item_start) - 1), nthreads,
                        qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                        perm, item_start, info)
        else:
            perm = _shape_order(qlen, slen, np.ones(n, dtype=bool))
            item_start = _items(perm, PAIR_LANES)
            _run_chunks(_locate_chunk_pairs, min(nchunks, len(item_start) - 1), nthreads,
                        qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                        mode, perm, item_start, mf, mft, w, ident, info, ends)
    rq = info[:, 2] - info[:, 1]
    rs = info[:, 4] - info[:, 3]
    room = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(rq + rs, out=room[1:])
    ops = np.zeros(int(room[n]), dtype=np.uint8)
    todo = (info[:, 0] > 0) | (mode != MODE_LOCAL)
    lanes_ok = np.zeros(n, dtype=bool)
    if pair_lanes:
        lanes_ok = todo & (rq > 0) & (rs > 0) & (rq * (rs + 1) * PAIR_LANES <= cell_limit)
    order = _shape_order(rq, rs, lanes_ok)
    # groups of up to PAIR_LANES regions whose padded shape fits cell_limit
    bounds = [0]
    g = 0
    oq, os_ = rq[order].tolist(), rs[order].tolist()
    while g < len(order):
        h, mq, ms = g + 1, oq[g], os_[g]
        while h < len(order) and h - g < PAIR_LANES:
            mq2, ms2 = max(mq, oq[h]), max(ms, os_[h])
            if mq2 * (ms2 + 1) * PAIR_LANES > cell_limit:
                break
            mq, ms, h = mq2, ms2, h + 1
        bounds.append(h)
        g = h
    ngroups = len(bounds) - 1
    singles = np.flatnonzero(todo & ~lanes_ok)
    perm = np.r_[order, singles].astype(np.int64)
    item_start = np.r_[np.asarray(bounds, dtype=np.int64),
                       len(order) + np.arange(1, len(singles) + 1)].astype(np.int64)
    _run_chunks(_traceback_chunk, min(nchunks, len(item_start) - 1), nthreads, qcodes, qoff,
                scodes, soff, qidx, sidx, matrix, gap_open, gap_extend, cell_limit, mode, perm,
                item_start, ngroups, mf, w, ident, info, ops, room)
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
               cell_limit: int | None = None, mode: str = "local", ends=None,
               pair_lanes: bool | None = None, backend: str = "auto",
               stats: dict | None = None) -> list[Alignment]:
    """Align the pairs (queries[query_index[k]], database[subject_index[k]]) in parallel.

    queries, database: :class:`~swgpu_tools.sequences.EncodedSequences`.
    threads: Numba threads to use (default: the current setting).
    cell_limit: traceback bytes per alignment before checkpointing (default
    :data:`TRACEBACK_CELL_LIMIT` divided among the threads).
    mode, ends, pair_lanes, backend, stats: as in :func:`align_pairs`.
    Returns one :class:`Alignment` per pair, in input order.
    """
    return _align_arrays(queries.codes, queries.offsets, database.codes, database.offsets,
                         query_index, subject_index, matrix, gap_open, gap_extend,
                         threads, cell_limit, mode, ends, pair_lanes, backend, stats)


def align_pairs(pairs, matrix, gap_open: int, gap_extend: int, threads: int | None = None,
                *, cell_limit: int | None = None, mode: str = "local", ends=None,
                pair_lanes: bool | None = None, backend: str = "auto",
                stats: dict | None = None) -> list[Alignment]:
    """Align ``(query_codes, subject_codes)`` pairs in parallel (see :func:`align_many`).

    mode: ``"local"``, ``"global"`` or ``"semiglobal"`` (see :func:`align`).

    backend: where the score-only passes (steps 1 and 2 of the module doc:
    the best score, the end and the start of each alignment) run: ``"auto"``
    (the GPU when :mod:`swgpu_tools.backend` finds one usable, the mode is
    local or semi-global and the GPU is expected to be faster for the batch,
    start-up included, :func:`_batch_backend`; else the CPU), ``"gpu"`` (raises
    :class:`~swgpu_tools.errors.InputError` when no GPU is usable; global
    mode still runs on the CPU) or ``"cpu"``.  The traceback always runs on
    the CPU threads.  The alignments are the same whichever backend runs
    (see :func:`pair_backend`).

    ends (the hook for an external forward pass; overrides ``backend``): an
    (n, 3) integer array of (best score, query end, subject end) per pair,
    ends exclusive, as the forward pass would find them (the tie rules of the
    module doc).  The CPU forward pass is then skipped; the reverse pass and
    the traceback still run here.  Local and semi-global modes only (global
    mode has no forward pass); for semi-global the query end is the query
    length.

    pair_lanes: run the passes PAIR_LANES pairs at a time in SIMD lanes
    (default :data:`PAIR_LANES_DEFAULT`); False: scalar passes, pair by pair.
    Both give the very same alignments.

    stats: a dict that gets ``backend`` ("cpu", "gpu" or "ends"), ``reason``,
    (with ``"auto"``, a batch whose GPU passes fail runs on the CPU and the
    reason says why), and seconds: ``gpu_s`` (GPU score passes with their
    transfers),
    ``cpu_s`` (everything else) and ``gpu`` (the GPU step's own timings).
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
                         threads, cell_limit, mode, ends, pair_lanes, backend, stats)


#: Backends of the forward pass (``backend=`` of :func:`align_pairs`).
BACKENDS = ("auto", "cpu", "gpu")
_gpu_status_cache: list = []
#: Rates behind ``backend="auto"``'s estimate (:func:`_gpu_pays`), from the
#: H100 runs in benchmarks/RESULTS-align.md section 4: one GPU thread aligns
#: one pair (>= 4e7 cells/s measured), the whole GPU ~3e11 cells/s, a CPU
#: thread's score passes ~1e9 cells/s.  Start-up in a new process: the GPU
#: check (numba.cuda, driver, NVVM: GPU_CHECK_S, ~0.6 s measured in run 4) and
#: the first launches (context, kernels from the disk cache: GPU_LOAD_S, ~0.5 s).
#: (Runs 1-3 measured 2.5 s and 1 s: their device install had no byte-compiled
#: packages, which a pip install has.)
GPU_THREAD_CELLS_PER_S = 3e7
GPU_CELLS_PER_S = 2.5e11
CPU_THREAD_CELLS_PER_S = 1e9
GPU_CHECK_S = 0.8
GPU_LOAD_S = 0.5
_gpu_used: list = []


def _gpu_start_s() -> float:
    """Seconds of GPU start-up this process has still to pay (check, first launches)."""
    return (0.0 if _gpu_status_cache else GPU_CHECK_S) + (0.0 if _gpu_used else GPU_LOAD_S)


def _gpu_pays(cells: int, max_cells: int, nthreads: int):
    """(GPU expected faster, GPU estimate s, CPU estimate s) for the score passes of a batch.

    Two passes (forward, reverse) each way; the GPU's time is bounded below by
    its longest pair (one thread per pair) and includes the start-up this
    process has still to pay.  So ``"auto"`` keeps small batches and batches
    of a few long pairs on the CPU.
    """
    gpu = 2 * (max_cells / GPU_THREAD_CELLS_PER_S + cells / GPU_CELLS_PER_S) + _gpu_start_s()
    cpu = 2 * cells / (CPU_THREAD_CELLS_PER_S * max(1, nthreads))
    return gpu < cpu, gpu, cpu


def _batch_backend(backend, mode, qlen, slen, nthreads):
    """The BackendChoice for one batch: :func:`pair_backend`, with the estimate for "auto".

    "auto" does not even check for a GPU (seconds in a new process) when the
    CPU's score passes are expected to take less than the GPU's start-up.
    """
    from .backend import BackendChoice

    if str(backend).lower() != "auto" or _mode_code(mode) == MODE_GLOBAL:
        return pair_backend(backend, mode)
    cells = qlen * slen
    total, most = int(cells.sum()), int(cells.max())
    est_cpu = 2 * total / (CPU_THREAD_CELLS_PER_S * max(1, nthreads))
    start = _gpu_start_s()
    if est_cpu <= start:
        return BackendChoice("cpu", f"small batch: CPU score passes ~{est_cpu:.2f} s on "
                                    f"{nthreads} threads, less than the GPU's start-up in this "
                                    f"process (~{start:.1f} s); GPU not checked")
    choice = pair_backend(backend, mode)
    if choice.name != "gpu":
        return choice
    pays, est_gpu, est_cpu = _gpu_pays(total, most, nthreads)
    if not pays:
        return BackendChoice("cpu", f"GPU usable, but the CPU is expected to be faster for "
                                    f"this batch (score passes: GPU ~{est_gpu:.2f} s with one "
                                    f"thread per pair and its start-up, CPU ~{est_cpu:.2f} s "
                                    f"on {nthreads} threads)")
    return BackendChoice("gpu", f"{choice.reason}; estimate for the score passes: GPU "
                                f"~{est_gpu:.2f} s, CPU ~{est_cpu:.2f} s on {nthreads} threads")


def pair_backend(backend: str = "auto", mode: str = "local"):
    """Where the score passes of a batch run: a BackendChoice ("gpu" or "cpu", reason).

    "auto": the GPU when :func:`swgpu_tools.backend.choose_backend` finds one
    usable and ``mode`` is local or semi-global (and then, per batch, when the
    GPU is expected to be faster: :func:`_batch_backend`); "gpu": the same but
    raises InputError (with the reason) when no GPU is usable; "cpu": the
    CPU.
    Global mode always runs on the CPU (no score pass to move: its
    traceback recomputes the whole matrix).  Under the CUDA simulator
    (``NUMBA_ENABLE_CUDASIM=1``, tests) "gpu" runs the kernels in the
    simulator.  The GPU check (:func:`swgpu_tools.backend.gpu_status`) is done
    once per process; "gpu" without a usable GPU raises through
    :func:`swgpu_tools.backend.choose_backend`.
    """
    from .backend import BackendChoice, choose_backend, gpu_status
    from .errors import InputError

    backend = str(backend).lower()
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got '{backend}'")
    if backend == "cpu":
        return BackendChoice("cpu", "CPU backend requested")
    if _mode_code(mode) == MODE_GLOBAL:
        return BackendChoice("cpu", "global mode runs on the CPU (no score pass to move to "
                                    "the GPU: its traceback recomputes the whole matrix)")
    if backend == "gpu":
        from .kernels.gpu_intrinsics import SIM

        if SIM:
            return BackendChoice("gpu", "CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    if not _gpu_status_cache:
        _gpu_status_cache.append(gpu_status())
    ok, why = _gpu_status_cache[0]
    if ok:
        return BackendChoice("gpu", f"score passes on the GPU: {why}")
    return choose_backend(backend) if backend == "gpu" else BackendChoice(
        "cpu", f"no usable GPU, using the CPU: {why}")


def _align_arrays(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                  threads, cell_limit, mode="local", ends=None, pair_lanes=None,
                  backend="auto", stats=None):
    import time

    import numba

    t_start = time.perf_counter()
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
    if stats is None:
        stats = {}
    stats["gpu_s"] = 0.0
    choice = None
    if ends is None:
        choice = "to choose"
        ends = np.zeros((0, 3), dtype=np.int64)
    else:
        stats["backend"], stats["reason"] = "ends", "end cells given (ends=...)"
        choice = None
        ends = np.ascontiguousarray(ends, dtype=np.int64)
        if code == MODE_GLOBAL:
            raise ValueError("ends are for local and semi-global modes only")
        if ends.shape != (len(qidx), 3):
            raise ValueError(f"ends must have shape ({len(qidx)}, 3), got {ends.shape}")
    if pair_lanes is None:
        pair_lanes = PAIR_LANES_DEFAULT
    qlen = qoff[qidx + 1] - qoff[qidx]
    slen = soff[sidx + 1] - soff[sidx]
    _check_range(int((qlen + slen).max()), matrix, gap_open, gap_extend)
    nthreads = numba.get_num_threads() if threads is None else max(1, int(threads))
    if choice is not None:
        choice = _batch_backend(backend, mode, qlen, slen, nthreads)
        stats["backend"], stats["reason"] = choice.name, choice.reason
    if choice is not None and choice.name == "gpu":
        from .kernels import gpu

        t0 = time.perf_counter()
        stats["gpu"] = {}
        try:
            ends = gpu.pair_regions(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open,
                                    gap_extend, "local" if code == MODE_LOCAL else "semiglobal",
                                    timings=stats["gpu"])
        except Exception as exc:  # e.g. no GPU memory left: "auto" falls back to the CPU
            if str(backend).lower() != "auto":
                raise
            stats["backend"] = "cpu"
            stats["reason"] = (f"the GPU failed ({type(exc).__name__}: {exc}); "
                               f"the CPU ran the batch")
        else:
            _gpu_used.append(True)
        stats["gpu_s"] = time.perf_counter() - t0
    if cell_limit is None:
        cell_limit = max(1 << 22, TRACEBACK_CELL_LIMIT // nthreads)
    # query-shared lanes where pairs share queries (database hits), else pair lanes
    query_lanes = len(qidx) >= 4 * len(np.unique(qidx))
    info, ops, room = _align_batch(
        np.ascontiguousarray(qcodes, dtype=np.uint8), qoff,
        np.ascontiguousarray(scodes, dtype=np.uint8), soff,
        qidx, sidx, matrix, gap_open, gap_extend, max(1, int(cell_limit)), nthreads,
        code, ends, bool(query_lanes), bool(pair_lanes))
    out = _results(info, ops, room)
    stats["cpu_s"] = time.perf_counter() - t_start - stats["gpu_s"]
    return out
