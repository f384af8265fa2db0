"""The best ``k`` columns of each row of a score block, per segment of columns.

A GPU search of many queries per launch (:mod:`.gpu.batched`) chooses each
row's best hits on the GPU where every segment has at most ``TOPK_CAP``
columns; otherwise (and with ``SWGPU_GPU_TOPK=0``) it brings back the whole
(queries x subjects) score block and chooses them here, on the host.  A
re-scan scores every shard's new and changed sequences in one such search:
the subjects are the shards' deltas one after another, and each shard needs
its own best ``k`` per query, so the columns come in *segments* and the best
``k`` are chosen in each.

Order of each row's choice: segment, then score descending, then column
ascending (the searcher's tie rule).  One compiled pass (Numba, no GIL, rows
in parallel): a counting selection over each segment's range of scores, or a
sort where that range is too wide (scores re-scored above the packed
kernels' limit).  ``np.partition`` and a stable sort per block took about
0.07 s for 500 x 1,663 scores on an H100 host; this takes milliseconds.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import segment_places  # (the layout of a row's choice; re-exported here)

#: A segment whose scores span more values than this is sorted instead of counted.
MAX_SPAN = 1 << 16


@njit(cache=True, nogil=True, parallel=True, boundscheck=False)
def _top_segments(block, k, seg, out_cols, out_vals):  # pragma: no cover - compiled
    m = block.shape[0]
    nseg = seg.shape[0] - 1
    for r in prange(m):
        o = 0
        for g in range(nseg):
            a = seg[g]
            b = seg[g + 1]
            kk = min(k, b - a)
            if kk <= 0:
                continue
            lo = block[r, a]
            hi = block[r, a]
            for j in range(a + 1, b):
                x = block[r, j]
                if x < lo:
                    lo = x
                if x > hi:
                    hi = x
            span = np.int64(hi) - np.int64(lo) + 1
            if span <= MAX_SPAN:
                pos = np.zeros(span, np.int64)
                for j in range(a, b):
                    pos[block[r, j] - lo] += 1
                # the threshold: the lowest score still among the best kk
                v = span - 1
                above = 0
                while above + pos[v] < kk:
                    above += pos[v]
                    v -= 1
                need = kk - above  # columns taken at the threshold, lowest first
                # each score's first output place, best score first
                p = o
                for u in range(span - 1, v - 1, -1):
                    c = pos[u]
                    pos[u] = p
                    p += c
                t = v + lo
                for j in range(a, b):
                    x = block[r, j]
                    if x > t or (x == t and need > 0):
                        if x == t:
                            need -= 1
                        i = pos[x - lo]
                        pos[x - lo] = i + 1
                        out_cols[r, i] = j
                        out_vals[r, i] = x
            else:
                key = np.empty(b - a, np.int64)
                for j in range(a, b):
                    key[j - a] = ((np.int64(hi) - np.int64(block[r, j])) << 32) | (j - a)
                order = np.argsort(key)
                for i in range(kk):
                    j = a + (order[i] & 0xFFFFFFFF)
                    out_cols[r, o + i] = j
                    out_vals[r, o + i] = block[r, j]
            o += kk


def top_rows(scores: np.ndarray, k: int, segments=None):
    """The best ``k`` of each row of ``scores`` (m x n, int32) in each segment of
    columns (``segments``: their start columns and n, ascending; default one
    segment): (rows, columns, values), sorted by row, segment, value
    descending, then column.  Each row gives ``sum(min(k, segment length))``."""
    scores = np.ascontiguousarray(scores, dtype=np.int32)
    m, n = scores.shape
    seg = np.asarray([0, n] if segments is None else segments, dtype=np.int64)
    if len(seg) < 2 or seg[0] != 0 or seg[-1] != n or (np.diff(seg) < 0).any():
        raise ValueError(f"segments must rise from 0 to {n}, got {seg.tolist()}")
    k = max(0, int(k))
    per_row = int(segment_places(seg, k)[-1])
    out_cols = np.empty((m, per_row), np.int64)
    out_vals = np.empty((m, per_row), np.int32)
    if m and per_row:
        _top_segments(scores, k, seg, out_cols, out_vals)
    rows = np.repeat(np.arange(m, dtype=np.int64), per_row)
    return rows, out_cols.reshape(-1), out_vals.reshape(-1)


def entry_points():
    """The Numba functions of this module (for the precompile)."""
    return (_top_segments,)


def precompile() -> None:
    """Compile (or load from the disk cache) :func:`_top_segments`, on a tiny case."""
    top_rows(np.array([[3, 1, 2]], dtype=np.int32), 2, [0, 1, 3])
