"""Database search on the current GPU: :class:`GpuSearcher` and :func:`search`.

Design (after CUDASW++ 4.0's inter-sequence scheme, written from scratch):

* The database is uploaded once per :class:`GpuSearcher`; its letters are
  re-coded on the GPU to a compact alphabet whose code 0 is a padding letter.
  Subjects are sorted by length and cut into **length partitions**
  (:mod:`.planner`); each partition is served by a kernel
  (``templates/score_kernel.py.in``) whose thread group (G lanes) covers G*R
  subject positions, R per lane, held in registers; longer subjects take
  several passes over the query.  Partitions run on several streams, longest
  warp task first.
* Fast mode ("s16", Hopper): two subjects per group, packed as the two signed
  16-bit halves of each register; the substitution scores of a query letter
  against a *pair* of subject letters come from one 32-bit shared-memory word
  of a D^3 table (D = compact alphabet size).  A pair whose best score reaches
  32767 - max(matrix) may have overflowed: it is re-scored with the 32-bit
  kernel.  Exact mode ("s32", any GPU, and the re-scoring path): one subject
  per group, int32 cells, D^2 table.
* Half mode ("h16", GPUs without DPX, compute capability 8.0+): the pairs of
  s16 mode in two IEEE binary16 lanes (HADD2/HMNMX2 instead of DPX).  Every
  integer up to 2,048 is exact in binary16 and the arithmetic rounds
  monotonically, so a pair's computed best reaches 2,048 exactly when its true
  best does; those pairs are re-scored with the 32-bit kernel.
* Many queries on Hopper (:mod:`.qp2`): the transpose of s16, two *queries* per
  register and the subjects streamed, where the queries fill its tiles' rows.
* Top hits are chosen on the GPU: a score histogram (block-local, 4096 bins),
  a threshold that keeps at least top_k scores, and a compaction of the scores
  at or above it; only those come back to the host, which breaks ties.
* Databases larger than the device-memory budget are streamed in batches
  (:mod:`.streaming`); per-query top-k of the batches are merged exactly.
* Small subject sets (a re-scan's new and changed sequences, a small
  database) are scored many queries per launch (:mod:`.batched`): a query
  costs a few microseconds there instead of its own launches and top-k round
  trip (about 5 ms).

Everything runs on the calling thread's current CUDA device (see
:func:`.device.bind`).  Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)
the same generated kernels run with shared-memory exchanges in place of warp
shuffles and one group per block (tests exercise the logic on tiny inputs).
"""

from __future__ import annotations

import hashlib
import os
import time

import numpy as np

from ...logs import get_logger
from .. import TopHits
from ..gpu_intrinsics import SIM, hpack2, pack2, used_codes
from . import batched, cache, chains, inflight, planner, qp2
from .codegen import LAUNCH_BOUNDS, MODES, PADQ, PAIRED_MODES, VARIANT, WARP
from .device import (
    bind,
    compute_capability,
    ensure_shared,
    nonblocking_stream,
    packed_mode,
    quiet_low_occupancy_warnings,
)
from .slots import PIPELINE_DEPTH, TEMP_LIMIT_BYTES, QuerySlot
from .streaming import BYTES_PER_SUBJECT, DatabaseBatches, layout_budget

log = get_logger(__name__)

#: Streams the partition kernels of one query are spread over (small partitions
#: then fill the tail of large ones); each query slot has its own set, at most
#: 32 / (queries in flight) each, the hardware queues asked for in device.py.
N_STREAMS = int(os.environ.get("SWGPU_STREAMS", 16))
#: Threads per block on the GPU.
BLOCK = 128
#: Largest score the 16-bit kernels can hold with these costs and scores.
_S16_LIMIT = 8000
#: The same for the binary16 kernels (every integer up to 2,048 is exact).
_H16_LIMIT = 1024
#: A pair whose half-precision best reaches this is re-scored in 32 bits.
H16_OVERFLOW = 2048


def fits16(matrix: np.ndarray, oe: int, ext: int) -> bool:
    """Whether the packed 16-bit kernels can run this scoring scheme (a kernel limit)."""
    return (
        oe + ext <= _S16_LIMIT
        and int(matrix.min()) >= -_S16_LIMIT
        and int(matrix.max()) <= _S16_LIMIT
    )


def fits_h16(matrix: np.ndarray, oe: int, ext: int) -> bool:
    """Whether the binary16 kernels can run this scoring scheme exactly (every score,
    gap cost and padding value an integer of magnitude at most :data:`_H16_LIMIT`)."""
    return (
        oe + ext <= _H16_LIMIT
        and int(matrix.min()) >= -_H16_LIMIT + 1
        and int(matrix.max()) <= _H16_LIMIT
    )


def kernel_mode(matrix: np.ndarray, gap_open: int, gap_extend: int, mode: str = "auto") -> str:
    """The kernels a search with this scheme uses: 's16' (packed 16-bit DPX, sm_90+),
    'h16' (packed binary16, sm_80+, the path for GPUs without DPX) where the scheme fits
    them, else 's32'; ``mode`` 'auto' reads ``$SWGPU_GPU_MODE`` first ('h16' there runs
    the half-precision path on a Hopper GPU too, as a stand-in for one without DPX)."""
    oe, ext = int(gap_open) + int(gap_extend), int(gap_extend)
    fits = {"s16": fits16(matrix, oe, ext), "h16": fits_h16(matrix, oe, ext)}
    if mode == "auto":
        mode = os.environ.get("SWGPU_GPU_MODE", "auto")
    if mode == "auto":
        packed = packed_mode(compute_capability())
        mode = packed if packed and fits[packed] else "s32"  # h16 fits only where s16 does
    if mode not in MODES:
        raise ValueError(f"unknown GPU kernel mode {mode!r} (s16, h16, s32 or auto)")
    if mode in fits and not fits[mode]:
        mode = "s32"
    if mode == "s16" and compute_capability() < (9, 0):
        raise ValueError("s16 (DPX) kernels need a GPU of compute capability 9.0 or newer")
    if mode == "h16" and compute_capability() < (8, 0):
        raise ValueError("h16 (binary16) kernels need a GPU of compute capability 8.0 or newer")
    return mode


class GpuSearcher:
    """A database uploaded to the current GPU, ready to score any number of queries.

    ``matrix``, ``gap_open``, ``gap_extend``: a validated scoring scheme's
    (:meth:`from_scheme` takes the :class:`~swgpu_tools.scoring.ScoringScheme`
    whole); not checked again here.  ``mode``: 's16' (packed 16-bit DPX
    kernels, sm_90+, with 32-bit re-scoring of pairs that may overflow), 'h16'
    (packed binary16 kernels, sm_80+, with 32-bit re-scoring of pairs from
    2,048 up), 's32' (32-bit kernels, any GPU) or 'auto' (:func:`kernel_mode`).
    ``configs``: shape menu override (see :func:`.planner.parse_configs`);
    ``max_resident_bytes``: device-memory budget of the database layout (larger
    databases are streamed).
    ``batch``: score many queries per launch (True), one query at a time
    (False), or decide by the database's size ('auto', :func:`.batched.use_batches`;
    ``$SWGPU_BATCH`` 0/1 overrides it).
    ``qp2``: score many queries two per register (:mod:`.qp2`, s16 mode only): True,
    False, or 'auto' (where its plan fills enough rows; ``$SWGPU_QP2`` 0/1 overrides it).
    """

    def __init__(
        self,
        database,
        matrix,
        gap_open,
        gap_extend,
        mode="auto",
        configs=None,
        block=None,
        max_resident_bytes=None,
        batch="auto",
        qp2="auto",
    ):
        from numba import cuda

        quiet_low_occupancy_warnings()
        matrix = np.ascontiguousarray(matrix, dtype=np.int32)
        self.matrix = matrix
        self.gap_open, self.gap_extend = int(gap_open), int(gap_extend)
        self.oe = self.gap_open + self.gap_extend
        self.mode = mode = kernel_mode(matrix, self.gap_open, self.gap_extend, mode)
        if configs is None:
            configs = os.environ.get("SWGPU_CONFIGS") or None
        self._shapes_override = planner.parse_configs(configs)
        self.lbucket_steps = 3  # query-length buckets per octave for cached plans
        self.batch = batch
        self.block = int(block or os.environ.get("SWGPU_BLOCK", BLOCK))
        self.record = (
            None  # list of (mode, G, R, passes, n_items, cells, residues, s) when profiling
        )
        self.smax = max(int(matrix.max()), 0)
        #: a packed kernel's score at or above this is re-scored with the 32-bit kernel
        # (the low-half bias of the 'lob' variant takes open + extend off the s16 range)
        s16_limit = 32767 - self.smax - (self.oe if VARIANT["LOB"] else 0)
        self.overflow_limit = {"s16": s16_limit, "h16": H16_OVERFLOW}.get(mode, 2**31 - 1)
        self.pad_score = min(int(matrix.min()), 0) - 1

        t_setup = time.perf_counter()
        codes = np.ascontiguousarray(database.codes, dtype=np.uint8)
        offsets = np.ascontiguousarray(database.offsets, dtype=np.int64)
        self.n = len(offsets) - 1
        self.lengths = np.diff(offsets).astype(np.int64)
        if self.n and self.lengths.max() >= 2**31 - 2 * PADQ:
            raise ValueError("subjects must be shorter than 2^31 residues")
        self.total_residues = int(offsets[-1])
        self.order = np.argsort(self.lengths, kind="stable").astype(np.int64)
        self.aux = cache.aux()
        self.setup_times = {}
        t = time.perf_counter()

        # resident (whole database on the GPU) or streamed in batches
        self.n_all = self.n
        self.lengths_all = self.lengths
        self.budget_bytes = layout_budget(max_resident_bytes)
        need = self.total_residues + BYTES_PER_SUBJECT * self.n
        resident = not (self.n and need > self.budget_bytes)
        block = 256 if not SIM else 32
        grid = min(4096, -(-len(codes) // block)) if not SIM else 1
        # compact alphabet: code 0 = padding, then the letters the database uses;
        # found and re-coded on the GPU for a resident database (one compiled host
        # pass when streaming)
        if not len(codes):
            used = np.zeros(256, bool)
        elif resident:
            self.d_codes = cuda.to_device(codes)  # original codes, re-coded below
            self.setup_times["upload_codes"] = time.perf_counter() - t
            d_flags = cuda.to_device(np.zeros(256, np.int32))
            self.aux.used_kernel[grid, block](self.d_codes, len(codes), d_flags)
            used = d_flags.copy_to_host() > 0
        else:
            used = used_codes(codes).astype(bool)
        self.setup_times["alphabet"] = time.perf_counter() - t
        if used[matrix.shape[0] :].any():
            raise ValueError("database codes exceed the matrix size")
        self.cmap = np.full(256, -1, dtype=np.int64)
        self.letters = list(np.flatnonzero(used))  # original codes, compact code = index + 1
        for k, c in enumerate(self.letters):
            self.cmap[c] = k + 1
        lut = np.zeros(256, dtype=np.uint8)
        lut[self.letters] = np.arange(1, len(self.letters) + 1)
        self.lut = lut
        self.batches = None  # the streamed batches: (subjects, residues, count) each
        self._stream = None
        self.sel = None
        if not resident:
            self._stream = DatabaseBatches(
                codes, offsets, self.lengths, self.order, self.budget_bytes, lut
            )
            self.batches = self._stream.batches
        else:
            if len(codes):
                self.aux.remap_kernel[grid, block](self.d_codes, len(codes), cuda.to_device(lut))
            else:
                self.d_codes = cuda.to_device(np.zeros(1, np.uint8))
            self.d_starts = cuda.to_device(offsets[:-1].copy() if self.n else np.zeros(1, np.int64))
            lens32 = self.lengths.astype(np.int32) if self.n else np.zeros(1, np.int32)
            self.d_lens = cuda.to_device(lens32)
        self.setup_times["layout"] = time.perf_counter() - t
        # qp2 (several queries two per register) makes its stream of the database on first
        # use, from these (the caller's arrays, not copies)
        self.qp2 = qp2
        self._qp2 = None
        self._qp2_cstream = None
        self._qp2_src = (codes, offsets) if mode == "s16" and resident and self.n else None
        self._nmax = self.n if self._stream is None else self._stream.max_subjects
        self._slots = []
        self._parts = {}
        self._ahead = planner.PlansAhead()  # plans made on threads (see _plan_ahead)
        self._plan_stream = None
        self._tables = {}
        self.pipeline_depth = PIPELINE_DEPTH
        self.timings = []  # (query index, query length, scan seconds)
        self.units: list = []  # the last search's units: query indices each (chains.py)
        self.scan_seconds = 0.0  # wall clock of the last search's scans
        self.plan_seconds = 0.0
        self.tile_seconds: list = []  # the last qp2 search's GPU seconds a tile (qp2.py)
        if not SIM and self._stream is None:
            cuda.synchronize()
        self.setup_times["total"] = self.setup_seconds = time.perf_counter() - t_setup

    @classmethod
    def from_scheme(cls, database, scheme, **kwargs) -> GpuSearcher:
        """A searcher for a :class:`~swgpu_tools.scoring.ScoringScheme` (taken whole)."""
        return cls(database, scheme.matrix, scheme.gap_open, scheme.gap_extend, **kwargs)

    @property
    def upload_wait_seconds(self) -> float:
        """Seconds the scans waited for streamed batches to arrive (0 if resident)."""
        return 0.0 if self._stream is None else self._stream.upload_wait_seconds

    # -- batches (database larger than the budget) -------------------------
    def _iter_batches(self):
        """Yield None once (resident database) or the index of each batch after
        making it current (see :class:`.streaming.DatabaseBatches`)."""
        if self._stream is None:
            yield None
            return
        for b in self._stream:
            self.sel = b.sel
            self.n = b.n
            self.lengths = self.lengths_all[b.sel]
            self.order = np.argsort(self.lengths, kind="stable").astype(np.int64)
            self.d_codes, self.d_starts, self.d_lens = b.d_codes, b.d_starts, b.d_lens
            self._parts = {}  # plans are per batch
            yield b.index

    def _sync(self):
        """Wait for the scoring streams and the query slots' streams (not for an upload
        in flight)."""
        if SIM:
            return  # the simulator is synchronous
        for slot in self._slots:
            slot.synchronize(scans=True)

    def _slot(self, k: int) -> QuerySlot:
        while len(self._slots) <= k:
            depth = max(1, int(self.pipeline_depth), len(self._slots) + 1)
            self._slots.append(QuerySlot(self._nmax, min(N_STREAMS, max(4, 32 // depth))))
        return self._slots[k]

    @property
    def d_scores(self):
        """Scores of the last query scored by :meth:`score_query` (device array)."""
        return self._slot(0).member(0, self.n)[0]

    # -- partitions --------------------------------------------------------
    def shapes(self, mode, batched=False):
        """(single-pass shapes, multi-pass shapes) used for ``mode`` (``batched``: by the
        several-queries-per-launch kernels)."""
        one, multi = self._shapes_override
        if mode == "s32" and self.mode in PAIRED_MODES:
            one = multi = None  # the re-scoring path keeps its own menu
        if batched and one is None:
            one, multi = planner.BATCH_SHAPES[mode], planner.MULTI_SHAPES[mode]
        return planner.menu(mode, one, multi, sim=SIM)

    def _lrep(self, L):
        """Representative query length of L's plan bucket."""
        return planner.length_bucket(L, self.lbucket_steps)

    def plan(self, mode, L, subset=None, batched=False):
        """Partitions (on the GPU) of every item, or of the subjects ``subset``, for
        query length ~L (cached per length bucket when ``subset`` is None);
        ``batched``: for the batched kernels' shape menu."""
        from numba import cuda

        Lr = self._lrep(L) if subset is None else max(int(L), 1)
        key = (mode, Lr, batched)
        if subset is None and key in self._parts:
            return self._parts[key]
        parts = self._ahead.take(key) if subset is None else None
        if parts is None:
            parts = self._host_plan(mode, Lr, batched, subset)
        # uploaded on a stream of their own: a legacy default-stream copy would wait
        # for the kernels of the queries in flight.  One allocation and one copy per
        # array kind; each partition gets a view (allocations and frees may wait for
        # the GPU)
        if self._plan_stream is None:
            self._plan_stream = 0 if SIM else nonblocking_stream()
        for name in ("items", "wnpass"):
            arrays = [getattr(p, name) for p in parts]
            if not arrays:
                continue
            d_all = cuda.to_device(np.concatenate(arrays), stream=self._plan_stream)
            start = 0
            for p, a in zip(parts, arrays):
                setattr(p, name, d_all[start : start + len(a)])
                start += len(a)
        if not SIM:
            self._plan_stream.synchronize()
        if subset is None:
            self._parts[key] = parts
        return parts

    def _host_plan(self, mode, Lr, batched=False, subset=None, lengths=None, order=None):
        """:func:`.planner.plan` for the plan bucket ``Lr`` (host arrays only: no CUDA
        call, so it may run on another thread, given ``lengths`` and ``order``)."""
        lengths = self.lengths if lengths is None else lengths
        if subset is not None:
            subset = np.asarray(subset, dtype=np.int64)
            order = subset[np.argsort(lengths[subset], kind="stable")]
        elif order is None:
            order = self.order
        one, multi = self.shapes(mode, batched)
        return planner.plan(lengths, order, mode, Lr, one, multi, sim=SIM)

    def _plan_ahead(self, mode, qlens, batched=False) -> None:
        """Start making the plans of ``qlens``' buckets on threads, in the order the
        queries need them, while the GPU scores earlier queries (:meth:`plan` takes
        them).  Not when streamed: each batch plans its own subjects."""
        if self.batches is None:
            keys = dict.fromkeys((mode, self._lrep(int(v)), batched) for v in qlens if v)
            lengths, order = self.lengths, self.order
            self._ahead.start(
                [k for k in keys if k not in self._parts],
                lambda *key: self._host_plan(*key, lengths=lengths, order=order),
            )

    # -- per-search tables ------------------------------------------------
    def _table(self, mode, qletters):
        """Score table on the GPU for the compact alphabet extended by ``qletters``."""
        from numba import cuda

        extra = [c for c in qletters if self.cmap[c] < 0]
        letters = self.letters + sorted(set(extra))
        key = (mode, tuple(letters))
        if key in self._tables:
            return self._tables[key]
        cmap = np.full(256, 0, dtype=np.int64)
        for k, c in enumerate(letters):
            cmap[c] = k + 1
        D = len(letters) + 1
        S = np.full((D, D), self.pad_score, dtype=np.int64)
        idx = np.array(letters, dtype=np.int64)
        if len(idx):
            S[1:, 1:] = self.matrix[np.ix_(idx, idx)]
        if mode == "h16":
            S = S.astype(np.float16).view(np.uint16).astype(np.int64)  # binary16 bits
        if mode in PAIRED_MODES:
            lo = S[:, :, None] & 0xFFFF  # T[q][a][b]: low half = s(q, a)
            hi = (S[:, None, :] & 0xFFFF) << 16  # high half = s(q, b)
            T = (lo | hi).astype(np.uint32).view(np.int32).reshape(-1)
            rowstride = D * D
        else:
            T = S.astype(np.int32).reshape(-1)
            rowstride = D
        entry = (cuda.to_device(np.ascontiguousarray(T)), D, rowstride, cmap)
        self._tables[key] = entry
        return entry

    # -- launching ---------------------------------------------------------
    def _launch(
        self, mode, parts, d_qoff, L, table, slot, streams=None, batch=None, chain=None, scores=None
    ):
        """Launch ``parts`` for a query (or chain) of L rows into ``slot``'s scores (or
        ``scores``), on ``streams`` (default: the slot's scan streams); returns the streams
        used.

        ``chain``: (member starts on the GPU, members) of a chain (:mod:`.chains`), member
        j scored into the slot's scores from ``j * self.n``; None: one query.
        ``batch``: (qbase, qlens, n_q, scores) for the batched kernels: ``n_q``
        queries whose row-offset blocks start at ``d_qoff[qbase[q]]``, of lengths
        ``qlens`` (at most L), scored into ``scores[q * self.n + subject]``."""
        from numba import cuda

        d_tbl, D, _, _ = table
        if mode in PAIRED_MODES:
            p2 = pack2 if mode == "s16" else hpack2
            noe, nxt, neg = (
                p2(-self.oe, -self.oe),
                p2(-self.gap_extend, -self.gap_extend),
                p2(-self.oe, -self.oe),
            )
        else:
            noe, nxt, neg = -self.oe, -self.gap_extend, -self.oe
        tbl_n = int(d_tbl.shape[0])
        shmem = tbl_n * 4
        if streams is None:
            streams = slot.scan_streams
        d_scores = slot.d_scores_all if scores is None else scores  # member j at j * self.n
        nq = 1
        if batch is not None:
            d_qbase, d_qlens, nq, d_scores = batch
        elif chain is None:
            chain = (self._one_member(), 1)
        # launch geometry and temp slices (multi-pass partitions may run concurrently)
        geo = []
        n_multi = sum(1 for p in parts if p.max_passes > 1)
        temp_words = 0
        for part in parts:
            wsz = part.G if SIM else WARP
            block = part.G if SIM else max(self.block, WARP)
            bounds = LAUNCH_BOUNDS.get((mode, part.max_passes > 1))
            if bounds and not SIM:
                block = min(block, bounds[0])
            grid = -(-(part.n_wtasks * nq * wsz) // block)
            words = 0
            if part.max_passes > 1:
                groups_limit = max(1, TEMP_LIMIT_BYTES // (8 * max(L, 1) * n_multi))
                grid = max(1, min(grid, groups_limit * part.G // block))
                words = grid * (block // part.G) * 2 * L
            geo.append((block, grid, temp_words, words))
            temp_words += words
        temp_all = slot.temp(max(temp_words, 1))
        serial = SIM or self.record is not None  # one stream: the default one
        used = [0] if serial else list(streams[: len(parts)])
        for k, (part, (block, grid, off, words)) in enumerate(zip(parts, geo)):
            kern = cache.get_kernel(mode, part.G, part.R, part.max_passes > 1, batch is not None)
            temp = temp_all[off : off + words] if words else temp_all
            stream = 0 if serial else streams[k % len(streams)]
            if not SIM:
                ensure_shared(kern, shmem)
            if self.record is not None:
                ev0, ev1 = cuda.event(), cuda.event()
                ev0.record()
            args = (
                self.d_codes,
                self.d_starts,
                self.d_lens,
                part.items,
                part.n_items,
                part.wnpass,
                part.n_wtasks,
                d_qoff,
                L,
                d_tbl,
                tbl_n,
                D,
                noe,
                nxt,
                neg,
                d_scores,
                temp,
            )
            if batch is not None:
                args += (d_qbase, d_qlens, nq, self.n)
            else:
                args += (chain[0], chain[1], self.n)
            kern[grid, block, stream, shmem](*args)
            if self.record is not None:
                ev1.record()
                ev1.synchronize()
                self.record.append(
                    (
                        mode,
                        part.G,
                        part.R,
                        part.max_passes,
                        part.n_items,
                        part.cells,
                        part.residues,
                        cuda.event_elapsed_time(ev0, ev1) / 1e3,
                    )
                )
        return used

    def _qoffs_all(self, qcodes, qoffs, table):
        """Row-offset arrays of all queries, concatenated on the GPU (one upload)."""
        from numba import cuda

        _, _, rowstride, cmap = table
        lens = np.diff(qoffs)
        sizes = np.where(lens > 0, lens + 2 * PADQ, 0)
        starts = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        allq = np.zeros(max(int(starts[-1]), 1), dtype=np.int32)
        for qi in range(len(lens)):
            if lens[qi]:
                o = starts[qi] + PADQ
                allq[o : o + lens[qi]] = cmap[qcodes[qoffs[qi] : qoffs[qi + 1]]] * rowstride * 4
        return cuda.to_device(allq), starts

    def _qoff(self, q, table, stream=0):
        from numba import cuda

        _, _, rowstride, cmap = table
        L = len(q)
        qo = np.zeros(L + 2 * PADQ, dtype=np.int32)
        qo[PADQ : PADQ + L] = cmap[q] * rowstride * 4  # byte offsets into the table
        return cuda.to_device(qo, stream=stream)

    def _qp2_cuda_stream(self):
        """The stream of the qp2 launches (one: each tile reads the last's boundary)."""
        if self._qp2_cstream is None:
            self._qp2_cstream = nonblocking_stream()
        return self._qp2_cstream

    def _fill(self, arr, n, value, stream=0):
        block = 256 if not SIM else 32
        grid = 1 if SIM else max(1, -(-n // block))  # the kernel strides over the grid
        self.aux.fill_kernel[grid, block, stream](arr, n, value)

    def _one_member(self):
        """Member starts of a one-query launch (never read: one member has no window)."""
        from numba import cuda

        if getattr(self, "_d_one_member", None) is None:
            self._d_one_member = cuda.to_device(np.zeros(2, np.int32))
        return self._d_one_member

    def _units(self, qcodes, qoffs, tables):
        """(units, their layout on the GPU): one query, or a chain of short ones scored
        by one set of launches (:mod:`.chains`)."""
        _, _, rowstride, cmap = tables[self.mode]
        min_rows = self.min_member_rows()
        units = chains.units(np.diff(qoffs), self._nmax, min_rows)
        return units, chains.layout(qcodes, qoffs, units, cmap, rowstride, min_rows)

    @staticmethod
    def _unit(lay, u, qcodes, qoffs):
        """(rows, member codes) of unit ``u`` for :func:`.inflight.start`."""
        d_q, T, d_ms = lay.rows(u)
        members = lay.members[u].tolist()
        qs = [qcodes[qoffs[qi] : qoffs[qi + 1]] for qi in members]
        return (d_q if T else None, T, d_ms if len(members) > 1 else None), qs

    def min_member_rows(self) -> int:
        """Rows a chain member takes at least (:mod:`.chains`): the widest group of the
        shape menu, even."""
        one, multi = self.shapes(self.mode)
        g = max([G for G, _ in (*one, *multi)] or [2])
        return g + (g & 1)

    # -- one query at a time (tests, all_scores) ------------------------------
    def score_query(self, q, tables, d_qoff=None):
        """Score one query (original codes) against every subject into :attr:`d_scores`
        and wait for it.

        Also keeps the score histogram for :meth:`top_k`.  Returns the number of
        subjects re-scored with 32-bit kernels.
        """
        slot = self._slot(0)
        inflight.start(self, (d_qoff, len(q), None), [q], tables, slot)
        novf = inflight.rescore(self, slot, tables)
        slot.synchronize()
        return novf

    def top_k(self, top_k):
        """(subject indices, scores) of the best ``top_k`` of the last :meth:`score_query`."""
        return inflight.select(self, self._slot(0), top_k)[0]

    def _query_tables(self, qcodes):
        qletters = sorted(set(np.flatnonzero(np.bincount(qcodes, minlength=256) > 0).tolist()))
        if qletters and max(qletters) >= self.matrix.shape[0]:
            raise ValueError("query codes exceed the matrix size")
        return {"letters": qletters, self.mode: self._table(self.mode, qletters)}

    def path(self, qlens) -> str:
        """How :meth:`search` scores queries of these lengths: 'batched' (many queries a
        launch, :mod:`.batched`), 'qp2' (:mod:`.qp2`) or 'units' (one unit at a time)."""
        if batched.use_batches(self, qlens):
            return "batched"
        return "qp2" if qp2.wanted(self, qlens) else "units"

    def search(self, queries, top_k, progress=None, segments=None) -> TopHits:
        """Top ``top_k`` hits of each query (:class:`~swgpu_tools.kernels.TopHits`);
        ``segments`` (the batched path only): the top ``top_k`` of each run of
        subjects (see :class:`~swgpu_tools.kernels.SearchBackend`)."""
        nq = len(queries)
        qcodes = np.ascontiguousarray(queries.codes, dtype=np.uint8)
        qoffs = np.ascontiguousarray(queries.offsets, dtype=np.int64)
        qlens = np.diff(qoffs)
        self.tile_seconds, self.batch_seconds = [], {}  # (the batched path sets those)
        path = self.path(qlens)
        if path == "batched":
            return batched.search(self, qcodes, qoffs, top_k, progress, segments)
        if segments is not None:
            raise ValueError("a search by segments needs the batched path")
        if path == "qp2":
            return qp2.search(self, qcodes, qoffs, top_k, progress)
        tables = self._query_tables(qcodes)
        units, lay = self._units(qcodes, qoffs, tables)
        self.units = units  # the last search's units (query indices each)
        self._compile_ahead(lay.lengths)
        self._plan_ahead(self.mode, lay.lengths)
        self.plan_seconds = 0.0
        tq = np.zeros(nq)
        hits_i = [[] for _ in range(nq)]
        hits_s = [[] for _ in range(nq)]
        nb = 1 if self.batches is None else len(self.batches)
        depth = max(1, int(self.pipeline_depth)) if self.record is None else 1
        slots = [self._slot(k) for k in range(depth)]
        t_scan = time.perf_counter()
        for j in self._iter_batches():
            pending = []  # (unit, slot) in flight, oldest first
            t_last = time.perf_counter()
            done = 0

            def finish():  # called within this batch's iteration: its j and pending
                nonlocal t_last, done
                u, slot = pending.pop(0)  # noqa: B023
                inflight.rescore(self, slot, tables)
                got = inflight.select(self, slot, top_k)
                now = time.perf_counter()
                members = units[u]
                w = np.maximum(qlens[members], 1).astype(np.float64)
                tq[members] += (now - t_last) * w / w.sum()  # since the previous unit's hits
                t_last = now
                for qi, (idx, sc) in zip(members.tolist(), got):
                    if j is not None:  # noqa: B023
                        idx = self.sel[idx]
                    hits_i[qi].append(idx)
                    hits_s[qi].append(sc)
                done += len(members)
                if progress is not None and (j is None or j == nb - 1):  # noqa: B023
                    progress(done, nq)

            for u in range(len(units)):
                t0 = time.perf_counter()
                if lay.lengths[u]:
                    self.plan(self.mode, int(lay.lengths[u]))  # cached per length bucket
                self.plan_seconds += time.perf_counter() - t0
                if len(pending) == depth:
                    finish()  # frees the oldest slot
                inflight.start(self, *self._unit(lay, u, qcodes, qoffs), tables, slots[u % depth])
                pending.append((u, slots[u % depth]))
            while pending:
                finish()
            self._sync()  # this batch's work is done before the next batch's upload
        self.scan_seconds = time.perf_counter() - t_scan
        self.timings = [(qi, int(qlens[qi]), float(tq[qi])) for qi in range(nq)]
        merged = []
        for qi in range(nq):
            idx = np.concatenate(hits_i[qi]).astype(np.int64)
            sc = np.concatenate(hits_s[qi]).astype(np.int32)
            if len(hits_i[qi]) > 1:  # exact merge of the batches' top-k
                order = np.lexsort((idx, -sc.astype(np.int64)))[: min(int(top_k), self.n_all)]
                idx, sc = idx[order], sc[order]
            merged.append((idx, sc))
        return TopHits.from_per_query(merged)

    def _compile_ahead(self, qlens, batched=False):
        """First use on this machine (kernels missing from the disk cache): compile the
        kernels these queries' plans need in parallel child processes, before the
        first query (which would otherwise compile them one by one)."""
        if SIM or os.environ.get("SWGPU_COMPILE_AHEAD", "1") == "0":
            return
        one, multi = self.shapes(self.mode, batched)
        menu = [(self.mode, G, R, False, batched) for G, R in one] + [
            (self.mode, G, R, True, batched) for G, R in multi
        ]
        if all(os.path.exists(cache.compiled_marker(*t)) for t in menu):
            return  # warm: nothing to do (the usual case)
        if self.batches is None:
            needed = set()
            for L in sorted({self._lrep(int(v)) for v in qlens if v}):
                needed.update(
                    (self.mode, p.G, p.R, p.max_passes > 1, batched)
                    for p in self.plan(self.mode, L, batched=batched)
                )
        else:
            needed = set(menu)
        cache.compile_ahead(needed)

    def all_scores(self, queries) -> np.ndarray:
        """Full (n_queries x n_subjects) int32 score array (for tests and checks), the
        queries scored in the units :meth:`search` uses (short ones chained)."""
        qcodes = np.ascontiguousarray(queries.codes, dtype=np.uint8)
        qoffs = np.ascontiguousarray(queries.offsets, dtype=np.int64)
        if qp2.wanted(self, np.diff(qoffs)):
            return qp2.all_scores(self, qcodes, qoffs)
        tables = self._query_tables(qcodes)
        units, lay = self._units(qcodes, qoffs, tables)
        out = np.zeros((len(queries), self.n_all), dtype=np.int32)
        slot = self._slot(0)
        for j in self._iter_batches():
            for u, members in enumerate(units):
                inflight.start(self, *self._unit(lay, u, qcodes, qoffs), tables, slot)
                inflight.rescore(self, slot, tables)
                slot.synchronize()
                for r, qi in enumerate(members.tolist()):
                    if self.n:
                        sc = slot.member(r, self.n)[0].copy_to_host()
                        if j is None:
                            out[qi] = sc
                        else:
                            out[qi, self.sel] = sc
        return out


_searchers: dict = {}


def search(
    queries,
    database,
    matrix,
    gap_open,
    gap_extend,
    top_k,
    progress=None,
    device=None,
    mode="auto",
    max_resident_bytes=None,
) -> TopHits:
    """Top ``top_k`` exact SW hits of each query in ``database`` (see :mod:`swgpu_tools.kernels`).

    The older module-level form (:class:`.backend.GpuBackend` is the contract's
    form).  ``device``: bound on the calling thread first (:func:`.device.bind`;
    nothing happens when this thread has it bound already).  The database is
    uploaded once per call (or reused when the same database object and
    scoring scheme are searched again in this process).
    """
    if device is not None:
        bind(device)
    key = (
        id(database),
        id(database.codes),
        int(gap_open),
        int(gap_extend),
        hashlib.sha1(np.ascontiguousarray(matrix, dtype=np.int32).tobytes()).hexdigest(),
        device,
        mode,
        max_resident_bytes,
        os.environ.get("SWGPU_GPU_MEMORY_BYTES"),
    )
    s = _searchers.get(key)
    if s is None:
        _searchers.clear()  # keep one database on the GPU at a time
        s = GpuSearcher(
            database, matrix, gap_open, gap_extend, mode=mode, max_resident_bytes=max_resident_bytes
        )
        s._database_ref = database  # keeps id(database) unique while cached
        _searchers[key] = s
    t0 = time.perf_counter()
    hits = s.search(queries, top_k, progress=progress)
    if os.environ.get("SWGPU_GPU_TIMINGS"):
        st = " ".join(f"{k} {v:.3f}" for k, v in s.setup_times.items())
        log.info(
            f"GPU set-up {s.setup_seconds:.3f} s ({st}; "
            f"{1 if s.batches is None else len(s.batches)} batch(es)), plans "
            f"{s.plan_seconds:.3f} s, search {time.perf_counter() - t0:.3f} s, scans "
            f"{sum(t[2] for t in s.timings):.3f} s"
        )
    return hits
