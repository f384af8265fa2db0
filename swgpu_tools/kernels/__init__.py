"""Scoring kernels: the contract every backend implements, and the result type.

Two backends implement it, :mod:`.cpu` (Numba, SIMD lanes, all cores) and
:mod:`.gpu` (Numba CUDA).  :mod:`swgpu_tools.backend` decides which one runs
and hands out an object that satisfies these protocols; nothing else picks a
backend.

:class:`SearchBackend` -- database search::

    backend.search(queries, database, scheme, top_k, progress=None) -> TopHits

* ``queries``, ``database``: :class:`~swgpu_tools.sequences.EncodedSequences`
  (uint8 matrix codes, int64 offsets), encoded by ``scheme``.
* ``scheme``: the frozen, validated :class:`~swgpu_tools.scoring.ScoringScheme`
  (int32 matrix of at most 32 x 32; BLAST gap convention, a gap of length k
  costs ``gap_open + k * gap_extend``).  Backends do not validate it again.
* ``top_k``: hits kept per query (the best scores of the database; ties broken
  by the lower database index, which is the lower id inside a shard).
* ``progress``: optional callable ``progress(queries_done, n_queries)``.

It returns the exact local-alignment (Smith-Waterman) score of every kept
(query, subject) pair, as 32-bit integers, for sequences of any length.  Pairs
with score 0 are kept like any other when top_k reaches them.

:class:`PairBackend` -- the score-only passes of given pairs (the part of an
alignment before its traceback)::

    backend.pair_regions(queries, subjects, query_index, subject_index, scheme, mode)
        -> int64 array (n, 5): best score, query start, query end, subject start,
           subject end (0-based, ends exclusive), per pair

``mode`` is ``"local"`` or ``"semiglobal"``; the tie rules are those of
:mod:`swgpu_tools.alignment`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from ..scoring import ScoringScheme
    from ..sequences import EncodedSequences

#: ``progress(queries_done, n_queries)``
Progress = Callable[[int, int], None]


@dataclass
class TopHits:
    """Best hits per query, sorted by query, then score (descending), then subject.

    query_index, subject_index: int32 indices into the query and database sets.
    score: int32 Smith-Waterman scores.
    """

    query_index: np.ndarray
    subject_index: np.ndarray
    score: np.ndarray

    def __len__(self) -> int:
        return len(self.score)

    @classmethod
    def from_per_query(cls, hits) -> TopHits:
        """The hits of ``hits``, one (subject indices, scores) pair per query in query
        order, each already sorted."""
        if not len(hits):
            e = np.zeros(0, np.int32)
            return cls(e, e.copy(), e.copy())
        return cls(
            np.concatenate([np.full(len(h[0]), qi, np.int32) for qi, h in enumerate(hits)]),
            np.concatenate([h[0] for h in hits]).astype(np.int32),
            np.concatenate([h[1] for h in hits]).astype(np.int32),
        )


@runtime_checkable
class SearchBackend(Protocol):
    """Scores every query against a database; keeps the top k per query."""

    #: "cpu" or "gpu"
    name: str

    def search(
        self,
        queries: EncodedSequences,
        database: EncodedSequences,
        scheme: ScoringScheme,
        top_k: int,
        progress: Progress | None = None,
        segments: np.ndarray | None = None,
    ) -> TopHits:
        """Top ``top_k`` hits per query.  ``segments`` (start index of each run of
        subjects, then the subject count): the top ``top_k`` of each run, sorted
        by query, then run, then score (descending), then subject; one search
        where a re-scan scores several shards' new sequences at once."""
        ...


@runtime_checkable
class PairBackend(Protocol):
    """Score-only passes (best score, end and start cell) of given pairs."""

    #: "cpu" or "gpu"
    name: str

    def pair_regions(
        self,
        queries: EncodedSequences,
        subjects: EncodedSequences,
        query_index: np.ndarray,
        subject_index: np.ndarray,
        scheme: ScoringScheme,
        mode: str,
    ) -> np.ndarray: ...


def gpu_chooses_hits() -> bool:
    """Whether a batched GPU search may choose each row's best hits on the GPU
    (``$SWGPU_GPU_TOPK`` not '0'; '0' keeps the host's choice, for measuring: the
    same hits).  Numba-free, for the warm process's standby too."""
    return os.environ.get("SWGPU_GPU_TOPK", "1") != "0"


def segment_places(segments, k: int) -> np.ndarray:
    """Where each segment's hits begin in a query's hits of a search with ``segments``
    (see :class:`SearchBackend`) that kept ``min(k, segment length)`` in each, then
    their number (int64): the running sum of those counts.  The layout of
    :func:`~swgpu_tools.kernels.topk.top_rows`' rows and of the batched GPU search's
    choice."""
    sizes = np.minimum(np.diff(np.asarray(segments, dtype=np.int64)), max(0, int(k)))
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def by_segment(search, queries, database, top_k: int, segments, progress=None) -> TopHits:
    """A search with ``segments`` (see :class:`SearchBackend`) as one search per
    segment: ``search(queries, part, top_k, progress)`` -> TopHits of ``part``."""
    qi, si, sc = [], [], []
    for a, b in zip(np.asarray(segments[:-1]).tolist(), np.asarray(segments[1:]).tolist()):
        if b > a:
            th = search(queries, database.slice(a, b), top_k, progress)
            qi.append(th.query_index)
            si.append(th.subject_index.astype(np.int64) + a)
            sc.append(th.score)
    if not qi:
        e = np.zeros(0, np.int32)
        return TopHits(e, e.copy(), e.copy())
    q = np.concatenate(qi)
    order = np.argsort(q, kind="stable")  # per query, the segments in order
    return TopHits(
        q[order].astype(np.int32),
        np.concatenate(si)[order].astype(np.int32),
        np.concatenate(sc)[order].astype(np.int32),
    )


def top_k_from_scores(scores: np.ndarray, top_k: int) -> TopHits:
    """Select the top_k hits of each row of a full (n_queries x n_subjects) score array."""
    nq, ns = scores.shape
    k = min(top_k, ns)
    q_parts, s_parts, v_parts = [], [], []
    subjects = np.arange(ns, dtype=np.int64)
    for q in range(nq):
        row = scores[q]
        # lexsort: last key is primary -> score descending, then subject ascending
        order = np.lexsort((subjects, -row.astype(np.int64)))[:k]
        q_parts.append(np.full(k, q, dtype=np.int32))
        s_parts.append(order.astype(np.int32))
        v_parts.append(row[order].astype(np.int32))
    if not q_parts:
        empty = np.zeros(0, np.int32)
        return TopHits(empty, empty.copy(), empty.copy())
    return TopHits(np.concatenate(q_parts), np.concatenate(s_parts), np.concatenate(v_parts))
