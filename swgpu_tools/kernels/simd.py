"""SIMD building blocks in LLVM IR, shared by the CPU search kernel and the alignment lanes.

Numba promotes small integers to int64, which defeats LLVM's auto-vectoriser
on DP loops; the inner loops of :mod:`swgpu_tools.kernels.cpu` and
:mod:`swgpu_tools.alignment` are therefore emitted as LLVM IR with explicit
vector types, through Numba intrinsics built here.

* :func:`vmax`, :func:`splat`: lane-wise signed maximum and broadcast (IR
  helpers for intrinsic code generators).
* :func:`make_column_pass`: an intrinsic computing a few DP columns for a
  register of subjects (inter-sequence lanes, SWIPE style), with or without
  per-column tracking of the best cell.
* :func:`make_profile_shuffle`: an intrinsic building the column profile of
  a register of subjects (the score of each query letter against each lane's
  subject letter) with byte shuffles, from an int8 table (:data:`HAVE_AVX2`).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _host_has(*features: str) -> bool:
    try:
        import llvmlite.binding as llvm

        have = llvm.get_host_cpu_features()
        return all(bool(have.get(f, False)) for f in features)
    except Exception:  # pragma: no cover - unusual llvmlite builds
        return False


#: Whether this CPU has AVX2 (and so SSSE3): the column profiles are then built
#: with byte shuffles (:func:`make_profile_shuffle`); callers use a scalar loop
#: otherwise.
HAVE_AVX2 = _host_has("avx2")
#: Whether this CPU has AVX-512 with its 256-bit forms (AVX512VL): 32 vector
#: registers instead of 16, so a column pass may carry more columns in registers.
HAVE_AVX512VL = _host_has("avx512f", "avx512vl")


def vmax(builder, a, b):
    """Lane-wise signed maximum of two IR vectors."""
    return builder.select(builder.icmp_signed(">", a, b), a, b)


def splat(builder, value, vty):
    """An IR vector of type ``vty`` with ``value`` in every lane."""
    undef = ir.Constant(vty, ir.Undefined)
    v = builder.insert_element(undef, value, ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vty.count), [0] * vty.count)
    return builder.shuffle_vector(v, undef, mask)


def make_column_pass(lanes, cols, track, carry=False, split=False):
    """Build an intrinsic computing ``cols`` DP columns for ``lanes`` subjects.

    ``lanes=None``: as many lanes as fit one 256-bit register for the lane
    type of the arrays (32 int8, 16 int16, 8 int32).

    ``_column_pass(q, prof, pstride, H, E, best, oe, ext)`` (track=False),
    ``_column_pass(q, prof, pstride, H, E, bc, ic, oe, ext)`` (track=True) and
    ``_column_pass(q, prof, pstride, H, E, best, D, F, boff, oe, ext)``
    (carry=True, without tracking: a strip of rows of a longer query) and
    ``_column_pass(q, prof, pstride, H, E, H2, E2, best, oe, ext)`` (split=True,
    without tracking: H and E are read, the new values go to H2 and E2, so that
    a caller may keep the columns before the pass).

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

    d_c starts at 0 and f_c at -oe; with ``carry``, d_c starts at
    D[boff + c*lanes : +lanes] and f_c at F[...] (same place), and their
    values after the last row are written back there: column c's diagonal
    H of the strip's last row (H of column c - 1) and its F for the next row,
    the start of the next strip.  Without tracking, b (one best per lane)
    is read from and written back to ``best``.  With tracking, every column
    keeps its own best bc[c] and the first row reaching it, ic[c] (both read
    and written back; a cell replaces them only when strictly greater).
    Arithmetic wraps in the lane type: callers keep values in range.
    """

    assert not (track and carry) and not (split and (track or carry))

    def typer_impl(args):
        arrays = [t for t in args if isinstance(t, types.Array)]
        nargs = 9 if track else 11 if carry else 10 if split else 8
        narrays = nargs - 4 if carry else nargs - 3
        if len(args) != nargs or len(arrays) != narrays:
            return None
        lane_arrays = arrays[1:]
        if any(t.dtype != lane_arrays[0].dtype for t in lane_arrays):
            return None
        if not isinstance(lane_arrays[0].dtype, types.Integer):
            return None
        bits = lane_arrays[0].dtype.bitwidth
        nlanes = lanes if lanes is not None else 256 // bits
        if carry:
            sig = types.void(
                args[0], args[1], types.int64, *args[3:8], types.int64, types.int64, types.int64
            )
        else:
            sig = types.void(
                args[0], args[1], types.int64, *args[3 : nargs - 2], types.int64, types.int64
            )

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
            oe_v = splat(builder, builder.trunc(cargs[nargs - 2], elt), vty)
            ext_v = splat(builder, builder.trunc(cargs[nargs - 1], elt), vty)
            zero_v = ir.Constant(vty, [0] * nlanes)
            neg_oe = builder.sub(zero_v, oe_v)
            pstride_v = builder.udiv(cargs[2], ir.Constant(i64, nlanes))
            pbase0 = builder.bitcast(pa.data, vptr)
            pbases = [
                builder.gep(pbase0, [builder.mul(pstride_v, ir.Constant(i64, c))])
                for c in range(cols)
            ]
            hbase = builder.bitcast(ha.data, vptr)
            ebase = builder.bitcast(ea.data, vptr)
            hout, eout = hbase, ebase
            if split:
                hout = builder.bitcast(
                    context.make_array(tys[5])(context, builder, cargs[5]).data, vptr
                )
                eout = builder.bitcast(
                    context.make_array(tys[6])(context, builder, cargs[6]).data, vptr
                )
            if track:
                bca = context.make_array(tys[5])(context, builder, cargs[5])
                ica = context.make_array(tys[6])(context, builder, cargs[6])
                bptrs = [
                    builder.gep(builder.bitcast(bca.data, vptr), [ir.Constant(i64, c)])
                    for c in range(cols)
                ]
                iptrs = [
                    builder.gep(builder.bitcast(ica.data, vptr), [ir.Constant(i64, c)])
                    for c in range(cols)
                ]
                carried0 = [builder.load(p, align=align) for p in bptrs] + [
                    builder.load(p, align=align) for p in iptrs
                ]
            else:
                kb = 7 if split else 5
                ba = context.make_array(tys[kb])(context, builder, cargs[kb])
                bptrs = [builder.bitcast(ba.data, vptr)]
                carried0 = [builder.load(bptrs[0], align=align)]
            if carry:  # the strip's first d_c and f_c from D and F
                boff = builder.udiv(cargs[8], ir.Constant(i64, nlanes))
                dptrs, fptrs = [], []
                for k, ptrs in ((6, dptrs), (7, fptrs)):
                    arr = context.make_array(tys[k])(context, builder, cargs[k])
                    base = builder.gep(builder.bitcast(arr.data, vptr), [boff])
                    ptrs.extend(builder.gep(base, [ir.Constant(i64, c)]) for c in range(cols))
                d0 = [builder.load(p, align=align) for p in dptrs]
                f0 = [builder.load(p, align=align) for p in fptrs]
            else:
                d0 = [zero_v] * cols
                f0 = [neg_oe] * cols
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
                row_v = splat(builder, builder.trunc(i, elt), vty)
            ds_new, fs_new, hs = [], [], []
            carried_new = list(carried)
            for c in range(cols):
                p = builder.load(builder.gep(pbases[c], [code]), align=align)
                h = builder.add(ds[c], p)
                h = vmax(builder, h, e)
                h = vmax(builder, h, fs[c])
                h = vmax(builder, h, zero_v)
                ds_new.append(hl)
                hl = h
                hs.append(h)
                if track:
                    better = builder.icmp_signed(">", h, carried[c])
                    carried_new[c] = builder.select(better, h, carried[c])
                    carried_new[cols + c] = builder.select(better, row_v, carried[cols + c])
                t = builder.sub(h, oe_v)
                e = vmax(builder, builder.sub(e, ext_v), t)
                fs_new.append(vmax(builder, builder.sub(fs[c], ext_v), t))
            if split:
                hp = builder.gep(hout, [i])
                ep = builder.gep(eout, [i])
            builder.store(hl, hp, align=align)
            builder.store(e, ep, align=align)
            if not track:
                while len(hs) > 1:  # tree of maxima, then one step on the carried best
                    hs = [
                        vmax(builder, hs[k], hs[k + 1]) if k + 1 < len(hs) else hs[k]
                        for k in range(0, len(hs), 2)
                    ]
                carried_new[0] = vmax(builder, carried[0], hs[0])
            i_next = builder.add(i, ir.Constant(i64, 1))
            i.add_incoming(ir.Constant(i64, 0), entry)
            i.add_incoming(i_next, loop)
            for c in range(cols):
                ds[c].add_incoming(d0[c], entry)
                ds[c].add_incoming(ds_new[c], loop)
                fs[c].add_incoming(f0[c], entry)
                fs[c].add_incoming(fs_new[c], loop)
            for phi, v0, v1 in zip(carried, carried0, carried_new):
                phi.add_incoming(v0, entry)
                phi.add_incoming(v1, loop)
            builder.cbranch(builder.icmp_signed("<", i_next, m), loop, done)

            builder.position_at_end(done)
            ptrs = bptrs + iptrs if track else bptrs
            if carry:  # d_c and f_c after the strip's last row, back to D and F
                ptrs = ptrs + dptrs + fptrs
                carried0 = carried0 + d0 + f0
                carried_new = carried_new + ds_new + fs_new
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
    elif carry:

        def typer(typingctx, q, prof, pstride, H, E, best, D, F, boff, oe, ext):
            return typer_impl((q, prof, pstride, H, E, best, D, F, boff, oe, ext))
    elif split:

        def typer(typingctx, q, prof, pstride, H, E, H2, E2, best, oe, ext):
            return typer_impl((q, prof, pstride, H, E, H2, E2, best, oe, ext))
    else:

        def typer(typingctx, q, prof, pstride, H, E, best, oe, ext):
            return typer_impl((q, prof, pstride, H, E, best, oe, ext))

    name = f"_column_pass_{lanes or 'reg'}x{cols}" + ("_track" if track else "")
    name += "_carry" if carry else ""
    name += "_split" if split else ""
    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


def _profile_shuffle_ir(builder, inter_ptr, pos, table_ptr, n_letters, prof_ptr, lanes, lane_bits):
    """prof[a*lanes + l] = table[a*32 + inter[pos + l]]: two byte shuffles per letter.

    lanes 32: AVX2 ``vpshufb`` on 32 bytes (each 128-bit half of the table row
    duplicated); lanes 16: SSSE3 ``pshufb`` on 16 bytes.
    """
    i8 = ir.IntType(8)
    i64 = ir.IntType(64)
    vidx = ir.VectorType(i8, lanes)
    v16 = ir.VectorType(i8, 16)
    vout = ir.VectorType(ir.IntType(lane_bits), lanes)
    name = "llvm.x86.avx2.pshuf.b" if lanes == 32 else "llvm.x86.ssse3.pshuf.b.128"
    pshufb = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vidx, [vidx, vidx]), name
    )
    idx = builder.load(builder.bitcast(builder.gep(inter_ptr, [pos]), vidx.as_pointer()), align=1)
    # pshufb reads the low 4 bits of an index and gives 0 where bit 7 is set:
    # one index vector per table half, the other half's codes set to 0x80
    is_hi = builder.icmp_unsigned(">", idx, ir.Constant(vidx, [15] * lanes))
    off = ir.Constant(vidx, [0x80] * lanes)
    idx_lo = builder.select(is_hi, off, idx)
    idx_hi = builder.select(is_hi, idx, off)
    dup = ir.Constant(ir.VectorType(ir.IntType(32), lanes), list(range(16)) * (lanes // 16))
    with cgutils.for_range(builder, n_letters) as loop:
        a = loop.index
        row = builder.gep(table_ptr, [builder.mul(a, ir.Constant(i64, 32))])
        lo16 = builder.load(builder.bitcast(row, v16.as_pointer()), align=1)
        hi16 = builder.load(
            builder.bitcast(builder.gep(row, [ir.Constant(i64, 16)]), v16.as_pointer()), align=1
        )
        if lanes != 16:
            lo16 = builder.shuffle_vector(lo16, lo16, dup)
            hi16 = builder.shuffle_vector(hi16, hi16, dup)
        r = builder.or_(builder.call(pshufb, [lo16, idx_lo]), builder.call(pshufb, [hi16, idx_hi]))
        if lane_bits > 8:
            r = builder.sext(r, vout)
        dst = builder.gep(prof_ptr, [builder.mul(a, ir.Constant(i64, lanes))])
        builder.store(r, builder.bitcast(dst, vout.as_pointer()), align=lane_bits // 8)


def _profile_lookup_ir(builder, inter_ptr, pos, table_ptr, n_letters, prof_ptr, lanes, lane_bits):
    """Scalar version of :func:`_profile_shuffle_ir` (no x86 instructions)."""
    i64 = ir.IntType(64)
    lane_t = ir.IntType(lane_bits)
    with cgutils.for_range(builder, n_letters) as la:
        a = la.index
        with cgutils.for_range(builder, ir.Constant(i64, lanes)) as ll:
            lane = ll.index
            code = builder.zext(builder.load(builder.gep(inter_ptr, [builder.add(pos, lane)])), i64)
            row = builder.mul(a, ir.Constant(i64, 32))
            v = builder.load(builder.gep(table_ptr, [builder.add(row, code)]))
            if lane_bits > 8:
                v = builder.sext(v, lane_t)
            at = builder.add(builder.mul(a, ir.Constant(i64, lanes)), lane)
            builder.store(v, builder.gep(prof_ptr, [at]))


def make_profile_shuffle(lanes):
    """Build an intrinsic ``profile(inter, pos, table, prof, dst)`` for ``lanes`` (16 or 32).

    prof[dst + a*lanes + l] = table[a, inter[pos + l]] for every row a of the
    int8 table (n_letters x 32: a query letter's scores against subject codes
    0..31), sign-extended to prof's integer type.  Byte shuffles where the
    CPU has AVX2 (:data:`HAVE_AVX2`); elsewhere it compiles to a scalar loop
    (callers use their own scalar path there).
    """

    def typer(typingctx, inter, pos, table, prof, dst):
        if not (
            isinstance(inter, types.Array)
            and isinstance(table, types.Array)
            and isinstance(prof, types.Array)
            and isinstance(prof.dtype, types.Integer)
        ):
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
            build = _profile_shuffle_ir if HAVE_AVX2 else _profile_lookup_ir
            build(builder, ia.data, args[1], ta.data, n_letters, dst, lanes, bits)
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = typer.__qualname__ = f"_profile_shuffle_{lanes}"
    return intrinsic(typer)


@intrinsic
def copy_register(typingctx, dst, dpos, src, spos):
    """``dst.flat[dpos:dpos + L] = src.flat[spos:spos + L]`` for the L lanes of one 256-bit
    register of src's integer type, sign-extended to dst's (one vector load, one store).

    Both arrays C-contiguous; no bounds checks (callers keep the ranges inside).
    """
    if not (
        isinstance(dst, types.Array)
        and isinstance(src, types.Array)
        and isinstance(dst.dtype, types.Integer)
        and isinstance(src.dtype, types.Integer)
        and dst.dtype.bitwidth >= src.dtype.bitwidth
    ):
        return None
    sig = types.void(dst, types.int64, src, types.int64)

    def codegen(context, builder, signature, args):
        dt, _, st, _ = signature.args
        da = context.make_array(dt)(context, builder, args[0])
        sa = context.make_array(st)(context, builder, args[2])
        sbits, dbits = st.dtype.bitwidth, dt.dtype.bitwidth
        lanes = 256 // sbits
        vs = ir.VectorType(ir.IntType(sbits), lanes)
        vd = ir.VectorType(ir.IntType(dbits), lanes)
        v = builder.load(
            builder.bitcast(builder.gep(sa.data, [args[3]]), vs.as_pointer()), align=sbits // 8
        )
        if dbits > sbits:
            v = builder.sext(v, vd)
        builder.store(
            v, builder.bitcast(builder.gep(da.data, [args[1]]), vd.as_pointer()), align=dbits // 8
        )
        return context.get_dummy_value()

    return sig, codegen
