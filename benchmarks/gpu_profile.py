#!/usr/bin/env python3
"""Per-partition kernel times and shape variants (for tuning; see GPU-NOTES.md).

    python benchmarks/gpu_profile.py --db bench_db.fasta --queries bench_queries.fasta \
        [--pick 0,9,19] [--variant NAME=4x8,4x16,...[/block]] ... [--ncu]

For each variant (kernel shapes and block size), times every partition kernel
of the picked queries with CUDA events and prints: shape, passes, items,
residues, padded-cell efficiency, seconds, GCUPS (query length x partition
residues / seconds).  With --ncu, only the first variant's kernels of the
last picked query run between cuda.profile_start() and profile_stop() (run
under `ncu --profile-from-start off`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--pick", default="0,9,19")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--ncu", action="store_true")
    args = ap.parse_args()
    from numba import cuda

    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.kernels import gpu
    from swgpu_tools.scoring import ScoringScheme

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    edb = scheme.encode(read_fasta(args.db))
    qs = read_fasta(args.queries)
    eqs = scheme.encode(qs)
    picks = [int(x) for x in args.pick.split(",")]
    variants = args.variant or ["default="]
    letters = sorted(set(np.flatnonzero(np.bincount(eqs.codes, minlength=256)).tolist()))
    summary = []
    for v in variants:
        name, _, spec = v.partition("=")
        spec, _, block = spec.partition("/")
        configs = spec or None  # "GxR,...[;GxR,...]" (single-pass shapes; multi-pass shapes)
        s = gpu.GpuSearcher(
            edb,
            scheme.matrix,
            11,
            1,
            mode=args.mode,
            configs=configs,
            block=int(block) if block else None,
        )
        tables = {"letters": letters, s.mode: s._table(s.mode, letters)}
        t0 = time.perf_counter()
        s.score_query(eqs.codes[eqs.offsets[0] : eqs.offsets[1]], tables)  # compile
        cuda.synchronize()
        print(
            f"\n== variant {name}: shapes {s.shapes(s.mode)} block {s.block}  "
            f"(warm-up {time.perf_counter() - t0:.1f} s)"
        )
        for qi in picks:
            q = eqs.codes[eqs.offsets[qi] : eqs.offsets[qi + 1]]
            L = len(q)
            s.record = []
            if args.ncu and qi == picks[-1] and v is variants[0]:
                cuda.profile_start()
            t0 = time.perf_counter()
            s.score_query(q, tables)
            idx, sc = s.top_k(10)
            cuda.synchronize()
            wall = time.perf_counter() - t0
            if args.ncu and qi == picks[-1] and v is variants[0]:
                cuda.profile_stop()
            ksum = sum(r[-1] for r in s.record)
            print(
                f"query {qs.ids[qi]} L={L}: wall {wall * 1e3:.2f} ms, kernels {ksum * 1e3:.2f} ms, "
                f"overall {L * edb.total_residues / wall / 1e9:.0f} GCUPS "
                f"(kernels only {L * edb.total_residues / ksum / 1e9:.0f})"
            )
            for mode, G, R, mp, n, cells, res, sec in s.record:
                eff = res / (cells or 1)
                print(
                    f"   {mode} {G:>2}x{R:<2} passes<={mp:<3} items {n:>7} residues {res:>11} "
                    f"pad-eff {eff:5.2f} {sec * 1e3:8.3f} ms {L * res / sec / 1e9:8.0f} GCUPS"
                )
            summary.append((name, qs.ids[qi], L, wall, ksum))
            s.record = None
        del s
    print("\nvariant   query   L   wall_ms  kernel_ms  GCUPS")
    for name, qid, L, wall, ksum in summary:
        gcups = L * edb.total_residues / wall / 1e9
        print(f"{name:<9}{qid:<7}{L:>5}{wall * 1e3:>9.2f}{ksum * 1e3:>10.2f}{gcups:>8.0f}")


if __name__ == "__main__":
    main()
