"""Reading the report's inputs: hits.tsv, changes.tsv, step statistics.

Everything here costs O(rows) with small constants and returns arrays and
small tables; nothing is computed per query in Python loops over the hits.

Ids are text, always: tables are read without quoting and without NA
interpretation (``csv.QUOTE_NONE``, ``keep_default_na=False``), so ids such as
``"s1``, ``NA``, ``nan``, ``#x`` or ``sp|"Q1|...`` survive unchanged.  Only the
E-value column turns the text ``NA`` (no statistics for the scoring scheme)
into NaN.  Columns are selected by name; extra columns are ignored.

Step statistics come from the JSON files the steps write
(:mod:`swgpu_tools.io.stepstats`); no log file is ever read.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import InputError
from ..io.stepstats import read_step_stats
from ..logs import get_logger

log = get_logger(__name__)

#: ``changes.tsv`` kinds, in the order the report shows them.
CHANGE_KINDS = ("new", "gone", "score")

#: Columns of the per-query table (``queries.tsv``), in order.
QUERY_COLUMNS = [
    "qseqid",
    "qlen",
    "hits",
    "best_sseqid",
    "best_score",
    "best_bitscore",
    "best_evalue",
    "new",
    "gone",
    "changed_score",
]

NA = "NA"


@dataclass
class HitsSummary:
    """What the report needs from ``hits.tsv``.

    ``ids``: query ids in order of first appearance in the file; per query
    (same order): ``counts`` (hits), ``best_score``, and from the best hit's
    line (highest score, first in file order on ties) the texts
    ``best_sseqid``, ``best_bitscore``, ``best_evalue``, ``qlen``.
    ``scores`` and ``evalues`` hold every hit's score and E-value (NaN where
    ``NA``), for the distributions.
    """

    ids: list[str]
    counts: np.ndarray
    best_score: np.ndarray
    best_sseqid: list[str]
    best_bitscore: list[str]
    best_evalue: list[str]
    qlen: list[str]
    scores: np.ndarray
    evalues: np.ndarray


@dataclass
class ChangeCounts:
    """Per query id (``ids``), how many hits are new, gone, changed score
    (``counts[:, k]`` for ``CHANGE_KINDS[k]``)."""

    ids: list[str]
    counts: np.ndarray
    unknown: int = 0  # rows whose change is none of CHANGE_KINDS


@dataclass
class StepRecords:
    """Step statistics: one row per scoring job (``shards``), one per other
    step record (``steps``), and the raw records."""

    shards: pd.DataFrame
    steps: pd.DataFrame
    records: list[dict] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def _header(path) -> list[str]:
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
    except FileNotFoundError:
        raise InputError(f"{os.fspath(path)}: file not found") from None
    except OSError as exc:
        raise InputError(f"{os.fspath(path)}: cannot read: {exc.strerror or exc}") from None
    return first.rstrip(b"\r\n").decode("utf-8", "replace").split("\t") if first else []


def _require(path, have: list[str], need: list[str], what: str) -> None:
    missing = [c for c in need if c not in have]
    if missing:
        raise InputError(
            f"{os.fspath(path)}: not a {what} table: no column(s) "
            f"{', '.join(missing)} (header: {' '.join(have) or 'empty file'})"
        )


def read_text_table(
    path, columns: list[str], dtypes: dict | None = None, na_columns: tuple[str, ...] = ()
) -> pd.DataFrame:
    """Read the named ``columns`` of a tab-separated table with a header.

    No quoting, no NA interpretation: every id is kept as written.  Only the
    columns in ``na_columns`` turn the text ``NA`` into NaN.  ``dtypes``
    maps column to dtype (default: ``str``).  InputError names the file on
    any problem.
    """
    dtypes = dict(dtypes or {})
    for c in columns:
        dtypes.setdefault(c, str)
    try:
        return pd.read_csv(
            path,
            sep="\t",
            quoting=csv.QUOTE_NONE,
            keep_default_na=False,
            na_values={c: [NA] for c in na_columns},
            usecols=columns,
            dtype=dtypes,
            skip_blank_lines=False,
            engine="c",
        )
    except (ValueError, TypeError, pd.errors.ParserError) as exc:
        raise InputError(f"{os.fspath(path)}: cannot read the table ({exc})") from None


def _lines_at(path, rows: np.ndarray) -> list[bytes]:
    """The data lines of ``path`` at the 0-based data-row numbers ``rows``
    (ascending), without their line ends."""
    out = []
    with open(path, "rb") as fh:
        fh.readline()  # header
        pos = 0
        for r in rows.tolist():
            line = next(itertools.islice(fh, r - pos, None), None)
            if line is None:
                raise InputError(f"{os.fspath(path)}: the file changed while it was read")
            pos = r + 1
            out.append(line.rstrip(b"\r\n"))
    return out


def summarize_hits(path) -> HitsSummary:
    """Per-query counts and best hits of ``hits.tsv``, and all scores and E-values.

    One pass of pandas' C parser over the id, score and E-value columns
    (the query id as a categorical), then the best hit's line of each query
    read again as text: its subject id, bit score, E-value and query length
    are shown exactly as ``hits.tsv`` has them.
    """
    header = _header(path)
    _require(path, header, ["qseqid", "sseqid", "score", "evalue"], "hits")
    df = read_text_table(
        path,
        ["qseqid", "score", "evalue"],
        {"qseqid": "category", "score": "int64", "evalue": "float64"},
        na_columns=("evalue",),
    )
    codes = df["qseqid"].cat.codes.to_numpy().astype(np.int64)
    if len(codes) and codes.min() < 0:  # pragma: no cover - no NA in a QUOTE_NONE id column
        raise InputError(f"{os.fspath(path)}: a row has no query id")
    categories = df["qseqid"].cat.categories
    scores = df["score"].to_numpy(np.int64)
    evalues = df["evalue"].to_numpy(np.float64)
    ncat = len(categories)
    counts = np.bincount(codes, minlength=ncat).astype(np.int64)
    best = np.full(ncat, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(best, codes, scores)
    cand = np.flatnonzero(scores == best[codes])
    _, first = np.unique(codes[cand], return_index=True)
    best_rows = np.full(ncat, -1, dtype=np.int64)
    best_rows[codes[cand[first]]] = cand[first]
    order = pd.unique(codes)  # categories in order of first appearance
    ids = np.asarray(categories, dtype=object)[order].tolist()
    rows = best_rows[order]
    lines = dict(zip(np.sort(rows).tolist(), _lines_at(path, np.sort(rows))))
    col = {name: header.index(name) for name in header}  # first of duplicate names
    sseqid, bitscore, evalue, qlen = [], [], [], []
    for qid, r in zip(ids, rows.tolist()):
        fields = lines[r].decode("utf-8", "replace").split("\t")
        if len(fields) != len(header) or fields[col["qseqid"]] != qid:
            raise InputError(
                f"{os.fspath(path)}: data row {r + 1} has {len(fields)} fields "
                f"or an unexpected query id (expected {qid!r})"
            )
        sseqid.append(fields[col["sseqid"]])
        bitscore.append(fields[col["bitscore"]] if "bitscore" in col else NA)
        evalue.append(fields[col["evalue"]])
        qlen.append(fields[col["qlen"]] if "qlen" in col else NA)
    return HitsSummary(
        ids=ids,
        counts=counts[order],
        best_score=best[order],
        best_sseqid=sseqid,
        best_bitscore=bitscore,
        best_evalue=evalue,
        qlen=qlen,
        scores=scores,
        evalues=evalues,
    )


def count_changes(path) -> ChangeCounts:
    """Per query, the number of new, gone and changed-score rows of ``changes.tsv``."""
    _require(path, _header(path), ["qseqid", "change"], "changes")
    df = read_text_table(path, ["qseqid", "change"], {"qseqid": "category", "change": "category"})
    qcodes = df["qseqid"].cat.codes.to_numpy().astype(np.int64)
    kinds = [str(k) for k in df["change"].cat.categories]
    kind_of = np.array(
        [CHANGE_KINDS.index(k) if k in CHANGE_KINDS else -1 for k in kinds] + [-1], dtype=np.int64
    )
    kcodes = kind_of[df["change"].cat.codes.to_numpy().astype(np.int64)]
    known = kcodes >= 0
    ncat = len(df["qseqid"].cat.categories)
    flat = np.bincount(
        qcodes[known] * len(CHANGE_KINDS) + kcodes[known], minlength=ncat * len(CHANGE_KINDS)
    )
    counts = flat.reshape(ncat, len(CHANGE_KINDS)).astype(np.int64)
    order = pd.unique(qcodes)
    ids = np.asarray(df["qseqid"].cat.categories, dtype=object)[order].tolist()
    unknown = int((~known).sum())
    if unknown:
        log.warning(
            f"{os.fspath(path)}: {unknown:,} rows with a change other than "
            f"{', '.join(CHANGE_KINDS)} (not counted)"
        )
    return ChangeCounts(ids=ids, counts=counts[order], unknown=unknown)


def read_query_ids(path) -> tuple[list[str], list[int]]:
    """Query ids and lengths of a query FASTA, in file order (the ids that
    ``hits.tsv`` uses)."""
    from ..io.fasta import iter_fasta, remembered

    seqs = remembered(path)  # read already by an earlier step of this job
    if seqs is not None:
        return list(seqs.ids), np.diff(seqs.offsets).tolist()
    ids, lengths = [], []
    for rec in iter_fasta(path):
        ids.append(rec.id)
        lengths.append(len(rec.sequence))
    return ids, lengths


def query_table(
    hits: HitsSummary,
    changes: ChangeCounts | None,
    queries: tuple[list[str], list[int]] | None = None,
) -> pd.DataFrame:
    """The per-query table (columns :data:`QUERY_COLUMNS`), all text.

    Rows: the queries of the FASTA (when given) in its order, then any other
    query of ``hits.tsv`` and ``changes.tsv`` in order of appearance.  A query
    without hits has ``hits`` 0 and ``NA`` best-hit columns.
    """
    order: dict[str, int] = {}
    fasta_len: dict[str, int] = {}
    if queries is not None:
        for qid, n in zip(*queries):
            order.setdefault(qid, len(order))
            fasta_len.setdefault(qid, n)
    for qid in hits.ids:
        order.setdefault(qid, len(order))
    if changes is not None:
        for qid in changes.ids:
            order.setdefault(qid, len(order))
    n = len(order)
    ids = list(order)
    hit_pos = np.array([order[q] for q in hits.ids], dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    count[hit_pos] = hits.counts
    sseqid = [NA] * n
    score = [NA] * n
    bitscore = [NA] * n
    evalue = [NA] * n
    qlen = [str(fasta_len[q]) if q in fasta_len else NA for q in ids]
    for k, p in enumerate(hit_pos.tolist()):
        sseqid[p] = hits.best_sseqid[k]
        score[p] = str(int(hits.best_score[k]))
        bitscore[p] = hits.best_bitscore[k]
        evalue[p] = hits.best_evalue[k]
        if qlen[p] == NA:
            qlen[p] = hits.qlen[k]
    change = np.zeros((n, len(CHANGE_KINDS)), dtype=np.int64)
    if changes is not None and changes.ids:
        change[np.array([order[q] for q in changes.ids], dtype=np.int64)] = changes.counts
    return pd.DataFrame(
        {
            "qseqid": ids,
            "qlen": qlen,
            "hits": count,
            "best_sseqid": sseqid,
            "best_score": score,
            "best_bitscore": bitscore,
            "best_evalue": evalue,
            "new": change[:, 0],
            "gone": change[:, 1],
            "changed_score": change[:, 2],
        },
        columns=QUERY_COLUMNS,
    )


def _num(rec: dict, key: str) -> float:
    v = rec.get(key)
    try:
        return float(v) if v is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def _shard_name(rec: dict, path: str) -> str:
    name = str(rec.get("shard") or os.path.basename(path))
    for suffix in (".json", ".swdb"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name[len("shard-") :] if name.startswith("shard-") else name


#: Columns of the per-step table (``steps.tsv``), in order.
STEP_COLUMNS = [
    "step",
    "shard",
    "backend",
    "device",
    "wall_s",
    "read_s",
    "score_s",
    "write_s",
    "other_phases_s",
    "kernel_s",
    "gcups",
    "cells",
    "queries",
    "sequences",
    "residues",
    "hits",
    "peak_rss_bytes",
    "host",
    "started",
    "finished",
]


def read_step_records(paths) -> StepRecords:
    """Read step statistics files; files that do not exist are skipped
    (listed in ``missing``), unreadable ones raise InputError."""
    records, missing, rows = [], [], []
    for path in paths:
        path = os.fspath(path)
        if not os.path.exists(path):
            missing.append(path)
            continue
        rec = read_step_stats(path)
        records.append(rec)
        phases = rec.get("phases_s") if isinstance(rec.get("phases_s"), dict) else {}
        known = {
            k: float(phases[k])
            for k in ("read", "score", "write")
            if isinstance(phases.get(k), (int, float))
        }
        other = sum(
            float(v) for k, v in phases.items() if k not in known and isinstance(v, (int, float))
        )
        step = str(rec.get("step"))
        device = rec.get("device")
        rows.append(
            {
                "step": step,
                "shard": _shard_name(rec, path) if step == "score_shard" else "",
                "backend": str(rec.get("backend") or ""),
                "device": "" if device is None else str(device),
                "wall_s": _num(rec, "wall_s"),
                "read_s": known.get("read", math.nan),
                "score_s": known.get("score", math.nan),
                "write_s": known.get("write", math.nan),
                "other_phases_s": other,
                "kernel_s": _num(rec, "kernel_s"),
                "gcups": _num(rec, "gcups"),
                "cells": _num(rec, "cells"),
                "queries": _num(rec, "queries"),
                "sequences": _num(rec, "sequences"),
                "residues": _num(rec, "residues"),
                "hits": _num(rec, "hits"),
                "peak_rss_bytes": _num(rec, "peak_rss_bytes"),
                "host": str(rec.get("host") or ""),
                "started": str(rec.get("started") or ""),
                "finished": str(rec.get("finished") or ""),
            }
        )
    table = pd.DataFrame(rows, columns=STEP_COLUMNS)
    is_shard = table["step"] == "score_shard"
    shards = table[is_shard].reset_index(drop=True)
    if len(shards):
        key = pd.to_numeric(shards["shard"], errors="coerce")
        shards = shards.assign(_k=key).sort_values(["_k", "shard"], kind="mergesort")
        shards = shards.drop(columns="_k").reset_index(drop=True)
    steps = table[~is_shard].reset_index(drop=True)
    return StepRecords(shards=shards, steps=steps, records=records, missing=missing)
