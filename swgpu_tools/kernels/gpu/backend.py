"""The GPU backend object of the contract in :mod:`swgpu_tools.kernels`, and its start-up.

:class:`GpuBackend` implements :class:`~swgpu_tools.kernels.SearchBackend` and
:class:`~swgpu_tools.kernels.PairBackend`: it takes the frozen, validated
:class:`~swgpu_tools.scoring.ScoringScheme` whole and does not check it again.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import numpy as np

from ...logs import get_logger
from .. import Progress, TopHits, by_segment
from ..gpu_intrinsics import SIM
from . import batched, cache, pairs
from .codegen import QP2_R, QP2_U
from .device import bind
from .searcher import GpuSearcher

log = get_logger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from ...scoring import ScoringScheme
    from ...sequences import EncodedSequences


def warm_up(scheme: ScoringScheme | None = None, stop=None) -> dict:
    """Open the current device's CUDA context and load the top-k helper kernels;
    with ``scheme``, also the scoring kernels a search with it may use, where they
    are in the disk cache already (loading one costs tens of milliseconds; a
    missing one is left to the search, which compiles them in parallel).

    Returns seconds per step.  :class:`swgpu_tools.backend.BackendStart` runs
    this on a thread while the inputs are read, so that the driver's start-up
    (the larger part of a warm start) overlaps the reading.
    """
    from numba import cuda

    times = {}
    t = time.perf_counter()
    if not SIM:
        cuda.current_context()
    times["cuda context"] = time.perf_counter() - t
    t = time.perf_counter()
    aux = cache.aux()
    if not SIM:
        for disp in (
            aux.used_kernel,
            aux.remap_kernel,
            aux.hist_kernel,
            aux.select_kernel,
            aux.fill_kernel,
            aux.segment_topk_kernel,
        ):
            for kern in disp.overloads.values():
                kern.bind()  # module loaded into this context now, not at the first launch
    times["helper kernels"] = time.perf_counter() - t
    times.update(load_scoring_kernels(scheme, stop=stop))
    return times


def load_scoring_kernels(scheme: ScoringScheme | None, stop=None) -> dict:
    """:func:`preload_kernels` of ``scheme`` (single-query kernels) where preloading is
    on; returns its seconds as ``{"scoring kernels": s}`` (nothing without a scheme)."""
    if scheme is None or SIM or os.environ.get("SWGPU_PRELOAD", "1") == "0":
        return {}
    t = time.perf_counter()
    n = preload_kernels(scheme, stop=stop)
    log.debug(f"{n} scoring kernels loaded from the cache")
    return {"scoring kernels": time.perf_counter() - t}


def preload_kernels(scheme: ScoringScheme, batched: bool = False, stop=None) -> int:
    """Load (from the disk cache) the scoring kernels of the shape menu that a search
    with ``scheme`` may use into the current context; returns how many.
    ``batched``: their several-queries-per-launch variants (:mod:`.batched`: a
    re-scan's delta) instead.  ``stop``: a :class:`threading.Event`; once set, no
    more are loaded (a job that takes a start made ahead and needs others)."""
    from .planner import menu, parse_configs
    from .searcher import kernel_mode

    mode = kernel_mode(scheme.matrix, scheme.gap_open, scheme.gap_extend)
    one, multi = menu(mode, *parse_configs(os.environ.get("SWGPU_CONFIGS") or None))
    n = 0
    for shapes, multipass in ((one, False), (multi, True)):
        for G, R in shapes:
            if stop is not None and stop.is_set():
                return n
            if not os.path.exists(cache.compiled_marker(mode, G, R, multipass, batched)):
                continue
            kern = cache.get_kernel(mode, G, R, multipass, batched)
            for k in kern.overloads.values():
                k.bind()
            n += 1
    # the kernel of qp2 a tile a block (qp2_blocks.py), which a delta's search takes with
    # many queries: else loaded at its first launch, as the standby's search of run 276
    # did (0.81-0.88 s, of which the kernel ~0.6 s)
    stopped = stop is not None and stop.is_set()
    if batched and mode == "s16" and not stopped:
        if os.path.exists(cache.qp2_marker(QP2_R, QP2_U, True)):
            for k in cache.get_qp2_kernel(QP2_R, QP2_U, blocks=True).overloads.values():
                k.bind()
            n += 1
    return n


class GpuBackend:
    """Database search and pair score passes on one CUDA GPU.

    ``device``: the GPU (as numbered in this process) the calls run on; it is
    made current on the calling thread (:func:`.device.bind`, which does
    nothing when that thread has it already).  None: the calling thread's
    current device.  ``mode``: 's16', 'h16', 's32' or 'auto' (see
    :class:`.searcher.GpuSearcher`); ``max_resident_bytes``: the device-memory
    budget of a database (larger ones are streamed).

    The last searched database stays on the GPU, so searching it again (the
    same object, the same scheme) skips the upload.
    """

    name = "gpu"

    def __init__(
        self, device: int | None = None, mode: str = "auto", max_resident_bytes: int | None = None
    ):
        self.device = device
        self.mode = mode
        self.max_resident_bytes = max_resident_bytes
        self._searcher: GpuSearcher | None = None
        self._key: tuple | None = None
        #: seconds of the last :meth:`search`: the database's upload and layout (0 when
        #: the kept one was used), the plans, and the scans (for the step statistics)
        self.last_times: dict[str, float] = {}
        self._setup_s = 0.0
        self._setup_parts: dict[str, float] = {}

    def _bind(self) -> None:
        if self.device is not None:
            bind(self.device)

    def searcher(self, database: EncodedSequences, scheme: ScoringScheme) -> GpuSearcher:
        """The searcher of ``database`` (uploaded now, or the one kept from the last call)."""
        self._bind()
        key = (id(database), id(database.codes), scheme.digest)
        if self._searcher is None or self._key != key:
            self._searcher = None  # free the previous database first
            self._searcher = GpuSearcher.from_scheme(
                database, scheme, mode=self.mode, max_resident_bytes=self.max_resident_bytes
            )
            self._searcher._database_ref = database  # keeps id(database) unique while kept
            self._key = key
            self._setup_s += self._searcher.setup_seconds
            # its parts (times since the upload began, each after the one before)
            at = self._searcher.setup_times
            marks = [k for k in ("upload_codes", "alphabet", "layout") if k in at]
            before = 0.0
            for k in marks:
                self._setup_parts[k] = self._setup_parts.get(k, 0.0) + at[k] - before
                before = at[k]
        return self._searcher

    def search(
        self,
        queries: EncodedSequences,
        database: EncodedSequences,
        scheme: ScoringScheme,
        top_k: int,
        progress: Progress | None = None,
        segments: np.ndarray | None = None,
    ) -> TopHits:
        """Top ``top_k`` exact Smith-Waterman hits of each query (see :mod:`swgpu_tools.kernels`);
        ``segments``: in one batched search where the searcher batches, else one
        search per segment."""
        self._setup_s = 0.0
        self._setup_parts = {}
        searcher = self.searcher(database, scheme)
        if segments is None or batched.use_batches(searcher, queries.lengths):
            hits = searcher.search(queries, top_k, progress=progress, segments=segments)
            self._note(searcher.plan_seconds, searcher.scan_seconds)
            # a batched search's parts: waits for the GPU, host work, launches
            for k, v in searcher.batch_seconds.items():
                if k != "blocks":
                    self.last_times[f"batch_{k}"] = v
            return hits
        plan_s, scan_s = [0.0], [0.0]

        def one(q, part, k, pr):
            s = self.searcher(part, scheme)
            out = s.search(q, k, progress=pr)
            plan_s[0] += s.plan_seconds
            scan_s[0] += s.scan_seconds
            return out

        hits = by_segment(one, queries, database, top_k, segments, progress)
        self._note(plan_s[0], scan_s[0])
        return hits

    def _note(self, plan_s: float, scan_s: float) -> None:
        self.last_times = {"setup": self._setup_s, "plan": plan_s, "scan": scan_s}
        self.last_times.update({f"setup_{k}": v for k, v in self._setup_parts.items()})

    def pair_regions(
        self,
        queries: EncodedSequences,
        subjects: EncodedSequences,
        query_index: np.ndarray,
        subject_index: np.ndarray,
        scheme: ScoringScheme,
        mode: str,
    ) -> np.ndarray:
        """(n, 5) int64: best, query start, query end, subject start, subject end per pair."""
        self._bind()
        return pairs.pair_regions(
            queries.codes,
            queries.offsets,
            subjects.codes,
            subjects.offsets,
            query_index,
            subject_index,
            scheme.matrix,
            scheme.gap_open,
            scheme.gap_extend,
            mode,
        )
