"""Scoring kernels: one module for the CPU (:mod:`.cpu`), one for the GPU (:mod:`.gpu`).

Both backends implement the same contract::

    search(queries, database, matrix, gap_open, gap_extend, top_k, progress=None) -> TopHits

* ``queries``, ``database``: :class:`~swgpu_tools.sequences.EncodedSequences`
  (uint8 matrix codes, int64 offsets).
* ``matrix``: int32 square array indexed by those codes (at most 32 x 32).
* ``gap_open``, ``gap_extend``: BLAST convention, a gap of length k costs
  ``gap_open + k * gap_extend`` (both >= 0, not both 0).
* ``top_k``: hits kept per query (the best scores of the database; ties broken
  by the lower database index, which is the lower id inside a shard).
* ``progress``: optional callable ``progress(queries_done, n_queries)``.

It returns the exact local-alignment (Smith-Waterman) score of every kept
(query, subject) pair, as 32-bit integers, for sequences of any length.  Pairs
with score 0 are kept like any other when top_k reaches them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
