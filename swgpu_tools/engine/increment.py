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

A re-scan's delta is often too small to be worth starting a GPU for:
:func:`delta_cells` and :func:`rescan_on_cpu` say when the CPU kernels score it
sooner (the scoring step then never starts CUDA).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..io.statefile import ShardState, sequence_hashes
from ..sequences import SequenceSet
from .rescan_lists import Cutoffs, merge_lists

#: search(query_indices, subject_indices or None for all, k) ->
#:     per query (in the order given): (subject indices into the shard, scores), best first
Search = Callable[[np.ndarray, np.ndarray | None, int], list]


@dataclass
class ShardResult:
    """Per query: the shard's best hits (subject indices, scores), and the new state."""

    top: list  # [(subject indices, scores)] per query, at most top_k each
    state: ShardState
    stats: dict = field(default_factory=dict)


class _Ranks:
    """Accession order of a shard's subjects as integers, so that hits sort and compare
    with numpy: ``rank[j]`` is subject j's place among the shard's accessions (j
    itself where the shard is sorted by accession, as shard files are), and
    :meth:`below` counts the shard's accessions below any accession."""

    def __init__(self, ids: list[str]):
        arr = np.asarray(ids, dtype=str) if ids else np.zeros(0, dtype=str)
        if len(arr) < 2 or bool((arr[1:] > arr[:-1]).all()):
            self.sorted, self.rank = arr, np.arange(len(arr), dtype=np.int64)
        else:
            order = np.argsort(arr, kind="stable")
            self.sorted = arr[order]
            self.rank = np.empty(len(arr), dtype=np.int64)
            self.rank[order] = np.arange(len(arr))

    def below(self, acc):
        """How many of the shard's accessions sort before ``acc`` (a string, or an
        array of them: an array of counts)."""
        if isinstance(acc, str):
            return int(np.searchsorted(self.sorted, acc, side="left"))
        return np.searchsorted(self.sorted, np.asarray(acc, dtype=str), side="left")


#: The cost model that sends a small re-scan to the CPU (see :func:`rescan_on_cpu`),
#: from measurements on an H100 host (benchmarks/RESULTS-workflow.md and
#: RESULTS-gpu.md): the GPU's start-up (driver, context, kernels: 2.6-3.1 s); its
#: cost per query pass on a small set of subjects, with many queries per launch
#: (kernels/gpu/batched.py: 2,000 queries against 1,663 subjects, 7.5e11 cells, in
#: 0.56 s; one query at a time took 9.1 s), and its scan rate; the CPU kernels'
#: rate per thread on such a delta (2.8e9 cells/s a thread on the H100 host's 16
#: threads) and the loading of their compiled code (a CPU job took 1.2-1.5 s of
#: scoring for 3e10 cells there).
GPU_START_S = 3.0
GPU_QUERY_S = 0.0002
GPU_CELLS_PER_S = 2e12
CPU_CELLS_PER_S_PER_THREAD = 2.5e9
CPU_START_S = 1.5


def delta_cells(
    queries: SequenceSet,
    shard: SequenceSet,
    scheme_digest: str,
    previous: ShardState | None,
    hashes: np.ndarray | None = None,
    qhashes: np.ndarray | None = None,
) -> tuple[float, int]:
    """(cells, query passes) that :func:`scan_shard` will score: every kept query
    against the delta, and the new or changed queries (all of them without a
    usable ``previous``) against the whole shard.  A lower bound: a query whose
    margin runs out is scored against the whole shard too."""
    hashes = sequence_hashes(shard) if hashes is None else hashes
    qhashes = sequence_hashes(queries) if qhashes is None else qhashes
    qlen = queries.lengths.astype(np.float64)
    if previous is None or previous.scheme != scheme_digest:
        return float(qlen.sum()) * float(shard.total_residues), len(queries)
    unchanged = _unchanged(_matched_subjects(shard, hashes, previous), len(shard))
    delta = int(shard.lengths[~unchanged].sum())
    kept = _kept_queries(queries, qhashes, previous) >= 0
    cells = float(qlen[kept].sum()) * delta + float(qlen[~kept].sum()) * shard.total_residues
    return cells, (int(kept.sum()) if delta else 0) + int((~kept).sum())


def _matched_subjects(shard: SequenceSet, hashes: np.ndarray, previous: ShardState) -> np.ndarray:
    """For each subject of ``previous``: its index in ``shard`` where it is there
    unchanged (same accession, same content hash), else -1."""
    prev_to_new = np.full(len(previous.subjects), -1, dtype=np.int64)
    if not len(previous.subjects) or not len(shard):
        return prev_to_new
    # accessions as numpy strings; shards are sorted by accession, so the sort is a no-op
    prev = _Ranks(list(previous.subjects))
    new = np.asarray(list(shard.ids), dtype=str)
    pos = np.minimum(np.searchsorted(prev.sorted, new), len(prev.sorted) - 1)
    same_acc = prev.sorted[pos] == new
    i = np.empty(len(prev.rank), dtype=np.int64)
    i[prev.rank] = np.arange(len(prev.rank))  # sorted place -> index in previous
    j = np.flatnonzero(same_acc)
    pi = i[pos[j]]
    same = previous.subject_hashes[pi] == np.asarray(hashes, dtype=np.uint64)[j]
    prev_to_new[pi[same]] = j[same]
    return prev_to_new


def _unchanged(prev_to_new: np.ndarray, n_sub: int) -> np.ndarray:
    """Which subjects of the shard are unchanged (from :func:`_matched_subjects`)."""
    unchanged = np.zeros(n_sub, dtype=bool)
    unchanged[prev_to_new[prev_to_new >= 0]] = True
    return unchanged


def _kept_queries(queries: SequenceSet, qhashes: np.ndarray, previous: ShardState) -> np.ndarray:
    """For each query: its index in ``previous`` where it is there with the same
    sequence (its stored hits are reusable), else -1."""
    prev_q = {a: q for q, a in enumerate(previous.queries)}
    prev_hashes = previous.query_hashes.tolist()
    out = np.full(len(queries), -1, dtype=np.int64)
    for q, (a, h) in enumerate(zip(queries.ids, qhashes.tolist())):
        pq = prev_q.get(a)
        if pq is not None and prev_hashes[pq] == h:
            out[q] = pq
    return out


def rescan_on_cpu(
    cells: float, passes: int, threads: int, gpu_start_s: float = GPU_START_S
) -> bool:
    """Whether scoring ``cells`` in ``passes`` query passes is faster on the CPU
    (``threads``) than starting the GPU for it (the cost model above);
    ``gpu_start_s``: what is left of the GPU's start-up (less where it began
    earlier, 0 once done, infinity where it failed)."""
    gpu = gpu_start_s + passes * GPU_QUERY_S + cells / GPU_CELLS_PER_S
    cpu = CPU_START_S + cells / (max(1, threads) * CPU_CELLS_PER_S_PER_THREAD)
    return cpu < gpu


def _cutoffs(previous, pq, ranks, shard, d_off, d_sub, d_score, delta_complete, keep) -> Cutoffs:
    """Each kept query's cut-offs (see :class:`~.rescan_lists.Cutoffs`): where its
    stored list was cut (its last hit; none where the list was complete), and where
    its delta list was (its last hit, where the delta had more subjects than the
    ``keep`` hits returned)."""

    def at_last(has, ends, scores, subjects, ids):
        """(score, accessions before it in the shard) of each list's last hit where
        ``has`` (``ends``: the lists' end offsets into ``scores``/``subjects``; ``ids``:
        the subjects' accessions), 0 elsewhere."""
        last = ends[has] - 1
        score = np.zeros(len(has), np.int64)
        below = np.zeros(len(has), np.int64)
        score[has] = scores[last]
        if has.any():
            below[has] = ranks.below([ids[j] for j in subjects[last].tolist()])
        return score, below

    off = previous.hit_offsets
    has_prev = ~previous.complete[pq].astype(bool) & (off[pq + 1] - off[pq] > 0)
    prev = at_last(
        has_prev, off[pq + 1], previous.hit_scores, previous.hit_subjects, previous.subjects
    )
    has_delta = (np.diff(d_off) >= keep) & (not delta_complete)  # keep >= 1
    delta = at_last(has_delta, d_off[1:], d_score, d_sub, shard.ids)
    return Cutoffs(has_prev, *prev, has_delta, *delta)


def scan_shard(
    queries: SequenceSet,
    shard: SequenceSet,
    scheme_digest: str,
    top_k: int,
    margin: int,
    previous: ShardState | None,
    search: Search,
    hashes: np.ndarray | None = None,
    qhashes: np.ndarray | None = None,
) -> ShardResult:
    """Every query's top ``top_k`` hits in ``shard``, reusing ``previous`` where exact.

    ``hashes``, ``qhashes``: :func:`~swgpu_tools.io.statefile.sequence_hashes` of
    the shard and the queries, where the caller has them already."""
    keep = top_k + margin
    n_sub = len(shard)
    ranks = _Ranks(shard.ids)
    hashes = sequence_hashes(shard) if hashes is None else hashes
    qhashes = sequence_hashes(queries) if qhashes is None else qhashes
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
        prev_to_new = _matched_subjects(shard, hashes, previous)
        delta = np.flatnonzero(~_unchanged(prev_to_new, n_sub))
        stats["delta_sequences"] = int(len(delta))
        stats["delta_residues"] = int(shard.lengths[delta].sum()) if len(delta) else 0
        kept_pq = _kept_queries(queries, qhashes, previous)
        inc = np.flatnonzero(kept_pq >= 0)
        pq = kept_pq[inc]
        delta_hits = (
            search(inc, delta, keep)
            if len(inc) and len(delta)
            else [(np.zeros(0, np.int64), np.zeros(0, np.int64))] * len(inc)
        )
        d_len = np.array([len(h[0]) for h in delta_hits], dtype=np.int64)
        d_off = np.zeros(len(inc) + 1, dtype=np.int64)
        np.cumsum(d_len, out=d_off[1:])
        cat = np.concatenate
        d_sub = cat([np.asarray(h[0], np.int64) for h in delta_hits]) if len(inc) else d_off[:0]
        d_score = cat([np.asarray(h[1], np.int64) for h in delta_hits]) if len(inc) else d_off[:0]
        cuts = _cutoffs(previous, pq, ranks, shard, d_off, d_sub, d_score, len(delta) <= keep, keep)
        starts, lens, out_sub, out_score, kind = merge_lists(
            pq, previous, prev_to_new, ranks.rank, d_off, d_sub, d_score, cuts, keep, top_k
        )
        full = [q for q in range(len(queries)) if kept_pq[q] < 0]
        for i, q in enumerate(inc.tolist()):
            if kind[i]:
                a, b = starts[i], starts[i] + lens[i]
                lists[q] = (out_sub[a:b], out_score[a:b], bool(kind[i] == 2))
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
