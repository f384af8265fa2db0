"""Small device helpers for the GPU kernels, with CUDA-simulator fallbacks.

Packed arithmetic works on two signed 16-bit lanes of one int32 register
("s16x2"): the low half holds one subject's value, the high half another's.
On the GPU each helper is one PTX instruction through inline assembly
(``add.s16x2``, ``max.s16x2``, ``max.relu.s16x2``, needing sm_90); ptxas fuses
them into Hopper's DPX instructions (``VIADDMNMX.S16x2``, ``VIMNMX3.S16x2``,
``VIADD.16x2``).  The 32-bit helpers (``add.s32``, ``max.s32``) run on any GPU
and keep every score expression in int32 (Numba would widen ``a + b`` to int64).

Half-precision packed arithmetic ("h16", the path for GPUs without DPX) works
on two IEEE binary16 lanes of one int32 register ("f16x2", same lane order):
``add.rn.f16x2``, ``max.f16x2`` and ``fma.rn.relu.f16x2`` (sm_80+; HADD2,
HMNMX2, HFMA2.RELU in SASS).  Integers up to 2,048 in magnitude are exact in
binary16, so the kernels that use them re-score any pair whose score reaches
2,048 with the 32-bit kernels (see :mod:`swgpu_tools.kernels.gpu.searcher`).
``hlo32``/``hhi32`` convert a lane to int32.

Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) there is no inline
assembly and no warp shuffle: the same names are plain Python functions with
the same wrap-around semantics, so kernel logic can be tested on the CPU.
Kernels that shuffle are generated with a shared-memory exchange instead when
the simulator is on (see :mod:`swgpu_tools.kernels.gpu`).
"""

from __future__ import annotations

from numba import config

SIM = bool(config.ENABLE_CUDASIM)

__all__ = [
    "SIM",
    "pack2",
    "lo16",
    "hi16",
    "vadd2",
    "vmax2",
    "vmax2_relu",
    "vaddmax2",
    "vaddmax2_relu",
    "vmax3_2",
    "add32",
    "max32",
    "addmax32",
    "addmax32_relu",
    "max3_32",
    "hpack2",
    "hadd2",
    "hmax2",
    "haddmax2",
    "haddmax2_relu",
    "hmax3_2",
    "hlo32",
    "hhi32",
    "shared_base",
    "lds32",
]


# --------------------------------------------------------------------------
# Host-side packing (also used by the simulator fallbacks)
# --------------------------------------------------------------------------


def _s16(x: int) -> int:
    x &= 0xFFFF
    return x - 0x10000 if x & 0x8000 else x


def _s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def pack2(lo: int, hi: int) -> int:
    """Two signed 16-bit values as one signed int32 (lo in bits 0-15)."""
    return _s32(((int(hi) & 0xFFFF) << 16) | (int(lo) & 0xFFFF))


def hpack2(lo, hi) -> int:
    """Two numbers as the binary16 lanes of one signed int32 (lo in bits 0-15)."""
    import numpy as np

    bits = np.array([lo, hi], dtype=np.float16).view(np.uint16)
    return _s32((int(bits[1]) << 16) | int(bits[0]))


def lo16(x: int) -> int:
    return _s16(int(x))


def hi16(x: int) -> int:
    return _s16(int(x) >> 16)


def lock_simulator_shared_arrays() -> bool:
    """Make the CUDA simulator's ``cuda.shared.array`` safe between a block's threads.

    numba-cuda's simulator (``FakeCUDAShared.array``) allocates a block's shared
    array on the first call with an unlocked check-then-set, keyed by the calling
    line.  Two threads that switch between the check and the set each get an array
    of their own, and what one writes the others never see: under a loaded CPU the
    histogram kernel lost counts that way (a CI run, stop 28).  This replaces the
    method with the same lookup under a lock.  Returns False when the simulator's
    class is not there (nothing to do); idempotent."""
    import sys
    import threading

    import numpy as np

    try:
        from numba.cuda.simulator import kernelapi
    except ImportError:  # pragma: no cover - every numba-cuda has it
        return False
    cls = kernelapi.FakeCUDAShared
    if getattr(cls.array, "swgpu_locked", False):
        return True
    plain = cls.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0:
            return plain(self, shape, dtype, alignment)  # errors, dynamic memory: no stack key
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)  # the simulator's own key
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    array.swgpu_locked = True
    cls.array = array
    return True


if SIM:
    import numpy as np
    from numba import cuda

    lock_simulator_shared_arrays()

    def _pk(lo, hi):
        return np.int32(pack2(lo, hi))

    def _lanes(x):
        x = int(x)
        return _s16(x), _s16(x >> 16)

    @cuda.jit(device=True)
    def vadd2(a, b):
        al, ah = _lanes(a)
        bl, bh = _lanes(b)
        return _pk(al + bl, ah + bh)

    @cuda.jit(device=True)
    def vmax2(a, b):
        al, ah = _lanes(a)
        bl, bh = _lanes(b)
        return _pk(max(al, bl), max(ah, bh))

    @cuda.jit(device=True)
    def vmax2_relu(a, b):
        al, ah = _lanes(a)
        bl, bh = _lanes(b)
        return _pk(max(al, bl, 0), max(ah, bh, 0))

    @cuda.jit(device=True)
    def vaddmax2(a, b, c):
        """max(a + b, c) per 16-bit lane (the sum wraps like the hardware's)."""
        al, ah = _lanes(a)
        bl, bh = _lanes(b)
        cl, ch = _lanes(c)
        return _pk(max(_s16(al + bl), cl), max(_s16(ah + bh), ch))

    @cuda.jit(device=True)
    def vaddmax2_relu(a, b, c):
        al, ah = _lanes(a)
        bl, bh = _lanes(b)
        cl, ch = _lanes(c)
        return _pk(max(_s16(al + bl), cl, 0), max(_s16(ah + bh), ch, 0))

    @cuda.jit(device=True)
    def vmax3_2(a, b, c):
        al, ah = _lanes(a)
        bl, bh = _lanes(b)
        cl, ch = _lanes(c)
        return _pk(max(al, bl, cl), max(ah, bh, ch))

    @cuda.jit(device=True)
    def add32(a, b):
        return np.int32(_s32(int(a) + int(b)))

    @cuda.jit(device=True)
    def max32(a, b):
        return np.int32(max(int(a), int(b)))

    @cuda.jit(device=True)
    def addmax32(a, b, c):
        return np.int32(max(_s32(int(a) + int(b)), int(c)))

    @cuda.jit(device=True)
    def addmax32_relu(a, b, c):
        return np.int32(max(_s32(int(a) + int(b)), int(c), 0))

    @cuda.jit(device=True)
    def max3_32(a, b, c):
        return np.int32(max(int(a), int(b), int(c)))

    def _hl(x):
        b = np.array([int(x) & 0xFFFFFFFF], dtype=np.uint32).view(np.float16)
        return b[0], b[1]

    def _hp(lo, hi):
        return np.int32(hpack2(lo, hi))

    @cuda.jit(device=True)
    def hadd2(a, b):
        al, ah = _hl(a)
        bl, bh = _hl(b)
        return _hp(al + bl, ah + bh)  # float16 + float16: rounded to nearest even

    @cuda.jit(device=True)
    def hmax2(a, b):
        al, ah = _hl(a)
        bl, bh = _hl(b)
        return _hp(max(al, bl), max(ah, bh))

    @cuda.jit(device=True)
    def haddmax2(a, b, c):
        al, ah = _hl(a)
        bl, bh = _hl(b)
        cl, ch = _hl(c)
        return _hp(max(al + bl, cl), max(ah + bh, ch))

    @cuda.jit(device=True)
    def haddmax2_relu(a, b, c):
        z = np.float16(0)
        al, ah = _hl(a)
        bl, bh = _hl(b)
        cl, ch = _hl(c)
        return _hp(max(max(al + bl, z), cl), max(max(ah + bh, z), ch))

    @cuda.jit(device=True)
    def hmax3_2(a, b, c):
        al, ah = _hl(a)
        bl, bh = _hl(b)
        cl, ch = _hl(c)
        return _hp(max(al, bl, cl), max(ah, bh, ch))

    @cuda.jit(device=True)
    def hlo32(a):
        return np.int32(int(_hl(a)[0]))

    @cuda.jit(device=True)
    def hhi32(a):
        return np.int32(int(_hl(a)[1]))

    @cuda.jit(device=True)
    def shared_base(arr):
        """Simulator: addresses are element indices * 4 (see lds32)."""
        return np.int32(0)

    @cuda.jit(device=True)
    def lds32(arr, addr):
        return arr[int(addr) >> 2]

    @cuda.jit(device=True)
    def lds128(arr, addr):
        i = int(addr) >> 2
        return arr[i], arr[i + 1], arr[i + 2], arr[i + 3]

    @cuda.jit(device=True)
    def mad32(a, b, c):
        return np.int32(_s32(int(a) * int(b) + int(c)))

else:
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def shared_base(typingctx, arr):
        """32-bit shared-window byte address of a shared-memory array's first element."""
        if not isinstance(arr, types.Array):
            return None
        sig = types.int32(arr)

        def codegen(context, builder, signature, args):
            ary = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=args[0])
            gen = builder.ptrtoint(ary.data, ir.IntType(64))
            fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(64)])
            asm = "{.reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t;}"
            return builder.call(ir.InlineAsm(fnty, asm, "=r,l"), [gen])

        return sig, codegen

    @intrinsic
    def lds32(typingctx, arr, addr):
        """Load the int32 at shared byte address ``addr`` (``arr`` only ties the read to it)."""
        if not isinstance(arr, types.Array) or not isinstance(addr, types.Integer):
            return None
        sig = types.int32(arr, addr)

        def codegen(context, builder, signature, args):
            a = context.cast(builder, args[1], signature.args[1], types.int32)
            fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32)])
            return builder.call(ir.InlineAsm(fnty, "ld.shared.b32 $0, [$1];", "=r,r"), [a])

        return sig, codegen

    @intrinsic
    def lds128(typingctx, arr, addr):
        """The four int32 at shared byte address ``addr`` (16-byte aligned): one
        ld.shared.v4 (``arr`` only ties the read to it)."""
        if not isinstance(arr, types.Array) or not isinstance(addr, types.Integer):
            return None
        tup = types.UniTuple(types.int32, 4)
        sig = tup(arr, addr)

        def codegen(context, builder, signature, args):
            a = context.cast(builder, args[1], signature.args[1], types.int32)
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.LiteralStructType([i32] * 4), [i32])
            asm = ir.InlineAsm(fnty, "ld.shared.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r")
            res = builder.call(asm, [a])
            vals = [builder.extract_value(res, k) for k in range(4)]
            return context.make_tuple(builder, tup, vals)

        return sig, codegen

    def _make(name: str, body: str, nargs: int):
        """An int32 intrinsic emitting ``body`` (PTX with $0 = result, $1.. = args)."""

        def typer(typingctx, *args):
            if len(args) != nargs or not all(isinstance(a, types.Integer) for a in args):
                return None
            sig = types.int32(*args)

            def codegen(context, builder, signature, llargs):
                vals = [
                    context.cast(builder, v, t, types.int32) for v, t in zip(llargs, signature.args)
                ]
                fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32)] * nargs)
                cons = "=r," + ",".join(["r"] * nargs)
                return builder.call(ir.InlineAsm(fnty, body, cons), vals)

            return sig, codegen

        # intrinsic() takes the function's arity from its signature: build one
        # with exactly nargs named parameters.
        params = ", ".join(f"a{k}" for k in range(nargs))
        ns = {"typer": typer}
        exec(f"def {name}(typingctx, {params}):\n    return typer(typingctx, {params})\n", ns)
        return intrinsic(ns[name])

    # s16x2 (sm_90: DPX)
    vadd2 = _make("vadd2", "add.s16x2 $0, $1, $2;", 2)
    vmax2 = _make("vmax2", "max.s16x2 $0, $1, $2;", 2)
    vmax2_relu = _make("vmax2_relu", "max.relu.s16x2 $0, $1, $2;", 2)
    vaddmax2 = _make("vaddmax2", "{.reg .b32 t; add.s16x2 t, $1, $2; max.s16x2 $0, t, $3;}", 3)
    vaddmax2_relu = _make(
        "vaddmax2_relu", "{.reg .b32 t; add.s16x2 t, $1, $2; max.relu.s16x2 $0, t, $3;}", 3
    )
    vmax3_2 = _make("vmax3_2", "{.reg .b32 t; max.s16x2 t, $1, $2; max.s16x2 $0, t, $3;}", 3)

    # s32 (any GPU; fused into VIADDMNMX / VIMNMX3 on sm_90)
    add32 = _make("add32", "add.s32 $0, $1, $2;", 2)
    max32 = _make("max32", "max.s32 $0, $1, $2;", 2)
    addmax32 = _make("addmax32", "{.reg .b32 t; add.s32 t, $1, $2; max.s32 $0, t, $3;}", 3)
    addmax32_relu = _make(
        "addmax32_relu", "{.reg .b32 t; add.s32 t, $1, $2; max.s32 t, t, $3; max.s32 $0, t, 0;}", 3
    )
    max3_32 = _make("max3_32", "{.reg .b32 t; max.s32 t, $1, $2; max.s32 $0, t, $3;}", 3)
    # a * b + c as an IMAD (b a run-time 1: ptxas keeps it off the ALU pipe)
    mad32 = _make("mad32", "mad.lo.s32 $0, $1, $2, $3;", 3)

    # f16x2 (sm_80+: HADD2, HMNMX2, HFMA2.RELU); 0x3C003C00 is (1.0, 1.0)
    hadd2 = _make("hadd2", "add.rn.f16x2 $0, $1, $2;", 2)
    hmax2 = _make("hmax2", "max.f16x2 $0, $1, $2;", 2)
    haddmax2 = _make("haddmax2", "{.reg .b32 t; add.rn.f16x2 t, $1, $2; max.f16x2 $0, t, $3;}", 3)
    haddmax2_relu = _make(
        "haddmax2_relu",
        "{.reg .b32 t, one; mov.b32 one, 0x3C003C00; fma.rn.relu.f16x2 t, $1, one, $2; "
        "max.f16x2 $0, t, $3;}",
        3,
    )
    hmax3_2 = _make("hmax3_2", "{.reg .b32 t; max.f16x2 t, $1, $2; max.f16x2 $0, t, $3;}", 3)
    hlo32 = _make("hlo32", "{.reg .b16 l, h; mov.b32 {l, h}, $1; cvt.rzi.s32.f16 $0, l;}", 1)
    hhi32 = _make("hhi32", "{.reg .b16 l, h; mov.b32 {l, h}, $1; cvt.rzi.s32.f16 $0, h;}", 1)


# --------------------------------------------------------------------------
# Host-side database layout helpers (CPU, compiled once and cached)
# --------------------------------------------------------------------------

import numpy as _np  # noqa: E402
from numba import njit as _njit  # noqa: E402


@_njit(nogil=True, cache=True)
def used_codes(codes):
    """uint8[256]: 1 for each byte value that occurs in ``codes`` (one pass, no widening)."""
    seen = _np.zeros(256, _np.uint8)
    for i in range(codes.shape[0]):
        seen[codes[i]] = 1
    return seen


@_njit(nogil=True, cache=True)
def gather_remap(codes, offsets, sel, lut, out, starts, lens):
    """Concatenate subjects ``sel`` (indices into ``offsets``) into ``out``, re-coded
    through ``lut``; their start positions and lengths go to ``starts``/``lens``.
    Returns the residues written.  Releases the GIL (runs in a helper thread)."""
    p = 0
    for i in range(sel.shape[0]):
        s = sel[i]
        a = offsets[s]
        b = offsets[s + 1]
        starts[i] = p
        lens[i] = b - a
        for k in range(a, b):
            out[p] = lut[codes[k]]
            p += 1
    return p
