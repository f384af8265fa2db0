"""End-to-end tests of the Snakemake workflow (root Snakefile), CPU backend.

Runs `snakemake` as a user would, from outside the repository, with
``--directory WORKDIR --configfile WORKDIR/config.yaml``, on tiny real data
written into WORKDIR: 2 UniProt queries from the bundled example, 40 bundled
database entries, plus an exact and a mutated copy of each query (so that
every query has hits that pass the E-value filter).

Scores are checked against an independent computation: Biopython's
PairwiseAligner in local mode, whose gap scores (open_gap_score for the first
gap residue, extend_gap_score for each further one) with
open = -(gap_open + gap_extend), extend = -gap_extend give BLAST's
"a gap of length k costs gap_open + k * gap_extend".
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = REPO / "Snakefile"
DATA = REPO / "swgpu_tools" / "data"
BIN = Path(sys.executable).parent
SNAKEMAKE = shutil.which("snakemake", path=str(BIN)) or shutil.which("snakemake")

MATRIX, GAP_OPEN, GAP_EXTEND = "BLOSUM62", 11, 1
STANDARD = set("ACDEFGHIKLMNPQRSTVWY")
HITS_COLUMNS = [
    "qseqid",
    "sseqid",
    "qacc",
    "sacc",
    "score",
    "bitscore",
    "evalue",
    "qlen",
    "slen",
    "stitle",
]
BLAST12 = [
    "qaccver",
    "saccver",
    "pident",
    "length",
    "mismatch",
    "gapopen",
    "qstart",
    "qend",
    "sstart",
    "send",
    "evalue",
    "bitscore",
]
RULES = ["shard_db", "score_shard", "finish"]

pytestmark = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")


# ---------------------------------------------------------------------------
# data and helpers
# ---------------------------------------------------------------------------


def _read_fasta(path: Path) -> list[tuple[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    records, header, chunks = [], None, []
    with opener(path, "rt") as fh:
        for line in fh:
            line = line.strip()
            if line.startswith(">"):
                if header is not None:
                    records.append((header, "".join(chunks)))
                header, chunks = line[1:], []
            elif line:
                chunks.append(line)
    if header is not None:
        records.append((header, "".join(chunks)))
    return records


def _mutate(seq: str, rng: random.Random) -> str:
    """A homolog: about 1 residue in 6 substituted, one insertion, one deletion."""
    letters = sorted(STANDARD)
    out = [rng.choice(letters) if rng.random() < 1 / 6 else c for c in seq]
    cut = len(out) // 3
    out[cut:cut] = list("GSGS")
    del out[2 * len(out) // 3 : 2 * len(out) // 3 + 3]
    return "".join(out)


def _write_fasta(path: Path, records: dict[str, str]) -> None:
    with open(path, "w") as fh:
        for name, seq in records.items():
            fh.write(f">{name} test sequence\n")
            for i in range(0, len(seq), 60):
                fh.write(seq[i : i + 60] + "\n")


def _make_inputs(workdir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Write queries.fasta and database.fasta into workdir; return both as id -> sequence."""
    rng = random.Random(7)
    queries = {}
    for _header, seq in _read_fasta(DATA / "example_queries.fasta"):
        seq = seq.upper()
        if set(seq) <= STANDARD and len(seq) <= 500:
            queries[f"q{len(queries)}"] = seq
        if len(queries) == 2:
            break
    database = {}
    for _header, seq in _read_fasta(DATA / "example_database.fasta.gz"):
        seq = seq.upper()
        if set(seq) <= STANDARD and len(seq) <= 400:
            database[f"d{len(database):03d}"] = seq
        if len(database) == 40:
            break
    for name, seq in queries.items():
        database[f"self_{name}"] = seq
        database[f"mut_{name}"] = _mutate(seq, rng)
    assert len(queries) == 2 and len(database) == 44
    _write_fasta(workdir / "queries.fasta", queries)
    _write_fasta(workdir / "database.fasta", database)
    return queries, database


def _write_config(workdir: Path, **overrides) -> Path:
    config = dict(
        database="database.fasta",
        queries="queries.fasta",
        matrix=MATRIX,
        gap_open=GAP_OPEN,
        gap_extend=GAP_EXTEND,
        top_k=500,
        max_evalue=10.0,
        shards=4,
        backend="cpu",
        threads=1,
        min_shard_sequences=1,
    )
    config.update(overrides)
    path = workdir / "config.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in config.items()))
    return path


def _snakemake(
    workdir: Path, *args: str, check: bool = True, extra_env: dict | None = None
) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # the `swgpu` command
    for key, value in (extra_env or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    env["SWGPU_LOCK_DIR"] = str(workdir / "gpu-locks")
    cmd = [
        SNAKEMAKE,
        "-s",
        str(SNAKEFILE),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "--cores",
        "2",
        *args,
    ]
    proc = subprocess.run(
        cmd, cwd=workdir.parent, env=env, capture_output=True, text=True, timeout=300
    )
    if check and proc.returncode != 0:
        logs = ""
        for log in sorted((workdir / "results" / "logs").rglob("*.log")):
            logs += f"\n--- {log}\n{log.read_text()[-2000:]}"
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-5000:]}{logs}"
        )
    return proc


def _aligner():
    from Bio.Align import PairwiseAligner, substitution_matrices

    return PairwiseAligner(
        mode="local",
        substitution_matrix=substitution_matrices.load(MATRIX),
        open_gap_score=-(GAP_OPEN + GAP_EXTEND),
        extend_gap_score=-GAP_EXTEND,
    )


def _score_of_columns(qaln: str, saln: str) -> int:
    """Score of an alignment given as two gapped strings (BLAST gap costs)."""
    from Bio.Align import substitution_matrices

    m = substitution_matrices.load(MATRIX)
    score, state = 0, None
    for a, b in zip(qaln, saln):
        if a == "-" and b == "-":
            raise AssertionError("a column with two gaps")
        if a == "-" or b == "-":
            kind = "gap_in_query" if a == "-" else "gap_in_subject"
            score -= GAP_EXTEND if state == kind else GAP_OPEN + GAP_EXTEND
            state = kind
        else:
            score += int(m[a][b])
            state = None
    return score


def _job_counts(dry_run_output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> count."""
    block = dry_run_output.split("Job stats:", 1)[1]
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", block, re.MULTILINE)
        if m.group(1) != "total"
    }


# ---------------------------------------------------------------------------
# one full run (4 shards), then a rerun with shards=3 top_k=5, in one folder
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("workflow") / "work"
    workdir.mkdir()
    queries, database = _make_inputs(workdir)
    _write_config(workdir, shards_per_job=1)
    first = _snakemake(workdir)
    tables1 = {
        "bytes": {
            name: (workdir / "results" / name).read_bytes()
            for name in ("hits.tsv", "alignments.tsv")
        },
        "hits": pd.read_csv(
            workdir / "results/hits.tsv",
            sep="\t",
            keep_default_na=False,
            na_values=["NA"],
            dtype={"qseqid": str, "sseqid": str},
        ),
        "alignments": pd.read_csv(
            workdir / "results/alignments.tsv",
            sep="\t",
            keep_default_na=False,
            na_values=["NA"],
            dtype={"qseqid": str, "sseqid": str},
        ),
        "files": sorted(
            str(p.relative_to(workdir)) for p in (workdir / "results").rglob("*") if p.is_file()
        ),
    }
    noop = _snakemake(workdir, "-n")
    second = _snakemake(workdir, "--config", "shards=3", "top_k=5")
    tables2 = {
        "hits": pd.read_csv(
            workdir / "results/hits.tsv",
            sep="\t",
            keep_default_na=False,
            na_values=["NA"],
            dtype={"qseqid": str, "sseqid": str},
        ),
        "alignments": pd.read_csv(
            workdir / "results/alignments.tsv",
            sep="\t",
            keep_default_na=False,
            na_values=["NA"],
            dtype={"qseqid": str, "sseqid": str},
        ),
    }
    # a database update that changes one entry: only its shard is scored again
    changed = dict(database)
    changed["d000"] = (
        "W" + database["d000"][1:] if database["d000"][0] != "W" else "A" + database["d000"][1:]
    )
    _write_fasta(workdir / "database.fasta", changed)
    third = _snakemake(workdir, "--config", "shards=3", "top_k=5")
    hits3 = pd.read_csv(
        workdir / "results/hits.tsv",
        sep="\t",
        keep_default_na=False,
        na_values=["NA"],
        dtype={"qseqid": str, "sseqid": str},
    )
    return dict(
        workdir=workdir,
        queries=queries,
        database=database,
        changed=changed,
        first=first,
        noop=noop,
        second=second,
        third=third,
        run1=tables1,
        run2=tables2,
        hits3=hits3,
    )


@pytest.fixture(scope="module")
def all_scores(runs):
    """Independent SW score of every (query, database entry) pair."""
    aligner = _aligner()
    return {
        (q, s): int(aligner.score(qs, ss))
        for q, qs in runs["queries"].items()
        for s, ss in runs["database"].items()
    }


@pytest.mark.slow
def test_full_run_writes_tables_logs_and_benchmarks(runs):
    files = runs["run1"]["files"]
    for f in [
        "results/hits.tsv",
        "results/alignments.tsv",
        "results/shards/database.json",
        "results/logs/shard_db.log",
        "results/logs/finish.log",
        "results/benchmarks/shard_db.tsv",
        "results/benchmarks/finish.tsv",
    ]:
        assert f in files
    for i in range(4):
        for f in [
            f"results/shards/shard-{i:04d}.swdb",
            f"results/hits/shard-{i:04d}.npz",
            f"results/logs/score_shard/shard-{i:04d}.log",
            f"results/benchmarks/score_shard/shard-{i:04d}.tsv",
        ]:
            assert f in files
    # onsuccess names the tables
    out = runs["first"].stdout + runs["first"].stderr
    assert f"hits:       {runs['workdir'].resolve() / 'results' / 'hits.tsv'}" in out


@pytest.mark.slow
def test_hits_table(runs, all_scores):
    hits = runs["run1"]["hits"]
    queries, database = runs["queries"], runs["database"]
    assert list(hits.columns) == HITS_COLUMNS
    assert len(hits) > 0
    # queries in input order, each by descending score, ties by subject id
    order = list(dict.fromkeys(hits["qseqid"]))
    assert order == [q for q in queries if q in order]
    for q, group in hits.groupby("qseqid", sort=False):
        keys = list(zip(-group["score"], group["sseqid"]))
        assert keys == sorted(keys), f"rows of {q} are not sorted by descending score"
        assert not group["sseqid"].duplicated().any()
    # every score recomputed independently; lengths right; E-value filter applied
    for row in hits.itertuples(index=False):
        assert row.score == all_scores[(row.qseqid, row.sseqid)], (row.qseqid, row.sseqid)
        assert row.qlen == len(queries[row.qseqid])
        assert row.slen == len(database[row.sseqid])
        assert row.evalue <= 10.0
    # each query finds itself first, then its mutated copy
    for q in queries:
        group = hits[hits["qseqid"] == q]
        assert group.iloc[0]["sseqid"] == f"self_{q}"
        assert f"mut_{q}" in set(group["sseqid"])
    # nothing better was left out: E-values fall with the score, so the kept
    # subjects of a query are its best-scoring ones
    for q in queries:
        group = hits[hits["qseqid"] == q]
        kept = set(group["sseqid"])
        left_out = [all_scores[(q, s)] for s in database if s not in kept]
        if left_out:
            assert max(left_out) <= group["score"].min()


@pytest.mark.slow
def test_alignments_table(runs):
    hits, aln = runs["run1"]["hits"], runs["run1"]["alignments"]
    queries, database = runs["queries"], runs["database"]
    assert list(aln.columns[:12]) == BLAST12
    for col in ["score", "qlen", "slen", "qseq", "sseq", "qseqid", "sseqid", "stitle"]:
        assert col in aln.columns
    # one alignment per hit, in the same order, with the same score
    assert list(zip(aln["qseqid"], aln["sseqid"])) == list(zip(hits["qseqid"], hits["sseqid"]))
    assert list(aln["score"]) == list(hits["score"])
    for row in aln.itertuples(index=False):
        q, s = queries[row.qseqid], database[row.sseqid]
        assert row.qseq.replace("-", "") == q[row.qstart - 1 : row.qend]
        assert row.sseq.replace("-", "") == s[row.sstart - 1 : row.send]
        assert len(row.qseq) == len(row.sseq) == row.length
        assert _score_of_columns(row.qseq, row.sseq) == row.score, (row.qseqid, row.sseqid)


@pytest.mark.slow
@pytest.mark.parametrize("per_job, jobs", [("auto", 2), (4, 1)])
def test_shards_grouped_into_jobs_give_the_same_tables(runs, tmp_path, per_job, jobs):
    """The tables do not depend on how shards are grouped into scoring jobs: one
    shard per job (run 1) against two jobs of two shards (auto: --cores 2, threads 1)
    and one job of four; then a database update re-scans in the grouped jobs."""
    _make_inputs(tmp_path)
    _write_config(tmp_path, shards_per_job=per_job)
    out = _snakemake(tmp_path)
    out = out.stdout + out.stderr
    assert _job_counts(out)["score_shard"] == jobs
    for name, data in runs["run1"]["bytes"].items():
        assert (tmp_path / "results" / name).read_bytes() == data, name
    hit_files = sorted(p.name for p in (tmp_path / "results/hits").glob("*.npz"))
    assert len(hit_files) == jobs and all("-" in f for f in hit_files), hit_files
    if jobs == 1:
        # other jobs in the same folder (one shard each): each reuses every stored
        # hit of its shard, and the tables stay the same
        _write_config(tmp_path, shards_per_job=1)
        out = _snakemake(tmp_path)
        assert _job_counts(out.stdout + out.stderr)["score_shard"] == 4
        for s in range(4):
            st = json.loads(
                (tmp_path / f"results/stats/score_shard/shard-{s:04d}.json").read_text()
            )
            assert st["mode"] == "incremental" and st["cells"] == 0, st
        for name, data in runs["run1"]["bytes"].items():
            assert (tmp_path / "results" / name).read_bytes() == data, name
        return  # the release below runs once, with two jobs (CI time)
    # a release: the grouped jobs re-score only what changed (per sequence) and
    # match a scan from scratch of the new database
    changed = dict(runs["database"])
    changed["d001"] = (
        "M" + changed["d001"][1:] if changed["d001"][0] != "M" else "K" + changed["d001"][1:]
    )
    _write_fasta(tmp_path / "database.fasta", changed)
    _snakemake(tmp_path)
    stats = [
        json.loads(p.read_text()) for p in (tmp_path / "results/stats/score_shard").glob("*.json")
    ]
    assert {s["mode"] for s in stats} >= {"incremental"}
    assert all(len(s["shards"]) == 4 // jobs for s in stats)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _make_inputs(scratch)
    _write_fasta(scratch / "database.fasta", changed)
    _write_config(scratch, shards_per_job=1)
    _snakemake(scratch)
    for name in ("hits.tsv", "alignments.tsv"):
        assert (tmp_path / "results" / name).read_bytes() == (
            scratch / "results" / name
        ).read_bytes(), name


@pytest.mark.slow
def test_second_run_is_a_no_op(runs):
    out = runs["noop"].stdout + runs["noop"].stderr
    assert "Nothing to be done" in out


@pytest.mark.slow
def test_rerun_with_shards_3_top_k_5(runs, all_scores):
    out = runs["second"].stdout + runs["second"].stderr
    assert "shard_db" in out  # the shard count is a parameter: re-sharded
    workdir = runs["workdir"]
    for i in range(3):
        assert (workdir / f"results/hits/shard-{i:04d}.npz").exists()
    hits1, hits2 = runs["run1"]["hits"], runs["run2"]["hits"]
    assert list(hits2.columns) == HITS_COLUMNS
    for q in runs["queries"]:
        top1 = hits1[hits1["qseqid"] == q].head(5)
        top2 = hits2[hits2["qseqid"] == q]
        assert 1 <= len(top2) <= 5
        # same database, so the same top hits, scores and E-values
        assert list(top2["sseqid"]) == list(top1["sseqid"])
        assert list(top2["score"]) == list(top1["score"])
        assert list(top2["evalue"]) == list(top1["evalue"])
    for row in hits2.itertuples(index=False):
        assert row.score == all_scores[(row.qseqid, row.sseqid)]
    aln2 = runs["run2"]["alignments"]
    assert list(zip(aln2["qseqid"], aln2["sseqid"])) == list(zip(hits2["qseqid"], hits2["sseqid"]))


@pytest.mark.slow
def test_database_update_rescores_only_the_changed_shard(runs):
    out = runs["third"].stdout + runs["third"].stderr
    # the database is no input: its content digest, a parameter, changed
    assert "Params have changed since last execution" in out
    assert len(re.findall(r"^(?:local)?rule score_shard:", out, re.MULTILINE)) == 1, out[-3000:]
    aligner = _aligner()
    for row in runs["hits3"].itertuples(index=False):
        expected = aligner.score(runs["queries"][row.qseqid], runs["changed"][row.sseqid])
        assert row.score == int(expected)


# ---------------------------------------------------------------------------
# dry run, config validation, lint (no scoring: fast)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "per_job, jobs",
    [
        (1, ["0000", "0001", "0002", "0003", "0004"]),
        (2, ["0000-0001", "0002-0003", "0004"]),
        # auto: --cores 2 and threads 1 run two CPU jobs at once: 5 shards in 2 jobs
        ("auto", ["0000-0002", "0003-0004"]),
        (9, ["0000-0004"]),
    ],
)
def test_dry_run_lists_the_jobs(tmp_path, per_job, jobs):
    _make_inputs(tmp_path)
    _write_config(tmp_path, shards=5, shards_per_job=per_job)
    proc = _snakemake(tmp_path, "-n")
    out = proc.stdout + proc.stderr
    assert _job_counts(out) == {
        "shard_db": 1,
        "score_shard": len(jobs),
        "finish": 1,
        "all": 1,
    }
    assert set(re.findall(r"results/hits/shard-([0-9-]+)\.npz", out)) == set(jobs), out
    assert not (tmp_path / "results").exists()
    # a CPU backend never asks for a GPU
    assert "gpu=1" not in out


def test_a_cluster_jobs_own_snakemake_plans_the_jobs_of_the_cluster_run(tmp_path):
    """A cluster job runs Snakemake again (remote mode) and evaluates the merge's
    inputs there: it must plan one shard per job, as the cluster run that
    submitted it did, not the local grouping (it once read a stale grouped table)."""
    _make_inputs(tmp_path)
    _write_config(tmp_path, shards=4)
    local = _snakemake(tmp_path, "-n").stdout
    assert set(re.findall(r"results/hits/shard-([0-9-]+)\.npz", local)) == {
        "0000-0001",
        "0002-0003",
    }
    remote = _snakemake(tmp_path, "-n", "--mode", "remote", "--target-jobs", "finish:")
    out = remote.stdout + remote.stderr
    assert set(re.findall(r"results/hits/shard-([0-9-]+)\.npz", out)) == {
        "0000",
        "0001",
        "0002",
        "0003",
    }, out[-2000:]


def test_dry_run_backend_gpu_asks_for_one_gpu_per_scoring_job(tmp_path):
    _make_inputs(tmp_path)
    _write_config(tmp_path, shards=2, backend="gpu", shards_per_job=1)
    out = _snakemake(tmp_path, "-n").stdout
    blocks = [b for b in out.split("\n\n") if "rule score_shard:" in b]
    assert len(blocks) == 2 and all("gpu=1" in b for b in blocks)
    # auto: one GPU on this machine (none listed: one assumed), so one job scores both
    _write_config(tmp_path, shards=2, backend="gpu")
    out = _snakemake(tmp_path, "-n").stdout
    blocks = [b for b in out.split("\n\n") if "rule score_shard:" in b]
    assert len(blocks) == 1 and "gpu=1" in blocks[0] and "shard=0000-0001" in blocks[0]


@pytest.mark.parametrize("visible, planned", [(None, 1), ("", 0), ("-1", 0)])
def test_dry_run_backend_auto_plans_gpu_jobs_from_nvidia_smi(tmp_path, visible, planned):
    """backend auto: GPU jobs when `nvidia-smi -L` lists a GPU (a fake one
    here) unless CUDA_VISIBLE_DEVICES hides them all."""
    _make_inputs(tmp_path)
    _write_config(tmp_path, shards=2, backend="auto", shards_per_job=1)
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-0)'\n")
    (fake / "nvidia-smi").chmod(0o755)
    extra = {"PATH": f"{fake}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    extra["CUDA_VISIBLE_DEVICES"] = visible  # None: unset
    out = _snakemake(tmp_path, "-n", extra_env=extra).stdout
    blocks = [b for b in out.split("\n\n") if "rule score_shard:" in b]
    assert len(blocks) == 2
    assert all(f"gpu={planned}" in b for b in blocks)


@pytest.mark.parametrize(
    "override, key",
    [
        ("shards=0", "shards"),
        ("backend=tpu", "backend"),
        ("gap_open=1.5", "gap_open"),
        ("shard=3", "shard"),  # typo of a key
    ],
)
def test_bad_config_is_refused(tmp_path, override, key):
    _make_inputs(tmp_path)
    _write_config(tmp_path)
    proc = _snakemake(tmp_path, "-n", "--config", override, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "swgpu: the configuration cannot be used:" in out
    assert key in out
    assert "properties" not in out  # one line per problem, no schema dump


def test_lint(tmp_path):
    """Only the per-rule "conda environment or container" lint, on purpose
    (rules run the installed `swgpu`; see workflow/README.md)."""
    _make_inputs(tmp_path)
    _write_config(tmp_path)
    proc = _snakemake(tmp_path, "--lint", check=False)
    out = proc.stdout + proc.stderr
    assert "Lints for snakefile" not in out
    linted_rules = re.findall(r"^Lints for rule (\w+)", out, re.MULTILINE)
    titles = set(re.findall(r"^\s+\* (.+):$", out, re.MULTILINE))
    assert titles <= {"Specify a conda environment or container for each rule."}, titles
    assert set(linted_rules) <= set(RULES)


@pytest.mark.parametrize(
    "override, needle",
    [
        ("gap_open=0 gap_extend=0", "gap_open + gap_extend must be positive"),
        ("matrix=BLOSUM63", "unknown substitution matrix 'BLOSUM63'"),
        ("queries=missing.fasta", "'queries': missing.fasta: file not found"),
        ("columns=std,qsequid", "unknown output field 'qsequid'"),
        ("formats=[xml]", "'formats': unknown xml"),
        ("max_evalue=0", "'max_evalue' must be greater than 0"),
    ],
)
def test_config_problems_are_found_when_the_workflow_is_parsed(tmp_path, override, needle):
    _make_inputs(tmp_path)
    _write_config(tmp_path)
    proc = _snakemake(tmp_path, "-n", "--config", *override.split(), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and needle in out, out[-2000:]
    assert not (tmp_path / "results" / "shards").exists()


def test_nucleotides_and_braces_and_too_many_shards_at_parse_time(tmp_path):
    _make_inputs(tmp_path)
    _write_config(tmp_path, min_shard_sequences=100, shards=50, matrix="blosum62")
    proc = _snakemake(tmp_path, "-n")
    out = proc.stdout + proc.stderr
    # lower-case matrix names are fine; 50 shards of ~44 sequences are capped to 1
    assert "shards: 50 shards of a database of 44 sequences" in out and "using 1 shards" in out
    assert _job_counts(out)["score_shard"] == 1
    # a path with braces is a file name, not a wildcard
    braces = tmp_path / "in{1}"
    braces.mkdir()
    shutil.copy(tmp_path / "queries.fasta", braces / "q{x}.fasta")
    proc = _snakemake(tmp_path, "-n", "--config", "queries=in{1}/q{x}.fasta")
    assert "reading it through the link results/inputs/queries.fasta" in proc.stdout + proc.stderr
    # nucleotides with a protein matrix: refused before any job
    (tmp_path / "dna.fasta").write_text(">d1\n" + "ACGT" * 60 + "\n")
    proc = _snakemake(tmp_path, "-n", "--config", "queries=dna.fasta", check=False)
    assert proc.returncode != 0
    assert "look like nucleotide sequences" in proc.stdout + proc.stderr
