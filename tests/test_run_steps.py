"""``swgpu run-steps``: the workflow's steps after scoring in one process (rule
finish) give the same tables as the same steps run one process each; the chain
stops at the first failing step with its status; ``traceback --quarantine``
moves a corrupt shard aside when the step fails; the step statistics of a chained
step count its start-up from the previous step's end, not from the process's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "swgpu_tools" / "data"
QUERIES = DATA / "example_queries.fasta"
DATABASE = DATA / "example_database.fasta.gz"
SCORING = ["--matrix", "BLOSUM62", "--gap-open", "11", "--gap-extend", "1"]
SEP = ":::"


def swgpu(*args, cwd=None, env=None):
    """The command as the workflow runs it (``python -m swgpu_tools.cli`` goes
    through the console script's entry, fast exit included)."""
    return subprocess.run(
        [sys.executable, "-m", "swgpu_tools.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def _ok(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Two shards of the example database, scored on the CPU."""
    root = tmp_path_factory.mktemp("steps")
    _ok(swgpu("shard", DATABASE, "--shards", "2", "--out-dir", root / "shards", "--threads", "1"))
    tables = []
    for k in range(2):
        out = root / "hits" / f"shard-{k:04d}.npz"
        _ok(
            swgpu(
                "score-shard",
                root / "shards" / f"shard-{k:04d}.swdb",
                "--queries",
                QUERIES,
                "--out",
                out,
                "--backend",
                "cpu",
                "--threads",
                "1",
                "--top-k",
                "20",
                *SCORING,
            )
        )
        tables.append(out)
    return root, tables


def _steps(root: Path, out: Path, tables) -> list[list[str]]:
    """merge, traceback, release and plots as rule finish gives them (Snakemake
    makes the output folders)."""
    for sub in ("internal", "history", "plots"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    shards = [str(root / "shards" / f"shard-{k:04d}.swdb") for k in range(2)]
    info = str(root / "shards" / "database.json")
    r = str(out)
    return [
        ["merge", "--queries", str(QUERIES), "--database-info", info, "--out", f"{r}/hits.tsv"]
        + ["--stats", f"{r}/stats/merge_hits.json", *SCORING, "--top-k", "20"]
        + ["--max-evalue", "10", *map(str, tables)],
        ["traceback", "--hits", f"{r}/hits.tsv", "--queries", str(QUERIES)]
        + ["--out", f"{r}/alignments.tsv", "--internal", f"{r}/internal/reuse.tsv"]
        + ["--previous", f"{r}/history", "--stats", f"{r}/stats/traceback.json", *SCORING]
        + ["--threads", "1", "--quarantine", f"{r}/corrupt", *shards],
        ["release", "--hits", f"{r}/hits.tsv", "--alignments", f"{r}/alignments.tsv"]
        + ["--internal", f"{r}/internal/reuse.tsv", "--database-info", info]
        + ["--queries", str(QUERIES), "--history", f"{r}/history"]
        + ["--marker", f"{r}/history/current.json", "--changes", f"{r}/changes.tsv"]
        + ["--manifest", f"{r}/swgpu-run.json", "--config-json", "{}"],
        ["plots", "--hits", f"{r}/hits.tsv", "--changes", f"{r}/changes.tsv"]
        + ["--queries", str(QUERIES), "--out-dir", f"{r}/plots"]
        + ["--stats", f"{r}/stats/plots.json", f"{r}/stats/merge_hits.json"]
        + [f"{r}/stats/traceback.json"],
    ]


def _chain(steps: list[list[str]]) -> list[str]:
    out = ["run-steps"]
    for k, step in enumerate(steps):
        out += ([SEP] if k else []) + step
    return out


TABLES = ["hits.tsv", "alignments.tsv", "changes.tsv", "plots/queries.tsv"]


@pytest.mark.slow  # the four steps run twice, 11-17 s on the 2-core VM; .ci/run runs it
def test_one_process_gives_the_tables_of_one_process_per_step(scored):
    root, tables = scored
    alone, chained = root / "alone", root / "chained"
    for step in _steps(root, alone, tables):
        _ok(swgpu(*step))
    proc = _ok(swgpu(*_chain(_steps(root, chained, tables))))
    for name in TABLES:
        assert (chained / name).read_bytes() == (alone / name).read_bytes(), name
    assert (chained / "hits.tsv").stat().st_size > 100  # hits, not just a header
    assert sorted(p.name for p in (chained / "plots").iterdir()) == sorted(
        p.name for p in (alone / "plots").iterdir()
    )
    # the pictures of the hits were drawn beside the traceback, and are the same
    # (steps.png shows each run's own times)
    plots_stats = json.loads((chained / "stats/plots.json").read_text())
    assert plots_stats["early"] is True
    # ... once the traceback said its alignments were made (its message came first)
    timeline = plots_stats["early_timeline_s"]
    assert "gate_aligned" in timeline, timeline
    # each picture's drawing (by the early process's children), after the gate opened;
    # no file of those times is left beside the pictures
    drawn = timeline["pictures"]
    assert sorted(drawn) == sorted(p.name for p in (chained / "plots").glob("*.png")), drawn
    assert all(timeline["gate_aligned"] <= a <= b <= timeline["end"] for a, b in drawn.values())
    assert timeline["children"] >= 1
    assert not [p for p in (chained / "plots").iterdir() if p.name.startswith(".")]
    assert json.loads((alone / "stats/plots.json").read_text())["early"] is False
    for name in ["scores.png", "evalues.png", "hits_per_query.png", "top_queries.png"]:
        assert (chained / "plots" / name).read_bytes() == (alone / "plots" / name).read_bytes()
    # SWGPU_EARLY_STEPS=0 (for measuring): nothing made beside the traceback, the same
    # tables and pictures
    late = root / "late"
    env = dict(os.environ, SWGPU_EARLY_STEPS="0")
    _ok(swgpu(*_chain(_steps(root, late, tables)), env=env))
    for name in TABLES:
        assert (late / name).read_bytes() == (alone / name).read_bytes(), name
    assert json.loads((late / "stats/plots.json").read_text())["early"] is False
    for name in ["scores.png", "evalues.png", "hits_per_query.png", "top_queries.png"]:
        assert (late / "plots" / name).read_bytes() == (alone / "plots" / name).read_bytes()
    # each step logs as on its own, in order
    log = proc.stderr
    assert log.index("merged") < log.index("wrote") < log.index("kept release")
    # a chained step's start-up counts from the previous step's end
    merge = json.loads((chained / "stats/merge_hits.json").read_text())
    tb = json.loads((chained / "stats/traceback.json").read_text())
    assert tb["before_step_s"] <= tb["start_epoch"] - merge["start_epoch"] - merge["wall_s"] + 0.01
    assert merge["before_step_s"] > 0  # the first step: the process's own start-up


def test_the_chain_stops_at_the_first_failing_step_with_its_status(scored, tmp_path):
    root, tables = scored
    steps = _steps(root, tmp_path, tables)
    steps[0][steps[0].index("--queries") + 1] = str(tmp_path / "missing.fasta")
    proc = swgpu(*_chain(steps))
    assert proc.returncode == 2, proc.stderr
    assert "swgpu merge: error:" in proc.stderr and "missing.fasta" in proc.stderr
    assert not (tmp_path / "hits.tsv").exists()
    assert not (tmp_path / "stats" / "plots.json").exists()


def test_a_step_name_that_is_not_a_step_is_refused_before_any_runs(scored, tmp_path):
    root, tables = scored
    steps = _steps(root, tmp_path, tables)
    for bad in (["search", "x"], []):
        proc = swgpu(*_chain([steps[0], bad]))
        assert proc.returncode == 2 and "is not a workflow step" in proc.stderr, proc.stderr
    assert not (tmp_path / "hits.tsv").exists()  # merge did not run either
    assert swgpu("run-steps", "--help").stdout.startswith("usage: swgpu run-steps")


def test_traceback_quarantines_a_corrupt_shard_when_it_fails(scored, tmp_path):
    root, tables = scored
    shards = tmp_path / "shards"
    shards.mkdir()
    for p in (root / "shards").iterdir():
        data = bytearray(p.read_bytes())
        if p.suffix == ".swdb":
            data[-50] ^= 0x01  # silent corruption: same size and time
        (shards / p.name).write_bytes(bytes(data))
    merge, traceback = _steps(root, tmp_path, tables)[:2]
    _ok(swgpu(*merge))
    paths = [str(shards / f"shard-{k:04d}.swdb") for k in range(2)]
    no_quarantine = traceback[: traceback.index("--quarantine")] + paths
    proc = swgpu(*no_quarantine)
    assert proc.returncode == 2 and "checksum mismatch" in proc.stderr, proc.stderr
    assert all(Path(p).exists() for p in paths)  # without --quarantine: only the error
    proc = swgpu(*traceback[: traceback.index("--quarantine") + 2], *paths)
    assert proc.returncode == 2 and "checksum mismatch" in proc.stderr, proc.stderr
    moved = sorted(p.name.split(".swdb")[0] for p in (tmp_path / "corrupt").iterdir())
    assert moved == ["shard-0000", "shard-0001"]
    assert not any(Path(p).exists() for p in paths)
    assert not (tmp_path / "alignments.tsv").exists()


def test_swgpu_profile_leaves_the_statistics_of_a_step(scored, tmp_path):
    """$SWGPU_PROFILE: the command runs under cProfile and writes its statistics there
    (also through the fast exit of a workflow step)."""
    import os
    import pstats

    root, tables = scored
    merge = _steps(root, tmp_path / "out", tables)[0]
    proc = swgpu(*merge, env=dict(os.environ, SWGPU_PROFILE=str(tmp_path / "prof")))
    assert proc.returncode == 0, proc.stderr
    (prof,) = (tmp_path / "prof").glob("merge-*.prof")
    stats = pstats.Stats(str(prof))
    assert any(fn[2] == "merge_hits" for fn in stats.stats), "the step's function is profiled"


def test_a_failing_step_after_the_merge_leaves_no_pictures(scored, tmp_path):
    """The pictures of the hits start after the merge; the traceback fails (a
    shard is missing): the chain stops, and no picture is left behind."""
    root, tables = scored
    steps = _steps(root, tmp_path, tables)
    tb = steps[1]
    tb[tb.index("--quarantine") + 2] = str(tmp_path / "no-such-shard.swdb")
    proc = swgpu(*_chain(steps))
    assert proc.returncode != 0
    assert (tmp_path / "hits.tsv").exists()  # the merge ran
    assert list((tmp_path / "plots").iterdir()) == []
    # nor changes, started beside the traceback too
    assert [p.name for p in tmp_path.iterdir() if "changes" in p.name] == []


@pytest.mark.slow  # four chained step runs, ~10 s; .ci/run runs the slow tests too
def test_changes_made_beside_the_traceback_equal_the_release_steps_own(scored, tmp_path):
    """Two releases in a row, chained: the second's changes.tsv (against the first)
    is computed after the merge, beside the traceback, and equals the one the
    release step writes on its own."""
    root, tables = scored
    # release 2: the same shards' hits, cut to the top 3 per query (some are gone)
    for label, chained in (("alone", False), ("chained", True)):
        out = tmp_path / label
        for k, release in enumerate(("2026_01", "2026_02")):
            steps = _steps(root, out, tables)
            steps[2] += ["--release", release]
            if k:
                steps[0][steps[0].index("--top-k") + 1] = "3"
            if chained:
                proc = _ok(swgpu(*_chain(steps)))
            else:
                for step in steps:
                    proc = _ok(swgpu(*step))
            if k and chained:
                assert "computed beside the traceback" in proc.stderr, proc.stderr[-2000:]
            if k and not chained:
                assert "computed beside the traceback" not in proc.stderr
    a, b = tmp_path / "alone" / "changes.tsv", tmp_path / "chained" / "changes.tsv"
    assert a.read_bytes() == b.read_bytes()
    assert sum("\tgone\t" in line for line in b.read_text().splitlines()) > 3, b.read_text()
    assert not [p for p in (tmp_path / "chained").iterdir() if ".early." in p.name]


def test_early_changes_are_not_taken_when_another_release_was_kept_meanwhile(tmp_path):
    """The early changes compare with the newest kept release at the merge's end; if
    another release is kept before the release step (another run in the same
    folder), the release step compares with that one, as without the early start."""
    import os
    import time

    from swgpu_tools.steps import history

    hist = tmp_path / "history"
    head = "qseqid\tsseqid\tqacc\tsacc\tscore\tevalue\tslen\n"

    def hits(name, rows):
        p = tmp_path / name
        p.write_text(head + "".join(f"q\tsp|{s}|X\tq\t{s}\t{v}\t1e-5\t100\n" for s, v in rows))
        return p

    def keep(release, hits_path, info):
        for f in ("a.tsv", "i.tsv"):
            (tmp_path / f).write_text("x\n")
        history.record_release(
            hits_path,
            tmp_path / "a.tsv",
            tmp_path / "i.tsv",
            info,
            hist,
            tmp_path / "current.json",
            release,
        )

    info = tmp_path / "database.json"
    info.write_text(json.dumps({"content_blake2b": "ab" * 32, "sequences": 3, "residues": 300}))
    keep("r1", hits("h1.tsv", [("A", 50), ("B", 40)]), info)
    cur = hits("h3.tsv", [("A", 50), ("C", 30)])
    out = tmp_path / "changes.tsv"
    history.start_changes_early(cur, info, hist, out, release="r3")  # against r1
    time.sleep(0.01)
    keep("r2", hits("h2.tsv", [("A", 50), ("C", 30)]), info)  # kept meanwhile
    keep("r3", cur, info)
    history.write_changes(cur, tmp_path / "current.json", hist, out)
    # against r2: nothing changed (against r1 B would be gone and C new)
    assert out.read_text().splitlines()[1:] == []
    assert not [p for p in os.listdir(tmp_path) if ".early." in p]


def test_an_early_start_removes_what_a_killed_runs_early_process_left(tmp_path):
    """A run killed while its changes were being made early leaves their temporary
    files; the next early start removes them (and only them)."""
    from swgpu_tools.steps import history

    info = tmp_path / "database.json"
    info.write_text(json.dumps({"content_blake2b": "cd" * 32, "sequences": 1, "residues": 9}))
    hits = tmp_path / "hits.tsv"
    hits.write_text("qseqid\tsseqid\tqacc\tsacc\tscore\tevalue\tslen\n")
    left = ["changes.tsv.early.999.tmp", ".changes.tsv.early.999.tmp.x1y2.tmp"]
    kept = ["changes.tsv.old", "other.early.1.tmp"]
    for name in left + kept:
        (tmp_path / name).write_text("x")
    out = tmp_path / "changes.tsv"
    history.start_changes_early(hits, info, tmp_path / "history", out)
    assert history.take_changes_early(out, history.release_name(json.loads(info.read_text())), None)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert not set(left) & set(names) and set(kept) <= set(names), names
    assert out.read_text().startswith("qseqid\t")


def test_a_forked_helper_ends_with_the_step_that_forked_it(tmp_path):
    """The early changes' and the pictures' processes are killed when the step's
    process is: a parent that forks a helper (as `report.make` does) and is then
    killed leaves no helper running (``forked.run_child``, which both use)."""
    import os
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, time\n"
        "from swgpu_tools.forked import run_child\n"
        "me = os.getpid()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    null = os.open(os.devnull, os.O_WRONLY)  # not the parent's pipes\n"
        "    os.dup2(null, 1)\n"
        "    os.dup2(null, 2)\n"
        "    run_child(me, time.sleep, 60)\n"
        "print(pid, flush=True)\n"
        "time.sleep(0.3)\n"
        "os.kill(me, signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    child = int(proc.stdout.split()[0])

    def running() -> bool:
        try:
            with open(f"/proc/{child}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 5
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = running()
    if alive:
        os.kill(child, 9)
    assert not alive, "the helper outlived the step that forked it"


def test_the_warm_process_loads_every_kernel_the_traceback_calls(scored, tmp_path):
    """The warm process's finish generation loads the traceback's kernels from the
    disk cache (``alignment.warmup.load_hits_kernels``, before it forks, so with
    no thread): after it, the traceback step of a scan loads no other compiled
    function.  (The first step run fills the cache if it is cold.)"""
    root, tables = scored
    steps = _steps(root, tmp_path, tables)
    _ok(swgpu(*_chain(steps[:2])))
    script = (
        "import sys, numba\n"
        "from swgpu_tools.alignment.warmup import load_hits_kernels\n"
        "from swgpu_tools.cli import main\n"
        "def loaded():\n"
        "    return sum(len(v.signatures) for m in list(sys.modules.values())\n"
        "               if getattr(m, '__name__', '').startswith('swgpu_tools')\n"
        "               for v in vars(m).values() if isinstance(v, numba.core.registry.CPUDispatcher))\n"
        "import threading\n"
        "assert load_hits_kernels()\n"
        "assert threading.active_count() == 1, 'a thread was started'\n"
        "before = loaded()\n"
        f"assert main({steps[1]!r}) == 0\n"
        "print(before, loaded())\n"
    )
    proc = _ok(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True))
    before, after = map(int, proc.stdout.split())
    assert before > 0 and after == before, proc.stdout


def _after_the_alignment_stage(first: str, load_f: str, then: str) -> str:
    """The output of ``then``, run in a new process after the warm process's alignment
    stage (``_stage_alignment``) with the cache filled by ``first_hits`` and
    ``alignment.warmup.<first>``; ``load_f`` imports the function ``f`` checked: not
    loaded before the stage, and the stage starts no thread."""
    fill = (
        f"from swgpu_tools.alignment.warmup import first_hits, {first}\nfirst_hits(); {first}()\n"
    )
    _ok(subprocess.run([sys.executable, "-c", fill], capture_output=True, text=True))
    script = (
        "import threading\n" + load_f + "from swgpu_tools.warm.server import _stage_alignment\n"
        "assert not f.signatures\n"
        "_stage_alignment()\n"
        "assert threading.active_count() == 1, 'a thread was started'\n" + then
    )
    proc = _ok(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True))
    return proc.stdout


@pytest.mark.slow
def test_the_warm_process_loads_the_large_regions_traceback_too():
    """With the cache filled, the warm process's alignment stage also loads the
    traceback of large regions one at a time (16 threads take it for weak hits of
    long queries), on one thread, so that the step loads nothing itself."""
    out = _after_the_alignment_stage(
        "first_singles",
        "from swgpu_tools.alignment.batch import traceback_singles as f\n",
        "print(len(f.signatures), len(f.stats.cache_misses))\n",
    )
    assert out.split() == ["1", "0"], out


@pytest.mark.slow
def test_the_warm_process_loads_the_pair_lanes_path_too():
    """With the cache filled, the warm process's alignment stage also loads the hits'
    pair-lane path (``locate_chunk_pairs``: fewer than four hits per query, as in a
    re-scan's new hits), on one thread, with the argument types of the real path: a
    traceback of one hit per query afterwards loads nothing itself."""
    out = _after_the_alignment_stage(
        "first_pairs",
        "from swgpu_tools.alignment.pair_lanes import locate_chunk_pairs as f\n",
        "import numpy as np\n"
        "loaded = len(f.signatures)\n"
        "from swgpu_tools.alignment.api import align_many\n"
        "from swgpu_tools.scoring import ScoringScheme\n"
        "from swgpu_tools.sequences import EncodedSequences\n"
        "rng = np.random.default_rng(7)\n"
        "def encoded(lengths):\n"
        "    codes = rng.integers(0, 20, int(sum(lengths))).astype(np.uint8)\n"
        "    return EncodedSequences(codes, np.r_[0, np.cumsum(lengths)].astype(np.int64))\n"
        "q, d = encoded([150, 60, 220, 90]), encoded([140, 80, 200, 95, 70])\n"
        "qi, si = np.arange(4, dtype=np.int64), np.array([0, 1, 2, 4], dtype=np.int64)\n"
        "align_many(q, d, qi, si, ScoringScheme('BLOSUM62', 11, 1), threads=2, backend='cpu')\n"
        "print(loaded, len(f.signatures))\n",
    )
    assert out.split() == ["1", "1"], out


AUDIT = """
import os, runpy, sys
target = os.path.realpath(sys.argv[1])
log = open(sys.argv[2], "a")
def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        mode = args[1] if len(args) > 1 else None
        if isinstance(mode, str) and mode.startswith("r") or mode is None:
            if os.path.realpath(os.fsdecode(args[0])) == target:
                log.write(f"{os.getpid()}\\n"); log.flush()
sys.addaudithook(hook)
sys.argv = ["swgpu"] + sys.argv[3:]
runpy.run_module("swgpu_tools.cli", run_name="__main__")
"""


@pytest.mark.slow  # a chained run under the read counter, 10-11 s; .ci/run runs it
def test_one_process_reads_the_query_file_once(scored, tmp_path):
    """rule finish runs merge, traceback, release and plots in one process: the query
    file is read (its records parsed) once there, not once per step; on their own, the
    steps read it once each.  Counted with an audit hook on open() for reading (the
    gzip test's 2-byte peek before each read is an open too: so reads = opens / 2)."""
    root, tables = scored
    counts = {}
    for name, argv in (
        ("alone", None),
        ("chained", _chain(_steps(root, tmp_path / "chained", tables))),
    ):
        log = tmp_path / f"{name}.log"
        log.touch()
        runs = [argv] if argv else _steps(root, tmp_path / "alone", tables)
        for run in runs:
            proc = subprocess.run(
                [sys.executable, "-c", AUDIT, str(QUERIES), str(log), *run],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
        counts[name] = len(log.read_text().split())
    # alone: merge, traceback and plots read it (a peek and a read each; the release
    # reads it only when there is a previous release to compare with): 6 opens
    assert counts["alone"] >= 6, counts
    assert counts["chained"] == 2, counts  # one peek, one read
    for table in ("hits.tsv", "alignments.tsv"):
        assert (tmp_path / "chained" / table).read_bytes() == (
            tmp_path / "alone" / table
        ).read_bytes()


@pytest.mark.slow  # a chained run, 9-11 s; .ci/run runs it
def test_the_traceback_takes_the_merges_hits_table_without_reading_it(scored, tmp_path):
    """Chained after the merge, the traceback takes the hits table the merge wrote
    from memory (the same DataFrame as read: io.tables.keep_for_reading), without
    opening the file: its tables are the bytes of a traceback that reads it, with
    and without stored alignments to reuse."""
    root, tables = scored
    alone = _steps(root, tmp_path / "alone", tables)[:2]
    for step in alone:
        _ok(swgpu(*step))
    reuse = str(tmp_path / "alone" / "internal" / "reuse.tsv")
    # a previous release that had every other alignment: the rest aligned again, their
    # subjects read by the step (the others were read ahead, beside the merge)
    lines = (tmp_path / "alone" / "internal" / "reuse.tsv").read_text().splitlines(True)
    part = tmp_path / "part-reuse.tsv"
    part.write_text("".join(lines[:2] + lines[2::2]))
    cases = [("chained", None), ("reused", reuse), ("partly", str(part)), ("unread", reuse)]
    cases.append(("thread", str(part)))  # read ahead on a thread (the others: forked)
    for name, previous in cases:
        steps = _steps(root, tmp_path / name, tables)[:2]
        if previous:
            steps[1][steps[1].index("--previous") + 1] = previous
        log = tmp_path / f"{name}.log"
        log.touch()
        hits = tmp_path / name / "hits.tsv"
        env = dict(os.environ)  # "unread": SWGPU_PREFETCH_TRACEBACK=0, no reading ahead
        env["SWGPU_PREFETCH_TRACEBACK"] = {"unread": "0", "thread": "thread"}.get(name, "1")
        proc = subprocess.run(
            [sys.executable, "-c", AUDIT, str(hits), str(log), *_chain(steps)],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert log.read_text() == "", f"{name}: hits.tsv was read"
        for table in ("hits.tsv", "alignments.tsv", "internal/reuse.tsv"):
            assert (tmp_path / name / table).read_bytes() == (
                tmp_path / "alone" / table
            ).read_bytes(), (name, table)
        stats = json.loads((tmp_path / name / "stats" / "traceback.json").read_text())
        assert stats["read_phases_s"]["hits"] < 0.05
        assert stats["alignments"] > 0
        half = len(lines[2::2])
        reused = {"chained": 0, "reused": stats["alignments"], "partly": half, "thread": half}
        assert stats["reused"] == reused.get(name, stats["alignments"])
        if previous and name != "unread":  # the previous alignments, subjects read ahead
            have, missing = stats["read_ahead_subjects"]
            assert have > 0 and (missing > 0) == (name in ("partly", "thread")), stats
            if name != "thread":  # the forked child's timeline, in its order
                t = stats["read_ahead_timeline_s"]
                order = ("child_began", "child_read", "child_pickled", "received", "unpickled")
                assert [t[k] for k in order] == sorted(t[k] for k in order), t
                assert t["unpickled"] <= t["taken"] and t["asked"] <= t["taken"], t
                assert t["pickle_bytes"] > 0, t
            else:
                assert "read_ahead_timeline_s" not in stats
        else:
            assert "read_ahead_subjects" not in stats


def test_a_bad_option_of_a_later_step_is_reported_once(scored, tmp_path):
    """run-steps looks at the release step's options early (to make changes.tsv beside
    the traceback): an option it cannot read is reported by that step when it runs, not
    also by the early look, and the run fails there with argparse's status 2."""
    root, tables = scored
    steps = _steps(root, tmp_path, tables)
    steps[2] = steps[2] + ["--no-such-option"]
    proc = swgpu(*_chain(steps[:3]))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("unrecognized arguments: --no-such-option") == 1, proc.stderr[-2000:]
