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
:func:`plan_cells` and :func:`rescan_on_cpu` say when the CPU kernels score it
sooner (the scoring step then never starts CUDA).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from ..io.statefile import ShardState, sequence_hashes
from ..sequences import SequenceSet
from .rescan_lists import Cutoffs, merge_lists

#: search(query_indices, subject_indices or None for all, k) -> :class:`Lists` of
#: the queries in the order given (subject indices into the shard), best first
Search = Callable[[np.ndarray, np.ndarray | None, int], "Lists"]


@dataclass
class Lists:
    """Hit lists of several queries in CSR form: query i's hits are
    ``subjects[offsets[i]:offsets[i + 1]]`` (int64) with their ``scores`` (int64)."""

    offsets: np.ndarray
    subjects: np.ndarray
    scores: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Lists:
        z = np.zeros(0, np.int64)
        return cls(np.zeros(n + 1, np.int64), z, z.copy())

    @classmethod
    def from_pairs(cls, pairs) -> Lists:
        """From per-query (subjects, scores)."""
        off = np.zeros(len(pairs) + 1, np.int64)
        np.cumsum([len(p[0]) for p in pairs], out=off[1:])
        if not len(pairs):
            return cls.empty(0)
        sub = np.concatenate([np.asarray(p[0], np.int64) for p in pairs])
        return cls(off, sub, np.concatenate([np.asarray(p[1], np.int64) for p in pairs]))

    @classmethod
    def gather(cls, starts, lengths, subjects: np.ndarray, scores: np.ndarray) -> Lists:
        """List i is ``subjects[starts[i]:starts[i] + lengths[i]]`` (and its scores)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        off = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=off[1:])
        if not len(lengths):
            return cls(off, subjects[:0], scores[:0])
        # one copy of each list's run (a few thousand runs of ~1,000 hits: memcpy, not
        # a gather by index)
        runs = list(zip(np.asarray(starts, dtype=np.int64).tolist(), lengths.tolist()))
        return cls(
            off,
            np.concatenate([subjects[a : a + n] for a, n in runs]),
            np.concatenate([scores[a : a + n] for a, n in runs]),
        )

    def heads(self, k: int) -> Lists:
        """Each list's first ``k`` hits."""
        return Lists.gather(
            self.offsets[:-1], np.minimum(np.diff(self.offsets), k), self.subjects, self.scores
        )

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self):
        """Per query: (subjects, scores)."""
        off = self.offsets.tolist()
        for a, b in zip(off[:-1], off[1:]):
            yield self.subjects[a:b], self.scores[a:b]


@dataclass
class ShardPlan:
    """What scoring a shard takes (:func:`plan_shard`): the shard, its sequences'
    content hashes, and where a usable ``previous`` state was given, how its
    subjects map to the shard and which are new or changed."""

    shard: SequenceSet
    hashes: np.ndarray
    previous: ShardState | None  # None: no usable state (every query scored whole)
    prev_to_new: np.ndarray | None
    delta: np.ndarray  # int64: the new and changed subjects (empty without a state)
    kept: np.ndarray  # int64 per query: its index in ``previous`` (hits reusable), else -1
    ranks: _Ranks | None = None  # the shard's accession order (with a usable state)

    @property
    def inc(self) -> np.ndarray:
        """The queries whose stored hits are reused (scored against the delta only)."""
        return np.flatnonzero(self.kept >= 0)

    @property
    def delta_residues(self) -> int:
        return int(self.shard.lengths[self.delta].sum()) if len(self.delta) else 0


@dataclass
class ShardResult:
    """Per query: the shard's best hits (subject indices, scores), and the new state."""

    top: Lists  # per query (subject indices, scores), at most top_k each
    state: ShardState
    stats: dict = field(default_factory=dict)


class _Ranks:
    """Accession order of a shard's subjects as integers, so that hits sort and compare
    with numpy: ``rank[j]`` is subject j's place among the shard's accessions (j
    itself where the shard is sorted by accession, as shard files are), and
    :meth:`below` counts the shard's accessions below any accession.  A sorted
    shard's accessions stay a list (bisected: no array of 110,000 strings)."""

    def __init__(self, ids):
        ids = ids if isinstance(ids, list) else list(ids)
        self.list = ids
        if len(ids) < 2 or ids == sorted(ids):  # (sorted: one linear pass on sorted ids)
            self.sorted = None
            self.rank = np.arange(len(ids), dtype=np.int64)
        else:
            arr = np.asarray(ids, dtype=str)
            order = np.argsort(arr, kind="stable")
            self.sorted = arr[order]
            self.rank = np.empty(len(arr), dtype=np.int64)
            self.rank[order] = np.arange(len(arr))

    def below(self, acc):
        """How many of the shard's accessions sort before ``acc`` (a string, or an
        array of them: an array of counts)."""
        if self.sorted is not None:
            if isinstance(acc, str):
                return int(np.searchsorted(self.sorted, acc, side="left"))
            return np.searchsorted(self.sorted, np.asarray(acc, dtype=str), side="left")
        if isinstance(acc, str):
            return bisect.bisect_left(self.list, acc)
        out = [bisect.bisect_left(self.list, a) for a in acc]
        return np.asarray(out, dtype=np.int64)


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


def plan_shard(
    queries: SequenceSet,
    shard: SequenceSet,
    scheme_digest: str,
    previous: ShardState | None,
    hashes: np.ndarray | None = None,
    qhashes: np.ndarray | None = None,
    seconds: dict | None = None,
) -> ShardPlan:
    """Match ``shard`` and ``queries`` against ``previous`` (see the module);
    ``hashes``, ``qhashes``: :func:`~swgpu_tools.io.statefile.sequence_hashes` of
    the shard and the queries, where the caller has them already; ``seconds``: gets
    the seconds of each part added (ranks, subjects, queries)."""
    hashes = sequence_hashes(shard) if hashes is None else hashes
    none = np.zeros(0, np.int64)
    if previous is None or previous.scheme != scheme_digest:
        return ShardPlan(shard, hashes, None, None, none, np.full(len(queries), -1, np.int64))
    qhashes = sequence_hashes(queries) if qhashes is None else qhashes
    t = [time.perf_counter()]
    ranks = _Ranks(shard.ids)
    t.append(time.perf_counter())
    prev_to_new = _matched_subjects(shard, hashes, previous)
    delta = np.flatnonzero(~_unchanged(prev_to_new, len(shard))).astype(np.int64)
    t.append(time.perf_counter())
    kept = _kept_queries(queries, qhashes, previous)
    t.append(time.perf_counter())
    if seconds is not None:
        for k, a, b in zip(("ranks", "subjects", "queries"), t, t[1:]):
            seconds[k] = round(seconds.get(k, 0.0) + b - a, 4)
    return ShardPlan(shard, hashes, previous, prev_to_new, delta, kept, ranks)


def plan_cells(queries: SequenceSet, plan: ShardPlan) -> tuple[float, int]:
    """(cells, query passes) that :func:`finish_shard` will score for ``plan``: every
    kept query against the delta, and the others against the whole shard.  A
    lower bound: a query whose margin runs out is scored against the whole
    shard too."""
    qlen = queries.lengths.astype(np.float64)
    kept = plan.kept >= 0
    delta = plan.delta_residues
    cells = float(qlen[kept].sum()) * delta + float(qlen[~kept].sum()) * plan.shard.total_residues
    return cells, (int(kept.sum()) if delta else 0) + int((~kept).sum())


def group_cells(queries: SequenceSet, plans: list[ShardPlan]) -> tuple[float, int]:
    """:func:`plan_cells` of shards scored together (:func:`~.scan.scan_shards`): the
    cells summed; the passes of the kept queries over all deltas counted once."""
    cells = sum(plan_cells(queries, p)[0] for p in plans)
    kept = max((int((p.kept >= 0).sum()) for p in plans if p.delta_residues), default=0)
    return cells, kept + sum(int((p.kept < 0).sum()) for p in plans)


def _matched_subjects(shard: SequenceSet, hashes: np.ndarray, previous: ShardState) -> np.ndarray:
    """For each subject of ``previous``: its index in ``shard`` where it is there
    unchanged (same accession, same content hash), else -1."""
    from ..kernels.seqhash import match_sorted

    prev_to_new = np.full(len(previous.subjects), -1, dtype=np.int64)
    if not len(previous.subjects) or not len(shard):
        return prev_to_new
    # both lists of accessions in ascending byte order (a shard's are): one compiled
    # pass over their bytes (a dict of the previous ones took ~0.05 s a shard on an
    # H200 host; arrays of strings ~0.1 s a shard on a busy host)
    among = previous.subjects_blob
    if among is None:
        among = "\n".join(previous.subjects).encode("utf-8")
    pos = match_sorted(
        "\n".join(shard.ids).encode("utf-8"), len(shard), among, len(previous.subjects)
    )
    if pos is None:  # not both ascending: each accession looked up in a dict
        index = dict(zip(previous.subjects, range(len(previous.subjects))))
        pos = np.fromiter(map(index.get, shard.ids, repeat(-1)), dtype=np.int64, count=len(shard))
    j = np.flatnonzero(pos >= 0)
    pi = pos[j]
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
    """Every query's top ``top_k`` hits in ``shard``, reusing ``previous`` where exact:
    :func:`finish_shard` of :func:`plan_shard`."""
    qhashes = sequence_hashes(queries) if qhashes is None else qhashes
    plan = plan_shard(queries, shard, scheme_digest, previous, hashes, qhashes)
    return finish_shard(queries, plan, scheme_digest, top_k, margin, search, qhashes)


def finish_shard(
    queries: SequenceSet,
    plan: ShardPlan,
    scheme_digest: str,
    top_k: int,
    margin: int,
    search: Search,
    qhashes: np.ndarray,
    delta_hits: Lists | None = None,
) -> ShardResult:
    """Every query's top ``top_k`` hits in the plan's shard: the kept queries' stored
    hits merged with their best ``top_k + margin`` among the delta (``delta_hits``
    where the caller scored them already, in :attr:`ShardPlan.inc` order, subject
    indices into the shard; else scored here with ``search``); the other queries,
    and those whose margin ran out, scored against the whole shard."""
    keep = top_k + margin
    shard, previous = plan.shard, plan.previous
    n_sub = len(shard)
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
    # each query's list in a pool of lists: the merged ones, then the full searches'
    nq = len(queries)
    start = np.zeros(nq, np.int64)
    length = np.zeros(nq, np.int64)
    complete = np.zeros(nq, dtype=bool)
    pool_sub, pool_score = [], []
    full = np.arange(nq, dtype=np.int64)
    if previous is not None:
        ranks = plan.ranks if plan.ranks is not None else _Ranks(shard.ids)
        stats["mode"] = "incremental"
        delta = plan.delta
        stats["delta_sequences"] = int(len(delta))
        stats["delta_residues"] = plan.delta_residues
        inc = plan.inc
        pq = plan.kept[inc]
        if delta_hits is None:
            delta_hits = (
                search(inc, delta, keep) if len(inc) and len(delta) else Lists.empty(len(inc))
            )
        d_off, d_sub, d_score = delta_hits.offsets, delta_hits.subjects, delta_hits.scores
        cuts = _cutoffs(previous, pq, ranks, shard, d_off, d_sub, d_score, len(delta) <= keep, keep)
        starts, lens, out_sub, out_score, kind = merge_lists(
            pq, previous, plan.prev_to_new, ranks.rank, d_off, d_sub, d_score, cuts, keep, top_k
        )
        good = kind != 0
        mine = inc[good]
        start[mine], length[mine], complete[mine] = starts[good], lens[good], kind[good] == 2
        pool_sub.append(out_sub)
        pool_score.append(out_score)
        ran_out = inc[~good]  # the margin ran out: scored against the whole shard
        stats["margin_ran_out"] = int(len(ran_out))
        full = np.sort(np.concatenate([np.flatnonzero(plan.kept < 0), ran_out]))
        stats["incremental_queries"] = nq - len(full)
        stats["full_queries"] = int(len(full))
    if len(full):
        got = search(full.astype(np.int64), None, keep)
        start[full] = sum(len(x) for x in pool_sub) + got.offsets[:-1]
        length[full] = np.diff(got.offsets)
        complete[full] = n_sub <= keep
        pool_sub.append(np.asarray(got.subjects, np.int64))
        pool_score.append(np.asarray(got.scores, np.int64))
    if pool_sub:
        lists = Lists.gather(start, length, np.concatenate(pool_sub), np.concatenate(pool_score))
    else:
        lists = Lists.empty(nq)
    state = ShardState(
        scheme=scheme_digest,
        top_k=top_k,
        margin=margin,
        subjects=list(shard.ids),
        subject_hashes=plan.hashes,
        queries=list(queries.ids),
        query_hashes=qhashes,
        hit_offsets=lists.offsets,
        hit_subjects=lists.subjects.astype(np.int32),
        hit_scores=lists.scores.astype(np.int32),
        complete=complete,
    )
    top = lists.heads(top_k)
    return ShardResult(top, state, stats)
