"""Copy a finished run's traceback inputs out of it: its hits and their subjects only.

    python benchmarks/traceback_inputs_dump.py RESULTS_DIR OUT_DIR

Writes OUT_DIR/hits.tsv (the run's) and OUT_DIR/subjects.fasta (every subject the hits
name, read from RESULTS_DIR/shards), so that the traceback step's alignments of a GPU
host's run (bench200M: a 200 MB database) can be profiled elsewhere with the queries.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys


def main() -> None:
    results, out = sys.argv[1], sys.argv[2]
    from swgpu_tools.steps.traceback import load_subjects, read_hits

    os.makedirs(out, exist_ok=True)
    hits = read_hits(os.path.join(results, "hits.tsv"))
    shards = sorted(glob.glob(os.path.join(results, "shards", "shard-*.swdb")))
    subjects = load_subjects(shards, set(hits["sacc"]))
    shutil.copy(os.path.join(results, "hits.tsv"), os.path.join(out, "hits.tsv"))
    with open(os.path.join(out, "subjects.fasta"), "w") as fh:
        for i, sid in enumerate(subjects.ids):
            fh.write(f">{sid}\n{subjects.sequence(i)}\n")
    print(f"{len(hits):,} hits, {len(subjects):,} subjects -> {out}")


if __name__ == "__main__":
    main()
