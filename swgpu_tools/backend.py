"""Choosing the scoring backend (GPU or CPU) and the GPU a job runs on.

``choose_backend("auto")`` uses the GPU when one is usable and the CPU
otherwise, and always says why.  ``"gpu"`` fails with the reason when no GPU
is usable; ``"cpu"`` never touches CUDA.

GPU binding: Snakemake does not set ``CUDA_VISIBLE_DEVICES``.  With
``device="auto"`` a job takes an exclusive lock on one GPU id (a lock file per
visible GPU, under ``$SWGPU_LOCK_DIR`` or the temp dir) and holds it until
the process exits, so concurrent scoring jobs on one node each get their own
GPU; when all are taken it waits for one to come free.  The GPU is chosen
(and made current) before the backend check, so that no CUDA context is ever
opened on another GPU.
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


def visible_gpus() -> list[str]:
    """Stable names (UUIDs) of the GPUs this process sees, in CUDA order; [] without a driver."""
    try:
        from numba import cuda

        devices = list(cuda.list_devices())
    except Exception:  # no driver, no GPU, or numba-cuda missing
        return []
    names = []
    for i, dev in enumerate(devices):
        try:
            names.append(str(dev.uuid))
        except Exception:
            names.append(f"index{i}")
    return names


def acquire_gpu(device="auto", wait_seconds: float = 7 * 24 * 3600, log=None) -> int:
    """Return the GPU number this process should use; with "auto", lock a free one.

    Locks are keyed by the GPU's UUID, not its number, so jobs that see
    different subsets of a node's GPUs (SLURM sets CUDA_VISIBLE_DEVICES per
    job) never collide, and jobs that see the same GPU take turns.  Without
    a visible GPU this returns 0 and the backend check reports why.
    """
    if device != "auto":
        try:
            return int(device)
        except ValueError:
            raise InputError(f"device must be 'auto' or a GPU number, got '{device}'") from None
    gpus = visible_gpus()
    if not gpus:
        return 0
    lock_dir = os.environ.get("SWGPU_LOCK_DIR", os.path.join(tempfile.gettempdir(), "swgpu-gpu-locks"))
    os.makedirs(lock_dir, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    announced = False
    while True:
        for i, name in enumerate(gpus):
            fh = open(os.path.join(lock_dir, f"{name}.lock"), "w")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            _held_locks.append(fh)  # held until the process exits
            return i
        if time.monotonic() > deadline:
            raise InputError(f"no free GPU among {len(gpus)} after waiting {wait_seconds:.0f} s")
        if log and not announced:
            log(f"all {len(gpus)} visible GPUs are in use by other swgpu jobs; waiting for one")
            announced = True
        time.sleep(1.0)
