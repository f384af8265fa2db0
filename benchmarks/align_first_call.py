"""The traceback's first alignment call in a new process, as rule finish makes it.

    python benchmarks/align_first_call.py RESULTS_DIR QUERIES [--threads 16] [--scores]

For the hits of a finished run (RESULTS_DIR/hits.tsv, its shards), in a process
forked the way the warm-start process forks a job (the parent imported the
traceback step and, with ``--preload``, loaded its kernels:
``alignment.warmup.load_hits_kernels``), times ``align_many`` three times and
the making of the Alignment objects, and prints them.  Where the first call
costs more than the others, the difference is the process's first-call cost.
``--scores``: the calls get the hits' scores (``align_many(..., scores=)``), as the
traceback step passes them; each call prints a digest of its alignments.
"""

from __future__ import annotations

import argparse
import glob
import os
import time

import numpy as np


def child(results: str, queries_path: str, threads: int, scores: bool) -> None:
    import hashlib

    from swgpu_tools.alignment import align_many
    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.steps.traceback import load_subjects, read_hits

    scheme = ScoringScheme()
    hits = read_hits(os.path.join(results, "hits.tsv"))
    queries = read_fasta(queries_path)
    shards = sorted(glob.glob(os.path.join(results, "shards", "shard-*.swdb")))
    t = time.perf_counter()
    subjects = load_subjects(shards, set(hits["sacc"]))
    print(f"  subjects read: {time.perf_counter() - t:.3f} s ({len(hits):,} hits)")
    # writable copies, as the step passes them (pandas hands out read-only arrays: another
    # Numba type, another compiled specialization)
    qi = hits["qacc"].map({q: i for i, q in enumerate(queries.ids)}).to_numpy(np.int64).copy()
    si = hits["sacc"].map({s: i for i, s in enumerate(subjects.ids)}).to_numpy(np.int64).copy()
    q, s = scheme.encode(queries, "queries"), scheme.encode(subjects, "database")
    known = hits["score"].to_numpy(np.int64) if scores else None
    for k in range(3):
        t = time.perf_counter()
        got = align_many(
            q, s, qi, si, scheme.matrix, 11, 1, threads=threads, backend="cpu", scores=known
        )
        dt = time.perf_counter() - t
        digest = hashlib.sha1(repr(got).encode()).hexdigest()[:12]
        print(f"  align_many call {k + 1}: {dt:.3f} s (scores given: {scores}; {digest})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("queries")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--scores", action="store_true", help="give align_many the hits' scores")
    args = ap.parse_args()
    import swgpu_tools.steps.traceback  # noqa: F401  (as the warm process's generation)

    for preload in (False, True):
        if preload:
            from swgpu_tools.alignment.warmup import load_hits_kernels

            t = time.perf_counter()
            print(
                f"kernels loaded in the parent: {load_hits_kernels()}, {time.perf_counter() - t:.3f} s"
            )
        pid = os.fork()
        if pid == 0:
            print(f"child, preloaded {preload}:", flush=True)
            try:
                child(args.results, args.queries, args.threads, args.scores)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
