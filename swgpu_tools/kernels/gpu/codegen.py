"""GPU kernel sources: the templates of ``templates/`` rendered per shape.

The kernels are written as Numba-CUDA Python with placeholders in
``templates/*.py.in`` (a reader studies them there); this module fills in a
shape and returns the module source that :mod:`.cache` writes to the kernel
cache folder and Numba compiles.  The expansion rules (``%if``/``%for``
directives, ``{expr}`` placeholders) are in ``templates/README.md`` and in
:func:`render`.

The generated text is part of the cache key (the module name holds its hash)
and is checked against ``tests/data/gpu_codegen.sha256``
(``benchmarks/gpu_codegen_manifest.py`` rewrites that after a deliberate change).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from ..gpu_intrinsics import SIM

#: Scoring-kernel modes: "s16" (two subjects as packed signed 16-bit lanes, Hopper DPX),
#: "h16" (two subjects as packed binary16 lanes, any GPU of compute capability 8.0+),
#: "s32" (one subject per group in int32, any GPU; the exact re-scoring path).
MODES = ("s16", "h16", "s32")
#: The modes that pack two subjects per group (items of two subjects, D^3 pair table).
PAIRED_MODES = ("s16", "h16")

#: Launch bounds (threads per block, blocks per SM) of scoring kernels, by (mode, multipass):
#: ptxas then keeps them within 65,536 / (threads x blocks) registers.  The h16 multi-pass
#: kernels take 162-164 registers unbounded (3 blocks of 128 threads per SM), too few warps
#: to hide their latency (GPU-NOTES.md); bounded to 128 they spill 60 bytes outside the
#: step loop.  A bounded kernel is launched with at most that many threads per block.  The
#: s16 kernels' bounds come with their variant (:data:`S16_DEFAULT`, below).
LAUNCH_BOUNDS = {("h16", True): (128, 4)}


def _bounds_override(text: str) -> dict:
    """``$SWGPU_LAUNCH_BOUNDS`` for experiments: ``mode[m]=THREADSxBLOCKS`` items, comma-
    separated (``m``: the multi-pass kernels; ``=0`` removes an entry), e.g. ``s16=128x4``."""
    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, _, val = item.partition("=")
        multipass = key.endswith("m")
        mode = key[:-1] if multipass else key
        t, _, b = val.partition("x")
        if mode not in MODES or not (val == "0" or (t.isdigit() and b.isdigit())):
            raise ValueError(f"SWGPU_LAUNCH_BOUNDS: cannot read {item!r} (e.g. s16=128x4)")
        out[(mode, multipass)] = None if val == "0" else (int(t), int(b))
    return out


LAUNCH_BOUNDS.update(_bounds_override(os.environ.get("SWGPU_LAUNCH_BOUNDS", "")))
LAUNCH_BOUNDS = {k: v for k, v in LAUNCH_BOUNDS.items() if v}


#: The s16 kernels' variant (issue 14; RESULTS-gpu.md runs 51-56): LOB, the low half of H,
#: E and F kept + (open + extend), so that H - open - extend is a 32-bit add off the DPX
#: pipe and the floor at 0 joins H's max3 (4.5 instead of 5.5 DPX per packed cell); U = 2,
#: the multi-pass kernels' step loop unrolled twice; B = 3, launch bounds (128 threads, 3
#: blocks per SM).  Together +3 % on long subjects (multi-pass), neutral on single-pass.
S16_DEFAULT = {"LOB": True, "U": 2, "B": 3, "PROBE": ""}

#: Speed-of-light probes (issue 14; timing only, the scores are WRONG): ``cf`` gives every
#: lane a bank of its own for its pair-table loads (same instructions, no bank conflicts);
#: ``nof`` drops the F chain's DPX (one of 4.5 per packed cell); ``fmax`` takes H's and the
#: best's 3-input maxima as binary16 maxima (the FP pipe) on the same bits.  Never in the
#: cache of a real search: the variant is part of every kernel's cache key.
PROBES = ("cf", "nof", "fmax")


def _variant(text: str) -> dict:
    """The s16 variant with ``$SWGPU_KERNEL_VARIANT``'s changes (experiments): comma-separated
    ``lob``/``nolob``, ``u1``/``u2`` and ``b0``/``b3``/``b4`` (``b0``: no launch bounds);
    ``nolob,u1,b0`` is the kernel before issue 14's tenth session."""
    out = dict(S16_DEFAULT)
    for item in filter(None, (t.strip() for t in text.split(","))):
        if item in ("lob", "nolob"):
            out["LOB"] = item == "lob"
        elif item in ("u1", "u2"):
            out["U"] = int(item[1])
        elif item in ("b0", "b3", "b4"):
            out["B"] = int(item[1])
        elif item in PROBES:
            out["PROBE"] = ",".join(sorted(set(filter(None, out["PROBE"].split(","))) | {item}))
        else:
            raise ValueError(
                f"SWGPU_KERNEL_VARIANT: cannot read {item!r} (lob, nolob, u1, u2, b0, b3, b4; "
                f"probes, wrong scores: {', '.join(PROBES)})"
            )
    return out


#: The s16 kernels' variant now (template names LOB and U; B: their launch bounds).
VARIANT = _variant(os.environ.get("SWGPU_KERNEL_VARIANT", ""))


def set_variant(text: str) -> None:
    """Switch the s16 variant for the kernels built from now on (benchmarks compare several
    in one process; :func:`.cache.forget_kernels` drops the ones already loaded).  Compile
    children read it from the environment."""
    VARIANT.update(_variant(text))
    os.environ["SWGPU_KERNEL_VARIANT"] = text
    _variant_bounds()


def _variant_bounds() -> None:
    """The s16 kernels' launch bounds from the variant (they override $SWGPU_LAUNCH_BOUNDS)."""
    for multipass in (False, True):
        if VARIANT["B"]:
            LAUNCH_BOUNDS[("s16", multipass)] = (128, VARIANT["B"])
        else:
            LAUNCH_BOUNDS.pop(("s16", multipass), None)


_variant_bounds()

#: Lane count of a warp.
WARP = 32
#: Padding entries on each side of the per-query row-offset array (> max G).
PADQ = 64
#: Bins of the top-k score histogram (scores above are counted in the last).
HIST_BINS = 4096
#: Longest segment of columns whose best hits a batched search chooses on the GPU
#: (``segment_topk_kernel``: its packed keys in 32 KiB of shared memory; a power of two).
TOPK_CAP = 4096

#: Pair kernels: table rows are matrix codes 0..31, then the virtual rows' scores
#: (row 32: zeros, for the rows above row 1; row 33: very negative, global_rev).
PAIR_VROW = 32
PAIR_NROW = 33
PAIR_TBL = 34 * 32
PAIR_NEG = -(1 << 28)
#: Pair kernel kinds: forward local / semi-global, reverse local (bonus 1 on the
#: anchor cell), reverse global (the semi-global start).
PAIR_KINDS = ("local", "semi", "local_rev", "global_rev")

TEMPLATES = Path(__file__).resolve().parent / "templates"

_SCORE_ARGS = (
    "uint8[::1], int64[::1], int32[::1], int32[::1], int64, int32[::1], int64, "
    "int32[::1], int32, int32[::1], int32, int32, int32, int32, int32, int32[::1], "
    "int32[::1]"
)
#: The scoring kernels' signature; the last three arguments are the chain's: mstart
#: (each member's first row), m (members), stride (scores of member j at j * stride).
SCORE_SIG = f"void({_SCORE_ARGS}, int32[::1], int32, int64)"
#: The batched kernels' (several queries per launch) extra arguments: qbase, qlens, n_q, stride.
SCORE_SIG_BATCHED = f"void({_SCORE_ARGS}, int32[::1], int32[::1], int32, int64)"
PAIR_SIG = (
    "void(uint8[::1], int64[::1], int32[::1], uint8[::1], int64[::1], int32[::1], int32, "
    "int32[::1], int32, int32, int32, int32, int32, int32[::1], int32[::1], int32, "
    "int32[::1], int32[::1])"
)

# ---------------------------------------------------------------------------
# the template language
# ---------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{([^{}]+?)(!r)?\}")
_SAFE_BUILTINS = {
    "range": range,
    "len": len,
    "repr": repr,
    "min": min,
    "max": max,
    "str": str,
    "int": int,
    "True": True,
    "False": False,
    "None": None,
}


class TemplateError(ValueError):
    """A template that does not parse (names the file and line)."""


def _parse(lines: list[tuple[str, int, str]], pos: int, stop: tuple[str, ...]):
    """Nodes from ``lines[pos:]`` up to a directive in ``stop``: (nodes, pos, directive)."""
    nodes = []
    while pos < len(lines):
        name, num, text = lines[pos]
        body = text.lstrip()
        if not body.startswith("%"):
            nodes.append(("text", text))
            pos += 1
            continue
        word, _, arg = body[1:].partition(" ")
        arg = arg.strip()
        if word.startswith("#"):
            pos += 1
        elif word in stop:
            return nodes, pos, word
        elif word == "if":
            branches = []
            cond = arg
            pos += 1
            while True:
                sub, pos, end = _parse(lines, pos, ("elif", "else", "end"))
                branches.append((cond, sub))
                if end is None:
                    raise TemplateError(f"{name}:{num}: %if without %end")
                _, _, etext = lines[pos]
                pos += 1
                if end == "end":
                    break
                cond = etext.lstrip()[1:].partition(" ")[2].strip() if end == "elif" else "True"
            nodes.append(("if", branches))
        elif word == "for":
            target, sep, expr = arg.partition(" in ")
            if not sep:
                raise TemplateError(f"{name}:{num}: expected '%for names in expr'")
            sub, pos, end = _parse(lines, pos + 1, ("end",))
            if end is None:
                raise TemplateError(f"{name}:{num}: %for without %end")
            names = tuple(t.strip() for t in target.split(","))
            nodes.append(("for", names, expr.strip(), sub))
            pos += 1
        elif word == "include":
            nodes.append(("include", arg))
            pos += 1
        else:
            raise TemplateError(f"{name}:{num}: unknown directive %{word}")
    return nodes, pos, None


@functools.cache
def _template(name: str):
    """Parsed template ``templates/<name>.py.in`` (cached)."""
    path = TEMPLATES / f"{name}.py.in"
    text = path.read_text()
    if text.endswith("\n"):
        text = text[:-1]
    lines = [(path.name, k + 1, line) for k, line in enumerate(text.split("\n"))]
    nodes, pos, end = _parse(lines, 0, ())
    if end is not None:  # pragma: no cover - _parse stops only at the end here
        raise TemplateError(f"{path.name}:{lines[pos][1]}: unexpected %{end}")
    return nodes


@functools.cache
def _code(expr: str):
    return compile(expr, "<template expression>", "eval")


def _eval(expr: str, names: dict):
    return eval(_code(expr), {"__builtins__": _SAFE_BUILTINS}, names)  # noqa: S307 - own templates


def _emit(nodes, names: dict, out: list[str]) -> None:
    def sub(m):
        value = _eval(m.group(1), names)
        return repr(value) if m.group(2) else str(value)

    for node in nodes:
        kind = node[0]
        if kind == "text":
            out.append(_PLACEHOLDER.sub(sub, node[1]))
        elif kind == "if":
            for cond, body in node[1]:
                if _eval(cond, names):
                    _emit(body, names, out)
                    break
        elif kind == "for":
            _, targets, expr, body = node
            for value in _eval(expr, names):
                values = (value,) if len(targets) == 1 else tuple(value)
                _emit(body, {**names, **dict(zip(targets, values))}, out)
        else:  # include
            _emit(_template(node[1]), names, out)


def render(template: str, /, **names) -> str:
    """Source text of ``templates/<template>.py.in`` with ``names`` filled in.

    Rules: lines starting with ``%`` (after blanks) are directives (``%if``,
    ``%elif``, ``%else``, ``%end``, ``%for x in expr``, ``%include name``,
    ``%#`` comment) and produce no output; every other line is copied with
    each ``{expr}`` replaced by the expression's value (``{expr!r}``: its
    repr).  Output lines end with a newline.
    """
    out: list[str] = []
    _emit(_template(template), names, out)
    return "".join(line + "\n" for line in out)


# ---------------------------------------------------------------------------
# the kernels
# ---------------------------------------------------------------------------

_S16_OPS = dict(
    ADDMAXR="vaddmax2_relu", MAX="vmax2", ADD="vadd2", ADDMAX="vaddmax2", MAX3="vmax3_2"
)
_H16_OPS = dict(
    ADDMAXR="haddmax2_relu", MAX="hmax2", ADD="hadd2", ADDMAX="haddmax2", MAX3="hmax3_2"
)
_S32_OPS = dict(
    ADDMAXR="addmax32_relu", MAX="max32", ADD="add32", ADDMAX="addmax32", MAX3="max3_32"
)


def kernel_source(
    mode: str, G: int, R: int, sim: bool = SIM, multipass: bool = True, batched: bool = False
) -> str:
    """Python source of the scoring kernel for ``mode`` (one of :data:`MODES`) and shape (G, R).

    ``multipass=False`` drops the temp-array code: every subject of the
    launch must then fit in one pass (length <= G*R).  ``batched``: several
    queries per launch (extra arguments qbase, qlens, n_q, stride; the scores
    of query q at ``q * stride``), for small subject sets.  ``sim``: the CUDA
    simulator's variant (shared-memory exchanges instead of warp shuffles, one
    group per block).  Template: ``templates/score_kernel.py.in``.
    """
    assert mode in MODES
    assert G in (1, 2, 4, 8, 16, 32) and R >= 1
    pair = mode in PAIRED_MODES
    wsz = G if sim else WARP
    if sim:
        up = lambda v: f"_xup({v}, xch, lane)"  # noqa: E731
        xor = lambda v, off: f"_xxor({v}, {off}, xch, lane)"  # noqa: E731
    else:
        up = lambda v: f"cuda.shfl_up_sync(0xFFFFFFFF, {v}, 1)"  # noqa: E731
        xor = lambda v, off: f"cuda.shfl_xor_sync(0xFFFFFFFF, {v}, {off})"  # noqa: E731
    ops = {"s16": _S16_OPS, "h16": _H16_OPS, "s32": _S32_OPS}[mode]
    s16 = mode == "s16"  # the bias needs two's-complement halves; u2 was measured on s16 only
    lob = VARIANT["LOB"] and s16
    probes = set(VARIANT["PROBE"].split(",")) if s16 else set()
    fmax = "fmax" in probes and lob
    if fmax:  # H's and the best's max3 as binary16 maxima
        ops = {**ops, "MAX3": "hmax3_2"}
    # unrolled: the multi-pass kernels only (their gain; twice the code to load elsewhere)
    unroll = VARIANT["U"] if s16 and multipass else 1
    offsets = []
    off = G // 2
    while off >= 1:
        offsets.append(off)
        off //= 2
    return render(
        "score_kernel",
        mode=mode,
        pair=pair,
        G=G,
        R=R,
        W=G * R,
        WSZ=wsz,
        PPW=wsz // G,
        IPI=2 if pair else 1,
        PADQ=PADQ,
        sim=sim,
        multipass=multipass,
        batched=batched,
        bounds=None if sim else LAUNCH_BOUNDS.get((mode, multipass)),  # the simulator has none
        SIG=SCORE_SIG_BATCHED if batched else SCORE_SIG,
        up=up,
        xor=xor,
        xor_offsets=offsets,
        LOB=lob,
        HZERO="kb" if lob else "zero",  # H = 0, and E, F = -(open + extend), as held
        NEG="negb" if lob else "neg",
        XOP="vaddmax2" if lob else ops["ADDMAXR"],
        LOWFIX=" - kb" if lob else "",
        U=unroll,
        PROBE_CF="cf" in probes,
        PROBE_NOF="nof" in probes,
        PROBE_FMAX=fmax,
        NSTEPS=f"L + {G - 1}" if unroll == 1 else f"(L + {G}) & -2",
        **ops,
    )


def pair_kind(kind) -> str:
    """Kernel kind name; True/False (older callers) are "local"/"semi"."""
    return ("local" if kind else "semi") if isinstance(kind, bool) else kind


def pair_kernel_source(R: int, kind="local", sim: bool = SIM) -> str:
    """Python source of a pair kernel (R rows per register tile) of ``kind``.

    ``kind`` (True/False are "local"/"semi"): "local" and "semi" are the
    forward passes (best, query end, subject end).  The reverse kinds read
    q[:m] and s[:n] backwards (m, n: the end cell) for the start, as the CPU
    reverse passes: "local_rev" is the local pass of the reversed prefixes
    with a bonus of 1 on the diagonal into the anchor cell (H[0][0] = 1), whose
    first maximum in column-major order (best + 1) gives (query span, subject
    span); "global_rev" is the global DP of the reversed prefixes (the
    semi-global start): the first column (subject span) whose last-row value
    equals the pair's target; its virtual row 0 (above row 1) produces the
    global row 0, -(gap_open + j * gap_extend), from its E chain (the virtual
    rows score very negatively), so there is always one (ntiles = m // R + 1).
    Template: ``templates/pair_kernel.py.in``.
    """
    kind = pair_kind(kind)
    assert R >= 1 and kind in PAIR_KINDS
    glob = kind == "global_rev"
    return render(
        "pair_kernel",
        R=R,
        kind=kind,
        local=kind in ("local", "local_rev"),
        rev=kind.endswith("_rev"),
        glob=glob,
        sim=sim,
        SIG=PAIR_SIG,
        PAIR_TBL=PAIR_TBL,
        PAIR_NEG=PAIR_NEG,
        vrow=PAIR_NROW if glob else PAIR_VROW,
    )


#: The qp2 kernel's arguments (templates/qp2_kernel.py.in): stream codes, range starts,
#: lengths and first subjects, range count, profile and its length, its row stride (bytes),
#: packed -(open + extend) and -extend, score rows, boundary words, tile in/out flags,
#: lane information, subjects per score row.
QP2_SIG = (
    "void(uint8[::1], int64[::1], int32[::1], int64[::1], int64, int32[::1], int32, int32, "
    "int32, int32, int32[::1], int64[::1], int32, int32, int32[::1], int64)"
)
#: qp2's stream: a subject's first column carries this bit (the letter is ``code & 31``).
QP2_FLAG = 0x80
#: qp2's bias: H = 0 is held as this in both halves, so that every value is a positive
#: normal binary16 (>= FBIAS - open - extend >= 1,024 for open + extend <= 16).
QP2_FBIAS = 1040
#: qp2's rows a lane and steps unrolled: R = 32, U = 2 measured best (RESULTS-gpu.md runs
#: 188-193; R = 16 ran ~8 % slower per padded cell, U = 4 ~6 %).
QP2_R, QP2_U = 32, 2
#: Threads a block of the qp2 kernels (the profile, 25 x 1,024 words at R = 32, allows one
#: block an SM; 12 warps).
QP2_BLOCK = 384


#: The block variant's arguments (a tile a block, ``qp2_blocks.py``): stream codes, range
#: starts, lengths and first subjects, range count, the tiles' query rows (letter codes),
#: the matrix's 16-bit words ((K + 1) x (K + 1)) and K + 1, the profile's row stride
#: (bytes), packed -(open + extend) and -extend, score rows, boundary words and the
#: columns a block's take, lane information (96 words a tile), each chain's first tile and
#: tile count, the work items (chains x parts), the parts, the item counter, subjects per
#: score row.
QP2_BLOCKS_SIG = (
    "void(uint8[::1], int64[::1], int32[::1], int64[::1], int64, uint8[::1], int32[::1], "
    "int32, int32, int32, int32, int32[::1], int64[::1], int64, int32[::1], int32[::1], "
    "int32[::1], int32, int32, int32[::1], int64)"
)


def qp2_kernel_source(R: int, U: int = 2, sim: bool = SIM, blocks: bool = False) -> str:
    """Python source of the two-queries-per-register kernel (R rows a lane, a multiple of
    4; U steps unrolled); ``blocks``: the variant of a tile a block (``qp2_blocks.py``);
    template ``templates/qp2_kernel.py.in``."""
    assert R % 4 == 0 and R >= 4 and U >= 1
    return render(
        "qp2_kernel",
        R=R,
        U=U,
        sim=sim,
        blocks=blocks,
        SIG=QP2_BLOCKS_SIG if blocks else QP2_SIG,
        FLAG=QP2_FLAG,
        FBIAS=QP2_FBIAS,
        BOFF=" + boff" if blocks else "",
        BLOCK=QP2_BLOCK,
    )


def aux_kernel_source() -> str:
    """Source of the top-k helper and alphabet kernels (``templates/aux_kernels.py.in``)."""
    return render("aux_kernels", NB=HIST_BINS, TOPK_CAP=TOPK_CAP)
