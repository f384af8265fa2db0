"""The thread pool that runs the CPU kernels' chunks (Numba functions that release the GIL).

One process-wide pool of Python threads, grown to the largest number of
threads asked for; each call of :func:`run_chunks` uses at most ``nthreads``
of them, which take the chunks in order as they come free (so the first,
heaviest chunks start first and the rest balance).  A thread pool rather than
Numba's ``prange``: each parallel Numba function costs seconds of
compilation, and the result is the same.
"""

from __future__ import annotations

import mmap
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

import numpy as np

_pool: list = []  # [ThreadPoolExecutor, its size]
_pool_lock = threading.Lock()


def _executor(n: int) -> ThreadPoolExecutor:
    with _pool_lock:
        if not _pool or _pool[1] < n:
            if _pool:
                _pool[0].shutdown(wait=False)
            _pool[:] = [ThreadPoolExecutor(max_workers=n, thread_name_prefix="swgpu"), n]
        return _pool[0]


def run_chunks(fn, nchunks, nthreads, *args, poll=None, every=2.0, scratch=None):
    """Run fn(c, nchunks, *args) for every chunk c in 0..nchunks-1 on ``nthreads`` threads.

    The chunk functions are Numba-compiled with ``nogil=True``, so the threads
    run in parallel; each chunk takes every nchunks-th work item (or the items
    the caller dealt to it).  Exceptions propagate.  ``poll``: a callable the
    calling thread runs every ``every`` seconds while the chunks run (progress
    reports; the chunks then always run on the pool's threads).  ``scratch``:
    a callable made once per thread of this call, whose result is passed to
    that thread's chunks as a last argument (working memory they reuse:
    :func:`private_buffer`).
    """
    if nchunks <= 0:
        return
    nthreads = min(max(1, int(nthreads)), nchunks)

    def own() -> tuple:  # the arguments after ``args``: a thread's scratch, if any
        return () if scratch is None else (scratch(),)

    if nthreads == 1 and poll is None:
        tail = own()
        for c in range(nchunks):
            fn(c, nchunks, *args, *tail)
        return
    chunks = iter(range(nchunks))
    lock = threading.Lock()

    def worker():
        tail = None  # made at this thread's first chunk
        while True:
            with lock:
                c = next(chunks, None)
            if c is None:
                return
            if tail is None:
                tail = own()
            fn(c, nchunks, *args, *tail)

    futures = [_executor(nthreads).submit(worker) for _ in range(nthreads)]
    if poll is not None:
        while wait(futures, timeout=every, return_when=FIRST_EXCEPTION).not_done:
            if any(f.done() and f.exception() is not None for f in futures):
                break
            poll()
    for f in futures:
        f.result()


def private_buffer(nbytes: int, dtype=np.int32) -> np.ndarray:
    """A buffer of ``nbytes`` in new private anonymous memory (pages zeroed on first
    touch; only those touched cost memory).

    Not malloc's: in a process forked from a warm one (a workflow job), or one that
    has forked helpers since (the pictures and changes beside the traceback), the
    memory malloc hands out again is shared with them, and every first write to a
    page copies it (on 2 cores, alignments that take 0.74 s took 1.10 s after a
    fork).  A new mapping is this process's alone."""
    dtype = np.dtype(dtype)
    n = max(1, int(nbytes) // dtype.itemsize)
    try:
        mapping = mmap.mmap(-1, n * dtype.itemsize, flags=mmap.MAP_PRIVATE)
    except (AttributeError, TypeError, OSError):  # no MAP_PRIVATE here (Windows): malloc's
        return np.zeros(n, dtype=dtype)
    return np.frombuffer(mapping, dtype=dtype)
