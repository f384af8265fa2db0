"""CPU backend (Numba): exact Smith-Waterman scores with affine (BLAST-style) gaps.

:class:`CpuBackend` implements the contract of :mod:`swgpu_tools.kernels`
(``SearchBackend.search`` here; ``PairBackend.pair_regions`` through the lane
engines of :mod:`swgpu_tools.alignment`).  The module functions :func:`search`
and :func:`score_all` (full score array, for tests and benchmarks on small
data) take a scheme or a matrix and gap costs.

How it works
------------
* Inter-sequence vectorisation (as in SWIPE): the database is sorted by length
  (longest first) and interleaved in groups of ``LANES`` (32) subjects that
  are aligned in lock-step, one subject per SIMD lane.  The inner loop is
  emitted as LLVM IR with explicit vector types through a Numba intrinsic
  (:func:`swgpu_tools.kernels.simd.make_column_pass`; Numba's promotion of small integers to int64
  defeats LLVM's auto-vectoriser): per query row it updates ``COLS`` (4)
  subject columns of all lanes, keeping diagonal, vertical-gap and best
  vectors in registers, so H/E make one memory round trip per 4 columns.
* Column profiles ``prof[a, lane] = matrix[a, subject_lane[j]]`` (only the
  letters the query contains) are built with AVX2 byte shuffles where the
  CPU has AVX2 and the matrix fits int8; otherwise with a scalar loop.
* Lane widths form a ladder: int8 lanes first; a lane whose best score comes
  within ``max(matrix)`` of the lane type's maximum is flagged, and the
  flagged subjects are recomputed with int16 lanes; the (rare) ones flagged
  again are rescored exactly with the scalar int32 Gotoh of
  :func:`swgpu_tools.alignment.scalar.forward_end`.  A level is skipped
  when the gap costs or matrix values do not fit it (with extreme
  parameters everything runs in int32 lanes, which are exact).
* Negative E/F values never influence H (H >= 0), so every value stays in
  ``[-(gap_open + 2 * gap_extend), best]``: below the flag threshold no lane
  can wrap around.
* Subjects shorter than their group's longest are padded with a column that
  scores ``min(0, min(matrix))``: pad columns come after all real columns, so
  no path through them can beat the best real cell.
* Huge sequences (:mod:`.huge`).  Queries longer than ``STRIP_ROWS``
  (65,536) go in strips of rows (:func:`_score_strips`, compiled when first
  needed or by :func:`precompile`); every column block of a group runs over one strip, then
  over the next, each column's diagonal H and vertical gap F carried from
  strip to strip in two arrays of (group columns x LANES) lane values
  (:func:`~swgpu_tools.kernels.simd.make_column_pass` with ``carry``).
  Lane scratch per thread is O(strip + group columns), not O(query length).
  Subjects longer than ``PIECE_COLS`` (65,536): a lane is padded to
  the longest subject of its group, so a 100 M-residue subject would make a
  3.2 GB group.  They are cut into pieces overlapping by more subject columns
  than a positive-scoring alignment of the query can span
  (:func:`.huge.piece_overlap`: each matched pair scores <= max(matrix), each
  subject residue in a gap costs >= gap_extend); the subject's score is the
  maximum over its pieces (exact).  Not where the bound is useless: gap_extend
  0, or a query so long that the overlap is larger than the subject.
  Progress: the chunks count the cells they have done; ``score_query``
  reports them every few seconds (:class:`.huge.QueryReport` logs a line
  every 10 s of a long query).
* Parallelism: chunks of groups (round-robin, so long and short groups are
  spread over the threads) on a pool of threads running the Numba chunk
  function without the GIL (:mod:`swgpu_tools.alignment.pool`; a ``prange``
  loop costs seconds more compilation), one query at a time: memory is
  one int32 score per subject plus the interleaved database (about its size)
  and per-thread scratch (at most ~8 MB of lanes plus the strip carry of
  the widest group).  A huge query against too few groups for the threads
  has its rows cut into overlapping work items (:func:`.huge.row_items`, the
  same bound as the subject pieces), so all threads score it.  The number of
  threads is whatever ``numba.set_num_threads`` / ``NUMBA_NUM_THREADS`` says.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import get_num_threads, njit

from ..alignment.params import kernel_scoring
from ..alignment.pool import run_chunks
from ..alignment.scalar import forward_end
from . import TopHits, by_segment, huge, seqhash
from .huge import QueryReport, huge_limits, piece_overlap, renumber, row_items, split_pieces
from .jitcache import cache_folder, cache_warm, notice_compiling
from .simd import HAVE_AVX2, make_column_pass, make_profile_shuffle

#: Subjects aligned in lock-step (32 x int8 = one AVX2 register).
LANES = 32
#: Subject columns computed per pass over the query (H/E make one memory
#: round trip per COLS columns).
COLS = 4


#: The search kernel's column pass: LANES x COLS, best score per lane.
_column_pass = make_column_pass(LANES, COLS, False)
#: The same for one strip of rows of a long query (first and last d_c, f_c in arrays).
_column_pass_carry = make_column_pass(LANES, COLS, False, carry=True)


#: The search kernel's column profile from the int8 table with AVX2 byte shuffles.
_profile_shuffle = make_profile_shuffle(LANES)


@njit(cache=True, nogil=True, boundscheck=False)
def _profile_scalar(inter, pos, matT, prof, dst):
    """prof[dst + a*LANES + l] = matT[inter[pos + l], a] (any matrix, any CPU)."""
    na = matT.shape[1]
    for l in range(LANES):
        r = inter[pos + l]
        for a in range(na):
            prof[dst + a * LANES + l] = matT[r, a]


@njit(cache=True, nogil=True, boundscheck=False)
def _interleave(codes, ustart, uend, subjects, pad):
    """Lay out ``subjects`` (units: codes[ustart[s]:uend[s]]; sorted by length, longest
    first) in groups of LANES.

    Returns (inter, goff, gncols, gsubj): group g occupies
    inter[goff[g] : goff[g] + gncols[g]*LANES], column j of lane l at
    goff[g] + j*LANES + l (``pad`` past the subject's end); gsubj[g*LANES + l]
    is the unit index of the lane or -1.
    """
    n = subjects.shape[0]
    ngroups = (n + LANES - 1) // LANES
    gncols = np.zeros(ngroups, dtype=np.int64)
    goff = np.zeros(ngroups + 1, dtype=np.int64)
    gsubj = np.full(ngroups * LANES, -1, dtype=np.int64)
    for g in range(ngroups):
        nc = 0
        for l in range(LANES):
            k = g * LANES + l
            if k < n:
                s = subjects[k]
                gsubj[k] = s
                ln = uend[s] - ustart[s]
                if ln > nc:
                    nc = ln
        nc = (nc + COLS - 1) // COLS * COLS  # whole blocks of COLS columns
        gncols[g] = nc
        goff[g + 1] = goff[g] + nc * LANES
    inter = np.full(goff[ngroups], pad, dtype=np.uint8)
    for g in range(ngroups):
        base = goff[g]
        for l in range(LANES):
            s = gsubj[g * LANES + l]
            if s >= 0:
                o = ustart[s]
                for j in range(uend[s] - o):
                    inter[base + j * LANES + l] = codes[o + j]
    return inter, goff, gncols, gsubj


@njit(cache=True, nogil=True, boundscheck=False)
def _score_groups(
    c, nchunks, q, inter, goff, gncols, gsubj, table8, matT, use_shuffle, oe, ext, limit, out, flags,
    done,
):  # fmt: skip
    """Scores of query ``q`` against chunk c's interleaved groups (every nchunks-th group;
    out[s], by subject index).

    Lanes have the dtype of ``matT``.  flags[s] = 1 where a lane reached
    ``limit`` (its score must be recomputed with wider lanes).  done[c] counts
    the cells (rows x group columns) done.
    """
    ngroups = gncols.shape[0]
    m = q.shape[0]
    na = matT.shape[1]
    H = np.empty(m * LANES, dtype=matT.dtype)
    E = np.empty(m * LANES, dtype=matT.dtype)
    pstride = na * LANES
    prof = np.zeros(COLS * pstride, dtype=matT.dtype)
    best = np.empty(LANES, dtype=matT.dtype)
    zero = matT.dtype.type(0)
    neg = matT.dtype.type(-oe)
    for g in range(c, ngroups, nchunks):
        for k in range(m * LANES):
            H[k] = zero
            E[k] = neg
        for l in range(LANES):
            best[l] = zero
        base = goff[g]
        for j in range(0, gncols[g], COLS):
            for col in range(COLS):
                pos = base + (j + col) * LANES
                if use_shuffle:
                    _profile_shuffle(inter, pos, table8, prof, col * pstride)
                else:
                    _profile_scalar(inter, pos, matT, prof, col * pstride)
            _column_pass(q, prof, pstride, H, E, best, oe, ext)
        done[c] += m * gncols[g]
        for l in range(LANES):
            s = gsubj[g * LANES + l]
            if s >= 0:
                b = np.int64(best[l])
                out[s] = b
                flags[s] = 1 if b >= limit else 0


@njit(cache=True, nogil=True, boundscheck=False)
def _score_strips(
    c, nchunks, q, strip, inter, goff, gncols, items, table8, matT, use_shuffle, oe, ext, ibest,
    done,
):  # fmt: skip
    """:func:`_score_groups` for a query longer than ``strip`` rows, over chunk c's work
    items (every nchunks-th): item t scores rows items[t, 1]:items[t, 2] of the
    query against group items[t, 0] (:func:`.huge.row_items`), its lanes' best
    into ibest[t*LANES : (t+1)*LANES].  In strips of ``strip`` rows (every
    column block of the group over one strip, then the next strip), each
    column's diagonal H (D) and vertical gap F carried from strip to strip.
    Scratch: O(strip + group columns) lane values, not O(query length)."""
    nitems = items.shape[0]
    na = matT.shape[1]
    rows = min(q.shape[0], strip)
    H = np.empty(rows * LANES, dtype=matT.dtype)
    E = np.empty(rows * LANES, dtype=matT.dtype)
    pstride = na * LANES
    prof = np.zeros(COLS * pstride, dtype=matT.dtype)
    best = np.empty(LANES, dtype=matT.dtype)
    zero = matT.dtype.type(0)
    neg = matT.dtype.type(-oe)
    width = 0
    for t in range(c, nitems, nchunks):
        width = max(width, gncols[items[t, 0]])
    D = np.empty(width * LANES, dtype=matT.dtype)
    F = np.empty(width * LANES, dtype=matT.dtype)
    for t in range(c, nitems, nchunks):
        g, r0, r1 = items[t, 0], items[t, 1], items[t, 2]
        for l in range(LANES):
            best[l] = zero
        base = goff[g]
        ncols = gncols[g]
        for k in range(ncols * LANES):
            D[k] = zero  # H of the row above the item's first
            F[k] = neg  # F of its first row
        for a in range(r0, r1, strip):
            qs = q[a : min(r1, a + strip)]
            for k in range(qs.shape[0] * LANES):
                H[k] = zero
                E[k] = neg
            for j in range(0, ncols, COLS):
                for col in range(COLS):
                    pos = base + (j + col) * LANES
                    if use_shuffle:
                        _profile_shuffle(inter, pos, table8, prof, col * pstride)
                    else:
                        _profile_scalar(inter, pos, matT, prof, col * pstride)
                _column_pass_carry(qs, prof, pstride, H, E, best, D, F, j * LANES, oe, ext)
            done[c] += qs.shape[0] * ncols
        for l in range(LANES):
            ibest[t * LANES + l] = best[l]


@njit(cache=True, nogil=True, boundscheck=False)
def _rescore(c, nchunks, q, matrix, codes, ustart, uend, subjects, gap_open, gap_extend, out):
    """Exact int32 scores of query ``q`` against chunk c's units (written to out[s]).

    The scalar Gotoh of :func:`swgpu_tools.alignment.scalar.forward_end`
    (memory: O(unit length)).
    """
    for t in range(c, subjects.shape[0], nchunks):
        s = subjects[t]
        out[s] = forward_end(q, codes[ustart[s] : uend[s]], matrix, gap_open, gap_extend)[0]


class _Level:
    """One lane width of the int8 -> int16 -> (int32) ladder."""

    def __init__(self, dtype, matrix, pad, gap_open, gap_extend):
        info = np.iinfo(dtype)
        mmax = int(matrix.max())
        mmin = int(matrix.min())
        oe = gap_open + gap_extend
        lo = -(info.max * 15 // 16)  # keep a margin below the most negative value
        self.dtype = dtype
        self.fits = (dtype == np.int32) or (
            -(oe + gap_extend) >= lo and mmin >= lo and pad >= lo and 0 <= mmax < info.max // 2
        )
        # a lane at or above ``limit`` may overflow on the next cell: recompute it
        self.limit = info.max - max(mmax, 0) if dtype != np.int32 else np.iinfo(np.int64).max
        na = matrix.shape[0]
        matT = np.empty((na + 1, na), dtype=dtype)
        if self.fits:
            matT[:na] = matrix.T
            matT[na] = pad
        self.matT = matT


class _Prepared:
    """Per-database, per-scheme state shared by all queries.

    ``strip_rows``: queries longer than this go in strips of this many rows;
    ``piece_cols``: subjects longer than this may be split into overlapping
    pieces (see :meth:`_layout`).  Defaults: :func:`huge_limits`.
    """

    def __init__(self, database, matrix, gap_open, gap_extend, strip_rows=None, piece_cols=None):
        """matrix, gap costs: as :func:`kernel_scoring` returns them (trusted here)."""
        strip_default, piece_default = huge_limits()
        self.strip_rows = int(strip_rows or strip_default)
        self.piece_cols = int(piece_cols or piece_default)
        self.matrix = matrix
        self.gap_open = int(gap_open)
        self.gap_extend = int(gap_extend)
        self.codes = np.ascontiguousarray(database.codes, dtype=np.uint8)
        self.offsets = np.ascontiguousarray(database.offsets, dtype=np.int64)
        self.n = len(self.offsets) - 1
        na = matrix.shape[0]
        pad = min(0, int(matrix.min()))
        self.pad_code = na
        levels = [
            _Level(dt, matrix, pad, self.gap_open, self.gap_extend)
            for dt in (np.int8, np.int16, np.int32)
        ]
        self.levels = [lv for lv in levels if lv.fits]
        # int8 score table for the shuffle-built column profile (rows: letters,
        # 32 columns: subject codes incl. the pad code)
        self.use_shuffle = bool(
            HAVE_AVX2 and na + 1 <= 32 and matrix.min() >= -128 and matrix.max() <= 127
        )
        table8 = np.zeros((na, 32), dtype=np.int8)
        if self.use_shuffle:
            table8[:, :na] = matrix
            table8[:, na] = pad
        self.table8 = table8
        self.ustart = self.offsets[:-1]
        self.uend = self.offsets[1:]
        lengths = self.uend - self.ustart
        self.long = np.flatnonzero(lengths > self.piece_cols).astype(np.int64)
        short = np.flatnonzero(lengths <= self.piece_cols).astype(np.int64)
        self._groups_short = self._groups(short, self.ustart, self.uend)
        self._long_layout = (None, None)  # (key, layout) of the last long-subject layout
        self.poll_every = 2.0  # seconds between score_query's progress reports
        self.split_threads = None  # threads row_items keeps busy (None: Numba's setting)

    def _groups(self, units, ustart, uend):
        lengths = uend[units] - ustart[units]
        order = units[np.argsort(-lengths, kind="stable")]
        return _interleave(self.codes, ustart, uend, order, self.pad_code)

    def _layout(self, m):
        """(ustart, uend, owner, group sets) for a query of length m.

        Units are stretches of subjects: unit s < n is subject s; subjects
        longer than ``piece_cols`` are split, when the query allows it, into
        pieces of P residues overlapping by the :func:`.huge.piece_overlap` bound
        (rounded up to a power of two, P = max(piece_cols, PIECE_FACTOR x
        overlap)): every positive-scoring alignment lies whole in one piece,
        and a piece's alignments are the subject's, so the subject's score is
        the maximum over its pieces.  Units n.. are pieces, owner[u] their
        subject (None: no pieces).  Memory: lanes are padded to the longest
        unit of their group, and a group of pieces holds at most 32 x P.
        """
        sets = [self._groups_short]
        if len(self.long) == 0:
            return self.ustart, self.uend, None, sets
        ov = piece_overlap(m, int(self.matrix.max()), self.gap_extend)
        if ov is None:
            key = None
        else:
            ov = 1 << max(0, int(ov - 1).bit_length())
            key = (max(self.piece_cols, huge.PIECE_FACTOR * ov), ov)
        if self._long_layout[0] != key or self._long_layout[1] is None:
            self._long_layout = (key, self._long_units(key))
        ustart, uend, owner, groups = self._long_layout[1]
        return ustart, uend, owner, sets + [groups]

    def _long_units(self, key):
        n = self.n
        starts, ends, owners, whole = [self.ustart], [self.uend], [np.arange(n)], []
        for s in self.long.tolist():
            length = int(self.uend[s] - self.ustart[s])
            if key is None or length <= key[0]:
                whole.append(s)
                continue
            a, b = split_pieces(length, *key)
            starts.append(a + self.ustart[s])
            ends.append(b + self.ustart[s])
            owners.append(np.full(len(a), s))
        ustart = np.concatenate(starts).astype(np.int64)
        uend = np.concatenate(ends).astype(np.int64)
        owner = np.concatenate(owners).astype(np.int64)
        units = np.concatenate([np.array(whole, np.int64), np.arange(n, len(ustart))])
        groups = self._groups(units.astype(np.int64), ustart, uend)
        return ustart, uend, (owner if len(ustart) > n else None), groups

    def score_query(self, q, out, flags, report=None):
        """Exact scores of code array ``q`` against every subject, into ``out``.

        ``report``: called as report(lanes, cells_done, cells) every few
        seconds while a lane pass runs (progress of long queries).
        """
        q = np.ascontiguousarray(q, dtype=np.uint8)
        if self.n == 0:
            return
        if q.shape[0] == 0:
            out[:] = 0
            return
        oe = self.gap_open + self.gap_extend
        # the column profiles only need the letters the query has: renumber them
        # (a table lookup: no copy of the query wider than a byte)
        letters, qc = renumber(q)
        table8 = np.ascontiguousarray(self.table8[letters])
        ustart, uend, owner, sets = self._layout(q.shape[0])
        strips = q.shape[0] > self.strip_rows
        if owner is not None:
            uout = np.zeros(len(ustart), dtype=out.dtype)
            uflags = np.zeros(len(ustart), dtype=flags.dtype)
        else:
            uout, uflags = out, flags
        todo = None
        for depth, level in enumerate(self.levels):
            if depth > 0 and level.dtype == np.int32:
                # int32 is exact: a plain scalar pass for the few lanes left
                n = get_num_threads()
                run_chunks(
                    _rescore,
                    min(len(todo), 4 * n),
                    n,
                    q,
                    self.matrix,
                    self.codes,
                    ustart,
                    uend,
                    todo,
                    self.gap_open,
                    self.gap_extend,
                    uout,
                )
                break
            matT = np.ascontiguousarray(level.matT[:, letters])
            name = np.dtype(level.dtype).name
            for inter, goff, gncols, gsubj in sets:
                if strips:
                    items = row_items(
                        gncols,
                        q.shape[0],
                        int(self.matrix.max()),
                        self.gap_extend,
                        self.split_threads or get_num_threads(),
                        self.strip_rows,
                    )
                    nchunks = _nchunks(len(items))
                    ibest = np.zeros(len(items) * LANES, dtype=np.int64)
                    cells = float(((items[:, 2] - items[:, 1]) * gncols[items[:, 0]]).sum())
                    kernel = _score_strips
                    head = (qc, self.strip_rows, inter, goff, gncols, items)
                    tail = (ibest,)
                    notice_compiling("CPU search kernels for long queries", (_score_strips,))
                else:
                    nchunks = _nchunks(len(gncols))
                    cells = float(q.shape[0]) * float(gncols.sum())
                    kernel = _score_groups
                    head = (qc, inter, goff, gncols, gsubj)
                    tail = (level.limit, uout, uflags)
                done = np.zeros(nchunks, dtype=np.int64)
                run_chunks(
                    kernel,
                    nchunks,
                    get_num_threads(),
                    *head,
                    table8,
                    matT,
                    self.use_shuffle,
                    oe,
                    self.gap_extend,
                    *tail,
                    done,
                    poll=None if report is None else partial(_poll, report, name, done, cells),
                    every=self.poll_every,
                )
                if report is not None:
                    _poll(report, name, done, cells)
                if strips:  # the best of each unit over its items
                    units = gsubj.reshape(-1, LANES)[items[:, 0]]
                    real = units >= 0
                    units, best = units[real], ibest.reshape(-1, LANES)[real]
                    uout[units] = 0
                    np.maximum.at(uout, units, best.astype(uout.dtype))
                    uflags[units] = uout[units] >= level.limit
            todo = np.flatnonzero(uflags).astype(np.int64)
            if len(todo) == 0:
                break
            uflags[todo] = 0
            sets = [self._groups(todo, ustart, uend)]
        else:
            raise AssertionError("lanes saturated at the widest level")  # pragma: no cover
        if owner is not None:
            out[:] = uout[: self.n]
            np.maximum.at(out, owner[self.n :], uout[self.n :])


def _poll(report, lanes, done, cells):
    report(lanes, int(done.sum()), cells)


def _nchunks(ngroups):
    return max(1, min(ngroups, 8 * get_num_threads()))


def _query_codes(queries, qi):
    return queries.codes[queries.offsets[qi] : queries.offsets[qi + 1]]


def score_all(queries, database, matrix, gap_open=None, gap_extend=None) -> np.ndarray:
    """Exact SW scores of every query against every subject: int32 (n_queries, n_subjects).

    matrix: a ScoringScheme, or a square int matrix with the gap costs.
    """
    notice_compiling("CPU search kernels", _entry_points())
    prep = _Prepared(database, *kernel_scoring(matrix, gap_open, gap_extend))
    nq, ns = len(queries), len(database)
    result = np.zeros((nq, ns), dtype=np.int32)
    flags = np.zeros(ns, dtype=np.uint8)
    row = np.zeros(ns, dtype=np.int32)
    for qi in range(nq):
        row[:] = 0
        prep.score_query(_query_codes(queries, qi), row, flags)
        result[qi] = row
    return result


def select_top_k(scores: np.ndarray, top_k: int) -> np.ndarray:
    """Indices of the top_k scores: score descending, then lower index first."""
    n = scores.shape[0]
    k = min(int(top_k), n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        # the k-th largest value; everything above it is in, ties at it by index
        kth = np.partition(scores, n - k)[n - k]
        above = np.flatnonzero(scores > kth)
        tied = np.flatnonzero(scores == kth)[: k - len(above)]
        chosen = np.concatenate([above, tied])
    else:
        chosen = np.arange(n, dtype=np.int64)
    order = np.lexsort((chosen, -scores[chosen].astype(np.int64)))
    return chosen[order].astype(np.int64)


def search(
    queries, database, matrix, gap_open=None, gap_extend=None, top_k=None, progress=None
) -> TopHits:
    """Top ``top_k`` hits per query by exact SW score (see :mod:`swgpu_tools.kernels`).

    matrix: a ScoringScheme, or a square int matrix with the gap costs.
    """
    if top_k is None:
        raise TypeError("search() needs top_k")
    return _search(
        queries, database, *kernel_scoring(matrix, gap_open, gap_extend), top_k, progress
    )


#: A search of many queries against few subjects scores each subject against the
#: queries instead (:func:`_transposed`) when it has this many times more queries
#: than subjects and its score table (queries x subjects, int32) fits this many cells.
TRANSPOSE_RATIO = 2
TRANSPOSE_CELLS = 1 << 26


def _transpose_pays(nq: int, ns: int, matrix) -> bool:
    """Whether :func:`_transposed` serves a search (a symmetric matrix only: then the
    score of a pair does not depend on which sequence is the query)."""
    return (
        ns > 0
        and nq >= TRANSPOSE_RATIO * ns
        and nq * ns <= TRANSPOSE_CELLS
        and bool(np.array_equal(matrix, matrix.T))
    )


def _transposed(queries, database, matrix, gap_open, gap_extend, top_k, progress) -> TopHits:
    """:func:`_search` with the roles swapped: each subject scored against all the
    queries as a database, then each query's top ``top_k`` from the score table.

    A re-scan scores every query against a shard's few new and changed sequences;
    one query at a time, each pass fills a few groups of lanes and pays the pass's
    fixed cost (0.3 s for 2,000 queries x 40 subjects on the 2-core machine, where
    the cells take 0.02 s).  The scores are the same (a symmetric matrix; the same
    gap costs in both sequences); the ties between subjects too (the table's order).
    """
    prep = _Prepared(queries, matrix, gap_open, gap_extend)
    nq, ns = len(queries), len(database)
    table = np.zeros((ns, nq), dtype=np.int32)
    flags = np.zeros(nq, dtype=np.uint8)
    for sj in range(ns):
        prep.score_query(_query_codes(database, sj), table[sj], flags)
    if progress is not None:
        progress(nq, nq)
    table = np.ascontiguousarray(table.T)
    return _top_hits(nq, lambda qi: table[qi], top_k)


def _top_hits(nq: int, row_of, top_k: int, progress=None) -> TopHits:
    """Each query's top ``top_k`` (:func:`select_top_k`) of its scores against the
    subjects, ``row_of(qi)``; ``progress(done, nq)`` after each query."""
    q_parts, s_parts, v_parts = [], [], []
    for qi in range(nq):
        row = row_of(qi)
        idx = select_top_k(row, top_k)
        q_parts.append(np.full(len(idx), qi, dtype=np.int32))
        s_parts.append(idx.astype(np.int32))
        v_parts.append(row[idx].astype(np.int32))
        if progress is not None:
            progress(qi + 1, nq)
    if not q_parts:
        empty = np.zeros(0, np.int32)
        return TopHits(empty, empty.copy(), empty.copy())
    return TopHits(np.concatenate(q_parts), np.concatenate(s_parts), np.concatenate(v_parts))


def _search(
    queries, database, matrix, gap_open, gap_extend, top_k, progress, transpose=None
) -> TopHits:
    """``transpose``: None decides (:func:`_transpose_pays`); True or False forces it."""
    notice_compiling("CPU search kernels", _entry_points())
    nq, ns = len(queries), len(database)
    if transpose is None:
        transpose = _transpose_pays(nq, ns, matrix)
    if transpose and nq and ns:
        return _transposed(queries, database, matrix, gap_open, gap_extend, top_k, progress)
    prep = _Prepared(database, matrix, gap_open, gap_extend)
    row = np.zeros(ns, dtype=np.int32)
    flags = np.zeros(ns, dtype=np.uint8)

    def scores_of(qi: int) -> np.ndarray:
        row[:] = 0
        q = _query_codes(queries, qi)
        prep.score_query(q, row, flags, QueryReport(qi, nq, len(q)))
        return row

    return _top_hits(nq, scores_of, top_k, progress)


class CpuBackend:
    """The CPU backend: :class:`~swgpu_tools.kernels.SearchBackend` and
    :class:`~swgpu_tools.kernels.PairBackend` (scheme passed whole, trusted).

    ``threads``: Numba threads for the pair passes (default: Numba's setting);
    the search uses Numba's setting (``numba.set_num_threads``).
    """

    name = "cpu"

    def __init__(self, threads: int | None = None):
        self.threads = threads

    def search(
        self, queries, database, scheme, top_k: int, progress=None, segments=None
    ) -> TopHits:
        """Top ``top_k`` hits per query (contract: :class:`~swgpu_tools.kernels.SearchBackend`)."""

        def one(q, d, k, pr):
            return _search(q, d, scheme.matrix, scheme.gap_open, scheme.gap_extend, k, pr)

        if segments is None:
            return one(queries, database, top_k, progress)
        return by_segment(one, queries, database, top_k, segments, progress)

    def pair_regions(
        self, queries, subjects, query_index, subject_index, scheme, mode: str
    ) -> np.ndarray:
        """(best, qs, qe, ss, se) per pair, int64 (n, 5): steps 1-2 of :mod:`swgpu_tools.alignment`."""
        from ..alignment.batch import pair_regions

        return pair_regions(
            queries.codes,
            queries.offsets,
            subjects.codes,
            subjects.offsets,
            query_index,
            subject_index,
            scheme.matrix,
            scheme.gap_open,
            scheme.gap_extend,
            mode,
            self.threads,
        )


# ---------------------------------------------------------------------------
# compiling once per machine
# ---------------------------------------------------------------------------
def _entry_points():
    """The Numba functions every search calls from Python (each caches what it calls;
    ``_rescore``, for lanes saturated even in int16, and ``_score_strips``, for
    queries longer than STRIP_ROWS, compile when first needed)."""
    return (_interleave, _score_groups)


def is_compiled() -> bool:
    """Whether the search kernels load from the disk cache (cheap: compiles nothing).

    False means the next search compiles them first (seconds, once per machine
    and swgpu version); :func:`precompile` does it ahead.
    """
    return cache_warm(_entry_points())


def precompile(log=None) -> dict:
    """Compile (or load from the disk cache) every CPU search kernel a run may need.

    That is the int8 and int16 lane levels, the int32 rescore of saturated
    lanes, the int32 lane level of extreme gap costs and the strips of long
    queries (every lane type), on a tiny made-up database; and the sequences'
    content hashes of a re-scan (:mod:`.seqhash`).  ``log``: a
    callable for progress lines.  Returns
    {"what", "seconds", "was_cached", "cache_dir"}.
    """
    import time

    from ..scoring import ScoringScheme
    from ..sequences import SequenceSet

    t0 = time.perf_counter()
    was = is_compiled()
    if log:
        log(f"CPU search kernels: {'loading from' if was else 'compiling into'} {cache_folder()}")
    rng = np.random.default_rng(1)
    letters = np.array(list("ACDEFGHIKLMNPQRSTVWY"))
    texts = ["".join(rng.choice(letters, int(n))) for n in rng.integers(5, 60, 40)]
    texts.append("W" * 3000)  # self-score 33,000: past int8 and int16, the int32 rescore
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    seqs = scheme.encode(SequenceSet.from_pairs([(f"s{i}", t) for i, t in enumerate(texts)]))
    queries = scheme.encode(SequenceSet.from_pairs([("q0", texts[0]), ("q1", "W" * 3000)]))
    _search(queries, seqs, scheme.matrix, 11, 1, 5, None)
    _search(queries, seqs, scheme.matrix, 40000, 1, 5, None)  # int32 lanes only
    for gap_open in (11, 40000):  # the strips of long queries, every lane type
        prep = _Prepared(seqs, scheme.matrix, gap_open, 1, strip_rows=1000)
        row = np.zeros(len(seqs), np.int32)
        prep.score_query(_query_codes(queries, 1), row, np.zeros(len(seqs), np.uint8))
    seqhash.hash_ranges(np.frombuffer(b"ACDEFG", np.uint8), np.array([0, 2, 6]))  # re-scans
    seqhash.preload()  # and their one-residue calls, the accessions' match
    return {
        "what": "CPU search kernels",
        "seconds": time.perf_counter() - t0,
        "was_cached": was,
        "cache_dir": cache_folder(),
    }
