"""The report step: :func:`make_report` (see :mod:`swgpu_tools.report`)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pandas as pd

from ..io.atomic import atomic_write
from ..logs import get_logger
from . import OUTPUTS, data, html, plots
from .data import QUERY_COLUMNS, STEP_COLUMNS

__all__ = ["make_report", "render", "write_tsv"]

log = get_logger(__name__)

_QUERY_NUMERIC = [c not in ("qseqid", "best_sseqid") for c in QUERY_COLUMNS]
_STEP_TEXT = {"step", "shard", "backend", "device", "host", "started", "finished"}


def _cell(x) -> str:
    if isinstance(x, str):
        return x
    if x is None:
        return data.NA
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if x != x:
        return data.NA
    return str(int(x)) if x.is_integer() and abs(x) < 2**53 else f"{x:.6g}"


def write_tsv(path, columns: list[str], rows: list[list[str]]) -> None:
    """A tab-separated table with a header, cells written as given (no
    quoting); atomic."""
    with atomic_write(path) as fh:
        fh.write("\t".join(columns) + "\n")
        for start in range(0, len(rows), 65536):
            fh.write("".join("\t".join(r) + "\n" for r in rows[start : start + 65536]))


def _text_rows(table: pd.DataFrame) -> list[list[str]]:
    """The rows of a table whose columns are text or integers, as lists of text
    (column by column, not cell by cell: 100,000 rows in a fraction of a second)."""
    columns = []
    for name in table.columns:
        col = table[name]
        if pd.api.types.is_integer_dtype(col.dtype):
            columns.append(col.astype(np.int64).astype(str).tolist())
        else:
            columns.append([str(x) for x in col.tolist()])
    return [list(r) for r in zip(*columns)] if columns else []


def render(jobs: list[tuple[str, str, tuple]]) -> list[str]:
    """Make and save figures: ``(function of plots, output path, arguments)`` each."""
    for func, path, args in jobs:
        plots.save_png(getattr(plots, func)(*args), path)
    return [path for _, path, _ in jobs]


def _start(jobs, workers: int):
    """Render ``jobs`` in a forked process (pandas and matplotlib already
    imported there); None where ``workers`` < 2 or fork is not available."""
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    plots.preload()
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    return pool, pool.submit(render, jobs)


def _finish(background, jobs) -> None:
    """Wait for :func:`_start`'s process; if it died, render its jobs here."""
    if background is None:
        return
    _, future = background
    try:
        future.result()
    except BrokenProcessPool as exc:
        log.warning(f"the plotting process ended ({exc}); drawing its pictures here")
        render(jobs)


def _write_tables(table: pd.DataFrame, steps: data.StepRecords, out: dict[str, str]) -> None:
    """queries.tsv/.html and steps.tsv/.html."""
    qrows = _text_rows(table)
    write_tsv(out["queries.tsv"], QUERY_COLUMNS, qrows)
    size = html.write_table_page(
        out["queries.html"],
        f"Queries ({len(qrows):,})",
        "One row per query: its hits in hits.tsv, its best hit (highest score; bit score "
        "and E-value of that hit), and its hits new, gone or with a changed score since "
        "the previous scan. Click a column to sort; NA (no hit, or no statistics) sorts last.",
        QUERY_COLUMNS,
        _QUERY_NUMERIC,
        qrows,
    )
    if not html.fits_one_file_report(size):
        log.warning(
            f"{out['queries.html']} is {size / 1e6:.1f} MB ({len(qrows):,} queries): "
            "too large to show inside a one-file report (snakemake --report "
            "report.html) in Chromium-based browsers; make report.zip instead "
            "(snakemake --report report.zip), or open the page itself"
        )
    srows = [
        [_cell(v) for v in row]
        for frame in (steps.steps, steps.shards)
        for row in frame.itertuples(index=False, name=None)
    ]
    write_tsv(out["steps.tsv"], STEP_COLUMNS, srows)
    html.write_table_page(
        out["steps.html"],
        f"Step statistics ({len(srows):,} files)",
        "One row per step statistics file (results/stats/): seconds in all (wall_s) and "
        "per phase, scoring kernel seconds and GCUPS, sizes, peak memory (bytes).",
        STEP_COLUMNS,
        [c not in _STEP_TEXT for c in STEP_COLUMNS],
        srows,
    )


def make_report(
    hits_path,
    changes_path,
    stats_paths,
    out_dir,
    queries_path=None,
    stats_out=None,
    workers: int = 2,
) -> list[str]:
    """Write the report's pictures and tables (:data:`OUTPUTS`) into ``out_dir``.

    ``hits_path``: ``hits.tsv``; ``changes_path``: ``changes.tsv`` or None;
    ``stats_paths``: step statistics JSON files (``score_shard`` ones give the
    per-shard chart, every file the per-step chart; files that do not exist
    are skipped); ``queries_path``: the query FASTA or None (adds queries
    without hits and their lengths); ``stats_out``: where to write this
    step's own statistics (JSON) or None; ``workers``: processes drawing the
    pictures (2: half of them in a forked process while this one draws the
    rest and writes the tables; 1: all here).  Returns the paths written.
    """
    from ..io.stepstats import StepTimer

    timer = StepTimer("plots")
    os.makedirs(out_dir, exist_ok=True)
    with timer.phase("read"):
        hits = data.summarize_hits(hits_path)
        changes = data.count_changes(changes_path) if changes_path is not None else None
        queries = data.read_query_ids(queries_path) if queries_path is not None else None
        steps = data.read_step_records(stats_paths)
        table = data.query_table(hits, changes, queries)
    for path in steps.missing:
        log.info(f"no step statistics at {path} (not shown)")
    out = {name: os.path.join(os.fspath(out_dir), name) for name in OUTPUTS}
    counts = table["hits"].to_numpy(np.int64)
    best = pd.to_numeric(table["best_score"], errors="coerce").fillna(0).to_numpy(np.int64)
    ids = table["qseqid"].tolist()
    best_ev = pd.to_numeric(pd.Series(hits.best_evalue, dtype=object), errors="coerce").to_numpy(
        np.float64
    )
    change_counts = (
        table[["new", "gone", "changed_score"]].to_numpy(np.int64) if changes is not None else None
    )
    # (figure function of plots, output, arguments); the first three hold the
    # large arrays and are drawn here, the others (small arguments) in a
    # forked process meanwhile when workers > 1
    here = [
        ("scores_figure", out["scores.png"], (hits.scores, hits.best_score, len(ids))),
        ("evalues_figure", out["evalues.png"], (hits.evalues, best_ev, len(ids))),
        ("hits_per_query_figure", out["hits_per_query.png"], (counts,)),
    ]
    there = [
        ("top_queries_figure", out["top_queries.png"], (ids, counts, best)),
        ("shards_figure", out["shards.png"], (steps.shards,)),
        ("steps_figure", out["steps.png"], (steps.records,)),
        ("changes_figure", out["changes.png"], (ids, change_counts)),
    ]
    with timer.phase("plots"):
        background = _start(there, workers)
    try:
        with timer.phase("plots"):
            if background is None:
                render(there)
            render(here)
        with timer.phase("tables"):
            _write_tables(table, steps, out)
        with timer.phase("plots"):
            _finish(background, there)
    finally:
        if background is not None:
            background[0].shutdown(cancel_futures=True)
    timer.fields.update(
        queries=len(ids),
        hits=int(len(hits.scores)),
        shards=int(len(steps.shards)),
        outputs=len(OUTPUTS),
    )
    record = timer.write(stats_out)
    log.info(
        f"{len(hits.scores):,} hits of {len(ids):,} queries, {len(steps.shards):,} scoring "
        f"jobs, {len(steps.records):,} step statistics files -> {os.fspath(out_dir)} "
        f"({len(OUTPUTS)} files, {record['wall_s']:.1f} s)"
    )
    return [out[name] for name in OUTPUTS]
