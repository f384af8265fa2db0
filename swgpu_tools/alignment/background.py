"""The traceback's alignment kernels compiled in the background of a first run.

On a machine whose kernel cache is cold, a run compiles the GPU (or CPU) search
kernels in its scoring job and then the CPU alignment kernels in its traceback
step, one after the other (H100, 20 queries: 28.7 s and 17.6 s; RESULTS-workflow.md,
run 148).  The warm process (:mod:`swgpu_tools.warm.server`) starts
:func:`compile_hits`, which compiles the kernels the step calls first (database
hits in int16 lanes, their output columns) in a child process of their own while
the scoring runs; the traceback step's first alignment call
(:func:`swgpu_tools.alignment.warm.notice`) waits for that child
(:func:`wait`) and then loads them from the disk cache.

The child holds an exclusive ``flock`` on ``.compiling-hits.lock`` in Numba's cache
folder from before it starts until it exits (the lock's descriptor is handed to
it), so a waiter never sees a compile that has not begun, and a compile that dies
releases the lock with its process.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time

from ..kernels.jitcache import cache_folder
from ..logs import get_logger

log = get_logger(__name__)

#: How long the traceback step waits for a background compile at most (then it
#: compiles what is missing itself).
WAIT_S = 600.0


#: The child's program (its seconds and any error go to :func:`log_path`), and the
#: variable that tells it not to wait for itself.
CHILD = (
    "import sys, time; t0 = time.perf_counter(); "
    "from swgpu_tools.alignment.warmup import first_hits; first_hits(); "
    "print(f'compiled in {time.perf_counter() - t0:.1f} s', file=sys.stderr)"
)
COMPILER_ENV = "SWGPU_COMPILING_IN_BACKGROUND"


def lock_path(kind: str = "hits") -> str:
    return os.path.join(cache_folder(), f".compiling-{kind}.lock")


def log_path(kind: str = "hits") -> str:
    """The last background compile's standard error (its seconds, or its error)."""
    return os.path.join(cache_folder(), f".compiling-{kind}.log")


def compile_hits() -> int | None:
    """Start a child process that compiles the database-hit alignment kernels into
    the disk cache (the caller found them missing there); its pid, or None where
    another compile holds the lock."""
    os.makedirs(cache_folder(), exist_ok=True)
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # another process is compiling them
        # the same swgpu_tools as this process's, whatever the working folder holds
        # (Numba keys its cache folders by the source files' paths)
        pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(p for p in (pkg_parent, os.environ.get("PYTHONPATH")) if p)
        with open(log_path(), "w") as err:
            child = subprocess.Popen(
                [sys.executable, "-P", "-c", CHILD],
                env=dict(os.environ, PYTHONPATH=path, **{COMPILER_ENV: "1"}),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                pass_fds=(fd,),  # the lock goes with the child; released when it exits
                start_new_session=True,
            )
        return child.pid
    finally:
        os.close(fd)


def wait(kind: str = "hits", timeout: float = WAIT_S) -> float:
    """Wait while a background compile of ``kind`` holds its lock (at most ``timeout``
    seconds); the seconds waited (0.0 where none runs)."""
    path = lock_path(kind)
    if os.environ.get(COMPILER_ENV) or not os.path.exists(path):
        return 0.0  # (the compiling child itself holds the lock)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                break
            except BlockingIOError:
                waited = time.perf_counter() - t0
                if waited >= timeout:
                    log.warning(
                        f"the background compile of the {kind} kernels took over "
                        f"{timeout:.0f} s; compiling here"
                    )
                    break
                if not told:
                    log.info(
                        f"waiting for the CPU alignment kernels ({kind}) that are "
                        "compiling in the background (once per machine)"
                    )
                    told = True
                time.sleep(0.1)
    finally:
        os.close(fd)
    return time.perf_counter() - t0
