"""Device buffers of one unit of queries in flight (a searcher keeps one per pipeline stage).

A unit is one query, or a chain of several (:mod:`.chains`) scored by one set of
launches.  A :class:`QuerySlot` holds, for each member of the unit, what the scan
writes and what its top-k selection reads: the scores of every subject, the list of
subjects whose 16-bit score may have overflowed, the score histogram (device and
pinned host copy) and the selected candidates; and, for the unit, the multi-pass temp
array and the slot's own stream on which the histograms, the selections, their
copies and any 32-bit re-scoring run.  The scan's partition kernels run on the
slot's own scan streams (so a unit's long kernels never queue the next unit's behind
them); :meth:`after` makes the slot's stream wait for them (events), so the next
unit's kernels can be launched before this one is finished.
"""

from __future__ import annotations

import os

import numpy as np

from ..gpu_intrinsics import SIM
from .codegen import HIST_BINS

#: Queries in flight in :meth:`.searcher.GpuSearcher.search`: the next queries'
#: kernels are launched before the oldest one's top hits are back (1: one at a
#: time).  Measured on an H100 (RESULTS-gpu.md, run 14): bench200M 4,140 -> 4,190
#: GCUPS, a 50 M-residue shard 3,850 -> 4,121 GCUPS with 3 instead of 1.
PIPELINE_DEPTH = max(1, int(os.environ.get("SWGPU_PIPELINE", 3)))
#: Largest temp array (bytes) of one query's multi-pass launches; a launch that
#: would need more is given fewer blocks (each then loops over several warp tasks).
TEMP_LIMIT_BYTES = 1 << 30  # also keeps temp indices below 2^31


class QuerySlot:
    """Buffers of one query in flight on the current device, for up to ``nmax`` subjects,
    with ``n_streams`` scan streams."""

    def __init__(self, nmax: int, n_streams: int = 16):
        from numba import cuda

        self.nmax = max(nmax, 1)
        self.capacity = 0  # members the buffers hold
        self.reserve(1)
        self.sel_cap = 0
        self.d_sel = self.h_sel = None
        self._temp = None
        self.stream = 0 if SIM else cuda.stream()
        self.scan_streams = [0] if SIM else [cuda.stream() for _ in range(n_streams)]
        self._events: dict = {}
        #: per member of the unit in flight: (codes, length); and its score histogram
        #: (host), None before it is back
        self.queries: list = []
        self.hists: list = []

    def reserve(self, members: int) -> None:
        """Buffers for at least ``members`` members (scores, overflow lists, histograms)."""
        from numba import cuda

        if members <= self.capacity:
            return
        self.d_scores_all = self.d_ovf_all = None  # free the smaller ones first
        self.d_scores_all = cuda.device_array(members * self.nmax, dtype=np.int32)
        self.d_ovf_all = cuda.device_array(members * self.nmax, dtype=np.int32)
        words = members * (HIST_BINS + 1)
        self.d_aux = cuda.device_array(words, dtype=np.int32)
        self.h_aux = (
            cuda.pinned_array(words, dtype=np.int32) if not SIM else np.zeros(words, np.int32)
        )
        self.capacity = members

    def member(self, j: int, n: int):
        """(scores, overflow, histogram) device arrays of member ``j`` for ``n`` subjects
        (member j's scores start at ``j * n``)."""
        h = HIST_BINS + 1
        return (
            self.d_scores_all[j * n : (j + 1) * n],
            self.d_ovf_all[j * n : (j + 1) * n],
            self.d_aux[j * h : (j + 1) * h],
        )

    def temp(self, nwords: int):
        """The multi-pass temp array, at least ``nwords`` int32 long."""
        from numba import cuda

        if self._temp is None or self._temp.shape[0] < nwords:
            self._temp = None  # free the smaller one first
            self._temp = cuda.device_array(max(nwords, 1), dtype=np.int32)
        return self._temp

    def sel_buffers(self, cap: int, members: int = 1):
        """(device, pinned host) candidate buffers of at least ``members`` regions of
        1 + 2 * cap entries each (``sel_cap`` then says the regions' cap)."""
        from numba import cuda

        if cap > self.sel_cap or members * (1 + 2 * self.sel_cap) > len(self.h_sel):
            if cap > self.sel_cap:
                self.sel_cap = max(cap, 2 * self.sel_cap)  # grown by doubling, as before
            size = members * (1 + 2 * self.sel_cap)
            if self.h_sel is not None:
                size = max(size, len(self.h_sel))
            self.d_sel = None
            self.d_sel = cuda.device_array(size, dtype=np.int32)
            self.h_sel = (
                cuda.pinned_array(size, dtype=np.int32) if not SIM else np.zeros(size, np.int32)
            )
        return self.d_sel, self.h_sel

    def after(self, streams) -> None:
        """Work queued on this slot's stream from now on waits for the work queued so
        far on ``streams`` (the scan's partition kernels)."""
        if SIM:
            return
        from numba import cuda

        for st in streams:
            if st is self.stream:
                continue
            key = id(st)
            ev = self._events.get(key)
            if ev is None:
                ev = self._events[key] = (cuda.event(timing=False), st)
            ev[0].record(st)
            ev[0].wait(self.stream)

    def synchronize(self, scans: bool = False) -> None:
        """Wait for everything queued on this slot's stream (and its scan streams)."""
        if SIM:
            return
        for st in self.scan_streams if scans else ():
            st.synchronize()
        self.stream.synchronize()
