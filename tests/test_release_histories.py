"""Issue 12 at the level of the tables: random release histories run through the
workflow's steps (shard, score-shard with its state, merge, traceback with the
history's alignments, release), and after every release hits.tsv and
alignments.tsv equal, byte for byte, a scan from scratch of that release (the same
steps in a new folder: no state, no history).

The histories change, add and remove entries (mutated copies of the queries, so
there are real alignments to reuse, and exact duplicates, so there are ties),
raise and lower ``top_k``, change the margin, ``max_evalue`` and the gap costs (a
scheme change forces a full scan).  The steps run in this process
(``swgpu_tools.cli.main``) on the CPU backend, whose scores test_kernels_cpu.py
checks against SSEARCH; test_increment.py checks the shard-level logic against
brute force; test_rescan.py runs histories through Snakemake.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swgpu_tools.cli import main

LETTERS = np.frombuffer(b"ACDEFGHIKLMNPQRSTVWY", dtype=np.uint8)
SHARDS = 2


def _mutate(rng, seq: bytes, identity: float) -> bytes:
    a = np.frombuffer(seq, dtype=np.uint8).copy()
    swap = rng.random(len(a)) > identity
    a[swap] = LETTERS[rng.integers(0, 20, int(swap.sum()))]
    if len(a) > 12 and rng.random() < 0.5:  # an indel
        k = int(rng.integers(1, len(a) - 1))
        a = np.delete(a, slice(k, k + int(rng.integers(1, 4))))
    return a.tobytes()


def _random(rng, n: int) -> bytes:
    return LETTERS[rng.integers(0, 20, n)].tobytes()


@st.composite
def histories(draw):
    """(queries, releases, settings per release) from a seed and the shape hypothesis draws."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    queries = {
        f"q{i}": _random(rng, int(rng.integers(25, 60))) for i in range(draw(st.integers(1, 3)))
    }
    qseqs = list(queries.values())

    def entry():
        kind = draw(st.sampled_from(["homolog", "homolog", "random", "duplicate"]))
        if kind == "random":
            return _random(rng, int(rng.integers(15, 80)))
        q = qseqs[int(rng.integers(0, len(qseqs)))]
        if kind == "duplicate":
            return q  # ties: several subjects with the same score
        return _mutate(rng, q, float(rng.uniform(0.4, 0.98)))

    release = {f"s{i:03d}": entry() for i in range(draw(st.integers(4, 14)))}
    releases = [release]
    for r in range(draw(st.integers(1, 3))):
        cur = dict(releases[-1])
        for key in sorted(cur):
            what = draw(st.integers(0, 9))
            if what == 0 and len(cur) > 1:
                del cur[key]  # removed (top hits at the margin among them)
            elif what == 1:
                cur[key] = entry()  # changed
            elif what == 2:
                cur[key] = _mutate(rng, cur[key], 0.9)  # changed a little
        for j in range(draw(st.integers(0, 3))):
            cur[f"n{r}_{j}"] = entry()  # added
        releases.append(cur)
    runs = [
        {
            "top_k": draw(st.sampled_from([1, 2, 3, 5, 8])),
            "margin": draw(st.sampled_from([0, 1, 4])),
            "gap_open": draw(st.sampled_from([11, 11, 11, 10])),
            "max_evalue": draw(st.sampled_from(["10", "10", "0.001"])),
        }
        for _ in releases
    ]
    return queries, releases, runs


def _write_fasta(path: Path, records: dict[str, bytes]) -> None:
    with open(path, "w") as fh:
        for key, seq in records.items():
            fh.write(f">sp|{key.upper()}|{key}_TEST entry {key}\n{seq.decode()}\n")


def _ok(argv: list) -> None:
    assert main([str(a) for a in argv]) == 0, argv


def _run(folder: Path, database: Path, queries: Path, run: dict, incremental: bool) -> dict:
    """One run of the workflow's steps on ``database`` in ``folder`` (the incremental
    run keeps its state and history there between releases); the scoring jobs'
    statistics."""
    r = folder
    for sub in ("hits", "stats", "state", "internal", "history"):
        (r / sub).mkdir(parents=True, exist_ok=True)
    scoring = ["--matrix", "BLOSUM62", "--gap-open", run["gap_open"], "--gap-extend", 1]
    _ok(["shard", database, "--shards", SHARDS, "--out-dir", r / "shards", "--threads", 1])
    shards = sorted((r / "shards").glob("shard-*.swdb"))
    tables, stats = [], []
    # the incremental folder scores its shards in one job (whose table is their joint
    # top-k, SWGPU_JOB_TOPK=1: the cut of a job whose candidates pass CUT_ROWS; it keeps a state per
    # shard); the scratch one a job per shard
    for job in [shards] if incremental else [[x] for x in shards]:
        name = job[0].stem if len(job) == 1 else f"{job[0].stem}-{job[-1].stem[6:]}"
        out = r / "hits" / f"{name}.npz"
        state = ["--state", *(r / "state" / f"{x.stem}.npz" for x in job)] if incremental else []
        with mock.patch.dict(os.environ, {"SWGPU_JOB_TOPK": "1"}):
            _ok(
                ["score-shard", *job, "--queries", queries, "--out", out]
                + ["--stats", r / "stats" / f"{name}.json", *state, "--margin", run["margin"]]
                + ["--top-k", run["top_k"], "--backend", "cpu", "--threads", 1, *scoring]
            )
        tables.append(out)
        stats.append(json.loads((r / "stats" / f"{name}.json").read_text()))
    info = r / "shards" / "database.json"
    _ok(
        ["merge", "--queries", queries, "--database-info", info, "--out", r / "hits.tsv"]
        + ["--stats", r / "stats" / "merge_hits.json", *scoring, "--top-k", run["top_k"]]
        + ["--max-evalue", run["max_evalue"], "--threads", 1, *tables]
    )
    _ok(
        ["traceback", "--hits", r / "hits.tsv", "--queries", queries]
        + ["--out", r / "alignments.tsv", "--internal", r / "internal" / "reuse.tsv"]
        + ["--previous", r / "history", "--stats", r / "stats" / "traceback.json", *scoring]
        + ["--threads", 1, "--quarantine", r / "corrupt", *shards]
    )
    _ok(
        ["release", "--hits", r / "hits.tsv", "--alignments", r / "alignments.tsv"]
        + ["--internal", r / "internal" / "reuse.tsv", "--database-info", info]
        + ["--queries", queries, "--history", r / "history"]
        + ["--marker", r / "history" / "current.json", "--changes", r / "changes.tsv"]
        + ["--manifest", r / "swgpu-run.json", "--config-json", json.dumps(run)]
    )
    return {"score": stats, "traceback": json.loads((r / "stats" / "traceback.json").read_text())}


def _check_history(root: Path, queries, releases, runs) -> list[dict]:
    qfile = root / "queries.fasta"
    _write_fasta(qfile, queries)
    database = root / "database.fasta"  # one path, a new content each release
    inc = root / "incremental"
    seen = []
    for k, (release, run) in enumerate(zip(releases, runs)):
        _write_fasta(database, release)
        got = _run(inc, database, qfile, run, incremental=True)
        scratch = root / f"scratch{k}"
        _run(scratch, database, qfile, run, incremental=False)
        for table in ("hits.tsv", "alignments.tsv"):
            assert (inc / table).read_bytes() == (scratch / table).read_bytes(), (k, table, run)
        seen.append(got)
    return seen


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(history=histories())
def test_any_release_history_gives_the_tables_of_a_scan_from_scratch(history, tmp_path_factory):
    queries, releases, runs = history
    _check_history(tmp_path_factory.mktemp("history"), queries, releases, runs)


@pytest.mark.slow
def test_a_history_reuses_scores_and_alignments_and_a_scheme_change_scores_all(tmp_path):
    """A fixed history: the second release (same scheme) scores only its new and changed
    sequences and reuses alignments; the third (gap open 10) scores everything again;
    every table equals the scratch scan's (so the property test above runs the
    incremental paths, not full scans that would pass trivially)."""
    rng = np.random.default_rng(7)
    queries = {"q0": _random(rng, 50), "q1": _random(rng, 40)}
    first = {f"s{i:03d}": _mutate(rng, queries[f"q{i % 2}"], 0.7) for i in range(12)}
    first |= {f"r{i:03d}": _random(rng, 60) for i in range(12)}
    second = dict(first)
    del second["s000"]  # a top hit removed
    second["s001"] = _mutate(rng, queries["q1"], 0.95)  # changed
    second["n000"] = queries["q0"]  # added: an exact copy, the new top hit
    runs = [
        {"top_k": 5, "margin": 2, "gap_open": 11, "max_evalue": "10"},
        {"top_k": 4, "margin": 2, "gap_open": 11, "max_evalue": "10"},
        {"top_k": 4, "margin": 2, "gap_open": 10, "max_evalue": "10"},
    ]
    seen = _check_history(tmp_path, queries, [first, second, second], runs)
    total = sum(s["sequences"] for s in seen[1]["score"])
    assert sum(s["delta_sequences"] for s in seen[1]["score"]) < total
    assert all(s["mode"] != "full" for s in seen[1]["score"]), seen[1]["score"]
    assert seen[1]["traceback"]["reused"] > 0
    assert all(s["mode"] == "full" for s in seen[2]["score"]), seen[2]["score"]
    assert seen[2]["traceback"]["reused"] == 0
