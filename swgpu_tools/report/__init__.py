"""Plots and tables for the workflow report (rule ``plots``; ``snakemake --report``).

:func:`make_report` reads ``hits.tsv``, ``changes.tsv``, the query FASTA
(optional: it adds the queries without hits) and the steps' statistics
(``results/stats/**.json``; never a log file) and writes into ``out_dir``
the fixed set of files :data:`OUTPUTS`:

=====================  ======================================================
``scores.png``         raw scores of all hits and of each query's best hit
``evalues.png``        log10 E-values of all hits and of each query's best hit
``hits_per_query.png`` hits per query as a sorted curve and a histogram
``top_queries.png``    the 30 queries with the most hits
``shards.png``         per scoring job: seconds by phase, GCUPS by backend
``steps.png``          seconds per workflow step, by phase
``changes.png``        new / gone / changed-score totals; queries with most changes
``queries.tsv``        one row per query (:data:`~.data.QUERY_COLUMNS`)
``queries.html``       the same as a sortable, filterable page
``steps.tsv``          one row per step statistics file (:data:`~.data.STEP_COLUMNS`)
``steps.html``         the same as a sortable page
=====================  ======================================================

The cost grows with the number of hits (one C-parser pass) and not with
the number of queries beyond that: every picture has a fixed size of at most
2,000 pixels a side, and per-query details are a table, not one panel per
query.  Every file is written atomically.
"""

from __future__ import annotations

import argparse
import logging
import time

__all__ = ["make_report", "OUTPUTS", "add_arguments", "run"]

#: The files :func:`make_report` writes, in order.
OUTPUTS = [
    "scores.png",
    "evalues.png",
    "hits_per_query.png",
    "top_queries.png",
    "shards.png",
    "steps.png",
    "changes.png",
    "queries.tsv",
    "queries.html",
    "steps.tsv",
    "steps.html",
]


def __getattr__(name):
    # make_report loads pandas and matplotlib on first use, so that building
    # the `swgpu` command line (add_arguments) stays cheap
    if name == "make_report":
        from .make import make_report

        return make_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``swgpu plots`` (see :func:`run`)."""
    parser.add_argument(
        "step_stats",
        nargs="*",
        metavar="STATS_JSON",
        help="step statistics files (results/stats/score_shard/*.json, "
        "results/stats/*.json); files that do not exist are skipped",
    )
    parser.add_argument("--hits", required=True, help="hits.tsv")
    parser.add_argument("--changes", default=None, help="changes.tsv (default: no changes chart)")
    parser.add_argument(
        "--queries",
        default=None,
        help="query FASTA: lists the queries without hits too (default: only "
        "queries in hits.tsv and changes.tsv)",
    )
    parser.add_argument("--out-dir", required=True, help="folder for the pictures and tables")
    parser.add_argument(
        "--stats",
        default=None,
        metavar="JSON",
        help="write this step's statistics (seconds, peak memory) here",
    )


def run(args: argparse.Namespace) -> list[str]:
    """``swgpu plots``: :func:`make_report` with the arguments of :func:`add_arguments`."""
    from ..logs import ROOT, configure, get_logger
    from .make import make_report

    if not logging.getLogger(ROOT).handlers:
        configure()
    started = time.perf_counter()
    paths = make_report(
        args.hits,
        args.changes,
        args.step_stats,
        args.out_dir,
        queries_path=args.queries,
        stats_out=args.stats,
    )
    get_logger(__name__).debug(f"plots: {time.perf_counter() - started:.2f} s")
    return paths
