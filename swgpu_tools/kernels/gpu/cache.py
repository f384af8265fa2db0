"""Compiled GPU kernels: the module cache folder, loading, and compiling ahead.

Each kernel source (:mod:`.codegen`) is written once to
``<swgpu cache>/kernels/swgpu_gen_<name>_<hash of the source>.py`` and
imported from there; Numba compiles it with ``cache=True``, so a new process
loads the compiled kernel from Numba's on-disk cache next to it.  A marker file
per kernel, GPU kind and numba-cuda version says "compiled here before" (a
hint for compiling ahead in parallel; Numba's own cache decides what is
really reused).  :func:`precompile` fills the cache for the whole shape menu
in child processes (NVVM and ptxas are single-threaded).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import py_compile
import subprocess
import sys
import tempfile
import threading
import time

from ...cpus import usable_cpus
from ...logs import get_logger
from ..gpu_intrinsics import SIM
from .codegen import (
    QP2_R,
    QP2_U,
    aux_kernel_source,
    kernel_source,
    pair_kernel_source,
    pair_kind,
    qp2_kernel_source,
)
from .device import compute_capability, packed_mode
from .planner import BATCH_SHAPES, MULTI_SHAPES, SHAPES

log = get_logger(__name__)

_lock = threading.RLock()
_modules: dict = {}
_kernels: dict = {}
_pair_kernels: dict = {}
_qp2_kernels: dict = {}
_target_lock = threading.Lock()
_target_ready: list[bool] = []


def init_target() -> None:
    """Load numba-cuda's typing registries, once per process (idempotent, thread-safe).

    The first kernel a process compiles or loads from the cache does this anyway;
    :func:`swgpu_tools.backend.start_backend` calls it on a thread while the CUDA
    driver starts (driver calls release the GIL), so that the two overlap.

    numba-cuda's ``np.arraymath``, loaded here, probes for a BLAS by importing
    ``scipy.linalg`` (0.5 s on an H100 host with SciPy installed; the kernels use
    no BLAS): hidden from that probe (:func:`swgpu_tools.cache.scipy_linalg_hidden`).
    """
    with _target_lock:
        if _target_ready:
            return
        from numba.cuda.descriptor import cuda_target

        from ...cache import scipy_linalg_hidden

        with scipy_linalg_hidden():
            cuda_target.typing_context.refresh()
        _target_ready.append(True)


def kernels_dir() -> str:
    """The folder of generated kernel modules (created; a temp folder if the cache
    folder is not writable)."""
    from ...cache import cache_dir

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


def module_name(name: str, source: str) -> str:
    """Module (and file) name of a generated source: its name and a hash of its text."""
    return f"swgpu_gen_{name}_{hashlib.sha1(source.encode()).hexdigest()[:12]}"


def load_module(name: str, source: str):
    """Write ``source`` (once) to the cache folder and import it as a module."""
    with _lock:
        key = (name, source)
        mod = _modules.get(key)
        if mod is not None:
            return mod
        modname = module_name(name, source)
        path = os.path.join(kernels_dir(), modname + ".py")
        if not os.path.exists(path):
            # a plain write + rename: the cache folder is shared by concurrent
            # processes, each writing the same text (the name is its hash)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                fh.write(source)
            os.replace(tmp, path)
        _write_bytecode(path)
        if not SIM:
            init_target()
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        spec.loader.exec_module(mod)
        _modules[key] = mod
        return mod


def _write_bytecode(path: str) -> None:
    """The module's compiled bytecode beside it (``__pycache__``), where missing.

    Python writes it on the first import unless bytecode writing is off
    (``PYTHONDONTWRITEBYTECODE``, common in containers); then every process
    compiled the generated sources again: 0.45 s of a GPU job's start on the
    H100 image.  ``py_compile`` writes it either way, atomically.
    """
    pyc = importlib.util.cache_from_source(path)
    if not os.path.exists(pyc):
        try:
            py_compile.compile(path, cfile=pyc, doraise=True)
        except (OSError, py_compile.PyCompileError):  # read-only folder: import compiles it
            pass


def _kernel_name_source(mode, G, R, multipass, batched=False):
    return (
        f"{mode}_{G}x{R}{'m' if multipass else ''}{'b' if batched else ''}{'_sim' if SIM else ''}",
        kernel_source(mode, G, R, SIM, multipass, batched),
    )


def get_kernel(mode: str, G: int, R: int, multipass: bool = True, batched: bool = False):
    """The compiled scoring kernel (dispatcher) for ``mode`` and shape (G, R);
    ``batched``: the several-queries-per-launch variant."""
    from numba import cuda

    with _lock:
        key = (mode, G, R, multipass, batched)
        kern = _kernels.get(key)
        if kern is None:
            mod = load_module(*_kernel_name_source(mode, G, R, multipass, batched))
            kern = cuda.jit(mod.SIG, cache=True, **_bounds(mod))(mod.kernel_py)
            _kernels[key] = kern
            if not SIM:
                _mark(compiled_marker(mode, G, R, multipass, batched))
        return kern


def _bounds(mod) -> dict:
    """The ``launch_bounds`` argument of a generated module's kernel, where its source
    sets ``LAUNCH_BOUNDS`` (threads a block, blocks an SM; never in simulator sources)."""
    bounds = getattr(mod, "LAUNCH_BOUNDS", None)
    return {"launch_bounds": bounds} if bounds else {}


def _mark(marker: str) -> None:
    """Write the (empty) marker file of a kernel now in the disk cache, once."""
    if not os.path.exists(marker):
        open(marker, "w").close()


def forget_kernels() -> None:
    """Drop the loaded scoring kernels (after :func:`.codegen.set_variant`)."""
    with _lock:
        _kernels.clear()


def is_loaded(mode: str, G: int, R: int, multipass: bool, batched: bool = False) -> bool:
    """Whether this process has that scoring kernel already."""
    return (mode, G, R, multipass, batched) in _kernels


def compiled_marker(mode, G, R, multipass, batched=False) -> str:
    """Path of the file saying this kernel is in the disk cache for this GPU kind and
    numba-cuda version (a hint for compiling ahead in parallel; Numba's own cache
    decides what is really reused)."""
    return _marker_path(*_kernel_name_source(mode, G, R, multipass, batched))


def _marker_path(name: str, source: str) -> str:
    """Marker path of the generated module ``name`` of ``source`` (see
    :func:`compiled_marker`)."""
    cc = "".join(str(v) for v in compute_capability())
    return os.path.join(
        kernels_dir(),
        f"{module_name(name, source)}.sm{cc}.numba-cuda-{_numba_cuda_version()}.ok",
    )


@functools.cache
def _numba_cuda_version() -> str:
    from importlib.metadata import version

    try:
        return version("numba-cuda")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "unknown"


#: At most this many compiling children: each compiles on one CPU (NVVM and ptxas
#: are single-threaded) and starts numba-cuda and a CUDA context of its own.  Run 149
#: (RESULTS-workflow.md): 21 kernels in 8 children were three rounds of ~8 s on a
#: 16-core host, most of a first run's 32.7 s over a warm one.  ``$SWGPU_COMPILE_JOBS``
#: sets another cap (e.g. on a node shared with other work).
MAX_COMPILE_JOBS = 16


def _max_compile_jobs() -> int:
    try:
        return max(1, int(os.environ.get("SWGPU_COMPILE_JOBS", MAX_COMPILE_JOBS)))
    except ValueError:
        return MAX_COMPILE_JOBS


def compile_jobs(n_tasks: int, cpus: int | None = None) -> int:
    """How many children compile ``n_tasks`` kernels: as few as finish in the fewest
    rounds that ``cpus`` (default: this process's usable CPUs, at most
    :data:`MAX_COMPILE_JOBS` or ``$SWGPU_COMPILE_JOBS``) allow, e.g. 21 kernels on 16
    CPUs: 2 rounds, 11 children."""
    cap = max(1, min(usable_cpus() if cpus is None else cpus, _max_compile_jobs()))
    if n_tasks < 1:
        return 0
    rounds = -(-n_tasks // cap)
    return -(-n_tasks // rounds)


def compile_in_children(tasks, jobs: int) -> int:
    """Compile kernels ``tasks`` ((mode, G, R, multipass[, batched]) each) into the disk cache in
    ``jobs`` child processes on this process's GPU; returns how many children failed."""
    from numba import cuda

    chunks = [tasks[k::jobs] for k in range(jobs)]
    code = (
        "import json, sys; from swgpu_tools.kernels.gpu import cache; "
        "[cache.get_kernel(*t) for t in json.loads(sys.argv[1])]; cache.aux()"
    )
    # compile-only children: one hardware queue each (many contexts with 32 queues
    # each ran the GPU out of resources on an H100), on this process's GPU only
    env = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS="1")
    try:
        env["CUDA_VISIBLE_DEVICES"] = str(cuda.get_current_device().uuid)
    except Exception:  # pragma: no cover - older numba-cuda: children use the default GPU
        pass
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(c)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for c in chunks
        if c
    ]
    return sum(1 for p in procs if p.wait() != 0)


def compile_ahead(needed, jobs: int | None = None) -> None:
    """Compile the kernels ``needed`` ((mode, G, R, multipass[, batched]) each) that are neither
    loaded here nor marked compiled, in parallel child processes (first use on a
    machine); does nothing for fewer than two."""
    todo = sorted(
        t for t in needed if not is_loaded(*t) and not os.path.exists(compiled_marker(*t))
    )
    jobs = compile_jobs(len(todo)) if jobs is None else jobs
    if jobs < 2:
        return
    t0 = time.perf_counter()
    log.info(
        f"first use of {len(todo)} GPU kernels on this machine: compiling them in {jobs} "
        f"processes into {kernels_dir()}"
    )
    failed = compile_in_children(todo, jobs)
    log.info(
        f"GPU kernels compiled in {time.perf_counter() - t0:.1f} s"
        + (f" ({failed} processes failed; compiling the rest here)" if failed else "")
    )


def kernel_ptx(
    mode: str, G: int, R: int, multipass: bool = True, cc=(9, 0), batched: bool = False
) -> str:
    """PTX of a scoring kernel for compute capability ``cc`` (needs NVVM, no GPU or driver)."""
    from numba import cuda

    mod = load_module(
        f"{mode}_{G}x{R}{'m' if multipass else ''}{'b' if batched else ''}",
        kernel_source(mode, G, R, False, multipass, batched),
    )
    ptx, _ = cuda.compile_ptx(mod.kernel_py, mod.SIG, cc=cc, **_bounds(mod))
    return ptx


def device_modes() -> tuple[str, ...]:
    """The scoring-kernel modes a search on the current device may use: its packed mode
    (s16 on Hopper, h16 on compute capability 8.x, or the one ``$SWGPU_GPU_MODE`` names)
    and s32 (any scheme, and the re-scoring path)."""
    packed = packed_mode(compute_capability())
    forced = os.environ.get("SWGPU_GPU_MODE", "auto")
    if forced in ("s16", "h16"):
        packed = forced
    return (packed, "s32") if packed else ("s32",)


def precompile(modes=None, jobs=None, shapes=None) -> dict:
    """Compile (or load from the disk cache) every kernel of the shape menus of ``modes``
    (default: :func:`device_modes`).

    With ``jobs`` > 1 the compilations run in that many child processes
    (NVVM and ptxas are single-threaded), which fill the on-disk cache that
    this process then loads.  Returns {"kernels": n, "seconds": s, "jobs": j,
    "failed_children": f}.
    """
    t0 = time.perf_counter()
    tasks = []
    for mode in modes or device_modes():
        one = shapes if shapes is not None else SHAPES[mode]
        tasks += [(mode, G, R, False) for G, R in one]
        tasks += [(mode, G, R, True) for G, R in MULTI_SHAPES[mode]]
        if shapes is None:  # the batched kernels (many queries, few subjects) of the menu
            tasks += [(mode, G, R, False, True) for G, R in BATCH_SHAPES[mode]]
            tasks += [(mode, G, R, True, True) for G, R in MULTI_SHAPES[mode]]
    if jobs is None:
        jobs = compile_jobs(len(tasks))
    failed = 0
    if jobs > 1 and not SIM:
        failed = compile_in_children(tasks, jobs)
    for t in tasks:  # loads what the children cached; compiles whatever they did not
        get_kernel(*t)
    extra = 3  # the aux module's
    if shapes is None and "s16" in (modes or device_modes()):
        get_qp2_kernel(QP2_R, QP2_U)  # two queries per register (qp2.py)
        get_qp2_kernel(QP2_R, QP2_U, blocks=True)  # a tile a block (qp2_blocks.py)
        extra += 2
    aux()
    return {
        "kernels": len(tasks) + extra,
        "seconds": time.perf_counter() - t0,
        "jobs": jobs,
        "failed_children": failed,
    }


def aux():
    """The module of top-k helper and alphabet kernels."""
    return load_module("aux" + ("_sim" if SIM else ""), aux_kernel_source())


def _jitted(table: dict, key, name: str, source) -> object:
    """The kernel ``kernel_py`` of the module ``name`` (its source from ``source()``,
    rendered only when the kernel is not in ``table`` yet), compiled (disk cache) and kept
    in ``table`` under ``key``."""
    from numba import cuda

    with _lock:
        kern = table.get(key)
        if kern is None:
            mod = load_module(name, source())
            kern = cuda.jit(mod.SIG, cache=True, **_bounds(mod))(mod.kernel_py)
            table[key] = kern
        return kern


def _ptx(name: str, source: str, cc) -> str:
    """PTX of module ``name``'s ``kernel_py`` for compute capability ``cc`` (no GPU)."""
    from numba import cuda

    mod = load_module(name, source)
    ptx, _ = cuda.compile_ptx(mod.kernel_py, mod.SIG, cc=cc, **_bounds(mod))
    return ptx


def get_pair_kernel(R: int, kind="local"):
    """The compiled pair kernel (dispatcher) of ``kind`` (see :func:`.codegen.pair_kernel_source`)."""
    kind = pair_kind(kind)
    name = f"pair_{kind}_r{R}{'_sim' if SIM else ''}"
    return _jitted(_pair_kernels, (R, kind), name, lambda: pair_kernel_source(R, kind, SIM))


def get_qp2_kernel(R: int, U: int = 2, blocks: bool = False):
    """The compiled two-queries-per-register kernel (:mod:`.qp2`) of R rows a lane;
    ``blocks``: its variant of a tile a block (:mod:`.qp2_blocks`)."""
    name = _qp2_name(R, U, blocks) + ("_sim" if SIM else "")
    kern = _jitted(_qp2_kernels, (R, U, blocks), name, lambda: qp2_kernel_source(R, U, SIM, blocks))
    if not SIM:
        _mark(qp2_marker(R, U, blocks))
    return kern


def _qp2_name(R: int, U: int, blocks: bool) -> str:
    return f"qp2{'b' if blocks else ''}_{R}x{U}"


@functools.cache
def qp2_marker(R: int, U: int = 2, blocks: bool = False) -> str:
    """Path of the file saying this qp2 kernel is in the disk cache for this GPU kind and
    numba-cuda version (as :func:`compiled_marker`)."""
    return _marker_path(_qp2_name(R, U, blocks), qp2_kernel_source(R, U, False, blocks))


def qp2_kernel_ptx(R: int, U: int = 2, cc=(9, 0), blocks: bool = False) -> str:
    """PTX of the qp2 kernel (or its block variant) for compute capability ``cc`` (NVVM,
    no GPU)."""
    return _ptx(_qp2_name(R, U, blocks), qp2_kernel_source(R, U, False, blocks), cc)


def pair_kernel_ptx(R: int, kind="local", cc=(9, 0)) -> str:
    """PTX of a pair kernel for compute capability ``cc`` (NVVM, no GPU)."""
    kind = pair_kind(kind)
    return _ptx(f"pair_{kind}_r{R}", pair_kernel_source(R, kind, False), cc)
