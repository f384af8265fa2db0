"""The cluster path run for real: the workflow through a one-node SLURM cluster.

`.ci/slurm-cluster.sh start` brings up munged, MariaDB, slurmdbd, slurmctld
and slurmd on this machine (the node declares 16 CPUs, 64 GB and 2 GPUs of
type "fake"; the scoring falls back to the CPU), and `stop` tears it down.
Then, as a user would:

* `snakemake --profile <copy of profiles/slurm with an account, partitions
  and a GPU type filled in>` runs the whole workflow through `sbatch`, with
  `--config backend=auto` (the profile's `backend: gpu` would fail on a node
  without a usable GPU).  While the scoring jobs run, one of them is killed
  with `scancel`: the profile's `retries: 1` resubmits it and the run
  finishes.  Checked: return code 0, hits.tsv and alignments.tsv
  byte-identical to a local run (`--cores 2`, same config), the CANCELLED job
  and its resubmission in `sacct`, and every cluster job in `sacct` with the
  account, partition, CPUs, memory, time limit and (scoring) GPU that the
  profile asks for.
* a re-scan after one database entry changed: exactly one scoring job (the
  shard that holds the entry) is submitted, and the tables equal a local
  re-scan's.

Needs root, the Debian packages (`.ci/slurm-cluster.sh install`) and the
slurm executor plugin (the `test` extra); skipped with the reason otherwise,
unless SWGPU_REQUIRE_SLURM=1 (set by `.ci/run`), which makes a missing
piece a failure.  The `sacct` lines of the run are printed (`pytest -s`).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

# with pytest -n, --dist loadfile keeps this file's tests, and so the one cluster, in one worker
pytestmark = [pytest.mark.slow, pytest.mark.slurm]

REPO = Path(__file__).resolve().parents[2]
SNAKEFILE = REPO / "Snakefile"
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
CLUSTER = REPO / ".ci" / "slurm-cluster.sh"
DATA = REPO / "swgpu_tools" / "data"
BIN = Path(sys.executable).parent
SNAKEMAKE = shutil.which("snakemake", path=str(BIN)) or shutil.which("snakemake")
SHARDS = 3
ACCOUNT = "swgpu"  # made by .ci/slurm-cluster.sh
GPU_TYPE = "fake"  # gres.conf of .ci/slurm-cluster.sh
CLUSTER_RULES = ["shard_db", "score_shard", "finish"]  # "all" is a local rule
TABLES = ["hits.tsv", "alignments.tsv"]


def _unavailable() -> str | None:
    """Why the cluster cannot run here, or None."""
    if SNAKEMAKE is None:
        return "snakemake is not installed"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e '.[slurm]')"
    if os.geteuid() != 0:
        return "starting the SLURM daemons needs root"
    missing = [
        t
        for t in ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "sbatch", "sacct")
        if shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin") is None
    ]
    if missing:
        return (
            f"SLURM is not installed ({', '.join(missing)} missing): "
            "run .ci/slurm-cluster.sh install (Debian 12, root)"
        )
    return None


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # `swgpu` in every job
    env.pop("SLURM_CONF", None)  # the cluster's configuration is in /etc/slurm
    return env


def _run(*cmd, check=True, timeout=120, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=_env(), **kw
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


@pytest.fixture(scope="module")
def cluster():
    why = _unavailable()
    required = os.environ.get("SWGPU_REQUIRE_SLURM") == "1"
    if why:
        if required:
            pytest.fail(f"SWGPU_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)
    running = "slurmctld: running" in _run("bash", CLUSTER, "status", check=False).stdout
    t0 = time.monotonic()
    started = _run("bash", CLUSTER, "start", check=False, timeout=300)
    if started.returncode != 0:
        message = f".ci/slurm-cluster.sh start failed:\n{started.stderr[-4000:]}"
        if required:
            pytest.fail(message)
        pytest.skip(message)
    print(f"\ncluster started in {time.monotonic() - t0:.1f} s")
    try:
        yield
    finally:
        if not running:  # leave a cluster someone else started as it was
            # clean, not only stop: with the configuration left in /etc/slurm and no
            # daemon, squeue waits 9 s for the controller, and the slurm executor
            # plugin runs it whenever Snakemake starts (every later workflow test)
            _run("bash", CLUSTER, "clean", check=False, timeout=300)


# ---------------------------------------------------------------------------
# inputs, runs, sacct
# ---------------------------------------------------------------------------


def _read_fasta(path: Path) -> dict[str, str]:
    """header (without '>') -> sequence"""
    opener = gzip.open if path.suffix == ".gz" else open
    records, name = {}, None
    with opener(path, "rt") as fh:
        for line in fh:
            line = line.strip()
            if line.startswith(">"):
                name = line[1:]
                records[name] = []
            elif line and name is not None:
                records[name].append(line)
    return {k: "".join(v) for k, v in records.items()}


def _write_fasta(path: Path, records: dict[str, str]) -> None:
    with open(path, "w") as fh:
        for name, seq in records.items():
            fh.write(f">{name}\n")
            for i in range(0, len(seq), 60):
                fh.write(seq[i : i + 60] + "\n")


def _setup(workdir: Path, database: dict[str, str]) -> None:
    """The bundled example (5 queries, 3000 UniProt entries) in SHARDS shards."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "example_queries.fasta", workdir / "queries.fasta")
    _write_fasta(workdir / "database.fasta", database)
    (workdir / "config.yaml").write_text(
        "database: database.fasta\nqueries: queries.fasta\nmatrix: BLOSUM62\n"
        "gap_open: 11\ngap_extend: 1\ntop_k: 500\nmax_evalue: 10.0\n"
        f"shards: {SHARDS}\nbackend: auto\nthreads: 1\n"
    )


def _snakemake_cmd(workdir: Path, *args) -> list[str]:
    return [
        SNAKEMAKE,
        "-s",
        str(SNAKEFILE),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        *args,
    ]


def _local(workdir: Path) -> None:
    _run(*_snakemake_cmd(workdir, "--cores", "2"), cwd=workdir.parent, timeout=600)


def _cluster_profile(folder: Path) -> dict:
    """profiles/slurm adapted as its comments tell a user to: an account,
    partitions and a GPU type.  Status checks start after 2 s (default 40 s)
    so that the short jobs here are noticed quickly."""
    profile = yaml.safe_load(PROFILE.read_text())
    profile.setdefault("default-resources", {}).update(slurm_account=ACCOUNT, slurm_partition="cpu")
    profile["set-resources"]["score_shard"].update(slurm_partition="gpu", gpu_model=GPU_TYPE)
    profile["slurm-init-seconds-before-status-checks"] = 2
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return profile


def _cluster_cmd(workdir: Path, profile_dir: Path) -> list[str]:
    # backend auto: the node's "GPU" is a stand-in, so the scoring uses the CPU
    return _snakemake_cmd(workdir, "--profile", str(profile_dir), "--config", "backend=auto")


def _run_uuid(output: str) -> str:
    m = re.search(r"SLURM run ID: (\S+)", output)
    assert m, output[-3000:]
    return m.group(1)


SACCT_FIELDS = [
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "Partition",
    "Account",
    "ReqTRES",
    "AllocTRES",
    "Timelimit",
    "Elapsed",
    "Comment",
]


def _sacct(run_uuid: str, since: datetime) -> list[dict]:
    """The jobs (allocations, no steps) of one Snakemake run: sacct by job name."""
    out = _run(
        "sacct",
        "-X",
        "-n",
        "-P",
        "-a",
        "--name",
        run_uuid,
        "-S",
        since.strftime("%Y-%m-%dT%H:%M:%S"),
        "-o",
        ",".join(f"{f}%200" for f in SACCT_FIELDS),
    ).stdout
    rows = [dict(zip(SACCT_FIELDS, line.split("|"))) for line in out.splitlines() if line.strip()]
    for row in rows:
        comment = row["Comment"]
        assert comment.startswith("rule_"), row
        row["rule"] = comment[len("rule_") :].split("_wildcards_")[0]
        row["tres"] = dict(item.split("=", 1) for item in row["ReqTRES"].split(",") if "=" in item)
    return rows


def _print_sacct(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print("|".join(SACCT_FIELDS))
    for row in rows:
        print("|".join(row[f] for f in SACCT_FIELDS))


def _timelimit(minutes: int) -> str:
    """SLURM's Timelimit text for a limit in minutes: [D-]HH:MM:SS."""
    days, rest = divmod(int(minutes), 24 * 60)
    text = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{text}" if days else text


def _expected(profile: dict, rule: str) -> dict:
    res = dict(profile.get("default-resources", {}))
    res.update(profile.get("set-resources", {}).get(rule, {}))
    return {
        "cpu": str(profile["set-threads"][rule]),
        "mem": f"{res['mem_mb']}M",
        "timelimit": _timelimit(res["runtime"]),
        "partition": res["slurm_partition"],
        "account": res["slurm_account"],
        "gpu": int(res.get("gpu", 0)),
    }


def _scoring_running(exclude: set[str]) -> list[tuple[str, str]]:
    """(job id, shard) of the running score_shard jobs, from squeue."""
    out = _run("squeue", "-h", "-t", "RUNNING", "-o", "%i|%k", check=False).stdout
    jobs = []
    for line in out.splitlines():
        jobid, _, comment = line.partition("|")
        m = re.match(r"rule_score_shard_wildcards_(\d+)", comment)
        if m and jobid not in exclude:
            jobs.append((jobid, m.group(1)))
    return jobs


def _scancel_one_scoring_job(proc: subprocess.Popen, workdir: Path, timeout: float = 400) -> str:
    """Wait until a score_shard job runs `swgpu score-shard` (its log exists), scancel it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        for jobid, shard in _scoring_running(set()):
            if (workdir / "results" / "logs" / "score_shard" / f"shard-{shard}.log").exists():
                _run("scancel", jobid)
                return jobid
        time.sleep(0.3)
    raise AssertionError(f"no running score_shard job to cancel (snakemake returned {proc.poll()})")


# ---------------------------------------------------------------------------
# the runs
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm")
    database = _read_fasta(DATA / "example_database.fasta.gz")
    local, work = root / "local", root / "cluster"
    _setup(local, database)
    _setup(work, database)

    t0 = time.monotonic()
    _local(local)
    t_local = time.monotonic() - t0

    profile_dir = root / "profile"
    profile = _cluster_profile(profile_dir)
    since = datetime.now() - timedelta(minutes=1)
    t0 = time.monotonic()
    with open(root / "cluster.log", "w") as log:
        proc = subprocess.Popen(
            _cluster_cmd(work, profile_dir),
            cwd=root,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            cancelled = _scancel_one_scoring_job(proc, work)
            proc.wait(timeout=420)  # about 90 s here; a job state missed by the plugin hangs
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    t_cluster = time.monotonic() - t0
    output = (root / "cluster.log").read_text()
    print(f"\nlocal run {t_local:.1f} s, cluster run (with the scancel) {t_cluster:.1f} s")
    assert proc.returncode == 0, output[-6000:]
    uuid = _run_uuid(output)
    rows = _sacct(uuid, since)
    _print_sacct(f"sacct, run {uuid} (job {cancelled} cancelled with scancel):", rows)
    return dict(
        root=root,
        local=local,
        work=work,
        profile=profile,
        profile_dir=profile_dir,
        database=database,
        output=output,
        rows=rows,
        cancelled=cancelled,
    )


def test_cluster_tables_equal_local_run(runs):
    """The tables of the cluster run are byte-identical to the local run's."""
    for name in TABLES:
        cluster_table = (runs["work"] / "results" / name).read_bytes()
        assert cluster_table == (runs["local"] / "results" / name).read_bytes(), name
        assert cluster_table.count(b"\n") > 10, name  # hits were found, not two empty tables


def test_sacct_shows_the_profile_resources(runs):
    """Every cluster rule ran as a SLURM job with the profile's account,
    partition, CPUs, memory and time limit; scoring jobs with one GPU of the
    requested type; the local rules did not go to SLURM."""
    rows, profile = runs["rows"], runs["profile"]
    by_rule = {}
    for row in rows:
        by_rule.setdefault(row["rule"], []).append(row)
    assert set(by_rule) == set(CLUSTER_RULES), sorted(by_rule)
    assert len(by_rule["score_shard"]) == SHARDS + 1  # one of them cancelled and resubmitted
    for rule, jobs in by_rule.items():
        want = _expected(profile, rule)
        for row in jobs:
            assert row["Account"] == want["account"], row
            assert row["Partition"] == want["partition"], row
            assert row["Timelimit"] == want["timelimit"], row
            assert row["tres"]["cpu"] == want["cpu"], row
            assert row["tres"]["mem"] == want["mem"], row
            if want["gpu"]:
                assert row["tres"].get("gres/gpu") == str(want["gpu"]), row
                assert row["tres"].get(f"gres/gpu:{GPU_TYPE}") == str(want["gpu"]), row
            else:
                assert "gres/gpu" not in row["tres"], row
    assert by_rule["score_shard"][0]["tres"]["gres/gpu"] == "1"  # the profile asks for one GPU
    completed = [r for r in rows if r["State"] == "COMPLETED"]
    assert len(completed) == len(rows) - 1


def test_scancel_is_retried(runs):
    """The job killed with scancel is CANCELLED in sacct; Snakemake reports it
    and resubmits it (profile `retries: 1`); the shard is then scored."""
    rows, cancelled, output = runs["rows"], runs["cancelled"], runs["output"]
    row = next(r for r in rows if r["JobID"] == cancelled)
    assert row["State"].startswith("CANCELLED"), row
    assert row["rule"] == "score_shard"
    assert f"SLURM-job '{cancelled}' failed, SLURM status is: 'CANCELLED'" in output
    assert "Trying to restart job" in output
    again = [r for r in rows if r["Comment"] == row["Comment"] and r["JobID"] != cancelled]
    assert len(again) == 1 and again[0]["State"] == "COMPLETED", again
    assert int(again[0]["JobID"]) > int(cancelled)
    # nothing of ours is left in the queue
    assert _run("squeue", "-h", "-o", "%i").stdout.strip() == ""


def test_rescan_scores_only_the_changed_shard(runs):
    """A re-scan on the cluster after one database entry changed submits one
    scoring job, for the shard that holds it, and gives the tables of the
    same re-scan run locally."""
    from swgpu_tools.io.shardfile import shard_of

    database = dict(runs["database"])
    # the first alignment's subject, its aligned residues replaced by W: the hit's score changes
    columns, first = (runs["local"] / "results" / "alignments.tsv").read_text().splitlines()[:2]
    row = dict(zip(columns.split("\t"), first.split("\t")))
    subject, start, end = row["sseqid"], int(row["sstart"]), int(row["send"])
    # UniProt headers (sp|P12345|NAME ...): the tables name the accession
    header = next(h for h in database if h.split()[0] == subject or f"|{subject}|" in h.split()[0])
    seq = database[header]
    database[header] = seq[: start - 1] + "W" * (end - start + 1) + seq[end:]
    for folder in (runs["local"], runs["work"]):
        _write_fasta(folder / "database.fasta", database)
    _local(runs["local"])
    since = datetime.now() - timedelta(minutes=1)
    t0 = time.monotonic()
    proc = _run(*_cluster_cmd(runs["work"], runs["profile_dir"]), cwd=runs["root"], timeout=600)
    print(f"\ncluster re-scan {time.monotonic() - t0:.1f} s")
    rows = _sacct(_run_uuid(proc.stdout + proc.stderr), since)
    _print_sacct("sacct, re-scan:", rows)
    scored = [r["Comment"].rsplit("_", 1)[1] for r in rows if r["rule"] == "score_shard"]
    assert scored == [f"{shard_of(row['saccver'], SHARDS):04d}"], rows  # shards go by accession
    assert all(r["State"] == "COMPLETED" for r in rows), rows
    for name in TABLES:
        assert (runs["work"] / "results" / name).read_bytes() == (
            runs["local"] / "results" / name
        ).read_bytes(), name
    changes = (runs["work"] / "results" / "changes.tsv").read_text()
    assert subject in changes
