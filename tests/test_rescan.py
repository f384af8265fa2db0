"""Re-scans, changes.tsv, faults and the SLURM profile: the workflow as people run it.

Runs `snakemake` as in tests/test_workflow.py (CPU backend, from outside the
repository).  Database v1: 400 bundled UniProt entries plus an exact and a
mutated copy of each of 2 queries, in 6 shards; v2 changes 4 entries (about
1%): one altered entry, one altered copy of a query (its score drops), one
removed (a hit is gone) and one added (a new hit).

* v1 then v2 in one folder (incremental) versus v2 from scratch: only the
  shards holding the changed ids get a scoring job, and each scores only the
  new and changed sequences; hits.tsv and alignments.tsv are byte-identical;
  changes.tsv lists the constructed changes against release v1; both releases
  are kept in results/history/.
* the same release again with other filters: no new release, and changes.tsv
  still compares with the previous release; an unchanged release scores
  nothing, nor does touching the database file.
* v2 killed with SIGKILL (snakemake and its children, the process group) while
  scoring, then restarted as README says: the same tables as the uninterrupted
  scratch run, and no output half-written.
* a truncated shard: the run fails naming it, the next run rebuilds it.
* the SLURM profile: the sbatch calls of the scoring jobs (a fake sbatch
  records them) ask for one GPU, 4 CPUs, 32 GB and 12 hours.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from test_workflow import (
    BIN,
    DATA,
    SNAKEFILE,
    SNAKEMAKE,
    STANDARD,
    _mutate,
    _read_fasta,
    _snakemake,
    _write_config,
    _write_fasta,
)

from swgpu_tools.io.shardfile import shard_of
from swgpu_tools.steps.changes import CHANGES_COLUMNS, compare

pytestmark = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")

SHARDS = 6
REPO = SNAKEFILE.parent


def _inputs(n_db: int = 400):
    import random

    rng = random.Random(11)
    queries = {}
    for _, seq in _read_fasta(DATA / "example_queries.fasta"):
        seq = seq.upper()
        if set(seq) <= STANDARD and len(seq) <= 400:
            queries[f"q{len(queries)}"] = seq
        if len(queries) == 2:
            break
    v1 = {}
    for _, seq in _read_fasta(DATA / "example_database.fasta.gz"):
        seq = seq.upper()
        if set(seq) <= STANDARD and len(seq) <= 300:
            v1[f"d{len(v1):04d}"] = seq
        if len(v1) == n_db:
            break
    for name, seq in queries.items():
        v1[f"self_{name}"] = seq
        v1[f"mut_{name}"] = _mutate(seq, rng)
    v2 = dict(v1)
    v2["d0010"] = v1["d0010"][:5] + ("W" if v1["d0010"][5] != "W" else "A") + v1["d0010"][6:]
    s = v1["self_q1"]
    v2["self_q1"] = s[:10] + "GGGG" + s[14:]  # score drops
    del v2["mut_q0"]  # a hit is gone
    v2["new_q0"] = _mutate(queries["q0"], rng)  # a new hit
    changed_ids = ["d0010", "self_q1", "mut_q0", "new_q0"]
    return queries, v1, v2, changed_ids


def _setup(workdir: Path, queries, database) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    _write_fasta(workdir / "queries.fasta", queries)
    _write_fasta(workdir / "database.fasta", database)
    # one shard per job: these tests follow single shards through re-scans and kills
    # (test_workflow.py re-scans with several shards per job)
    _write_config(workdir, shards=SHARDS, threads=1, shards_per_job=1)


def _scored_shards(proc) -> list[str]:
    out = proc.stdout + proc.stderr
    return sorted(re.findall(r"wildcards: shard=(\d+)", out))


def _tables(workdir: Path) -> dict[str, bytes]:
    return {
        name: (workdir / "results" / name).read_bytes() for name in ("hits.tsv", "alignments.tsv")
    }


@pytest.fixture(scope="module")
def rescan(tmp_path_factory):
    root = tmp_path_factory.mktemp("rescan")
    queries, v1, v2, changed_ids = _inputs()
    inc, scratch = root / "incremental", root / "scratch"
    _setup(inc, queries, v1)
    first = _snakemake(inc)
    tables_v1 = _tables(inc)
    release_v1 = json.loads((inc / "results/history/current.json").read_text())["release"]
    _write_fasta(inc / "database.fasta", v2)
    second = _snakemake(inc)
    _setup(scratch, queries, v2)
    third = _snakemake(scratch)
    return dict(
        root=root,
        inc=inc,
        scratch=scratch,
        queries=queries,
        v1=v1,
        v2=v2,
        changed_ids=changed_ids,
        first=first,
        second=second,
        third=third,
        tables_v1=tables_v1,
        release_v1=release_v1,
    )


def _stats(workdir: Path, shard: str) -> dict:
    return json.loads((workdir / f"results/stats/score_shard/shard-{shard}.json").read_text())


@pytest.mark.slow
def test_rescan_scores_only_the_new_and_changed_sequences(rescan):
    expected = sorted({f"{shard_of(i, SHARDS):04d}" for i in rescan["changed_ids"]})
    assert 0 < len(expected) < SHARDS
    assert _scored_shards(rescan["first"]) == [f"{i:04d}" for i in range(SHARDS)]
    assert _scored_shards(rescan["second"]) == expected
    changed = set(rescan["changed_ids"]) - {"mut_q0"}  # mut_q0 was removed
    for shard in expected:
        st = _stats(rescan["inc"], shard)
        assert st["mode"] == "incremental" and st["full_queries"] == 0
        ids = {i for i in changed if f"{shard_of(i, SHARDS):04d}" == shard}
        assert st["delta_sequences"] == len(ids)
        assert st["cells"] < 0.2 * st["full_scan_cells"]
    out = rescan["second"].stdout + rescan["second"].stderr
    for rule in ("finish",):
        assert re.search(rf"^(?:local)?rule {rule}:", out, re.MULTILINE), rule


@pytest.mark.slow
def test_rescan_tables_equal_a_scratch_scan(rescan):
    assert _tables(rescan["inc"]) == _tables(rescan["scratch"])
    # E-values follow the new database size (v2 has the same count, other residues)
    assert _tables(rescan["inc"])["hits.tsv"] != rescan["tables_v1"]["hits.tsv"]
    # the traceback reused the unchanged pairs' alignments and aligned the changed ones
    log = (rescan["inc"] / "results/logs/finish.log").read_text()
    m = re.search(r"aligned (\d+) hits in \S+ s; reused (\d+) alignments", log)
    assert m and int(m.group(2)) > 0 and int(m.group(1)) >= 2, log


@pytest.mark.slow
def test_both_releases_are_kept(rescan):
    history = rescan["inc"] / "results" / "history"
    v1 = history / rescan["release_v1"]
    assert (v1 / "hits.tsv").read_bytes() == rescan["tables_v1"]["hits.tsv"]
    assert (v1 / "alignments.tsv").read_bytes() == rescan["tables_v1"]["alignments.tsv"]
    manifest = json.loads((v1 / "manifest.json").read_text())
    assert manifest["database"]["sequences"] == len(rescan["v1"])
    assert manifest["config"]["top_k"] == 500
    current = json.loads((history / "current.json").read_text())["release"]
    assert current != rescan["release_v1"] and current.startswith("db-")
    assert (history / current / "hits.tsv").read_bytes() == _tables(rescan["inc"])["hits.tsv"]
    # swgpu changes A B compares any two kept releases: v1 -> v2 is changes.tsv
    out = rescan["root"] / "v1_v2.tsv"
    proc = subprocess.run(
        [
            str(BIN / "swgpu"),
            "changes",
            rescan["release_v1"],
            current,
            "--history",
            str(history),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == (rescan["inc"] / "results/changes.tsv").read_bytes()
    # scratch run: no previous release, every hit is new
    ch = pd.read_csv(rescan["scratch"] / "results/changes.tsv", sep="\t", keep_default_na=False)
    hits = pd.read_csv(rescan["scratch"] / "results/hits.tsv", sep="\t", keep_default_na=False)
    assert set(ch["change"]) == {"new"} and len(ch) == len(hits)


@pytest.mark.slow
def test_same_release_with_other_filters_is_not_a_new_release(rescan, tmp_path):
    """Changing max_evalue re-merges, replaces the release's entry, and changes.tsv
    still compares with the previous release; an unchanged rerun and a touched
    database score nothing."""
    work = tmp_path / "filters"
    shutil.copytree(rescan["inc"], work, symlinks=True)
    before = (work / "results/changes.tsv").read_bytes()
    proc = _snakemake(work, "--config", "max_evalue=1e-3")
    assert _scored_shards(proc) == []
    kept = sorted(p.name for p in (work / "results/history").iterdir() if p.is_dir())
    assert len(kept) == 2
    ch = pd.read_csv(work / "results/changes.tsv", sep="\t", keep_default_na=False, dtype=str)
    assert (work / "results/changes.tsv").read_bytes() != before  # the filter moved hits
    old = pd.read_csv(
        work / "results/history" / rescan["release_v1"] / "hits.tsv",
        sep="\t",
        keep_default_na=False,
        dtype=str,
    )
    new = pd.read_csv(work / "results/hits.tsv", sep="\t", keep_default_na=False, dtype=str)
    assert (new["evalue"].astype(float) <= 1e-3).all()
    _check_changes(old, new, ch)  # against release v1, not the earlier run of this release
    # nothing to do: no job at all
    proc = _snakemake(work, "--config", "max_evalue=1e-3")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    # the database touched, not changed: no job at all (its content digest, a
    # parameter of rule shard_db, is the one recorded)
    os.utime(work / "database.fasta")
    proc = _snakemake(work, "--config", "max_evalue=1e-3")
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_changes_table_lists_the_constructed_changes(rescan):
    inc = rescan["inc"]
    ch = pd.read_csv(inc / "results/changes.tsv", sep="\t", keep_default_na=False, dtype=str)
    assert list(ch.columns) == CHANGES_COLUMNS
    old = pd.read_csv(
        inc / "results/history" / rescan["release_v1"] / "hits.tsv",
        sep="\t",
        keep_default_na=False,
        dtype=str,
    )
    new = pd.read_csv(inc / "results/hits.tsv", sep="\t", keep_default_na=False, dtype=str)
    rows = {(r.qseqid, r.sseqid): r for r in ch.itertuples(index=False)}
    # the added near-copy of q0 is a new hit of q0; the removed copy is gone
    r = rows[("q0", "new_q0")]
    assert r.change == "new" and r.previous_score == "NA"
    assert r.score == new[(new.qseqid == "q0") & (new.sseqid == "new_q0")]["score"].item()
    r = rows[("q0", "mut_q0")]
    assert r.change == "gone" and r.score == "NA"
    assert r.previous_score == old[(old.qseqid == "q0") & (old.sseqid == "mut_q0")]["score"].item()
    # the altered copy of q1 scores lower
    r = rows[("q1", "self_q1")]
    assert r.change == "score" and int(r.score) < int(r.previous_score)
    # nothing else changed score (unchanged pairs keep their scores)
    assert set(ch[ch.change == "score"]["sseqid"]) <= {"self_q1", "d0010"}
    _check_changes(old, new, ch)


def _check_changes(old, new, ch):
    """Every row of changes.tsv is right against the two hits tables, and every
    difference is listed."""
    rows = {(r.qacc, r.sacc): r for r in ch.itertuples(index=False)}
    both = old.merge(new, on=["qacc", "sacc"], how="outer", suffixes=("_o", "_n"))
    assert len(both) > 0
    listed = 0
    for b in both.itertuples(index=False):
        key = (b.qacc, b.sacc)
        if pd.isna(b.score_o):
            assert rows[key].change == "new"
        elif pd.isna(b.score_n):
            assert rows[key].change == "gone"
        elif b.score_o != b.score_n:
            assert rows[key].change == "score"
        else:
            assert key not in rows
            continue
        listed += 1
    assert listed == len(ch)


def test_compare_constructed_case():
    prev = pd.DataFrame(
        {
            "qseqid": ["a", "a", "a", "b"],
            "sseqid": ["x", "y", "z", "x"],
            "qacc": ["a", "a", "a", "b"],
            "sacc": ["x", "y", "z", "x"],
            "score": ["50", "40", "30", "20"],
            "evalue": ["1e-5", "1e-3", "0.1", "2"],
            "slen": ["10", "11", "12", "10"],
        }
    )
    cur = pd.DataFrame(
        {
            "qseqid": ["b", "a", "a", "a"],
            "sseqid": ["w", "x", "y", "v"],
            "qacc": ["b", "a", "a", "a"],
            "sacc": ["w", "x", "y", "v"],
            "score": ["25", "50", "45", "35"],
            "evalue": ["1", "2e-5", "1e-4", "0.01"],
            "slen": ["9", "10", "11", "13"],
        }
    )
    out = compare(prev, cur, ["a", "b"])
    assert list(out.columns) == CHANGES_COLUMNS
    got = [
        tuple(r)
        for r in out[["qseqid", "sseqid", "change", "previous_score", "score", "slen"]].itertuples(
            index=False
        )
    ]
    assert got == [
        ("a", "v", "new", "NA", "35", "13"),
        ("a", "y", "score", "40", "45", "11"),
        ("a", "z", "gone", "30", "NA", "12"),
        ("b", "w", "new", "NA", "25", "9"),
        ("b", "x", "gone", "20", "NA", "10"),
    ]
    # a-x: same score, E-value moved with the database size: not listed
    assert ("a", "x") not in {(r[0], r[1]) for r in got}
    first = compare(None, cur, ["a", "b"])
    assert set(first["change"]) == {"new"} and len(first) == 4


def _env(workdir: Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["SWGPU_LOCK_DIR"] = str(workdir / "gpu-locks")
    return env


# A `swgpu` for the killed run: the first score-shard job runs the real
# command; every later one marks itself held and waits to be killed.  So the
# kill always finds one shard scored (and recorded by Snakemake) and scoring
# jobs running, however fast or slow the machine is.
GATE = r"""#!{python}
import os, sys, time
args = sys.argv[1:]
if args[:1] == ["score-shard"]:
    gate = os.environ["SWGPU_TEST_GATE"]
    shard = os.path.basename(args[1])
    try:
        fd = os.open(os.path.join(gate, "first"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        open(os.path.join(gate, "held-" + shard), "w").close()
        time.sleep(3600)  # until the test kills the run
        sys.exit(1)
    os.write(fd, shard.encode())
    os.close(fd)
os.execv({real!r}, [{real!r}] + args)
"""


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_tables(rescan):
    """SIGKILL to snakemake's whole process group while score_shard jobs run;
    restart as README says (`--unlock`, then the same command: the workflow
    profile has rerun-incomplete); the finished shard is kept, the others are
    scored, and the tables equal the uninterrupted run's.

    When to kill is not a matter of timing: the killed run's `swgpu` (GATE)
    lets the first scoring job through and holds the others, and the kill
    comes once Snakemake has logged the first job finished (it records a
    job's completion before it logs it) and a held job is running.
    """
    work = rescan["root"] / "killed"
    _setup(work, rescan["queries"], rescan["v2"])
    gate = work.parent / "killed-gate"
    (gate / "bin").mkdir(parents=True)
    (gate / "bin" / "swgpu").write_text(GATE.format(python=sys.executable, real=str(BIN / "swgpu")))
    (gate / "bin" / "swgpu").chmod(0o755)
    env = _env(work)
    env["PATH"] = f"{gate / 'bin'}{os.pathsep}{env['PATH']}"
    env["SWGPU_TEST_GATE"] = str(gate)
    cmd = [
        SNAKEMAKE,
        "-s",
        str(SNAKEFILE),
        "--directory",
        str(work),
        "--configfile",
        str(work / "config.yaml"),
        "--cores",
        "2",
    ]
    first_out = open(work / "killed-run.out", "w")
    proc = subprocess.Popen(
        cmd,
        cwd=work.parent,
        env=env,
        stdout=first_out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.time() + 600  # a bound for a stuck run, not a timing assumption
    try:
        while True:
            out = (work / "killed-run.out").read_text()
            if (
                "(Rule: score_shard)" in out
                and (gate / "first").exists()
                and list(gate.glob("held-*"))
            ):
                break
            if proc.poll() is not None:
                pytest.fail("snakemake finished before it could be killed:\n" + out[-3000:])
            if time.time() > deadline:
                pytest.fail("no scoring job finished and none held within 600 s:\n" + out[-3000:])
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        first_out.close()
    first = (gate / "first").read_text()  # e.g. shard-0003.swdb
    first_shard = re.fullmatch(r"shard-(\d+)\.swdb", first).group(1)
    done = sorted(p.name for p in (work / "results" / "hits").glob("shard-*.npz"))
    killed_out = (work / "killed-run.out").read_text()[-3000:]
    assert done == [f"shard-{first_shard}.npz"], killed_out
    assert not (work / "results" / "hits.tsv").exists(), killed_out
    from swgpu_tools.io.hitsfile import read_shard_hits

    assert len(read_shard_hits(work / "results" / "hits" / done[0])) > 0
    _snakemake(work, "--unlock")
    resumed = _snakemake(work)  # the real swgpu again
    assert _scored_shards(resumed) == [
        f"{i:04d}" for i in range(SHARDS) if f"{i:04d}" != first_shard
    ], resumed.stderr[-3000:]
    assert _tables(work) == _tables(rescan["scratch"]), resumed.stderr[-3000:]
    assert "swgpu finished" in resumed.stdout + resumed.stderr


@pytest.mark.slow
def test_a_folder_without_receipts_is_rescanned(rescan):
    """The rules take receipts (results/shards/source.json, shard-NNNN.json) as
    inputs instead of the database and the shards.  A folder that lacks them (made
    by an older version, or a file deleted) leaves Snakemake's shard checkpoint
    incomplete, and Snakemake would then not re-evaluate the scoring jobs: a new
    release would not be scored.  The start-up check finds the missing receipts and
    has the shard step run again."""
    work = rescan["root"] / "no-receipts"
    _setup(work, rescan["queries"], rescan["v1"])
    _snakemake(work)
    for name in ("source.json", "shard-0000.json"):
        (work / "results/shards" / name).unlink()
    _write_fasta(work / "database.fasta", rescan["v2"])
    proc = _snakemake(work)
    out = proc.stdout + proc.stderr
    assert "shard-0000.json is missing" in out and "source.json is missing" in out
    assert _scored_shards(proc)  # the new release was scored
    assert _tables(work) == _tables(rescan["scratch"])


@pytest.mark.slow
def test_truncated_shard_is_detected_and_rebuilt(rescan):
    """A shard truncated after shard_db wrote it (e.g. a results folder copied
    half-way): the next run's start-up check finds it (its size no longer matches
    what shard_db recorded), moves it aside and the run rebuilds it.  A shard
    damaged without a change of size or time (silent corruption): the scoring
    job fails naming it and moves it aside; the same command again rebuilds it.
    Both times the tables come out right."""
    work = rescan["root"] / "corrupt"
    queries, small, _, _ = _inputs(30)
    _setup(work, queries, small)
    _write_config(work, shards=2, threads=1)
    _snakemake(work, "--until", "shard_db")
    victim = work / "results" / "shards" / "shard-0001.swdb"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) - 100])
    healed = _snakemake(work)
    out = healed.stdout + healed.stderr
    assert "shard-0001.swdb is damaged" in out and "moved to" in out
    assert list((work / "results/shards/corrupt").glob("shard-0001.swdb.*"))
    assert victim.read_bytes() == data  # rebuilt as it was
    assert re.search(r"^(?:local)?checkpoint shard_db:", out, re.MULTILINE)
    hits = pd.read_csv(work / "results/hits.tsv", sep="\t", keep_default_na=False)
    assert {shard_of(x, 2) for x in hits["sacc"]} == {0, 1}  # both shards' hits are there
    expected = (work / "results/hits.tsv").read_bytes()

    # corruption that no size or time shows: the scoring step reading the shard
    # refuses it, naming it (exit 2, nothing written), and check-shards moves it
    # aside (what the rule runs after a failed scoring job); the same command
    # again rebuilds it and scores it
    damaged = bytearray(data)
    damaged[-50] ^= 0x01
    victim.write_bytes(bytes(damaged))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(
        [
            "swgpu",
            "score-shard",
            str(victim),
            "--queries",
            str(work / "queries.fasta"),
            "--out",
            str(work / "x.npz"),
            "--backend",
            "cpu",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 2 and "shard-0001.swdb: shard checksum mismatch" in run.stderr
    assert not (work / "x.npz").exists()
    quarantine = subprocess.run(
        [
            "swgpu",
            "check-shards",
            "--quarantine",
            str(work / "results/shards/corrupt"),
            str(victim),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert quarantine.returncode != 0 and not victim.exists()  # moved aside
    rebuilt = _snakemake(work)
    assert victim.read_bytes() == data
    assert "0001" in _scored_shards(rebuilt)
    assert (work / "results/hits.tsv").read_bytes() == expected


def test_slurm_profile_sbatch_calls(tmp_path):
    """`snakemake --profile profiles/slurm` with a fake sbatch on PATH that
    records its arguments and refuses the job: the scoring jobs' sbatch calls
    carry the profile's resources.  The shards are made locally first (the
    scoring jobs' input)."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    queries, v1, _, _ = _inputs(20)
    work = tmp_path / "work"
    _setup(work, queries, v1)
    _write_config(work, shards=2, threads=1)
    _snakemake(work, "--until", "shard_db")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    calls = tmp_path / "sbatch.calls"
    (fake / "sbatch").write_text(
        f"#!/bin/sh\necho \"$@\" >> {calls}\necho 'sbatch: error: fake sbatch' >&2\nexit 1\n"
    )
    for tool in ("sacct", "squeue", "sinfo", "scontrol", "sshare", "sacctmgr"):
        (fake / tool).write_text("#!/bin/sh\nexit 0\n")
    for p in fake.iterdir():
        p.chmod(0o755)
    env = _env(work)
    env["PATH"] = f"{fake}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(SNAKEFILE),
            "--directory",
            str(work),
            "--configfile",
            str(work / "config.yaml"),
            "--profile",
            str(REPO / "profiles" / "slurm"),
            "--keep-going",
            "--retries",
            "0",
            "--slurm-init-seconds-before-status-checks",
            "1",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0  # every submission was refused
    lines = calls.read_text().splitlines()
    scoring = [line for line in lines if "rule_score_shard" in line]
    assert len(scoring) == 2, lines
    for line in scoring:
        assert " --gpus=1" in line
        assert " --cpus-per-task=4" in line
        assert " --mem 32000" in line
        assert " -t 720" in line
        assert "--config 'backend=gpu'" in line


@pytest.mark.slow
def test_report_is_self_contained_with_the_plots(rescan):
    """`snakemake --report report.html` after the re-scan: one HTML file that
    embeds the plots (data URIs), changes.tsv and the configuration."""
    pytest.importorskip("matplotlib")
    inc = rescan["inc"]
    for name in ("scores", "evalues", "hits_per_query", "shards", "changes"):
        png = (inc / "results/plots" / f"{name}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    _snakemake(inc, "--report", str(inc / "report.html"))
    html = (inc / "report.html").read_text()
    for name in (
        "scores.png",
        "evalues.png",
        "hits_per_query.png",
        "shards.png",
        "changes.png",
        "changes.tsv",
    ):
        assert name in html
    assert html.count("data:image/png;") >= 5
    assert "Configuration used" in html and "database.fasta" in html


def _snapshot(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_a_release_cut_short_is_refused_before_anything_changes(rescan):
    """A new release whose file ends part-way (a gzip stream cut short; a last record
    with no residues) is refused when the workflow is parsed: results/, the previous
    release's shards, receipts, hits and history included, stay as they were, to the
    byte and the modification time.  The complete file then runs nothing."""
    import gzip

    work = rescan["root"] / "cut-short"
    _setup(work, rescan["queries"], rescan["v2"])
    _snakemake(work)
    before = _snapshot(work / "results")
    good = (work / "database.fasta").read_bytes()
    cut_header = good[: good.rfind(b"\n>") + 4]  # the last header cut after 3 letters
    cut_gzip = gzip.compress(good)[:-100]
    # (a gzip file this small is refused by the configuration check, which reads its start)
    for bad, why in ((cut_header, "has no residues"), (cut_gzip, "gzip")):
        (work / "database.fasta").write_bytes(bad)
        proc = _snakemake(work, check=False)
        assert proc.returncode != 0
        assert why in proc.stdout + proc.stderr
        assert _snapshot(work / "results") == before
    (work / "database.fasta").write_bytes(good)
    proc = _snakemake(work)
    assert not _scored_shards(proc)
    assert _tables(work) == _tables(rescan["scratch"])


@pytest.mark.slow
def test_prune_keeps_the_newest_releases(rescan, tmp_path):
    """`swgpu changes --prune N` (README: release history) removes all but the N newest
    kept releases, through the command as documented; N < 1 is refused."""
    history = tmp_path / "history"
    shutil.copytree(rescan["inc"] / "results" / "history", history)
    current = json.loads((history / "current.json").read_text())["release"]

    def swgpu(*args):
        return subprocess.run(
            [str(BIN / "swgpu"), "changes", *args, "--history", str(history)],
            capture_output=True,
            text=True,
        )

    listed = swgpu("--list")
    assert listed.returncode == 0 and rescan["release_v1"] in listed.stdout + listed.stderr
    assert swgpu("--prune", "0").returncode != 0
    assert (history / rescan["release_v1"]).is_dir()
    assert swgpu("--prune", "1").returncode == 0
    assert not (history / rescan["release_v1"]).exists()
    assert (history / current / "hits.tsv").is_file()


def test_a_job_cuts_its_shards_joint_top_k_only_past_cut_rows(monkeypatch):
    """A scoring job of several shards writes their joint top-k only where its
    candidate rows pass CUT_ROWS, the only job of a database or one of several (the
    candidates are about queries x top_k rows a job already); SWGPU_JOB_TOPK=1/0
    overrides."""
    from swgpu_tools.steps import score_shard as step

    monkeypatch.delenv("SWGPU_JOB_TOPK", raising=False)
    assert not step._joint_cut(10)
    assert not step._joint_cut(step.CUT_ROWS)
    assert step._joint_cut(step.CUT_ROWS + 1)
    monkeypatch.setenv("SWGPU_JOB_TOPK", "1")
    assert step._joint_cut(10)
    monkeypatch.setenv("SWGPU_JOB_TOPK", "0")
    assert not step._joint_cut(step.CUT_ROWS + 1)
