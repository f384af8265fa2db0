"""The traceback's subjects read (``steps.traceback.load_subjects``) on real shards.

    swgpu shard bench_db.fasta --shards 4 --out-dir SHARDS
    python benchmarks/subjects_bench.py SHARDS [--wanted 1000 15000 60000] [--repeat 5]

Takes random accessions of the shards (seed 1) and times reading their records from
every shard, median and min of ``--repeat`` calls each, checking that exactly the
wanted records come back.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import time

from swgpu_tools.io.shardfile import read_shard
from swgpu_tools.steps.traceback import load_subjects


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shards", help="folder of shard-NNNN.swdb files")
    ap.add_argument("--wanted", type=int, nargs="+", default=[1000, 15000, 60000])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(args.shards, "shard-*.swdb")))
    ids = [a for p in paths for a in read_shard(p, headers=False).ids]
    random.seed(1)
    for n in args.wanted:
        wanted = set(random.sample(ids, n))
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            got = load_subjects(paths, wanted)
            times.append(time.perf_counter() - t)
        assert sorted(got.ids) == sorted(wanted)
        times.sort()
        print(f"{n:>7,} wanted: median {times[len(times) // 2]:.3f} s, min {times[0]:.3f} s")


if __name__ == "__main__":
    main()
