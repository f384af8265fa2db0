"""Step ``merge_hits``: the hits of all shards -> ``hits.tsv`` (top-k per query,
BLAST bit scores and E-values over the whole database)."""

from __future__ import annotations

import importlib
import os
import threading

from ..cpus import usable_cpus
from ..engine.merge import merge
from ..health import note_hit_tables
from ..io.fasta import read_fasta
from ..io.hitsfile import read_shard_hits
from ..io.shardfile import read_database_info
from ..io.stepstats import StepTimer
from ..io.tables import HITS_COLUMNS, write_table
from ..logs import get_logger
from ..scoring import ScoringScheme

log = get_logger(__name__)


def merge_hits(
    hit_paths,
    queries_path,
    database_info_path,
    out_path,
    scheme: ScoringScheme,
    top_k: int = 500,
    max_evalue: float | None = 10.0,
    dbsize: int | None = None,
    stats_path=None,
    threads: int | None = None,
):
    """Merge the shard hit tables into ``out_path`` (hits.tsv).

    ``dbsize``: the database size (residues) for E-values, as BLAST's ``-dbsize``
    (default: the whole database's residues from ``database.json``).  ``threads``:
    CPU threads for choosing the queries' top k (default: every CPU this process
    may use).
    """
    timer = StepTimer("merge_hits")
    # pandas (0.4 s on the 2-core machine, ~1 s on an H100 host) is needed only for
    # the table at the end: imported on a thread while the hits are read and sorted
    threading.Thread(target=importlib.import_module, args=("pandas",), daemon=True).start()
    with timer.phase("read"):
        queries = read_fasta(queries_path)
        info = read_database_info(database_info_path)
    residues = int(dbsize) if dbsize else int(info["residues"])
    sizes: list[int] = []

    stamps: dict = {}  # each table's stat before it was read in full

    def tables():  # one shard's hits at a time: the merge keeps only the running top-k
        for p in hit_paths:
            st = os.stat(p)
            t = read_shard_hits(p, lazy=True)
            stamps[p] = st
            sizes.append(len(t))
            yield t

    with timer.phase("merge"):  # reading the shards' hits included
        hits = merge(
            tables(), queries, residues, scheme, top_k, max_evalue, threads=threads or usable_cpus()
        )
    with timer.phase("write"):
        write_table(hits, out_path, HITS_COLUMNS)
        note_hit_tables(stamps)  # the next run's start-up check need not read them
    timer.fields.update(
        shard_hits=sum(sizes),
        hits=len(hits),
        shards=len(sizes),
        db_residues=residues,
    )
    timer.write(stats_path)
    log.info(
        f"merged {sum(sizes):,} shard hits from {len(sizes)} shards into "
        f"{len(hits):,} hits: {os.fspath(out_path)}"
    )
    return hits
