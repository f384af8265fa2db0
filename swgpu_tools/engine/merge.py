"""Merging: the hits of every database part -> the final top-k per query, with
BLAST's bit scores and E-values over the whole database."""
from __future__ import annotations

import numpy as np

from .. import stats
from ..errors import InputError
from ..io.tables import HITS_COLUMNS, SHARD_HITS_COLUMNS
from ..scoring import ScoringScheme
from ..sequences import SequenceSet


def merge(hit_tables: list, queries: SequenceSet, db_residues: int, scheme: ScoringScheme,
          top_k: int = 500, max_evalue: float | None = 10.0):
    """Merge per-part hits (:data:`~swgpu_tools.io.tables.SHARD_HITS_COLUMNS`) into
    the final hits (:data:`~swgpu_tools.io.tables.HITS_COLUMNS`).

    Order: queries in input order; per query by descending score, then
    ascending subject accession (the same order whatever the sharding).
    E-values use ``db_residues`` (the whole database, or BLAST's ``-dbsize``)
    as BLAST+ blastp does by default (Karlin-Altschul with Spouge's
    finite-size correction, which also depends on the subject length); where
    BLAST publishes no statistics for the scheme, bitscore and evalue are NaN
    (written as NA) and no E-value filter applies.
    """
    import pandas as pd

    frames = [t for t in hit_tables if len(t)]
    if frames:
        hits = pd.concat(frames, ignore_index=True)
    else:
        hits = pd.DataFrame({c: pd.Series(dtype=np.int64 if c in ("score", "slen") else object)
                             for c in SHARD_HITS_COLUMNS})
    order_of_query = {q: i for i, q in enumerate(queries.ids)}
    qorder = hits["qacc"].map(order_of_query)
    if qorder.isna().any():
        unknown = sorted(set(hits["qacc"][qorder.isna()]))
        raise InputError(f"hits name queries that are not in the query file: {unknown[:5]}")
    hits["_qorder"] = qorder.astype(np.int64)
    hits = hits.sort_values(["_qorder", "score", "sacc"], ascending=[True, False, True],
                            kind="mergesort")
    hits = hits.groupby("_qorder", sort=False).head(top_k)
    qi = hits["_qorder"].to_numpy(np.int64)
    hits["qlen"] = queries.lengths[qi].astype(np.int64)
    hits["qseqid"] = np.asarray(queries.seqids, dtype=object)[qi]
    params = stats.lookup(scheme.matrix_name, scheme.gap_open, scheme.gap_extend)
    if params is None:
        hits["bitscore"] = np.nan
        hits["evalue"] = np.nan
    else:
        raw = hits["score"].to_numpy(np.float64)
        hits["bitscore"] = stats.bit_score(raw, params)
        hits["evalue"] = stats.spouge_evalue(raw, hits["qlen"].to_numpy(np.int64),
                                             hits["slen"].to_numpy(np.int64), db_residues,
                                             params)
        if max_evalue is not None:
            hits = hits[hits["evalue"] <= max_evalue]
    return hits[HITS_COLUMNS].reset_index(drop=True)
