"""Query-profile scoring (issue 14 prototype): the query in registers, subjects streamed.

The database-search kernels (:mod:`.searcher`) keep subject positions in registers and
look a pair score up per packed cell in a D^3 pair table; those lookups land in random
shared-memory banks (3.3-3.5 wavefronts per load), and that bank traffic bounds the
kernel near 5 T cells/s on an H100 (benchmarks/GPU-NOTES.md).  Here the query is in
registers and each lane reads its rows' scores for the current subject letters from a
query profile laid out so that a quarter-warp's 16-byte reads never share a bank.

Only queries up to one pass (G x R rows) are handled; :class:`QProfileScan` scores a
query against every subject of a :class:`.searcher.GpuSearcher`'s resident database
(its compact codes, starts and lengths), for benchmarks and tests.
"""

from __future__ import annotations

import numpy as np

from ..gpu_intrinsics import SIM
from . import cache
from .codegen import WARP, qprofile_kernel_source
from .device import ensure_shared


def build_profile(query_compact: np.ndarray, S: np.ndarray, G: int, R: int) -> np.ndarray:
    """int32[D * G * R]: for compact subject letter c (rows of ``S``, the D x D score
    matrix over compact codes, code 0 the padding) and query row i < G*R, the word
    ``s(query[i], c) & 0xFFFF`` at index c*W + (k*G + t)*4 + i % 4, where t = i // R is
    the lane and k = (i % R) // 4 its granule (rows past the query score like padding)."""
    D = S.shape[0]
    W = G * R
    L = len(query_compact)
    assert L <= W
    rows = np.zeros(W, dtype=np.int64)  # query letter per row, padding past L
    rows[:L] = query_compact
    scores = S[rows][:, :].T  # (D, W): s(query[i], c) = S[query[i], c]
    i = np.arange(W)
    t, rr = i // R, i % R
    slot = ((rr // 4) * G + t) * 4 + rr % 4
    prof = np.zeros((D, W), dtype=np.int64)
    prof[:, slot] = scores
    return (prof & 0xFFFF).astype(np.int32).reshape(-1)


class QProfileScan:
    """Scores queries of length <= G*R against ``searcher``'s resident database."""

    def __init__(self, searcher, G: int = 32, R: int = 32, block: int = 128, unroll: int = 1):
        from numba import cuda

        assert searcher._stream is None, "a resident database"
        self.s = searcher
        self.G, self.R = G, R
        self.block = G if SIM else block
        order = searcher.order[::-1]  # longest first
        n = len(order)
        items = np.full(2 * (-(-n // 2)), -1, dtype=np.int32)
        items[:n] = order
        self.n_items = len(items) // 2
        self.d_items = cuda.to_device(items if n else np.full(2, -1, np.int32))
        wsz = G if SIM else WARP
        self.n_wtasks = -(-self.n_items // (wsz // G))
        name = f"qprof_{G}x{R}u{unroll}{'_sim' if SIM else ''}"
        mod = cache.load_module(name, qprofile_kernel_source(G, R, SIM, unroll))
        self.kern = cuda.jit(mod.SIG, cache=True)(mod.kernel_py)
        self.d_scores = cuda.device_array(max(n, 1), dtype=np.int32)

    def matrix(self, qletters) -> tuple[np.ndarray, np.ndarray]:
        """(D x D compact score matrix, compact map of original codes) for the database's
        letters plus the query's."""
        s = self.s
        extra = [c for c in qletters if s.cmap[c] < 0]
        letters = s.letters + sorted(set(extra))
        cmap = np.zeros(256, dtype=np.int64)
        for k, c in enumerate(letters):
            cmap[c] = k + 1
        D = len(letters) + 1
        S = np.full((D, D), s.pad_score, dtype=np.int64)
        idx = np.array(letters, dtype=np.int64)
        if len(idx):
            S[1:, 1:] = s.matrix[np.ix_(idx, idx)]
        return S, cmap

    def scores(self, q: np.ndarray, stream=0) -> np.ndarray:
        """int32 scores of query ``q`` (original codes) against every subject."""
        from numba import cuda

        s = self.s
        S, cmap = self.matrix(sorted(set(np.unique(q).tolist())))
        prof = build_profile(cmap[q], S, self.G, self.R)
        d_prof = cuda.to_device(prof, stream=stream)
        shmem = prof.size * 4
        if not SIM:
            ensure_shared(self.kern, shmem)
        wsz = self.G if SIM else WARP
        grid = 1 if SIM else max(1, -(-(self.n_wtasks * wsz) // self.block))
        if not SIM:  # persistent: as many blocks as fit (the kernel loops over its tasks)
            grid = min(grid, self.blocks_per_sm(shmem) * _sm_count())
        self.grid = grid
        noe = _pack2(-s.oe, -s.oe)
        nxt = _pack2(-s.gap_extend, -s.gap_extend)
        self.kern[grid, self.block, stream, shmem](
            s.d_codes,
            s.d_starts,
            s.d_lens,
            self.d_items,
            self.n_items,
            self.n_wtasks,
            d_prof,
            prof.size,
            self.G * self.R * 4,
            noe,
            nxt,
            noe,
            self.d_scores,
        )
        return self.d_scores.copy_to_host(stream=stream)[: s.n]

    def blocks_per_sm(self, shmem: int) -> int:
        """Blocks of this kernel resident per SM (the occupancy calculator's answer)."""
        from numba import cuda

        try:
            k = next(iter(self.kern.overloads.values()))
            return max(1, k.max_cooperative_grid_blocks(self.block, shmem) // _sm_count())
        except Exception:  # pragma: no cover - older numba-cuda
            dev = cuda.get_current_device()
            return max(1, (dev.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR - 1024) // max(shmem, 1))


def _sm_count() -> int:
    from numba import cuda

    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def _pack2(lo: int, hi: int) -> int:
    from ..gpu_intrinsics import pack2

    return pack2(lo, hi)
