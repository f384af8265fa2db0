"""Score-only passes of pair batches on the current GPU (``swgpu align``).

The forward score-only pass of :mod:`swgpu_tools.alignment` for batches of
independent (query, subject) pairs: each pair's best score and end cell,
exactly as the CPU forward pass finds them (tie rules of the alignment module
doc), and the reverse pass for the start cell, so that the CPU only runs the
traceback on each region.

Design (inter-sequence parallelism): one thread per pair
(``templates/pair_kernel.py.in``).  The query is processed in tiles of R rows
held in registers (H and E of each row); the thread sweeps the subject columns
left to right, one column of R cells per step, and hands the tile's bottom row
(H, and F of the next row) to the next tile through a boundary row in global
memory laid out column-major over the pairs of the launch (bH[j * S + slot]),
so that the threads of a warp, which are at the same column, read and write
consecutive words.  Tiles are aligned to the END of the query: the first tile
holds up to R - 1 "virtual" rows above row 1 (substitution score 0, column-0
value 0, which reproduces row 0 exactly: H = 0, and F entering row 1 =
-(gap_open + gap_extend)), so row m is always the last register of the last
tile (semi-global mode reads it with no select).  Substitution scores come
from a 34 x 32 int32 table in shared memory (row 32: the virtual rows' zeros;
row 33: very negative, for the global reverse pass).  Scores are int32 through
the add32/max32/addmax32 helpers (exact at any length the CPU accepts).  Pairs
are sorted by tile count, then subject length (descending), so the threads of
a warp do nearly the same work; launches are cut so the boundary rows stay
under :data:`PAIR_BOUNDARY_ENTRIES` entries each.

Tie rules (as alignment._forward_end / _forward_end_semi):

* local: the first maximum in column-major order (smallest subject end, then
  smallest query end).  Per column, cm = max of the tile's R cells; a column
  replaces the best if cm > best, or cm == best at a smaller column (an
  earlier column of a later tile); then the first row holding cm.
* semi-global: the best H of row m, smallest subject end, starting from
  H[m][0] = -(gap_open + m * gap_extend) at column 0.

Everything runs on the calling thread's current CUDA device.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..gpu_intrinsics import SIM
from . import cache
from .codegen import PAIR_NROW, PAIR_TBL

#: Rows per register tile of the pair kernel (default; SWGPU_PAIR_R overrides).
#: 32 measured 2-4x faster than 16 on an H100 (benchmarks/RESULTS-align.md).
PAIR_R = int(os.environ.get("SWGPU_PAIR_R", 32))
#: Largest boundary-row array (int32 entries, H and F each) of one pair launch.
PAIR_BOUNDARY_ENTRIES = 1 << 27


def pair_kernel_ptx(R: int | None = None, kind="local", cc=(9, 0)) -> str:
    """PTX of a pair kernel (R rows per tile, default :data:`PAIR_R`) for compute
    capability ``cc`` (NVVM, no GPU)."""
    return cache.pair_kernel_ptx(PAIR_R if R is None else R, kind, cc)


def _pair_table(matrix: np.ndarray) -> np.ndarray:
    na = matrix.shape[0]
    T = np.zeros((34, 32), dtype=np.int32)
    T[:na, :na] = matrix
    T[PAIR_NROW] = -(1 << 20)
    return T.reshape(-1)


class PairBatch:
    """The codes of a pair batch on the GPU, and launches of the pair kernels over it.

    ``matrix``, ``gap_open``, ``gap_extend``: a validated scoring scheme's (not
    checked again); only the kernels' own limits are checked (codes inside
    the matrix, scores inside 32 bits).
    """

    def __init__(
        self, qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend, R=None
    ):
        from numba import cuda

        matrix = np.ascontiguousarray(matrix, dtype=np.int32)
        gap_open, gap_extend = int(gap_open), int(gap_extend)
        self.go, self.ge = gap_open, gap_extend
        self.R = int(R or PAIR_R)
        qcodes = np.ascontiguousarray(qcodes, dtype=np.uint8)
        scodes = np.ascontiguousarray(scodes, dtype=np.uint8)
        qoff = np.ascontiguousarray(qoff, dtype=np.int64)
        soff = np.ascontiguousarray(soff, dtype=np.int64)
        qidx = np.ascontiguousarray(qidx, dtype=np.int64)
        sidx = np.ascontiguousarray(sidx, dtype=np.int64)
        self.n = len(qidx)
        self.qst = qoff[qidx]
        self.qln = qoff[qidx + 1] - self.qst
        self.sst = soff[sidx]
        self.sln = soff[sidx + 1] - self.sst
        na = matrix.shape[0]
        for codes in (qcodes, scodes):
            if len(codes) and int(codes.max()) >= na:
                raise ValueError("sequence codes exceed the matrix size")
        worst = int(np.abs(matrix).max(initial=0)) + gap_open + gap_extend
        if self.n and int((self.qln + self.sln).max()) * worst >= (1 << 29):
            raise ValueError("scores of these pairs could exceed the 32-bit range with these costs")
        t0 = time.perf_counter()
        self.d_q = cuda.to_device(qcodes if len(qcodes) else np.zeros(1, np.uint8))
        same = scodes.shape == qcodes.shape and (
            scodes.__array_interface__["data"][0] == qcodes.__array_interface__["data"][0]
        )
        self.d_s = (
            self.d_q if same else cuda.to_device(scodes if len(scodes) else np.zeros(1, np.uint8))
        )
        self.d_tbl = cuda.to_device(_pair_table(matrix))
        self.times = {"upload_s": time.perf_counter() - t0, "forward_s": 0.0, "reverse_s": 0.0}
        self._bH = self._bF = None

    def launch(self, kind, sel, m, n, target=None):
        """Run ``kind`` on pairs ``sel`` with row/column counts m, n; (len(sel), 3) int32."""
        from numba import cuda

        t0 = time.perf_counter()
        R = self.R
        kern = cache.get_pair_kernel(R, kind)
        npairs = len(sel)
        res = np.zeros((npairs, 3), dtype=np.int32)
        if npairs == 0:
            return res
        ntiles = m // R + 1 if kind == "global_rev" else (m + R - 1) // R
        order = np.lexsort((-n, -ntiles)).astype(np.int64)  # most tiles first
        block = 8 if SIM else (128 if npairs >= 132 * 128 * 4 else 32)
        nmax = int(n.max())
        if (nmax + 1) * block >= 2**31:  # int32 boundary-row indices
            raise ValueError(
                f"a sequence of {nmax:,} residues is too long for the GPU pair kernels"
            )
        S_cap = max(block, (PAIR_BOUNDARY_ENTRIES // (nmax + 1)) // block * block)
        oe = self.go + self.ge
        if target is None:
            target = np.zeros(npairs, dtype=np.int64)
        lo = 0
        while lo < npairs:
            hi = min(npairs, lo + S_cap)
            o = order[lo:hi]
            S = hi - lo
            need = max(1, (int(n[o].max()) + 1) * S) if int(ntiles[o].max()) > 1 else 1
            if self._bH is None or self._bH.shape[0] < need:
                self._bH = cuda.device_array(need, dtype=np.int32)
                self._bF = cuda.device_array(need, dtype=np.int32)
            d_out = cuda.device_array(3 * S, dtype=np.int32)
            args = [
                cuda.to_device(np.ascontiguousarray(a[o], dtype=dt))
                for a, dt in (
                    (self.qst[sel], np.int64),
                    (m, np.int32),
                    (self.sst[sel], np.int64),
                    (n, np.int32),
                    (target, np.int32),
                )
            ]
            kern[-(-S // block), block](
                self.d_q,
                args[0],
                args[1],
                self.d_s,
                args[2],
                args[3],
                S,
                self.d_tbl,
                PAIR_TBL,
                -oe,
                -self.ge,
                self.go,
                self.ge,
                self._bH,
                self._bF,
                S,
                args[4],
                d_out,
            )
            res[o] = d_out.copy_to_host().reshape(S, 3)
            lo = hi
        self.times["reverse_s" if kind.endswith("_rev") else "forward_s"] += (
            time.perf_counter() - t0
        )
        return res


def _pair_mode(mode) -> str:
    mode = {"semi-global": "semiglobal", "glsearch": "semiglobal"}.get(
        str(mode).lower(), str(mode).lower()
    )
    if mode not in ("local", "semiglobal"):
        raise ValueError(f"pair kernels: mode must be 'local' or 'semiglobal', got {mode!r}")
    return mode


def pair_ends(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    mode="local",
    R=None,
    timings=None,
) -> np.ndarray:
    """(best score, query end, subject end) of each pair (qidx[k], sidx[k]), on the GPU.

    Exactly what the CPU forward pass of :mod:`swgpu_tools.alignment` gives
    (ends exclusive; tie rules of its module doc): ``mode`` "local" (the
    first maximum in column-major order; (0, 0, 0) for a pair of score 0) or
    "semiglobal" (the best cell of the last row, smallest subject end; the
    query end is the query length).  qcodes/scodes: uint8 matrix codes,
    concatenated; qoff/soff: their offsets.  Matrices up to 32 x 32; exact
    int32 scores (raises ValueError where 32 bits could overflow, as the CPU
    does).  ``timings``: a dict that gets seconds per step and cell counts.
    Returns an (n, 3) int64 array.  Under the CUDA simulator the same kernels
    run in the simulator (tests).
    """
    return _pair_run(
        qcodes,
        qoff,
        scodes,
        soff,
        qidx,
        sidx,
        matrix,
        gap_open,
        gap_extend,
        mode,
        R,
        timings,
        False,
    )


def pair_regions(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    mode="local",
    R=None,
    timings=None,
) -> np.ndarray:
    """(best, query start, query end, subject start, subject end) of each pair, on the GPU.

    The forward pass (:func:`pair_ends`) and the reverse pass of
    :mod:`swgpu_tools.alignment` (its locate steps 1 and 2, same tie rules):
    local, the reversed prefixes with a bonus of 1 on the anchor cell, the
    first cell reaching best + 1 in column-major order; semi-global, the
    global DP of the reversed prefixes, the shortest subject span reaching
    the best.  Local pairs of score 0 give all zeros.  The CPU then only runs
    the traceback on each region.  Returns an (n, 5) int64 array.
    """
    return _pair_run(
        qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend, mode, R, timings, True
    )


def _pair_run(
    qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend, mode, R, timings, starts
):
    t_start = time.perf_counter()
    mode = _pair_mode(mode)
    local = mode == "local"
    b = PairBatch(qcodes, qoff, scodes, soff, qidx, sidx, matrix, gap_open, gap_extend, R)
    n = b.n
    out = np.zeros((n, 5 if starts else 3), dtype=np.int64)
    if n == 0:
        return out
    allp = np.arange(n, dtype=np.int64)
    fw = b.launch("local" if local else "semi", allp, b.qln, b.sln).astype(np.int64)
    if not starts:
        out[:] = fw
    else:
        best, qe, se = fw[:, 0], fw[:, 1], fw[:, 2]
        out[:, 0], out[:, 2], out[:, 4] = best, qe, se
        live = np.flatnonzero(best > 0) if local else allp
        rv = b.launch(
            "local_rev" if local else "global_rev", live, qe[live], se[live], best[live]
        ).astype(np.int64)
        a = rv[:, 1]
        bb = rv[:, 2]
        bad = (rv[:, 0] != best[live] + 1) if local else (bb < 0)
        if bad.any():  # cannot happen; the CPU's locate step would be needed
            raise AssertionError(f"GPU reverse pass found no start for {int(bad.sum())} pairs")
        out[live, 1] = qe[live] - a
        out[live, 3] = se[live] - bb
    if timings is not None:
        timings.update(b.times)
        timings.update(
            {
                "total_s": time.perf_counter() - t_start,
                "kernel_s": b.times["forward_s"] + b.times["reverse_s"],
                "cells": int((b.qln * b.sln).sum()),
                "R": b.R,
            }
        )
        if starts:
            timings["reverse_cells"] = int(((out[:, 2] - 0) * out[:, 4]).sum())
    return out
