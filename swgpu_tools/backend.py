"""Choosing the scoring backend (GPU or CPU) and the GPU a job runs on.

``choose_backend("auto")`` uses the GPU when one is usable and the CPU
otherwise, and always says why.  ``"gpu"`` fails with the reason when no GPU
is usable; ``"cpu"`` never touches CUDA.

GPU binding: Snakemake does not set ``CUDA_VISIBLE_DEVICES``.  With
``device="auto"`` a job takes an exclusive lock on one GPU id (a lock file per
visible GPU, under ``$SWGPU_LOCK_DIR`` or the temp dir) and holds it until
the process exits, so concurrent scoring jobs on one node each get their own
GPU; when all are taken it waits for one to come free.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
import time
from dataclasses import dataclass

from .errors import InputError

BACKENDS = ("auto", "gpu", "cpu")


@dataclass
class BackendChoice:
    name: str  # "gpu" or "cpu"
    reason: str


def gpu_status() -> tuple[bool, str]:
    """(usable, explanation) for the GPU backend; never raises."""
    try:
        from .kernels import gpu
    except Exception as exc:  # numba-cuda missing or broken
        return False, f"the GPU backend cannot be imported ({type(exc).__name__}: {exc})"
    try:
        return gpu.available()
    except Exception as exc:
        return False, f"GPU check failed ({type(exc).__name__}: {exc})"


def choose_backend(requested: str = "auto") -> BackendChoice:
    if requested not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got '{requested}'")
    if requested == "cpu":
        return BackendChoice("cpu", "CPU backend requested")
    ok, why = gpu_status()
    if ok:
        return BackendChoice("gpu", why)
    if requested == "gpu":
        raise InputError(f"backend 'gpu' requested but no GPU is usable: {why}")
    return BackendChoice("cpu", f"no usable GPU, using the CPU: {why}")


_held_locks: list = []


def visible_gpu_count() -> int:
    from numba import cuda

    return len(cuda.list_devices())


def acquire_gpu(device="auto", wait_seconds: float = 7 * 24 * 3600, log=None) -> int:
    """Return the GPU id this process should use; with "auto", lock a free one."""
    if device != "auto":
        try:
            return int(device)
        except ValueError:
            raise InputError(f"device must be 'auto' or a GPU number, got '{device}'") from None
    n = visible_gpu_count()
    if n <= 1:
        return 0
    lock_dir = os.environ.get("SWGPU_LOCK_DIR", os.path.join(tempfile.gettempdir(), "swgpu-gpu-locks"))
    os.makedirs(lock_dir, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    announced = False
    while True:
        for i in range(n):
            fh = open(os.path.join(lock_dir, f"gpu{i}.lock"), "w")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            _held_locks.append(fh)  # held until the process exits
            return i
        if time.monotonic() > deadline:
            raise InputError(f"no free GPU among {n} after waiting {wait_seconds:.0f} s")
        if log and not announced:
            log(f"all {n} GPUs are taken by other swgpu jobs; waiting for one")
            announced = True
        time.sleep(1.0)
