"""Plots for the workflow report (rule ``plots``; ``snakemake --report``).

:func:`make_plots` reads the final tables, the scoring jobs' benchmark files
and logs, and writes PNG files that the Snakemake report embeds:

* ``scores.png``      score distribution of the hits, one panel per query
                      (log-log: self hits score far above the rest);
* ``evalues.png``     E-value distribution (log10), one panel per query;
* ``hits_per_query.png``  number of hits per query;
* ``shards.png``      per scoring job: wall time (Snakemake benchmark) and
                      GCUPS (kernel, from the ``scored ... GCUPS`` log line),
                      with the backend that scored it;
* ``changes.png``     new / gone / changed-score hits per query since the
                      previous scan (``changes.tsv``).

Files are written atomically (temporary name, then renamed).
"""
from __future__ import annotations

import math
import os
import re

import numpy as np
import pandas as pd

_SCORED = re.compile(r"scored (\d+) queries x ([\d,]+) sequences \(([\d,]+) residues\) "
                     r"in ([\d.]+) s: ([\d.]+) GCUPS")
_BACKEND = re.compile(r"\] backend: (\w+)")
_SHARD = re.compile(r"shard-(\d+)")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path) -> None:
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{os.path.join(os.path.dirname(path), '.' + os.path.basename(path))}.{os.getpid()}.tmp.png"
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def shard_stats(benchmark_paths, log_dir) -> pd.DataFrame:
    """One row per scoring job: shard, seconds (benchmark), GCUPS and backend (log)."""
    rows = []
    for path in benchmark_paths:
        m = _SHARD.search(os.path.basename(os.fspath(path)))
        shard = m.group(1) if m else os.path.basename(os.fspath(path))
        seconds = math.nan
        try:
            bench = pd.read_csv(path, sep="\t")
            seconds = float(bench["s"].iloc[-1])
        except (OSError, ValueError, KeyError, IndexError, pd.errors.ParserError):
            pass
        gcups = kernel_s = math.nan
        residues = 0
        backend = "?"
        log = os.path.join(log_dir, f"shard-{shard}.log")
        if os.path.exists(log):
            with open(log, errors="replace") as fh:
                for line in fh:
                    s = _SCORED.search(line)
                    if s:
                        residues = int(s.group(3).replace(",", ""))
                        kernel_s = float(s.group(4))
                        gcups = float(s.group(5))
                    b = _BACKEND.search(line)
                    if b:
                        backend = b.group(1)
        rows.append(dict(shard=shard, seconds=seconds, kernel_seconds=kernel_s, gcups=gcups,
                         residues=residues, backend=backend))
    return pd.DataFrame(rows, columns=["shard", "seconds", "kernel_seconds", "gcups",
                                       "residues", "backend"])


def _panels(n: int):
    cols = min(4, max(1, n))
    rows = max(1, math.ceil(n / cols))
    return rows, cols


def _per_query_hist(plt, hits: pd.DataFrame, queries: list[str], values, xlabel: str,
                    title: str, path, logx: bool = False) -> None:
    n = max(1, len(queries))
    rows, cols = _panels(n)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.6 * rows), squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(queries):
            ax.axis("off")
            continue
        q = queries[k]
        v = values[hits["qseqid"].to_numpy() == q]
        v = v[np.isfinite(v)]
        if len(v):
            nbins = min(40, max(5, len(v) // 3))
            if logx and v.min() > 0:
                lo, hi = np.log10(v.min()), np.log10(v.max())
                bins = np.logspace(lo, hi if hi > lo else lo + 0.1, nbins + 1)
                ax.hist(v, bins=bins, color="#3b6ea5")
                ax.set_xscale("log")
                from matplotlib.ticker import NullFormatter

                ax.xaxis.set_minor_formatter(NullFormatter())
            else:
                ax.hist(v, bins=nbins, color="#3b6ea5")
            ax.set_yscale("log")
        else:
            ax.text(0.5, 0.5, "no hits", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(f"{q} ({len(v)} hits)", fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel("hits", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def make_plots(hits_path, changes_path, benchmark_paths, log_dir, out_dir, log=None) -> list[str]:
    """Write the report's PNG files into ``out_dir``; return their paths."""
    plt = _plt()
    hits = pd.read_csv(hits_path, sep="\t", keep_default_na=False, na_values=["NA"],
                       dtype={"qseqid": str, "sseqid": str})
    queries = list(dict.fromkeys(hits["qseqid"]))
    changes = pd.read_csv(changes_path, sep="\t", keep_default_na=False,
                          dtype={"qseqid": str, "sseqid": str})
    for q in changes["qseqid"]:
        if q not in queries:
            queries.append(q)
    written = []

    path = os.path.join(out_dir, "scores.png")
    _per_query_hist(plt, hits, queries, hits["score"].to_numpy(np.float64), "raw SW score (log scale)",
                    "Score distribution of the hits, per query (both axes logarithmic)", path,
                    logx=True)
    written.append(path)

    path = os.path.join(out_dir, "evalues.png")
    ev = hits["evalue"].to_numpy(np.float64)
    with np.errstate(divide="ignore"):
        logev = np.log10(np.where(ev > 0, ev, 1e-300))
    _per_query_hist(plt, hits, queries, logev, "log10 E-value (1e-300 shown for 0)",
                    "E-value distribution of the hits, per query (hit counts on a log scale)", path)
    written.append(path)

    path = os.path.join(out_dir, "hits_per_query.png")
    counts = hits.groupby("qseqid", sort=False).size().reindex(queries, fill_value=0)
    fig, ax = plt.subplots(figsize=(max(4, 0.6 * len(queries) + 2), 3.2))
    ax.bar(range(len(queries)), counts.to_numpy(), color="#3b6ea5")
    ax.set_xticks(range(len(queries)), queries, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("hits in hits.tsv")
    ax.set_title("Hits per query (after top-k and E-value cut-off)")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    written.append(path)

    path = os.path.join(out_dir, "shards.png")
    stats = shard_stats(benchmark_paths, log_dir)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(max(8, 0.35 * len(stats) + 6), 3.4))
    x = np.arange(len(stats))
    colors = ["#c0504d" if b == "gpu" else "#3b6ea5" for b in stats["backend"]]
    ax1.bar(x, stats["seconds"].to_numpy(), color=colors)
    ax1.set_title("Wall time per scoring job (s)")
    ax2.bar(x, stats["gcups"].to_numpy(), color=colors)
    ax2.set_title("GCUPS per scoring job (kernel)")
    for ax in (ax1, ax2):
        ax.set_xticks(x, stats["shard"], rotation=90, fontsize=7)
        ax.set_xlabel("shard")
    backends = sorted(set(stats["backend"]))
    fig.suptitle("Scoring jobs (blue: CPU, red: GPU); backends: " + ", ".join(backends), fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    written.append(path)

    path = os.path.join(out_dir, "changes.png")
    kinds = ["new", "gone", "score"]
    table = (changes.groupby(["qseqid", "change"]).size().unstack(fill_value=0)
             .reindex(index=queries, columns=kinds, fill_value=0))
    fig, ax = plt.subplots(figsize=(max(4, 0.6 * len(queries) + 2), 3.2))
    bottom = np.zeros(len(queries))
    for kind, color in zip(kinds, ["#4f9a4f", "#c0504d", "#e0a030"]):
        vals = table[kind].to_numpy()
        ax.bar(range(len(queries)), vals, bottom=bottom, color=color,
               label={"score": "changed score"}.get(kind, kind))
        bottom += vals
    ax.set_xticks(range(len(queries)), queries, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("hits")
    ax.set_title("Changes since the previous scan (changes.tsv)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    written.append(path)
    if log:
        total = stats["seconds"].sum()
        log(f"{len(hits):,} hits of {len(queries)} queries; {len(stats)} scoring jobs, "
            f"{total:.1f} s in all; wrote {', '.join(written)}")
    return written
