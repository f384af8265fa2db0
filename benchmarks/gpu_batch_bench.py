#!/usr/bin/env python3
"""Many queries per launch (kernels/gpu/batched.py) against one query at a time, on a
small subject set: the case of a re-scan's new and changed sequences.

    python benchmarks/gpu_batch_bench.py --db bench_db.fasta --queries q.fasta \
        [--subjects 1663] [--queries-n 2000] [--top-k 510] [--repeat 2] [--json out.json]

The subject set is ``--subjects`` entries of ``--db`` picked at random (seed 1; all
of it with 0), the queries the first ``--queries-n`` of ``--queries`` (repeated
if the file has fewer).  Both paths search the same uploaded database
(``GpuSearcher(batch=True)`` and ``batch=False``); each is timed ``--repeat``
times after a warm-up search (kernels loaded), and the best time is reported
with its GCUPS (query residues x subject residues / seconds / 1e9).  The two
paths' top hits must be identical (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _gpu_name() -> str:
    from numba import cuda

    try:
        return cuda.get_current_device().name.decode()
    except Exception:  # the simulator
        return "none"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--subjects", type=int, default=1663)
    ap.add_argument("--queries-n", type=int, default=2000)
    ap.add_argument("--top-k", type=int, default=510)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.kernels import gpu
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    db = read_fasta(args.db)
    qs = read_fasta(args.queries)
    if args.subjects:
        pick = np.sort(np.random.default_rng(1).choice(len(db), args.subjects, replace=False))
        db = db.subset(pick)
    qpairs = [(f"q{k}", qs.sequence(k % len(qs))) for k in range(args.queries_n)]
    qs = SequenceSet.from_pairs(qpairs)
    edb, eqs = scheme.encode(db), scheme.encode(qs)
    cells = float(edb.offsets[-1]) * float(eqs.offsets[-1])
    out = {
        "gpu": _gpu_name(),
        "host": platform.node(),
        "subjects": len(db),
        "subject_residues": int(edb.offsets[-1]),
        "queries": len(qs),
        "query_residues": int(eqs.offsets[-1]),
        "top_k": args.top_k,
    }
    s = gpu.GpuSearcher.from_scheme(edb, scheme)
    out["mode"] = s.mode
    hits = {}
    for batch in (True, False):
        s.batch = batch
        hits[batch] = s.search(eqs, args.top_k)  # warm-up: kernels loaded, plans made
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            s.search(eqs, args.top_k)
            times.append(time.perf_counter() - t)
        best = min(times)
        key = "batched" if batch else "one_query_at_a_time"
        out[key] = {"seconds": times, "gcups": cells / best / 1e9}
        if batch:  # the last search's split: GPU wait, host top-k, launching; blocks
            out[key]["split"] = dict(s.batch_seconds)
            print(f"  {s.batch_seconds}", flush=True)
        print(
            f"{key}: {best:.3f} s ({', '.join(f'{t:.3f}' for t in times)}), "
            f"{cells / best / 1e9:.1f} GCUPS",
            flush=True,
        )
    a, b = hits[True], hits[False]
    same = (
        len(a) == len(b)
        and (a.query_index == b.query_index).all()
        and (a.subject_index == b.subject_index).all()
        and (a.score == b.score).all()
    )
    out["identical_hits"] = bool(same)
    out["speedup"] = out["one_query_at_a_time"]["seconds"][0] and (
        min(out["one_query_at_a_time"]["seconds"]) / min(out["batched"]["seconds"])
    )
    print(
        f"{len(db):,} subjects ({out['subject_residues']:,} residues) x {len(qs):,} queries "
        f"({out['query_residues']:,} residues), mode {s.mode}: batched {out['speedup']:.1f}x "
        f"faster; hits identical: {same}",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
