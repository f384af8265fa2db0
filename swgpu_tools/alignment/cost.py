"""Where the score passes of a batch run (``backend=``): the GPU/CPU estimate behind ``"auto"``.

In local and semi-global modes, steps 1 and 2 of a batch (the score-only
passes) can run on the GPU (:func:`swgpu_tools.kernels.gpu.pair_regions`,
one thread per pair, the same cells and tie rules, so the alignments are
identical); the traceback always runs on the CPU.  :func:`pair_backend` says
whether a GPU may be used (through :func:`swgpu_tools.backend.gpu_status`,
checked once per process there); :func:`batch_backend` adds, for ``"auto"``,
an estimate of whether the GPU is faster for the batch, its start-up
included.
"""

from __future__ import annotations

import numpy as np

from ..backend import BACKENDS, BackendChoice, choose_backend, gpu_status
from ..errors import InputError
from .modes import MODE_GLOBAL, mode_code

#: Rates behind ``backend="auto"``'s estimate (:func:`gpu_pays`), from the
#: H100 runs in benchmarks/RESULTS-align.md section 4: one GPU thread aligns
#: one pair (>= 4e7 cells/s measured), the whole GPU ~3e11 cells/s, a CPU
#: thread's score passes ~1e9 cells/s.  Start-up in a new process: the GPU
#: check (numba.cuda, driver, NVVM: GPU_CHECK_S, ~0.6 s measured in run 4) and
#: the first launches (context, kernels from the disk cache: GPU_LOAD_S, ~0.5 s).
#: (Runs 1-3 measured 2.5 s and 1 s: their device install had no byte-compiled
#: packages, which a pip install has.)
GPU_THREAD_CELLS_PER_S = 3e7
GPU_CELLS_PER_S = 2.5e11
CPU_THREAD_CELLS_PER_S = 1e9
GPU_CHECK_S = 0.8
GPU_LOAD_S = 0.5

# what this process has already paid: the GPU check (made here through
# backend.gpu_status), the first GPU launches (mark_gpu_used)
_paid = {"check": False, "load": False}


def mark_gpu_used() -> None:
    """Record that this process has launched the GPU pair kernels (start-up paid)."""
    _paid["load"] = True


def gpu_start_s() -> float:
    """Seconds of GPU start-up this process has still to pay (check, first launches)."""
    return (0.0 if _paid["check"] else GPU_CHECK_S) + (0.0 if _paid["load"] else GPU_LOAD_S)


def gpu_pays(cells: int, max_cells: int, nthreads: int):
    """(GPU expected faster, GPU estimate s, CPU estimate s) for the score passes of a batch.

    Two passes (forward, reverse) each way; the GPU's time is bounded below by
    its longest pair (one thread per pair) and includes the start-up this
    process has still to pay.  So ``"auto"`` keeps small batches and batches
    of a few long pairs on the CPU.
    """
    gpu = 2 * (max_cells / GPU_THREAD_CELLS_PER_S + cells / GPU_CELLS_PER_S) + gpu_start_s()
    cpu = 2 * cells / (CPU_THREAD_CELLS_PER_S * max(1, nthreads))
    return gpu < cpu, gpu, cpu


def batch_backend(
    backend, mode, qlen: np.ndarray, slen: np.ndarray, nthreads: int
) -> BackendChoice:
    """The BackendChoice for one batch: :func:`pair_backend`, with the estimate for "auto".

    "auto" does not even check for a GPU (seconds in a new process) when the
    CPU's score passes are expected to take less than the GPU's start-up.
    """
    if str(backend).lower() != "auto" or mode_code(mode) == MODE_GLOBAL:
        return pair_backend(backend, mode)
    cells = qlen * slen
    total, most = int(cells.sum()), int(cells.max())
    est_cpu = 2 * total / (CPU_THREAD_CELLS_PER_S * max(1, nthreads))
    start = gpu_start_s()
    if est_cpu <= start:
        return BackendChoice(
            "cpu",
            f"small batch: CPU score passes ~{est_cpu:.2f} s on "
            f"{nthreads} threads, less than the GPU's start-up in this "
            f"process (~{start:.1f} s); GPU not checked",
        )
    choice = pair_backend(backend, mode)
    if choice.name != "gpu":
        return choice
    pays, est_gpu, est_cpu = gpu_pays(total, most, nthreads)
    if not pays:
        return BackendChoice(
            "cpu",
            f"GPU usable, but the CPU is expected to be faster for "
            f"this batch (score passes: GPU ~{est_gpu:.2f} s with one "
            f"thread per pair and its start-up, CPU ~{est_cpu:.2f} s "
            f"on {nthreads} threads)",
        )
    return BackendChoice(
        "gpu",
        f"{choice.reason}; estimate for the score passes: GPU "
        f"~{est_gpu:.2f} s, CPU ~{est_cpu:.2f} s on {nthreads} threads",
    )


def pair_backend(backend: str = "auto", mode: str = "local") -> BackendChoice:
    """Where the score passes of a batch run: a BackendChoice ("gpu" or "cpu", reason).

    "auto": the GPU when :func:`swgpu_tools.backend.gpu_status` finds one
    usable and ``mode`` is local or semi-global (and then, per batch, when the
    GPU is expected to be faster: :func:`batch_backend`); "gpu": the same but
    raises InputError (with the reason) when no GPU is usable; "cpu": the
    CPU.  Global mode always runs on the CPU (no score pass to move: its
    traceback recomputes the whole matrix).  Under the CUDA simulator
    (``NUMBA_ENABLE_CUDASIM=1``, tests) "gpu" runs the kernels in the
    simulator.
    """
    backend = str(backend).lower()
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got '{backend}'")
    if backend == "cpu":
        return BackendChoice("cpu", "CPU backend requested")
    if mode_code(mode) == MODE_GLOBAL:
        return BackendChoice(
            "cpu",
            "global mode runs on the CPU (no score pass to move to "
            "the GPU: its traceback recomputes the whole matrix)",
        )
    if backend == "gpu":
        from ..kernels.gpu_intrinsics import SIM

        if SIM:
            return BackendChoice("gpu", "CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    ok, why = gpu_status()
    _paid["check"] = True
    if ok:
        return BackendChoice("gpu", f"score passes on the GPU: {why}")
    return (
        choose_backend(backend)
        if backend == "gpu"
        else BackendChoice("cpu", f"no usable GPU, using the CPU: {why}")
    )
