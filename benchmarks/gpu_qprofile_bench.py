#!/usr/bin/env python3
"""Query-profile kernel (issue 14 prototype) against the s16 search kernels, one process.

    python benchmarks/gpu_qprofile_bench.py --db bench_db.fasta --queries q.fasta \
        [--shape 32x32] [--block 128] [--repeat 3] [--json out.json]

For every query that fits one pass of the prototype (length <= G*R), it times the scan of
the whole (resident) database by ``kernels.gpu.qprofile.QProfileScan`` and by the s16
searcher (``GpuSearcher.all_scores`` of that query alone: the same work, all scores read
back), median of ``--repeat`` after a warm-up, and checks that the two score arrays are
equal.  GCUPS = query length x database residues / seconds / 1e9.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument(
        "--shape", action="append", default=None, help="GxR (default 32x32); repeatable"
    )
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-queries", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from numba import cuda

    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.kernels import gpu
    from swgpu_tools.kernels.gpu.qprofile import QProfileScan
    from swgpu_tools.scoring import ScoringScheme

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    db = read_fasta(args.db)
    qs = read_fasta(args.queries)
    edb = scheme.encode(db, args.db)
    eqs = scheme.encode(qs, args.queries)
    s = gpu.GpuSearcher.from_scheme(edb, scheme, mode="s16")
    residues = edb.total_residues
    scans = {}
    for spec in args.shape or ["32x32"]:
        shape, _, rest = spec.partition(":")
        block, _, unroll = rest.partition(":")
        g, r = (int(v) for v in shape.split("x"))
        scans[spec] = QProfileScan(
            s, G=g, R=r, block=int(block or args.block), unroll=int(unroll or 1)
        )
    shapes = list(scans)
    wmax = max(sc.G * sc.R for sc in scans.values())
    picked = [i for i in range(len(eqs)) if 0 < eqs.offsets[i + 1] - eqs.offsets[i] <= wmax]
    if args.max_queries:
        picked = picked[: args.max_queries]
    print(
        f"database {len(edb)} sequences, {residues} residues; queries {len(picked)} "
        f"of {len(eqs)} (length <= {wmax})",
        flush=True,
    )

    def timed(fn):
        fn()  # warm-up (compiles on first use)
        cuda.synchronize()
        ts = []
        out = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = fn()
            cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts)), out

    rows = []
    tot = {f"q{spec}": [0.0, 0.0, 0] for spec in shapes}  # own s, s16 s, cells
    cells = 0
    bad = 0
    for i in picked:
        q = eqs.codes[eqs.offsets[i] : eqs.offsets[i + 1]]
        L = len(q)
        one = eqs.subset([i])
        t_s16, ref = timed(lambda one=one: s.all_scores(one)[0])
        row = {
            "query": qs.ids[i],
            "length": L,
            "s16_s": t_s16,
            "s16_gcups": L * residues / t_s16 / 1e9,
        }
        for spec, scan in scans.items():
            if L > scan.G * scan.R:
                continue
            print(f"    {spec} ...", end="", flush=True)
            t_q, got = timed(lambda q=q, scan=scan: scan.scores(q))
            print(f" {t_q:.4f} s", flush=True)
            eq = bool((got == ref).all())
            bad += not eq
            key = f"q{spec}"
            tot[key][0] += t_q
            tot[key][1] += t_s16
            tot[key][2] += L * residues
            row.update(
                {f"{key}_s": t_q, f"{key}_gcups": L * residues / t_q / 1e9, f"{key}_equal": eq}
            )
        cells += L * residues
        rows.append(row)
        print(
            "  "
            + "  ".join(
                f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
            ),
            flush=True,
        )
    for spec, scan in scans.items():
        print(f"  q{spec}: grid {scan.grid} blocks of {scan.block} threads")
    print("overall GCUPS over the queries each shape serves (the s16 kernels on the same):")
    for k, (t, t16, c) in tot.items():
        if t:
            print(
                f"  {k}: {c / t / 1e9:.1f} ({t:.3f} s); s16 {c / t16 / 1e9:.1f} ({t16:.3f} s); "
                f"ratio {t16 / t:.3f}"
            )
    print(
        "scores equal to s16 for every query and shape"
        if not bad
        else f"!! {bad} score arrays differ"
    )
    if args.json:
        name = getattr(cuda.get_current_device(), "name", "simulator")
        name = name.decode() if isinstance(name, bytes) else str(name)
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "rows": rows,
                    "totals_s": tot,
                    "cells": cells,
                    "residues": residues,
                    "device": name,
                },
                fh,
                indent=1,
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
