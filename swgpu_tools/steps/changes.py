"""What changed between two scans: the previous scan's tables and ``changes.tsv``.

Two workflow steps (rules ``keep_previous`` and ``changes``):

``keep_previous``
    Runs before ``merge_hits`` whenever the merge is about to run again (it has
    the merge's inputs and parameters, and the merge takes its marker as an
    input).  Snakemake deletes a job's declared outputs before the job starts,
    so the merge itself cannot keep the old ``results/hits.tsv``; this step
    copies the current ``hits.tsv`` and ``alignments.tsv`` to
    ``results/previous/`` while they still hold the last scan.  Its only
    declared output is the marker ``results/previous/scan.json``; the copied
    tables are not declared, so Snakemake never deletes them: when the current
    tables are not a complete scan (first run, or a run killed between merge
    and traceback), the step keeps the previous snapshot as it was and says so
    in the marker.  Every file is written atomically.

``changes``
    Compares ``results/hits.tsv`` with the snapshot and writes
    ``results/changes.tsv``: per query (in query order), the hits that are
    ``new`` (in this scan, not in the previous), ``gone`` (in the previous, not
    in this one: the subject was removed, changed, or fell below the top-k or
    E-value cut-off) or ``score`` (same query and subject, different score),
    with both scores and both E-values.  A hit whose score did not change is
    not listed, even if its E-value moved with the database size.  Without a
    previous scan every hit is ``new``.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pandas as pd

from ..errors import InputError
from ..io.atomic import atomic_write
from ..io.tables import read_table, write_table
from ..logs import get_logger

log = get_logger(__name__)

CHANGES_COLUMNS = ["qseqid", "sseqid", "qacc", "sacc", "change", "previous_score", "score",
                   "previous_evalue", "evalue", "slen"]
CHANGE_ORDER = {"new": 0, "score": 1, "gone": 2}


def _read_table(path) -> pd.DataFrame:
    df = read_table(path)
    return df.astype(str)


def _is_complete_scan(hits_path, internal_path) -> tuple[bool, str]:
    """Whether hits.tsv and the internal alignment table exist and describe the same hits."""
    if not os.path.exists(hits_path):
        return False, f"{os.fspath(hits_path)} does not exist"
    if not os.path.exists(internal_path):
        return False, f"{os.fspath(internal_path)} does not exist"
    try:
        import pyarrow.parquet as pq

        hits = _read_table(hits_path)
        aln = pq.read_table(internal_path, columns=["qacc", "sacc", "score"]).to_pandas()
        aln["score"] = aln["score"].astype(str)
        key = ["qacc", "sacc", "score"]
        same = (len(hits) == len(aln)
                and hits[key].reset_index(drop=True).equals(aln[key].reset_index(drop=True)))
    except (ValueError, KeyError, OSError, InputError) as exc:
        return False, f"unreadable table ({exc})"
    if not same:
        return False, "alignments.tsv does not match hits.tsv (the traceback did not finish)"
    return True, "complete"


def _copy_binary(src, dst) -> None:
    with open(src, "rb") as fin, atomic_write(dst, "wb") as fout:
        while True:
            chunk = fin.read(1 << 20)
            if not chunk:
                break
            fout.write(chunk)


def _copy_atomic(src, dst) -> None:
    with open(src, "r", encoding="utf-8", newline="") as fin, atomic_write(dst) as fout:
        while True:
            chunk = fin.read(1 << 20)
            if not chunk:
                break
            fout.write(chunk)


def keep_previous(hits_path, internal_path, out_dir, marker_path) -> dict:
    """Copy the current scan's hits and internal alignment table to ``out_dir``
    (see the module doc)."""
    os.makedirs(out_dir, exist_ok=True)
    prev_hits = os.path.join(out_dir, "hits.tsv")
    prev_aln = os.path.join(out_dir, "alignments.parquet")
    complete, why = _is_complete_scan(hits_path, internal_path)
    if complete:
        # the alignment cache (used to reuse alignments) goes last, a stale one first
        if os.path.exists(prev_aln):
            os.unlink(prev_aln)
        _copy_atomic(hits_path, prev_hits)
        _copy_binary(internal_path, prev_aln)
        kept = "copied"
        message = f"kept the last scan: {prev_hits}, {prev_aln}"
    elif os.path.exists(prev_hits):
        kept = "unchanged"
        message = f"the current tables are not a complete scan ({why}); kept the older snapshot {prev_hits}"
    else:
        kept = "none"
        message = f"no previous scan ({why})"
    info = {"previous_scan": os.path.exists(prev_hits), "snapshot": kept, "reason": why,
            "hits": prev_hits, "alignments": prev_aln,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if info["previous_scan"]:
        info["hits_mtime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                           time.gmtime(os.path.getmtime(prev_hits)))
    with atomic_write(marker_path) as fh:
        json.dump(info, fh, indent=1, sort_keys=True)
        fh.write("\n")
    log.info(message)
    return info


def compare(previous: pd.DataFrame | None, current: pd.DataFrame,
            query_order: list[str] | None = None) -> pd.DataFrame:
    """The ``changes.tsv`` rows between two hits tables (string-typed columns)."""
    cols = ["qseqid", "sseqid", "qacc", "sacc", "score", "evalue", "slen"]
    cur = current[cols].copy()
    if previous is None:
        prev = pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    else:
        prev = previous[cols].copy()
    both = prev.merge(cur, on=["qacc", "sacc"], how="outer", suffixes=("_prev", ""),
                      indicator=True)
    change = np.where(both["_merge"] == "right_only", "new",
                      np.where(both["_merge"] == "left_only", "gone", "same"))
    both["change"] = change
    same = both["change"] == "same"
    moved = same & (both["score_prev"].astype(str) != both["score"].astype(str))
    both.loc[moved, "change"] = "score"
    both = both[both["change"] != "same"].copy()
    gone = both["change"] == "gone"
    both["slen"] = both["slen"].where(~gone, both["slen_prev"])
    both["qseqid"] = both["qseqid"].where(~gone, both["qseqid_prev"])
    both["sseqid"] = both["sseqid"].where(~gone, both["sseqid_prev"])
    out = pd.DataFrame({
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
    }).fillna("NA")
    if query_order is None:
        query_order = list(dict.fromkeys(list(cur["qacc"]) + list(prev["qacc"])))
    rank = {q: i for i, q in enumerate(query_order)}
    out["_q"] = out["qacc"].map(lambda q: rank.get(q, len(rank)))
    out["_c"] = out["change"].map(CHANGE_ORDER)
    best = [max(int(a) if a != "NA" else -1, int(b) if b != "NA" else -1)
            for a, b in zip(out["previous_score"], out["score"])]
    out["_s"] = np.asarray(best, dtype=np.int64) if len(out) else np.zeros(0, np.int64)
    out = out.sort_values(["_q", "qacc", "_c", "_s", "sacc"],
                          ascending=[True, True, True, False, True], kind="mergesort")
    return out[CHANGES_COLUMNS].reset_index(drop=True)


def write_changes(hits_path, marker_path, out_path, queries_path=None) -> pd.DataFrame:
    """Write ``changes.tsv`` comparing ``hits_path`` with the snapshot named in the marker."""
    try:
        with open(marker_path) as fh:
            info = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{os.fspath(marker_path)}: cannot read the previous-scan marker ({exc})") from None
    current = _read_table(hits_path)
    previous = None
    if info.get("previous_scan"):
        previous = _read_table(info["hits"])
    order = None
    if queries_path is not None:
        from ..io.fasta import read_fasta

        order = list(read_fasta(queries_path).ids)
    table = compare(previous, current, order)
    write_table(table, out_path, CHANGES_COLUMNS)
    if True:
        counts = table["change"].value_counts().to_dict()
        against = info["hits"] if previous is not None else "no previous scan (every hit is new)"
        log.info(f"compared {len(current):,} hits with {against}: "
            f"{counts.get('new', 0):,} new, {counts.get('gone', 0):,} gone, "
            f"{counts.get('score', 0):,} changed score -> {os.fspath(out_path)}")
    return table
