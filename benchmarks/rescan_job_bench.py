"""The re-scan's scoring job alone, timed (host costs of issue 12's incremental job).

    python benchmarks/rescan_job_bench.py --v1 v1.fasta --v2 v2.fasta --queries q.fasta \
        --shards 4 --workdir /tmp/rjb --backend cpu --repeat 3

Shards both releases (once; kept in the work folder), scores v1 from scratch to
make its states (once), then ``--repeat`` times: copies the v1 states and runs
``score_shard`` on v2's shards, printing the job's phases and each shard's
phases from its statistics file.  For profiling a change to the scoring job
without the workflow around it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swgpu_tools.scoring import ScoringScheme  # noqa: E402
from swgpu_tools.steps.score_shard import score_shard  # noqa: E402
from swgpu_tools.steps.shard_db import shard_database  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--v1", required=True)
    ap.add_argument("--v2", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--workdir", default="/tmp/rjb")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--top-k", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    w = Path(args.workdir)
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    paths = {}
    for rel in ("v1", "v2"):
        d = w / rel
        if not (d / "database.json").exists():
            shard_database(getattr(args, rel), d, args.shards)
        paths[rel] = [d / f"shard-{i:04d}.swdb" for i in range(args.shards)]
    s1 = w / "state_v1"
    if not (s1 / "done").exists():
        s1.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        score_shard(
            paths["v1"],
            args.queries,
            w / "hits_v1.npz",
            scheme,
            args.top_k,
            args.backend,
            state_path=[s1 / f"shard-{i:04d}.npz" for i in range(args.shards)],
        )
        print(f"v1 from scratch: {time.perf_counter() - t:.2f} s")
        (s1 / "done").write_text("")
    for r in range(args.repeat):
        s = w / "state"
        shutil.rmtree(s, ignore_errors=True)
        shutil.copytree(s1, s)
        t = time.perf_counter()
        score_shard(
            paths["v2"],
            args.queries,
            w / "hits_v2.npz",
            scheme,
            args.top_k,
            args.backend,
            stats_path=w / "stats.json",
            state_path=[s / f"shard-{i:04d}.npz" for i in range(args.shards)],
        )
        wall = time.perf_counter() - t
        st = json.loads((w / "stats.json").read_text())
        print(f"run {r}: {wall:.2f} s; phases {st['phases_s']}; kernel_s {st['kernel_s']:.3f}")
        for sh in st.get("shards", [st]):
            print(
                f"   {sh['shard']}: scan_s {sh['scan_s']:.3f} kernel_s {sh['kernel_s']:.3f} "
                f"{sh.get('scan_phases_s', '')}"
            )


if __name__ == "__main__":
    main()
