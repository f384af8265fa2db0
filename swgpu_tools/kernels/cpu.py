"""CPU backend (Numba): exact Smith-Waterman scores with affine (BLAST-style) gaps.

Implements the contract of :mod:`swgpu_tools.kernels` (``search``) plus
``score_all`` (full score array, for tests and benchmarks on small data).

How it works
------------
* Inter-sequence vectorisation (as in SWIPE): the database is sorted by length
  (longest first) and interleaved in groups of ``LANES`` (32) subjects that
  are aligned in lock-step, one subject per SIMD lane.  The inner loop is
  emitted as LLVM IR with explicit vector types through a Numba intrinsic
  (:func:`_make_column_pass`; Numba's promotion of small integers to int64
  defeats LLVM's auto-vectoriser): per query row it updates ``COLS`` (4)
  subject columns of all lanes, keeping diagonal, vertical-gap and best
  vectors in registers, so H/E make one memory round trip per 4 columns.
* Column profiles ``prof[a, lane] = matrix[a, subject_lane[j]]`` (only the
  letters the query contains) are built with AVX2 byte shuffles where the
  CPU has AVX2 and the matrix fits int8; otherwise with a scalar loop.
* Lane widths form a ladder: int8 lanes first; a lane whose best score comes
  within ``max(matrix)`` of the lane type's maximum is flagged, and the
  flagged subjects are recomputed with int16 lanes; the (rare) ones flagged
  again are rescored exactly with a scalar int32 Gotoh.  A level is skipped
  when the gap costs or matrix values do not fit it (with extreme
  parameters everything runs in int32 lanes, which are exact).
* Negative E/F values never influence H (H >= 0), so every value stays in
  ``[-(gap_open + 2 * gap_extend), best]``: below the flag threshold no lane
  can wrap around.
* Subjects shorter than their group's longest are padded with a column that
  scores ``min(0, min(matrix))``: pad columns come after all real columns, so
  no path through them can beat the best real cell.
* Parallelism: ``prange`` over chunks of groups (round-robin, so long and
  short groups are spread over the threads), one query at a time: memory is
  one int32 score per subject plus the interleaved database (about its size)
  and per-thread scratch.  The number of threads is whatever
  ``numba.set_num_threads`` / ``NUMBA_NUM_THREADS`` says.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, get_num_threads, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import TopHits

#: Subjects aligned in lock-step (32 x int8 = one AVX2 register).
LANES = 32
#: Subject columns computed per pass over the query (H/E make one memory
#: round trip per COLS columns).
COLS = 4


def _host_has_avx2() -> bool:
    try:
        import llvmlite.binding as llvm

        return bool(llvm.get_host_cpu_features().get("avx2", False))
    except Exception:  # pragma: no cover - unusual llvmlite builds
        return False


#: The column profile is built with AVX2 byte shuffles where available.
_HAVE_AVX2 = _host_has_avx2()


# ---------------------------------------------------------------------------
# scalar int32 Gotoh with a query profile (exact; used to rescore saturated
# lanes and for single pairs)
# ---------------------------------------------------------------------------
@njit(cache=True, nogil=True, boundscheck=False)
def _query_profile(q, matrix):
    """prof[c, i] = matrix[q[i], c]: one contiguous row per subject letter."""
    m = q.shape[0]
    na = matrix.shape[0]
    prof = np.empty((na, m), dtype=np.int32)
    for c in range(na):
        for i in range(m):
            prof[c, i] = matrix[q[i], c]
    return prof


@njit(cache=True, nogil=True, boundscheck=False, fastmath=True)
def _sw_scalar(prof, m, s, gap_open, gap_extend, hrow, erow):
    """Best local score of the query (given as profile) against subject ``s``.

    Loop over subject letters (outer) and query positions (inner); hrow/erow
    are scratch of length >= m + 1.  E is the gap along the query (vertical
    in this loop order), F along the subject.
    """
    oe = gap_open + gap_extend
    ext = gap_extend
    for i in range(m + 1):
        hrow[i] = 0
        erow[i] = -oe  # any value <= 0 acts as "no gap" (H >= 0)
    best = 0
    for j in range(s.shape[0]):
        p = prof[s[j]]
        diag = 0  # H[0][j-1]
        f = -oe
        for i in range(1, m + 1):
            e = erow[i]
            h = diag + p[i - 1]
            if e > h:
                h = e
            if f > h:
                h = f
            if h < 0:
                h = 0
            diag = hrow[i]
            hrow[i] = h
            if h > best:
                best = h
            t = h - oe
            e -= ext
            erow[i] = e if e > t else t
            f -= ext
            f = f if f > t else t
    return best


# ---------------------------------------------------------------------------
# lane kernel: one subject column for LANES subjects, written in LLVM IR with
# explicit vector types (Numba's integer promotion to int64 defeats the
# auto-vectoriser, so the inner loop is emitted directly).
# ---------------------------------------------------------------------------
def _vmax(builder, a, b):
    return builder.select(builder.icmp_signed(">", a, b), a, b)


def _splat(builder, value, vty):
    undef = ir.Constant(vty, ir.Undefined)
    v = builder.insert_element(undef, value, ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vty.count), [0] * vty.count)
    return builder.shuffle_vector(v, undef, mask)


def _make_column_pass(lanes, cols, track):
    """Build an intrinsic computing ``cols`` DP columns for ``lanes`` subjects.

    ``lanes=None``: as many lanes as fit one 256-bit register for the lane
    type of the arrays (32 int8, 16 int16, 8 int32).

    ``_column_pass(q, prof, pstride, H, E, best, oe, ext)`` (track=False) and
    ``_column_pass(q, prof, pstride, H, E, bc, ic, oe, ext)`` (track=True).

    Column c's profile is prof[c*pstride:], its letter a at [a*lanes : +lanes].
    H[i], E[i] hold, per row i, H of the previous column and E for the next
    column.  For i in range(len(q)), with d_c (diagonal H) and f_c (gap along
    the subject) per column carried in registers::

        e = E[i];  hl = H[i]
        for c in range(cols):
            h = max(d_c + prof_c[q[i]], e, f_c, 0)
            d_c = hl;  hl = h;  b = max(b, h)
            t = h - oe;  e = max(e - ext, t);  f_c = max(f_c - ext, t)
        H[i] = hl;  E[i] = e

    d_c starts at 0 and f_c at -oe.  Without tracking, b (one best per lane)
    is read from and written back to ``best``.  With tracking, every column
    keeps its own best bc[c] and the first row reaching it, ic[c] (both read
    and written back; a cell replaces them only when strictly greater).
    Arithmetic wraps in the lane type: callers keep values in range.
    """

    def typer_impl(args):
        arrays = [t for t in args if isinstance(t, types.Array)]
        nargs = 9 if track else 8
        if len(args) != nargs or len(arrays) != nargs - 3:
            return None
        lane_arrays = arrays[1:]
        if any(t.dtype != lane_arrays[0].dtype for t in lane_arrays):
            return None
        if not isinstance(lane_arrays[0].dtype, types.Integer):
            return None
        bits = lane_arrays[0].dtype.bitwidth
        nlanes = lanes if lanes is not None else 256 // bits
        sig = types.void(args[0], args[1], types.int64, *args[3:nargs - 2],
                         types.int64, types.int64)

        def codegen(context, builder, signature, cargs):
            tys = signature.args
            qa = context.make_array(tys[0])(context, builder, cargs[0])
            pa = context.make_array(tys[1])(context, builder, cargs[1])
            ha = context.make_array(tys[3])(context, builder, cargs[3])
            ea = context.make_array(tys[4])(context, builder, cargs[4])
            i64 = ir.IntType(64)
            elt = ir.IntType(bits)
            vty = ir.VectorType(elt, nlanes)
            vptr = vty.as_pointer()
            align = bits // 8
            m = builder.extract_value(qa.shape, 0)
            oe_v = _splat(builder, builder.trunc(cargs[nargs - 2], elt), vty)
            ext_v = _splat(builder, builder.trunc(cargs[nargs - 1], elt), vty)
            zero_v = ir.Constant(vty, [0] * nlanes)
            neg_oe = builder.sub(zero_v, oe_v)
            pstride_v = builder.udiv(cargs[2], ir.Constant(i64, nlanes))
            pbase0 = builder.bitcast(pa.data, vptr)
            pbases = [builder.gep(pbase0, [builder.mul(pstride_v, ir.Constant(i64, c))])
                      for c in range(cols)]
            hbase = builder.bitcast(ha.data, vptr)
            ebase = builder.bitcast(ea.data, vptr)
            if track:
                bca = context.make_array(tys[5])(context, builder, cargs[5])
                ica = context.make_array(tys[6])(context, builder, cargs[6])
                bptrs = [builder.gep(builder.bitcast(bca.data, vptr), [ir.Constant(i64, c)])
                         for c in range(cols)]
                iptrs = [builder.gep(builder.bitcast(ica.data, vptr), [ir.Constant(i64, c)])
                         for c in range(cols)]
                carried0 = ([builder.load(p, align=align) for p in bptrs]
                            + [builder.load(p, align=align) for p in iptrs])
            else:
                ba = context.make_array(tys[5])(context, builder, cargs[5])
                bptrs = [builder.bitcast(ba.data, vptr)]
                carried0 = [builder.load(bptrs[0], align=align)]
            entry = builder.block
            loop = builder.append_basic_block("col_loop")
            done = builder.append_basic_block("col_done")
            builder.cbranch(builder.icmp_signed(">", m, ir.Constant(i64, 0)), loop, done)

            builder.position_at_end(loop)
            i = builder.phi(i64)
            ds = [builder.phi(vty) for _ in range(cols)]
            fs = [builder.phi(vty) for _ in range(cols)]
            carried = [builder.phi(vty) for _ in carried0]
            code = builder.zext(builder.load(builder.gep(qa.data, [i])), i64)
            hp = builder.gep(hbase, [i])
            ep = builder.gep(ebase, [i])
            e = builder.load(ep, align=align)
            hl = builder.load(hp, align=align)
            if track:
                row_v = _splat(builder, builder.trunc(i, elt), vty)
            ds_new, fs_new, hs = [], [], []
            carried_new = list(carried)
            for c in range(cols):
                p = builder.load(builder.gep(pbases[c], [code]), align=align)
                h = builder.add(ds[c], p)
                h = _vmax(builder, h, e)
                h = _vmax(builder, h, fs[c])
                h = _vmax(builder, h, zero_v)
                ds_new.append(hl)
                hl = h
                hs.append(h)
                if track:
                    better = builder.icmp_signed(">", h, carried[c])
                    carried_new[c] = builder.select(better, h, carried[c])
                    carried_new[cols + c] = builder.select(better, row_v, carried[cols + c])
                t = builder.sub(h, oe_v)
                e = _vmax(builder, builder.sub(e, ext_v), t)
                fs_new.append(_vmax(builder, builder.sub(fs[c], ext_v), t))
            builder.store(hl, hp, align=align)
            builder.store(e, ep, align=align)
            if not track:
                while len(hs) > 1:  # tree of maxima, then one step on the carried best
                    hs = [_vmax(builder, hs[k], hs[k + 1]) if k + 1 < len(hs) else hs[k]
                          for k in range(0, len(hs), 2)]
                carried_new[0] = _vmax(builder, carried[0], hs[0])
            i_next = builder.add(i, ir.Constant(i64, 1))
            i.add_incoming(ir.Constant(i64, 0), entry)
            i.add_incoming(i_next, loop)
            for c in range(cols):
                ds[c].add_incoming(zero_v, entry)
                ds[c].add_incoming(ds_new[c], loop)
                fs[c].add_incoming(neg_oe, entry)
                fs[c].add_incoming(fs_new[c], loop)
            for phi, v0, v1 in zip(carried, carried0, carried_new):
                phi.add_incoming(v0, entry)
                phi.add_incoming(v1, loop)
            builder.cbranch(builder.icmp_signed("<", i_next, m), loop, done)

            builder.position_at_end(done)
            ptrs = bptrs + iptrs if track else bptrs
            outs = []
            for v0, v1 in zip(carried0, carried_new):  # phis first, then stores
                out = builder.phi(vty)
                out.add_incoming(v0, entry)
                out.add_incoming(v1, loop)
                outs.append(out)
            for ptr, out in zip(ptrs, outs):
                builder.store(out, ptr, align=align)
            return context.get_dummy_value()

        return sig, codegen

    if track:
        def typer(typingctx, q, prof, pstride, H, E, bc, ic, oe, ext):
            return typer_impl((q, prof, pstride, H, E, bc, ic, oe, ext))
    else:
        def typer(typingctx, q, prof, pstride, H, E, best, oe, ext):
            return typer_impl((q, prof, pstride, H, E, best, oe, ext))
    name = f"_column_pass_{lanes or 'reg'}x{cols}" + ("_track" if track else "")
    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


#: The search kernel's column pass: LANES x COLS, best score per lane.
_column_pass = _make_column_pass(LANES, COLS, False)


def _profile_shuffle_ir(builder, inter_ptr, pos, table_ptr, n_letters, prof_ptr, lane_bits):
    """prof[a*LANES + l] = table[a*32 + inter[pos + l]] with two AVX2 byte shuffles per letter."""
    i8 = ir.IntType(8)
    i64 = ir.IntType(64)
    v32 = ir.VectorType(i8, LANES)
    v16 = ir.VectorType(i8, 16)
    lane_t = ir.IntType(lane_bits)
    vout = ir.VectorType(lane_t, LANES)
    pshufb = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(v32, [v32, v32]), "llvm.x86.avx2.pshuf.b")
    idx = builder.load(builder.bitcast(builder.gep(inter_ptr, [pos]), v32.as_pointer()), align=1)
    # pshufb reads the low 4 bits of an index and gives 0 where bit 7 is set:
    # one index vector per table half, the other half's codes set to 0x80
    is_hi = builder.icmp_unsigned(">", idx, ir.Constant(v32, [15] * LANES))
    off = ir.Constant(v32, [0x80] * LANES)
    idx_lo = builder.select(is_hi, off, idx)
    idx_hi = builder.select(is_hi, idx, off)
    dup = ir.Constant(ir.VectorType(ir.IntType(32), LANES), list(range(16)) * 2)
    with cgutils.for_range(builder, n_letters) as loop:
        a = loop.index
        row = builder.gep(table_ptr, [builder.mul(a, ir.Constant(i64, 32))])
        lo16 = builder.load(builder.bitcast(row, v16.as_pointer()), align=1)
        hi16 = builder.load(builder.bitcast(builder.gep(row, [ir.Constant(i64, 16)]),
                                            v16.as_pointer()), align=1)
        lo = builder.shuffle_vector(lo16, lo16, dup)
        hi = builder.shuffle_vector(hi16, hi16, dup)
        r = builder.or_(builder.call(pshufb, [lo, idx_lo]), builder.call(pshufb, [hi, idx_hi]))
        if lane_bits > 8:
            r = builder.sext(r, vout)
        dst = builder.gep(prof_ptr, [builder.mul(a, ir.Constant(i64, LANES))])
        builder.store(r, builder.bitcast(dst, vout.as_pointer()), align=lane_bits // 8)


def _profile_lookup_ir(builder, inter_ptr, pos, table_ptr, n_letters, prof_ptr, lane_bits):
    """Scalar version of :func:`_profile_shuffle_ir` (no x86 instructions)."""
    i64 = ir.IntType(64)
    lane_t = ir.IntType(lane_bits)
    with cgutils.for_range(builder, n_letters) as la:
        a = la.index
        with cgutils.for_range(builder, ir.Constant(i64, LANES)) as ll:
            lane = ll.index
            code = builder.zext(builder.load(builder.gep(inter_ptr, [builder.add(pos, lane)])), i64)
            v = builder.load(builder.gep(table_ptr, [builder.add(builder.mul(a, ir.Constant(i64, 32)), code)]))
            if lane_bits > 8:
                v = builder.sext(v, lane_t)
            builder.store(v, builder.gep(prof_ptr, [builder.add(builder.mul(a, ir.Constant(i64, LANES)), lane)]))


@intrinsic
def _profile_shuffle(typingctx, inter, pos, table, prof, dst):
    """Column profile into prof[dst:] from the int8 table (n_letters x 32) with AVX2 shuffles."""
    if not (isinstance(inter, types.Array) and isinstance(table, types.Array)
            and isinstance(prof, types.Array) and isinstance(prof.dtype, types.Integer)):
        return None
    bits = prof.dtype.bitwidth
    sig = types.void(inter, types.int64, table, prof, types.int64)

    def codegen(context, builder, signature, args):
        it, _, tt, pt, _ = signature.args
        ia = context.make_array(it)(context, builder, args[0])
        ta = context.make_array(tt)(context, builder, args[2])
        pa = context.make_array(pt)(context, builder, args[3])
        dst = builder.gep(pa.data, [args[4]])
        n_letters = builder.extract_value(ta.shape, 0)
        if _HAVE_AVX2:
            _profile_shuffle_ir(builder, ia.data, args[1], ta.data, n_letters, dst, bits)
        else:  # never called there (use_shuffle is False), but must compile
            _profile_lookup_ir(builder, ia.data, args[1], ta.data, n_letters, dst, bits)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, boundscheck=False)
def _profile_scalar(inter, pos, matT, prof, dst):
    """prof[dst + a*LANES + l] = matT[inter[pos + l], a] (any matrix, any CPU)."""
    na = matT.shape[1]
    for l in range(LANES):
        r = inter[pos + l]
        for a in range(na):
            prof[dst + a * LANES + l] = matT[r, a]


@njit(cache=True, nogil=True, boundscheck=False)
def _interleave(codes, offsets, subjects, pad):
    """Lay out ``subjects`` (sorted by length, longest first) in groups of LANES.

    Returns (inter, goff, gncols, gsubj): group g occupies
    inter[goff[g] : goff[g] + gncols[g]*LANES], column j of lane l at
    goff[g] + j*LANES + l (``pad`` past the subject's end); gsubj[g*LANES + l]
    is the subject index of the lane or -1.
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
                ln = offsets[s + 1] - offsets[s]
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
                o = offsets[s]
                for j in range(offsets[s + 1] - o):
                    inter[base + j * LANES + l] = codes[o + j]
    return inter, goff, gncols, gsubj


@njit(cache=True, nogil=True, parallel=True, boundscheck=False)
def _score_groups(q, inter, goff, gncols, gsubj, table8, matT, use_shuffle,
                  oe, ext, limit, out, flags, nchunks):
    """Scores of query ``q`` against the interleaved subjects (out[s], by subject index).

    Lanes have the dtype of ``matT``.  flags[s] = 1 where a lane reached
    ``limit`` (its score must be recomputed with wider lanes).
    """
    ngroups = gncols.shape[0]
    m = q.shape[0]
    na = matT.shape[1]
    for c in prange(nchunks):
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
            for l in range(LANES):
                s = gsubj[g * LANES + l]
                if s >= 0:
                    b = np.int64(best[l])
                    out[s] = b
                    flags[s] = 1 if b >= limit else 0


@njit(cache=True, nogil=True, parallel=True)
def _rescore(q, matrix, codes, offsets, subjects, gap_open, gap_extend, out):
    """Exact int32 scores of query ``q`` against ``subjects`` (written to out[s])."""
    prof = _query_profile(q, matrix)
    m = q.shape[0]
    for t in prange(subjects.shape[0]):
        s = subjects[t]
        hrow = np.empty(m + 1, dtype=np.int32)
        erow = np.empty(m + 1, dtype=np.int32)
        out[s] = _sw_scalar(prof, m, codes[offsets[s]:offsets[s + 1]],
                            gap_open, gap_extend, hrow, erow)


# ---------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------
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
            -(oe + gap_extend) >= lo and mmin >= lo and pad >= lo and 0 <= mmax < info.max // 2)
        # a lane at or above ``limit`` may overflow on the next cell: recompute it
        self.limit = info.max - max(mmax, 0) if dtype != np.int32 else np.iinfo(np.int64).max
        na = matrix.shape[0]
        matT = np.empty((na + 1, na), dtype=dtype)
        if self.fits:
            matT[:na] = matrix.T
            matT[na] = pad
        self.matT = matT


class _Prepared:
    """Per-database, per-scheme state shared by all queries."""

    def __init__(self, database, matrix, gap_open, gap_extend):
        matrix = np.ascontiguousarray(matrix, dtype=np.int32)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
            raise ValueError("matrix must be a non-empty square array")
        if gap_open < 0 or gap_extend < 0 or gap_open + gap_extend <= 0:
            raise ValueError("gap costs must be >= 0 and not both 0")
        self.matrix = matrix
        self.gap_open = int(gap_open)
        self.gap_extend = int(gap_extend)
        self.codes = np.ascontiguousarray(database.codes, dtype=np.uint8)
        self.offsets = np.ascontiguousarray(database.offsets, dtype=np.int64)
        self.n = len(self.offsets) - 1
        na = matrix.shape[0]
        pad = min(0, int(matrix.min()))
        self.pad_code = na
        levels = [_Level(dt, matrix, pad, self.gap_open, self.gap_extend)
                  for dt in (np.int8, np.int16, np.int32)]
        self.levels = [lv for lv in levels if lv.fits]
        # int8 score table for the shuffle-built column profile (rows: letters,
        # 32 columns: subject codes incl. the pad code)
        self.use_shuffle = bool(_HAVE_AVX2 and na + 1 <= 32
                                and matrix.min() >= -128 and matrix.max() <= 127)
        table8 = np.zeros((na, 32), dtype=np.int8)
        if self.use_shuffle:
            table8[:, :na] = matrix
            table8[:, na] = pad
        self.table8 = table8
        self._groups_all = self._groups(np.arange(self.n, dtype=np.int64))

    def _groups(self, subjects):
        lengths = self.offsets[subjects + 1] - self.offsets[subjects]
        order = subjects[np.argsort(-lengths, kind="stable")]
        return _interleave(self.codes, self.offsets, order, self.pad_code)

    def score_query(self, q, out, flags):
        """Exact scores of code array ``q`` against every subject, into ``out``."""
        q = np.ascontiguousarray(q, dtype=np.uint8)
        if self.n == 0:
            return
        if q.shape[0] == 0:
            out[:] = 0
            return
        oe = self.gap_open + self.gap_extend
        # the column profiles only need the letters the query has: renumber them
        letters, qc = np.unique(q, return_inverse=True)
        qc = np.ascontiguousarray(qc, dtype=np.uint8)
        table8 = np.ascontiguousarray(self.table8[letters])
        groups = self._groups_all
        todo = None
        for depth, level in enumerate(self.levels):
            if depth > 0 and level.dtype == np.int32:
                # int32 is exact: a plain scalar pass for the few lanes left
                _rescore(q, self.matrix, self.codes, self.offsets, todo,
                         self.gap_open, self.gap_extend, out)
                return
            inter, goff, gncols, gsubj = groups
            _score_groups(qc, inter, goff, gncols, gsubj, table8,
                          np.ascontiguousarray(level.matT[:, letters]),
                          self.use_shuffle, oe, self.gap_extend, level.limit, out, flags,
                          _nchunks(len(gncols)))
            todo = np.flatnonzero(flags).astype(np.int64)
            if len(todo) == 0:
                return
            flags[todo] = 0
            groups = self._groups(todo)
        raise AssertionError("lanes saturated at the widest level")  # pragma: no cover


def _nchunks(ngroups):
    return max(1, min(ngroups, 8 * get_num_threads()))


def _query_codes(queries, qi):
    return queries.codes[queries.offsets[qi]:queries.offsets[qi + 1]]


def score_all(queries, database, matrix, gap_open, gap_extend) -> np.ndarray:
    """Exact SW scores of every query against every subject: int32 (n_queries, n_subjects)."""
    prep = _Prepared(database, matrix, gap_open, gap_extend)
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


def search(queries, database, matrix, gap_open, gap_extend, top_k, progress=None) -> TopHits:
    """Top ``top_k`` hits per query by exact SW score (see :mod:`swgpu_tools.kernels`)."""
    prep = _Prepared(database, matrix, gap_open, gap_extend)
    nq, ns = len(queries), len(database)
    row = np.zeros(ns, dtype=np.int32)
    flags = np.zeros(ns, dtype=np.uint8)
    q_parts, s_parts, v_parts = [], [], []
    for qi in range(nq):
        row[:] = 0
        prep.score_query(_query_codes(queries, qi), row, flags)
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
