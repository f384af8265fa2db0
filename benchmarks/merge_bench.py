"""The merge step on a synthetic re-scan-sized input, without a GPU.

    python benchmarks/merge_bench.py --queries 2000 --shards 4 --top-k 500 --repeat 5 [--threads N]

Makes one scoring job's hit table as the workflow writes it (``results/hits/
shard-0000-0003.npz``: each shard's top ``--top-k`` hits per query, one sorted run
per shard) for bench200M's sizes (439,226 subjects, 2e8 residues), with scores
drawn so that about a dozen hits per query pass E <= 10 (as bench200M's planted
hits do), then times :func:`swgpu_tools.steps.merge_hits.merge_hits` on it (in
this process, after one warm-up call) and prints its phases.  ``--check FILE``
also writes hits.tsv there, to compare two versions' tables.

``--threads 1,4,16`` and ``--kth runs,sort`` time each combination in turn: ``sort``
finds each query's k-th score by sorting all rows (``engine.merge.MAX_RUNS = 0``, as
before the run search), ``runs`` by the binary search over sorted runs.

``--candidates``: the table as a job now writes it (``engine.merge.candidates``: only
each shard's rows at or above the query's k-th best score over the job's shards).

``--cut``: first times a scoring job's joint cut of its shards
(:func:`swgpu_tools.engine.merge.top_k_of`, ``--threads``), its candidate rows
(:func:`swgpu_tools.engine.merge.candidates`) and the cut of those, which a job of several
shards does only past ``CUT_ROWS`` candidate rows (``steps/score_shard._joint_cut``), and
checks that both cuts give the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from swgpu_tools.io.hitsfile import ShardHits, concat_shard_hits, write_shard_hits
from swgpu_tools.io.shardfile import shard_of
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.steps.merge_hits import merge_hits


def make_inputs(
    folder: str, n_queries: int, n_shards: int, top_k: int, seed: int = 1, keep: bool = False
):
    rng = np.random.default_rng(seed)
    n_sub = 439_226
    accs = [f"A{rng.integers(0, 36**5):07X}{i}" for i in range(n_sub)]
    slen = rng.integers(50, 1200, n_sub).astype(np.int64)
    shard = np.array([shard_of(a, n_shards) for a in accs])
    qids = [f"Q{i:05d}" for i in range(n_queries)]
    qlens = rng.integers(80, 900, n_queries)
    with open(os.path.join(folder, "queries.fasta"), "w") as fh:
        for qid, n in zip(qids, qlens):
            fh.write(f">{qid}\n{'A' * int(n)}\n")
    with open(os.path.join(folder, "database.json"), "w") as fh:
        json.dump({"residues": 200_000_000, "sequences": n_sub}, fh)
    parts = []
    for k in range(n_shards):
        mine = np.flatnonzero(shard == k)
        order = np.argsort(np.array([accs[i] for i in mine]))  # a shard's accession order
        mine = mine[order]
        q, s, score = [], [], []
        for qi in range(n_queries):
            pick = np.sort(rng.choice(len(mine), top_k, replace=False))
            sc = rng.gumbel(28, 4, top_k).astype(np.int64)  # background scores
            planted = rng.random(top_k) < 3.0 / top_k  # a few strong hits per shard
            sc[planted] += rng.integers(40, 400, planted.sum())
            o = np.lexsort((pick, -sc))  # best first, ties in accession order
            q.append(np.full(top_k, qi))
            s.append(pick[o])
            score.append(sc[o])
        used = mine
        parts.append(
            ShardHits(
                qids,
                np.concatenate(q).astype(np.int32),
                np.concatenate(s).astype(np.int32),
                np.concatenate(score).astype(np.int32),
                [accs[i] for i in used],
                [f"sp|{accs[i]}|X_HUMAN protein {i}" for i in used],
                slen[used],
            )
        )
    path = os.path.join(folder, "shard-0000-%04d.npz" % (n_shards - 1))
    if keep:  # as the job writes them now: only the rows that may take a place
        from swgpu_tools.engine.merge import candidates

        t = time.perf_counter()
        kept = candidates(parts, top_k)
        print(
            f"candidates: {sum(len(p) for p in kept):,} of {sum(len(p) for p in parts):,} rows "
            f"in {time.perf_counter() - t:.3f} s"
        )
        write_shard_hits(path, concat_shard_hits(kept))
        return path, parts
    write_shard_hits(path, concat_shard_hits(parts))
    return path, parts


def time_cut(parts, queries_fasta: str, top_k: int, threads: int, repeat: int) -> None:
    """The joint cut of ``parts`` (:func:`top_k_of`), the candidates alone
    (:func:`candidates`) and the cut of the candidates (what a job cutting its shards
    does since the forty-first session), whose table must be the same."""
    from swgpu_tools.engine.merge import candidates, top_k_of
    from swgpu_tools.io.fasta import read_fasta

    queries = read_fasta(queries_fasta)
    ways = {
        "cut": lambda: top_k_of(parts, queries, top_k, threads=threads),
        "candidates": lambda: candidates(parts, top_k),
        "candidates, then cut": lambda: top_k_of(
            candidates(parts, top_k), queries, top_k, threads=threads
        ),
    }
    got = {}
    for name, way in ways.items():
        times = []
        for _ in range(repeat + 1):
            t = time.perf_counter()
            got[name] = way()
            times.append(time.perf_counter() - t)
        out = got[name]
        rows = sum(len(p) for p in out) if isinstance(out, list) else len(out)
        print(
            f"{name} of {sum(len(p) for p in parts):,} rows -> {rows:,}, threads {threads}: "
            f"median {sorted(times[1:])[len(times[1:]) // 2]:.3f} s, min {min(times[1:]):.3f} s"
        )
    a, b = got["cut"], got["candidates, then cut"]
    same = (
        a.queries == b.queries
        and all(np.array_equal(x, y) for x, y in ((a.q, b.q), (a.score, b.score)))
        and [a.subjects[i] for i in a.s] == [b.subjects[i] for i in b.s]
    )
    print(f"the cut of the candidates is the cut of every row: {same}")
    if not same:
        raise SystemExit("the two cuts differ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--top-k", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--check", default=None, help="write hits.tsv here")
    ap.add_argument(
        "--threads", default=None, help="merge threads, a comma list (default: all CPUs)"
    )
    ap.add_argument("--kth", default="runs", help="runs, sort or both: runs,sort")
    ap.add_argument(
        "--candidates",
        action="store_true",
        help="the table as a job writes it: each shard's rows that may take a place",
    )
    ap.add_argument("--cut", action="store_true", help="time the scoring job's joint cut first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        table, parts = make_inputs(d, args.queries, args.shards, args.top_k, keep=args.candidates)
        print(f"inputs made in {time.perf_counter() - t:.1f} s")
        from swgpu_tools.engine import merge as merge_module

        runs_limit = merge_module.MAX_RUNS
        all_cpus = len(os.sched_getaffinity(0))
        thread_list = [int(t) for t in args.threads.split(",")] if args.threads else [None]
        if args.cut:
            time_cut(
                parts, os.path.join(d, "queries.fasta"), args.top_k,
                thread_list[0] or all_cpus, args.repeat,
            )  # fmt: skip
        out = args.check or os.path.join(d, "hits.tsv")
        stats = os.path.join(d, "merge.json")
        for kth in args.kth.split(","):
            merge_module.MAX_RUNS = {"runs": runs_limit, "sort": 0}[kth]
            for threads in thread_list:
                times = []
                for rep in range(args.repeat + 1):
                    t = time.perf_counter()
                    merge_hits(
                        [table], os.path.join(d, "queries.fasta"),
                        os.path.join(d, "database.json"), out, ScoringScheme(),
                        top_k=args.top_k, max_evalue=10.0, stats_path=stats, threads=threads,
                    )  # fmt: skip
                    if rep:
                        times.append(time.perf_counter() - t)
                        rec = json.load(open(stats))
                        print(f"run {rep}: {times[-1]:.3f} s, phases {rec['phases_s']}")
                print(
                    f"merge_hits of {rec['shard_hits']:,} shard hits -> {rec['hits']:,} hits, "
                    f"k-th by {kth}, threads {threads or all_cpus}: "
                    f"median {sorted(times)[len(times) // 2]:.3f} s, min {min(times):.3f} s"
                )


if __name__ == "__main__":
    main()
