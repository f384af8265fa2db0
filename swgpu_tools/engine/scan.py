"""Scoring: the top-k Smith-Waterman hits of every query in a set of subjects."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..backend import BackendStart, StartedBackend
from ..errors import InputError
from ..io.hitsfile import ShardHits
from ..jobtimes import process_age
from ..kernels import segment_places
from ..logs import ProgressBar, get_logger
from ..scoring import ScoringScheme
from ..sequences import EncodedSequences, SequenceSet
from .increment import Lists

log = get_logger(__name__)


#: The largest local score the kernels hold (int32, with room for the gap costs).
MAX_SCORE = (1 << 31) - (1 << 20)


def check_score_range(queries: SequenceSet, database: SequenceSet, scheme: ScoringScheme) -> None:
    """InputError, before any scoring, when a local score could leave the kernels' int32
    range: a local score is at most min(query length, subject length) x the best
    substitution score."""
    if not len(queries) or not len(database) or scheme.max_score <= 0:
        return
    qi = int(np.argmax(queries.lengths))
    si = int(np.argmax(database.lengths))
    m, n = int(queries.lengths[qi]), int(database.lengths[si])
    if min(m, n) * scheme.max_score > MAX_SCORE:
        raise InputError(
            f"query '{queries.ids[qi]}' ({m:,} residues) against subject '{database.ids[si]}' "
            f"({n:,} residues) could score up to {min(m, n) * scheme.max_score:,} with "
            f"{scheme.matrix_name}, beyond the {MAX_SCORE:,} the kernels hold; split the "
            f"longer sequences"
        )


def check_align_range(queries: SequenceSet, database: SequenceSet, scheme: ScoringScheme) -> None:
    """InputError, before any scoring, when a hit of the longest query and the longest
    subject could not be aligned afterwards (the aligner's int32 cells hold pairs
    of at most :func:`~swgpu_tools.scoring.longest_alignable_pair`
    residues in all); without this check such a hit would be scored and then
    fail in the traceback."""
    if not len(queries) or not len(database):
        return
    from .. import scoring

    limit = scoring.longest_alignable_pair(scheme.matrix, scheme.gap_open, scheme.gap_extend)
    qi = int(np.argmax(queries.lengths))
    si = int(np.argmax(database.lengths))
    m, n = int(queries.lengths[qi]), int(database.lengths[si])
    if m + n > limit:
        raise InputError(
            f"query '{queries.ids[qi]}' ({m:,} residues) and subject '{database.ids[si]}' "
            f"({n:,} residues) have {m + n:,} residues together, more than the "
            f"{limit:,} an alignment can hold with {scheme.matrix_name} "
            f"{scheme.gap_open}/{scheme.gap_extend}; split the longer sequences"
        )


class SubsetSearch:
    """The :data:`~swgpu_tools.engine.increment.Search` of a backend over encoded
    queries and subjects: scores subsets, maps the hits back to whole-set
    indices, and counts the cells and seconds it spent.  ``d_enc`` may be a
    function that encodes the subjects when a search first needs all of them
    (a re-scan scores most queries against the new sequences only)."""

    def __init__(self, searcher, q_enc, d_enc, scheme: ScoringScheme, progress=None, shard=None):
        self.searcher, self.q_enc, self._d_enc, self.scheme = searcher, q_enc, d_enc, scheme
        self.shard = shard  # the SequenceSet, to encode subsets without all of it
        self.progress = progress
        self.cells = 0.0
        self.seconds = 0.0
        self.calls = 0
        self.backend_s: dict[str, float] = {}  # a GPU backend's setup, plan and scan seconds

    @property
    def d_enc(self) -> EncodedSequences:
        if callable(self._d_enc):
            self._d_enc = self._d_enc()
        return self._d_enc

    def subjects(self, si) -> EncodedSequences:
        """The subjects at ``si`` (all where None), encoded."""
        if si is None:
            return self.d_enc
        if callable(self._d_enc) and self.shard is not None:
            return self.scheme.encode(self.shard.subset(si), "database")
        return self.d_enc.subset(si)

    def __call__(self, qi: np.ndarray, si: np.ndarray | None, k: int) -> Lists:
        qi = np.asarray(qi, dtype=np.int64)
        q = self.q_enc.subset(qi)
        d = self.subjects(si)
        t = time.perf_counter()
        hits = self.searcher.search(q, d, self.scheme, k, progress=self.progress)
        self.seconds += time.perf_counter() - t
        _add_backend_times(self.backend_s, self.searcher)
        self.cells += float(q.lengths.sum()) * float(d.total_residues)
        self.calls += 1
        return lists_of(hits, len(qi), None if si is None else np.asarray(si, np.int64))


def lists_of(hits, n_queries: int, subjects: np.ndarray | None = None) -> Lists:
    """:class:`~swgpu_tools.kernels.TopHits` (sorted by query) as :class:`Lists`;
    ``subjects``: the whole-set index of each searched subject."""
    off = np.searchsorted(hits.query_index, np.arange(n_queries + 1)).astype(np.int64)
    sub = hits.subject_index.astype(np.int64)
    return Lists(off, sub if subjects is None else subjects[sub], hits.score.astype(np.int64))


def score(
    queries: SequenceSet,
    database: SequenceSet,
    scheme: ScoringScheme,
    top_k: int = 500,
    backend: str = "auto",
    threads: int | None = None,
    device="auto",
    started: BackendStart | None = None,
    stats: dict | None = None,
):
    """Top-k hits of each query in ``database``: a
    :class:`~swgpu_tools.io.hitsfile.ShardHits`, per query (in query order) by
    descending score, ties by ascending database index.

    ``started``: a :class:`~swgpu_tools.backend.BackendStart` begun earlier (its
    backend and device replace ``backend`` and ``device``).  ``stats``: a dict
    that gets backend, reason, device, queries, sequences, residues, cells,
    kernel_s, gcups, startup_s.
    """
    table, _ = scan(
        queries,
        database,
        scheme,
        top_k,
        backend=backend,
        threads=threads,
        device=device,
        started=started,
        stats=stats,
    )
    return table


@dataclass
class ShardInput:
    """One shard for :func:`scan_shards`: its sequences, its stored state (or None),
    and where the caller has them, its content hashes and its encoded residues."""

    database: SequenceSet
    previous: object = None  # ShardState | None
    hashes: np.ndarray | None = None
    encoded: EncodedSequences | None = None
    plan: object = None  # its increment.ShardPlan, where the caller made it already


def scan(
    queries: SequenceSet,
    database: SequenceSet,
    scheme: ScoringScheme,
    top_k: int = 500,
    margin: int = 0,
    previous=None,
    backend: str = "auto",
    threads: int | None = None,
    device="auto",
    started: BackendStart | None = None,
    stats: dict | None = None,
    hashes: np.ndarray | None = None,
    qhashes: np.ndarray | None = None,
    encoded: EncodedSequences | None = None,
):
    """:func:`score`, keeping ``margin`` more hits per query in the returned state
    and reusing ``previous`` (a :class:`~swgpu_tools.io.statefile.ShardState` of an
    earlier release of ``database``) where exact; returns (table, new state).
    See :mod:`swgpu_tools.engine.increment` (``hashes``, ``qhashes``: the
    sequences' content hashes, and ``encoded``: ``database`` encoded for
    ``scheme``, where the caller has them already)."""
    ((table, state),) = scan_shards(
        queries,
        [ShardInput(database, previous, hashes, encoded)],
        scheme,
        top_k,
        margin,
        backend=backend,
        threads=threads,
        device=device,
        started=started,
        stats=None if stats is None else [stats],
        qhashes=qhashes,
    )
    return table, state


def scan_shards(
    queries: SequenceSet,
    shards: list[ShardInput],
    scheme: ScoringScheme,
    top_k: int = 500,
    margin: int = 0,
    backend: str = "auto",
    threads: int | None = None,
    device="auto",
    started: BackendStart | None = None,
    stats: list[dict] | None = None,
    qhashes: np.ndarray | None = None,
) -> list:
    """:func:`scan` of several shards with one backend: (table, new state) per
    shard.  The new and changed sequences of all the shards that have a usable
    state are scored in one search (each shard's best hits chosen on its own:
    ``segments`` of :class:`~swgpu_tools.kernels.SearchBackend`), which keeps a
    GPU busier than one small search per shard.  ``stats``: one dict per shard
    that gets its statistics (as :func:`score`'s)."""
    from ..io.statefile import sequence_hashes
    from .increment import finish_shard, plan_shard

    if top_k < 1:
        raise InputError(f"top_k must be at least 1, got {top_k}")
    for sh in shards:
        check_score_range(queries, sh.database, scheme)
        check_align_range(queries, sh.database, scheme)
    qhashes = sequence_hashes(queries) if qhashes is None else qhashes
    t_plan = time.perf_counter()
    plans = [
        sh.plan
        if sh.plan is not None
        else plan_shard(queries, sh.database, scheme.digest, sh.previous, sh.hashes, qhashes)
        for sh in shards
    ]
    t_plan = time.perf_counter() - t_plan
    q_enc = scheme.encode(queries, "queries")
    if started is None:
        started = BackendStart(backend, device)
    waited = time.perf_counter()
    run: StartedBackend = started.result()
    waited = time.perf_counter() - waited  # the start-up left when the inputs were ready
    log.info(run.describe())
    if run.steps:
        log.debug("start-up: " + ", ".join(f"{k} {v:.2f} s" for k, v in run.steps.items()))
    if threads:
        import numba

        numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
    searcher = run.searcher()
    bar = ProgressBar(len(queries), "scoring", "queries", log)
    progress = _progress_logger(bar)
    out = []
    try:
        t0 = time.perf_counter()
        joint = _joint_deltas(plans, searcher, q_enc, scheme, top_k + margin, queries, progress)
        joint_s = time.perf_counter() - t0
        for i, (sh, plan) in enumerate(zip(shards, plans)):
            start = time.perf_counter()
            encoded = sh.encoded
            search = SubsetSearch(
                searcher,
                q_enc,
                encoded
                if encoded is not None
                else (lambda db=sh.database: scheme.encode(db, "database")),
                scheme,
                progress,
                shard=sh.database,
            )
            result = finish_shard(
                queries, plan, scheme.digest, top_k, margin, search, qhashes, joint.hits[i]
            )
            t_table = time.perf_counter()
            top = result.top
            table = ShardHits.from_lists(
                queries, sh.database, top.offsets, top.subjects, top.scores
            )
            elapsed = time.perf_counter() - start
            share = joint.seconds[i] / joint.kernel_s if joint.kernel_s else 0.0
            cells = search.cells + joint.cells[i]
            kernel_s = search.seconds + joint.seconds[i]
            info = dict(result.stats)
            info.update(
                backend=run.name,
                reason=run.choice.reason,
                device=run.gpu_id,
                device_uuid=run.device_uuid,
                query_residues=queries.total_residues,
                sequences=len(sh.database),
                residues=sh.database.total_residues,
                cells=cells,
                kernel_s=kernel_s,
                scan_s=elapsed + share * joint_s,
                gcups=cells / max(kernel_s, 1e-9) / 1e9,
                passes=search.calls + joint.passes[i],
                startup_s=run.steps,
                started_by=run.origin,  # this job, or the warm process's GPU standby
                startup_wait_s=round(waited, 4) if i == 0 else 0.0,
                full_scan_cells=float(queries.total_residues) * float(sh.database.total_residues),
                scan_phases_s={
                    "plan": round(t_plan / len(shards), 4),
                    "joint_delta": round(share * joint_s, 4),
                    "search": round(search.seconds, 4),
                    "lists": round(t_table - start - search.seconds, 4),
                    "table": round(time.perf_counter() - t_table, 4),
                    **{f"gpu_{k}": round(v, 4) for k, v in search.backend_s.items()},
                },
            )
            if joint.group_of[i] is not None:
                info["joint_delta_shards"] = joint.group_of[i]
                if joint.backend_s:  # the joint search's whole
                    info["joint_search_s"] = {k: round(v, 4) for k, v in joint.backend_s.items()}
            if stats is not None:
                stats[i].update(info)
            _log_scan(info, queries, sh.database)
            out.append((table, result.state))
    finally:
        bar.close()
    return out


def _progress_logger(bar: ProgressBar):
    """The searches' progress: the bar, the first hits' time since the process
    started, and a log line every 5 s."""
    start = time.perf_counter()
    last = [start]
    first = [True]

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        bar.update(done)
        if first[0]:
            first[0] = False
            age = process_age()
            if age is not None:
                log.info(f"process start to first hits: {age:.2f} s")
        if done == total or now - last[0] >= 5.0:
            last[0] = now
            log.info(f"queries {done}/{total} of a pass done, {now - start:.1f} s")

    return progress


def _log_scan(info: dict, queries: SequenceSet, database: SequenceSet) -> None:
    what = (
        f"{info['mode']}: {info['delta_sequences']:,} new or changed sequences, "
        f"{info['full_queries']} of {len(queries)} queries against the whole shard"
        f" ({info['margin_ran_out']} where the margin ran out); "
        if info["mode"] == "incremental"
        else ""
    )
    log.info(
        f"scored {len(queries)} queries x {len(database):,} sequences "
        f"({database.total_residues:,} residues): {what}{info['cells']:.3g} cells in "
        f"{info['kernel_s']:.2f} s, {info['gcups']:.2f} GCUPS"
    )


def _add_backend_times(into: dict, searcher) -> None:
    """Add the searcher's last search's own seconds (a GPU backend's ``last_times``:
    setup, plan, scan, a batched search's waits and host work) to ``into``."""
    for key, value in (getattr(searcher, "last_times", None) or {}).items():
        into[key] = into.get(key, 0.0) + value


@dataclass
class _Joint:
    """The delta hits of :func:`_joint_deltas`, per shard (None: none scored), with
    each shard's share of the cells, seconds and passes."""

    hits: list
    cells: list
    seconds: list
    passes: list
    group_of: list  # per shard: how many shards its search served (None: no search)
    kernel_s: float = 0.0
    #: the searches' own seconds as the backend gives them (a GPU's setup, plan, scan,
    #: and a batched search's waits for the GPU and host work), summed
    backend_s: dict = field(default_factory=dict)


def _split_segments(th, segs: np.ndarray, k: int, n_queries: int) -> list:
    """A search's hits by segment (sorted by query, then segment): per segment
    (offsets per query, subject index within the segment, score).  Every query
    has ``min(k, segment length)`` hits in each segment where the search kept
    that many (the batched GPU search does): then by columns of one reshape."""
    start = segment_places(segs, k)
    sizes = np.diff(start)
    per = int(start[-1])
    out = []
    if per and len(th) == n_queries * per:
        subj = th.subject_index.reshape(n_queries, per)
        score = th.score.reshape(n_queries, per)
        for g, size in enumerate(sizes.tolist()):
            cols = slice(int(start[g]), int(start[g]) + size)
            off = np.arange(n_queries + 1, dtype=np.int64) * size
            local = subj[:, cols].reshape(-1).astype(np.int64) - segs[g]
            out.append((off, local, score[:, cols].reshape(-1).astype(np.int64)))
        return out
    seg_of = np.searchsorted(segs, th.subject_index, "right") - 1
    for g in range(len(segs) - 1):
        m = seg_of == g
        q = th.query_index[m]
        off = np.searchsorted(q, np.arange(n_queries + 1)).astype(np.int64)
        local = th.subject_index[m].astype(np.int64) - segs[g]
        out.append((off, local, th.score[m].astype(np.int64)))
    return out


def _joint_deltas(plans, searcher, q_enc, scheme, keep: int, queries, progress) -> _Joint:
    """Every kept query against the new and changed sequences of all shards that
    have them, one search per set of kept queries (normally one: the queries of
    the last scan), each shard's best ``keep`` chosen on its own."""
    n = len(plans)
    joint = _Joint([None] * n, [0.0] * n, [0.0] * n, [0] * n, [None] * n)
    groups: dict = {}
    for i, p in enumerate(plans):
        if p.previous is not None and len(p.delta) and len(p.inc):
            groups.setdefault(p.inc.tobytes(), []).append(i)
    qlen = queries.lengths.astype(np.float64)
    for members in groups.values():
        inc = plans[members[0]].inc
        parts = [scheme.encode(plans[i].shard.subset(plans[i].delta), "database") for i in members]
        segs = np.concatenate([[0], np.cumsum([len(x) for x in parts])]).astype(np.int64)
        lengths = np.concatenate([x.lengths for x in parts])
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        union = EncodedSequences(np.concatenate([x.codes for x in parts]), offsets)
        t = time.perf_counter()
        kw = {"segments": segs} if len(members) > 1 else {}
        th = searcher.search(q_enc.subset(inc), union, scheme, keep, progress=progress, **kw)
        seconds = time.perf_counter() - t
        joint.kernel_s += seconds
        _add_backend_times(joint.backend_s, searcher)
        q_cells = float(qlen[inc].sum())
        total = q_cells * union.total_residues
        for g, (i, lists) in enumerate(zip(members, _split_segments(th, segs, keep, len(inc)))):
            off, local, score = lists
            joint.hits[i] = Lists(off, plans[i].delta[local], score)
            joint.cells[i] = q_cells * parts[g].total_residues
            joint.seconds[i] = seconds * joint.cells[i] / max(total, 1.0)
            joint.passes[i] = 1 if g == 0 else 0
            joint.group_of[i] = len(members)
    return joint
