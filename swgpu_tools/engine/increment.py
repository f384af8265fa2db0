"""Scoring a shard again after a database release: only what changed.

A scoring job keeps, per query, the best ``top_k + margin`` hits of its shard
(:mod:`swgpu_tools.io.statefile`).  With a new release of the shard:

* subjects whose accession and sequence are unchanged keep their scores;
  removed and changed ones leave the lists; new and changed ones (the
  *delta*) are scored, every query against the delta only;
* hits are ordered by score, then accession (the kernels' tie rule: a shard is
  sorted by accession).  A query's stored list holds every unchanged subject
  that ranks above the list's last entry (its *cutoff*), so the merged list is
  exact down to the better of that cutoff and the delta's own cutoff;
* where removals ate into the margin so that fewer than ``top_k`` exact hits
  are left, that query is scored against the whole shard again (and gets its
  full margin back).  So is a query that is new or whose sequence changed, and
  every query when the scoring scheme changed or there is no usable state.

The shard's top ``top_k`` per query is then exactly what a scan from scratch
finds, whatever the history of releases, and so are the merged tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..io.statefile import ShardState, sequence_hashes
from ..sequences import SequenceSet

#: search(query_indices, subject_indices or None for all, k) ->
#:     per query (in the order given): (subject indices into the shard, scores), best first
Search = Callable[[np.ndarray, np.ndarray | None, int], list]


@dataclass
class ShardResult:
    """Per query: the shard's best hits (subject indices, scores), and the new state."""

    top: list  # [(subject indices, scores)] per query, at most top_k each
    state: ShardState
    stats: dict = field(default_factory=dict)


def _order(scores: np.ndarray, accs: np.ndarray) -> np.ndarray:
    """Indices sorting hits best first: score descending, then accession ascending."""
    return np.lexsort((accs, -scores.astype(np.int64)))


def _before(score: int, acc: str, bound) -> bool:
    """Whether a hit ranks strictly above ``bound`` ((score, accession) or None = no bound)."""
    if bound is None:
        return True
    bs, ba = bound
    return score > bs or (score == bs and acc < ba)


def scan_shard(
    queries: SequenceSet,
    shard: SequenceSet,
    scheme_digest: str,
    top_k: int,
    margin: int,
    previous: ShardState | None,
    search: Search,
) -> ShardResult:
    """Every query's top ``top_k`` hits in ``shard``, reusing ``previous`` where exact."""
    keep = top_k + margin
    n_sub = len(shard)
    accs = np.asarray(shard.ids, dtype=object)
    hashes = sequence_hashes(shard)
    qhashes = sequence_hashes(queries)
    stats = {
        "subjects": n_sub,
        "queries": len(queries),
        "mode": "full",
        "delta_sequences": 0,
        "delta_residues": 0,
        "full_queries": len(queries),
        "incremental_queries": 0,
        "margin_ran_out": 0,
    }
    lists: list = [None] * len(queries)  # (subject indices, scores, complete)
    full = list(range(len(queries)))
    usable = previous is not None and previous.scheme == scheme_digest
    if usable:
        stats["mode"] = "incremental"
        prev_index = {a: i for i, a in enumerate(previous.subjects)}
        prev_to_new = np.full(len(previous.subjects), -1, dtype=np.int64)
        unchanged = np.zeros(n_sub, dtype=bool)
        for j, a in enumerate(shard.ids):
            i = prev_index.get(a)
            if i is not None and previous.subject_hashes[i] == hashes[j]:
                unchanged[j] = True
                prev_to_new[i] = j
        delta = np.flatnonzero(~unchanged)
        stats["delta_sequences"] = int(len(delta))
        stats["delta_residues"] = int(shard.lengths[delta].sum()) if len(delta) else 0
        prev_q = {a: q for q, a in enumerate(previous.queries)}
        inc, kept_lists, cutoffs = [], {}, {}
        for q, a in enumerate(queries.ids):
            pq = prev_q.get(a)
            if pq is None or previous.query_hashes[pq] != qhashes[q]:
                continue
            subs, scores = previous.hits_of(pq)
            new_idx = prev_to_new[subs]
            ok = new_idx >= 0
            kept_lists[q] = (new_idx[ok], scores[ok].astype(np.int64))
            cutoffs[q] = (
                None
                if previous.complete[pq] or len(subs) == 0
                else (int(scores[-1]), previous.subjects[subs[-1]])
            )
            inc.append(q)
        delta_hits = (
            search(np.asarray(inc, dtype=np.int64), delta, keep)
            if len(inc) and len(delta)
            else [(np.zeros(0, np.int64), np.zeros(0, np.int64))] * len(inc)
        )
        delta_complete = len(delta) <= keep
        full = [q for q in range(len(queries)) if q not in kept_lists]
        for q, (dsub, dscore) in zip(inc, delta_hits):
            ksub, kscore = kept_lists[q]
            sub = np.concatenate([ksub, np.asarray(dsub, dtype=np.int64)])
            score = np.concatenate([kscore, np.asarray(dscore, dtype=np.int64)])
            order = _order(score, accs[sub] if len(sub) else np.zeros(0, dtype=object))
            sub, score = sub[order], score[order]
            c_d = None
            if not delta_complete and len(dsub) >= keep:
                last = int(np.asarray(dsub)[-1])
                c_d = (int(np.asarray(dscore)[-1]), shard.ids[last])
            bounds = [b for b in (cutoffs[q], c_d) if b is not None]
            bound = min(bounds, key=lambda b: (-b[0], b[1])) if bounds else None
            exact = len(sub)
            if bound is not None:
                exact = 0
                while exact < len(sub) and _before(int(score[exact]), shard.ids[sub[exact]], bound):
                    exact += 1
            complete = bound is None and len(sub) <= keep
            sub, score = sub[: min(exact, keep)], score[: min(exact, keep)]
            if complete or len(sub) >= top_k:
                lists[q] = (sub, score, complete)
            else:
                full.append(q)
                stats["margin_ran_out"] += 1
        stats["incremental_queries"] = len(queries) - len(full)
        stats["full_queries"] = len(full)
    if full:
        full = sorted(full)
        for q, (sub, score) in zip(full, search(np.asarray(full, dtype=np.int64), None, keep)):
            sub = np.asarray(sub, dtype=np.int64)
            lists[q] = (sub, np.asarray(score, dtype=np.int64), n_sub <= keep)
    offsets = np.zeros(len(queries) + 1, dtype=np.int64)
    np.cumsum([len(x[0]) for x in lists], out=offsets[1:])
    state = ShardState(
        scheme=scheme_digest,
        top_k=top_k,
        margin=margin,
        subjects=list(shard.ids),
        subject_hashes=hashes,
        queries=list(queries.ids),
        query_hashes=qhashes,
        hit_offsets=offsets,
        hit_subjects=np.concatenate([x[0] for x in lists]).astype(np.int32)
        if lists
        else np.zeros(0, np.int32),
        hit_scores=np.concatenate([x[1] for x in lists]).astype(np.int32)
        if lists
        else np.zeros(0, np.int32),
        complete=np.array([x[2] for x in lists], dtype=bool),
    )
    top = [(x[0][:top_k], x[1][:top_k]) for x in lists]
    return ShardResult(top, state, stats)
