"""The thread pool that runs the alignment chunks (Numba functions that release the GIL)."""
from __future__ import annotations


def run_chunks(fn, nchunks, nthreads, *args):
    """Run fn(c, nchunks, *args) for every chunk c on ``nthreads`` threads.

    The chunk functions are Numba-compiled with ``nogil=True``, so the
    threads run in parallel; each chunk takes every nchunks-th work item.
    (A thread pool rather than Numba's ``prange``: each parallel Numba
    function costs seconds of compilation, and the result is the same.)
    """
    if nchunks <= 0:
        return
    if nthreads <= 1 or nchunks == 1:
        for c in range(nchunks):
            fn(c, nchunks, *args)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(nthreads, nchunks)) as pool:
        for _ in pool.map(lambda c: fn(c, nchunks, *args), range(nchunks)):
            pass
