"""The report's pictures: a fixed set, each of a fixed size in pixels.

Every figure has a fixed size (at most :data:`MAX_SIDE_PX` pixels a side, no
``bbox_inches="tight"``), whatever the number of queries, hits or shards: the
queries appear only through distributions, a sorted curve and a capped top-N
list; shards as bars up to :data:`MAX_SHARD_BARS`, beyond that as filled
curves over the shard number.  Each function takes data and returns a
matplotlib Figure; :func:`save_png` writes it atomically.
"""

from __future__ import annotations

import math

import numpy as np

from ..io.atomic import atomic_write

#: Dots per inch of every picture.
DPI = 100
#: zlib level of the PNG files (1: fastest).
PNG_LEVEL = 1
#: Upper bound of a picture's width and height in pixels.
MAX_SIDE_PX = 2000
#: Up to this many shards, one labelled bar each; beyond, curves over the shard number.
MAX_SHARD_BARS = 64
#: Queries shown in the top-N bar charts.
TOP_N = 30
#: Longest id shown as an axis label (longer ones are cut with an ellipsis).
LABEL_CHARS = 36

BLUE, RED, GREEN, ORANGE, GREY = "#3b6ea5", "#c0504d", "#4f9a4f", "#e0a030", "#8c8c8c"
#: Colours of the phases steps record (others take PHASE_CYCLE in turn).
PHASE_COLORS = {"read": GREY, "score": BLUE, "write": ORANGE, "merge": "#8064a2", "align": GREEN}
PHASE_CYCLE = ["#4bacc6", "#f79646", "#9bbb59", "#c0504d", "#1f497d"]


_WARM: list = []  # not empty once preload drew its figure (its parser and caches stay)


def preload() -> None:
    """Import the parts of matplotlib the figures use, and draw a small figure with log
    axes once (before forking): the log axes' tick labels (10^k) go through matplotlib's
    mathtext, whose parser each drawing process built again at its first such label
    (0.025-0.035 s of each of the three pictures with log axes in a forked child on the
    2-core VM); the pictures are the same."""
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    import matplotlib.ticker  # noqa: F401

    if _WARM:
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1, 1), dpi=DPI)
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1, 1000)
    ax.set_ylim(1, 1000)
    ax.set_title("0")
    FigureCanvasAgg(fig).draw()
    _WARM.append(True)


def _figure(
    width_in: float,
    height_in: float,
    ncols: int = 1,
    left: float = 0.07,
    right: float = 0.98,
    bottom: float = 0.12,
    top: float = 0.9,
    wspace: float = 0.22,
    width_ratios=None,
):
    """A Figure of a fixed size with ``ncols`` axes side by side and fixed margins
    (fractions of the figure; no layout engine: it costs a second drawing)."""
    from matplotlib.figure import Figure

    assert width_in * DPI <= MAX_SIDE_PX and height_in * DPI <= MAX_SIDE_PX
    fig = Figure(figsize=(width_in, height_in), dpi=DPI)
    fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top, wspace=wspace)
    axes = fig.subplots(
        1,
        ncols,
        squeeze=False,
        gridspec_kw={"width_ratios": width_ratios} if width_ratios else None,
    )
    return fig, list(axes[0])


def save_png(fig, path) -> None:
    """Write ``fig`` as a PNG of exactly its figure size (atomically)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    with atomic_write(path, "wb") as fh:
        # zlib level 1: the encoder ~25 % faster than at level 6 (the default) on the
        # 2-core VM, files ~20 % larger (tens of kB)
        fig.savefig(fh, format="png", dpi=DPI, pil_kwargs={"compress_level": PNG_LEVEL})


def _fit_labels(ax, left_limit: float) -> None:
    """Move the left edge of ``ax`` so that its y tick labels fit right of
    ``left_limit`` (figure fraction), measured with the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = ax.figure
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    widest = max((t.get_window_extent(renderer).width for t in ax.get_yticklabels()), default=0.0)
    pad = (widest + 12) / (fig.get_figwidth() * DPI)
    x0, y0, x1, y1 = ax.get_position().extents
    new_left = min(left_limit + pad, x1 - 0.2)
    ax.set_position((new_left, y0, x1 - new_left, y1 - y0))


def _thousands(axis) -> None:
    """Integer ticks labelled with thousands separators (1,000,000, not 1000000)."""
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    axis.set_major_locator(MaxNLocator(integer=True))
    axis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))


def _empty(ax, text: str) -> None:
    ax.text(
        0.5,
        0.5,
        text,
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize=12,
        color=GREY,
        wrap=True,
    )
    ax.set_xticks([])
    ax.set_yticks([])


def short(label: str, n: int = LABEL_CHARS) -> str:
    """``label`` cut to ``n`` characters with an ellipsis."""
    return label if len(label) <= n else label[: n - 1] + "\u2026"


def _fmt(n: float) -> str:
    return f"{n:,.0f}" if abs(n) >= 100 or float(n).is_integer() else f"{n:.3g}"


def _histogram(
    ax,
    values: np.ndarray,
    best: np.ndarray,
    lo: float,
    hi: float,
    log_x: bool,
    label: str,
    best_label: str,
    nbins: int = 60,
) -> None:
    """Histograms of ``values`` (filled) and ``best`` (outline) on one axis,
    with ``nbins`` equal bins over [lo, hi] (of log10 of the values when
    ``log_x``); counts by numpy's fast equal-bin path, drawn as stairs."""
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, nbins + 1)
    with np.errstate(divide="ignore"):
        x = np.log10(values) if log_x else values
        b = np.log10(best) if log_x else best
    counts, _ = np.histogram(x, bins=nbins, range=(lo, hi))
    shown = 10.0**edges if log_x else edges
    ax.stairs(counts, shown, fill=True, color=BLUE, alpha=0.8, label=label, baseline=0.5)
    if len(b):
        bc, _ = np.histogram(b, bins=nbins, range=(lo, hi))
        ax.stairs(bc, shown, color=RED, linewidth=1.8, label=best_label, baseline=0.5)
    ax.set_yscale("log")
    ax.set_ylim(0.5, max(1, int(counts.max())) * 2.0)
    if log_x:
        ax.set_xscale("log")


def scores_figure(scores: np.ndarray, best_scores: np.ndarray, nqueries: int):
    """Histogram of all hits' raw scores, and of each query's best score (log-log)."""
    fig, (ax,) = _figure(11, 4.8)
    pos = scores[scores > 0]
    if not len(pos):
        _empty(ax, "no hits")
    else:
        best = best_scores[best_scores > 0]
        _histogram(
            ax,
            pos,
            best,
            math.log10(float(pos.min())),
            math.log10(float(pos.max())) + 1e-3,
            True,
            f"all hits ({len(pos):,})",
            f"best hit of each query ({len(best):,})",
        )
        ax.legend(loc="upper right")
        med = float(np.median(scores))
        ax.axvline(med, color=GREY, linestyle=":", linewidth=1)
        ax.text(
            med,
            0.98,
            f" median {_fmt(med)}",
            transform=ax.get_xaxis_transform(),
            va="top",
            fontsize=9,
            color=GREY,
        )
    ax.set_xlabel("raw Smith-Waterman score (log scale)")
    ax.set_ylabel("hits (log scale)")
    ax.set_title(f"Scores of the {len(scores):,} hits of {nqueries:,} queries")
    return fig


def evalues_figure(evalues: np.ndarray, best_evalues: np.ndarray, nqueries: int):
    """Histogram of log10 E-values of all hits and of each query's best hit."""
    fig, (ax,) = _figure(11, 4.8)
    finite = evalues[np.isfinite(evalues)]
    na = int(len(evalues) - len(finite))
    zero = int((finite <= 0).sum())
    note = []
    if na:
        note.append(f"{na:,} NA")
    if zero:
        note.append(f"{zero:,} of 0 shown at 1e-300")
    if not len(finite):
        _empty(
            ax,
            "no hits"
            if not len(evalues)
            else "no E-values: the scoring scheme has no BLAST statistics (E-values NA)",
        )
    else:
        with np.errstate(divide="ignore"):
            lg = np.log10(np.maximum(finite, 1e-300))
            bfin = best_evalues[np.isfinite(best_evalues)]
            blg = np.log10(np.maximum(bfin, 1e-300))
        _histogram(
            ax,
            lg,
            blg,
            float(lg.min()),
            float(lg.max()) + 1e-9,
            False,
            f"all hits ({len(finite):,})",
            f"best hit of each query ({len(blg):,})",
        )
        ax.legend(loc="upper left")
    ax.set_xlabel("log10 E-value")
    ax.set_ylabel("hits (log scale)")
    extra = f" ({'; '.join(note)})" if note else ""
    ax.set_title(f"E-values of the {len(evalues):,} hits of {nqueries:,} queries{extra}")
    return fig


def hits_per_query_figure(counts: np.ndarray):
    """Hits per query: a curve of the counts sorted high to low, and their histogram."""
    fig, (ax1, ax2) = _figure(14, 4.8, ncols=2)
    n = len(counts)
    if not n:
        _empty(ax1, "no queries")
        _empty(ax2, "no queries")
        return fig
    desc = np.sort(counts)[::-1]
    # the sorted counts as a step curve through its change points only: exact,
    # and at most (largest count + 2) points however many queries there are
    starts = np.flatnonzero(np.r_[True, desc[1:] != desc[:-1]])
    rank = np.r_[starts + 1, n + 1]
    level = np.r_[desc[starts], desc[-1]]
    ax1.fill_between(rank, level, step="post", color=BLUE, alpha=0.35, linewidth=0)
    ax1.step(rank, level, where="post", color=BLUE, linewidth=1.5)
    ax1.set_xlim(1, n + 1)
    ax1.set_ylim(0, max(1, int(desc[0])) * 1.08)
    ax1.set_xlabel("queries, ranked by hits")
    ax1.set_ylabel("hits")
    top, zero = int(desc[0]), int((counts == 0).sum())
    at_top = int((counts == top).sum())
    ax1.set_title(f"Hits per query, sorted ({n:,} queries)")
    ax1.text(
        0.98,
        0.95,
        f"most: {top:,} hits ({at_top:,} queries)\n"
        f"median: {_fmt(float(np.median(counts)))}\nno hits: {zero:,} queries",
        transform=ax1.transAxes,
        ha="right",
        va="top",
        fontsize=10,
        bbox=dict(facecolor="white", edgecolor=GREY, alpha=0.9),
    )
    hi = int(desc[0])
    width = max(1, math.ceil((hi + 1) / 50))
    bins = (
        np.arange(0, hi + width + 1, width) - 0.5
        if hi < 50
        else np.arange(0, hi + width + 1, width)
    )
    ax2.hist(counts, bins=bins, color=BLUE)
    ax2.set_yscale("log")
    ax2.set_xlabel("hits of a query")
    ax2.set_ylabel("queries (log scale)")
    ax2.set_title("Distribution of hits per query")
    return fig


def _barh_labels(ax, labels: list[str], left_limit: float = 0.01) -> None:
    """Ids as the y tick labels of a horizontal bar chart (first on top),
    the axes moved right so that they fit."""
    ax.set_yticks(range(len(labels)), [short(x) for x in labels], fontsize=9)
    ax.invert_yaxis()
    _fit_labels(ax, left_limit)


def top_queries_figure(
    ids: list[str], counts: np.ndarray, best_scores: np.ndarray, top_n: int = TOP_N
):
    """The ``top_n`` queries with the most hits (ties: higher best score first)."""
    pick = np.lexsort((np.arange(len(ids)), -best_scores, -counts))[:top_n]
    fig, (ax,) = _figure(11, 8.5, left=0.1, top=0.94, bottom=0.07)
    if not len(ids):
        _empty(ax, "no queries")
        return fig
    vals = counts[pick]
    ax.barh(range(len(pick)), vals, color=BLUE)
    _barh_labels(ax, [ids[i] for i in pick])
    xmax = max(1, int(vals.max()))
    ax.set_xlim(0, xmax * 1.25)
    for y, i in enumerate(pick):
        best = f"best {int(best_scores[i]):,}" if counts[i] else "no hits"
        ax.text(counts[i] + xmax * 0.01, y, f"{int(counts[i]):,} ({best})", va="center", fontsize=8)
    at_top = int((counts == counts.max()).sum())
    more = f"; {at_top:,} queries have {int(counts.max()):,}" if at_top > len(pick) else ""
    ax.set_title(f"Top {len(pick)} of {len(ids):,} queries by hits{more}")
    ax.set_xlabel("hits (text: hits and best raw score)")
    _thousands(ax.xaxis)
    return fig


def _phase_stack(ax, x, parts, labels, colors, bars: bool) -> None:
    bottom = np.zeros(len(x))
    for vals, label, color in zip(parts, labels, colors):
        vals = np.nan_to_num(np.asarray(vals, dtype=np.float64))
        if bars:
            ax.bar(x, vals, bottom=bottom, color=color, label=label, width=0.8)
        else:
            ax.fill_between(
                x, bottom, bottom + vals, step="mid", color=color, label=label, linewidth=0
            )
        bottom = bottom + vals


def shards_figure(shards):
    """Per scoring job: wall time split into phases, and GCUPS (by backend).

    ``shards``: the ``StepRecords.shards`` table (columns of ``steps.tsv``).
    """
    fig, (ax1, ax2) = _figure(
        15, 5.2, ncols=2, left=0.05, right=0.99, bottom=0.17, top=0.92, wspace=0.15
    )
    n = len(shards)
    if not n:
        _empty(ax1, "no scoring statistics (results/stats/score_shard/*.json)")
        _empty(ax2, "no scoring statistics")
        return fig
    bars = n <= MAX_SHARD_BARS
    x = np.arange(n)
    wall = shards["wall_s"].to_numpy(np.float64)
    parts = [shards[c].to_numpy(np.float64) for c in ("read_s", "score_s", "write_s")]
    phased = np.nansum(np.vstack(parts), axis=0)
    rest = np.where(np.isfinite(wall), np.maximum(wall - phased, 0), 0)
    _phase_stack(
        ax1,
        x,
        parts + [rest],
        ["read", "score", "write", "other"],
        [PHASE_COLORS["read"], PHASE_COLORS["score"], PHASE_COLORS["write"], "#d9d9d9"],
        bars,
    )
    ax1.set_ylabel("seconds")
    ax1.set_title(
        f"Wall time per scoring job ({n:,} jobs; sum {np.nansum(wall):,.1f} s, "
        f"slowest {np.nanmax(wall) if np.isfinite(wall).any() else math.nan:,.1f} s)"
    )
    top = float(np.nanmax(np.where(np.isfinite(wall), np.maximum(wall, phased), phased)))
    ax1.set_ylim(0, max(top, 1e-3) * 1.25)
    ax1.legend(loc="upper right", fontsize=9, ncols=4)
    gcups = shards["gcups"].to_numpy(np.float64)
    backend = shards["backend"].astype(str).to_numpy()
    colors = {"gpu": RED, "cpu": BLUE}
    for b in sorted(set(backend)):
        m = backend == b
        label = f"{b or '?'} ({int(m.sum()):,} jobs)"
        if bars:
            ax2.bar(x[m], np.nan_to_num(gcups[m]), color=colors.get(b, GREY), label=label)
        else:
            ax2.plot(x[m], gcups[m], ".", color=colors.get(b, GREY), label=label, markersize=3)
    cells = np.nansum(shards["cells"].to_numpy(np.float64))
    kernel = np.nansum(shards["kernel_s"].to_numpy(np.float64))
    if kernel > 0:
        overall = cells / kernel / 1e9
        ax2.axhline(
            overall,
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"all jobs: {overall:,.1f} GCUPS",
        )
    ax2.set_ylabel("GCUPS (kernel)")
    ax2.set_title(f"GCUPS per scoring job ({cells:.3g} cells in {kernel:,.1f} kernel seconds)")
    if np.isfinite(gcups).any():
        ax2.set_ylim(0, max(float(np.nanmax(gcups)), 1e-3) * 1.25)
    ax2.legend(loc="upper right", fontsize=9, ncols=3)
    for ax in (ax1, ax2):
        ax.set_xlabel("shard")
        if bars:
            ax.set_xticks(
                x, shards["shard"].astype(str).tolist(), rotation=90, fontsize=7 if n > 24 else 9
            )
        else:
            ax.set_xlim(-0.5, n - 0.5)
    return fig


def step_rows(records: list[dict]) -> list[tuple[str, dict, float, float]]:
    """(label, phase seconds, wall seconds, peak RSS bytes) per step for the
    step-time chart: steps summed by name (score_shard: all jobs, and the
    slowest job on its own row), in workflow order."""
    order = ["shard_db", "score_shard", "merge_hits", "traceback", "changes", "plots"]
    groups: dict[str, list[dict]] = {}
    for rec in records:
        groups.setdefault(str(rec.get("step")), []).append(rec)
    names = sorted(groups, key=lambda s: (order.index(s) if s in order else len(order), s))
    rows = []

    def wall(r):
        v = r.get("wall_s")
        return float(v) if isinstance(v, (int, float)) else 0.0

    for name in names:
        recs = groups[name]
        phases: dict[str, float] = {}
        for r in recs:
            for k, v in (r.get("phases_s") or {}).items():
                if isinstance(v, (int, float)):
                    phases[k] = phases.get(k, 0.0) + float(v)
        rss = max((float(r.get("peak_rss_bytes") or 0) for r in recs), default=0.0)
        label = name if len(recs) == 1 else f"{name} (sum of {len(recs):,})"
        rows.append((label, phases, sum(wall(r) for r in recs), rss))
        if len(recs) > 1:
            slow = max(recs, key=wall)
            ph = {
                k: float(v)
                for k, v in (slow.get("phases_s") or {}).items()
                if isinstance(v, (int, float))
            }
            rows.append(
                (f"{name} (slowest)", ph, wall(slow), float(slow.get("peak_rss_bytes") or 0))
            )
    return rows


def steps_figure(records: list[dict]):
    """Seconds per workflow step, split into the phases each step records."""
    rows = step_rows(records)
    fig, (ax,) = _figure(12, 5.5, left=0.2, bottom=0.11)
    if not rows:
        _empty(ax, "no step statistics (results/stats/*.json)")
        return fig
    phase_names: list[str] = []
    for _, ph, _, _ in rows:
        for k in ph:
            if k not in phase_names:
                phase_names.append(k)
    y = np.arange(len(rows))
    left = np.zeros(len(rows))
    extra = iter(PHASE_CYCLE * (1 + len(phase_names) // len(PHASE_CYCLE)))

    def bars(vals, color, label):
        # only the bars that show (a bar of no width draws nothing, but each costs the
        # figure a patch: most of its making, and it is drawn last, on the path of rule
        # finish's end); one at least, for the legend
        shown = vals > 0
        shown[: 1 if not shown.any() else 0] = True
        ax.barh(y[shown], vals[shown], left=left[shown], color=color, label=label)

    for name in phase_names:
        vals = np.array([ph.get(name, 0.0) for _, ph, _, _ in rows])
        bars(vals, PHASE_COLORS[name] if name in PHASE_COLORS else next(extra), name)
        left += vals
    walls = np.array([w for _, _, w, _ in rows])
    bars(np.maximum(walls - left, 0), "#d9d9d9", "other")
    # every row in view, as when each row had its bars (bars 0.8 high, 5 % margins)
    margin = 0.05 * (len(rows) - 0.2)
    ax.set_ylim(-0.4 - margin, len(rows) - 0.6 + margin)
    _barh_labels(ax, [r[0] for r in rows])
    xmax = max(float(walls.max()), 1e-3)
    ax.set_xlim(0, xmax * 1.3)
    for yy, (_, _, w, rss) in enumerate(rows):
        mem = f", peak {rss / 2**30:.2f} GiB" if rss else ""
        ax.text(w + xmax * 0.01, yy, f"{w:,.2f} s{mem}", va="center", fontsize=9)
    ax.set_xlabel("seconds (wall time inside the step's process)")
    ax.set_title("Time per workflow step (from results/stats/*.json)")
    ax.legend(loc="lower right", fontsize=9, ncols=2)
    return fig


def changes_figure(ids: list[str], counts: np.ndarray | None, top_n: int = 20):
    """Totals of new, gone and changed-score hits, and the queries with the most changes.

    ``counts``: per query (``ids``), columns new, gone, score; None when there
    is no comparison.
    """
    kinds = ["new", "gone", "changed score"]
    colors = [GREEN, RED, ORANGE]
    per_query = counts.sum(axis=1) if counts is not None and len(counts) else np.zeros(0, np.int64)
    touched = int((per_query > 0).sum())
    pick = np.lexsort((np.arange(len(per_query)), -per_query))[: min(top_n, touched)]
    fig, (ax1,) = _figure(15, 5.5, left=0.06, right=0.3, bottom=0.1, top=0.9)
    ax2 = fig.add_axes((0.5, 0.1, 0.48, 0.8))
    if counts is None:
        _empty(ax1, "no changes table")
        _empty(ax2, "no changes table")
        return fig
    totals = counts.sum(axis=0) if len(counts) else np.zeros(3, dtype=np.int64)
    ax1.bar(range(3), totals, color=colors)
    ax1.set_xticks(range(3), kinds)
    for i, v in enumerate(totals):
        ax1.text(i, v, f"{int(v):,}", ha="center", va="bottom", fontsize=10)
    ax1.set_ylim(0, max(1, int(totals.max())) * 1.15)
    _thousands(ax1.yaxis)
    ax1.set_ylabel("hits")
    ax1.set_title("Hits changed since the previous scan")
    if not touched:
        _empty(ax2, "no changes since the previous scan")
        return fig
    left = np.zeros(len(pick))
    for k in range(3):
        vals = counts[pick, k]
        ax2.barh(range(len(pick)), vals, left=left, color=colors[k], label=kinds[k])
        left += vals
    _barh_labels(ax2, [ids[i] for i in pick], left_limit=0.32)
    ax2.set_xlabel("hits")
    _thousands(ax2.xaxis)
    ax2.set_title(f"Top {len(pick)} of {touched:,} queries with changes", loc="left")
    ax2.legend(
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncols=3,
        fontsize=9,
        frameon=False,
        borderaxespad=0.2,
    )
    return fig
