#!/usr/bin/env python3
"""Chains of short queries (kernels/gpu/chains.py): scan speed by chain size.

    python benchmarks/chain_rows_bench.py --db bench_db.fasta --queries bench_queries.fasta \
        [--extra q500.fasta] [--shard 0/4,all] [--rows b,0,2048,4096,8192,16384] [--json out.json]

For each database (``--shard`` as gpu_bench.py's) and each chain size (``--rows``:
:data:`chains.CHAIN_ROWS`; 0 = no chains, every query alone) it times, on one searcher
(database resident), a screen of the shortest query of ``--queries`` as many copies of
itself (``--short-copies``), the longest as ``--long-copies`` copies (the reference:
its speed does not depend on chains), and each ``--extra`` file as it is.  A ``--rows``
entry ``b`` times the batched path instead (many queries per launch, ``batch=True``);
every other entry the one-unit-at-a-time path (``batch=False``).  GCUPS =
cells / wall clock of the whole search (median of ``--repeat`` after one warm-up);
the hits of every chain size must equal those of the first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_bench import _load, _shard  # noqa: E402


def _copies(eqs, qi, k):
    q = eqs.codes[eqs.offsets[qi] : eqs.offsets[qi + 1]]
    return eqs.__class__(np.tile(q, k), np.arange(k + 1, dtype=np.int64) * len(q))


def _time(s, batch, top_k, repeat):
    s.search(batch, top_k)  # warm-up (plans, kernels)
    walls, hits = [], None
    for _ in range(repeat):
        h = s.search(batch, top_k)
        walls.append(s.scan_seconds)
        hits = h
    key = (hits.query_index.tolist(), hits.subject_index.tolist(), hits.score.tolist())
    return float(np.median(walls)), key, len(getattr(s, "units", None) or [])


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--extra", action="append", default=[])
    ap.add_argument("--shard", default="0/4,all")
    ap.add_argument("--rows", default="b,0,2048,4096,8192,16384")
    ap.add_argument("--short-copies", type=int, default=280)
    ap.add_argument("--long-copies", type=int, default=10)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()

    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.kernels import gpu
    from swgpu_tools.kernels.gpu import chains

    scheme, db_all, qs, edb_all, eqs = _load(args.db, args.queries)
    lens = np.diff(eqs.offsets)
    short, long_ = int(np.argmin(lens)), int(np.argmax(lens))
    sets = [
        (f"{qs.ids[short]} x{args.short_copies}", _copies(eqs, short, args.short_copies)),
        (f"{qs.ids[long_]} x{args.long_copies}", _copies(eqs, long_, args.long_copies)),
    ]
    for path in args.extra:
        sets.append((os.path.basename(path), scheme.encode(read_fasta(path), path)))
    rows_list = args.rows.split(",")
    out = {"args": vars(args), "results": []}
    for spec in args.shard.split(","):
        db, edb = _shard(db_all, edb_all, spec)
        residues = int(edb.offsets[-1])
        t0 = time.perf_counter()
        s = gpu.GpuSearcher.from_scheme(edb, scheme)
        print(
            f"=== {spec}: {len(edb)} sequences, {residues} residues; mode {s.mode}; "
            f"upload {time.perf_counter() - t0:.2f} s",
            flush=True,
        )
        ref = {}
        for name, batch in sets:
            cells = int(batch.offsets[-1]) * residues
            line = [f"{name:<24}"]
            for cr in rows_list:
                s.batch = cr == "b"  # the batched path (kernels/gpu/batched.py)
                if cr == "0":
                    os.environ["SWGPU_CHAINS"] = "0"
                elif cr != "b":
                    os.environ.pop("SWGPU_CHAINS", None)
                    chains.CHAIN_ROWS = int(cr)
                wall, key, nunits = _time(s, batch, args.top_k, args.repeat)
                same = ref.setdefault(name, key) == key
                g = cells / wall / 1e9
                what = "batched" if cr == "b" else f"{nunits} units"
                line.append(f"{cr}: {g:7.1f} ({what}){'' if same else ' HITS DIFFER'}")
                out["results"].append(
                    {
                        "database": spec,
                        "set": name,
                        "chain_rows": cr,
                        "wall_s": wall,
                        "gcups": g,
                        "units": nunits,
                        "hits_equal_first": same,
                    }
                )
            print("  " + " | ".join(line), flush=True)
            os.environ.pop("SWGPU_CHAINS", None)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
