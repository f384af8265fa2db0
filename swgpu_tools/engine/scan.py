"""Scoring: the top-k Smith-Waterman hits of every query in a set of subjects."""
from __future__ import annotations

import os
import time

import numpy as np

from ..backend import BackendStart, StartedBackend
from ..errors import InputError
from ..io.tables import SHARD_HITS_COLUMNS
from ..logs import ProgressBar, get_logger
from ..scoring import ScoringScheme
from ..sequences import SequenceSet

log = get_logger(__name__)


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = float(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None


def score(queries: SequenceSet, database: SequenceSet, scheme: ScoringScheme,
          top_k: int = 500, backend: str = "auto", threads: int | None = None,
          device="auto", started: BackendStart | None = None,
          stats: dict | None = None):
    """Top-k hits of each query in ``database``: a DataFrame of
    :data:`~swgpu_tools.io.tables.SHARD_HITS_COLUMNS` (qacc, sacc, score, slen,
    sseqid, stitle), per query (in query order) by descending score, ties by
    ascending database index.

    ``started``: a :class:`~swgpu_tools.backend.BackendStart` begun earlier (its
    backend and device replace ``backend`` and ``device``).  ``stats``: a dict
    that gets backend, reason, device, queries, sequences, residues, cells,
    kernel_s, gcups, startup_s.
    """
    import pandas as pd

    if top_k < 1:
        raise InputError(f"top_k must be at least 1, got {top_k}")
    q_enc = scheme.encode(queries, "queries")
    d_enc = scheme.encode(database, "database")
    if started is None:
        started = BackendStart(backend, device)
    run: StartedBackend = started.result()
    log.info(run.describe())
    if run.steps:
        log.debug("start-up: " + ", ".join(f"{k} {v:.2f} s" for k, v in run.steps.items()))
    if threads:
        import numba

        numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
    cells_per_query = queries.lengths.astype(np.float64) * float(database.total_residues)
    start = time.perf_counter()
    bar = ProgressBar(len(queries), "scoring", "queries", log)
    last = [start]

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        elapsed = now - start
        gcups = cells_per_query[:done].sum() / max(elapsed, 1e-9) / 1e9
        bar.update(done)
        if done == 1:
            age = process_age()
            if age is not None:
                log.info(f"process start to first hits: {age:.2f} s")
        if done == total or now - last[0] >= 5.0 or log.isEnabledFor(10):
            last[0] = now
            log.info(f"queries {done}/{total} done, {elapsed:.1f} s, {gcups:.2f} GCUPS so far")

    try:
        hits = run.searcher().search(q_enc, d_enc, scheme, top_k, progress=progress)
    finally:
        bar.close()
    elapsed = time.perf_counter() - start
    cells = float(cells_per_query.sum())
    gcups = cells / max(elapsed, 1e-9) / 1e9
    if stats is not None:
        stats.update(backend=run.name, reason=run.choice.reason, device=run.gpu_id,
                     device_uuid=run.device_uuid, queries=len(queries),
                     query_residues=queries.total_residues, sequences=len(database),
                     residues=database.total_residues, cells=cells, kernel_s=elapsed,
                     gcups=gcups, startup_s=run.steps)
    log.info(f"scored {len(queries)} queries x {len(database):,} sequences "
             f"({database.total_residues:,} residues) in {elapsed:.2f} s: {gcups:.2f} GCUPS")
    qacc = np.asarray(queries.ids, dtype=object)
    sacc = np.asarray(database.ids, dtype=object)
    seqids = np.asarray(database.seqids, dtype=object)
    titles = np.asarray(database.titles, dtype=object)
    si = hits.subject_index
    return pd.DataFrame({
        "qacc": qacc[hits.query_index],
        "sacc": sacc[si],
        "score": hits.score.astype(np.int64),
        "slen": database.lengths[si].astype(np.int64),
        "sseqid": seqids[si],
        "stitle": titles[si],
    }, columns=SHARD_HITS_COLUMNS)
