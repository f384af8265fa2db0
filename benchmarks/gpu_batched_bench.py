#!/usr/bin/env python3
"""Resident vs streamed (batched) GPU search on one database: set-up time, scan
time, GCUPS and whether the top-k hits are identical.

    python benchmarks/gpu_batched_bench.py --db bench_db.fasta --queries bench_queries.fasta \
        --budget 100e6 [--top-k 500] [--json out.json]

``--budget`` is the device-memory budget for the database layout (bytes) that
forces batches (same as SWGPU_GPU_MEMORY_BYTES).  Kernels are assumed compiled
(run after gpu_bench.py or gpu.precompile()); a warm-up search runs first.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--budget", type=float, required=True)
    ap.add_argument("--top-k", type=int, default=500)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    from numba import cuda

    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.kernels import gpu
    from swgpu_tools.scoring import ScoringScheme

    t_imp = time.perf_counter() - t0
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    t0 = time.perf_counter()
    db, qs = read_fasta(args.db), read_fasta(args.queries)
    edb, eqs = scheme.encode(db), scheme.encode(qs)
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    cuda.current_context()
    t_ctx = time.perf_counter() - t0
    cells = float(np.diff(eqs.offsets).sum()) * float(edb.offsets[-1])
    out = {
        "import_s": t_imp,
        "read_encode_s": t_read,
        "context_s": t_ctx,
        "residues": int(edb.offsets[-1]),
        "subjects": len(db),
        "cells": cells,
    }
    res = {}
    for name, budget in (("resident", None), ("batched", int(args.budget))):
        t0 = time.perf_counter()
        s = gpu.GpuSearcher(edb, scheme.matrix, 11, 1, max_resident_bytes=budget)
        t_init = time.perf_counter() - t0
        t0 = time.perf_counter()
        s.search(eqs, args.top_k)  # first search: plans (+ kernel loads)
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        th = s.search(eqs, args.top_k)
        t_search = time.perf_counter() - t0
        res[name] = th
        r = {
            "init_s": t_init,
            "setup_seconds": s.setup_seconds,
            "first_search_s": t_first,
            "search_s": t_search,
            "plan_s": s.plan_seconds,
            "gcups": cells / t_search / 1e9,
            "batches": 1 if s.batches is None else len(s.batches),
            "budget_bytes": s.budget_bytes,
            "upload_wait_s": getattr(s, "upload_wait_seconds", 0.0),
        }
        out[name] = r
        print(name, json.dumps(r), flush=True)
        del s
    a, b = res["resident"], res["batched"]
    same = bool(
        len(a.score) == len(b.score)
        and (a.query_index == b.query_index).all()
        and (a.subject_index == b.subject_index).all()
        and (a.score == b.score).all()
    )
    out["identical_topk"] = same
    print(
        "identical top-%d hits (resident vs batched): %s (%d hits)"
        % (args.top_k, same, len(a.score))
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
