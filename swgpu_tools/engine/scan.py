"""Scoring: the top-k Smith-Waterman hits of every query in a set of subjects."""

from __future__ import annotations

import time

import numpy as np

from ..backend import BackendStart, StartedBackend
from ..errors import InputError
from ..io.hitsfile import ShardHits
from ..io.stepstats import process_age
from ..logs import ProgressBar, get_logger
from ..scoring import ScoringScheme
from ..sequences import EncodedSequences, SequenceSet

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
    indices, and counts the cells and seconds it spent."""

    def __init__(self, searcher, q_enc, d_enc, scheme: ScoringScheme, progress=None):
        self.searcher, self.q_enc, self.d_enc, self.scheme = searcher, q_enc, d_enc, scheme
        self.progress = progress
        self.cells = 0.0
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, qi: np.ndarray, si: np.ndarray | None, k: int) -> list:
        qi = np.asarray(qi, dtype=np.int64)
        q = self.q_enc.subset(qi)
        d = self.d_enc if si is None else self.d_enc.subset(si)
        t = time.perf_counter()
        hits = self.searcher.search(q, d, self.scheme, k, progress=self.progress)
        self.seconds += time.perf_counter() - t
        self.cells += float(q.lengths.sum()) * float(d.total_residues)
        self.calls += 1
        bounds = np.searchsorted(hits.query_index, np.arange(len(qi) + 1))
        out = []
        for p in range(len(qi)):
            a, b = bounds[p], bounds[p + 1]
            sub = hits.subject_index[a:b].astype(np.int64)
            if si is not None:
                sub = np.asarray(si, dtype=np.int64)[sub]
            out.append((sub, hits.score[a:b].astype(np.int64)))
        return out


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
    from .increment import scan_shard

    if top_k < 1:
        raise InputError(f"top_k must be at least 1, got {top_k}")
    check_score_range(queries, database, scheme)
    check_align_range(queries, database, scheme)
    q_enc = scheme.encode(queries, "queries")
    d_enc = scheme.encode(database, "database") if encoded is None else encoded
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
    start = time.perf_counter()
    bar = ProgressBar(len(queries), "scoring", "queries", log)
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

    search = SubsetSearch(run.searcher(), q_enc, d_enc, scheme, progress)
    try:
        result = scan_shard(
            queries, database, scheme.digest, top_k, margin, previous, search, hashes, qhashes
        )
    finally:
        bar.close()
    elapsed = time.perf_counter() - start
    gcups = search.cells / max(search.seconds, 1e-9) / 1e9
    info = dict(result.stats)
    info.update(
        backend=run.name,
        reason=run.choice.reason,
        device=run.gpu_id,
        device_uuid=run.device_uuid,
        query_residues=queries.total_residues,
        sequences=len(database),
        residues=database.total_residues,
        cells=search.cells,
        kernel_s=search.seconds,
        scan_s=elapsed,
        gcups=gcups,
        passes=search.calls,
        startup_s=run.steps,
        startup_wait_s=round(waited, 4),
        full_scan_cells=float(queries.total_residues) * float(database.total_residues),
    )
    if stats is not None:
        stats.update(info)
    what = (
        f"{info['mode']}: {info['delta_sequences']:,} new or changed sequences, "
        f"{info['full_queries']} of {len(queries)} queries against the whole shard"
        f" ({info['margin_ran_out']} where the margin ran out); "
        if info["mode"] == "incremental"
        else ""
    )
    log.info(
        f"scored {len(queries)} queries x {len(database):,} sequences "
        f"({database.total_residues:,} residues): {what}{search.cells:.3g} cells in "
        f"{search.seconds:.2f} s, {gcups:.2f} GCUPS"
    )
    return ShardHits.from_top(queries, database, result.top), result.state
