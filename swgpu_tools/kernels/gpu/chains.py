"""Short queries chained: several queries scored by one set of launches.

A query's scan costs its rows plus a fixed part: each pass of a partition kernel
fills its G-lane pipeline (G - 1 steps) and loads its subject letters, and each
query has its own launches and two host round trips (histogram, candidates).  For a
144-aa query on a 50 M-residue shard that fixed part was a third of the time
(RESULTS-gpu.md, run 14: 71 % of a long query's speed).  Here the queries shorter
than :data:`ALONE_ROWS` are put one after another into **chains** of about
:data:`CHAIN_ROWS` rows; the scoring kernels (``templates/score_kernel.py.in``)
restart the recurrence at each member's first row and write each member's best to
its own score row, so a chain is planned, launched and finished as one query of its
total length, and each member gets its own top k.  A longer query is a unit of its
own (a chain of one member: the same kernels, no member window).

The layout of a chain: each member's rows (table row offsets, as for one query),
padded with the padding letter to an even number of rows and to at least
``min_rows`` (the widest group of the shape menu: a member window is G steps, and a
window must end before the next one starts); padding rows score below every letter
and cannot raise a member's best.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .codegen import PADQ

#: A chain closes once it holds this many rows.
CHAIN_ROWS = 4096
#: Queries at least this long are scanned alone (their fill is already small: the
#: planner's cost model puts a 2,048-aa query within 1 % of the longest ones).
ALONE_ROWS = 2048
#: Members of one chain at most, and at most :data:`MEMBER_WORDS` score words
#: (members x subjects) per chain in flight.
MAX_MEMBERS = 64
MEMBER_WORDS = 1 << 25


def units(qlens: np.ndarray, nmax: int, min_rows: int) -> list[np.ndarray]:
    """Query indices of each unit, in query order: a query with no residues or at least
    :data:`ALONE_ROWS` long alone, the others chained in the order they come (a chain
    closes at :data:`CHAIN_ROWS` rows, :data:`MAX_MEMBERS` members, or
    :data:`MEMBER_WORDS` score words for ``nmax`` subjects).  ``$SWGPU_CHAINS=0``:
    every query alone (for comparisons)."""
    cap = max(1, min(MAX_MEMBERS, MEMBER_WORDS // max(int(nmax), 1)))
    if not enabled():
        cap = 1
    out: list[np.ndarray] = []
    open_: list[int] = []
    rows = 0
    for qi, L in enumerate(np.asarray(qlens).tolist()):
        if L == 0 or L >= ALONE_ROWS or cap == 1:
            out.append(np.array([qi], dtype=np.int64))
            continue
        open_.append(qi)
        rows += padded_rows(L, min_rows)
        if rows >= CHAIN_ROWS or len(open_) == cap:
            out.append(np.array(open_, dtype=np.int64))
            open_, rows = [], 0
    if open_:
        out.append(np.array(open_, dtype=np.int64))
    out.sort(key=lambda u: int(u[0]))  # in the order of their first query
    return out


def enabled() -> bool:
    """Whether short queries are chained (``$SWGPU_CHAINS=0``: no, for comparisons)."""
    return os.environ.get("SWGPU_CHAINS", "1") != "0"


def unit_rows(mean_qlen: float) -> float:
    """Rows of a typical unit for queries of this mean length: a chain's
    :data:`CHAIN_ROWS` for short queries (the query's own length without chains)."""
    return max(float(mean_qlen), float(CHAIN_ROWS) if enabled() else 0.0)


def padded_rows(L: int, min_rows: int) -> int:
    """Rows a member of length L takes in a chain (even, at least ``min_rows``)."""
    L = max(int(L), int(min_rows))
    return L + (L & 1)


@dataclass
class Layout:
    """Row offsets of every unit, uploaded once: unit u's rows are
    ``qoff[starts[u] : starts[u + 1]]`` (PADQ padding rows on each side), its
    ``lengths[u]`` rows long, its members' first rows ``mstart[mstarts[u] : ...]``."""

    qoff: object  # device array (int32)
    starts: np.ndarray
    lengths: np.ndarray
    mstart: object  # device array (int32)
    mstarts: np.ndarray
    members: list

    def rows(self, u: int):
        """(row offsets, rows, member starts) of unit ``u`` (device views)."""
        m = len(self.members[u])
        return (
            self.qoff[self.starts[u] : self.starts[u + 1]],
            int(self.lengths[u]),
            self.mstart[self.mstarts[u] : self.mstarts[u] + m + 1],
        )


def layout_arrays(qcodes, qoffs, members: list, cmap, rowstride: int, min_rows: int):
    """Host arrays of every unit's rows: (row offsets, unit starts in them, unit rows,
    member first rows, unit starts in those).  ``cmap``: query code -> table row; a row's
    offset is its table row x ``rowstride`` x 4 bytes; padding rows are 0 (the padding
    letter's row)."""
    qlens = np.diff(qoffs)
    lengths = np.zeros(len(members), dtype=np.int64)
    firsts: list[np.ndarray] = []
    for u, mem in enumerate(members):
        if len(mem) == 1:
            rows = np.array([int(qlens[mem[0]])], dtype=np.int64)
        else:
            rows = np.array([padded_rows(qlens[qi], min_rows) for qi in mem.tolist()])
        first = np.zeros(len(mem) + 1, dtype=np.int64)
        np.cumsum(rows, out=first[1:])
        lengths[u] = first[-1]
        firsts.append(first)
    sizes = np.where(lengths > 0, lengths + 2 * PADQ, 0)
    starts = np.zeros(len(members) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    allq = np.zeros(max(int(starts[-1]), 1), dtype=np.int32)
    scale = np.int64(rowstride * 4)
    for u, mem in enumerate(members):
        if not lengths[u]:
            continue
        base = starts[u] + PADQ
        for j, qi in enumerate(mem.tolist()):
            a, b = int(qoffs[qi]), int(qoffs[qi + 1])
            o = base + firsts[u][j]
            allq[o : o + b - a] = cmap[qcodes[a:b]] * scale
    mstarts = np.zeros(len(members) + 1, dtype=np.int64)
    np.cumsum([len(f) for f in firsts], out=mstarts[1:])
    mstart = np.concatenate(firsts).astype(np.int32) if firsts else np.zeros(1, np.int32)
    return allq, starts, lengths, mstart, mstarts


def layout(qcodes, qoffs, members: list, cmap, rowstride: int, min_rows: int) -> Layout:
    """:func:`layout_arrays` uploaded, one copy each."""
    from numba import cuda

    allq, starts, lengths, mstart, mstarts = layout_arrays(
        qcodes, qoffs, members, cmap, rowstride, min_rows
    )
    return Layout(cuda.to_device(allq), starts, lengths, cuda.to_device(mstart), mstarts, members)
