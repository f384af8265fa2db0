"""The traceback's alignment kernels compiled in the background of a first run.

On a machine whose kernel cache is cold, a run compiles the GPU (or CPU) search
kernels in its scoring job and then the CPU alignment kernels in its traceback
step, one after the other (H100, 20 queries: 28.7 s and 17.6 s; RESULTS-workflow.md,
run 148).  The warm process (:mod:`swgpu_tools.warm.server`) starts
:func:`compile_hits`, which compiles the kernels the step calls first (database
hits in int16 lanes, their output columns) in a child process of their own while
the scoring runs, and where there are CPUs to spare a second child for the
traceback of large regions one at a time (which a traceback on many threads
reaches); the traceback step's first alignment call
(:func:`swgpu_tools.alignment.warm.notice`) waits for those children
(:func:`wait`) and then loads the kernels from the disk cache.

Each child holds an exclusive ``flock`` on ``.compiling-<part>.lock`` in Numba's
cache folder from before it starts until it exits (the lock's descriptor is handed
to it), so a waiter never sees a compile that has not begun, and a compile that
dies releases the lock with its process; its standard error (its seconds, or its
error) goes to ``.compiling-<part>.log`` beside it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time

from ..cpus import usable_cpus
from ..kernels.jitcache import cache_folder
from ..logs import get_logger

log = get_logger(__name__)

#: How long the traceback step waits for a background compile at most (then it
#: compiles what is missing itself).
WAIT_S = 600.0


#: The variable that tells a compiling child not to wait for itself.
COMPILER_ENV = "SWGPU_COMPILING_IN_BACKGROUND"

#: What each background child compiles (a function of :mod:`.warmup`), by part.
#: ``singles``: the traceback of large weak regions one at a time, which a traceback
#: on many threads needs (each thread's region limit is smaller; run 152 in
#: RESULTS-workflow.md: 9 s compiling inside the step on 16 threads).
PARTS = {"hits": "first_hits", "singles": "first_singles"}
#: The parts a step waits for, by kind.
KIND_PARTS = {"hits": ("hits", "singles")}
#: The second child only where the CPUs leave room for it beside the scoring job.
SINGLES_MIN_CPUS = 4


def child_code(part: str) -> str:
    """The child's program for ``part``: its seconds, or its error, go to :func:`log_path`."""
    fn = PARTS[part]
    return (
        "import sys, time; t0 = time.perf_counter(); "
        f"from swgpu_tools.alignment.warmup import {fn}; {fn}(); "
        "print(f'compiled in {time.perf_counter() - t0:.1f} s', file=sys.stderr)"
    )


def lock_path(part: str = "hits") -> str:
    return os.path.join(cache_folder(), f".compiling-{part}.lock")


def log_path(part: str = "hits") -> str:
    """The last background compile's standard error (its seconds, or its error)."""
    return os.path.join(cache_folder(), f".compiling-{part}.log")


def _start(part: str) -> int | None:
    """Start the child that compiles ``part``; its pid, or None where another compile of
    it holds the lock."""
    os.makedirs(cache_folder(), exist_ok=True)
    fd = os.open(lock_path(part), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # another process is compiling them
        # the same swgpu_tools as this process's, whatever the working folder holds
        # (Numba keys its cache folders by the source files' paths)
        pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(p for p in (pkg_parent, os.environ.get("PYTHONPATH")) if p)
        with open(log_path(part), "w") as err:
            child = subprocess.Popen(
                [sys.executable, "-P", "-c", child_code(part)],
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


def compile_hits() -> int | None:
    """Start a child process that compiles the database-hit alignment kernels into
    the disk cache (the caller found them missing there), and, with at least
    :data:`SINGLES_MIN_CPUS` CPUs, a second one for the large regions' traceback;
    the first child's pid, or None where another compile holds its lock."""
    pid = _start("hits")
    if pid is not None and usable_cpus() >= SINGLES_MIN_CPUS:
        _start("singles")
    return pid


def wait(kind: str = "hits", timeout: float = WAIT_S) -> float:
    """Wait while a background compile of ``kind`` (any of its parts) holds its lock (at
    most ``timeout`` seconds in all); the seconds waited (0.0 where none runs)."""
    if os.environ.get(COMPILER_ENV):
        return 0.0  # (a compiling child itself holds a lock)
    t0 = time.perf_counter()
    told = False
    for part in KIND_PARTS.get(kind, (kind,)):
        path = lock_path(part)
        if not os.path.exists(path):
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    break
                except BlockingIOError:
                    if time.perf_counter() - t0 >= timeout:
                        log.warning(
                            f"the background compile of the {kind} kernels took over "
                            f"{timeout:.0f} s; compiling here"
                        )
                        return time.perf_counter() - t0
                    if not told:
                        log.info(
                            f"waiting for the CPU alignment kernels ({kind}) that are "
                            "compiling in the background (once per machine)"
                        )
                        told = True
                    time.sleep(0.1)
        finally:
            os.close(fd)
    return time.perf_counter() - t0 if told else 0.0
