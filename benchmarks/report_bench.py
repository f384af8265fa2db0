"""Time the report step (``swgpu_tools.report.make_report``) on synthetic scans.

For each case (queries, top_k) it writes, once, into ``--workdir``:

* ``queries.fasta``  the queries (random residues, lengths 50-2,000);
* ``hits.tsv``       hits per query: 40 % of the queries have top_k hits, the
                     others a log-uniform number in 0..top_k (0 = no hits);
                     heavy-tailed raw scores, bit scores, E-values down to
                     1e-200, some ``0.0``;
* ``changes.tsv``    the worst case, a first scan: every hit ``new``;
* ``stats/``         ``--shards`` score_shard JSON files and shard_db,
                     merge_hits, traceback JSON files as the steps write them;

then runs the report ``--repeat`` times, each in a fresh Python process (so
the time includes starting Python and importing pandas and matplotlib, as
``swgpu plots`` does), and prints wall seconds (min and median), the child's
CPU seconds (user + system: less sensitive than wall time to other work on a
shared machine), its peak RSS, the phases the step records, the largest
picture side and the load average before and after.

    python benchmarks/report_bench.py                       # 500, 10,000; 100,000 x 50
    python benchmarks/report_bench.py --cases 10000:500 --repeat 5 --workers 1 2
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

ALPHABET = np.frombuffer(b"ACDEFGHIKLMNPQRSTVWY", dtype=np.uint8)


def _write_queries(path, nq: int, rng) -> np.ndarray:
    qlen = rng.integers(50, 2001, nq)
    with open(path, "wb") as fh:
        for i in range(nq):
            seq = ALPHABET[rng.integers(0, 20, qlen[i])].tobytes()
            fh.write(b">Q%07d synthetic query\n" % i + seq + b"\n")
    return qlen


def make_case(folder: str, nq: int, top_k: int, shards: int, seed: int = 1) -> dict:
    """Write the synthetic inputs of one case into ``folder`` (once)."""
    done = os.path.join(folder, "case.json")
    if os.path.exists(done):
        with open(done) as fh:
            return json.load(fh)
    import pandas as pd

    os.makedirs(os.path.join(folder, "stats", "score_shard"), exist_ok=True)
    rng = np.random.default_rng(seed)
    qlen = _write_queries(os.path.join(folder, "queries.fasta"), nq, rng)
    k = np.where(
        rng.random(nq) < 0.4,
        top_k,
        np.exp(rng.uniform(0, np.log(top_k + 1), nq)).astype(np.int64) - 1,
    )
    n = int(k.sum())
    q = np.repeat(np.arange(nq), k)
    score = (rng.pareto(1.5, n) * 30 + 20).astype(np.int64)
    # per query by descending score, as hits.tsv is ordered
    order = np.lexsort((-score, q))
    score = score[order]
    evalue = 10.0 ** rng.uniform(-200, 1, n)
    evalue[rng.random(n) < 0.01] = 0.0
    qids = np.array([f"Q{i:07d}" for i in range(nq)], dtype=object)
    sids = np.char.add("A0A", rng.integers(0, 10**7, n).astype("U7"))
    slen = rng.integers(30, 3000, n)
    evalue_text = np.char.mod("%.2g", evalue)
    hits = pd.DataFrame(
        {
            "qseqid": qids[q],
            "sseqid": sids,
            "score": score,
            "bitscore": np.char.mod("%.1f", score * 0.35),
            "evalue": evalue_text,
            "qlen": qlen[q],
            "slen": slen,
        }
    )
    hits.to_csv(
        os.path.join(folder, "hits.tsv"),
        sep="\t",
        index=False,
        quoting=csv.QUOTE_NONE,
        lineterminator="\n",
    )
    changes = pd.DataFrame(
        {
            "qseqid": qids[q],
            "sseqid": sids,
            "change": "new",
            "previous_score": "NA",
            "score": score,
            "previous_evalue": "NA",
            "evalue": evalue_text,
            "slen": slen,
        }
    )
    changes.to_csv(
        os.path.join(folder, "changes.tsv"),
        sep="\t",
        index=False,
        quoting=csv.QUOTE_NONE,
        lineterminator="\n",
    )
    residues = 200_000_000 // shards
    paths = []
    for s in range(shards):
        kernel = float(rng.uniform(2, 4))
        cells = float(qlen.sum()) * residues
        rec = {
            "step": "score_shard",
            "format": 1,
            "shard": f"shard-{s:04d}.swdb",
            "backend": "gpu",
            "reason": "synthetic",
            "device": 0,
            "device_uuid": "GPU-x",
            "queries": nq,
            "query_residues": int(qlen.sum()),
            "sequences": residues // 350,
            "residues": residues,
            "cells": cells,
            "kernel_s": kernel,
            "gcups": cells / kernel / 1e9,
            "hits": int(min(n, nq * top_k)),
            "wall_s": kernel + 1.5,
            "phases_s": {"read": 0.4, "score": kernel + 0.9, "write": 0.2},
            "peak_rss_bytes": 2 * 2**30,
            "host": "bench",
            "started": "",
            "finished": "",
        }
        path = os.path.join(folder, "stats", "score_shard", f"shard-{s:04d}.json")
        with open(path, "w") as fh:
            json.dump(rec, fh)
        paths.append(path)
    for step, phases in (
        ("shard_db", {"read": 30.0, "write": 12.0}),
        ("merge_hits", {"read": 8.0, "merge": 5.0, "write": 3.0}),
        ("traceback", {"read": 4.0, "align": 120.0, "write": 6.0}),
    ):
        path = os.path.join(folder, "stats", f"{step}.json")
        with open(path, "w") as fh:
            json.dump(
                {
                    "step": step,
                    "format": 1,
                    "wall_s": sum(phases.values()) + 1,
                    "phases_s": phases,
                    "peak_rss_bytes": 2**30,
                },
                fh,
            )
        paths.append(path)
    info = {
        "queries": nq,
        "top_k": top_k,
        "hits": n,
        "changes": n,
        "shards": shards,
        "stats": paths,
        "hits_bytes": os.path.getsize(os.path.join(folder, "hits.tsv")),
        "changes_bytes": os.path.getsize(os.path.join(folder, "changes.tsv")),
    }
    with open(done, "w") as fh:
        json.dump(info, fh)
    return info


def png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as fh:
        head = fh.read(24)
    return struct.unpack(">II", head[16:24])


def run_once(folder: str, info: dict, workers: int = 2) -> dict:
    """One report run in a fresh process: wall seconds, peak RSS, phases."""
    out = os.path.join(folder, "out")
    stats_out = os.path.join(folder, "plots.json")
    code = (
        "import sys, json; from swgpu_tools.report import make_report; "
        "a = json.loads(sys.argv[1]); make_report(*a)"
    )
    args = [
        os.path.join(folder, "hits.tsv"),
        os.path.join(folder, "changes.tsv"),
        info["stats"],
        out,
        os.path.join(folder, "queries.fasta"),
        stats_out,
        workers,
    ]
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(args)])
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"report failed (status {status})")
    with open(stats_out) as fh:
        rec = json.load(fh)
    sides = [max(png_size(os.path.join(out, f))) for f in os.listdir(out) if f.endswith(".png")]
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        # the step's own peak (getrusage of its process): wait4's ru_maxrss also counts
        # this benchmark's memory at the fork before the child's exec (1 GB after it made
        # the 10,000-query case in the same process, 2026-11-27)
        "peak_rss_bytes": rec.get("peak_rss_bytes") or usage.ru_maxrss * 1024,
        "phases_s": rec["phases_s"],
        "max_side_px": max(sides),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--cases", nargs="+", default=["500:500", "10000:500", "100000:50"], metavar="QUERIES:TOP_K"
    )
    p.add_argument("--shards", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[2],
        help="make_report's workers; several values run interleaved, one row each",
    )
    p.add_argument(
        "--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "swgpu-report-bench")
    )
    args = p.parse_args(argv)
    print(
        "| queries | top_k | workers | hits rows | hits.tsv MB | changes rows | shards | "
        "wall s min | wall s median | wall s max | CPU s median | peak RSS MiB | "
        "read / tables / plots s (median run) | max px | load avg |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    for case in args.cases:
        nq, top_k = (int(x) for x in case.split(":"))
        folder = os.path.join(args.workdir, f"q{nq}-k{top_k}-s{args.shards}")
        info = make_case(folder, nq, top_k, args.shards)
        load = os.getloadavg()[0]
        runs: dict[int, list[dict]] = {w: [] for w in args.workers}
        for _ in range(args.repeat):
            for w in args.workers:  # interleaved: each setting sees the same load
                runs[w].append(run_once(folder, info, w))
        load = f"{load:.1f} -> {os.getloadavg()[0]:.1f}"
        for w, rs in runs.items():
            walls = [r["wall_s"] for r in rs]
            med = sorted(rs, key=lambda r: r["wall_s"])[len(rs) // 2]
            ph = med["phases_s"]
            print(
                f"| {nq:,} | {top_k} | {w} | {info['hits']:,} | "
                f"{info['hits_bytes'] / 1e6:,.0f} | "
                f"{info['changes']:,} | {info['shards']} | {min(walls):.2f} | "
                f"{statistics.median(walls):.2f} | {max(walls):.2f} | "
                f"{statistics.median(r['cpu_s'] for r in rs):.2f} | "
                f"{max(r['peak_rss_bytes'] for r in rs) / 2**20:,.0f} | "
                f"{ph.get('read', 0):.2f} / {ph.get('tables', 0):.2f} / "
                f"{ph.get('plots', 0):.2f} | {max(r['max_side_px'] for r in rs)} | {load} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
