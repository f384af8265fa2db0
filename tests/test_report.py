"""The report step (swgpu_tools.report): pictures of a fixed size whatever the
number of queries, per-query tables equal to an independent computation from
hits.tsv, ids kept exactly as written, statistics from JSON files only.

References here are computed with the csv module and plain Python, not with
the report's pandas code.
"""

from __future__ import annotations

import csv
import json
import os
import random
import struct
import sys
from collections import Counter

import pytest

pytest.importorskip("matplotlib")

from swgpu_tools.report import OUTPUTS, make_report  # noqa: E402
from swgpu_tools.report.data import QUERY_COLUMNS  # noqa: E402

HITS_HEADER = ["qseqid", "sseqid", "score", "bitscore", "evalue", "qlen", "slen"]
CHANGES_HEADER = [
    "qseqid",
    "sseqid",
    "change",
    "previous_score",
    "score",
    "previous_evalue",
    "evalue",
    "slen",
]

#: Ids that pandas' defaults turn into NaN, quote-parse, treat as comments, or
#: that are HTML.  (Tabs and line breaks cannot be in an id.)
HOSTILE = [
    '"s1',
    "NA",
    "nan",
    "#x",
    'sp|"Q1|A_HUMAN',
    "N/A",
    "null",
    "None",
    "-nan",
    "1e5",
    "</script><script>alert(1)</script>",
    "a&b",
    "'q'",
    '""',
]


def write_table(path, header, rows) -> None:
    with open(path, "w") as fh:
        fh.write("\t".join(header) + "\n")
        for r in rows:
            fh.write("\t".join(str(x) for x in r) + "\n")


def read_table(path) -> list[dict]:
    """Independent reader: the csv module, no quoting, every cell text."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def png_size(path) -> tuple[int, int]:
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def shard_stats(folder, n, backend="gpu", gcups=100.0) -> list[str]:
    paths = []
    os.makedirs(os.path.join(folder, "score_shard"), exist_ok=True)
    for i in range(n):
        path = os.path.join(folder, "score_shard", f"shard-{i:04d}.json")
        with open(path, "w") as fh:
            json.dump(
                {
                    "step": "score_shard",
                    "format": 1,
                    "shard": f"shard-{i:04d}.swdb",
                    "backend": backend,
                    "device": 0,
                    "queries": 3,
                    "cells": gcups * 1e9 * 2,
                    "kernel_s": 2.0,
                    "gcups": gcups,
                    "wall_s": 3.0 + i % 3,
                    "phases_s": {"read": 0.5, "score": 2.2, "write": 0.1},
                    "hits": 10,
                    "peak_rss_bytes": 10**8,
                },
                fh,
            )
        paths.append(path)
    return paths


def random_scan(tmp_path, nq, max_hits, seed=0, ids=None, na_evalues=False, min_hits=0):
    """hits.tsv and changes.tsv of ``nq`` queries with random hits (ties in
    scores; rows in no particular order); returns their paths."""
    rng = random.Random(seed)
    qids = ids or [f"q{i}" for i in range(nq)]
    hits, changes = [], []
    for q in qids:
        for j in range(rng.randint(min_hits, max_hits)):
            score = rng.choice([20, 25, 25, 40, 40, 40, 77])
            ev = "NA" if na_evalues else rng.choice(["0.0", "1e-50", "2.3e-05", "7.1", "0.001"])
            bits = "NA" if na_evalues else f"{score * 0.4:.1f}"
            s = f"{q}-s{j}"
            hits.append([q, s, score, bits, ev, 100 + len(q), rng.randint(10, 999)])
            kind = rng.choice(["new", "gone", "score", "score"])
            changes.append([q, s, kind, "NA", score, "NA", ev, 55])
    rng.shuffle(hits)
    rng.shuffle(changes)
    write_table(tmp_path / "hits.tsv", HITS_HEADER, hits)
    write_table(tmp_path / "changes.tsv", CHANGES_HEADER, changes)
    return tmp_path / "hits.tsv", tmp_path / "changes.tsv"


def expected_queries(hits_path, changes_path) -> dict[str, dict]:
    """Per query, from the csv module: hits, the best hit (highest score,
    first in file order), and the change counts."""
    out: dict[str, dict] = {}
    for row in read_table(hits_path):
        q = out.setdefault(row["qseqid"], {"hits": 0, "best": None})
        q["hits"] += 1
        if q["best"] is None or int(row["score"]) > int(q["best"]["score"]):
            q["best"] = row
    changes = Counter((r["qseqid"], r["change"]) for r in read_table(changes_path))
    for (qid, _), _n in changes.items():
        out.setdefault(qid, {"hits": 0, "best": None})
    for qid, q in out.items():
        q["new"], q["gone"], q["changed_score"] = (
            changes[(qid, k)] for k in ("new", "gone", "score")
        )
    return out


def check_query_table(path, expected: dict[str, dict], order: list[str] | None = None) -> None:
    rows = read_table(path)
    assert list(rows[0].keys()) == QUERY_COLUMNS
    got = {r["qseqid"]: r for r in rows}
    assert len(got) == len(rows), "a query is listed twice"
    assert set(got) == set(expected)
    if order is not None:
        assert [r["qseqid"] for r in rows] == order
    for qid, e in expected.items():
        r = got[qid]
        assert int(r["hits"]) == e["hits"], qid
        for k in ("new", "gone", "changed_score"):
            assert int(r[k]) == e[k], (qid, k)
        if e["best"] is None:
            assert (r["best_sseqid"], r["best_score"], r["best_evalue"]) == ("NA", "NA", "NA")
        else:
            b = e["best"]
            assert (
                r["best_sseqid"],
                r["best_score"],
                r["best_bitscore"],
                r["best_evalue"],
                r["qlen"],
            ) == (b["sseqid"], b["score"], b["bitscore"], b["evalue"], b["qlen"])


def test_query_table_equals_an_independent_computation(tmp_path):
    hits, changes = random_scan(tmp_path, 60, 12, seed=3)
    written = make_report(hits, changes, [], tmp_path / "out")
    assert [os.path.basename(p) for p in written] == OUTPUTS
    check_query_table(tmp_path / "out" / "queries.tsv", expected_queries(hits, changes))
    # drawing half of the pictures in a forked process changes no byte
    make_report(hits, changes, [], tmp_path / "one", workers=1)
    for name in OUTPUTS:
        same = (tmp_path / "out" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
        assert same, name


def test_hostile_ids_round_trip(tmp_path):
    """Ids that pandas would read as NaN, a quote, a comment or HTML come out
    exactly as written, in the TSV and in the HTML page, and are counted
    once each (an id ``NA`` once made 6 queries look like 7)."""
    hits, changes = random_scan(tmp_path, 0, 5, seed=7, ids=HOSTILE)
    # every query gets at least one hit and one change; and a query only in changes.tsv
    rows = read_table(hits)
    present = {r["qseqid"] for r in rows}
    extra = [[q, q + "-x", 30, "12.0", "1e-3", 9, 9] for q in HOSTILE if q not in present]
    write_table(hits, HITS_HEADER, [list(r.values()) for r in rows] + extra)
    with open(changes, "a") as fh:
        fh.write("\t".join(["NaN", "x", "gone", "20", "NA", "0.1", "NA", "5"]) + "\n")
    out = tmp_path / "out"
    make_report(hits, changes, [], out)
    expected = expected_queries(hits, changes)
    assert len(expected) == len(HOSTILE) + 1
    check_query_table(out / "queries.tsv", expected, order=None)
    # order: first appearance in hits.tsv, then changes.tsv
    order = list(dict.fromkeys([r["qseqid"] for r in read_table(hits)] + ["NaN"]))
    assert [r["qseqid"] for r in read_table(out / "queries.tsv")] == order
    page = (out / "queries.html").read_text()
    assert "</script><script>alert" not in page
    blob = page.split('<script id="data" type="application/json">', 1)[1].split("</script>", 1)[0]
    data = json.loads(blob)
    assert [r[0] for r in data["rows"]] == order
    assert data["columns"] == QUERY_COLUMNS


def test_queries_without_hits_come_from_the_fasta(tmp_path):
    hits, changes = random_scan(tmp_path, 0, 3, seed=1, ids=["NA", "b"])
    fasta = tmp_path / "q.fasta"
    fasta.write_text(">zero first\nMKV\n>b\nACDEFG\n>NA\nMKVLA\n>nohit2\nWW\n")
    make_report(hits, changes, [], tmp_path / "out", queries_path=fasta)
    rows = read_table(tmp_path / "out" / "queries.tsv")
    assert [r["qseqid"] for r in rows] == ["zero", "b", "NA", "nohit2"]
    by = {r["qseqid"]: r for r in rows}
    assert by["zero"]["hits"] == "0" and by["zero"]["qlen"] == "3"
    assert by["nohit2"]["best_score"] == "NA" and by["nohit2"]["qlen"] == "2"
    assert by["b"]["qlen"] == "6"  # the FASTA's length, not hits.tsv's


def test_pictures_stay_within_2000_px_for_10000_queries(tmp_path):
    """10,000 queries and 300 shards: every picture has the same size as
    with 3 queries and 2 shards, at most 2,000 px a side."""
    small = tmp_path / "small"
    small.mkdir()
    hs, cs = random_scan(small, 3, 4, seed=2)
    make_report(hs, cs, shard_stats(small / "stats", 2), small / "out")
    big = tmp_path / "big"
    big.mkdir()
    ids = [f"sp|Q{i:06d}|A_VERY_LONG_ENTRY_NAME_{i}_HUMAN" for i in range(10_000)]
    hb, cb = random_scan(big, 0, 6, seed=4, ids=ids, min_hits=1)
    make_report(hb, cb, shard_stats(big / "stats", 300), big / "out")
    for name in OUTPUTS:
        if name.endswith(".png"):
            w, h = png_size(big / "out" / name)
            assert w <= 2000 and h <= 2000, (name, w, h)
            assert (w, h) == png_size(small / "out" / name), name
    assert len(read_table(big / "out" / "queries.tsv")) == 10_000


def test_statistics_come_from_json_never_from_logs(tmp_path):
    """A decoy log says 999 GCUPS on a GPU; the JSON says 12.5 on the CPU:
    steps.tsv has the JSON's numbers and no log or benchmark file is opened."""
    hits, changes = random_scan(tmp_path, 4, 3, seed=5)
    logs = tmp_path / "logs" / "score_shard"
    logs.mkdir(parents=True)
    (logs / "shard-0000.log").write_text(
        "[swgpu 00:00:00] backend: gpu (decoy)\n"
        "scored 4 queries x 10 sequences (1,000 residues) in 0.01 s: 999.00 GCUPS\n"
    )
    stats = shard_stats(tmp_path / "stats", 1, backend="cpu", gcups=12.5)
    merge = tmp_path / "stats" / "merge_hits.json"
    merge.write_text(
        json.dumps({"step": "merge_hits", "wall_s": 4.0, "phases_s": {"read": 1.0, "merge": 2.0}})
    )
    missing = [str(tmp_path / "stats" / name) for name in ("traceback.json", "shard_db.json")]
    opened: list[str] = []
    _HOOK_TARGETS.append(opened)
    try:
        # workers=1: every file is opened in this process, where the hook sees it
        make_report(hits, changes, stats + [str(merge)] + missing, tmp_path / "out", workers=1)
    finally:
        _HOOK_TARGETS.remove(opened)
    assert opened, "the audit hook saw no file opened"
    assert not [p for p in opened if p.endswith(".log") or os.sep + "logs" + os.sep in p]
    rows = read_table(tmp_path / "out" / "steps.tsv")
    assert [(r["step"], r["shard"]) for r in rows] == [("merge_hits", ""), ("score_shard", "0000")]
    shard = rows[1]
    assert (shard["backend"], float(shard["gcups"])) == ("cpu", 12.5)
    assert float(rows[0]["wall_s"]) == 4.0 and float(rows[0]["read_s"]) == 1.0


_HOOK_TARGETS: list[list[str]] = []


def _audit(event, args):
    if (
        event == "open"
        and _HOOK_TARGETS
        and args
        and isinstance(args[0], (str, bytes, os.PathLike))
    ):
        for target in _HOOK_TARGETS:
            target.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


def test_scheme_without_statistics_and_empty_tables(tmp_path):
    """E-values all NA (a scheme without BLAST statistics), and a scan with no
    hits and no changes: every output is still written."""
    hits, changes = random_scan(tmp_path, 5, 4, seed=6, na_evalues=True)
    make_report(hits, changes, [], tmp_path / "na")
    rows = read_table(tmp_path / "na" / "queries.tsv")
    assert {r["best_evalue"] for r in rows if r["hits"] != "0"} == {"NA"}
    write_table(tmp_path / "h0.tsv", HITS_HEADER, [])
    write_table(tmp_path / "c0.tsv", CHANGES_HEADER, [])
    written = make_report(tmp_path / "h0.tsv", tmp_path / "c0.tsv", [], tmp_path / "empty")
    assert all(os.path.getsize(p) > 0 for p in written)
    assert read_table(tmp_path / "empty" / "queries.tsv") == []


def test_a_table_without_the_needed_columns_is_an_input_error(tmp_path):
    from swgpu_tools.errors import InputError

    write_table(tmp_path / "h.tsv", ["qseqid", "score"], [["a", 1]])
    with pytest.raises(InputError, match="no column"):
        make_report(tmp_path / "h.tsv", None, [], tmp_path / "out")


def test_page_size_limit_of_the_one_file_report():
    """Chromium opens data: URLs up to 2 MiB (2,097,152 characters); Snakemake
    embeds a page as base64 (4 characters per 3 bytes) after a short prefix."""
    from swgpu_tools.report.html import fits_one_file_report

    prefix = len("data:text/html;charset=utf8;filename=queries.html;base64,")
    largest = (2_097_152 - prefix) // 4 * 3
    assert fits_one_file_report(largest)
    assert not fits_one_file_report(largest + 1)
    assert fits_one_file_report(1_500_000) and not fits_one_file_report(1_600_000)


def test_a_dead_plotting_process_is_replaced(tmp_path, monkeypatch, caplog):
    """If the forked process drawing half of the pictures dies, this one draws them."""
    from swgpu_tools.report import make

    parent = os.getpid()
    original = make.render

    def dies_in_the_child(jobs):
        if os.getpid() != parent:
            os._exit(3)
        return original(jobs)

    # pickled by reference: make it findable as swgpu_tools.report.make.render
    dies_in_the_child.__module__, dies_in_the_child.__qualname__ = make.__name__, "render"
    monkeypatch.setattr(make, "render", dies_in_the_child)
    hits, changes = random_scan(tmp_path, 5, 4, seed=8)
    written = make_report(hits, changes, [], tmp_path / "out", workers=2)
    assert "the plotting process ended" in caplog.text
    for path in written:
        if path.endswith(".png"):
            assert png_size(path)[0] > 0


def _same_pictures(alone, early, label=None) -> None:
    """Every output of make_report in ``early`` equals the one in ``alone``."""
    for name in OUTPUTS:
        assert (early / name).read_bytes() == (alone / name).read_bytes(), (label, name)


def _early_in_a_process(tmp_path, seed: int, head: str, start: str, middle: str, tail: str):
    """A random scan's pictures drawn alone, then by a new process's start_early (with
    the extra arguments ``start``) and make_report into ``early``; ``head``,
    ``middle`` and ``tail``: that process's lines before, between and after.  The
    process's result (it succeeded)."""
    import subprocess

    hits, changes = random_scan(tmp_path, 20, 6, seed=seed)
    stats = shard_stats(tmp_path / "stats", 2)
    make_report(hits, changes, stats, tmp_path / "alone")
    rest = f"{[str(p) for p in stats]!r}, {str(tmp_path / 'early')!r}"
    script = (
        f"{head}from swgpu_tools.report.make import start_early, make_report\n"
        f"start_early({str(hits)!r}, {rest}{start})\n{middle}"
        f"make_report({str(hits)!r}, {str(changes)!r}, {rest})\n{tail}"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.slow  # every picture drawn twice, 8-11 s; .ci/run runs it
def test_pictures_started_early_equal_those_drawn_at_the_end(tmp_path):
    """start_early (rule finish: after the merge, beside the traceback) draws the
    pictures of the hits before changes.tsv exists; make_report then draws the
    rest.  The files equal those of make_report alone, also when changes.tsv names
    a query that neither hits.tsv nor the query file has (a query file changed
    since the previous release: its pictures list one query more, so they are
    drawn again)."""
    from swgpu_tools.report.make import EARLY, start_early

    for extra in (False, True):
        work = tmp_path / f"extra{extra}"
        work.mkdir()
        hits, changes = random_scan(work, 30, 9, seed=11)
        fasta = work / "q.fasta"
        fasta.write_text("".join(f">q{i}\nMKV\n" for i in range(30)) + ">nohit\nWW\n")
        if extra:
            with open(changes, "a") as fh:
                fh.write("\t".join(["gone_q", "x", "gone", "20", "NA", "0.1", "NA", "5"]) + "\n")
        stats = shard_stats(work / "stats", 2)
        make_report(hits, changes, stats, work / "alone", queries_path=fasta)
        start_early(hits, stats, work / "early", queries_path=fasta)
        make_report(hits, changes, stats, work / "early", queries_path=fasta)
        _same_pictures(work / "alone", work / "early", extra)
        assert set(EARLY) <= set(OUTPUTS)
        assert not [p for p in (work / "early").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow  # 9 s; .ci/run runs it
def test_early_pictures_with_a_gate_wait_for_the_alignments(tmp_path):
    """start_early(gate=True) (run-steps, a traceback before the plots): no picture is
    drawn until alignments_done() says the alignments are made; then they are, the
    same files as make_report alone.  Without the message, make_report's own jobs
    open the gate."""
    import time

    from swgpu_tools.report import make

    hits, changes = random_scan(tmp_path, 20, 6, seed=8)
    stats = shard_stats(tmp_path / "stats", 2)
    make_report(hits, changes, stats, tmp_path / "alone")
    make.start_early(hits, stats, tmp_path / "early", gate=True)
    time.sleep(3.0)  # inputs read, matplotlib imported: still no picture
    assert not [p for p in (tmp_path / "early").iterdir() if p.suffix == ".png"]
    make.alignments_done()
    deadline = time.time() + 60
    want = {os.path.join(tmp_path / "early", name) for name in make.EARLY}
    while time.time() < deadline and not all(os.path.exists(p) for p in want):
        time.sleep(0.05)
    assert all(os.path.exists(p) for p in want)
    make_report(hits, changes, stats, tmp_path / "early")
    _same_pictures(tmp_path / "alone", tmp_path / "early")
    make.start_early(hits, stats, tmp_path / "shut", gate=True)
    make_report(hits, changes, stats, tmp_path / "shut")
    _same_pictures(tmp_path / "alone", tmp_path / "shut")


def test_the_step_that_starts_the_pictures_early_never_imports_matplotlib(tmp_path):
    """After start_early the early process draws every picture (make_report sends it
    the rest), so the step's own process (rule finish: its traceback waits on it)
    never imports matplotlib; the pictures equal those of make_report alone."""
    proc = _early_in_a_process(
        tmp_path, 5, "import sys\n", "", "", "print('matplotlib' in sys.modules)\n"
    )
    assert proc.stdout.split() == ["False"], proc.stdout + proc.stderr
    _same_pictures(tmp_path / "alone", tmp_path / "early")


def test_pictures_of_an_early_process_that_died_are_drawn_at_the_end(tmp_path, caplog):
    """The early process killed before make_report: make_report draws every picture
    itself, the same files as alone."""
    import signal

    from swgpu_tools.report import make

    hits, changes = random_scan(tmp_path, 20, 6, seed=6)
    stats = shard_stats(tmp_path / "stats", 2)
    make_report(hits, changes, stats, tmp_path / "alone")
    make.start_early(hits, stats, tmp_path / "early")
    (early,) = make._EARLY.values()
    os.kill(early.pid, signal.SIGKILL)
    make_report(hits, changes, stats, tmp_path / "early")
    assert "the early plotting process ended" in caplog.text
    _same_pictures(tmp_path / "alone", tmp_path / "early")


def test_pictures_whose_inputs_are_ready_are_drawn_ahead(tmp_path):
    """The early process draws the changes' picture as soon as the early changes
    file exists, and the steps' picture when told the step statistics are complete
    (``traceback_done``); make_report's jobs then leave it nothing to draw, and the
    files equal those drawn alone."""
    changes = tmp_path / "changes.tsv"  # random_scan writes it there
    proc = _early_in_a_process(
        tmp_path,
        7,
        "from swgpu_tools.logs import configure\nconfigure(1)\n",
        f", changes_path={str(changes)!r}",
        "from swgpu_tools.report.make import traceback_done\ntraceback_done()\n",
        "",
    )
    assert "pictures drawn at the end: 0 of 7" in proc.stderr, proc.stderr
    _same_pictures(tmp_path / "alone", tmp_path / "early")


def test_the_steps_picture_draws_only_bars_that_show_and_looks_as_with_all(tmp_path):
    """plots.steps_figure draws a phase's bar only in the rows where it has seconds (one
    at least, for the legend): a third of the patches here, and the same picture, pixel
    for pixel, as with every row's bar of every phase drawn (as before)."""
    import numpy as np
    from PIL import Image

    from swgpu_tools.report import plots

    records = [
        {
            "step": "shard_db",
            "wall_s": 0.5,
            "phases_s": {"read": 0.3, "write": 0.17, "digest": 0.0},
        },
        {
            "step": "score_shard",
            "wall_s": 2.1,
            "phases_s": {"read": 0.2, "match": 0.2, "score": 1.3},
        },
        {"step": "score_shard", "wall_s": 1.9, "phases_s": {"read": 0.1, "score": 1.6}},
        {"step": "merge_hits", "wall_s": 0.6, "phases_s": {"read": 0.02, "merge": 0.5}},
        {"step": "traceback", "wall_s": 0.7, "phases_s": {"align": 0.45, "write": 0.16}},
        {"step": "plots", "wall_s": 0.3, "phases_s": {"plots": 0.2, "read": 0.06}},
        {"step": "zz_last", "wall_s": 0.0, "phases_s": {"read": 0.0}},  # a row of no bars
    ]
    fig = plots.steps_figure(records)
    shown = [p for p in fig.axes[0].patches if p.get_width() > 0]
    # (a phase with no seconds in any row, "digest", keeps one bar of no width: its legend)
    assert len(fig.axes[0].patches) - len(shown) == 1 and len(shown) == 20
    assert len(plots.step_rows(records)) == 7
    plots.save_png(fig, tmp_path / "steps.png")

    from unittest import mock

    from matplotlib.axes import Axes

    original = Axes.barh
    n_rows = len(plots.step_rows(records))

    def every_bar(self, y, vals, left, **kwargs):  # as before: each row's bar of each phase
        v, lf = np.zeros(n_rows), np.zeros(n_rows)
        v[np.asarray(y)], lf[np.asarray(y)] = vals, left
        return original(self, np.arange(n_rows), v, left=lf, **kwargs)

    with mock.patch.object(Axes, "barh", every_bar):
        fig2 = plots.steps_figure(records)
    assert len(fig2.axes[0].patches) == 7 * 9  # 7 rows x (8 phases and the rest)
    plots.save_png(fig2, tmp_path / "steps_all.png")
    a = np.asarray(Image.open(tmp_path / "steps.png").convert("RGB"))
    b = np.asarray(Image.open(tmp_path / "steps_all.png").convert("RGB"))
    assert a.shape == b.shape and (a == b).all()


def test_the_preloads_log_axes_leave_the_pictures_as_they_were(tmp_path):
    """plots.preload draws a small figure with log axes once (matplotlib's mathtext
    parser then comes with the drawing processes it forks): the pictures with log axes,
    drawn in a process that preloaded so, are byte for byte those of a process that
    only imported matplotlib (as before)."""
    import subprocess

    script = """
import sys
import numpy as np
from swgpu_tools.report import plots
if sys.argv[2] == "imports only":
    plots._WARM.append(True)
plots.preload()
assert bool(plots._WARM)
rng = np.random.default_rng(5)
scores = rng.integers(20, 5000, 3000)
evalues = 10.0 ** rng.uniform(-150, 1, 3000)
counts = rng.integers(0, 300, 200)
for name, fig in [
    ("scores", plots.scores_figure(scores, scores[:200], 200)),
    ("evalues", plots.evalues_figure(evalues, evalues[:200], 200)),
    ("hits_per_query", plots.hits_per_query_figure(counts)),
]:
    plots.save_png(fig, f"{sys.argv[1]}/{name}.png")
"""
    made = {}
    for mode in ("imports only", "log axes drawn"):
        out = tmp_path / mode.replace(" ", "_")
        out.mkdir()
        subprocess.run([sys.executable, "-c", script, str(out), mode], check=True)
        made[mode] = {p.name: p.read_bytes() for p in sorted(out.glob("*.png"))}
    assert len(made["imports only"]) == 3
    assert made["imports only"] == made["log axes drawn"]


def test_drawing_children_are_forked_with_the_heap_frozen(tmp_path, monkeypatch):
    """report.make._fork forks the drawing processes with the parent's objects frozen
    (their collections never walk the inherited heap) and unfreezes the parent after."""
    import gc

    from swgpu_tools.report import make

    def frozen_count(group, times=None):  # (what a child runs instead of drawing)
        (tmp_path / group[0]).write_text(str(gc.get_freeze_count()))

    monkeypatch.setattr(make, "render", frozen_count)
    before = gc.get_freeze_count()
    children = make._fork([["a"], ["b"]])
    assert gc.get_freeze_count() == before
    make._wait(children)
    counts = [int((tmp_path / name).read_text()) for name in "ab"]
    assert all(c > max(before, 1000) for c in counts), (before, counts)
