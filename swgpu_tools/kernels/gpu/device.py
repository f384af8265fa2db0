"""The CUDA device: is one usable, binding it to a thread, and its properties.

Binding: CUDA's current device is per thread.  :func:`bind` is the one
function that selects a device; :mod:`swgpu_tools.backend` /
:mod:`swgpu_tools.pipeline` call it, and everything else here (searchers,
pair batches) runs on the calling thread's current device.  :func:`bind`
remembers, per thread, what it bound, so calling it again for the same device
on the same thread does nothing.
"""

from __future__ import annotations

import os
import threading

from ..gpu_intrinsics import SIM

# Streams beyond the driver's hardware work queues (8 by default) would share
# queues and serialize; ask for more before the first CUDA context exists.
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

_bound = threading.local()


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
            return (
                False,
                f"GPU {name} has compute capability {cc[0]}.{cc[1]}; 5.0 or newer is needed",
            )
        try:
            from numba.cuda.cudadrv import nvvm

            nvvm.NVVM()
        except Exception as exc:
            return False, f"CUDA library missing: NVVM (libnvvm) could not be loaded: {exc}"
        mode = {"s16": "s16 DPX", "h16": "h16 binary16", None: "s32"}[packed_mode(cc)]
        return True, f"{name} (compute capability {cc[0]}.{cc[1]}, {mode} kernels)"
    except Exception as exc:
        return False, f"CUDA initialisation failed: {exc}"


def bind(device_id: int) -> None:
    """Make CUDA device ``device_id`` (as numbered in this process) current for this thread.

    A second call for the same device on the same thread does nothing.  The
    binding does not carry over to other threads (CUDA keeps the current
    device per thread): a device bound on a helper thread must be bound again
    on the thread that launches the kernels.
    """
    if SIM:
        return
    device_id = int(device_id)
    if getattr(_bound, "device", None) == device_id:
        return
    from numba import cuda

    cuda.select_device(device_id)
    _bound.device = device_id


def bound_device() -> int | None:
    """The device :func:`bind` made current on this thread, or None."""
    return getattr(_bound, "device", None)


def packed_mode(cc) -> str | None:
    """The packed scoring-kernel mode a GPU of compute capability ``cc`` runs: "s16"
    (Hopper DPX, 9.0+), "h16" (binary16, 8.x), or None (only the 32-bit kernels)."""
    return "s16" if tuple(cc) >= (9, 0) else "h16" if tuple(cc) >= (8, 0) else None


def compute_capability() -> tuple[int, int]:
    """Compute capability of the current device ((9, 0) under the simulator)."""
    from numba import cuda

    if SIM:
        return (9, 0)
    return tuple(cuda.get_current_device().compute_capability)


def free_memory() -> int | None:
    """Free bytes on the current device (after pending frees), or None if unknown."""
    if SIM:
        return None
    try:
        from numba import cuda

        ctx = cuda.current_context()
        ctx.deallocations.clear()  # frees of an earlier searcher still pending
        free, _total = ctx.get_memory_info()
        return int(free)
    except Exception:  # pragma: no cover - depends on the driver
        return None


def quiet_low_occupancy_warnings() -> None:
    """Small partitions are launched on purpose (several streams fill the GPU)."""
    try:
        from numba.cuda import config as _ccfg

        _ccfg.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    except Exception:  # pragma: no cover - older numba-cuda
        pass


def nonblocking_stream():
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


def ensure_shared(kern, nbytes: int) -> None:
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
