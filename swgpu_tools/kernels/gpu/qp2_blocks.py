"""qp2 a tile a block: many queries against a small subject set (a re-scan's delta).

:mod:`.qp2` launches one tile after another, every warp of the GPU on the same tile.
Against a few thousand subjects a warp's ranges then hold about one subject each and the
longest subject sets each launch's time: on a delta of bench200M (6,589 subjects, the
longest 7,592 residues) a tile took 4.0 ms against 1.2 ms of work (RESULTS-gpu.md, run
272), slower than many queries a launch (:mod:`.batched`).

Here one launch runs every tile, a block at a time on each (the kernel's ``blocks``
variant, ``templates/qp2_kernel.py.in``): the blocks stay resident and take work items
by an atomic counter, longest first: a *chain* of tiles against one of :data:`PARTS`
parts of the subjects; a block builds its tile's profile in shared memory from the
tile's query rows and the matrix, and its warps walk the part's subjects in a few long
ranges each (:class:`.qp2.Stream` for all parts' warps, balanced together and padded so
that every warp walks as many), so no single subject weighs.  Tiles run side by side,
so a query crosses a tile edge only inside a chain, whose tiles one block runs in order
against its part, handing the last rows on through its own boundary words.

* :func:`chain_plan`: the queries in chains of tiles: a query of more than 32 lanes in a
  chain of its own half, the others packed whole into the free lanes (best fit), two
  halves a chain, the shorter one lengthened with one-tile bins.
* :func:`launch`: a plan's tiles into score rows of the batched path's layout (query row
  ``r``'s score of subject ``j`` at ``r * nsubj + j``, zeroed first), from which
  :mod:`.batched` chooses each segment's best and re-scores what may have overflowed.
"""

from __future__ import annotations

import os

import numpy as np

from ..gpu_intrinsics import SIM, pack2
from .qp2 import (
    BLOCK,
    PADS,
    ROWS,
    U_DEFAULT,
    G,
    Stream,
    Tile,
    eligible,
    geometry,
    lane_info,
    overflow_limit,
)

#: Ranges a warp walks a tile, over all parts (the stream of a block's warps: few and long,
#: so that the longest subject weighs little).
RANGES_PER_WARP = 16
#: Parts of the ranges: a work item is a chain's tiles against one part, so that the last
#: items are short (bench200M's delta x 2,000 queries, 496 tiles in 380 chains of up to 5
#: tiles on 132 blocks: the busiest block runs 5 tile-times whole, 3.9 in eighths, against
#: 3.76 on average; run 275: the kernel 0.768 s = 5 x 0.154 s).  Two under the simulator.
PARTS = 2 if SIM else 8
#: Under 'auto', the path needs at least this many work items a resident block (tiles x
#: :data:`PARTS` / blocks, the tiles counted from the queries' lanes): with few queries
#: its tiles leave most of the GPU idle, where the batched kernels spread any query count
#: over every SM.  Measured only with 2,000 queries (496 tiles, 30 items a block).
MIN_ITEMS_PER_BLOCK = 4
#: Boundary words the blocks may take (one 8-byte word a stream column a block, only where
#: some chain has several tiles); beyond it the search keeps the batched kernels.
BND_BYTES = int(os.environ.get("SWGPU_QP2B_BND_BYTES", 8 << 30))


def chain_plan(lengths, R: int = ROWS) -> tuple[list[Tile], np.ndarray, np.ndarray]:
    """(tiles, each chain's first tile, each chain's tile count) of queries of
    ``lengths`` (a query of length 0 takes no lane).  Each query lies in whole lanes of
    one half; it crosses a tile edge only within its chain; chains come longest first."""
    lanes = [-(-int(n) // R) for n in lengths]
    order = sorted((q for q in range(len(lanes)) if lanes[q]), key=lambda q: (-lanes[q], q))
    halves: list[list] = []  # [tiles, [(query, first lane, lanes)]], lanes in the half's run
    room: list[list] = [[] for _ in range(G)]  # room[f]: halves whose last tile has f free
    for q in order:
        nl = lanes[q]
        if nl > G:  # a chain's half of its own
            nt = -(-nl // G)
            half = [nt, [(q, 0, nl)]]
            halves.append(half)
            if nt * G - nl:
                room[nt * G - nl].append(half)
            continue
        f = next((f for f in range(nl, G) if room[f]), None)  # the fullest that fits
        if f is None:
            half = [1, []]
            halves.append(half)
            f = G
        else:
            half = room[f].pop()
        half[1].append((q, half[0] * G - f, nl))
        if f - nl:
            room[f - nl].append(half)
    longs = [h for h in halves if h[0] > 1]  # longest first (the order they were made)
    singles = [h for h in halves if h[0] == 1]
    pairs = []
    for a, b in zip(longs[::2], longs[1::2] + [[0, []]]):
        while b[0] < a[0] and singles:  # the shorter half lengthened with one-tile bins
            extra = singles.pop()
            b[1].extend((q, p0 + b[0] * G, nl) for q, p0, nl in extra[1])
            b[0] += 1
        pairs.append((a[0], a[1], b[1]))
    while singles:
        a = singles.pop()
        b = singles.pop() if singles else [0, []]
        pairs.append((1, a[1], b[1]))
    pairs.sort(key=lambda p: -p[0])
    tiles: list[Tile] = []
    start, count = [], []
    for nt, low, high in pairs:
        start.append(len(tiles))
        count.append(nt)
        for k in range(nt):
            lo, hi = k * G, (k + 1) * G
            ms = []
            for members in (low, high):
                ms.append(
                    [
                        (q, max(p0, lo) - lo, min(p0 + nl, hi) - max(p0, lo), max(p0, lo) - p0)
                        for q, p0, nl in sorted(members, key=lambda m: m[1])
                        if p0 < hi and p0 + nl > lo
                    ]
                )
            fresh = tuple(k > 0 and bool(m) and m[0][1] == 0 and m[0][3] == 0 for m in ms)
            tiles.append(Tile(ms[0], ms[1], fresh))
    return tiles, np.asarray(start, np.int32), np.asarray(count, np.int32)


def query_rows(tiles: list[Tile], queries: list, K: int, R: int = ROWS) -> np.ndarray:
    """uint8 [tiles x 2 x 32R]: each tile's rows, low half then high, the letter code of
    each row (lane t's rows at t * R ...), K where a row holds no query."""
    W = G * R
    out = np.full((len(tiles), 2, W), K, np.uint8)
    for k, tile in enumerate(tiles):
        for h, members in enumerate((tile.low, tile.high)):
            for q, l0, nl, first in members:
                part = queries[q][first * R : (first + nl) * R]
                out[k, h, l0 * R : l0 * R + len(part)] = part
    return out.ravel()


def matrix_words(matrix: np.ndarray) -> np.ndarray:
    """int32 [(K + 1) x (K + 1)]: the 16-bit word of each (subject letter, query letter)
    score, the pad letter K scoring below any letter (as :func:`.qp2.profile`'s)."""
    K = matrix.shape[0]
    low = min(int(matrix.min()), 0) - 1
    out = np.full((K + 1, K + 1), low, np.int64)
    out[:K, :K] = matrix
    return (out & 0xFFFF).astype(np.int32).ravel()


class _Rows(dict):
    def __missing__(self, q):  # a query's score row is its index in the launch
        return q


def wanted(s, qlens) -> bool:
    """Whether the batched search of searcher ``s`` scores with this path: its ``qp2``
    (True, False or 'auto'; ``$SWGPU_QP2_BLOCKS`` 0/1 overrides 'auto') on an s16 search
    of a resident database without empty subjects whose scheme :func:`.qp2.fits`, and
    the boundary words within :data:`BND_BYTES`; 'auto' also needs enough queries
    (:data:`MIN_ITEMS_PER_BLOCK`) and not the simulator."""
    choice = eligible(s, qlens, "SWGPU_QP2_BLOCKS")
    if choice is False:
        return False
    if choice == "auto" and SIM:
        return False
    blocks = _blocks()
    if choice == "auto":
        tiles = sum(-(-int(n) // ROWS) for n in qlens) / (2 * G)  # at least
        if tiles * PARTS < MIN_ITEMS_PER_BLOCK * blocks:
            return False
    ranges = (BLOCK // 32) * (RANGES_PER_WARP + PARTS)  # at most, with the padding
    return blocks * (s.total_residues + ranges * (2 * PADS + 1)) * 8 <= BND_BYTES


def _blocks() -> int:
    """Resident blocks of a launch (one chain each at a time)."""
    return geometry(24, ROWS)[0]


def stream(s) -> Stream:
    """Searcher ``s``'s stream for a block's warps (made on first use)."""
    if getattr(s, "_qp2b", None) is None:
        codes, offsets = s._qp2_src
        warps = 1 if SIM else BLOCK // 32
        walks = warps * PARTS  # every part's warps' walks, balanced together
        K = s.matrix.shape[0]
        s._qp2b = Stream(codes, offsets, K, warps * RANGES_PER_WARP, walks, multiple=walks)
    return s._qp2b


def launch(s, queries: list, d_scores, cuda_stream) -> dict:
    """Queue the search of ``queries`` (letter codes each; query i's scores go to row i of
    ``d_scores``, zeroed here) on ``cuda_stream``; facts of the plan."""
    from numba import cuda

    from . import cache
    from .device import ensure_shared

    st = stream(s)
    K = s.matrix.shape[0]
    tiles, start, count = chain_plan([len(q) for q in queries], ROWS)
    n = s.n
    s._fill(d_scores, len(queries) * n, 0, cuda_stream)
    if not tiles:
        return {"tiles": 0, "chains": 0}
    kern = cache.get_qp2_kernel(ROWS, U_DEFAULT, blocks=True)
    blocks, block, shm = geometry(K, ROWS)
    if not SIM:
        ensure_shared(kern, shm)
    chained = bool((count > 1).any())
    ncol = st.n_columns if chained else 0
    d_bnd = cuda.device_array(max(1, blocks * ncol), np.int64, stream=cuda_stream)
    info = np.concatenate([lane_info(t, _Rows()) for t in tiles])
    args = [
        cuda.to_device(a, stream=cuda_stream)
        for a in (query_rows(tiles, queries, K, ROWS), matrix_words(s.matrix))
    ]
    d_info, d0, dn = (cuda.to_device(a, stream=cuda_stream) for a in (info, start, count))
    d_counter = cuda.to_device(np.zeros(1, np.int32), stream=cuda_stream)
    kern[blocks, block, cuda_stream, shm](
        st.d_codes,
        st.d_rstart,
        st.d_rlen,
        st.d_rsub0,
        st.n_ranges,
        args[0],
        args[1],
        K + 1,
        G * ROWS * 4,
        pack2(-s.oe, -s.oe),
        pack2(-s.gap_extend, -s.gap_extend),
        d_scores,
        d_bnd,
        ncol,
        d_info,
        d0,
        dn,
        len(start) * PARTS,
        PARTS,
        d_counter,
        n,
    )
    rows = 2 * G * ROWS * len(tiles)
    return {
        "tiles": len(tiles),
        "chains": len(start),
        "fill": float(sum(len(q) for q in queries)) / rows,
    }


def limit(s) -> int:
    """A score at or above this may have overflowed (qp2's binary16 range, or s16's)."""
    return min(s.overflow_limit, overflow_limit(s.matrix))
