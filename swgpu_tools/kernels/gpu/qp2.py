"""Two queries per register ("qp2", Hopper DPX): many queries against a resident database.

The transpose of the s16 kernels (``templates/qp2_kernel.py.in``): the queries are held in
registers, 32 lanes x R rows a warp (a *tile*), two query streams packed as the halves of
each register, and the subjects stream past in ranges of whole subjects.  One profile
word is already a packed cell pair's score, so the shared-memory loads that bound s16
(its pair table's bank conflicts) fall away: on an H100, bench200M with the 20 benchmark
queries ran at 5,146 GCUPS against s16's 4,218 (RESULTS-gpu.md, run 193).

* :class:`Stream`: the database as ranges of whole subjects (each subject's first column
  flagged, pad columns around each range), and the tiles' boundary words; built once per
  searcher, on first use.
* :func:`plan`: the queries as two streams of lanes (the halves), each query in whole
  lanes of R rows, longest first into the half with fewer lanes, back to back (each
  half's longest query at its end, where the last tile's empty lanes are), cut into
  tiles of 32 lanes; a query crosses a tile edge where it falls there (the tile's last row
  is handed on through the boundary words) and a tile holds the end of one query and the
  start of the next (the kernel resets that half of the row above on the lane where a
  query starts).
* :func:`launch`: a plan's tiles, one launch each, in order, into score rows that start at
  0 (each tile keeps the max of its rows' best and what is stored).

The searcher (:mod:`.searcher`) picks qp2 for a search when the plan fills enough of its
rows (:data:`MIN_FILL`); the histograms, 32-bit re-scoring of scores that may have
overflowed (:func:`overflow_limit`) and the top-k selection are the s16 path's
(:mod:`.inflight`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from ...logs import get_logger
from .. import TopHits
from ..gpu_intrinsics import SIM, pack2
from .codegen import QP2_BLOCK, QP2_FBIAS, QP2_FLAG, QP2_R, QP2_U

log = get_logger(__name__)

#: Rows a lane (the tile is 32 x R rows) and steps unrolled (:data:`.codegen.QP2_R`).
R_DEFAULT, U_DEFAULT = QP2_R, QP2_U
#: The rows a lane searches use (``$SWGPU_QP2_ROWS``: a multiple of 4; the simulator's
#: tests take 4).
ROWS = int(os.environ.get("SWGPU_QP2_ROWS", R_DEFAULT))
#: Threads a block (the profile, 25 x 1,024 words at R = 32, allows one block an SM).
BLOCK = QP2_BLOCK
#: Subject ranges a warp walks (balance).
RANGES_PER_WARP = 4
#: Pad columns before and after each range in the stream (no bounds checks in the step).
PADS = 40
#: qp2 is used where the plan's rows are at least this full (real / padded): s16 delivers
#: ~4.2 T on bench200M, qp2 ~5.3 T per padded cell, so below ~0.8 qp2 would lose.
MIN_FILL = float(os.environ.get("SWGPU_QP2_MIN_FILL", 0.85))
#: Score-row bytes one group of queries may take (scores and overflow lists, each slot).
GROUP_BYTES = 1 << 29
G = 32


def fits(matrix: np.ndarray, gap_open: int, gap_extend: int) -> bool:
    """Whether qp2 runs this scheme exactly: every value a positive normal binary16 above
    the bias (open + extend <= 16), letters as 5-bit codes with the pad letter."""
    oe = int(gap_open) + int(gap_extend)
    return (
        oe <= 16
        and matrix.shape[0] <= 31
        and int(matrix.max()) <= 1000
        and int(matrix.min()) >= -1000
    )


def overflow_limit(matrix: np.ndarray) -> int:
    """A qp2 score at or above this may have overflowed binary16's finite range (31,743
    biased): it is re-scored with the 32-bit kernel."""
    return 31744 - QP2_FBIAS - max(int(matrix.max()), 0)


@dataclass
class Tile:
    """One launch: the members of each half (query, first lane, lanes, the query's lanes
    in tiles above) and whether that half's lane 0 starts a query below another tile."""

    low: list
    high: list
    fresh: tuple


def plan(lengths, R: int = R_DEFAULT) -> list[Tile]:
    """The tiles of queries of ``lengths`` (queries of length 0 take no lane)."""
    chosen: list[list] = [[], []]
    used = [0, 0]
    for q in sorted(range(len(lengths)), key=lambda q: (-int(lengths[q]), q)):
        nl = -(-int(lengths[q]) // R)
        if nl == 0:
            continue
        h = 0 if used[0] <= used[1] else 1
        chosen[h].append((q, nl))
        used[h] += nl
    halves: list[list] = [[], []]
    for h, members in enumerate(chosen):
        # the half's longest query last: the last tile's empty lanes then cost the query
        # they slow least (a short query there would pay them all)
        p0 = 0
        for q, nl in members[1:] + members[:1]:
            halves[h].append((q, p0, nl))
            p0 += nl
    tiles = []
    first = [0, 0]  # per half: its first member that may reach into the tile
    for k in range(-(-max(used) // G)):
        lo, hi = k * G, (k + 1) * G
        ms, fresh = [], []
        for h, half in enumerate(halves):
            # members are in lane order: one that ends by this tile stays behind
            while first[h] < len(half) and half[first[h]][1] + half[first[h]][2] <= lo:
                first[h] += 1
            m = []
            for q, p0, nl in half[first[h] :]:
                if p0 >= hi:
                    break
                m.append((q, max(p0, lo) - lo, min(p0 + nl, hi) - max(p0, lo), max(p0, lo) - p0))
            ms.append(m)
            fresh.append(k > 0 and bool(m) and m[0][3] == 0 and m[0][1] == 0)
        tiles.append(Tile(ms[0], ms[1], tuple(fresh)))
    return tiles


def fill(lengths, tiles: list[Tile], R: int = R_DEFAULT) -> float:
    """Real rows / padded rows of a plan."""
    return float(np.sum(lengths)) / max(1, 2 * G * R * len(tiles))


def shares(lengths, tiles: list[Tile], seconds, R: int = R_DEFAULT) -> np.ndarray:
    """Each query's share of a plan's time: every tile's ``seconds`` split among the
    queries with rows in it by their real rows (a tile's padding is charged to its
    queries).  A query of length 0 gets nothing."""
    out = np.zeros(len(lengths))
    for tile, sec in zip(tiles, seconds):
        got = [
            (q, min(int(lengths[q]), (first + nl) * R) - first * R)
            for q, _, nl, first in tile.low + tile.high
        ]
        real = sum(r for _, r in got)
        for q, r in got:
            out[q] += float(sec) * r / real
    return out


def lane_info(tile: Tile, rows: dict) -> np.ndarray:
    """int32 [3 * 32]: per lane the reset mask of the halves whose query starts on it, and
    the score row its low and high half write (the last lane of a query in the tile; -1:
    none); ``rows``: query -> score row."""
    info = np.zeros(3 * G, np.int64)
    info[G:] = -1
    for members, mask, off, fresh0 in (
        (tile.low, 0xFFFF, G, tile.fresh[0]),
        (tile.high, 0xFFFF0000, 2 * G, tile.fresh[1]),
    ):
        for q, l0, nl, _ in members:
            if l0 > 0 or fresh0:
                info[l0] |= mask
            info[off + l0 + nl - 1] = rows[q]
    return (info & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def profile(tile: Tile, queries: list, matrix: np.ndarray, R: int = R_DEFAULT) -> np.ndarray:
    """int32 [D * 32R] (D = letters + the pad letter): for each subject letter c and row i
    of the tile the packed (low, high) scores, lane t's rows 4k..4k+3 one 16-byte granule
    at (k * 32 + t) * 16 bytes into the letter's row; padding rows score below any
    letter."""
    W = G * R
    K = matrix.shape[0]
    low = min(int(matrix.min()), 0) - 1
    halves = []
    for members in (tile.low, tile.high):
        sc = np.full((K + 1, W), low, np.int64)
        for q, l0, nl, first in members:
            part = np.asarray(queries[q][first * R : (first + nl) * R], np.int64)
            sc[:K, l0 * R : l0 * R + len(part)] = matrix[:, part]
        halves.append(sc & 0xFFFF)
    words = (halves[1] << 16 | halves[0]).astype(np.uint32).view(np.int32)
    i = np.arange(W)
    t, r = i // R, i % R
    out = np.empty((K + 1, W), np.int32)
    out[:, ((r // 4) * G + t) * 4 + (r % 4)] = words
    return out.ravel()


class Stream:
    """The database as a qp2 stream on the current GPU: ``codes`` (original letter codes
    of a K-letter matrix, K the pad letter) in ranges of whole subjects of about equal
    residues, and one boundary word a stream column.  The range table (``d_rstart``,
    ``d_rlen``, ``d_rsub0``) is in :func:`warp_order` for ``warps`` warps a launch: the
    columns stay in database order, each range is whole with its own pads, so the order
    in which the warps walk them changes nothing but the balance.  ``multiple``: the table
    is padded with empty ranges (a flagged sentinel alone, in pad columns of its own) to a
    multiple of it, so that every warp of a block walks as many (:mod:`.qp2_blocks`)."""

    def __init__(
        self,
        codes: np.ndarray,
        offsets: np.ndarray,
        K: int,
        n_ranges: int,
        warps: int = 1,
        multiple: int = 1,
    ):
        from numba import cuda

        lengths = np.diff(offsets)
        cum = np.asarray(offsets, np.int64)
        cuts = np.searchsorted(cum, np.linspace(0, cum[-1], n_ranges + 1)[1:-1])
        bounds = np.unique(np.concatenate([[0], cuts, [len(lengths)]])).astype(np.int64)
        nr = len(bounds) - 1
        extra = -nr % max(1, int(multiple))  # empty ranges: no subject, a sentinel alone
        bounds = np.concatenate([bounds, np.full(extra, len(lengths), np.int64)])
        nr += extra
        res = cum[bounds[1:]] - cum[bounds[:-1]]  # residues a range
        seg = res + 2 * PADS + 1  # pads, subjects, the closing sentinel, pads
        pos = np.concatenate([[0], np.cumsum(seg)])
        out = np.full(int(pos[-1]), K, np.uint8)
        for g in range(nr):
            a = int(pos[g]) + PADS
            out[a : a + int(res[g])] = codes[cum[bounds[g]] : cum[bounds[g + 1]]]
        out[pos[1:] - PADS - 1] = K | QP2_FLAG  # each range's sentinel
        rng = np.repeat(np.arange(nr), np.diff(bounds))  # each subject's range
        firsts = cum[:-1] - cum[bounds[rng]] + pos[rng] + PADS
        nz = lengths > 0
        out[firsts[nz]] |= QP2_FLAG
        self.n_ranges = nr
        order = warp_order(res + 1 + G, warps)  # a range's steps: its columns and the lanes'
        self.d_codes = cuda.to_device(out)
        self.d_rstart = cuda.to_device((pos[:-1] + PADS).astype(np.int64)[order])
        self.d_rlen = cuda.to_device((res + 1).astype(np.int32)[order])
        self.d_rsub0 = cuda.to_device(bounds[:-1][order])
        self.d_bnd = cuda.device_array(len(out), np.int64)
        self.n_columns = len(out)


def warp_order(steps: np.ndarray, warps: int) -> np.ndarray:
    """The range table's order (range indices, one a slot) for a launch of ``warps``
    warps, where warp w walks slots w, w + warps, w + 2 warps, ... (the kernel's loop):
    the ranges longest first, each to the warp with the fewest ``steps`` so far that has
    room for it (every warp walks the same number of ranges, or one fewer).

    In database order the warps' loads differ: a range holds whole subjects, so where
    ranges are short (a small database: 50 M residues make ~7,900-residue ranges) the
    long subjects make long ranges, and a launch lasts as long as its busiest warp.
    bench200M's lengths, 1,584 warps (an H100's, 4 ranges each): the mean warp's load
    over the busiest's is 0.80 for a 50 M-residue shard in database order, 0.99 in this
    order (0.93 and 1.00 for all 200 M residues)."""
    import heapq

    steps = np.asarray(steps, dtype=np.float64)
    n = len(steps)
    if n == 0:
        return np.zeros(0, np.int64)
    warps = max(1, min(int(warps), n))
    cap = -(-n // warps)
    room = [cap if w < n - (cap - 1) * warps else cap - 1 for w in range(warps)]
    walks: list[list[int]] = [[] for _ in range(warps)]
    heap = [(0.0, w) for w in range(warps)]
    for r in np.argsort(-steps, kind="stable").tolist():
        load, w = heapq.heappop(heap)
        walks[w].append(r)
        if len(walks[w]) < room[w]:
            heapq.heappush(heap, (load + steps[r], w))
    order = np.empty(n, np.int64)
    for w, rs in enumerate(walks):
        order[w + warps * np.arange(len(rs))] = rs
    return order


def geometry(K: int, R: int = R_DEFAULT) -> tuple[int, int, int]:
    """(blocks, threads a block, shared bytes) of a launch on the current GPU."""
    from numba import cuda

    shm = (K + 1) * G * R * 4
    if SIM:
        return 1, G, shm
    nsm = cuda.get_current_device().MULTIPROCESSOR_COUNT
    per_sm = max(1, min(228 * 1024 // (shm + 1024), 16 * 32 // BLOCK))
    return nsm * per_sm, BLOCK, shm


def launch(
    stream: Stream,
    tiles: list[Tile],
    queries: list,
    rows: dict,
    matrix: np.ndarray,
    noe: int,
    nxt: int,
    scores,
    nsubj: int,
    cuda_stream=0,
    R: int = R_DEFAULT,
    events: list | None = None,
) -> None:
    """Queue ``tiles`` (one launch each, in order) on ``cuda_stream``: query q's best
    against subject j goes to ``scores[rows[q] * nsubj + j]`` (rows that start at 0).
    ``events``: gets a timing event recorded before the first tile and after each (not
    under the simulator)."""
    from numba import cuda

    from . import cache
    from .device import ensure_shared

    kern = cache.get_qp2_kernel(R, U_DEFAULT)
    blocks, block, shm = geometry(matrix.shape[0], R)
    if not SIM:
        ensure_shared(kern, shm)
    T = len(tiles)
    mark = events is not None and not SIM
    if mark:
        events.append(cuda.event())
        events[-1].record(cuda_stream)
    # one profile and one lane table on the GPU for all the tiles, each tile's copied in
    # behind the previous tile's launch on the same stream: no allocation (and no
    # cuMemFree, which waits for the whole GPU) per tile.  A new array a tile cost a
    # search of 1,663 subjects x 2,000 queries ~2.3 s of its 2.6 s (run 218).
    d_prof = cuda.device_array((matrix.shape[0] + 1) * G * R, np.int32, stream=cuda_stream)
    d_info = cuda.device_array(3 * G, np.int32, stream=cuda_stream)
    for k, tile in enumerate(tiles):
        prof = profile(tile, queries, matrix, R)
        d_prof.copy_to_device(prof, stream=cuda_stream)
        d_info.copy_to_device(lane_info(tile, rows), stream=cuda_stream)
        kern[blocks, block, cuda_stream, shm](
            stream.d_codes,
            stream.d_rstart,
            stream.d_rlen,
            stream.d_rsub0,
            stream.n_ranges,
            d_prof,
            prof.size,
            G * R * 4,
            noe,
            nxt,
            scores,
            stream.d_bnd,
            int(k > 0),
            int(k < T - 1),
            d_info,
            nsubj,
        )
        if mark:
            events.append(cuda.event())
            events[-1].record(cuda_stream)


def tile_seconds(events: list) -> list[float]:
    """The seconds each tile took on the GPU, from :func:`launch`'s ``events`` (empty
    where none were recorded)."""
    if not events:
        return []
    events[-1].synchronize()
    return [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]


def warps_for(R: int = R_DEFAULT, K: int = 24) -> int:
    """Warps of a launch (:func:`geometry`); the stream has :data:`RANGES_PER_WARP`
    subject ranges a warp."""
    blocks, block, _ = geometry(K, R)
    return blocks * block // 32


# -- the searcher's path ------------------------------------------------------------
def eligible(s, qlens, switch: str) -> bool | str:
    """Searcher ``s``'s ``qp2`` choice for these queries (True or 'auto', the environment
    variable ``switch`` 0/1 overriding 'auto'), or False where qp2 cannot run the search:
    not an s16 search of a resident database without empty subjects whose scheme
    :func:`fits`, or no query residues (the preamble of :func:`wanted` and
    :func:`.qp2_blocks.wanted`)."""
    if s.mode != "s16" or s._stream is not None or s.n == 0 or s._qp2_src is None:
        return False
    choice = s.qp2
    if choice == "auto":
        choice = {"0": False, "1": True}.get(os.environ.get(switch, ""), "auto")
    if choice is False or not fits(s.matrix, s.gap_open, s.gap_extend):
        return False
    if (s.lengths == 0).any() or not np.sum(qlens):
        return False
    return True if choice is True else "auto"


def wanted(s, qlens) -> bool:
    """Whether searcher ``s`` scores these queries with qp2: its ``qp2`` (True, False or
    'auto'; ``$SWGPU_QP2`` 0/1 overrides 'auto'), an s16 search of a resident database
    with no empty subject whose scheme :func:`fits`; 'auto' also needs the plans of its
    :func:`groups` at least :data:`MIN_FILL` full (and not the simulator, nor
    per-partition profiling)."""
    choice = eligible(s, qlens, "SWGPU_QP2")
    if choice != "auto":
        return bool(choice)
    if SIM or s.record is not None:
        return False
    qlens = np.asarray(qlens)
    tiles = sum(len(plan(qlens[g], ROWS)) for g in groups(len(qlens), s.n))
    return float(qlens.sum()) / (2 * G * ROWS * tiles) >= MIN_FILL  # over the groups


def _stream(s) -> Stream:
    """The searcher's qp2 stream, made on first use."""
    if s._qp2 is None:
        t0 = time.perf_counter()
        codes, offsets = s._qp2_src
        K = s.matrix.shape[0]
        warps = warps_for(ROWS, K)
        s._qp2 = Stream(codes, offsets, K, warps * RANGES_PER_WARP, warps)
        s.setup_times["qp2_stream"] = time.perf_counter() - t0
        log.debug(f"qp2 stream: {s._qp2.n_ranges} ranges, {time.perf_counter() - t0:.2f} s")
    return s._qp2


def groups(nq: int, n: int) -> list[np.ndarray]:
    """The queries in groups of about equal size whose score rows (and overflow lists)
    take at most :data:`GROUP_BYTES` a slot."""
    m = max(1, GROUP_BYTES // (8 * max(n, 1)))
    return np.array_split(np.arange(nq), -(-nq // m)) if nq else []


def _setup(s):
    """(the stream, the overflow limit, packed -(open + extend), packed -extend) of a
    search by searcher ``s``."""
    return (
        _stream(s),
        min(s.overflow_limit, overflow_limit(s.matrix)),
        pack2(-s.oe, -s.oe),
        pack2(-s.gap_extend, -s.gap_extend),
    )


def _start(
    s, st, slot, sub: list, noe: int, nxt: int, limit: int, cstream, events=None
) -> list[Tile]:
    """Queue a group's tiles (queries ``sub``) into ``slot``'s zeroed score rows on
    ``cstream``, then the histograms on the slot's stream; the tiles (``events``: gets
    their timing events, :func:`launch`)."""
    from . import inflight

    m = len(sub)
    slot.reserve(m)
    slot.queries = [(q, len(q)) for q in sub]
    slot.hists = [None] * m
    s._fill(slot.d_scores_all, m * s.n, 0, cstream)
    rows = {j: j for j in range(m)}
    tiles = plan([len(q) for q in sub], ROWS)
    launch(st, tiles, sub, rows, s.matrix, noe, nxt, slot.d_scores_all, s.n, cstream, ROWS, events)
    if not SIM and cstream is not slot.stream:
        slot.after([cstream])
    inflight.histograms(s, slot, m, limit)
    return tiles


def search(s, qcodes, qoffs, top_k, progress=None):
    """Top ``top_k`` hits of each query (:class:`~swgpu_tools.kernels.TopHits`) by qp2:
    the queries in :func:`groups`, each group's tiles into a slot's score rows, then the
    s16 path's histograms, 32-bit re-scoring and top-k selection (:mod:`.inflight`);
    two groups in flight."""
    from . import inflight

    nq = len(qoffs) - 1
    qlens = np.diff(qoffs)
    queries = [qcodes[qoffs[i] : qoffs[i + 1]] for i in range(nq)]
    tables = s._query_tables(qcodes)
    st, limit, noe, nxt = _setup(s)
    cstream = 0 if SIM else s._qp2_cuda_stream()
    parts = groups(nq, s.n)
    s.units = parts
    s.plan_seconds = 0.0
    depth = 2
    slots = [s._slot(k) for k in range(depth)]
    tq = np.zeros(nq)
    hits: list = [None] * nq
    pending: list = []
    t_scan = t_last = time.perf_counter()
    done = 0

    def finish():
        nonlocal t_last, done
        members, slot, tiles, events = pending.pop(0)
        inflight.rescore(s, slot, tables)
        got = inflight.select(s, slot, top_k)
        now = time.perf_counter()
        secs = tile_seconds(events)
        s.tile_seconds += secs
        w = np.maximum(qlens[members], 1).astype(np.float64)
        if secs and sum(secs) > 0:  # each query's share of its tiles' GPU time (a query
            # of length 0 keeps a time above 0)
            w = shares(qlens[members], tiles, secs, ROWS) + 1e-12 * w
        tq[members] += (now - t_last) * w / w.sum()
        t_last = now
        for qi, h in zip(members.tolist(), got):
            hits[qi] = h
        done += len(members)
        if progress is not None:
            progress(done, nq)

    for g, members in enumerate(parts):
        slot = slots[g % depth]
        if len(pending) == depth:
            finish()
        events: list = []
        sub = [queries[q] for q in members.tolist()]
        tiles = _start(s, st, slot, sub, noe, nxt, limit, cstream, events)
        pending.append((members, slot, tiles, events))
    while pending:
        finish()
    s._sync()
    if not SIM:
        cstream.synchronize()
    s.scan_seconds = time.perf_counter() - t_scan
    s.timings = [(qi, int(qlens[qi]), float(tq[qi])) for qi in range(nq)]
    return TopHits.from_per_query(hits)


def all_scores(s, qcodes, qoffs) -> np.ndarray:
    """Every query's score of every subject (n_queries x n) by qp2, re-scored where a
    score may have overflowed (tests and checks)."""
    from . import inflight

    nq = len(qoffs) - 1
    queries = [qcodes[qoffs[i] : qoffs[i + 1]] for i in range(nq)]
    tables = s._query_tables(qcodes)
    st, limit, noe, nxt = _setup(s)
    out = np.zeros((nq, s.n), np.int32)
    slot = s._slot(0)
    for members in groups(nq, s.n):
        _start(s, st, slot, [queries[q] for q in members.tolist()], noe, nxt, limit, slot.stream)
        inflight.rescore(s, slot, tables)
        slot.synchronize()
        for j, qi in enumerate(members.tolist()):
            out[qi] = slot.member(j, s.n)[0].copy_to_host()
    return out
