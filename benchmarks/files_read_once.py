"""How many times each job of a workflow run reads its input files (issue 11: "the
database, shard and query files are read once per job").

    python benchmarks/files_read_once.py --database DB --queries Q --shards 2 \
        [--rescan NEW_RELEASE.fasta] --workdir /tmp/fro

Runs ``snakemake --cores N`` from scratch in ``--workdir`` with an audit hook
(``sys.addaudithook``, installed by a ``sitecustomize`` on PYTHONPATH) in every Python
process of the run: each ``open()`` of the database, the queries, a shard, a hit table
or a re-scan state is logged with the process's command and the call's stack.  Opens
are sorted into *reads* (the file's content is read), *peeks* (the gzip test's first
two bytes, ``io/gzipped.is_gzip``), *probes* (the shard step's plan of parallel ranges:
a few bytes around each cut, ``fasta_blocks.plan_ranges``) and *checks* (opened and
closed at once, for the reader's error on a missing file or a folder); the table gives,
per job, the reads of each file, then the rest.  Exit status 1 when a job read a file
more than once.  Processes are labelled by their ``swgpu``
subcommand (forked helpers inherit it; Snakemake's own process is "snakemake").
``--rescan FASTA`` then runs again on a new release (FASTA replaces the database
file's content).  ``warm_start: false``, so that each job is a process of its own (with
the warm start the same code runs in forked children of one process).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = os.environ.get("SNAKEMAKE") or shutil.which("snakemake", path=str(BIN)) or "snakemake"

#: The hook each Python process of the run installs at start-up.
HOOK = r"""
import os, sys, traceback

_LOG = os.environ["FILES_READ_LOG"]
_WATCH = os.environ["FILES_READ_WATCH"].split(os.pathsep)


def _label():
    argv = [os.path.basename(a) for a in sys.argv]
    if argv and argv[0].startswith("snakemake"):
        return "snakemake"
    if argv and argv[0] == "swgpu" and len(argv) > 1:
        return argv[1]
    return "other " + " ".join(sys.argv[:2])[:40]


def _hook(event, args):
    if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    mode = args[1] if len(args) > 1 else None
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return
    if isinstance(args[0], int):
        return
    path = os.path.abspath(os.fsdecode(args[0]))
    if not any(path == w or path.startswith(w + os.sep) for w in _WATCH):
        return
    stack = traceback.extract_stack()[:-1]
    if any(f.name == "is_gzip" for f in stack):
        kind = "peek"
    elif any(f.name == "plan_ranges" for f in stack):
        kind = "probe"
    elif any("_open(" in (f.line or "") and ".close()" in (f.line or "") for f in stack):
        kind = "check"
    else:
        kind = "read"
    with open(_LOG, "a") as fh:
        fh.write(f"{os.getpid()}\t{_label()}\t{kind}\t{path}\n")


sys.addaudithook(_hook)
"""


def kind_of(path: str, database: str, queries: str) -> str | None:
    """Which input ``path`` is (None: not one of those counted)."""
    if path == database:
        return "database"
    if path == queries:
        return "queries"
    name = os.path.basename(path)
    folder = os.path.basename(os.path.dirname(path))
    if folder == "shards" and name.endswith(".swdb"):
        return name
    if folder == "hits" and name.endswith(".npz"):
        return "hits/" + name
    if folder == "state" and name.endswith(".npz"):
        return "state/" + name
    return None


def run(workdir: Path, config: dict, cores: int, label: str, database: str, queries: str) -> int:
    """One run; prints its table and returns the most reads of one file by one job."""
    (workdir / "config.yaml").write_text("".join(f"{k}: {v}\n" for k, v in config.items()))
    hook_dir = Path(tempfile.mkdtemp(prefix="files-read-"))
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    log = workdir / f"opens-{label.split()[0]}.tsv"
    log.write_text("")
    env = dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=os.pathsep.join(p for p in (str(hook_dir), os.environ.get("PYTHONPATH")) if p),
        FILES_READ_LOG=str(log),
        FILES_READ_WATCH=os.pathsep.join([database, queries, str(workdir / "results")]),
    )
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--configfile", str(workdir / "config.yaml"), "--cores", str(cores)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    shutil.rmtree(hook_dir, ignore_errors=True)
    if proc.returncode:
        sys.exit(f"{label}: snakemake failed:\n{proc.stderr[-3000:]}")
    reads: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    other: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for line in log.read_text().splitlines():
        _pid, job, kind, path = line.split("\t")
        what = kind_of(path, database, queries)
        if what:
            (reads if kind == "read" else other)[job][
                f"{what} ({kind})" if kind != "read" else what
            ] += 1
    print(f"\n== {label}: reads of each input file, per job (warm_start false)")
    for job in sorted(set(reads) | set(other)):
        shown = ", ".join(f"{k} ×{v}" for k, v in sorted(reads[job].items())) or "-"
        extra = ", ".join(f"{k} ×{v}" for k, v in sorted(other[job].items()))
        print(f"   {job:<12} {shown}" + (f"   [{extra}]" if extra else ""))
    most = max(
        (v for job, row in reads.items() if job != "snakemake" for v in row.values()), default=0
    )
    print(f"   most reads of one file by one job: {most}")
    return most


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--database", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--rescan", default=None, metavar="FASTA", help="a new release, run after")
    ap.add_argument("--workdir", default="/tmp/files_read_once")
    args = ap.parse_args()
    work = Path(args.workdir).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    suffix = ".fasta.gz" if args.database.endswith(".gz") else ".fasta"
    database = str(work / f"database{suffix}")  # a copy the re-scan can replace
    shutil.copyfile(args.database, database)
    queries = os.path.abspath(args.queries)
    config = {
        "database": database,
        "queries": queries,
        "shards": args.shards,
        "backend": args.backend,
        "threads": args.threads,
        "warm_start": "false",
    }
    most = run(work, config, args.cores, "first scan", database, queries)
    if args.rescan:
        shutil.copyfile(args.rescan, database)
        most = max(
            most, run(work, config, args.cores, "re-scan of a new release", database, queries)
        )
    return 0 if most <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
