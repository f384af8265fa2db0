"""The pair lanes' row pass: one DP row for PAIR_LANES (query, subject) pairs at once.

:func:`make_pair_row_pass` builds an LLVM-IR intrinsic over the int32 lanes of
one AVX2 register (substitution scores gathered per lane, or letters compared
for match/mismatch matrices), in the variants the passes of :mod:`.pair_lanes`
use: forward and reverse score rows (local or global), and rows that also keep
the direction bits for the traceback.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..kernels.simd import splat, vmax
from .cells import E_EXTEND, F_EXTEND, H_FROM_E, H_FROM_F, NEG

#: Pairs aligned in lock-step by the batch passes (8 int32 lanes = one AVX2
#: register), each lane its own (query, subject) pair.
PAIR_LANES = 8
#: Substitution score of the padding letter (past the end of a shorter pair
#: of a group): cells there never win a local maximum and are never read by a
#: lane's own traceback.
PAD_SCORE = -(1 << 20)
#: Whether batches use pair lanes (:func:`.batch.align_batch`); the scalar passes
#: give the very same alignments (tests compare both).
PAIR_LANES_DEFAULT = True


def make_pair_row_pass(clamp, track, keep_bits, ident=False):
    """Build an intrinsic computing one DP row for PAIR_LANES pairs (int32 lanes).

    ``_pass(rowoff, cols, mf, H, F, bits, n, hb, best, bi, bj, row, oe, ext)``:

    * rowoff: int32[8], the row letter of each lane times the row stride of
      ``mf`` (a flat int32 matrix); cols: uint8, the column letters, lane-
      interleaved (column j of lane l at [(j - 1) * 8 + l]); the substitution
      score is a gather ``mf[rowoff + col]``;
    * H, F: int32, lane-interleaved, columns 0..n: the previous row in, this
      row out; H[0] is replaced by the boundary ``hb`` (the same for every
      lane), after being read as the diagonal of column 1;
    * the cell recurrences and direction bits are those of :func:`.traceback.fill_rows`
      (E along the row, F along the column, ties as there); ``clamp``: H is
      at least 0 (local);
    * keep_bits: bits[j * 8 + l] gets the direction bits of column j;
    * track 1: per lane, the first maximum in column-major order (a cell
      replaces (best, bi, bj) if greater, or equal with a smaller column);
      track 2: the first maximum in row-major order (strictly greater);
      bi/bj get ``row`` and the column.
    * ident (match/mismatch matrices): no gather; ``rowoff`` holds the row
      letters themselves and mf = (match, mismatch, padding code): the score
      is match for equal letters, mismatch otherwise, PAD_SCORE where either
      letter is the padding.
    """

    def typer(typingctx, rowoff, cols, mf, H, F, bits, ncols, hb, best, bi, bj, row, oe, ext):
        sig = types.void(
            rowoff,
            cols,
            mf,
            H,
            F,
            bits,
            types.int64,
            types.int64,
            best,
            bi,
            bj,
            types.int64,
            types.int64,
            types.int64,
        )

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
            hb = splat(builder, builder.trunc(args[7], i32), v32)
            oe_v = splat(builder, builder.trunc(args[12], i32), v32)
            ext_v = splat(builder, builder.trunc(args[13], i32), v32)
            rowoff = builder.load(builder.bitcast(ro.data, p32), align=4)
            hbase = builder.bitcast(ha.data, p32)
            fbase = builder.bitcast(fa.data, p32)
            cbase = builder.bitcast(ca.data, p8)
            bbase = builder.bitcast(ba.data, p8)
            gather = cgutils.get_or_insert_function(
                builder.module,
                ir.FunctionType(v32, [vptr, i32, ir.VectorType(i1, L), v32]),
                "llvm.masked.gather.v8i32.v8p0i32",
            )
            mbase = splat(builder, builder.ptrtoint(ma.data, i64), v64)
            all_on = ir.Constant(ir.VectorType(i1, L), [1] * L)
            four = ir.Constant(v64, [4] * L)
            zero = ir.Constant(v32, [0] * L)

            def const(x):
                return ir.Constant(v32, [x] * L)

            if ident:  # per row: padding rows score PAD_SCORE everywhere
                mp = builder.bitcast(ma.data, i32.as_pointer())
                vals = [builder.load(builder.gep(mp, [ir.Constant(i64, k)])) for k in range(3)]
                padv = splat(builder, vals[2], v32)
                pad_row = builder.icmp_signed("==", rowoff, padv)
                row_match = builder.select(pad_row, const(PAD_SCORE), splat(builder, vals[0], v32))
                row_mis = builder.select(pad_row, const(PAD_SCORE), splat(builder, vals[1], v32))
            diag0 = builder.load(hbase, align=4)
            builder.store(hb, hbase, align=4)
            if track:
                ptrs = [builder.bitcast(arr(k).data, p32) for k in (8, 9, 10)]
                carried0 = [builder.load(p, align=4) for p in ptrs]
                row_v = splat(builder, builder.trunc(args[11], i32), v32)
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
                sub = builder.select(builder.icmp_signed("==", colv, padv), const(PAD_SCORE), sub)
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
                h = vmax(builder, h, zero)
            builder.store(h, hp, align=4)
            builder.store(f2, fp, align=4)
            if keep_bits:
                t = builder.select(bf, const(H_FROM_F), builder.select(be, const(H_FROM_E), zero))
                t = builder.or_(t, builder.select(ce, const(E_EXTEND), zero))
                t = builder.or_(t, builder.select(cf, const(F_EXTEND), zero))
                builder.store(builder.trunc(t, v8), builder.gep(bbase, [j]), align=1)
            new = []
            if track:
                b0, bi0, bj0 = carried
                j_v = splat(builder, builder.trunc(j, i32), v32)
                better = builder.icmp_signed(">", h, b0)
                if track == 1:
                    tie = builder.and_(
                        builder.icmp_signed("==", h, b0), builder.icmp_signed("<", j_v, bj0)
                    )
                    better = builder.or_(better, tie)
                new = [
                    builder.select(better, h, b0),
                    builder.select(better, row_v, bi0),
                    builder.select(better, j_v, bj0),
                ]
            j_next = builder.add(j, ir.Constant(i64, 1))
            j.add_incoming(ir.Constant(i64, 1), entry)
            j.add_incoming(j_next, loop)
            diag.add_incoming(diag0, entry)
            diag.add_incoming(up, loop)
            hl.add_incoming(hb, entry)
            hl.add_incoming(h, loop)
            e.add_incoming(const(NEG), entry)
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

    name = f"pair_row_pass_c{int(clamp)}_t{track}_b{int(keep_bits)}_i{int(ident)}"
    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


pair_row_fill = make_pair_row_pass(False, 0, True)
pair_row_global = make_pair_row_pass(False, 0, False)
pair_row_local = make_pair_row_pass(True, 2, False)
pair_row_fill_id = make_pair_row_pass(False, 0, True, True)
pair_row_global_id = make_pair_row_pass(False, 0, False, True)
pair_row_local_id = make_pair_row_pass(True, 2, False, True)
