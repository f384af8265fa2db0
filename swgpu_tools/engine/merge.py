"""Merging: the hits of every database part -> the final top-k per query, with
BLAST's bit scores and E-values over the whole database.

The parts' hits are arrays (:class:`~swgpu_tools.io.hitsfile.ShardHits`); they
are ordered with one integer sort (query, score, subject accession as a rank),
cut to ``top_k`` per query and filtered by E-value before any text is made, so
the merge holds the arrays and the final top-k only.
"""

from __future__ import annotations

import numpy as np

from .. import stats
from ..errors import InputError
from ..io.hitsfile import ShardHits
from ..io.tables import HITS_COLUMNS
from ..scoring import ScoringScheme
from ..sequences import SequenceSet


def merge(
    parts: list[ShardHits],
    queries: SequenceSet,
    db_residues: int,
    scheme: ScoringScheme,
    top_k: int = 500,
    max_evalue: float | None = 10.0,
):
    """Merge per-part hits into the final hits (:data:`~swgpu_tools.io.tables.HITS_COLUMNS`).

    Order: queries in input order; per query by descending score, then
    ascending subject accession (the same order whatever the sharding).
    E-values use ``db_residues`` (the whole database, or BLAST's ``-dbsize``)
    as BLAST+ blastp does by default (Karlin-Altschul with Spouge's
    finite-size correction, which also depends on the subject length); where
    BLAST publishes no statistics for the scheme, bitscore and evalue are NaN
    (written as NA) and no E-value filter applies.
    """
    import pandas as pd

    order_of_query = {q: i for i, q in enumerate(queries.ids)}
    qs, scores, subj, sub_off = [], [], [], [0]
    all_subjects: list[str] = []
    sseqid: list[str] = []
    stitle: list[str] = []
    slen: list[np.ndarray] = []
    for part in parts:
        qmap = np.array([order_of_query.get(a, -1) for a in part.queries], dtype=np.int64)
        if (qmap < 0).any():
            unknown = sorted(a for a, m in zip(part.queries, qmap) if m < 0)
            raise InputError(f"hits name queries that are not in the query file: {unknown[:5]}")
        qs.append(qmap[part.q])
        scores.append(part.score.astype(np.int64))
        subj.append(part.s.astype(np.int64) + sub_off[-1])
        sub_off.append(sub_off[-1] + len(part.subjects))
        all_subjects += part.subjects
        sseqid += part.sseqid
        stitle += part.stitle
        slen.append(part.slen)
    q = np.concatenate(qs) if qs else np.zeros(0, np.int64)
    score = np.concatenate(scores) if scores else np.zeros(0, np.int64)
    s = np.concatenate(subj) if subj else np.zeros(0, np.int64)
    lengths = np.concatenate(slen) if slen else np.zeros(0, np.int64)
    # subject accessions as ranks: ties by accession with an integer sort
    acc = np.asarray(all_subjects, dtype=object)
    if len(acc):
        _, rank = np.unique(acc.astype(str), return_inverse=True)
    else:
        rank = np.zeros(0, np.int64)
    order = np.lexsort((rank[s] if len(s) else s, -score, q))
    q, score, s = q[order], score[order], s[order]
    # top_k per query
    first = np.searchsorted(q, q, "left")
    keep = np.arange(len(q)) - first < top_k
    q, score, s = q[keep], score[keep], s[keep]
    qlen = queries.lengths[q].astype(np.int64)
    sl = lengths[s].astype(np.int64)
    params = stats.lookup(scheme.matrix_name, scheme.gap_open, scheme.gap_extend)
    if params is None:
        bits = np.full(len(q), np.nan)
        evalue = np.full(len(q), np.nan)
    else:
        raw = score.astype(np.float64)
        bits = np.asarray(stats.bit_score(raw, params), dtype=np.float64).reshape(-1)
        evalue = np.asarray(
            stats.spouge_evalue(raw, qlen, sl, db_residues, params), dtype=np.float64
        ).reshape(-1)
        if max_evalue is not None:
            ok = evalue <= max_evalue
            q, score, s, qlen, sl, bits, evalue = (
                x[ok] for x in (q, score, s, qlen, sl, bits, evalue)
            )
    qseqids = np.asarray(queries.seqids, dtype=object)
    qaccs = np.asarray(queries.ids, dtype=object)
    return pd.DataFrame(
        {
            "qseqid": qseqids[q],
            "sseqid": np.asarray(sseqid, dtype=object)[s] if len(s) else [],
            "qacc": qaccs[q],
            "sacc": acc[s] if len(s) else [],
            "score": score,
            "bitscore": bits,
            "evalue": evalue,
            "qlen": qlen,
            "slen": sl,
            "stitle": np.asarray(stitle, dtype=object)[s] if len(s) else [],
        },
        columns=HITS_COLUMNS,
    )
