"""SIMD building blocks in LLVM IR, shared by the CPU search kernel and the alignment lanes.

Numba promotes small integers to int64, which defeats LLVM's auto-vectoriser
on DP loops; the inner loops of :mod:`swgpu_tools.kernels.cpu` and
:mod:`swgpu_tools.align` are therefore emitted as LLVM IR with explicit
vector types, through Numba intrinsics built here.

* :func:`vmax`, :func:`splat`: lane-wise signed maximum and broadcast (IR
  helpers for intrinsic code generators).
* :func:`make_column_pass`: an intrinsic computing a few DP columns for a
  register of subjects (inter-sequence lanes, SWIPE style), with or without
  per-column tracking of the best cell.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def vmax(builder, a, b):
    """Lane-wise signed maximum of two IR vectors."""
    return builder.select(builder.icmp_signed(">", a, b), a, b)


def splat(builder, value, vty):
    """An IR vector of type ``vty`` with ``value`` in every lane."""
    undef = ir.Constant(vty, ir.Undefined)
    v = builder.insert_element(undef, value, ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vty.count), [0] * vty.count)
    return builder.shuffle_vector(v, undef, mask)


def make_column_pass(lanes, cols, track):
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
            oe_v = splat(builder, builder.trunc(cargs[nargs - 2], elt), vty)
            ext_v = splat(builder, builder.trunc(cargs[nargs - 1], elt), vty)
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
            builder.store(hl, hp, align=align)
            builder.store(e, ep, align=align)
            if not track:
                while len(hs) > 1:  # tree of maxima, then one step on the carried best
                    hs = [vmax(builder, hs[k], hs[k + 1]) if k + 1 < len(hs) else hs[k]
                          for k in range(0, len(hs), 2)]
                carried_new[0] = vmax(builder, carried[0], hs[0])
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
