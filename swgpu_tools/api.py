"""The Python API: a few typed functions over in-memory data.

    import swgpu_tools as sw
    queries = sw.read_fasta("queries.fasta")
    database = sw.read_fasta("database.fasta.gz")
    scheme = sw.ScoringScheme("BLOSUM62", gap_open=11, gap_extend=1)
    result = sw.search(queries, database, scheme, top_k=10)
    result.hits          # pandas DataFrame: qseqid sseqid qacc sacc score bitscore evalue qlen slen stitle
    result.alignments    # pandas DataFrame: every BLAST field (swgpu_tools.io.fields.FIELDS)
    aln = sw.align("MKTAYIAKQR", "MKTAHIAKQR", scheme, mode="global")

Parameter names follow Biopython's ``PairwiseAligner`` where they overlap
(``mode``, ``match_score``/``mismatch_score`` in :class:`ScoringScheme` as
``match``/``mismatch``); gap costs follow BLAST (a gap of k costs
``gap_open + k * gap_extend``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .scoring import ScoringScheme
from .sequences import SequenceSet

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .alignment import Alignment

__all__ = ["SearchResult", "search", "align"]


@dataclass
class SearchResult:
    """What :func:`search` returns."""

    #: the merged hits (:data:`swgpu_tools.io.tables.HITS_COLUMNS`), queries in
    #: input order, each by descending score
    hits: pd.DataFrame
    #: one alignment per hit, every field of :data:`swgpu_tools.io.fields.FIELDS`
    alignments: pd.DataFrame
    #: what scored the database: "gpu" or "cpu", and why
    backend: str
    reason: str


def _as_set(x, what: str) -> SequenceSet:
    if isinstance(x, SequenceSet):
        return x
    if isinstance(x, (str, os.PathLike)):
        from .io.fasta import read_fasta

        return read_fasta(x)
    raise TypeError(f"{what} must be a SequenceSet or a FASTA path, got {type(x).__name__}")


def search(
    queries,
    database,
    scheme: ScoringScheme | None = None,
    *,
    top_k: int = 500,
    max_evalue: float | None = 10.0,
    dbsize: int | None = None,
    backend: str = "auto",
    threads: int | None = None,
    device="auto",
) -> SearchResult:
    """Search ``queries`` against ``database`` (SequenceSets or FASTA paths).

    Exact Smith-Waterman scores, top ``top_k`` per query, BLAST E-values over the
    database (or ``dbsize`` residues, BLAST's ``-dbsize``) with hits above
    ``max_evalue`` dropped, and one optimal alignment per hit.
    """
    from .engine.merge import merge
    from .engine.scan import score
    from .engine.traceback import traceback

    scheme = scheme or ScoringScheme()
    q = _as_set(queries, "queries")
    d = _as_set(database, "database")
    # sorted by accession, as in a shard, so that ties at the top-k boundary fall the same way
    d = d.subset(sorted(range(len(d)), key=d.ids.__getitem__))
    info: dict = {}
    raw = score(q, d, scheme, top_k, backend=backend, threads=threads, device=device, stats=info)
    hits = merge([raw], q, int(dbsize) if dbsize else d.total_residues, scheme, top_k, max_evalue)
    alignments = traceback(hits, q, d, scheme, threads)
    return SearchResult(hits, alignments, info.get("backend", ""), info.get("reason", ""))


def align(
    query: str, subject: str, scheme: ScoringScheme | None = None, mode: str = "local"
) -> Alignment:
    """One optimal alignment of two sequences (letters) in ``mode``: ``"local"``,
    ``"global"`` or ``"semiglobal"`` (the whole query against part of the subject)."""
    import numpy as np

    from .alignment import align as _align

    scheme = scheme or ScoringScheme()
    pair = SequenceSet.from_sequences(
        ["query", "subject"], [query.upper().encode(), subject.upper().encode()]
    )
    enc = scheme.encode(pair, "sequences")
    codes = np.split(enc.codes, [int(enc.offsets[1])])
    return _align(codes[0], codes[1], scheme.matrix, scheme.gap_open, scheme.gap_extend, mode=mode)
