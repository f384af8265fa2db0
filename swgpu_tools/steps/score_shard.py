"""Step ``score_shard``: every query against one shard -> that shard's top-k hits."""

from __future__ import annotations

import os

from ..backend import BackendStart
from ..engine.scan import scan
from ..io.fasta import read_fasta
from ..io.hitsfile import write_shard_hits
from ..io.shardfile import read_shard
from ..io.statefile import read_state, write_state
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
    previous = read_state(state_path) if state_path and os.path.exists(state_path) else None
    if state_path and os.path.exists(state_path) and previous is None:
        log.warning(f"{state_path}: unreadable; scoring the whole shard")
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
        )
    with timer.phase("write"):
        write_shard_hits(out_path, hits)
        if state_path:
            write_state(state_path, state)  # after the table: a kill in between only rescores
    timer.fields["hits"] = len(hits)
    timer.write(stats_path)
    log.info(f"wrote {len(hits):,} hits to {os.fspath(out_path)}")
    return hits
