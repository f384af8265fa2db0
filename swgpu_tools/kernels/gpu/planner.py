"""The shape planner: which kernel shape scores which subjects (plain numpy).

Subjects are sorted by length; in s16 and h16 modes consecutive subjects are paired
(two per group, packed in the 16-bit halves of each register).  Each item
(subject or pair) is given the cheapest shape (G lanes, R registers per lane,
single- or multi-pass) of a menu (:data:`SHAPES`, :data:`MULTI_SHAPES`) under
a cost model: padded cells (passes x W positions), the pipeline fill of G - 1
steps per pass, a fixed cost per pass, a relative speed per R; a critical-path
limit keeps the longest items (one warp task each) from outlasting the rest
of the query's scan; shapes that would save less than a launch is worth are
merged away.  Costs depend only on the item length, so they are computed on
the distinct lengths weighted by their counts.

No GPU here: :func:`plan` returns host arrays; :class:`~.searcher.GpuSearcher`
uploads them and launches one kernel per :class:`Partition`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from .codegen import PAIRED_MODES, WARP

#: (G, R) kernel shapes a subject (pair) may be given in one pass, by mode.
#: (A finer s16 menu, R in steps of 2 and multi-pass 4x32, 32x28, 32x24 added, wastes less
#: padding: 95.7 % of bench200M's computed cells real against 91.8 %, and scans it 3.8 %
#: faster once its kernels are loaded (RESULTS-gpu.md run 60).  But a scoring process then
#: loads 38 kernels instead of 21 for 20 queries, about 0.9 s more, and the workflow's
#: 20-query run took 11.5 s against 9.2 (run 61): it is not the default.  Try it with
#: SWGPU_CONFIGS, the string in benchmarks/GPU-NOTES.md.)
SHAPES = {
    "s16": tuple((G, R) for G in (2, 4, 8, 16, 32) for R in (16, 20, 24, 28, 32)),
    "s32": ((4, 16), (8, 16), (16, 16), (32, 16), (32, 32)),
}
SHAPES["h16"] = SHAPES["s16"]  # the same register layout, binary16 lanes
#: Shapes that also serve longer subjects in several passes.
MULTI_SHAPES = {"s16": ((8, 32), (16, 32), (32, 32)), "s32": ((8, 32), (32, 32))}
MULTI_SHAPES["h16"] = MULTI_SHAPES["s16"]
#: Single-pass shapes of the batched kernels (several queries per launch against
#: a small subject set, e.g. a re-scan's new and changed sequences): a shorter
#: menu, so that a first use compiles few kernels; multi-pass: MULTI_SHAPES.  s16
#: takes R = 32 only: 2,000 queries against 6,589 bench200M subjects in 0.863 s
#: against 0.932 s with (4, 16), (8, 16), (16, 16), (32, 16), (32, 32), and 0.274
#: against 0.292 s against 1,663 (H200, RESULTS-gpu.md, run 225); h16 (not measured
#: so) keeps that older menu.
BATCH_SHAPES = {
    "s16": ((4, 32), (8, 32), (16, 32), (32, 32)),
    "h16": ((4, 16), (8, 16), (16, 16), (32, 16), (32, 32)),
    "s32": SHAPES["s32"],
}
#: Relative speed of a shape by R (fewer shuffles and loop overhead per cell
#: with more registers per lane) and of multi-pass kernels; measured on an
#: H100 (GPU-NOTES.md), used only to choose shapes.
RATE_BY_R = {
    32: 1.0,
    30: 0.995,
    28: 0.99,
    26: 0.985,
    24: 0.98,
    22: 0.97,
    20: 0.96,
    18: 0.95,
    16: 0.94,
    12: 0.9,
    8: 0.8,
    4: 0.6,
}
RATE_MULTI = 0.85
#: Steps of fixed work per pass (loading subject letters, the final reduction).
PASS_OVERHEAD_STEPS = 6
#: One group's whole task (all passes over one pair) may take at most this
#: share of the query's estimated scan time, so that the longest subjects
#: (one warp each) do not outlast the rest: they get wider groups.
CRITICAL_SHARE = float(os.environ.get("SWGPU_CRITICAL_SHARE", 0.5))
#: Seconds per step of one warp (~9 instructions per packed cell, a few warps
#: per scheduler), per register R: used for the critical-path estimate only.
STEP_SECONDS_PER_R = 0.45e-6 / 32
#: A partition that would save less than this (seconds at ~5 T cells/s) is merged away.
LAUNCH_PENALTY_S = 15e-6
#: Shapes under the CUDA simulator (tests set tiny ones here).
CONFIGS = SHAPES["s16"]


@dataclass
class Partition:
    """Items served by one kernel shape, in launch order (longest first).

    ``items``: subject indices, two per item in s16 and h16 modes (-1: none), int32,
    flattened; ``wnpass``: passes of each warp task (int32).  The searcher
    replaces both by device arrays before launching.
    """

    G: int
    R: int
    n_items: int
    n_wtasks: int
    items: object
    wnpass: object
    max_passes: int
    cells: int
    residues: int = 0
    critical: float = 0.0  # estimated seconds of its longest warp task


def menu(mode: str, one=None, multi=None, sim: bool = False) -> tuple[tuple, tuple]:
    """(single-pass shapes, multi-pass shapes) for ``mode``.

    ``one``/``multi``: overrides (None: the defaults; ``multi`` None with
    ``one`` given: the largest of ``one``).  Under the simulator: :data:`CONFIGS`
    and its largest shape.
    """
    if sim:
        return tuple(CONFIGS), (max(CONFIGS, key=lambda c: c[0] * c[1]),)
    if one is None:
        one = SHAPES[mode]
        multi = multi or MULTI_SHAPES[mode]
    elif multi is None:
        multi = [max(one, key=lambda c: c[0] * c[1])]
    return tuple(one), tuple(multi)


def parse_configs(configs) -> tuple[list | None, list | None]:
    """Shape overrides: ``"GxR,GxR,...[;GxR,...]"`` (single-pass shapes, then
    multi-pass shapes) or a sequence of (G, R) -> (one, multi), None where not given."""
    if configs is None:
        return None, None
    if isinstance(configs, str):
        t1, _, t2 = configs.partition(";")

        def parse(t):
            return [tuple(int(v) for v in c.split("x")) for c in t.split(",") if c]

        return parse(t1) or None, parse(t2) or None
    return [tuple(c) for c in configs], None


def length_bucket(L: int, steps: int = 3) -> int:
    """Representative query length of L's plan bucket (``steps`` buckets per octave)."""
    if L >= 4096:
        return 4096
    return int(round(2 ** (round(math.log2(max(L, 1)) * steps) / steps)))


def plan(
    lengths: np.ndarray, order: np.ndarray, mode: str, L: int, one, multi, sim: bool = False
) -> list[Partition]:
    """Partitions for the subjects ``order`` (sorted by length, stable) and query length L.

    ``lengths``: every subject's length (indexed by subject); ``one``/``multi``:
    the shape menu (:func:`menu`); ``sim``: one group per warp (simulator).
    """
    lens = lengths[order]
    if mode in PAIRED_MODES:
        if len(order) % 2:
            order = np.append(order, -1)
            lens = np.append(lens, 0)
        items = order.reshape(-1, 2)
        ilen = np.maximum(lens[0::2], lens[1::2])
    else:
        items = order.reshape(-1, 1)
        ilen = lens
    ilen = np.maximum(ilen, 1)
    # costs depend on the item length only: work on the distinct lengths,
    # weighted by how many items have each (items are few thousand lengths,
    # hundreds of thousands of items)
    ulen, inv, ucount = np.unique(ilen, return_inverse=True, return_counts=True)
    wcount = ucount.astype(np.float64)
    cand = [(G, R, False) for G, R in one] + [(G, R, True) for G, R in multi]
    cost = np.empty((len(cand), len(ulen)))
    for k, (G, R, m) in enumerate(cand):
        W = G * R
        passes = -(-ulen // W)
        c = (
            passes
            * (L + G - 1 + PASS_OVERHEAD_STEPS)
            * float(W)
            / (RATE_BY_R.get(R, 0.9) * (RATE_MULTI if m else 1.0))
        )
        cost[k] = c if m else np.where(ulen <= W, c, np.inf)
    # critical path: the longest task of a shape must stay well under the
    # estimated scan time of the whole query
    cells_per_s = 5e12 / (2 if mode in PAIRED_MODES else 1)
    cmin = cost.min(axis=0)
    fin = np.isfinite(cmin)
    t_query = float((cmin[fin] * wcount[fin]).sum()) / cells_per_s
    for k, (G, R, _multi) in enumerate(cand):
        W = G * R
        t_task = -(-ulen // W) * (L + G - 1 + PASS_OVERHEAD_STEPS) * R * STEP_SECONDS_PER_R
        too_long = t_task > CRITICAL_SHARE * t_query
        if too_long.any():
            c = cost[k].copy()
            c[too_long] *= 1e6  # finite: still usable when nothing else is allowed
            cost[k] = c
    uchoice = np.argmin(cost, axis=0)
    wcost = cost * wcount  # total cost of all items of a length
    # merge partitions that save less than a launch is worth
    penalty = LAUNCH_PENALTY_S * cells_per_s
    active = sorted(set(uchoice.tolist()))
    while len(active) > 1:
        totals = {k: wcost[k, uchoice == k].sum() for k in active}
        k = min(active, key=lambda x: totals[x])
        others = [x for x in active if x != k]
        sel = np.flatnonzero(uchoice == k)
        sub = cost[others][:, sel]
        alt = np.argmin(sub, axis=0)
        with np.errstate(invalid="ignore"):
            delta = (sub[alt, np.arange(len(sel))] * wcount[sel]).sum() - totals[k]
        if not np.isfinite(delta) or delta > penalty:
            break
        uchoice[sel] = np.array(others)[alt]
        active = others
    choice = uchoice[inv]
    by_choice = np.argsort(choice, kind="stable")  # item positions grouped by shape
    bounds = np.concatenate(([0], np.cumsum(np.bincount(choice, minlength=len(cand)))))
    parts = []
    for k in np.unique(uchoice).tolist():
        G, R, m = cand[k]
        sel = by_choice[bounds[k] : bounds[k + 1]][::-1]  # longest first: long tasks start early
        it = items[sel]
        il = ilen[sel]
        ppw = (G if sim else WARP) // G
        nwt = -(-len(sel) // ppw)
        padded = np.zeros(nwt * ppw, dtype=np.int64)
        padded[: len(il)] = il
        wmax = padded.reshape(nwt, ppw).max(axis=1)
        wnp = np.maximum(1, -(-wmax // (G * R))).astype(np.int32)
        cells = int(wnp.sum()) * ppw * G * R * (2 if mode in PAIRED_MODES else 1)
        parts.append(
            Partition(
                G,
                R,
                len(sel),
                nwt,
                np.ascontiguousarray(it.reshape(-1), dtype=np.int32),
                wnp,
                int(wnp.max()),
                cells,
                int(lengths[it[it >= 0]].sum()),
                int(wnp.max()) * (L + G - 1 + PASS_OVERHEAD_STEPS) * R * STEP_SECONDS_PER_R,
            )
        )
    # launch order: longest critical path first (they start while the GPU
    # fills up around them), then by total work
    parts.sort(key=lambda p: (-p.critical, -p.cells))
    return parts


#: Threads of :class:`PlansAhead`: two made bench200M's 12 plans in 0.10 s against
#: 0.17 s with one (2-core VM); three gained nothing.
PLAN_THREADS = 2


class PlansAhead:
    """Plans made on threads before a search needs them, by key.  :func:`plan` is
    host-only numpy, which lets go of the GIL in its large array operations."""

    def __init__(self, threads: int = PLAN_THREADS):
        self.threads = threads
        self._pool = None
        self._futures: dict = {}

    def start(self, keys, make) -> None:
        """Start ``make(*key)`` for each of ``keys`` not started yet, in order."""
        keys = [k for k in dict.fromkeys(keys) if k not in self._futures]  # each once
        if keys and self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="swgpu-plan")
        for key in keys:
            self._futures[key] = self._pool.submit(make, *key)

    def take(self, key):
        """The plan made for ``key`` (waiting for it), or None if none was started."""
        future = self._futures.pop(key, None)
        return None if future is None else future.result()
