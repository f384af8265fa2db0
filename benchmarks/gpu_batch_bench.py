#!/usr/bin/env python3
"""Many queries per launch (kernels/gpu/batched.py) against qp2 (two queries per register,
kernels/gpu/qp2.py) and one query at a time (s16), on a subject set of a given size: a
re-scan's new and changed sequences, or a shard.

    python benchmarks/gpu_batch_bench.py --db bench_db.fasta --queries q.fasta \
        [--subjects 1663] [--queries-n 2000] [--top-k 510] [--repeat 2] \
        [--paths batched,qp2,s16] [--preload] [--json out.json]

The subject set is ``--subjects`` entries of ``--db`` picked at random (seed 1; all
of it with 0), the queries the first ``--queries-n`` of ``--queries`` (repeated
if the file has fewer).  Every path searches the same uploaded database
(``GpuSearcher`` with ``batch=True``; ``batch=False, qp2=True``; ``batch=False,
qp2=False``), each timed ``--repeat`` times after a warm-up search (kernels loaded),
and the best time is reported with its GCUPS (query residues x subject residues /
seconds / 1e9), and which path the searcher's own choice ('auto') takes.  The paths'
top hits must be identical (exit 1 otherwise).

The first (warm-up) search of each path is timed too (``first_s``; for batched its
split), after ``--preload``: the batched kernels loaded first as a re-scan's job
loads them (``preload_kernels(scheme, batched=True)``), which shows what a first
launch still costs (run it with ``CUDA_MODULE_LOADING=EAGER`` to compare).
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
        name = cuda.get_current_device().name
    except Exception:  # the simulator
        return "none"
    return name.decode() if isinstance(name, bytes) else str(name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--subjects", type=int, default=1663)
    ap.add_argument("--queries-n", type=int, default=2000)
    ap.add_argument("--top-k", type=int, default=510)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--paths", default="batched,s16", help="of batched, qp2b, qp2, s16")
    ap.add_argument(
        "--segments",
        type=int,
        default=0,
        help="score by this many equal segments of subjects (a re-scan's shards: each "
        "segment's top k; batched paths only)",
    )
    ap.add_argument("--json", default=None)
    ap.add_argument("--preload", action="store_true", help="load the batched kernels first")
    ap.add_argument(
        "--blocks",
        default="",
        help="batched path: also time these query blocks a search is cut into "
        "(kernels/gpu/batched.BLOCKS, a comma list; hits checked equal)",
    )
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
    if args.preload:
        from swgpu_tools.kernels.gpu.backend import preload_kernels

        t = time.perf_counter()
        out["preloaded"] = preload_kernels(scheme, batched=True)
        out["preload_s"] = time.perf_counter() - t
        print(f"preloaded {out['preloaded']} batched kernels in {out['preload_s']:.3f} s")
    s = gpu.GpuSearcher.from_scheme(edb, scheme)
    out["mode"] = s.mode
    # the searcher's own choice ('auto'; its one-unit-at-a-time path is s16's)
    path = s.path(np.diff(eqs.offsets))
    if path == "batched":  # the batched kernels, or qp2 a tile a block (qp2_blocks.py)
        from swgpu_tools.kernels.gpu import qp2_blocks

        path = "qp2b" if qp2_blocks.wanted(s, np.diff(eqs.offsets)) else path
    out["auto"] = {"units": "s16"}.get(path, path)
    settings = {
        "batched": (True, False),
        "qp2b": (True, True),
        "qp2": (False, True),
        "s16": (False, False),
    }
    segments = None
    if args.segments:
        segments = np.linspace(0, len(db), args.segments + 1).astype(np.int64)
        out["segments"] = args.segments
    hits = {}
    for key in args.paths.split(","):
        s.batch, s.qp2 = settings[key]

        def run():
            if segments is None:
                return s.search(eqs, args.top_k)
            return s.search(eqs, args.top_k, segments=segments)

        t = time.perf_counter()
        hits[key] = run()  # warm-up: kernels loaded, plans made
        first = time.perf_counter() - t
        print(
            f"{key}: first search {first:.3f} s"
            + (f" {dict(s.batch_seconds)}" if key == "batched" else ""),
            flush=True,
        )
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        best = min(times)
        out[key] = {"seconds": times, "gcups": cells / best / 1e9, "first_s": first}
        if key == "qp2b":  # the plan, and the kernel's own time (events around its launch)
            out[key]["plan"] = dict(getattr(s, "qp2_blocks_plan", {}))
            out[key]["split"] = dict(s.batch_seconds)
            print(f"  {out[key]['plan']} {s.batch_seconds}", flush=True)
        if key == "batched":  # the last search's split: GPU wait, host top-k, launching
            out[key]["split"] = dict(s.batch_seconds)
            print(f"  {s.batch_seconds}", flush=True)
        if key == "qp2" and s.tile_seconds:  # the last search's tiles, timed on the GPU
            # (events around each launch): the kernel's own rate on this subject set,
            # apart from the host's per-tile work between launches (GPU-NOTES.md, "qp2
            # for a re-scan's delta")
            ts = np.asarray(s.tile_seconds)
            out[key]["tiles"] = {
                "count": len(ts),
                "gpu_s": float(ts.sum()),
                "median_s": float(np.median(ts)),
                "max_s": float(ts.max()),
                "gcups_gpu": cells / float(ts.sum()) / 1e9,
            }
            print(
                f"  qp2 tiles: {len(ts)}, GPU {ts.sum():.3f} s (median {np.median(ts) * 1e3:.2f} ms, "
                f"max {ts.max() * 1e3:.2f} ms a tile): {cells / ts.sum() / 1e9:.1f} GCUPS on the "
                f"GPU alone; the rest of the search {times[-1] - ts.sum():.3f} s",
                flush=True,
            )
        print(
            f"{key}: {best:.3f} s ({', '.join(f'{t:.3f}' for t in times)}), "
            f"{cells / best / 1e9:.1f} GCUPS",
            flush=True,
        )
    if args.blocks and "batched" in hits:
        from swgpu_tools.kernels.gpu import batched

        default = batched.BLOCKS
        s.batch, s.qp2 = settings["batched"]
        out["blocks"] = {}
        for b in [int(x) for x in args.blocks.split(",")]:
            batched.BLOCKS = b
            got = s.search(eqs, args.top_k)  # (plans of other block sizes made here)
            times = []
            for _ in range(max(args.repeat, 3)):
                t = time.perf_counter()
                s.search(eqs, args.top_k)
                times.append(time.perf_counter() - t)
            ref = hits["batched"]
            same = (got.score == ref.score).all() and (got.subject_index == ref.subject_index).all()
            out["blocks"][b] = {
                "seconds": times,
                "split": dict(s.batch_seconds),
                "same": bool(same),
            }
            print(
                f"batched, BLOCKS={b} ({s.batch_seconds.get('blocks')} blocks): "
                f"{min(times):.3f} s ({', '.join(f'{t:.3f}' for t in times)}), "
                f"{cells / min(times) / 1e9:.1f} GCUPS, hits same: {bool(same)}",
                flush=True,
            )
        batched.BLOCKS = default
    keys = list(hits)
    a = hits[keys[0]]
    same = all(
        len(a) == len(b)
        and (a.query_index == b.query_index).all()
        and (a.subject_index == b.subject_index).all()
        and (a.score == b.score).all()
        for b in (hits[k] for k in keys[1:])
    )
    out["identical_hits"] = bool(same)
    best = {k: min(out[k]["seconds"]) for k in keys}
    print(
        f"{len(db):,} subjects ({out['subject_residues']:,} residues) x {len(qs):,} queries "
        f"({out['query_residues']:,} residues), mode {s.mode}: "
        + ", ".join(f"{k} {best[k]:.3f} s" for k in keys)
        + f"; fastest {min(best, key=best.get)}; auto takes {out['auto']}; "
        f"hits identical: {same}",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
