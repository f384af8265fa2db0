"""What changed between two scans of a query set: the rows of ``changes.tsv``.

:func:`compare` lists, per query (in query order), the hits that are ``new``
(in the later scan, not in the earlier), ``gone`` (in the earlier, not in the
later: the subject was removed, changed, or fell below the top-k or E-value
cut-off) or ``score`` (same query and subject, different score), with both
scores and both E-values.  A hit whose score did not change is not listed, even
if its E-value moved with the database size.  Without an earlier scan every hit
is ``new``.  Which scans are compared is :mod:`swgpu_tools.steps.history`'s
business: the current release against the previous release.
"""

from __future__ import annotations

CHANGES_COLUMNS = [
    "qseqid",
    "sseqid",
    "qacc",
    "sacc",
    "change",
    "previous_score",
    "score",
    "previous_evalue",
    "evalue",
    "slen",
]
CHANGE_ORDER = {"new": 0, "score": 1, "gone": 2}


def compare(previous, current, query_order: list[str] | None = None):
    """The ``changes.tsv`` rows between two hits tables (DataFrames of text columns)."""
    import numpy as np
    import pandas as pd

    cols = ["qseqid", "sseqid", "qacc", "sacc", "score", "evalue", "slen"]
    cur = current[cols].copy()
    if previous is None:
        prev = pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    else:
        prev = previous[cols].copy()
    both = prev.merge(cur, on=["qacc", "sacc"], how="outer", suffixes=("_prev", ""), indicator=True)
    change = np.where(
        both["_merge"] == "right_only",
        "new",
        np.where(both["_merge"] == "left_only", "gone", "same"),
    )
    both["change"] = change
    same = both["change"] == "same"
    moved = same & (both["score_prev"].astype(str) != both["score"].astype(str))
    both.loc[moved, "change"] = "score"
    both = both[both["change"] != "same"].copy()
    gone = both["change"] == "gone"
    both["slen"] = both["slen"].where(~gone, both["slen_prev"])
    both["qseqid"] = both["qseqid"].where(~gone, both["qseqid_prev"])
    both["sseqid"] = both["sseqid"].where(~gone, both["sseqid_prev"])
    out = pd.DataFrame(
        {
            "qseqid": both["qseqid"],
            "sseqid": both["sseqid"],
            "qacc": both["qacc"],
            "sacc": both["sacc"],
            "change": both["change"],
            "previous_score": both["score_prev"],
            "score": both["score"],
            "previous_evalue": both["evalue_prev"],
            "evalue": both["evalue"],
            "slen": both["slen"],
        }
    ).fillna("NA")
    if query_order is None:
        query_order = list(dict.fromkeys(list(cur["qacc"]) + list(prev["qacc"])))
    rank = {q: i for i, q in enumerate(query_order)}
    out["_q"] = out["qacc"].map(lambda q: rank.get(q, len(rank)))
    out["_c"] = out["change"].map(CHANGE_ORDER)
    best = [
        max(int(a) if a != "NA" else -1, int(b) if b != "NA" else -1)
        for a, b in zip(out["previous_score"], out["score"])
    ]
    out["_s"] = np.asarray(best, dtype=np.int64) if len(out) else np.zeros(0, np.int64)
    out = out.sort_values(
        ["_q", "qacc", "_c", "_s", "sacc"],
        ascending=[True, True, True, False, True],
        kind="mergesort",
    )
    return out[CHANGES_COLUMNS].reset_index(drop=True)
