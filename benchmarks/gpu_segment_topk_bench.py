#!/usr/bin/env python3
"""A re-scan's joint delta search (many queries per launch, each shard's best hits on
their own: segments) with each row's choice on the GPU against on the host.

    python benchmarks/gpu_segment_topk_bench.py --db bench_db.fasta --queries q.fasta \
        [--subjects 6589] [--segments 4] [--queries-n 2000] [--keep 1000] [--repeat 3] \
        [--json out.json]

``--subjects`` entries of ``--db`` (seed 1) cut into ``--segments`` runs, the first
``--queries-n`` queries of ``--queries`` (repeated where the file has fewer); the
batched search with ``--keep`` per segment, alternately with ``SWGPU_GPU_TOPK=0``
(the whole score block back, :func:`swgpu_tools.kernels.topk.top_rows` on the host)
and ``1`` (``segment_topk_kernel``), ``--repeat`` times each after a warm-up of each,
with the search's split (GPU waits, host work, launches).  The hits must be
identical (exit 1 otherwise).  The kernel alone is timed too, with CUDA events, on
one block of 500 rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--subjects", type=int, default=6589)
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--queries-n", type=int, default=2000)
    ap.add_argument("--keep", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from numba import cuda

    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.kernels import gpu
    from swgpu_tools.kernels.gpu import batched, cache
    from swgpu_tools.kernels.topk import segment_places
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    db = read_fasta(args.db)
    qs = read_fasta(args.queries)
    pick = np.sort(np.random.default_rng(1).choice(len(db), args.subjects, replace=False))
    db = db.subset(pick)
    qs = SequenceSet.from_pairs(
        [(f"q{k}", qs.sequence(k % len(qs))) for k in range(args.queries_n)]
    )
    edb, eqs = scheme.encode(db), scheme.encode(qs)
    segs = np.linspace(0, len(db), args.segments + 1).astype(np.int64)
    s = gpu.GpuSearcher.from_scheme(edb, scheme)
    s.batch = True
    out = {"subjects": len(db), "segments": segs.tolist(), "queries": len(qs), "keep": args.keep}
    hits, times, splits = {}, {"0": [], "1": []}, {"0": [], "1": []}
    for rep in range(args.repeat + 1):  # the first of each: a warm-up
        for flag in ("0", "1"):
            os.environ["SWGPU_GPU_TOPK"] = flag
            t = time.perf_counter()
            th = s.search(eqs, args.keep, segments=segs)
            dt = time.perf_counter() - t
            assert s.topk_on_gpu == (flag == "1")
            hits[flag] = th
            if rep:
                times[flag].append(round(dt, 4))
                splits[flag].append({k: round(v, 4) for k, v in s.batch_seconds.items()})
    a, b = hits["0"], hits["1"]
    same = bool(
        len(a) == len(b)
        and (a.query_index == b.query_index).all()
        and (a.subject_index == b.subject_index).all()
        and (a.score == b.score).all()
    )
    for flag, name in (("0", "host"), ("1", "GPU")):
        print(f"choice on the {name}: {times[flag]} s; last split {splits[flag][-1]}")
    # the kernel alone: one block of 500 rows of random scores
    m, n = 500, len(db)
    block = np.random.default_rng(2).integers(0, 200, m * n).astype(np.int32)
    offs = segment_places(segs, args.keep)
    per = int(offs[-1])
    d_block, d_segs, d_offs = cuda.to_device(block), cuda.to_device(segs), cuda.to_device(offs)
    dc, dv = cuda.device_array(m * per, np.int32), cuda.device_array(m * per, np.int32)
    kern = cache.aux().segment_topk_kernel
    grid = m * (len(segs) - 1)
    kern[grid, batched.TOPK_THREADS](d_block, n, d_segs, d_offs, args.keep, dc, dv)
    e0, e1 = cuda.event(), cuda.event()
    e0.record()
    for _ in range(10):
        kern[grid, batched.TOPK_THREADS](d_block, n, d_segs, d_offs, args.keep, dc, dv)
    e1.record()
    e1.synchronize()
    kernel_ms = cuda.event_elapsed_time(e0, e1) / 10
    print(f"segment_topk_kernel on {m} x {n} ({len(segs) - 1} segments): {kernel_ms:.3f} ms")
    print(f"hits identical: {same}")
    out.update(times=times, splits=splits, identical=same, kernel_ms_500_rows=kernel_ms)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
