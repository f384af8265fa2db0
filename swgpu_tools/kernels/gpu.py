"""Smith-Waterman database search on NVIDIA GPUs (Numba CUDA).

Same contract as :mod:`swgpu_tools.kernels` describes (exact int32 scores,
BLAST-convention affine gaps, top-k per query with ties to the lower subject
index), plus :func:`available` and :func:`bind`.

Design (after CUDASW++ 4.0's inter-sequence scheme, written from scratch):

* The database is uploaded once per :class:`GpuSearcher`; its letters are
  re-coded to a compact alphabet whose code 0 is a padding letter.  Subjects
  are sorted by length and cut into **length partitions**; each partition is
  served by a kernel whose thread **group** (G lanes, a power of two up to 32)
  covers G*R subject positions, R per lane, held in registers.  Longer
  subjects take several passes over the query; the group's right-most lane
  writes the last column's H and E for every query row to a temp array, which
  the next pass's lane 0 reads back (one row ahead).
* A planner (:meth:`GpuSearcher.plan`, cached per query-length bucket) gives
  each subject pair the cheapest shape of a menu (:data:`SHAPES`,
  :data:`MULTI_SHAPES`) under a cost model (padding, pipeline fill of G-1
  steps per pass, per-shape speed) with a critical-path limit for the longest
  subjects; partitions run on several streams, longest warp task first.
* The query is streamed: at step s, lane t works on query row s - t; the left
  neighbour's last H and E come through a warp shuffle.
* Fast mode ("s16", Hopper): two subjects per group, packed as the two signed
  16-bit halves of each register; the substitution scores of a query letter
  against a *pair* of subject letters come from one 32-bit shared-memory
  word of a D^3 table (D = compact alphabet size), so each packed cell costs
  one LDS and ~5.5 DPX instructions (VIADDMNMX / VIMNMX / VIADD.16x2 /
  VIMNMX3).  A pair whose best score reaches 32767 - max(matrix) may have
  overflowed: it is re-scored with the 32-bit kernel.
* Exact mode ("s32", any GPU, and the re-scoring path): one subject per
  group, int32 cells, D^2 table.
* Top hits are chosen on the GPU: a score histogram (block-local, 4096 bins),
  a threshold that keeps at least top_k scores, and a compaction of the
  scores at or above it; only those come back to the host, which breaks ties.

* Set-up: the database's letters are uploaded as they are; a GPU kernel finds
  the letters used and another re-codes them in place (no host pass over the
  residues).  The planner works on the distinct item lengths (a few thousand)
  weighted by their counts, not on every item; plans are built per query as
  its length bucket first comes up.
* Databases larger than the device-memory budget (free memory less
  :data:`GPU_RESERVE_BYTES`, or ``$SWGPU_GPU_MEMORY_BYTES`` /
  ``max_resident_bytes``) are **streamed**: the length-sorted subjects are cut
  into batches of at most half the budget; each batch (its subjects in
  database order, so local index order is global order) is gathered and
  re-coded on a helper thread into one of two pinned buffers and uploaded on a
  non-blocking stream into one of two device buffers while the previous batch
  is scanned by all queries; per-query top-k of the batches are merged exactly
  (score descending, then lower subject index).

Kernels are generated as Python source per (mode, G, R) into a cache folder
(``$SWGPU_CACHE_DIR`` or ``~/.cache/swgpu``) and compiled with
``cache=True``, so a new process starts from Numba's on-disk cache.

Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the same generated
kernels run with shared-memory exchanges in place of warp shuffles and one
group per block (tests exercise the logic on tiny inputs).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import sys
import tempfile
import threading
import time

import numpy as np

from . import TopHits
from .gpu_intrinsics import SIM, gather_remap, pack2, used_codes

#: Lane count of a warp.
WARP = 32
#: Padding entries on each side of the per-query row-offset array (> max G).
PADQ = 64
#: Bins of the top-k score histogram (scores above are counted in the last).
HIST_BINS = 4096
#: (G, R) kernel shapes a subject (pair) may be given in one pass, by mode.
SHAPES = {
    "s16": tuple((G, R) for G in (2, 4, 8, 16, 32) for R in (16, 20, 24, 28, 32)),
    "s32": ((4, 16), (8, 16), (16, 16), (32, 16), (32, 32)),
}
#: Shapes that also serve longer subjects in several passes.
MULTI_SHAPES = {"s16": ((8, 32), (16, 32), (32, 32)), "s32": ((8, 32), (32, 32))}
#: Relative speed of a shape by R (fewer shuffles and loop overhead per cell
#: with more registers per lane) and of multi-pass kernels; measured on an
#: H100 (GPU-NOTES.md), used only to choose shapes.
RATE_BY_R = {32: 1.0, 28: 0.99, 24: 0.98, 20: 0.96, 16: 0.94, 12: 0.9, 8: 0.8, 4: 0.6}
RATE_MULTI = 0.85
#: Steps of fixed work per pass (loading subject letters, the final reduction).
PASS_OVERHEAD_STEPS = 6
#: One group's whole task (all passes over one pair) may take at most this
#: share of the query's estimated scan time, so that the longest subjects
#: (one warp each) do not outlast the rest: they get wider groups.
CRITICAL_SHARE = float(os.environ.get("SWGPU_CRITICAL_SHARE", 0.5))
#: Seconds per step of one warp (~9 instructions per packed cell, a few warps
#: per scheduler), per register R: used for the critical-path estimate only.
STEP_SECONDS_PER_R = 0.45e-6 / 32
#: A partition that would save less than this (seconds at ~5 T cells/s) is merged away.
LAUNCH_PENALTY_S = 15e-6
#: Streams the partition kernels of one query are spread over (small partitions
#: then fill the tail of large ones).
N_STREAMS = int(os.environ.get("SWGPU_STREAMS", 16))
# Backwards-compatible name: the s16 single-pass shapes.
CONFIGS = SHAPES["s16"]
#: Threads per block on the GPU.
BLOCK = 128
#: Largest temp array (bytes) a multi-pass launch may use before it is given
#: fewer blocks (each then loops over several warp tasks).
TEMP_LIMIT_BYTES = 1 << 30  # also keeps temp indices below 2^31

# Streams beyond the driver's hardware work queues (8 by default) would share
# queues and serialize; ask for more before the first CUDA context exists.
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

_lock = threading.RLock()
_modules: dict = {}


# ---------------------------------------------------------------------------
# availability and device binding
# ---------------------------------------------------------------------------

def available() -> tuple[bool, str]:
    """(True, description) when a usable CUDA GPU is present, else (False, reason).

    Never raises.  Reasons name the missing piece: the numba-cuda package, the
    driver or a GPU, a GPU too old for Numba, or CUDA's compiler library (NVVM).
    """
    try:
        from numba import cuda
    except Exception as exc:  # pragma: no cover - depends on the installation
        return False, f"numba.cuda cannot be imported: {exc}"
    if SIM:
        return False, "NUMBA_ENABLE_CUDASIM=1: only the CUDA simulator is active, no GPU"
    try:
        if not cuda.is_available():
            reason = "no CUDA driver or no CUDA GPU found"
            try:
                from numba.cuda.cudadrv.driver import driver

                driver.ensure_initialized() if hasattr(driver, "ensure_initialized") else None
            except Exception as exc:
                reason = f"no usable CUDA driver or GPU: {exc}"
            return False, reason
        dev = cuda.get_current_device()
        cc = tuple(dev.compute_capability)
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        if cc < (5, 0):
            return False, f"GPU {name} has compute capability {cc[0]}.{cc[1]}; 5.0 or newer is needed"
        try:
            from numba.cuda.cudadrv import nvvm

            nvvm.NVVM()
        except Exception as exc:
            return False, f"CUDA library missing: NVVM (libnvvm) could not be loaded: {exc}"
        mode = "s16 DPX" if cc >= (9, 0) else "s32"
        return True, f"{name} (compute capability {cc[0]}.{cc[1]}, {mode} kernels)"
    except Exception as exc:
        return False, f"CUDA initialisation failed: {exc}"


def bind(device_id: int) -> None:
    """Make CUDA device ``device_id`` (as numbered in this process) current for this thread."""
    from numba import cuda

    if SIM:
        return
    cuda.select_device(int(device_id))


def warm_up() -> dict:
    """Open the current device's CUDA context and load the top-k helper kernels.

    Returns seconds per step.  :class:`swgpu_tools.pipeline.BackendStart` runs
    this on a thread while the inputs are read, so that the driver's start-up
    (the larger part of a warm start) overlaps the reading.
    """
    from numba import cuda

    times = {}
    t = time.perf_counter()
    if not SIM:
        cuda.current_context()
    times["cuda context"] = time.perf_counter() - t
    t = time.perf_counter()
    aux = _aux()
    if not SIM:
        for disp in (aux.used_kernel, aux.remap_kernel, aux.hist_kernel, aux.select_kernel,
                     aux.fill_kernel):
            for kern in disp.overloads.values():
                kern.bind()  # module loaded into this context now, not at the first launch
    times["helper kernels"] = time.perf_counter() - t
    return times


def _cc() -> tuple[int, int]:
    from numba import cuda

    if SIM:
        return (9, 0)
    return tuple(cuda.get_current_device().compute_capability)


# ---------------------------------------------------------------------------
# kernel source generation
# ---------------------------------------------------------------------------

def _emit_table_copy(w) -> None:
    """Kernel source: the block copies the score table ``tblg[:tbl_n]`` into the shared
    array ``tbl`` (threads striding by the block size), then synchronises; defines
    ``tid`` and ``bdim``."""
    w("    tid = int32(cuda.threadIdx.x)")
    w("    bdim = int32(cuda.blockDim.x)")
    w("    k = tid")
    w("    while k < tbl_n:")
    w("        tbl[k] = tblg[k]")
    w("        k = int32(k + bdim)")
    w("    cuda.syncthreads()")


def kernel_source(mode: str, G: int, R: int, sim: bool = SIM, multipass: bool = True) -> str:
    """Python source of the scoring kernel for ``mode`` ('s16' or 's32') and shape (G, R).

    ``multipass=False`` drops the temp-array code: every subject of the
    launch must then fit in one pass (length <= G*R).
    """
    assert mode in ("s16", "s32")
    assert G in (1, 2, 4, 8, 16, 32) and R >= 1
    pair = mode == "s16"
    wsz = G if sim else WARP
    ppw = wsz // G
    W = G * R
    if pair:
        ADDMAXR, MAX, ADD, ADDMAX, MAX3 = "vaddmax2_relu", "vmax2", "vadd2", "vaddmax2", "vmax3_2"
    else:
        ADDMAXR, MAX, ADD, ADDMAX, MAX3 = "addmax32_relu", "max32", "add32", "addmax32", "max3_32"
    ipi = 2 if pair else 1  # items per group task
    o = []
    w = o.append
    w(f'"""Generated by swgpu_tools.kernels.gpu.kernel_source({mode!r}, {G}, {R}, '
      f'sim={sim}, multipass={multipass})."""')
    w("from numba import cuda, int32, uint32, int64, uint64")
    w("from swgpu_tools.kernels.gpu_intrinsics import (")
    w("    vadd2, vmax2, vmax2_relu, vaddmax2, vaddmax2_relu, vmax3_2,")
    w("    add32, max32, addmax32, addmax32_relu, max3_32, shared_base, lds32)")
    w("")
    w(f"G = {G}")
    w(f"R = {R}")
    w(f"W = {W}")
    w(f"WSZ = {wsz}")
    w(f"PPW = {ppw}")
    w(f"PADQ = {PADQ}")
    w(f"MODE = {mode!r}")
    w(f"MULTIPASS = {multipass}")
    w("")
    if sim:
        w("@cuda.jit(device=True)")
        w("def _xup(v, xch, lane):")
        w("    xch[lane] = v")
        w("    cuda.syncthreads()")
        w("    r = xch[lane - 1] if lane > 0 else v")
        w("    cuda.syncthreads()")
        w("    return r")
        w("")
        w("@cuda.jit(device=True)")
        w("def _xxor(v, off, xch, lane):")
        w("    xch[lane] = v")
        w("    cuda.syncthreads()")
        w("    r = xch[lane ^ off]")
        w("    cuda.syncthreads()")
        w("    return r")
        w("")
        up = lambda v: f"_xup({v}, xch, lane)"  # noqa: E731
        xor = lambda v, off: f"_xxor({v}, {off}, xch, lane)"  # noqa: E731
    else:
        up = lambda v: f"cuda.shfl_up_sync(0xFFFFFFFF, {v}, 1)"  # noqa: E731
        xor = lambda v, off: f"cuda.shfl_xor_sync(0xFFFFFFFF, {v}, {off})"  # noqa: E731
    sig = ("void(uint8[::1], int64[::1], int32[::1], int32[::1], int64, int32[::1], int64, "
           "int32[::1], int32, int32[::1], int32, int32, int32, int32, int32, int32[::1], int32[::1])")
    w(f'SIG = "{sig}"')
    w("")
    w("def kernel_py(codes, starts, lens, items, n_items, wnpass, n_wtasks, qoff, L,")
    w("              tblg, tbl_n, D, noe, nxt, neg, scores, temp):")
    w("    # qoff: byte offset of each query row's table block (PADQ pad rows each side)")
    w("    tbl = cuda.shared.array(0, dtype=int32)")
    if sim:
        w(f"    xch = cuda.shared.array({G}, dtype=int32)")
    _emit_table_copy(w)
    w("    sbase = shared_base(tbl)")
    w("    gtid = int64(cuda.blockIdx.x) * int64(bdim) + int64(tid)")
    w(f"    lane = int32(tid & {G - 1})")
    w(f"    giw = int32((tid & {wsz - 1}) // {G})")
    w(f"    gw = int64(gtid // {wsz})")
    w(f"    nw = int64((int64(cuda.gridDim.x) * int64(bdim)) // {wsz})")
    if multipass:
        # temp layout: row-major over group slots, (H, E) interleaved, so the
        # groups of a warp (all on the same row) touch consecutive words
        w(f"    tslot = int32(gtid // {G})")
        w(f"    tS2 = int32(2 * ((int64(cuda.gridDim.x) * int64(bdim)) // {G}))  # 2 x slots")
        w("    tbase = int32(2 * tslot)  # + row * tS2; < 2^31 (TEMP_LIMIT_BYTES)")
    w("    zero = int32(0)")
    w(f"    nsteps = int32(L + {G - 1})")
    w("    wt = gw")
    w("    while wt < n_wtasks:")
    w(f"        item = int64(wt * {ppw} + giw)")
    w("        sa = int32(-1)")
    w("        sb = int32(-1)")
    w("        if item < n_items:")
    w(f"            sa = items[{ipi} * item]")
    if pair:
        w("            sb = items[2 * item + 1]")
    w("        la = int32(0)")
    w("        lb = int32(0)")
    w("        oa = int64(0)")
    w("        ob = int64(0)")
    w("        if sa >= 0:")
    w("            la = lens[sa]")
    w("            oa = starts[sa]")
    if pair:
        w("        if sb >= 0:")
        w("            lb = lens[sb]")
        w("            ob = starts[sb]")
    w("        npass = wnpass[wt]" if multipass else "        npass = int32(1)")
    w("        best = zero")
    w("        p = int32(0)")
    w("        while p < npass:")
    w(f"            pos0 = int32(p * {W} + lane * {R})")
    for r in range(R):
        w(f"            pos = int32(pos0 + {r})")
        w("            ca = int32(0)")
        w("            if pos < la:")
        w("                ca = int32(codes[oa + pos])")
        if pair:
            w("            cb = int32(0)")
            w("            if pos < lb:")
            w("                cb = int32(codes[ob + pos])")
            w(f"            x{r} = int32((ca * D + cb) * 4 + sbase)")
        else:
            w(f"            x{r} = int32(ca * 4 + sbase)")
        w(f"            h{r} = zero")
        w(f"            f{r} = neg")
    w("            hlast = zero")
    w("            eout = neg")
    w("            diag = zero")
    if multipass:
        # lane 0 reads the previous pass's last column one row ahead (prefetch)
        w("            hpre = zero")
        w("            epre = neg")
        w("            if lane == 0 and p > 0 and L > 0:")
        w("                hpre = temp[uint32(tbase)]")
        w("                epre = temp[uint32(tbase + 1)]")
    w("            qi = int32(PADQ - lane)")
    w("            qrow = qoff[uint32(qi)]")
    w("            s = int32(0)")
    w("            while s < nsteps:")
    w("                qnext = qoff[uint32(qi + s + 1)]")
    w(f"                hin = {up('hlast')}")
    w(f"                ein = {up('eout')}")
    if multipass:
        w("                i = int32(s - lane)")
    w("                if lane == 0:")
    if multipass:
        w("                    hin = hpre")
        w("                    ein = epre")
        w("                    if p > 0 and uint32(s + 1) < uint32(L):")
        w("                        tix = int32(tbase + (s + 1) * tS2)")
        w("                        hpre = temp[uint32(tix)]")
        w("                        epre = temp[uint32(tix + 1)]")
        w("                    else:")
        w("                        hpre = zero")
        w("                        epre = neg")
    else:
        w("                    hin = zero")
        w("                    ein = neg")
    # all X first: X_r = max(Hold[r-1] + s_r, F_r, 0) (independent of the row's E chain)
    for r in range(R):
        w(f"                sc{r} = lds32(tbl, int32(qrow + x{r}))")
    w(f"                xx0 = {ADDMAXR}(diag, sc0, f0)")
    for r in range(1, R):
        w(f"                xx{r} = {ADDMAXR}(h{r - 1}, sc{r}, f{r})")
    w("                diag = hin")
    w("                e = ein")
    for r in range(R):
        w(f"                h{r} = {MAX}(xx{r}, e)")
        w(f"                t = {ADD}(h{r}, noe)")
        w(f"                e = {ADDMAX}(e, nxt, t)")
        w(f"                f{r} = {ADDMAX}(f{r}, nxt, t)")
        if r % 2 == 1:
            w(f"                best = {MAX3}(best, h{r - 1}, h{r})")
    if R % 2 == 1:
        w(f"                best = {MAX}(best, h{R - 1})")
    w(f"                hlast = h{R - 1}")
    w("                eout = e")
    if multipass:
        w(f"                if lane == {G - 1} and p + 1 < npass and uint32(i) < uint32(L):")
        w("                    tix = int32(tbase + i * tS2)")
        w("                    temp[uint32(tix)] = hlast")
        w("                    temp[uint32(tix + 1)] = eout")
    w("                qrow = qnext")
    w("                s = int32(s + 1)")
    w("            p = int32(p + 1)")
    off = G // 2
    while off >= 1:
        w(f"        best = {MAX}(best, {xor('best', off)})")
        off //= 2
    w("        if lane == 0:")
    if pair:
        w("            if sa >= 0:")
        w("                scores[sa] = int32(int32(best << 16) >> 16)")
        w("            if sb >= 0:")
        w("                scores[sb] = int32(best >> 16)")
    else:
        w("            if sa >= 0:")
        w("                scores[sa] = best")
    w("        wt = wt + nw")
    w("")
    return "\n".join(o) + "\n"


def _cache_dir() -> str:
    from ..cache import cache_dir

    path = os.path.join(cache_dir(), "kernels")
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".probe{os.getpid()}")
        with open(probe, "w"):
            pass
        os.unlink(probe)
        return path
    except OSError:
        path = os.path.join(tempfile.gettempdir(), f"swgpu-kernels-{os.getuid()}")
        os.makedirs(path, exist_ok=True)
        return path


def _module_name(name: str, source: str) -> str:
    return f"swgpu_gen_{name}_{hashlib.sha1(source.encode()).hexdigest()[:12]}"


def _load_module(name: str, source: str):
    """Write ``source`` (once) to the cache folder and import it as a module."""
    with _lock:
        key = (name, source)
        mod = _modules.get(key)
        if mod is not None:
            return mod
        modname = _module_name(name, source)
        path = os.path.join(_cache_dir(), modname + ".py")
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                fh.write(source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
        _modules[key] = mod
        return mod


_kernels: dict = {}


def get_kernel(mode: str, G: int, R: int, multipass: bool = True):
    """The compiled scoring kernel (dispatcher) for ``mode`` and shape (G, R)."""
    from numba import cuda

    with _lock:
        key = (mode, G, R, multipass)
        kern = _kernels.get(key)
        if kern is None:
            mod = _load_module(*_kernel_name_source(mode, G, R, multipass))
            kern = cuda.jit(mod.SIG, cache=True)(mod.kernel_py)
            _kernels[key] = kern
            if not SIM:
                marker = _compiled_marker(mode, G, R, multipass)
                if not os.path.exists(marker):
                    open(marker, "w").close()
        return kern


def _kernel_name_source(mode, G, R, multipass):
    return (f"{mode}_{G}x{R}{'m' if multipass else ''}{'_sim' if SIM else ''}",
            kernel_source(mode, G, R, SIM, multipass))


def _compiled_marker(mode, G, R, multipass) -> str:
    """Path of the file saying this kernel is in the disk cache for this GPU kind and
    numba-cuda version (a hint for compiling ahead in parallel; Numba's own cache
    decides what is really reused)."""
    cc = "".join(str(v) for v in _cc())
    return os.path.join(_cache_dir(), f"{_module_name(*_kernel_name_source(mode, G, R, multipass))}"
                                      f".sm{cc}.numba-cuda-{_numba_cuda_version()}.ok")


@functools.lru_cache(maxsize=None)
def _numba_cuda_version() -> str:
    from importlib.metadata import version

    try:
        return version("numba-cuda")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "unknown"


def _compile_in_children(tasks, jobs) -> int:
    """Compile kernels ``tasks`` ((mode, G, R, multipass) each) into the disk cache in
    ``jobs`` child processes on this process's GPU; returns how many children failed."""
    import json
    import subprocess

    from numba import cuda

    chunks = [tasks[k::jobs] for k in range(jobs)]
    code = ("import json, sys; from swgpu_tools.kernels import gpu; "
            "[gpu.get_kernel(*t) for t in json.loads(sys.argv[1])]; gpu._aux()")
    # compile-only children: one hardware queue each (many contexts with 32 queues
    # each ran the GPU out of resources on an H100), on this process's GPU only
    env = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS="1")
    try:
        env["CUDA_VISIBLE_DEVICES"] = str(cuda.get_current_device().uuid)
    except Exception:  # pragma: no cover - older numba-cuda: children use the default GPU
        pass
    procs = [subprocess.Popen([sys.executable, "-c", code, json.dumps(c)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for c in chunks if c]
    return sum(1 for p in procs if p.wait() != 0)


def kernel_ptx(mode: str, G: int, R: int, multipass: bool = True, cc=(9, 0)) -> str:
    """PTX of a scoring kernel for compute capability ``cc`` (needs NVVM, no GPU or driver)."""
    from numba import cuda

    mod = _load_module(f"{mode}_{G}x{R}{'m' if multipass else ''}",
                       kernel_source(mode, G, R, False, multipass))
    ptx, _ = cuda.compile_ptx(mod.kernel_py, mod.SIG, cc=cc)
    return ptx


def precompile(modes=("s16", "s32"), jobs=None, shapes=None) -> dict:
    """Compile (or load from the disk cache) every kernel of the shape menus.

    With ``jobs`` > 1 the compilations run in that many child processes
    (NVVM and ptxas are single-threaded), which fill the on-disk cache that
    this process then loads.  Returns {"kernels": n, "seconds": s, "jobs": j}.
    """
    t0 = time.perf_counter()
    tasks = []
    for mode in modes:
        one = shapes if shapes is not None else SHAPES[mode]
        tasks += [(mode, G, R, False) for G, R in one]
        tasks += [(mode, G, R, True) for G, R in MULTI_SHAPES[mode]]
    if jobs is None:
        jobs = min(len(tasks), os.cpu_count() or 1, 8)
    failed = 0
    if jobs > 1 and not SIM:
        failed = _compile_in_children(tasks, jobs)
    for t in tasks:  # loads what the children cached; compiles whatever they did not
        get_kernel(*t)
    _aux()
    return {"kernels": len(tasks) + 3, "seconds": time.perf_counter() - t0, "jobs": jobs,
            "failed_children": failed}


_AUX_SRC = '''"""Generated by swgpu_tools.kernels.gpu: top-k helper kernels."""
from numba import cuda, int32, int64, uint8

NB = {nb}

@cuda.jit("void(int32[::1], int64, int32[::1], int32, int32[::1])", cache=True)
def hist_kernel(scores, n, aux, limit, ovf):
    # aux[0:NB]: histogram of min(score, NB-1); aux[NB]: count of scores >= limit,
    # whose indices go to ovf
    sh = cuda.shared.array(NB, dtype=int32)
    tid = cuda.threadIdx.x
    k = tid
    while k < NB:
        sh[k] = 0
        k += cuda.blockDim.x
    cuda.syncthreads()
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + tid
    stride = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < n:
        s = scores[i]
        if s >= limit:
            j = cuda.atomic.add(aux, NB, 1)
            if j < ovf.shape[0]:
                ovf[j] = int32(i)
        b = min(s, NB - 1)
        if b < 0:
            b = 0
        cuda.atomic.add(sh, b, 1)
        i += stride
    cuda.syncthreads()
    k = tid
    while k < NB:
        v = sh[k]
        if v != 0:
            cuda.atomic.add(aux, k, v)
        k += cuda.blockDim.x


@cuda.jit("void(int32[::1], int64, int32, int32[::1], int32)", cache=True)
def select_kernel(scores, n, thr, sel, cap):
    # sel[0]: number of scores whose bin >= thr; sel[1 + j] their indices and
    # sel[1 + cap + j] their scores (j < cap)
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    stride = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < n:
        s = scores[i]
        b = min(s, NB - 1)
        if b >= thr:
            j = cuda.atomic.add(sel, 0, 1)
            if j < cap:
                sel[1 + j] = int32(i)
                sel[1 + cap + j] = s
        i += stride


@cuda.jit("void(int32[::1], int32, int32)", cache=True)
def fill_kernel(a, n, v):
    i = cuda.grid(1)
    if i < n:
        a[i] = v


@cuda.jit("void(uint8[::1], int64, int32[::1])", cache=True)
def used_kernel(codes, n, flags):
    # flags[c] = 1 for every letter c in codes (block-local flags first)
    sh = cuda.shared.array(256, dtype=int32)
    tid = cuda.threadIdx.x
    k = tid
    while k < 256:
        sh[k] = 0
        k += cuda.blockDim.x
    cuda.syncthreads()
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + tid
    stride = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < n:
        sh[codes[i]] = 1
        i += stride
    cuda.syncthreads()
    k = tid
    while k < 256:
        if sh[k] != 0:
            flags[k] = 1
        k += cuda.blockDim.x


@cuda.jit("void(uint8[::1], int64, uint8[::1])", cache=True)
def remap_kernel(codes, n, lut):
    # database letters -> compact alphabet, in place on the GPU
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    stride = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < n:
        codes[i] = lut[codes[i]]
        i += stride
'''


def _aux():
    return _load_module("aux" + ("_sim" if SIM else ""), _AUX_SRC.format(nb=HIST_BINS))


# ---------------------------------------------------------------------------
# host side
# ---------------------------------------------------------------------------

#: Device bytes per subject besides its residues: start (8), length (4), score (4),
#: overflow slot (4) and the plan partitions' item lists (4 per cached query-length
#: bucket, ~12 buckets).
BYTES_PER_SUBJECT = 72
#: Device memory kept free for everything else (multi-pass temp arrays, tables,
#: Numba's and the driver's own needs) when the layout budget comes from the free memory.
GPU_RESERVE_BYTES = TEMP_LIMIT_BYTES + (768 << 20)


def _layout_budget(override=None) -> int:
    """Device bytes the database layout may take: ``override``, else
    ``$SWGPU_GPU_MEMORY_BYTES``, else the free memory of the current GPU less
    :data:`GPU_RESERVE_BYTES`.  A database whose layout needs more is streamed
    in batches (two buffers of half the budget each)."""
    if override is None:
        env = os.environ.get("SWGPU_GPU_MEMORY_BYTES", "").strip()
        if env:
            override = int(float(env))
    if override is not None:
        return max(int(override), 1)
    if SIM:
        return 1 << 62
    try:
        from numba import cuda

        ctx = cuda.current_context()
        ctx.deallocations.clear()  # frees of an earlier searcher still pending
        free, _total = ctx.get_memory_info()
    except Exception:  # pragma: no cover - depends on the driver
        return 1 << 62
    return max(int(free) - GPU_RESERVE_BYTES, 64 << 20)


def _nonblocking_stream():
    """A CUDA stream that does not synchronise with the legacy default stream, so
    that uploads on it overlap the (default-stream) top-k kernels and copies."""
    from numba import cuda

    try:
        from numba.cuda.cudadrv.driver import Stream, _stream_finalizer, binding, driver

        ctx = cuda.current_context()
        handle = driver.cuStreamCreate(binding.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
        return Stream(handle, finalizer=_stream_finalizer(ctx.deallocations, handle))
    except Exception:  # pragma: no cover - other numba-cuda versions
        return cuda.stream()


class _Partition:
    """Items (subject indices; pairs in s16 mode) served by one kernel shape."""

    __slots__ = ("G", "R", "n_items", "n_wtasks", "items", "wnpass", "max_passes", "cells",
                 "residues", "critical")

    def __init__(self, G, R, n_items, n_wtasks, items, wnpass, max_passes, cells, residues=0,
                 critical=0.0):
        self.G, self.R = G, R
        self.residues = residues
        self.critical = critical  # estimated seconds of its longest warp task
        self.n_items, self.n_wtasks = n_items, n_wtasks
        self.items, self.wnpass = items, wnpass
        self.max_passes = max_passes
        self.cells = cells


def _fits16(matrix: np.ndarray, oe: int, ext: int) -> bool:
    lim = 8000
    return (oe + ext <= lim and int(matrix.min()) >= -lim and int(matrix.max()) <= lim)


class GpuSearcher:
    """A database uploaded to the current GPU, ready to score any number of queries.

    ``mode``: 's16' (packed 16-bit DPX kernels, sm_90+, with 32-bit re-scoring
    of pairs that may overflow), 's32' (32-bit kernels, any GPU) or 'auto'
    (s16 where the GPU and the scoring parameters allow it).
    """

    def __init__(self, database, matrix, gap_open, gap_extend, device=None, mode="auto",
                 configs=None, block=None, max_resident_bytes=None):
        from numba import cuda

        if device is not None:
            bind(device)
        try:  # small partitions are launched on purpose (several streams fill the GPU)
            from numba.cuda import config as _ccfg

            _ccfg.CUDA_LOW_OCCUPANCY_WARNINGS = 0
        except Exception:  # pragma: no cover - older numba-cuda
            pass
        matrix = np.ascontiguousarray(matrix, dtype=np.int32)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not 0 < matrix.shape[0] <= 32:
            raise ValueError("matrix must be a square array of at most 32 x 32")
        if gap_open < 0 or gap_extend < 0 or gap_open + gap_extend <= 0:
            raise ValueError("gap costs must be >= 0 and not both 0")
        self.matrix = matrix
        self.gap_open, self.gap_extend = int(gap_open), int(gap_extend)
        self.oe = self.gap_open + self.gap_extend
        fits = _fits16(matrix, self.oe, self.gap_extend)
        if mode == "auto":
            mode = os.environ.get("SWGPU_GPU_MODE", "auto")
        if mode == "auto":
            mode = "s16" if (fits and _cc() >= (9, 0)) else "s32"
        if mode == "s16" and not fits:
            mode = "s32"
        if mode == "s16" and _cc() < (9, 0):
            raise ValueError("s16 (DPX) kernels need a GPU of compute capability 9.0 or newer")
        self.mode = mode
        if configs is None:
            configs = os.environ.get("SWGPU_CONFIGS") or None
        one = multi = None
        if isinstance(configs, str):
            # "GxR,GxR,...[;GxR,...]": single-pass shapes, then multi-pass shapes
            t1, _, t2 = configs.partition(";")
            parse = lambda t: [tuple(int(v) for v in c.split("x")) for c in t.split(",") if c]  # noqa: E731
            one, multi = parse(t1) or None, parse(t2) or None
        elif configs is not None:
            one = [tuple(c) for c in configs]
        self._shapes_override = (one, multi)
        self.lbucket_steps = 3  # query-length buckets per octave for cached plans
        self.block = int(block or os.environ.get("SWGPU_BLOCK", BLOCK))
        self.record = None  # list of (G, R, passes, n_items, seconds) when profiling
        self.smax = max(int(matrix.max()), 0)
        self.limit16 = 32767 - self.smax
        self.pad_score = min(int(matrix.min()), 0) - 1

        t_setup = time.perf_counter()
        codes = np.ascontiguousarray(database.codes, dtype=np.uint8)
        offsets = np.ascontiguousarray(database.offsets, dtype=np.int64)
        self.n = len(offsets) - 1
        self.lengths = np.diff(offsets).astype(np.int64)
        if self.n and self.lengths.max() >= 2**31 - 2 * PADQ:
            raise ValueError("subjects must be shorter than 2^31 residues")
        self.total_residues = int(offsets[-1])
        self.order = np.argsort(self.lengths, kind="stable").astype(np.int64)
        self.aux = _aux()
        self.setup_times = {}
        t = time.perf_counter()

        # resident (whole database on the GPU) or streamed in batches
        self.n_all = self.n
        self.budget_bytes = _layout_budget(max_resident_bytes)
        need = self.total_residues + BYTES_PER_SUBJECT * self.n
        resident = not (self.n and need > self.budget_bytes)
        block = 256 if not SIM else 32
        grid = min(4096, -(-len(codes) // block)) if not SIM else 1
        # compact alphabet: code 0 = padding, then the letters the database uses;
        # found and re-coded on the GPU for a resident database (one compiled host
        # pass when streaming)
        if not len(codes):
            used = np.zeros(256, bool)
        elif resident:
            self.d_codes = cuda.to_device(codes)  # original codes, re-coded below
            self.setup_times["upload_codes"] = time.perf_counter() - t
            d_flags = cuda.to_device(np.zeros(256, np.int32))
            self.aux.used_kernel[grid, block](self.d_codes, len(codes), d_flags)
            used = d_flags.copy_to_host() > 0
        else:
            used = used_codes(codes).astype(bool)
        self.setup_times["alphabet"] = time.perf_counter() - t
        if used[matrix.shape[0]:].any():
            raise ValueError("database codes exceed the matrix size")
        self.cmap = np.full(256, -1, dtype=np.int64)
        self.letters = list(np.flatnonzero(used))  # original codes, compact code = index + 1
        for k, c in enumerate(self.letters):
            self.cmap[c] = k + 1
        lut = np.zeros(256, dtype=np.uint8)
        lut[self.letters] = np.arange(1, len(self.letters) + 1)
        self.lut = lut
        self.batches = None
        if not resident:
            self._init_batches(codes, offsets)
        else:
            if len(codes):
                self.aux.remap_kernel[grid, block](self.d_codes, len(codes), cuda.to_device(lut))
            else:
                self.d_codes = cuda.to_device(np.zeros(1, np.uint8))
            self.d_starts = cuda.to_device(offsets[:-1].copy() if self.n else np.zeros(1, np.int64))
            lens32 = self.lengths.astype(np.int32) if self.n else np.zeros(1, np.int32)
            self.d_lens = cuda.to_device(lens32)
        self.setup_times["layout"] = time.perf_counter() - t
        nmax = self.n if self.batches is None else max(b[2] for b in self.batches)
        self.d_scores_all = self.d_scores = cuda.device_array(max(nmax, 1), dtype=np.int32)
        self._parts = {}
        self.streams = None
        self._temp = None
        self._tables = {}
        self.d_aux = cuda.device_array(HIST_BINS + 1, dtype=np.int32)
        self.h_aux = cuda.pinned_array(HIST_BINS + 1, dtype=np.int32) if not SIM else \
            np.zeros(HIST_BINS + 1, np.int32)
        self.d_ovf_all = self.d_ovf = cuda.device_array(max(nmax, 1), dtype=np.int32)
        self._sel_cap = 0
        self._hist = None
        self.timings = []  # (query index, query length, scan seconds)
        if not SIM and self.batches is None:
            cuda.synchronize()
        self.setup_times["total"] = self.setup_seconds = time.perf_counter() - t_setup

    # -- batches (database larger than the budget) -------------------------
    def _init_batches(self, codes, offsets):
        """Cut the length-sorted subjects into batches of at most half the budget
        each and allocate two device buffers and two pinned staging buffers."""
        from numba import cuda

        cap = max(self.budget_bytes // 2, 1)
        w = self.lengths[self.order] + BYTES_PER_SUBJECT
        cum = np.cumsum(w)
        bounds = [0]
        while bounds[-1] < self.n:
            a = bounds[-1]
            base = int(cum[a - 1]) if a else 0
            b = int(np.searchsorted(cum, base + cap, side="right"))
            bounds.append(max(b, a + 1))
        # each batch: its subjects in ascending database order (so that the
        # local index order is the global one: ties break the same way)
        self.batches = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            sel = np.sort(self.order[a:b])
            self.batches.append((sel, int(self.lengths[sel].sum()), len(sel)))
        self._src = (codes, offsets)
        self.lengths_all = self.lengths
        maxres = max(max(b[1] for b in self.batches), 1)
        maxn = max(b[2] for b in self.batches)
        nbuf = min(2, len(self.batches))
        self._dbuf = [(cuda.device_array(maxres, np.uint8), cuda.device_array(maxn, np.int64),
                       cuda.device_array(maxn, np.int32)) for _ in range(nbuf)]
        alloc = np.zeros if SIM else cuda.pinned_array
        self._hbuf = [(alloc(maxres, dtype=np.uint8), alloc(maxn, dtype=np.int64),
                       alloc(maxn, dtype=np.int32)) for _ in range(nbuf)]
        self._copy_stream = cuda.stream() if SIM else _nonblocking_stream()
        self.sel = None
        self.upload_wait_seconds = 0.0

    def _stage(self, j):
        codes, offsets = self._src
        sel, _res, _nj = self.batches[j]
        h = self._hbuf[j % len(self._hbuf)]
        gather_remap(codes, offsets, sel, self.lut, h[0], h[1], h[2])

    def _upload(self, j):
        _sel, res, nj = self.batches[j]
        h = self._hbuf[j % len(self._hbuf)]
        d = self._dbuf[j % len(self._dbuf)]
        st = self._copy_stream
        if res:
            d[0][:res].copy_to_device(h[0][:res], stream=st)
        d[1][:nj].copy_to_device(h[1][:nj], stream=st)
        d[2][:nj].copy_to_device(h[2][:nj], stream=st)

    def _activate(self, j):
        sel, res, nj = self.batches[j]
        d = self._dbuf[j % len(self._dbuf)]
        self.sel = sel
        self.n = nj
        self.lengths = self.lengths_all[sel]
        self.order = np.argsort(self.lengths, kind="stable").astype(np.int64)
        self.d_codes = d[0][:max(res, 1)]
        self.d_starts = d[1][:nj]
        self.d_lens = d[2][:nj]
        self.d_scores = self.d_scores_all[:nj]
        self.d_ovf = self.d_ovf_all[:nj]
        self._parts = {}  # plans are per batch

    def _iter_batches(self):
        """Yield None once (resident database) or the index of each batch after
        making it current; batch j+1 is re-coded on a helper thread and uploaded
        on a non-blocking stream while batch j is scanned (double buffering).
        The caller must finish all GPU work of one batch before taking the next."""
        if self.batches is None:
            yield None
            return
        nb = len(self.batches)
        err = []

        def run(j):
            try:
                self._stage(j)
            except BaseException as exc:  # pragma: no cover - re-raised below
                err.append(exc)

        def start(j):
            th = threading.Thread(target=run, args=(j,), daemon=True)
            th.start()
            return th

        def join(th):
            th.join()
            if err:
                raise err[0]

        th = None
        try:
            self._stage(0)
            self._upload(0)
            th = start(1) if nb > 1 else None
            for j in range(nb):
                t0 = time.perf_counter()
                self._copy_stream.synchronize()  # batch j is on the GPU
                self.upload_wait_seconds += time.perf_counter() - t0
                if j + 1 < nb:
                    join(th)
                    th = None
                    self._upload(j + 1)  # into the buffer of batch j-1 (finished)
                    if j + 2 < nb:
                        th = start(j + 2)  # into the staging buffer of batch j (uploaded)
                self._activate(j)
                yield j
        finally:
            if th is not None:
                th.join()

    def _sync(self):
        """Wait for the scoring streams (not for an upload in flight)."""
        if SIM or self.streams is None:
            return  # the simulator is synchronous; default-stream copies already waited
        for st in self.streams:
            st.synchronize()

    # -- partitions --------------------------------------------------------
    def shapes(self, mode):
        """(single-pass shapes, multi-pass shapes) used for ``mode``."""
        if SIM:  # the simulator runs the (tiny) shapes the tests put in CONFIGS
            return tuple(CONFIGS), (max(CONFIGS, key=lambda c: c[0] * c[1]),)
        one, multi = self._shapes_override
        if mode == "s32" and self.mode == "s16":
            one = multi = None  # the re-scoring path keeps its own menu
        if one is None:
            one = SHAPES[mode]
            multi = multi or MULTI_SHAPES[mode]
        elif multi is None:
            multi = [max(one, key=lambda c: c[0] * c[1])]
        return tuple(one), tuple(multi)

    def _lrep(self, L):
        """Representative query length of L's plan bucket."""
        if L >= 4096:
            return 4096
        k = self.lbucket_steps
        return int(round(2 ** (round(math.log2(max(L, 1)) * k) / k)))

    def plan(self, mode, L, subset=None):
        """Assign each item (pair in s16 mode) to its cheapest shape for query length ~L."""
        from numba import cuda

        Lr = self._lrep(L) if subset is None else max(int(L), 1)
        key = (mode, Lr)
        if subset is None and key in self._parts:
            return self._parts[key]
        if subset is None:
            order = self.order
        else:
            subset = np.asarray(subset, dtype=np.int64)
            order = subset[np.argsort(self.lengths[subset], kind="stable")]
        lens = self.lengths[order]
        if mode == "s16":
            if len(order) % 2:
                order = np.append(order, -1)
                lens = np.append(lens, 0)
            items = order.reshape(-1, 2)
            ilen = np.maximum(lens[0::2], lens[1::2])
        else:
            items = order.reshape(-1, 1)
            ilen = lens
        ilen = np.maximum(ilen, 1)
        # costs depend on the item length only: work on the distinct lengths,
        # weighted by how many items have each (items are few thousand lengths,
        # hundreds of thousands of items)
        ulen, inv, ucount = np.unique(ilen, return_inverse=True, return_counts=True)
        wcount = ucount.astype(np.float64)
        one, multi = self.shapes(mode)
        cand = [(G, R, False) for G, R in one] + [(G, R, True) for G, R in multi]
        cost = np.empty((len(cand), len(ulen)))
        for k, (G, R, m) in enumerate(cand):
            W = G * R
            passes = -(-ulen // W)
            c = passes * (Lr + G - 1 + PASS_OVERHEAD_STEPS) * float(W) / (
                RATE_BY_R.get(R, 0.9) * (RATE_MULTI if m else 1.0))
            cost[k] = c if m else np.where(ulen <= W, c, np.inf)
        # critical path: the longest task of a shape must stay well under the
        # estimated scan time of the whole query
        cells_per_s = 5e12 / (2 if mode == "s16" else 1)
        cmin = cost.min(axis=0)
        fin = np.isfinite(cmin)
        t_query = float((cmin[fin] * wcount[fin]).sum()) / cells_per_s
        for k, (G, R, m) in enumerate(cand):
            W = G * R
            t_task = -(-ulen // W) * (Lr + G - 1 + PASS_OVERHEAD_STEPS) * R * STEP_SECONDS_PER_R
            too_long = t_task > CRITICAL_SHARE * t_query
            if too_long.any():
                c = cost[k].copy()
                c[too_long] *= 1e6  # finite: still usable when nothing else is allowed
                cost[k] = c
        uchoice = np.argmin(cost, axis=0)
        wcost = cost * wcount  # total cost of all items of a length
        # merge partitions that save less than a launch is worth
        penalty = LAUNCH_PENALTY_S * cells_per_s
        active = sorted(set(uchoice.tolist()))
        while len(active) > 1:
            totals = {k: wcost[k, uchoice == k].sum() for k in active}
            k = min(active, key=lambda x: totals[x])
            others = [x for x in active if x != k]
            sel = np.flatnonzero(uchoice == k)
            sub = cost[others][:, sel]
            alt = np.argmin(sub, axis=0)
            with np.errstate(invalid="ignore"):
                delta = (sub[alt, np.arange(len(sel))] * wcount[sel]).sum() - totals[k]
            if not np.isfinite(delta) or delta > penalty:
                break
            uchoice[sel] = np.array(others)[alt]
            active = others
        choice = uchoice[inv]
        by_choice = np.argsort(choice, kind="stable")  # item positions grouped by shape
        bounds = np.concatenate(([0], np.cumsum(np.bincount(choice, minlength=len(cand)))))
        parts = []
        for k in np.unique(uchoice).tolist():
            G, R, m = cand[k]
            sel = by_choice[bounds[k]: bounds[k + 1]][::-1]  # longest first: long tasks start early
            it = items[sel]
            il = ilen[sel]
            ppw = (G if SIM else WARP) // G
            nwt = -(-len(sel) // ppw)
            padded = np.zeros(nwt * ppw, dtype=np.int64)
            padded[: len(il)] = il
            wmax = padded.reshape(nwt, ppw).max(axis=1)
            wnp = np.maximum(1, -(-wmax // (G * R))).astype(np.int32)
            cells = int(wnp.sum()) * ppw * G * R * (2 if mode == "s16" else 1)
            parts.append(_Partition(
                G, R, len(sel), nwt,
                cuda.to_device(np.ascontiguousarray(it.reshape(-1), dtype=np.int32)),
                cuda.to_device(wnp), int(wnp.max()), cells,
                int(self.lengths[it[it >= 0]].sum()),
                int(wnp.max()) * (Lr + G - 1 + PASS_OVERHEAD_STEPS) * R * STEP_SECONDS_PER_R))
        # launch order: longest critical path first (they start while the GPU
        # fills up around them), then by total work
        parts.sort(key=lambda p: (-p.critical, -p.cells))
        if subset is None:
            self._parts[key] = parts
        return parts

    # -- per-search tables ------------------------------------------------
    def _table(self, mode, qletters):
        """Score table on the GPU for the compact alphabet extended by ``qletters``."""
        from numba import cuda

        extra = [c for c in qletters if self.cmap[c] < 0]
        letters = self.letters + sorted(set(extra))
        key = (mode, tuple(letters))
        if key in self._tables:
            return self._tables[key]
        cmap = np.full(256, 0, dtype=np.int64)
        for k, c in enumerate(letters):
            cmap[c] = k + 1
        D = len(letters) + 1
        S = np.full((D, D), self.pad_score, dtype=np.int64)
        idx = np.array(letters, dtype=np.int64)
        if len(idx):
            S[1:, 1:] = self.matrix[np.ix_(idx, idx)]
        if mode == "s16":
            lo = S[:, :, None] & 0xFFFF           # T[q][a][b]: low half = s(q, a)
            hi = (S[:, None, :] & 0xFFFF) << 16   # high half = s(q, b)
            T = (lo | hi).astype(np.uint32).view(np.int32).reshape(-1)
            rowstride = D * D
        else:
            T = S.astype(np.int32).reshape(-1)
            rowstride = D
        entry = (cuda.to_device(np.ascontiguousarray(T)), D, rowstride, cmap)
        self._tables[key] = entry
        return entry

    def _temp_for(self, nwords):
        from numba import cuda

        if self._temp is None or self._temp.shape[0] < nwords:
            self._temp = cuda.device_array(max(nwords, 1), dtype=np.int32)
        return self._temp

    # -- launching ---------------------------------------------------------
    def _launch(self, mode, parts, d_qoff, L, table):
        from numba import cuda

        d_tbl, D, _, _ = table
        if mode == "s16":
            noe, nxt, neg = pack2(-self.oe, -self.oe), pack2(-self.gap_extend, -self.gap_extend), \
                pack2(-self.oe, -self.oe)
        else:
            noe, nxt, neg = -self.oe, -self.gap_extend, -self.oe
        tbl_n = int(d_tbl.shape[0])
        shmem = tbl_n * 4
        if not SIM and self.streams is None:
            self.streams = [cuda.stream() for _ in range(N_STREAMS)]
        # launch geometry and temp slices (multi-pass partitions may run concurrently)
        geo = []
        n_multi = sum(1 for p in parts if p.max_passes > 1)
        temp_words = 0
        for part in parts:
            wsz = part.G if SIM else WARP
            block = part.G if SIM else max(self.block, WARP)
            grid = -(-(part.n_wtasks * wsz) // block)
            words = 0
            if part.max_passes > 1:
                groups_limit = max(1, TEMP_LIMIT_BYTES // (8 * max(L, 1) * n_multi))
                grid = max(1, min(grid, groups_limit * part.G // block))
                words = grid * (block // part.G) * 2 * L
            geo.append((block, grid, temp_words, words))
            temp_words += words
        temp_all = self._temp_for(max(temp_words, 1))
        for k, (part, (block, grid, off, words)) in enumerate(zip(parts, geo)):
            kern = get_kernel(mode, part.G, part.R, part.max_passes > 1)
            temp = temp_all[off: off + words] if words else temp_all
            stream = 0 if SIM or self.record is not None else self.streams[k % len(self.streams)]
            if not SIM:
                _ensure_shared(kern, shmem)
            if self.record is not None:
                ev0, ev1 = cuda.event(), cuda.event()
                ev0.record()
            kern[grid, block, stream, shmem](
                self.d_codes, self.d_starts, self.d_lens, part.items, part.n_items,
                part.wnpass, part.n_wtasks, d_qoff, L, d_tbl, tbl_n, D,
                noe, nxt, neg, self.d_scores, temp)
            if self.record is not None:
                ev1.record()
                ev1.synchronize()
                self.record.append((mode, part.G, part.R, part.max_passes, part.n_items,
                                    part.cells, part.residues,
                                    cuda.event_elapsed_time(ev0, ev1) / 1e3))
        if not SIM and self.record is None and len(parts) > 1:
            self._sync()

    def _qoffs_all(self, qcodes, qoffs, table):
        """Row-offset arrays of all queries, concatenated on the GPU (one upload)."""
        from numba import cuda

        _, _, rowstride, cmap = table
        lens = np.diff(qoffs)
        sizes = np.where(lens > 0, lens + 2 * PADQ, 0)
        starts = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        allq = np.zeros(max(int(starts[-1]), 1), dtype=np.int32)
        for qi in range(len(lens)):
            if lens[qi]:
                o = starts[qi] + PADQ
                allq[o: o + lens[qi]] = cmap[qcodes[qoffs[qi]: qoffs[qi + 1]]] * rowstride * 4
        return cuda.to_device(allq), starts

    def _qoff(self, q, table):
        from numba import cuda

        _, _, rowstride, cmap = table
        L = len(q)
        qo = np.zeros(L + 2 * PADQ, dtype=np.int32)
        qo[PADQ: PADQ + L] = cmap[q] * rowstride * 4  # byte offsets into the table
        return cuda.to_device(qo)

    def _fill(self, arr, n, value):
        block = 256 if not SIM else 32
        self.aux.fill_kernel[max(1, -(-n // block)), block](arr, n, value)

    def score_query(self, q, tables, d_qoff=None):
        """Score one query (original codes) against every subject into ``self.d_scores``.

        Also leaves the score histogram in ``self._hist`` for :meth:`top_k`.
        Returns the number of subjects re-scored with 32-bit kernels.
        """
        L = len(q)
        self._hist = None
        if self.n == 0:
            return 0
        if L == 0:
            self._fill(self.d_scores, self.n, 0)
        else:
            mode = self.mode
            table = tables[mode]
            if d_qoff is None:
                d_qoff = self._qoff(q, table)
            self._launch(mode, self.plan(mode, L), d_qoff, L, table)
        # histogram (and, in s16 mode, the pairs that may have overflowed 16 bits)
        limit = self.limit16 if self.mode == "s16" else 2**31 - 1
        self._fill(self.d_aux, HIST_BINS + 1, 0)
        grid = min(1024, -(-self.n // 256)) if not SIM else 1
        self.aux.hist_kernel[grid, 256 if not SIM else 32](
            self.d_scores, self.n, self.d_aux, limit, self.d_ovf)
        self.d_aux.copy_to_host(self.h_aux)
        novf = int(self.h_aux[HIST_BINS])
        self._hist = self.h_aux[:HIST_BINS].astype(np.int64)
        if novf == 0 or L == 0:
            return 0
        # re-score those exactly with 32-bit kernels (their scores stay in the last bin)
        flagged = self.d_ovf[:novf].copy_to_host()
        t32 = tables.get("s32")
        if t32 is None:
            t32 = tables["s32"] = self._table("s32", tables["letters"])
        parts = self.plan("s32", L, subset=flagged)
        self._launch("s32", parts, self._qoff(q, t32), L, t32)
        return novf

    def top_k(self, top_k):
        """(subject indices, scores) of the best ``top_k`` of the last scored query, tie-broken."""
        from numba import cuda

        n = self.n
        k = min(int(top_k), n)
        if k <= 0 or self._hist is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        ge = np.cumsum(self._hist[::-1])[::-1]  # ge[b] = count of scores with bin >= b
        thr = int(np.flatnonzero(ge >= k).max()) if (ge >= k).any() else 0
        need = int(ge[thr])
        cap = max(1024, 4 * k, need)
        if cap > self._sel_cap:
            self._sel_cap = max(cap, 2 * self._sel_cap)
            self.d_sel = cuda.device_array(1 + 2 * self._sel_cap, dtype=np.int32)
            self.h_sel = cuda.pinned_array(1 + 2 * self._sel_cap, dtype=np.int32) if not SIM \
                else np.zeros(1 + 2 * self._sel_cap, np.int32)
        cap = self._sel_cap
        self._fill(self.d_sel, 1, 0)
        grid = min(1024, -(-n // 256)) if not SIM else 1
        self.aux.select_kernel[grid, 256 if not SIM else 32](self.d_scores, n, thr, self.d_sel, cap)
        self.d_sel.copy_to_host(self.h_sel)
        cnt = int(self.h_sel[0])
        assert cnt == need, (cnt, need)
        idx = self.h_sel[1: 1 + cnt].astype(np.int64)
        sc = self.h_sel[1 + cap: 1 + cap + cnt].copy()
        order = np.lexsort((idx, -sc.astype(np.int64)))[:k]
        return idx[order], sc[order]

    def search(self, queries, top_k, progress=None) -> TopHits:
        nq = len(queries)
        qcodes = np.ascontiguousarray(queries.codes, dtype=np.uint8)
        qoffs = np.ascontiguousarray(queries.offsets, dtype=np.int64)
        qletters = sorted(set(np.flatnonzero(np.bincount(qcodes, minlength=256) > 0).tolist()))
        if qletters and max(qletters) >= self.matrix.shape[0]:
            raise ValueError("query codes exceed the matrix size")
        tables = {"letters": qletters, self.mode: self._table(self.mode, qletters)}
        qlens = np.diff(qoffs)
        self._compile_ahead(qlens)
        self.plan_seconds = 0.0
        tq = [0.0] * nq
        hits_i = [[] for _ in range(nq)]
        hits_s = [[] for _ in range(nq)]
        d_qoffs, qstarts = self._qoffs_all(qcodes, qoffs, tables[self.mode])
        nb = 1 if self.batches is None else len(self.batches)
        for j in self._iter_batches():
            for qi in range(nq):
                q = qcodes[qoffs[qi]: qoffs[qi + 1]]
                t0 = time.perf_counter()
                if len(q):
                    self.plan(self.mode, len(q))  # cached per length bucket (per batch)
                self.plan_seconds += time.perf_counter() - t0
                t0 = time.perf_counter()
                d_q = d_qoffs[qstarts[qi]: qstarts[qi + 1]] if len(q) else None
                self.score_query(q, tables, d_q)
                idx, sc = self.top_k(top_k)
                self._sync()
                tq[qi] += time.perf_counter() - t0
                if j is not None:
                    idx = self.sel[idx]
                hits_i[qi].append(idx)
                hits_s[qi].append(sc)
                if progress is not None and (j is None or j == nb - 1):
                    progress(qi + 1, nq)
        self.timings = [(qi, int(qlens[qi]), tq[qi]) for qi in range(nq)]
        qi_parts, si_parts, sc_parts = [], [], []
        for qi in range(nq):
            idx = np.concatenate(hits_i[qi]).astype(np.int64)
            sc = np.concatenate(hits_s[qi]).astype(np.int32)
            if len(hits_i[qi]) > 1:  # exact merge of the batches' top-k
                order = np.lexsort((idx, -sc.astype(np.int64)))[: min(int(top_k), self.n_all)]
                idx, sc = idx[order], sc[order]
            qi_parts.append(np.full(len(idx), qi, dtype=np.int32))
            si_parts.append(idx.astype(np.int32))
            sc_parts.append(sc.astype(np.int32))
        if not qi_parts:
            e = np.zeros(0, np.int32)
            return TopHits(e, e.copy(), e.copy())
        return TopHits(np.concatenate(qi_parts), np.concatenate(si_parts), np.concatenate(sc_parts))

    def _compile_ahead(self, qlens):
        """First use on this machine (kernels missing from the disk cache): compile the
        kernels these queries' plans need in parallel child processes, before the
        first query (which would otherwise compile them one by one)."""
        if SIM or os.environ.get("SWGPU_COMPILE_AHEAD", "1") == "0":
            return
        one, multi = self.shapes(self.mode)
        menu = [(self.mode, G, R, False) for G, R in one] + [(self.mode, G, R, True) for G, R in multi]
        if all(os.path.exists(_compiled_marker(*t)) for t in menu):
            return  # warm: nothing to do (the usual case)
        if self.batches is None:
            needed = set()
            for L in sorted({self._lrep(int(v)) for v in qlens if v}):
                needed.update((self.mode, p.G, p.R, p.max_passes > 1)
                              for p in self.plan(self.mode, L))
        else:
            needed = set(menu)
        todo = sorted(t for t in needed if (t[0], t[1], t[2], t[3]) not in _kernels
                      and not os.path.exists(_compiled_marker(*t)))
        jobs = min(len(todo), os.cpu_count() or 1, 8)
        if jobs < 2:
            return
        t0 = time.perf_counter()
        print(f"[swgpu gpu] first use of {len(todo)} kernels on this machine: compiling them "
              f"in {jobs} processes into {_cache_dir()}", file=sys.stderr, flush=True)
        failed = _compile_in_children(todo, jobs)
        print(f"[swgpu gpu] compiled in {time.perf_counter() - t0:.1f} s"
              + (f" ({failed} processes failed; compiling the rest here)" if failed else ""),
              file=sys.stderr, flush=True)

    def all_scores(self, queries) -> np.ndarray:
        """Full (n_queries x n_subjects) int32 score array (for tests and checks)."""
        qcodes = np.ascontiguousarray(queries.codes, dtype=np.uint8)
        qoffs = np.ascontiguousarray(queries.offsets, dtype=np.int64)
        qletters = sorted(set(np.flatnonzero(np.bincount(qcodes, minlength=256) > 0).tolist()))
        tables = {"letters": qletters, self.mode: self._table(self.mode, qletters)}
        out = np.zeros((len(queries), self.n_all), dtype=np.int32)
        for j in self._iter_batches():
            for qi in range(len(queries)):
                self.score_query(qcodes[qoffs[qi]: qoffs[qi + 1]], tables)
                if self.n:
                    sc = self.d_scores.copy_to_host()[: self.n]
                    if j is None:
                        out[qi] = sc
                    else:
                        out[qi, self.sel] = sc
        return out


def _ensure_shared(kern, nbytes):
    """Allow ``nbytes`` of dynamic shared memory for every compiled overload of ``kern``."""
    if nbytes <= 48 * 1024:
        return
    done = getattr(kern, "_swgpu_shared", 0)
    if done >= nbytes:
        return
    from numba.cuda.cudadrv.driver import binding, driver

    for k in kern.overloads.values():
        cufunc = k._codelibrary.get_cufunc()
        attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle, cufunc.device.id)
    kern._swgpu_shared = nbytes


_searchers: dict = {}


def search(queries, database, matrix, gap_open, gap_extend, top_k, progress=None,
           device=None, mode="auto", max_resident_bytes=None) -> TopHits:
    """Top ``top_k`` exact SW hits of each query in ``database`` (see :mod:`swgpu_tools.kernels`).

    The database is uploaded once per call (or reused when the same database
    object and scoring scheme are searched again in this process).
    """
    key = (id(database), id(database.codes), int(gap_open), int(gap_extend),
           hashlib.sha1(np.ascontiguousarray(matrix, dtype=np.int32).tobytes()).hexdigest(),
           device, mode, max_resident_bytes, os.environ.get("SWGPU_GPU_MEMORY_BYTES"))
    s = _searchers.get(key)
    if s is None:
        _searchers.clear()  # keep one database on the GPU at a time
        s = GpuSearcher(database, matrix, gap_open, gap_extend, device=device, mode=mode,
                        max_resident_bytes=max_resident_bytes)
        s._database_ref = database  # keeps id(database) unique while cached
        _searchers[key] = s
    t0 = time.perf_counter()
    hits = s.search(queries, top_k, progress=progress)
    if os.environ.get("SWGPU_GPU_TIMINGS"):
        st = " ".join(f"{k} {v:.3f}" for k, v in s.setup_times.items())
        print(f"[swgpu gpu] set-up {s.setup_seconds:.3f} s ({st}; "
              f"{1 if s.batches is None else len(s.batches)} batch(es)), plans {s.plan_seconds:.3f} s, "
              f"search {time.perf_counter() - t0:.3f} s, scans {sum(t[2] for t in s.timings):.3f} s",
              file=sys.stderr, flush=True)
    return hits


# ---------------------------------------------------------------------------
# ---- pair batches (swgpu align) ----
# ---------------------------------------------------------------------------
# The forward score-only pass of swgpu_tools.alignment for batches of
# independent (query, subject) pairs: each pair's best score and end cell,
# exactly as the CPU forward pass finds them (tie rules of the alignment
# module doc), so that align_many/align_pairs(..., ends=...) can run the
# reverse pass and the traceback on the CPU.
#
# Design (inter-sequence parallelism): one thread per pair.  The query is
# processed in tiles of R rows held in registers (H and E of each row); the
# thread sweeps the subject columns left to right, one column of R cells per
# step, and hands the tile's bottom row (H, and F of the next row) to the next
# tile through a boundary row in global memory laid out column-major over the
# pairs of the launch (bH[j * S + slot]), so that the threads of a warp, which
# are at the same column, read and write consecutive words.  Tiles are aligned
# to the END of the query: the first tile holds up to R - 1 "virtual" rows
# above row 1 (substitution score 0, column-0 value 0, which reproduces row 0
# exactly: H = 0, and F entering row 1 = -(gap_open + gap_extend)), so row m
# is always the last register of the last tile (semi-global mode reads it
# with no select).  Substitution scores come from a 33 x 32 int32 table in
# shared memory (row 32: the virtual rows' zeros).  Scores are int32 through
# the add32/max32/addmax32 helpers (exact at any length the CPU accepts).
# Pairs are sorted by tile count, then subject length (descending), so the
# threads of a warp do nearly the same work; launches are cut so the boundary
# rows stay under PAIR_BOUNDARY_ENTRIES entries each.
#
# Tie rules (as alignment._forward_end / _forward_end_semi):
# * local: the first maximum in column-major order (smallest subject end,
#   then smallest query end).  Per column, cm = max of the tile's R cells; a
#   column replaces the best if cm > best, or cm == best at a smaller column
#   (an earlier column of a later tile); then the first row holding cm.
# * semi-global: the best H of row m, smallest subject end, starting from
#   H[m][0] = -(gap_open + m * gap_extend) at column 0.

#: Rows per register tile of the pair kernel (default; SWGPU_PAIR_R overrides).
#: 32 measured 2-4x faster than 16 on an H100 (benchmarks/RESULTS-align.md).
PAIR_R = int(os.environ.get("SWGPU_PAIR_R", 32))
#: Largest boundary-row array (int32 entries, H and F each) of one pair launch.
PAIR_BOUNDARY_ENTRIES = 1 << 27
#: Table rows: codes 0..31, then the virtual rows' scores (0, or very negative).
_PAIR_VROW = 32
_PAIR_NROW = 33
_PAIR_TBL = 34 * 32
_PAIR_NEG = -(1 << 28)
#: Kernel kinds: forward local / semi-global, reverse local (bonus 1 on the anchor
#: cell), reverse global (the semi-global start).
PAIR_KINDS = ("local", "semi", "local_rev", "global_rev")


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
    """
    if kind is True or kind is False:
        kind = "local" if kind else "semi"
    assert R >= 1 and kind in PAIR_KINDS
    local = kind in ("local", "local_rev")
    rev = kind.endswith("_rev")
    glob = kind == "global_rev"
    o = []
    w = o.append
    w(f'"""Generated by swgpu_tools.kernels.gpu.pair_kernel_source({R}, {kind!r}, '
      f'sim={sim})."""')
    w("from numba import cuda, int32, int64, uint32, uint64")
    w("from swgpu_tools.kernels.gpu_intrinsics import (")
    w("    add32, max32, addmax32, max3_32, shared_base, lds32)")
    w("")
    w(f"R = {R}")
    w(f"KIND = {kind!r}")
    sig = ("void(uint8[::1], int64[::1], int32[::1], uint8[::1], int64[::1], int32[::1], int32, "
           "int32[::1], int32, int32, int32, int32, int32, int32[::1], int32[::1], int32, "
           "int32[::1], int32[::1])")
    w(f'SIG = "{sig}"')
    w("")
    w("def kernel_py(qcodes, qst, qln, scodes, sst, sln, npairs, tblg, tbl_n, noe, nxt, gop,")
    w("              gex, bH, bF, S, tgt, out):")
    w(f"    tbl = cuda.shared.array({_PAIR_TBL}, dtype=int32)")
    _emit_table_copy(w)
    w("    slot = int32(int32(cuda.blockIdx.x) * bdim + tid)")
    w("    if slot >= npairs:")
    w("        return")
    w("    sbase = shared_base(tbl)")
    w("    zero = int32(0)")
    w(f"    vneg = int32({_PAIR_NEG})")
    w("    m = qln[slot]")
    w("    n = sln[slot]")
    w("    qo = qst[slot]")
    w("    so = sst[slot] + n" if rev else "    so = sst[slot] - 1")
    if glob:
        w(f"    ntiles = int32(m // {R} + 1)")
    else:
        w(f"    ntiles = int32((m + {R - 1}) // {R})")
    w("    bi = zero")
    w("    bj = zero")
    w("    best = zero")
    if kind == "semi":
        w("    if m > 0:")
        w("        best = int32(-(gop + m * gex))")
    if glob:
        w("    target = tgt[slot]")
        w("    bj = int32(-1)")
        w("    g0 = zero")
        w("    if m > 0:")
        w("        g0 = int32(-(gop + m * gex))")
        w("    if g0 == target:")
        w("        bj = zero")
    vrow = _PAIR_NROW if glob else _PAIR_VROW
    w("    t = int32(0)")
    w("    while t < ntiles:")
    w(f"        i0 = int32(m - (ntiles - t) * {R} + 1)")
    for r in range(R):
        w(f"        i = int32(i0 + {r})")
        w(f"        qa{r} = int32(sbase + {vrow * 128})")
        w(f"        hl{r} = vneg" if glob else f"        hl{r} = zero")
        w("        if i >= 1:")
        if rev:
            w(f"            qa{r} = int32(sbase + int32(qcodes[qo + m - i]) * 128)")
        else:
            w(f"            qa{r} = int32(sbase + int32(qcodes[qo + i - 1]) * 128)")
        if not local:
            w(f"            hl{r} = int32(-(gop + i * gex))")
        if kind == "local_rev":
            w("        elif i == 0:")
            w(f"            hl{r} = int32(1)")
        if glob:
            w("        elif i == 0:")
            w(f"            hl{r} = zero")
        w(f"        e{r} = add32(hl{r}, noe)")
    w("        dtop = vneg" if glob else "        dtop = zero")
    if not local:
        w("        if i0 - 1 >= 1:")
        w("            dtop = int32(-(gop + (i0 - 1) * gex))")
    if glob:
        w("        elif i0 - 1 == 0:")
        w("            dtop = zero")
    if kind == "local_rev":
        w("        if i0 - 1 == 0:")
        w("            dtop = int32(1)")
    w("        first = t == 0")
    w("        last = t == ntiles - 1")
    w("        bidx = int32(slot + S)")
    w("        j = int32(1)")
    w("        while j <= n:")
    w("            if first:")
    if glob:
        w("                hb = vneg")
        w("                f = vneg")
    else:
        w("                hb = zero")
        w("                f = noe")
    w("            else:")
    w("                hb = bH[uint32(bidx)]")
    w("                f = bF[uint32(bidx)]")
    if rev:
        w("            s4 = int32(int32(scodes[uint64(so - j)]) * 4)")
    else:
        w("            s4 = int32(int32(scodes[uint64(so + j)]) * 4)")
    w("            diag = dtop")
    w("            dtop = hb")
    for r in range(R):
        w(f"            sc = lds32(tbl, add32(qa{r}, s4))")
        w(f"            h = addmax32(diag, sc, e{r})")
        if local:
            w("            h = max3_32(h, f, zero)")
        else:
            w("            h = max32(h, f)")
        w(f"            diag = hl{r}")
        w(f"            hl{r} = h")
        w("            tt = add32(h, noe)")
        w(f"            e{r} = addmax32(e{r}, nxt, tt)")
        w("            f = addmax32(f, nxt, tt)")
    w("            if not last:")
    w(f"                bH[uint32(bidx)] = hl{R - 1}")
    w("                bF[uint32(bidx)] = f")
    if local:
        # column maximum, then the first row holding it (rare branch)
        if R == 1:
            w("            cm = hl0")
        else:
            w("            cm = max32(hl0, hl1)" if R == 2 else
              "            cm = max3_32(hl0, hl1, hl2)")
            r = 2 if R == 2 else 3
            while r < R:
                if r + 1 < R:
                    w(f"            cm = max3_32(cm, hl{r}, hl{r + 1})")
                    r += 2
                else:
                    w(f"            cm = max32(cm, hl{r})")
                    r += 1
        w("            if cm > best or (cm == best and j < bj):")
        w("                best = cm")
        w("                bj = j")
        w(f"                rr = int32({R - 1})")
        for r in range(R - 2, -1, -1):
            w(f"                if hl{r} == cm:")
            w(f"                    rr = int32({r})")
        w("                bi = int32(i0 + rr)")
    elif glob:
        w(f"            if last and bj < 0 and hl{R - 1} == target:")
        w("                bj = j")
    else:
        w(f"            if last and hl{R - 1} > best:")
        w(f"                best = hl{R - 1}")
        w("                bj = j")
    w("            bidx = int32(bidx + S)")
    w("            j = int32(j + 1)")
    w("        t = int32(t + 1)")
    if not local:
        w("    bi = m")
    if glob:
        w("    best = target")
    w("    out[3 * slot] = best")
    w("    out[3 * slot + 1] = bi")
    w("    out[3 * slot + 2] = bj")
    w("")
    return "\n".join(o) + "\n"


_pair_kernels: dict = {}


def _pair_kind(kind) -> str:
    return ("local" if kind else "semi") if isinstance(kind, bool) else kind


def get_pair_kernel(R: int, kind="local"):
    """The compiled pair kernel (dispatcher) of ``kind`` (see :func:`pair_kernel_source`)."""
    from numba import cuda

    kind = _pair_kind(kind)
    with _lock:
        key = (R, kind)
        kern = _pair_kernels.get(key)
        if kern is None:
            name = f"pair_{kind}_r{R}{'_sim' if SIM else ''}"
            mod = _load_module(name, pair_kernel_source(R, kind, SIM))
            kern = cuda.jit(mod.SIG, cache=True)(mod.kernel_py)
            _pair_kernels[key] = kern
        return kern


def pair_kernel_ptx(R: int = PAIR_R, kind="local", cc=(9, 0)) -> str:
    """PTX of a pair kernel for compute capability ``cc`` (NVVM, no GPU)."""
    from numba import cuda

    kind = _pair_kind(kind)
    mod = _load_module(f"pair_{kind}_r{R}", pair_kernel_source(R, kind, False))
    ptx, _ = cuda.compile_ptx(mod.kernel_py, mod.SIG, cc=cc)
    return ptx


def _pair_table(matrix: np.ndarray) -> np.ndarray:
    na = matrix.shape[0]
    T = np.zeros((34, 32), dtype=np.int32)
    T[:na, :na] = matrix
    T[_PAIR_NROW] = -(1 << 20)
    return T.reshape(-1)


class _PairBatch:
    """The codes of a pair batch on the GPU, and launches of the pair kernels over it."""

    def __init__(self, qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                 R=None):
        from numba import cuda

        matrix = np.ascontiguousarray(matrix, dtype=np.int32)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or \
                not 0 < matrix.shape[0] <= 32:
            raise ValueError("matrix must be a square array of at most 32 x 32")
        gap_open, gap_extend = int(gap_open), int(gap_extend)
        if gap_open < 0 or gap_extend < 0 or gap_open + gap_extend <= 0:
            raise ValueError("gap costs must be >= 0 and not both 0")
        self.go, self.ge = gap_open, gap_extend
        self.R = int(R or PAIR_R)
        qcodes = np.ascontiguousarray(qcodes, dtype=np.uint8)
        scodes = np.ascontiguousarray(scodes, dtype=np.uint8)
        qoff = np.ascontiguousarray(qoff, dtype=np.int64)
        soff = np.ascontiguousarray(soff, dtype=np.int64)
        qidx = np.ascontiguousarray(qidx, dtype=np.int64)
        sidx = np.ascontiguousarray(sidx, dtype=np.int64)
        self.n = len(qidx)
        self.qst = qoff[qidx]
        self.qln = qoff[qidx + 1] - self.qst
        self.sst = soff[sidx]
        self.sln = soff[sidx + 1] - self.sst
        na = matrix.shape[0]
        for codes in (qcodes, scodes):
            if len(codes) and int(codes.max()) >= na:
                raise ValueError("sequence codes exceed the matrix size")
        worst = int(np.abs(matrix).max(initial=0)) + gap_open + gap_extend
        if self.n and int((self.qln + self.sln).max()) * worst >= (1 << 29):
            raise ValueError("scores of these pairs could exceed the 32-bit range with these "
                             "costs")
        t0 = time.perf_counter()
        self.d_q = cuda.to_device(qcodes if len(qcodes) else np.zeros(1, np.uint8))
        same = scodes.shape == qcodes.shape and (
            scodes.__array_interface__["data"][0] == qcodes.__array_interface__["data"][0])
        self.d_s = self.d_q if same else cuda.to_device(
            scodes if len(scodes) else np.zeros(1, np.uint8))
        self.d_tbl = cuda.to_device(_pair_table(matrix))
        self.times = {"upload_s": time.perf_counter() - t0, "forward_s": 0.0,
                      "reverse_s": 0.0}
        self._bH = self._bF = None

    def launch(self, kind, sel, m, n, target=None):
        """Run ``kind`` on pairs ``sel`` with row/column counts m, n; (len(sel), 3) int32."""
        from numba import cuda

        t0 = time.perf_counter()
        R = self.R
        kern = get_pair_kernel(R, kind)
        npairs = len(sel)
        res = np.zeros((npairs, 3), dtype=np.int32)
        if npairs == 0:
            return res
        ntiles = m // R + 1 if kind == "global_rev" else (m + R - 1) // R
        order = np.lexsort((-n, -ntiles)).astype(np.int64)  # most tiles first
        block = 8 if SIM else (128 if npairs >= 132 * 128 * 4 else 32)
        nmax = int(n.max())
        if (nmax + 1) * block >= 2**31:  # int32 boundary-row indices
            raise ValueError(f"a sequence of {nmax:,} residues is too long for the GPU pair "
                             f"kernels")
        S_cap = max(block, (PAIR_BOUNDARY_ENTRIES // (nmax + 1)) // block * block)
        oe = self.go + self.ge
        if target is None:
            target = np.zeros(npairs, dtype=np.int64)
        lo = 0
        while lo < npairs:
            hi = min(npairs, lo + S_cap)
            o = order[lo:hi]
            S = hi - lo
            need = max(1, (int(n[o].max()) + 1) * S) if int(ntiles[o].max()) > 1 else 1
            if self._bH is None or self._bH.shape[0] < need:
                self._bH = cuda.device_array(need, dtype=np.int32)
                self._bF = cuda.device_array(need, dtype=np.int32)
            d_out = cuda.device_array(3 * S, dtype=np.int32)
            args = [cuda.to_device(np.ascontiguousarray(a[o], dtype=dt)) for a, dt in (
                (self.qst[sel], np.int64), (m, np.int32), (self.sst[sel], np.int64),
                (n, np.int32), (target, np.int32))]
            kern[-(-S // block), block](self.d_q, args[0], args[1], self.d_s, args[2], args[3],
                                        S, self.d_tbl, _PAIR_TBL, -oe, -self.ge, self.go,
                                        self.ge, self._bH, self._bF, S, args[4], d_out)
            res[o] = d_out.copy_to_host().reshape(S, 3)
            lo = hi
        self.times["reverse_s" if kind.endswith("_rev") else "forward_s"] += \
            time.perf_counter() - t0
        return res


def _pair_mode(mode) -> str:
    mode = {"semi-global": "semiglobal", "glsearch": "semiglobal"}.get(str(mode).lower(),
                                                                      str(mode).lower())
    if mode not in ("local", "semiglobal"):
        raise ValueError(f"pair kernels: mode must be 'local' or 'semiglobal', got {mode!r}")
    return mode


def pair_ends(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
              mode="local", R=None, timings=None) -> np.ndarray:
    """(best score, query end, subject end) of each pair (qidx[k], sidx[k]), on the GPU.

    Exactly what the CPU forward pass of :mod:`swgpu_tools.alignment` gives
    (ends exclusive; tie rules of its module doc): ``mode`` "local" (the
    first maximum in column-major order; (0, 0, 0) for a pair of score 0) or
    "semiglobal" (the best cell of the last row, smallest subject end; the
    query end is the query length).  qcodes/scodes: uint8 matrix codes,
    concatenated; qoff/soff: their offsets.  Matrices up to 32 x 32; exact
    int32 scores (raises ValueError where 32 bits could overflow, as the CPU
    does).  ``timings``: a dict that gets seconds per step and cell counts.
    Returns an (n, 3) int64 array.  Under the CUDA simulator the same kernels
    run in the simulator (tests).
    """
    return _pair_run(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                     mode, R, timings, False)


def pair_regions(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                 mode="local", R=None, timings=None) -> np.ndarray:
    """(best, query start, query end, subject start, subject end) of each pair, on the GPU.

    The forward pass (:func:`pair_ends`) and the reverse pass of
    :mod:`swgpu_tools.alignment` (its locate steps 1 and 2, same tie rules):
    local, the reversed prefixes with a bonus of 1 on the anchor cell, the
    first cell reaching best + 1 in column-major order; semi-global, the
    global DP of the reversed prefixes, the shortest subject span reaching
    the best.  Local pairs of score 0 give all zeros.  The CPU then only runs
    the traceback on each region.  Returns an (n, 5) int64 array.
    """
    return _pair_run(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend,
                     mode, R, timings, True)


def _pair_run(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend, mode, R,
              timings, starts):
    t_start = time.perf_counter()
    mode = _pair_mode(mode)
    local = mode == "local"
    b = _PairBatch(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend, R)
    n = b.n
    out = np.zeros((n, 5 if starts else 3), dtype=np.int64)
    if n == 0:
        return out
    allp = np.arange(n, dtype=np.int64)
    fw = b.launch("local" if local else "semi", allp, b.qln, b.sln).astype(np.int64)
    if not starts:
        out[:] = fw
    else:
        best, qe, se = fw[:, 0], fw[:, 1], fw[:, 2]
        out[:, 0], out[:, 2], out[:, 4] = best, qe, se
        live = np.flatnonzero(best > 0) if local else allp
        rv = b.launch("local_rev" if local else "global_rev", live, qe[live], se[live],
                      best[live]).astype(np.int64)
        a = rv[:, 1]
        bb = rv[:, 2]
        bad = (rv[:, 0] != best[live] + 1) if local else (bb < 0)
        if bad.any():  # cannot happen; the CPU's locate step would be needed
            raise AssertionError(f"GPU reverse pass found no start for {int(bad.sum())} pairs")
        out[live, 1] = qe[live] - a
        out[live, 3] = se[live] - bb
    if timings is not None:
        timings.update(b.times)
        timings.update({"total_s": time.perf_counter() - t_start,
                        "kernel_s": b.times["forward_s"] + b.times["reverse_s"],
                        "cells": int((b.qln * b.sln).sum()), "R": b.R})
        if starts:
            timings["reverse_cells"] = int(((out[:, 2] - 0) * out[:, 4]).sum())
    return out
