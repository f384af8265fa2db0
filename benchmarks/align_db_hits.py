"""Traceback of database hits: the top hits of long queries against bench200M.

A proxy for "10,000 alignments of bench200M": the top --top-k (500) hits of
each chosen query are found with the CPU search kernel (cached in
bench_data/, not timed here), then aligned with
swgpu_tools.alignment.align_many (local mode, BLOSUM62, gaps 11 + k), which
is what the workflow's traceback step runs.  Reported: wall clock of the
alignments per query and in all, alignments/s, and how many DP cells the
traceback covered (forward pass over whole pairs vs the aligned regions only).

    python3 ../shared/tools/synth_db.py --template ../shared/data/uniprot20k.fasta.gz \
        --residues 2e8 --db bench_data/bench_db.fasta --queries bench_data/bench_queries.fasta
    .venv/bin/python benchmarks/align_db_hits.py --threads 2 \
        --queries BENCH10_1000,BENCH12_2005,BENCH14_3005,BENCH16_4061
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swgpu_tools.alignment import align_many  # noqa: E402
from swgpu_tools.io.fasta import read_fasta  # noqa: E402
from swgpu_tools.kernels import cpu  # noqa: E402
from swgpu_tools.scoring import ScoringScheme  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=str(ROOT / "bench_data/bench_db.fasta"))
    ap.add_argument("--query-file", default=str(ROOT / "bench_data/bench_queries.fasta"))
    ap.add_argument(
        "--queries",
        default="BENCH10_1000,BENCH12_2005,BENCH14_3005,BENCH16_4061",
        help="comma-separated query names (the header's second word part), or 'all'",
    )
    ap.add_argument("--top-k", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import numba

    numba.set_num_threads(args.threads)
    s = ScoringScheme("BLOSUM62", 11, 1)
    t0 = time.perf_counter()
    queries = read_fasta(args.query_file)
    headers = [line[1:].split()[0] for line in open(args.query_file) if line.startswith(">")]
    names = [h.split("|")[-1] for h in headers]
    wanted = names if args.queries == "all" else args.queries.split(",")
    qsel = [names.index(w) for w in wanted]
    queries = queries.subset(qsel)
    db = read_fasta(args.db)
    q_enc, d_enc = s.encode(queries), s.encode(db)
    print(
        f"read {len(db):,} subjects, {db.total_residues:,} residues in "
        f"{time.perf_counter() - t0:.1f} s",
        flush=True,
    )

    import hashlib

    tag = (
        "all" if args.queries == "all" else hashlib.sha1(",".join(wanted).encode()).hexdigest()[:12]
    )
    cache = ROOT / "bench_data" / f"hits_top{args.top_k}_{tag}.npz"
    if cache.exists():
        z = np.load(cache)
        qi, si, sc = z["qi"], z["si"], z["sc"]
    else:
        t = time.perf_counter()
        hits = cpu.search(q_enc, d_enc, s.matrix, 11, 1, args.top_k)
        print(
            f"search (not part of the traceback figure): {time.perf_counter() - t:.1f} s",
            flush=True,
        )
        qi, si, sc = hits.query_index, hits.subject_index, hits.score
        np.savez(cache, qi=qi, si=si, sc=sc)

    # compile on a few hits
    align_many(q_enc, d_enc, qi[:4], si[:4], s.matrix, 11, 1, args.threads)
    rows = []
    qlen = np.diff(q_enc.offsets)
    slen = np.diff(d_enc.offsets)
    total_t = 0.0
    for k, name in enumerate(wanted):
        sel = np.flatnonzero(qi == k)
        t = time.perf_counter()
        alns = align_many(q_enc, d_enc, qi[sel], si[sel], s.matrix, 11, 1, args.threads)
        dt = time.perf_counter() - t
        total_t += dt
        assert all(a.score == int(x) for a, x in zip(alns, sc[sel])), "score mismatch"
        full = int(sum(qlen[k] * slen[si[j]] for j in sel))
        region = int(
            sum((a.query_end - a.query_start) * (a.subject_end - a.subject_start) for a in alns)
        )
        row = {
            "query": name,
            "qlen": int(qlen[k]),
            "alignments": len(sel),
            "seconds": dt,
            "alignments_per_s": len(sel) / dt,
            "pair_cells": full,
            "region_cells": region,
            "min_score": int(sc[sel].min()),
            "max_score": int(sc[sel].max()),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    # all queries' hits in one call (how the traceback step runs them)
    t = time.perf_counter()
    alns = align_many(q_enc, d_enc, qi, si, s.matrix, 11, 1, args.threads)
    one_call = time.perf_counter() - t
    summary = {
        "alignments": int(len(qi)),
        "sum_of_per_query_seconds": total_t,
        "one_call_seconds": one_call,
        "alignments_per_s": len(qi) / one_call,
        "threads": args.threads,
    }
    print(json.dumps(summary))
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
    }
    print(json.dumps(meta))
    if args.out:
        Path(args.out).write_text(
            json.dumps({"meta": meta, "rows": rows, "summary": summary}, indent=1)
        )


if __name__ == "__main__":
    main()
