"""Scalar score-only passes of one pair (int32, exact): the end and the start of an alignment.

Steps 1 and 2 of :mod:`swgpu_tools.alignment` for one pair, and the scalar
reference of the lane engines (:mod:`.query_lanes`, :mod:`.pair_lanes`), which
compute the very same cells with the same tie rules.  :func:`forward_end` is
the one scalar Gotoh of the package (the CPU search kernel rescoring its
saturated lanes uses it too).

Rows are query positions, columns subject positions; E runs along the
subject (op D), F along the query; a gap of k costs ``gap_open + k *
gap_extend``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cells import NEG
from .modes import MODE_GLOBAL, MODE_SEMIGLOBAL


@njit(cache=True, nogil=True, boundscheck=False)
def forward_end(q, s, matrix, gap_open, gap_extend):
    """(best, query_end, subject_end) of the best local alignment; ends exclusive.

    Rows are query positions, columns subject positions; the first maximum in
    column-major order wins (smallest subject end, then smallest query end),
    as in the lane version :func:`.query_lanes.lanes_pass`.  E runs along the
    subject (op D), F along the query.
    """
    m = q.shape[0]
    n = s.shape[0]
    oe = gap_open + gap_extend
    ext = gap_extend
    H = np.zeros(n + 1, dtype=np.int32)  # H[i-1][j], then H[i][j]
    F = np.full(n + 1, NEG, dtype=np.int32)
    best = 0
    bi = 0
    bj = 0
    for i in range(1, m + 1):
        row = matrix[q[i - 1]]
        diag = 0  # H[i-1][0]
        h_left = 0  # H[i][0]
        e = NEG
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
def reverse_start(q, s, qe, se, best, matrix, gap_open, gap_extend, full_query=False):
    """Spans (a, b) of the alignment ending at (qe, se) with score ``best``.

    Global-at-the-end DP of q[:qe] reversed against s[:se] reversed, scanned
    column by column (subject span b outer, query span a inner); the first
    cell whose score is ``best``, i.e. the shortest subject span, then the
    shortest query span (as :func:`.query_lanes.lanes_pass`).  ``full_query`` (semi-global
    mode): only cells with a == qe count (the whole query prefix is aligned),
    from subject span 0 up: the shortest subject span.
    """
    oe = gap_open + gap_extend
    ext = gap_extend
    G = np.empty(qe + 1, dtype=np.int32)  # G[.][b-1], then G[.][b]
    E = np.full(qe + 1, NEG, dtype=np.int32)  # gap along the subject, per query span
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
        f = NEG
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
def forward_end_semi(q, s, matrix, gap_open, gap_extend):
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
    F = np.full(n + 1, NEG, dtype=np.int32)
    for i in range(1, m + 1):
        row = matrix[q[i - 1]]
        diag = H[0]
        h_left = -(gap_open + i * gap_extend)
        H[0] = h_left
        e = NEG
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


@njit(cache=True, nogil=True, boundscheck=False)
def locate(q, s, matrix, gap_open, gap_extend, mode):
    """(best, query_start, query_end, subject_start, subject_end) by the tie rules.

    Global mode: the whole rectangle, best unknown (0) until the traceback.
    """
    if mode == MODE_GLOBAL:
        return 0, 0, q.shape[0], 0, s.shape[0]
    if mode == MODE_SEMIGLOBAL:
        best, se = forward_end_semi(q, s, matrix, gap_open, gap_extend)
        qe = q.shape[0]
    else:
        best, qe, se = forward_end(q, s, matrix, gap_open, gap_extend)
    return start_from_end(q, s, best, qe, se, matrix, gap_open, gap_extend, mode)


@njit(cache=True, nogil=True, boundscheck=False)
def start_from_end(q, s, best, qe, se, matrix, gap_open, gap_extend, mode):
    """Like :func:`locate` from a known (best, query end, subject end)."""
    if mode == MODE_GLOBAL:
        return 0, 0, q.shape[0], 0, s.shape[0]
    semi = mode == MODE_SEMIGLOBAL  # a bool, not a literal: one reverse_start to compile
    if not semi and best <= 0:
        return 0, 0, 0, 0, 0
    a, b = reverse_start(q, s, qe, se, best, matrix, gap_open, gap_extend, semi)
    if semi:
        return best, 0, qe, se - b, se
    return best, qe - a, qe, se - b, se
