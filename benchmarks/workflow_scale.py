"""The whole workflow at scale: where the time goes, step by step.

    python benchmarks/workflow_scale.py --database bench_db.fasta \
        --queries 20=bench_queries.fasta --queries 500=uniprot_queries500.fasta.gz \
        --cores 16 --shards 4 --workdir /tmp/scale --json scale.json

For each query set, runs ``snakemake --cores N`` from scratch in its own
folder (kernel caches as they are: run ``swgpu backend --precompile`` first for
a warm start, or set ``--cold`` to empty them) and prints, per step: jobs,
the wall seconds of its jobs (Snakemake's benchmark files), their peak memory,
and the share of the whole run; then the GPU scan seconds (the scoring
kernels, from results/stats/score_shard/*.json) and their share.
``--queries N=FILE`` takes the first N records of FILE; N larger than the
file takes records of the database instead (every N-th, as extra queries).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: the snakemake command: $SNAKEMAKE, else the one beside this Python, else on PATH
SNAKEMAKE = (
    os.environ.get("SNAKEMAKE")
    or (str(BIN / "snakemake") if (BIN / "snakemake").exists() else None)
    or shutil.which("snakemake")
    or "snakemake"
)


def records(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    head, seq = None, []
    with opener(path, "rt") as fh:
        for line in fh:
            if line.startswith(">"):
                if head is not None:
                    yield head, "".join(seq)
                head, seq = line[1:].rstrip("\n"), []
            else:
                seq.append(line.strip())
    if head is not None:
        yield head, "".join(seq)


def query_file(n: int, path: str, database: str, out: Path) -> Path:
    got = []
    for h, s in records(path):
        got.append((h, s))
        if len(got) == n:
            break
    if len(got) < n:  # more queries than the file has: entries of the database
        need = n - len(got)
        for k, (h, s) in enumerate(records(database)):
            if k % 83 == 0 and 30 <= len(s) <= 3000:
                got.append((f"DBQ{k:07d} {h.split()[0]}", s))
                if len(got) == n:
                    break
        assert len(got) == n, f"found only {len(got)} of {need} extra queries"
    with open(out, "w") as fh:
        for h, s in got:
            fh.write(f">{h}\n{s}\n")
    return out


def read_benchmarks(results: Path) -> dict:
    steps: dict[str, dict] = {}
    for p in sorted((results / "benchmarks").rglob("*.tsv")):
        rows = p.read_text().splitlines()
        if len(rows) < 2:
            continue
        head = rows[0].split("\t")
        vals = dict(zip(head, rows[-1].split("\t")))
        rel = p.relative_to(results / "benchmarks")
        step = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        d = steps.setdefault(step, {"jobs": 0, "seconds": 0.0, "max_rss_mb": 0.0})
        d["jobs"] += 1
        d["seconds"] += float(vals["s"])
        try:
            d["max_rss_mb"] = max(d["max_rss_mb"], float(vals.get("max_rss", "nan")))
        except ValueError:
            pass
    return steps


#: Each step's statistics files (their peak_rss_bytes: measured in the process
#: that did the work; with the warm start, Snakemake's benchmark files measure
#: the job's process, which only waits for it).
STEP_STATS = {
    "shard_db": ["shard_db.json"],
    "score_shard": ["score_shard/*.json"],
    "finish": ["merge_hits.json", "traceback.json", "plots.json"],
}


def peak_memory(results: Path, steps: dict) -> None:
    """Set each step's max_rss_mb from its statistics files where they have it."""
    for step, patterns in STEP_STATS.items():
        peaks = [
            json.loads(p.read_text()).get("peak_rss_bytes")
            for pattern in patterns
            for p in (results / "stats").glob(pattern)
        ]
        peaks = [x for x in peaks if x]
        if peaks and step in steps:
            steps[step]["max_rss_mb"] = max(peaks) / 2**20


#: The steps of rule finish that write statistics (release writes none).
FINISH_STEPS = ("merge_hits", "traceback", "plots")


def start_marks(results: Path, start_epoch: float) -> dict:
    """Snakemake's own start (results/stats/snakemake_start.json), in seconds from the
    benchmark's start of the command: its process started, the Snakefile's parse
    began and ended, onstart began, the warm process started."""
    try:
        d = json.loads((results / "stats" / "snakemake_start.json").read_text())
    except (OSError, ValueError):
        return {}
    began = d["process_start_epoch"] - start_epoch
    return {"process": round(began, 3)} | {
        k: round(began + v, 3) for k, v in d.get("marks_s", {}).items()
    }


def finish_steps(results: Path) -> dict:
    """Seconds of each step inside the finish job (its start-up included), from
    the steps' statistics files."""
    out = {}
    for step in FINISH_STEPS:
        p = results / "stats" / f"{step}.json"
        if p.exists():
            rec = json.loads(p.read_text())
            out[step] = rec["wall_s"] + (rec.get("before_step_s") or 0.0)
    return out


def run(label: str, queries: Path, args) -> dict:
    work = Path(args.workdir) / label
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cfg = {
        "database": os.path.abspath(args.database),
        "queries": str(queries.resolve()),
        "shards": args.shards,
        "backend": args.backend,
        "threads": args.threads,
        "top_k": args.top_k,
        "warm_start": args.warm_start,
    }
    (work / "config.yaml").write_text("".join(f"{k}: {v}\n" for k, v in cfg.items()))
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    cmd = [
        SNAKEMAKE,
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(work),
        "--configfile",
        str(work / "config.yaml"),
        "--cores",
        str(args.cores),
        *args.snakemake_arg,
    ]
    start = time.perf_counter()
    start_epoch = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (work / "snakemake.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        sys.exit(f"{label}: snakemake failed:\n{proc.stderr[-4000:]}")
    results = work / "results"
    steps = read_benchmarks(results)
    peak_memory(results, steps)
    scan = [json.loads(p.read_text()) for p in (results / "stats/score_shard").glob("*.json")]
    gpu_s = sum(s.get("kernel_s", 0.0) for s in scan)
    # the scoring jobs' span: the first one's start to the last one's end (with several
    # GPUs the jobs overlap, and the span is what the run waits for)
    span = [(s["start_epoch"], s["start_epoch"] + s["wall_s"]) for s in scan if "start_epoch" in s]
    scoring_span = max(e for _, e in span) - min(b for b, _ in span) if span else None
    tb = json.loads((results / "stats/traceback.json").read_text())
    n_hits = sum(1 for _ in open(results / "hits.tsv")) - 1
    # the jobs' span: the first step's process start to the last step's end
    recs = [json.loads(p.read_text()) for p in (results / "stats").rglob("*.json") if p.is_file()]
    recs = [r for r in recs if "start_epoch" in r]
    first = min((r["start_epoch"] - (r.get("before_step_s") or 0.0) for r in recs), default=None)
    last = max((r["start_epoch"] + r["wall_s"] for r in recs), default=None)
    return {
        "label": label,
        "wall_s": wall,
        "before_first_job_s": None if first is None else first - start_epoch,
        "start_marks_s": start_marks(results, start_epoch),
        "after_last_job_s": None if last is None else start_epoch + wall - last,
        "steps": steps,
        "finish_steps": finish_steps(results),
        "scan_s": gpu_s,
        "scoring_jobs": len(scan),
        "scoring_span_s": scoring_span,
        "gpus": sorted({s.get("device_uuid") for s in scan if s.get("device_uuid")}),
        "snakemake_args": list(args.snakemake_arg),
        "scan_gcups": sum(s["cells"] for s in scan) / max(gpu_s, 1e-9) / 1e9,
        "hits": n_hits,
        "traceback": tb,
        "queries": sum(1 for _ in records(queries)),
        # each scoring job's start: its phases, the reading thread's seconds per shard
        # and the GPU start-up left when the inputs were ready
        "score_start": [
            {
                "phases_s": s.get("phases_s"),
                "read_s": [x.get("read_s") for x in s.get("shards", [s])],
                "startup_s": s.get("startup_s"),
                "startup_wait_s": s.get("startup_wait_s"),
            }
            for s in scan
        ],
    }


def show(r: dict) -> None:
    print(
        f"\n== {r['label']}: {r['queries']} queries, {r['hits']:,} hits; whole run "
        f"{r['wall_s']:.1f} s; GPU scan {r['scan_s']:.1f} s ({100 * r['scan_s'] / r['wall_s']:.0f}%"
        f" of the run, {r['scan_gcups']:,.0f} GCUPS)"
    )
    print(f"   {'step':<16}{'jobs':>5}{'seconds':>10}{'share':>8}{'peak MB':>10}")
    for step, d in sorted(r["steps"].items(), key=lambda kv: -kv[1]["seconds"]):
        print(
            f"   {step:<16}{d['jobs']:>5}{d['seconds']:>10.2f}"
            f"{100 * d['seconds'] / r['wall_s']:>7.0f}%{d['max_rss_mb']:>10.0f}"
        )
        if step == "finish":
            for name, sec in r.get("finish_steps", {}).items():
                print(f"     {name:<19}{sec:>10.2f}{100 * sec / r['wall_s']:>7.0f}%")
    if r.get("before_first_job_s") is not None:
        print(
            f"   outside the jobs: {r['before_first_job_s']:.2f} s before the first step's "
            f"process (Snakemake's start, the receipt job), {r['after_last_job_s']:.2f} s "
            "after the last step (Snakemake's end)"
        )
    if r.get("start_marks_s"):
        print(f"   Snakemake's start (s from the command): {r['start_marks_s']}")
    for job in r.get("score_start", []):
        print(f"   scoring job's start: {json.dumps(job)}")


def summary(rows: list[dict]) -> None:
    """One table of every query set: the whole run, the GPU scan and their share."""
    print(
        f"\n   {'queries':>8}{'hits':>9}{'wall s':>9}{'GPU scan s':>12}{'scan share':>12}"
        f"{'scoring jobs':>14}{'scoring span s':>16}{'wall/scan':>11}"
    )
    for r in rows:
        span = r.get("scoring_span_s")
        print(
            f"   {r['queries']:>8,}{r['hits']:>9,}{r['wall_s']:>9.1f}{r['scan_s']:>12.1f}"
            f"{100 * r['scan_s'] / r['wall_s']:>11.0f}%{r['scoring_jobs']:>14}"
            f"{'' if span is None else f'{span:.1f}':>16}{r['wall_s'] / max(r['scan_s'], 1e-9):>11.2f}"
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--database", required=True)
    ap.add_argument("--queries", action="append", required=True, metavar="N=FILE")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--cores", type=int, default=16)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--top-k", type=int, default=500)
    ap.add_argument("--backend", default="auto")
    ap.add_argument(
        "--warm-start", default="true", choices=["true", "false"], help="config warm_start"
    )
    ap.add_argument(
        "--snakemake-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an argument for snakemake, e.g. --snakemake-arg=--resources --snakemake-arg=gpu=1",
    )
    ap.add_argument("--workdir", default="/tmp/scale")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    out = []
    for spec in args.queries:
        n, path = spec.split("=", 1)
        q = query_file(int(n), path, args.database, Path(args.workdir) / f"q{n}.fasta")
        r = run(f"q{n}", q, args)
        show(r)
        out.append(r)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    summary(out)


if __name__ == "__main__":
    main()
