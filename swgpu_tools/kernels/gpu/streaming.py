"""Databases larger than the GPU's memory budget: streamed in batches.

The length-sorted subjects are cut into batches of at most half the budget
(residues + :data:`BYTES_PER_SUBJECT` per subject); the subjects of a batch
are kept in database order, so that local index order is global order and the
top-k tie-break inside a batch matches the global one.  Two pinned staging
buffers and two device buffers: batch j+1 is gathered and re-coded to the
compact alphabet on a helper thread (njit, nogil) and copied on a
non-blocking stream while batch j is scanned.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..gpu_intrinsics import SIM, gather_remap
from .chains import MEMBER_WORDS
from .device import free_memory, nonblocking_stream
from .slots import PIPELINE_DEPTH, TEMP_LIMIT_BYTES

#: Device bytes per subject besides its residues: start (8), length (4), score (4),
#: overflow slot (4) and the plan partitions' item lists (4 per cached query-length
#: bucket, ~12 buckets).
BYTES_PER_SUBJECT = 72
#: Device memory kept free for everything else (the multi-pass temp arrays of the
#: units in flight, the score rows of their chains' members beyond the first, tables,
#: Numba's and the driver's own needs) when the layout budget comes from the free memory.
GPU_RESERVE_BYTES = PIPELINE_DEPTH * (TEMP_LIMIT_BYTES + 8 * MEMBER_WORDS) + (768 << 20)


def layout_budget(override=None) -> int:
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
    free = free_memory()
    if free is None:
        return 1 << 62
    return max(free - GPU_RESERVE_BYTES, 64 << 20)


@dataclass
class Batch:
    """One batch made current: its subjects (global indices, ascending) and device arrays."""

    index: int
    sel: np.ndarray
    n: int
    d_codes: object
    d_starts: object
    d_lens: object


class DatabaseBatches:
    """The batches of a database and their double-buffered upload."""

    def __init__(
        self,
        codes: np.ndarray,
        offsets: np.ndarray,
        lengths: np.ndarray,
        order: np.ndarray,
        budget_bytes: int,
        lut: np.ndarray,
    ):
        from numba import cuda

        n = len(lengths)
        cap = max(budget_bytes // 2, 1)
        w = lengths[order] + BYTES_PER_SUBJECT
        cum = np.cumsum(w)
        bounds = [0]
        while bounds[-1] < n:
            a = bounds[-1]
            base = int(cum[a - 1]) if a else 0
            b = int(np.searchsorted(cum, base + cap, side="right"))
            bounds.append(max(b, a + 1))
        # each batch: its subjects in ascending database order (so that the
        # local index order is the global one: ties break the same way)
        self.batches = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            sel = np.sort(order[a:b])
            self.batches.append((sel, int(lengths[sel].sum()), len(sel)))
        self._src = (codes, offsets)
        self.lut = lut
        maxres = max(max(b[1] for b in self.batches), 1)
        self.max_subjects = max(b[2] for b in self.batches)
        nbuf = min(2, len(self.batches))
        self._dbuf = [
            (
                cuda.device_array(maxres, np.uint8),
                cuda.device_array(self.max_subjects, np.int64),
                cuda.device_array(self.max_subjects, np.int32),
            )
            for _ in range(nbuf)
        ]
        alloc = np.zeros if SIM else cuda.pinned_array
        self._hbuf = [
            (
                alloc(maxres, dtype=np.uint8),
                alloc(self.max_subjects, dtype=np.int64),
                alloc(self.max_subjects, dtype=np.int32),
            )
            for _ in range(nbuf)
        ]
        self._copy_stream = cuda.stream() if SIM else nonblocking_stream()
        self.upload_wait_seconds = 0.0

    def __len__(self) -> int:
        return len(self.batches)

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

    def _batch(self, j) -> Batch:
        sel, res, nj = self.batches[j]
        d = self._dbuf[j % len(self._dbuf)]
        return Batch(j, sel, nj, d[0][: max(res, 1)], d[1][:nj], d[2][:nj])

    def __iter__(self):
        """Yield each batch once it is on the GPU; batch j+1 is re-coded on a helper
        thread and uploaded on a non-blocking stream while batch j is scanned.
        The caller must finish all GPU work of one batch before taking the next."""
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
                yield self._batch(j)
        finally:
            if th is not None:
                th.join()
