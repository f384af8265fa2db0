"""Kernel source of the issue-14 prototype (benchmarks/qp2_proto.py): two queries per
packed register, the query in registers, the subjects streamed in ranges.

kernel_source(R, U, variant) renders the Numba CUDA kernel as Python source (R rows a
lane, U steps unrolled); its intrinsics (ld.shared.v4 and an IMAD among them) are
swgpu_tools.kernels.gpu_intrinsics'.  The package's kernel (swgpu_tools/kernels/gpu/
templates/qp2_kernel.py.in) is this one's 'fmax+pre+chain' variant.  The design and the
measurements: GPU-NOTES.md, "Two queries per register".
"""

from __future__ import annotations

from numba import config

SIM = bool(config.ENABLE_CUDASIM)
FLAG = 0x80  # a subject's first column (and a range's closing sentinel) in the stream

FBIAS = 1040  # 'fmax': values >= FBIAS - open - extend >= 1024, binary16 normals


def mx3(var) -> str:
    """H's and the best's 3-input maximum: s16 (DPX, ALU pipe) or, with 'fmax', binary16 on
    the same bits (positive binary16 order as their bit patterns do)."""
    return "hmax3_2" if "fmax" in var else "vmax3_2"


def lo_expr(var) -> str:
    if "fmax" in var:
        return f"int32(bout & 65535) - {FBIAS}"
    return "int32(int32(bout << 16) >> 16) - kb"


def hi_expr(var) -> str:
    return f"int32(bout >> 16) - {FBIAS}" if "fmax" in var else "int32(bout >> 16)"


def kernel_source(R: int, U: int = 2, G: int = 32, sim: bool = SIM, variant: str = "") -> str:
    """variant, '+'-joined.  Timing probes (wrong scores): 'nobest' drops the best's max3,
    'noe' drops the E update, 'not' feeds F and E from H (no IMAD).  Exact: 'pre' makes the
    next column's diagonal terms at the end of a step (see _step_pre); 'fmax' takes H's and
    the best's maxima in binary16 (see mx3); 'lbN' sets launch bounds (block, N); 'cp'
    passes the constants as kernel parameters.  (Two more, 'h2' and 'lazy', gave the same
    SASS as the default and were removed.)"""
    var = set(variant.split("+")) - {""}
    assert R % 4 == 0 and G == 32
    L = []
    a = L.append
    a("from numba import cuda, int32, int64, uint64")
    a(
        "from swgpu_tools.kernels.gpu_intrinsics import vaddmax2, vmax3_2, vmax2, hmax3_2, "
        "shared_base, lds128, mad32"
    )
    if sim:
        a("")
        a("@cuda.jit(device=True)")
        a("def _up(v, xch, lane):")
        a("    xch[lane] = v")
        a("    cuda.syncthreads()")
        a("    r = xch[lane - 1] if lane > 0 else v")
        a("    cuda.syncthreads()")
        a("    return r")
        up = "_up({v}, xch, lane)"
    else:
        up = "cuda.shfl_up_sync(0xFFFFFFFF, {v}, 1)"
    a("")
    a("def kernel_py(codes, rstart, rlen, rsub0, n_ranges, profg, prof_n, rowb, padc,")
    a("              noe, nxt, scores, kbp, caddp, onep, bnd, tin, tout, accum, linfo, nsubj):")
    a("    prof = cuda.shared.array(0, dtype=int32)")
    if sim:
        a(f"    xch = cuda.shared.array({G}, dtype=int32)")
    a("    tid = int32(cuda.threadIdx.x)")
    a("    bdim = int32(cuda.blockDim.x)")
    a("    k = tid")
    a("    while k < prof_n:")
    a("        prof[k] = profg[k]")
    a("        k = int32(k + bdim)")
    a("    cuda.syncthreads()")
    a("    sbase = shared_base(prof)")
    a("    lane = int32(tid & 31)")
    a("    gw = int64((int64(cuda.blockIdx.x) * int64(bdim) + int64(tid)) // 32)")
    a("    nw = int64((int64(cuda.gridDim.x) * int64(bdim)) // 32)")
    a("    pbase = int32(sbase + lane * 16)")
    # per lane: the halves' reset mask (a chain member starts on this lane), and the score
    # rows this lane writes (the last lane of a member; -1: none)
    a("    rm = int32(linfo[lane])")
    a("    nrm = int32(~rm)")
    a("    wra = int64(linfo[32 + lane])  # (not rowb: that is the profile's row stride)")
    a("    wrb = int64(linfo[64 + lane])")
    if "cp" in var:  # the constants as kernel parameters (constant-bank operands)
        a("    kb = int32(kbp)")
        a("    cadd = int32(caddp)")
        a("    one = int32(onep)")
    else:
        a(
            "    kb = int32(65536 - (noe & 65535))  # the floor: true 0, low half biased by open+extend"
        )
        a("    cadd = int32(noe - 65536)")
        a("    one = int32(int32(nxt >> 31) & 1)  # 1, unknown to ptxas: the IMAD stays an IMAD")
    a("    negb = int32(noe & -65536)  # E, F start: true -(open+extend) in both halves")
    if "fmax" in var:  # both halves biased by FBIAS: every value a positive normal binary16
        a("    oe = int32(65536 - (noe & 65535))")
        a(f"    kb = int32({FBIAS * 65537})")
        a("    negb = int32(kb - oe * 65537)")
    a("    wt = gw")
    a("    while wt < n_ranges:")
    a("        base = int64(rstart[wt])")
    a("        total = int32(rlen[wt])")
    a("        sub = int64(rsub0[wt])")
    if "pre" in var:  # the range's first column is flagged too: its reset writes nothing
        a("        sub0 = sub")
        a("        sub = sub - 1")
    for r in range(R):
        a(f"        {'xx' if 'pre' in var else 'h'}{r} = {'negb' if 'pre' in var else 'kb'}")
        a(f"        e{r} = negb")
    a("        best = kb")
    a("        bout = kb")
    a("        hlast = kb")
    a("        fout = negb")
    a("        diag = kb")
    a(f"        nsteps = int32(total + {G - 1})")
    if U > 1:
        a(f"        nsteps = int32((nsteps + {U - 1}) // {U} * {U})")
    a("        rawn = int32(codes[uint64(base - int64(lane))])  # the stream is padded both sides")
    # tiles: lane 0 reads the tile above's last row (H, F) of its column from bnd, one
    # step ahead; lane 31 writes this tile's (in place: a column is read 31 steps before
    # it is written)
    a("        bv = (int64(negb) << 32) | (int64(kb) & 0xFFFFFFFF)  # (F << 32) | H")
    a("        if tin and lane == 0:")
    a("            bv = bnd[uint64(base)]  # one 8-byte load, split where it is used")
    a("        bi = base + 1  # the next column's boundary word")
    a("        bo = base - 31  # lane 31's column's")
    a("        s = int32(0)")
    a("        while s < nsteps:")
    for _u in range(U):
        i = "            "
        if "pre" in var:
            _step_pre(a, i, R, G, var, up)
            continue
        _step_head(a, i, var, up, "pa = int32(pbase + (raw & 31) * rowb)", "")
        a(i + "    diag = kb")
        for r in range(R):
            a(i + f"    h{r} = kb")
            a(i + f"    e{r} = negb")
        _loads(a, i, "a", "pa", R, G)
        a(i + "xx0 = vaddmax2(diag, a0, e0)")
        for r in range(1, R):
            a(i + f"xx{r} = vaddmax2(h{r - 1}, a{r}, e{r})")
        a(i + "diag = hin")
        a(i + "f = fin")
        for r in range(R):
            a(i + f"h{r} = {mx3(var)}(xx{r}, f, kb)")
            a(i + ("t = h{r}" if "not" in var else f"t = mad32(h{r}, one, cadd)").format(r=r))
            a(i + "f = vaddmax2(f, nxt, t)")
            if "noe" not in var:
                a(i + f"e{r} = vaddmax2(e{r}, nxt, t)")
            if r % 2 == 1 and "nobest" not in var:
                a(i + f"best = {mx3(var)}(best, h{r - 1}, h{r})")
        _step_tail(a, i, R)
    a("        wt = wt + nw")
    return "\n".join(L) + "\n"


def _loads(a, i, reg, address, R, G):
    """The profile words of a column's R rows into ``reg``0..R-1: one ld.shared.v4 per
    four rows, from the granules at ``address`` + q * G * 16."""
    for q in range(R // 4):
        a(
            i + f"{reg}{4 * q}, {reg}{4 * q + 1}, {reg}{4 * q + 2}, {reg}{4 * q + 3} = "
            f"lds128(prof, int32({address} + {q * G * 16}))"
        )


def _step_head(a, i, var, up, address, guard):
    """A step's start, the same in every variant: the next column's letter (and the
    profile ``address`` line), the row above from the lane above (lane 0: the border or
    the tile above, its next word loaded a step ahead), the chain resets, and at a
    subject's first column the flush (:func:`_flush`, ``guard`` on its write) and the
    best's reset; the variant's own resets follow in that branch."""
    a(i + "raw = rawn")
    a(i + "rawn = int32(codes[uint64(base + int64(s + 1 - lane))])")
    a(i + address)
    a(i + "hin = " + up.format(v="hlast"))
    a(i + "fin = " + up.format(v="fout"))
    a(i + "bin = " + up.format(v="bout"))
    a(i + "if lane == 0:")
    a(i + "    hin = int32(bv & 0xFFFFFFFF)")
    a(i + "    fin = int32(bv >> 32)")
    a(i + "    bin = kb")
    a(i + "    if tin:  # the next column's, a step ahead (its latency hidden)")
    a(i + "        bv = bnd[uint64(bi + int64(s))]")
    _chain_masks(a, i, var)
    a(i + f"if raw & {FLAG}:")
    _flush(a, i, var, guard)
    a(i + "    sub = sub + 1")
    a(i + "    best = kb")


def _step_tail(a, i, R):
    """A step's end: the lane's last row goes down (and, from lane 31, to the next tile)."""
    a(i + f"hlast = h{R - 1}")
    a(i + "fout = f")
    a(i + "if tout and lane == 31:  # column s - 31 (pad columns before a range: harmless)")
    a(i + "    bnd[uint64(bo + int64(s))] = (int64(fout) << 32) | (int64(hlast) & 0xFFFFFFFF)")
    a(i + "s = int32(s + 1)")


def _flush(a, i, var, guard):
    """At a subject's first column: this lane's best for the subject just finished goes
    down the lanes; a member's last lane writes its score rows (the best over the tiles
    in a later tile)."""
    a(i + "    bout = vmax2(bin, best)")
    a(i + f"    if (wra >= 0 or wrb >= 0){guard}:")
    a(i + "        lo = " + lo_expr(var))
    a(i + "        hi = " + hi_expr(var))
    for row, v in (("wra", "lo"), ("wrb", "hi")):
        a(i + f"        if {row} >= 0:")
        a(i + f"            ks = {row} * nsubj + sub")
        a(i + "            if accum:  # a later tile: the best over the tiles")
        a(i + f"                {v} = max({v}, scores[ks])")
        a(i + f"            scores[ks] = {v}")


def _chain_masks(a, i, var):
    """'chain': where a member of a half starts on this lane, that half of the row above
    (H, F) and of the best coming down the lanes is reset (one LOP3 each)."""
    if "chain" not in var:
        return
    a(i + "hin = (hin & nrm) | (kb & rm)")
    a(i + "fin = (fin & nrm) | (negb & rm)")
    a(i + "bin = (bin & nrm) | (kb & rm)")


def _step_pre(a, i, R, G, var, up):
    """One step with the next column's diagonal terms made at the end of this one (variant
    'pre'): the loop carries xx (not H), and each xx register is read once, by its row's H,
    before it is made again, so that no value has to be copied to keep an old one."""
    _step_head(a, i, var, up, "pn = int32(pbase + (rawn & 31) * rowb)", " and sub >= sub0")
    a(i + "    pa = int32(pbase + (raw & 31) * rowb)")
    _loads(a, i + "    ", "a", "pa", R, G)
    for r in range(R):
        a(i + f"    xx{r} = vaddmax2(kb, a{r}, negb)")
        a(i + f"    e{r} = negb")
    _loads(a, i, "n", "pn", R, G)
    a(i + "f = fin")
    for r in range(R):
        a(i + f"h{r} = {mx3(var)}(xx{r}, f, kb)")
        a(i + f"t = mad32(h{r}, one, cadd)")
        a(i + "f = vaddmax2(f, nxt, t)")
        a(i + f"e{r} = vaddmax2(e{r}, nxt, t)")
        a(i + f"xx{r} = vaddmax2({'hin' if r == 0 else f'h{r - 1}'}, n{r}, e{r})")
        if r % 2 == 1:
            a(i + f"best = {mx3(var)}(best, h{r - 1}, h{r})")
    _step_tail(a, i, R)
