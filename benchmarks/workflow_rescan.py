"""A database release re-scanned with the workflow, against a scan from scratch.

    python benchmarks/workflow_rescan.py --database bench_db.fasta --queries bench_queries.fasta \
        --shards 4 --cores 16 --backend gpu --workdir /tmp/rescan

Makes release v2 of the database (issue 12's case: 1% of the entries changed
at one position, 0.5% removed, 0.5% added as mutated copies under new ids,
spread over every shard), then runs ``snakemake`` three times:

  1. v1 from scratch                  (folder inc)
  2. v2 in the same folder            (incremental: only what changed is scored)
  3. v2 from scratch                  (folder scratch)

and prints, for runs 2 and 3: wall clock, scoring jobs, residues scored
(cells / query residues, from results/stats/score_shard/*.json), scoring
(GPU or CPU kernel) seconds, the traceback's reused alignments, and whether
hits.tsv and alignments.tsv are byte-identical.  ``--json`` writes the
numbers.
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from workflow_scale import finish_steps, start_marks  # benchmarks/, the script's folder

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: the snakemake command: $SNAKEMAKE, else the one beside this Python, else on PATH
SNAKEMAKE = (
    os.environ.get("SNAKEMAKE")
    or (str(BIN / "snakemake") if (BIN / "snakemake").exists() else None)
    or shutil.which("snakemake")
    or "snakemake"
)


def read_fasta(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    recs, head, seq = [], None, []
    with opener(path, "rt") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith(">"):
                if head is not None:
                    recs.append((head, "".join(seq)))
                head, seq = line[1:], []
            else:
                seq.append(line.strip())
    if head is not None:
        recs.append((head, "".join(seq)))
    return recs


def write_fasta(path, recs):
    with open(path, "w") as fh:
        for h, s in recs:
            fh.write(f">{h}\n{s}\n")


def release_v2(recs, changed, removed, added, seed):
    """v2: fractions of entries changed (one residue), removed, added (mutated copies)."""
    rng = random.Random(seed)
    n = len(recs)
    idx = rng.sample(range(n), round(n * (changed + removed + added)))
    nc, nr = round(n * changed), round(n * removed)
    change, remove, copy = idx[:nc], set(idx[nc : nc + nr]), idx[nc + nr :]
    letters = "ACDEFGHIKLMNPQRSTVWY"
    out = [list(r) for r in recs]
    for i in change:
        s = out[i][1]
        p = rng.randrange(len(s))
        out[i][1] = s[:p] + rng.choice([c for c in letters if c != s[p]]) + s[p + 1 :]
    new = []
    for k, i in enumerate(copy):
        s = "".join(rng.choice(letters) if rng.random() < 0.1 else c for c in recs[i][1])
        new.append((f"sp|NEW{k:06d}|NEW{k:06d}_TEST added in v2", s))
    v2 = [tuple(r) for i, r in enumerate(out) if i not in remove] + new
    return v2, dict(entries=n, changed=len(change), removed=len(remove), added=len(new))


def timeline(workdir: Path) -> dict:
    """Each step's times from its statistics (``job_epochs``: the job's process start,
    its request to the warm process, when a warm child or the GPU standby took it;
    the step's start and end), in seconds after the first job's process started."""
    recs = {}
    for path in sorted((workdir / "results" / "stats").rglob("*.json")):
        try:
            rec = json.loads(path.read_text())
        except ValueError:
            continue
        if "start_epoch" not in rec or "wall_s" not in rec:
            continue
        marks = dict(rec.get("job_epochs") or {})
        marks["start"] = rec["start_epoch"]
        marks["end"] = rec["start_epoch"] + rec["wall_s"]
        recs[str(path.relative_to(workdir / "results" / "stats").with_suffix(""))] = marks
    if not recs:
        return {}
    t0 = min(min(m.values()) for m in recs.values())
    return {k: {n: round(v - t0, 3) for n, v in m.items()} for k, m in recs.items()}


def run(workdir: Path, database, args, tree: Path | None = None, extra_env=None) -> dict:
    """One snakemake run in ``workdir`` on ``database``; ``tree``: another checkout
    whose Snakefile and package run it (its folder first on PYTHONPATH);
    ``extra_env``: variables set for it."""
    cfg = {
        "database": str(database),
        "queries": str(args.queries),
        "shards": args.shards,
        "backend": args.backend,
        "threads": args.threads,
        "top_k": args.top_k,
        "shards_per_job": args.shards_per_job,
        "warm_start": args.warm_start,
    }
    if args.max_evalue is not None:
        cfg["max_evalue"] = args.max_evalue
    (workdir / "config.yaml").write_text("".join(f"{k}: {v}\n" for k, v in cfg.items()))
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", **(extra_env or {}))
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    if env.get("SWGPU_PROFILE"):  # each run's step profiles apart: inc-v1, inc-v2, scratch-v2
        env["SWGPU_PROFILE"] = os.path.join(
            env["SWGPU_PROFILE"], f"{workdir.name}-{Path(database).stem}"
        )
    sync_s = None
    if args.sync:  # the page cache's dirty data written out first, not timed
        t = time.perf_counter()
        os.sync()
        sync_s = round(time.perf_counter() - t, 3)
    cmd = [SNAKEMAKE]
    if getattr(args, "pyspy", None):  # this run sampled by py-spy (every process, thread)
        cmd = ["py-spy", "record", "--subprocesses", "--threads", "--idle", "--nonblocking",
               "--rate", "250", "--format", "raw", "-o", args.pyspy, "--", SNAKEMAKE]  # fmt: skip
    elif os.environ.get("SMK_PROFILE"):  # Snakemake's own process under cProfile, one file a run
        os.makedirs(os.environ["SMK_PROFILE"], exist_ok=True)
        prof = os.path.join(os.environ["SMK_PROFILE"], f"{workdir.name}-{Path(database).stem}.prof")
        cmd = [sys.executable, "-m", "cProfile", "-o", prof, "-m", "snakemake"]
    start_epoch = time.time()
    start = time.perf_counter()
    proc = subprocess.run(
        [
            *cmd,
            "-s",
            str((tree or REPO) / "Snakefile"),
            "--directory",
            str(workdir),
            "--configfile",
            str(workdir / "config.yaml"),
            "--cores",
            str(args.cores),
        ],
        env=env,
        # another tree: not from this checkout's folder, which `python -m` would put
        # first on sys.path (so that this checkout's package would be imported)
        cwd=str(workdir) if tree is not None else None,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    end_epoch = time.time()
    if proc.returncode:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-4000:])
    out = proc.stdout + proc.stderr
    jobs = {}
    for m in re.finditer(r"^(?:local)?(?:rule|checkpoint) (\w+):", out, re.M):
        jobs[m.group(1)] = jobs.get(m.group(1), 0) + 1
    scored = re.findall(r"wildcards: shard=([\d-]+)", out)
    stats = [
        json.loads((workdir / f"results/stats/score_shard/shard-{s}.json").read_text())
        for s in scored
    ]
    tb = json.loads((workdir / "results/stats/traceback.json").read_text())
    steps = {}
    for p in (workdir / "results/benchmarks").rglob("*.tsv"):
        rows = p.read_text().splitlines()
        if len(rows) > 1:
            steps[str(p.relative_to(workdir / "results/benchmarks"))] = float(
                rows[-1].split("\t")[0]
            )
    # Snakemake's own time around the steps: from its start to the first step's process,
    # and from the last step's end to its exit (the steps' statistics files)
    spans = []
    for p in (workdir / "results/stats").rglob("*.json"):
        d = json.loads(p.read_text())
        if "start_epoch" in d and d["start_epoch"] >= start_epoch:
            spans.append(
                (d["start_epoch"] - (d.get("before_step_s") or 0.0), d["start_epoch"] + d["wall_s"])
            )
    around = (
        {
            "before_first_step_s": round(min(a for a, _ in spans) - start_epoch, 3),
            "after_last_step_s": round(end_epoch - max(b for _, b in spans), 3),
        }
        if spans
        else {}
    )
    return {
        "wall_s": wall,
        "sync_before_s": sync_s,
        "snakemake_around_steps": around,
        "start_marks_s": start_marks(workdir / "results", start_epoch),
        "steps": steps,
        "finish_steps": finish_steps(workdir / "results"),
        "jobs": jobs,
        "scoring_jobs": len(scored),
        "cells": sum(s["cells"] for s in stats),
        "full_scan_cells": sum(s["full_scan_cells"] for s in stats),
        "kernel_s": sum(s["kernel_s"] for s in stats),
        "delta_sequences": sum(s.get("delta_sequences", 0) for s in stats),
        "full_queries": [s.get("full_queries") for s in stats],
        "margin_ran_out": sum(s.get("margin_ran_out", 0) for s in stats),
        "modes": sorted({s.get("mode") for s in stats}),
        "traceback": {k: tb.get(k) for k in ("alignments", "aligned", "reused", "wall_s")},
        "steps_s": steps,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--database", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top-k", type=int, default=500)
    ap.add_argument(
        "--shards-per-job", default="auto", help="config shards_per_job (auto, or an integer)"
    )
    ap.add_argument("--backend", default="cpu")
    ap.add_argument(
        "--warm-start", default="true", choices=["true", "false"], help="config warm_start"
    )
    ap.add_argument(
        "--max-evalue", type=float, default=None, help="config max_evalue (default: the config's)"
    )
    ap.add_argument("--changed", type=float, default=0.01)
    ap.add_argument("--removed", type=float, default=0.005)
    ap.add_argument("--added", type=float, default=0.005)
    ap.add_argument("--workdir", default="/tmp/rescan")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--again",
        type=int,
        default=0,
        help="then N more incremental runs v1 -> v2, each in a copy of the folder as "
        "it was before the first (wall clock and steps printed)",
    )
    ap.add_argument(
        "--again-tree",
        default=None,
        help="with --again: each repeat is a pair, first with this other checkout "
        "(its Snakefile and package), then with this one, each on a copy of its own "
        "scan of v1 (an A/B on one machine)",
    )
    ap.add_argument(
        "--again-first",
        choices=("other", "this"),
        default="other",
        help="with --again-tree or --again-env: which of each pair runs first (the other "
        "checkout or the variable set, or this checkout as it is)",
    )
    ap.add_argument(
        "--again-env",
        default=None,
        metavar="NAME=VALUE",
        help="with --again: each repeat is a pair, first with this variable set, then "
        "without (an A/B on one machine)",
    )
    ap.add_argument(
        "--pyspy",
        default=None,
        help="with --again: the last of them sampled by py-spy (every process and "
        "thread, idle included) into this file (collapsed stacks)",
    )
    ap.add_argument(
        "--sync",
        action="store_true",
        help="os.sync() before each run (not timed): each run starts, as a real re-scan "
        "does days after the last, with no earlier run's writes still going to disk",
    )
    args = ap.parse_args()
    args.queries = os.path.abspath(args.queries)
    root = Path(args.workdir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    recs = read_fasta(args.database)
    write_fasta(root / "v1.fasta", recs)
    v2, what = release_v2(recs, args.changed, args.removed, args.added, seed=7)
    write_fasta(root / "v2.fasta", v2)
    del recs, v2
    print(f"v2: {what}", flush=True)
    inc, scratch = root / "inc", root / "scratch"
    inc.mkdir()
    scratch.mkdir()
    r1 = run(inc, root / "v1.fasta", args)
    print(f"v1 scratch: {r1['wall_s']:.1f} s wall, {r1['kernel_s']:.2f} s scoring", flush=True)
    if args.again:  # the folder as v1 left it, for the repeats
        shutil.copytree(inc, root / "inc-v1", symlinks=True)
    pyspy, args.pyspy = args.pyspy, None
    r2 = run(inc, root / "v2.fasta", args)
    r3 = run(scratch, root / "v2.fasta", args)
    repeats = []
    other = Path(args.again_tree).resolve() if args.again_tree else None
    if other and args.again:
        # the other checkout's own scan of v1 (its states and stored alignments, whose
        # formats may differ from this checkout's) for its repeats
        (root / "inc-v1-other").mkdir()
        r1o = run(root / "inc-v1-other", root / "v1.fasta", args, other)
        print(f"v1 scratch by {other.name}: {r1o['wall_s']:.1f} s wall", flush=True)
    variant = dict([args.again_env.split("=", 1)]) if args.again_env else None
    ways = [("tree", other), (None, None)] if other else [("env", variant), (None, None)]
    if args.again_first == "this" and (other or variant):  # each pair: this checkout first
        ways.reverse()
    plan = [(n, w) for n in range(args.again) for w in (ways if other or variant else ways[1:])]
    for n, (kind, value) in plan:
        tree = value if kind == "tree" else None
        again = root / "inc-again"
        shutil.rmtree(again, ignore_errors=True)
        first = root / ("inc-v1-other" if kind == "tree" else "inc-v1")
        shutil.copytree(first, again, symlinks=True)
        args.pyspy = pyspy if n == args.again - 1 and kind is None else None
        r = run(again, root / "v2.fasta", args, tree, value if kind == "env" else None)
        same_again = all(
            filecmp.cmp(again / "results" / f, scratch / "results" / f, shallow=False)
            for f in ("hits.tsv", "alignments.tsv")
        )
        label = str(tree or REPO) + (f" {args.again_env}" if kind == "env" else "")
        marks = timeline(again)
        scoring = scoring_details(again)
        # Snakemake's own start, before it reads the Snakefile (no swgpu code runs there;
        # 0.9-2.2 s on the H200 hosts, the noisiest part): the run after it, apart
        before = (r.get("start_marks_s") or {}).get("parse_start")
        after = round(r["wall_s"] - before, 3) if before is not None else None
        repeats.append(
            {
                "run": label,
                "wall_s": r["wall_s"],
                "snakemake_before_snakefile_s": before,
                "wall_after_snakefile_start_s": after,
                "steps": r["steps"],
                "timeline": marks,
                "scoring": scoring,
            }
        )
        steps = ", ".join(
            f"{k.removesuffix('.tsv')} {v:.2f}" for k, v in sorted(r["steps"].items())
        )
        inner = ", ".join(f"{k} {v:.2f}" for k, v in r["finish_steps"].items())
        print(
            f"incremental again {n + 1}{f' ({value})' if kind else ''}"
            f"{' (py-spy)' if args.pyspy else ''}: {r['wall_s']:.2f} s "
            f"(ratio {r['wall_s'] / r3['wall_s']:.3f}; from the Snakefile's parse on: {after} s), "
            f"tables identical: {same_again}; jobs: "
            f"{steps}; inside finish: {inner}; around: {r['snakemake_around_steps']}",
            flush=True,
        )
        print(f"  timeline (s after the first job's process): {marks}", flush=True)
        print(f"  scoring job: {scoring}", flush=True)
        pictures = pictures_timeline(again)
        repeats[-1]["pictures"] = pictures
        usage = phase_usage(again)
        repeats[-1]["phase_usage"] = usage
        print(f"  phases (wall s / main thread's CPU s / minor faults): {usage}", flush=True)
        ahead = read_ahead_timeline(again)
        repeats[-1]["read_ahead"] = ahead
        print(f"  traceback's read-ahead (s after its fork): {ahead}", flush=True)
        print(f"  pictures (s after the early process's fork): {pictures}", flush=True)
    same = {
        f: filecmp.cmp(inc / "results" / f, scratch / "results" / f, shallow=False)
        for f in ("hits.tsv", "alignments.tsv")
    }
    print(f"{'':24}{'incremental v1->v2':>20}{'scratch v2':>14}{'ratio':>8}")
    for label, key in (
        ("wall clock (s)", "wall_s"),
        ("scoring jobs", "scoring_jobs"),
        ("cells scored", "cells"),
        ("scoring seconds", "kernel_s"),
    ):
        a, b = r2[key], r3[key]
        fmt = (lambda x: f"{x:.3g}") if key == "cells" else (lambda x: f"{x:.2f}")
        print(f"{label:24}{fmt(a):>20}{fmt(b):>14}{(a / b if b else float('nan')):>8.3f}")
    print(
        f"delta sequences scored: {r2['delta_sequences']:,}; queries against whole shards "
        f"per job: {r2['full_queries']} (margin ran out {r2['margin_ran_out']})"
    )
    print(f"traceback: incremental {r2['traceback']}, scratch {r3['traceback']}")
    if args.sync:
        print(
            f"os.sync() before the runs (s): v1 {r1['sync_before_s']}, incremental "
            f"{r2['sync_before_s']}, scratch {r3['sync_before_s']}"
        )
    for label, r in (("incremental", r2), ("scratch", r3)):
        jobs = ", ".join(f"{k.removesuffix('.tsv')} {v:.2f}" for k, v in sorted(r["steps"].items()))
        inner = ", ".join(f"{k} {v:.2f}" for k, v in r["finish_steps"].items())
        print(f"jobs, {label} (Snakemake benchmark s): {jobs}; inside finish: {inner}")
    print(
        "Snakemake around the steps (start -> first step's process, last step's end -> exit), "
        f"incremental {r2['snakemake_around_steps']}, scratch {r3['snakemake_around_steps']}"
    )
    print(
        "Snakemake's start (s from the command: process, parse, onstart, warm process), "
        f"incremental {r2['start_marks_s']}, scratch {r3['start_marks_s']}"
    )
    print(f"tables byte-identical (incremental vs scratch): {same}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "release": what,
                    "v1": r1,
                    "incremental": r2,
                    "scratch": r3,
                    "identical": same,
                    "again_wall_s": repeats,
                },
                indent=1,
            )
        )


#: The scoring job's ``started_by`` (its statistics), in words.
STARTED_BY = {
    "remote": "standby serves its searches",
    "standby": "standby runs it",
    "own": "its own process (no GPU standby)",
}


def pictures_timeline(folder: Path) -> dict:
    """Rule finish's early pictures process (results/stats/plots.json): when its gate
    opened, the step statistics came, the plots step's message came and it ended, and
    each picture's drawing as (start, seconds)."""
    try:
        t = json.loads((folder / "results/stats/plots.json").read_text())["early_timeline_s"]
    except (OSError, ValueError, KeyError):
        return {}
    keys = ("gate_aligned", "changes", "stats_message", "end_message", "end", "children")
    out = {k: t[k] for k in keys if k in t}
    out["drawn"] = {
        name.removesuffix(".png"): (a, round(b - a, 3))
        for name, (a, b) in sorted((t.get("pictures") or {}).items(), key=lambda kv: kv[1][0])
    }
    return out


def scoring_details(folder: Path) -> dict:
    """The re-scan's scoring job as its statistics tell it: who ran it (a warm child
    with the GPU standby serving its searches, the standby alone, or its own GPU
    start), how long the warm process kept it waiting for the generation it needs
    (``taken_after_asked_s``), its phases, its wait for the GPU and its searches'
    seconds."""
    out: dict = {}
    for f in sorted((folder / "results" / "stats" / "score_shard").glob("*.json")):
        d = json.loads(f.read_text())
        first = (d.get("shards") or [d])[0]
        by = first.get("started_by")
        epochs = d.get("job_epochs") or {}
        if "asked" in epochs and "taken" in epochs:  # the warm process's "retry" answers
            out["taken_after_asked_s"] = round(epochs["taken"] - epochs["asked"], 3)
        out.update(
            how=STARTED_BY.get(by, "not recorded" if by is None else str(by)),
            phases={k: round(v, 3) for k, v in d.get("phases_s", {}).items()},
            kernel_s=round(d.get("kernel_s", 0.0), 3),
            startup_wait_s=first.get("startup_wait_s"),
            match_s=d.get("match_s"),
        )
    return out


def read_ahead_timeline(folder: Path) -> dict | None:
    """The traceback's read-ahead child as its statistics tell it (seconds after the
    fork: the child's start, its reads done, the pickle made, received and unpickled
    here, and when the traceback asked for it and had it), with its own read times."""
    f = folder / "results" / "stats" / "traceback.json"
    if not f.exists():
        return None
    d = json.loads(f.read_text())
    return {"timeline": d.get("read_ahead_timeline_s"), "reads": d.get("read_ahead_s")}


def phase_usage(folder: Path) -> dict:
    """Each step's phases as (wall seconds, the step's main thread's CPU seconds, its
    minor page faults), from the steps' statistics: a phase whose CPU time is well
    below its wall time waited."""
    out: dict = {}
    stats = folder / "results" / "stats"
    for f in sorted(stats.glob("*.json")) + sorted(stats.glob("score_shard/*.json")):
        d = json.loads(f.read_text())
        cpu, faults = d.get("phases_thread_cpu_s") or {}, d.get("phases_minor_faults") or {}
        if d.get("phases_s"):
            out[d.get("step", f.stem)] = {
                k: (round(v, 3), cpu.get(k), faults.get(k)) for k, v in d["phases_s"].items()
            }
    return out


if __name__ == "__main__":
    main()
