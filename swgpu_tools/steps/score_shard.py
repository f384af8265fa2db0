"""Step ``score_shard``: every query against one shard -> that shard's top-k hits."""

from __future__ import annotations

import os

from ..backend import BackendStart
from ..engine.increment import delta_cells, rescan_on_cpu
from ..engine.scan import scan
from ..io.fasta import read_fasta
from ..io.hitsfile import write_shard_hits
from ..io.shardfile import read_shard
from ..io.statefile import read_state, sequence_hashes, write_state
from ..io.stepstats import StepTimer
from ..logs import get_logger
from ..scoring import ScoringScheme

log = get_logger(__name__)


def score_shard(
    shard_path,
    queries_path,
    out_path,
    scheme: ScoringScheme,
    top_k: int = 500,
    backend: str = "auto",
    threads: int | None = None,
    device="auto",
    stats_path=None,
    state_path=None,
    margin: int | None = None,
):
    """Score every query of ``queries_path`` against one shard; write its top-k hits.

    ``state_path``: the job's memory of the shard (:mod:`swgpu_tools.io.statefile`):
    read first (when present and usable, only new and changed sequences are
    scored, :mod:`swgpu_tools.engine.increment`) and written after the table,
    with ``margin`` (default ``top_k``) more hits per query than the table.
    """
    margin = top_k if margin is None else int(margin)
    timer = StepTimer("score_shard")
    has_state = bool(state_path) and os.path.exists(state_path)
    started = None
    if not has_state or backend == "cpu":
        # the GPU's start-up (lock, CUDA context, helper kernels) runs while the inputs are read
        started = BackendStart(backend, device, background=backend != "cpu", scheme=scheme)
    with timer.phase("read"):
        queries = read_fasta(queries_path)
        database = read_shard(shard_path)
    log.info(
        f"{os.fspath(shard_path)}: {len(database):,} sequences, "
        f"{database.total_residues:,} residues; {len(queries)} queries"
    )
    timer.fields["shard"] = os.path.basename(os.fspath(shard_path))
    previous = read_state(state_path) if has_state else None
    if has_state and previous is None:
        log.warning(f"{state_path}: unreadable; scoring the whole shard")
    hashes = qhashes = None
    if started is None:  # a re-scan: the GPU is started only where the delta is worth it
        hashes, qhashes = sequence_hashes(database), sequence_hashes(queries)
        cells, passes = delta_cells(queries, database, scheme.digest, previous, hashes, qhashes)
        cpus = threads or (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        )
        use = backend
        if rescan_on_cpu(cells, passes, cpus):
            use = "cpu"
            log.info(
                f"re-scan of {cells:.3g} cells in {passes} query passes: scored on the CPU "
                f"({cpus} threads), sooner than starting the GPU"
            )
        timer.fields["rescan_estimate"] = {"cells": cells, "passes": passes, "backend": use}
        started = BackendStart(use, device, scheme=scheme)
    with timer.phase("score"):
        hits, state = scan(
            queries,
            database,
            scheme,
            top_k,
            margin,
            previous,
            threads=threads,
            started=started,
            stats=timer.fields,
            hashes=hashes,
            qhashes=qhashes,
        )
    with timer.phase("write"):
        write_shard_hits(out_path, hits)
        if state_path:
            write_state(state_path, state)  # after the table: a kill in between only rescores
    timer.fields["hits"] = len(hits)
    timer.write(stats_path)
    log.info(f"wrote {len(hits):,} hits to {os.fspath(out_path)}")
    return hits
