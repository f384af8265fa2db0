"""The report step: :func:`make_report` (see :mod:`swgpu_tools.report`)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..cpus import usable_cpus
from ..forked import run_child
from ..io.atomic import atomic_write
from ..logs import get_logger
from . import OUTPUTS, data, html, plots
from .data import QUERY_COLUMNS, STEP_COLUMNS

__all__ = ["make_report", "render", "write_tsv", "start_early", "cancel_early", "EARLY"]

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


def render(jobs: list[tuple[str, str, tuple]], times: tuple[str, float] | None = None) -> list[str]:
    """Make and save figures: ``(function of plots, output path, arguments)`` each.
    ``times``: (file, epoch): each picture's drawing, seconds from ``epoch``, is
    appended to that file as a JSON line (:func:`_drawn`)."""
    for func, path, args in jobs:
        began = time.time()
        plots.save_png(getattr(plots, func)(*args), path)
        if times is not None:
            line = {"picture": os.path.basename(path), "pid": os.getpid()}
            line.update(start=round(began - times[1], 3), end=round(time.time() - times[1], 3))
            with open(times[0], "a", encoding="utf-8") as fh:  # (one write: O_APPEND)
                fh.write(json.dumps(line) + "\n")
    return [path for _, path, _ in jobs]


def _drawn(path: str) -> dict:
    """The pictures' drawing times :func:`render` appended to ``path`` (then removed):
    {"pictures": {picture: [start, end]}} (the last drawing of each) and how many
    processes drew them."""
    drawn, pids = {}, set()
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        lines = []
    try:  # (never left beside the pictures, read or not)
        os.unlink(path)
    except OSError:
        pass
    if not lines:
        return {}
    for line in lines:
        drawn[line["picture"]] = [line["start"], line["end"]]
        pids.add(line["pid"])
    return {"pictures": drawn, "children": len(pids)}


#: Most processes drawing pictures at once (the report has 7).
MAX_WORKERS = 8


def _fork(groups: list[list], times: tuple[str, float] | None = None) -> list[tuple[int, list]]:
    """One forked child per group of jobs, each drawing its group and exiting:
    [(pid, group)].  The children inherit the arrays (nothing is pickled) and
    matplotlib, imported here first.  A group that cannot be forked is drawn here.
    ``times``: as :func:`render`'s.

    The children are forked with this process's objects frozen (``gc.freeze``, undone
    here after the forks): their collections look only at what they make, not at the
    heap they inherit (a workflow's warm process has Numba, pandas and the kernels
    loaded; a full collection of it took a picture's drawing from 0.07 to 0.16-0.18 s
    on the 2-core VM)."""
    import gc

    plots.preload()
    children = []
    me = os.getpid()
    gc.freeze()
    try:
        for group in groups:
            try:
                pid = os.fork()
            except OSError:
                render(group, times)
                continue
            if pid == 0:
                run_child(me, render, group, times)
            children.append((pid, group))
    finally:
        gc.unfreeze()
    return children


def _wait(children: list[tuple[int, list]]) -> None:
    """Wait for :func:`_fork`'s children; draw here the pictures of any that failed."""
    for pid, group in children:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            log.warning(
                f"the plotting process ended (exit status {os.waitstatus_to_exitcode(status)});"
                " drawing its pictures here"
            )
            render(group)


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


def _n_workers(workers: int | None, n_jobs: int) -> int:
    """Drawing processes for ``n_jobs`` pictures: ``workers``, or by default the CPUs
    this process may use (at most :data:`MAX_WORKERS`); never more than the pictures."""
    n = min(MAX_WORKERS, usable_cpus()) if workers is None else max(1, int(workers))
    return min(n, n_jobs)


def _paths(out_dir) -> dict[str, str]:
    return {name: os.path.join(os.fspath(out_dir), name) for name in OUTPUTS}


def _picture_jobs(hits, changes, table, steps, out) -> list[tuple[str, str, tuple]]:
    """(figure function of plots, output, arguments) of the seven pictures."""
    counts = table["hits"].to_numpy(np.int64)
    best = pd.to_numeric(table["best_score"], errors="coerce").fillna(0).to_numpy(np.int64)
    ids = table["qseqid"].tolist()
    best_ev = pd.to_numeric(pd.Series(hits.best_evalue, dtype=object), errors="coerce").to_numpy(
        np.float64
    )
    change_counts = (
        table[["new", "gone", "changed_score"]].to_numpy(np.int64) if changes is not None else None
    )
    return [
        ("scores_figure", out["scores.png"], (hits.scores, hits.best_score, len(ids))),
        ("evalues_figure", out["evalues.png"], (hits.evalues, best_ev, len(ids))),
        ("hits_per_query_figure", out["hits_per_query.png"], (counts,)),
        ("top_queries_figure", out["top_queries.png"], (ids, counts, best)),
        ("shards_figure", out["shards.png"], (steps.shards,)),
        ("steps_figure", out["steps.png"], (steps.records,)),
        ("changes_figure", out["changes.png"], (ids, change_counts)),
    ]


#: The pictures that need only hits.tsv, the queries and the scoring jobs'
#: statistics: rule finish draws them while its traceback runs (:func:`start_early`).
#: Those that list the queries are drawn again when changes.tsv names a query that
#: neither the query file nor hits.tsv has (their arguments differ then).
EARLY = ("scores.png", "evalues.png", "hits_per_query.png", "top_queries.png", "shards.png")
#: The longest the early pictures wait for the alignments (``start_early(gate=True)``).
GATE_S = 30.0


@dataclass
class _Early:
    pid: int
    paths: list[str]  # the pictures it may write
    send: int  # the pipe's writing end: run-steps and make_report send it messages
    started: float  # time.time() at the fork
    timeline: str  # where it writes when it did what (seconds from the fork; JSON)


_EARLY: dict[str, _Early] = {}  # by the output folder's real path


def start_early(
    hits_path,
    stats_paths,
    out_dir,
    queries_path=None,
    workers=None,
    changes_path=None,
    gate=False,
) -> None:
    """Fork a process that draws :data:`EARLY` into ``out_dir`` now (the arguments
    as :func:`make_report`'s); :func:`make_report` for the same folder sends it the
    other pictures to draw and waits for it.  ``swgpu run-steps`` calls this after
    the merge, so that the pictures are drawn while the traceback runs.  The forked
    process reads its inputs and imports matplotlib itself: this one goes on at
    once (matplotlib's import, 0.3-0.5 s, is off the traceback's path) and never
    imports matplotlib.

    The other pictures are drawn ahead too where their inputs are ready before
    :func:`make_report`: the changes' as soon as ``changes_path`` (the early
    changes' file, :func:`swgpu_tools.steps.history.early_changes_file`) is
    written, the steps' when :func:`traceback_done` says the step statistics are.
    :func:`make_report` then sends every picture it would draw; the process draws
    those whose figure arguments differ from what it drew ahead (so the files are
    the same as drawn at the end).

    ``gate``: the process imports matplotlib and reads its inputs at once, but starts
    drawing (several processes at once) only when :func:`alignments_done` says the
    traceback's alignments are made (or after :data:`GATE_S`, or at any other
    message): the drawing processes would take CPUs from the alignments' threads."""
    os.makedirs(out_dir, exist_ok=True)
    out = _paths(out_dir)
    n = _n_workers(workers, len(EARLY))
    slots = _n_workers(workers, MAX_WORKERS)  # drawing processes at once
    receive, send = os.pipe()
    started = time.time()
    timeline_path = os.path.join(out_dir, f".early-timeline.{os.getpid()}.json")
    times = (f"{timeline_path}.drawn", started)  # each picture's drawing (render)
    marks: dict = {}

    def mark(name: str) -> None:
        marks[name] = round(time.time() - started, 3)

    def draw() -> None:
        os.close(send)
        running: list[tuple[int, list]] = []  # the children drawing now: (pid, jobs)

        def stop(*_):  # cancel_early: the drawing processes end before this one
            for pid, _ in running:
                os.kill(pid, signal.SIGKILL)
            for pid, _ in running:
                os.waitpid(pid, 0)
            os._exit(1)

        signal.signal(signal.SIGTERM, stop)
        plots.preload()
        hits = data.summarize_hits(hits_path)
        queries = data.read_query_ids(queries_path) if queries_path is not None else None
        steps = data.read_step_records(stats_paths)
        table = data.query_table(hits, None, queries)
        jobs = _picture_jobs(hits, None, table, steps, out)
        drawn: dict[str, bytes] = {}  # picture -> the digest of the job drawing it
        mark("inputs")

        def reap(child) -> None:
            running.remove(child)
            _wait([child])  # (a child that failed: its pictures drawn here)

        def start(todo: list, groups: int = 1) -> int:
            """Draw those of ``todo`` not drawn alike in new children (``groups`` of
            them), without waiting: the changes' and steps' pictures are drawn beside
            the early ones.  A picture still being drawn with other arguments: that
            child is waited for first.  Returns how many pictures it started."""
            new = [(j, d) for j, d in ((j, _digest(j)) for j in todo) if drawn.get(j[1]) != d]
            todo = [j for j, _ in new]
            if not todo:
                return 0
            paths = {j[1] for j in todo}
            for child in [c for c in running if paths & {j[1] for j in c[1]}]:
                reap(child)
            m = max(1, min(groups, len(todo)))
            while running and len(running) + m > slots:  # no more at once than CPUs
                reap(running[0])
            running.extend(_fork([todo[k::m] for k in range(m)], times))
            drawn.update({j[1]: d for j, d in new})
            return len(todo)

        inbox = _Inbox(receive)
        held = []  # a message that came while the drawing waited for the alignments
        if gate:
            kind, payload = inbox.next(timeout=GATE_S)
            mark(f"gate_{kind}")  # gate_aligned: opened by the traceback's alignments
            if kind not in ("aligned", "wait"):
                held.append((kind, payload))
        start([j for j in jobs if os.path.basename(j[1]) in EARLY], groups=n)
        changes, pending = None, changes_path
        while True:
            if pending is not None and os.path.exists(pending):  # the early changes
                try:
                    changes = data.count_changes(pending)
                except Exception:  # noqa: BLE001 - moved by the release step meanwhile
                    changes = None  # (or unreadable): drawn at the end
                pending = None
                if changes is not None:  # its picture, and those whose query list grew
                    table = data.query_table(hits, changes, queries)
                    ahead = _picture_jobs(hits, changes, table, steps, out)
                    mark("changes")
                    # (the steps' picture: its statistics come later)
                    start([j for j in ahead if os.path.basename(j[1]) != "steps.png"])
            if held:
                kind, payload = held.pop()
            else:
                kind, payload = inbox.next(timeout=0.02 if pending is not None else None)
            if kind in ("wait", "aligned"):
                continue
            if kind == "stats":  # the step statistics are complete: the steps' picture
                mark("stats_message")
                steps = data.read_step_records(stats_paths)
                ahead = _picture_jobs(hits, changes, table, steps, out)
                start([j for j in ahead if os.path.basename(j[1]) == "steps.png"])
                mark("stats_forked")
                continue
            # the end (make_report's jobs: those not drawn with the same arguments)
            mark("end_message")
            last = start(payload or [], groups=n)
            log.debug(f"pictures drawn at the end: {last} of {len(payload or [])}")
            while running:
                reap(running[0])
            mark("end")
            marks["drawn_at_end"] = last
            marks.update(_drawn(times[0]))
            try:  # for make_report's statistics; best effort
                with open(timeline_path, "w", encoding="utf-8") as fh:
                    json.dump(marks, fh)
            except OSError:
                pass
            return

    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        run_child(me, draw)
    os.close(receive)
    # every picture it may draw (ahead, or at the end): what cancel_early removes
    pictures = [out[name] for name in OUTPUTS if name.endswith(".png")]
    _EARLY[os.path.realpath(out_dir)] = _Early(pid, pictures, send, started, timeline_path)


def alignments_done() -> None:
    """Tell the early pictures' processes started with ``gate`` that the traceback's
    alignments are made: they start drawing now."""
    for early in _EARLY.values():
        _post(early.send, ("aligned", None))


def traceback_done() -> None:
    """Tell the early pictures' processes that the step statistics are complete
    (``swgpu run-steps``, after the traceback): they draw the steps' picture now."""
    for early in _EARLY.values():
        _post(early.send, ("stats", None))


def _digest(job) -> bytes:
    """A picture job's identity: its function, output and arguments."""
    import hashlib
    import pickle

    return hashlib.blake2b(pickle.dumps(job, protocol=4), digest_size=16).digest()


def _post(fd: int, message) -> None:
    """One message on a pipe (length, then the pickle); best effort."""
    import pickle
    import struct

    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    buf = memoryview(struct.pack("<Q", len(payload)) + payload)
    try:
        while len(buf):
            buf = buf[os.write(fd, buf) :]
    except OSError:  # the process ended (its pictures are drawn at the end)
        pass


class _Inbox:
    """The messages :func:`_post` wrote to a pipe: ("stats", None), ("jobs", [...]),
    then the end ("end", None) when the writer closes it; ("wait", None) when
    none came within ``timeout`` seconds."""

    def __init__(self, fd: int):
        self.fd = fd  # read unbuffered: select() sees every byte not yet taken

    def _read(self, size: int) -> bytes:
        parts = []
        while size > 0 and (part := os.read(self.fd, min(size, 1 << 20))):
            parts.append(part)
            size -= len(part)
        return b"".join(parts)

    def next(self, timeout=None):
        import pickle
        import select
        import struct

        if timeout is not None and not select.select([self.fd], [], [], timeout)[0]:
            return "wait", None
        head = self._read(8)
        if len(head) < 8:
            return "end", None
        (size,) = struct.unpack("<Q", head)
        return pickle.loads(self._read(size))


def _send(early: _Early, jobs: list):
    """Send ``jobs`` to the early process and close the pipe, on a thread (the pipe
    holds 64 KiB and the process reads when its pictures so far are drawn): the
    thread, to join.  A process that ended already is seen at its wait."""
    import threading

    def write() -> None:
        _post(early.send, ("jobs", jobs))
        try:
            os.close(early.send)
        except OSError:
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def cancel_early() -> None:
    """Stop the processes :func:`start_early` started (a later step failed), and
    remove what they wrote."""
    while _EARLY:
        _, early = _EARLY.popitem()
        try:
            os.close(early.send)
        except OSError:
            pass
        try:
            os.kill(early.pid, signal.SIGTERM)
            os.waitpid(early.pid, 0)
        except OSError:
            pass
        drawn = f"{early.timeline}.drawn"  # (the pictures' drawing times)
        for path in [*early.paths, early.timeline, drawn]:  # what they wrote, temporary files
            folder, name = os.path.split(path)
            stray = [f for f in os.listdir(folder) if f.startswith(f".{name}.")]
            for p in [path, *(os.path.join(folder, f) for f in stray if f.endswith(".tmp"))]:
                try:
                    os.unlink(p)
                except OSError:
                    pass


def _timeline(early: _Early, report_at: float) -> dict:
    """When the early process did what (seconds from its fork: inputs read, the early
    changes read, the stats message, the end's message and the end, when every
    picture was drawn), with when this step began; its file removed."""
    try:
        with open(early.timeline, encoding="utf-8") as fh:
            marks = json.load(fh)
        os.unlink(early.timeline)
    except (OSError, ValueError):
        marks = {}
    marks["plots_step_began"] = round(report_at - early.started, 3)
    return marks


def make_report(
    hits_path,
    changes_path,
    stats_paths,
    out_dir,
    queries_path=None,
    stats_out=None,
    workers: int | None = None,
) -> list[str]:
    """Write the report's pictures and tables (:data:`OUTPUTS`) into ``out_dir``.

    ``hits_path``: ``hits.tsv``; ``changes_path``: ``changes.tsv`` or None;
    ``stats_paths``: step statistics JSON files (``score_shard`` ones give the
    per-shard chart, every file the per-step chart; files that do not exist
    are skipped); ``queries_path``: the query FASTA or None (adds queries
    without hits and their lengths); ``stats_out``: where to write this
    step's own statistics (JSON) or None; ``workers``: processes drawing the
    pictures (default: the CPUs this process may use, at most
    :data:`MAX_WORKERS`; the pictures are dealt out in turn, this process
    draws its share and writes the tables while forked children draw
    theirs; 1: all here).  Returns the paths written.
    """
    from ..io.stepstats import StepTimer

    timer = StepTimer("plots")
    report_at = time.time()
    os.makedirs(out_dir, exist_ok=True)
    with timer.phase("read"):
        hits = data.summarize_hits(hits_path)
        changes = data.count_changes(changes_path) if changes_path is not None else None
        queries = data.read_query_ids(queries_path) if queries_path is not None else None
        steps = data.read_step_records(stats_paths)
        table = data.query_table(hits, changes, queries)
    for path in steps.missing:
        log.info(f"no step statistics at {path} (not shown)")
    out = _paths(out_dir)
    jobs = _picture_jobs(hits, changes, table, steps, out)
    early = _EARLY.pop(os.path.realpath(out_dir), None)
    if early is not None:  # drawing since the merge (start_early): it draws the rest too
        with timer.phase("plots"):
            sending = _send(early, jobs)  # it draws those it has not drawn alike
        with timer.phase("tables"):
            _write_tables(table, steps, out)
        with timer.phase("plots"):
            t = time.perf_counter()
            sending.join()
            _, status = os.waitpid(early.pid, 0)
            timer.fields["early_wait_s"] = round(time.perf_counter() - t, 4)
            timer.fields["early_timeline_s"] = _timeline(early, report_at)
            if status != 0:
                log.warning(
                    f"the early plotting process ended (exit status "
                    f"{os.waitstatus_to_exitcode(status)}); drawing its pictures here"
                )
                render(jobs)
    else:
        n = _n_workers(workers, len(jobs))
        if "fork" not in multiprocessing.get_all_start_methods():
            n = 1
        groups = [jobs[k::n] for k in range(n)]
        with timer.phase("plots"):
            children = _fork(groups[1:])
        try:
            with timer.phase("plots"):
                render(groups[0])
            with timer.phase("tables"):
                _write_tables(table, steps, out)
        except BaseException:
            for pid, _ in children:  # reap them; the error stands
                os.waitpid(pid, 0)
            raise
        with timer.phase("plots"):
            _wait(children)
    timer.fields.update(
        early=early is not None,
        queries=len(table),
        hits=int(len(hits.scores)),
        shards=int(len(steps.shards)),
        outputs=len(OUTPUTS),
    )
    record = timer.write(stats_out)
    log.info(
        f"{len(hits.scores):,} hits of {len(table):,} queries, {len(steps.shards):,} scoring "
        f"jobs, {len(steps.records):,} step statistics files -> {os.fspath(out_dir)} "
        f"({len(OUTPUTS)} files, {record['wall_s']:.1f} s)"
    )
    return [out[name] for name in OUTPUTS]
