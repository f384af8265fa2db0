"""Cold start of the CPU kernels (issue 11.5): Numba compile time with an empty cache.

Each measurement runs in a fresh Python process whose Numba cache folder is
new and empty (so everything compiles), then again with that folder filled
(so everything loads):

* search: ``kernels.cpu.search`` of 3 queries against 2,000 uniprot20k
  sequences (top 60), the scoring step's first call;
* hits: ``align_many`` of those hits (database hits, local mode: the
  traceback step's first call);
* pairs: ``align_pairs`` of 50 protein pairs in local mode (``swgpu align``);
* precompile: ``kernels.cpu.precompile()`` + ``align.precompile()`` (new code only).

The run time of the work itself is tiny (well under a second warm), so the
first-call figures are compile (or cache load) time.  Compare versions with
PYTHONPATH (as benchmarks/align_dump.py):

    .venv/bin/python benchmarks/align_cold_start.py
    PYTHONPATH=/tmp/base .venv/bin/python benchmarks/align_cold_start.py --no-precompile
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import swgpu_tools
try:
    from swgpu_tools.io.fasta import read_fasta
except ImportError:  # an older tree
    from swgpu_tools.fasta import read_fasta
from swgpu_tools.scoring import ScoringScheme
try:
    from swgpu_tools.alignment import align_many, align_pairs
except ImportError:
    from swgpu_tools.alignment import align_many, align_pairs
from swgpu_tools.kernels import cpu
out = {"import_s": time.perf_counter() - t0, "swgpu_tools": swgpu_tools.__file__}
s = ScoringScheme("BLOSUM62", 11, 1)
q = s.encode(read_fasta(sys.argv[1]).subset(np.arange(3)))
d = s.encode(read_fasta(sys.argv[2]).subset(np.arange(2000)))
t = time.perf_counter()
hits = cpu.search(q, d, s.matrix, 11, 1, 60)
out["search_s"] = time.perf_counter() - t
t = time.perf_counter()
align_many(q, d, hits.query_index, hits.subject_index, s.matrix, 11, 1, backend="cpu")
out["hits_s"] = time.perf_counter() - t
pieces = [d.codes[d.offsets[i]:d.offsets[i + 1]] for i in range(100)]
t = time.perf_counter()
align_pairs(list(zip(pieces[:50], pieces[50:])), s.matrix, 11, 1, mode="local", backend="cpu")
out["pairs_s"] = time.perf_counter() - t
if sys.argv[3] == "1":
    import swgpu_tools.alignment as A
    out["is_compiled_before_precompile"] = [cpu.is_compiled(), A.is_compiled("hits"),
                                            A.is_compiled("pairs")]
    t = time.perf_counter()
    out["precompile_search_s"] = cpu.precompile()["seconds"]
    out["precompile_align_s"] = A.precompile()["seconds"]
    out["precompile_s"] = time.perf_counter() - t
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", default="/work/shared/data/oracle_queries.fasta")
    ap.add_argument("--db", default="/work/shared/data/uniprot20k.fasta.gz")
    ap.add_argument("--no-precompile", action="store_true", help="(code without precompile)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, SWGPU_CACHE_DIR=os.path.join(tmp, "cache"))
        env.pop("NUMBA_CACHE_DIR", None)
        for state in ("cold", "warm"):
            t = time.perf_counter()
            r = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    args.queries,
                    args.db,
                    "0" if args.no_precompile or state == "cold" else "1",
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            if r.returncode != 0:
                sys.exit(r.stderr)
            row = json.loads(r.stdout.strip().splitlines()[-1])
            row.update(state=state, process_s=time.perf_counter() - t)
            print(json.dumps(row), flush=True)
            rows.append(row)
        if not args.no_precompile:  # precompile into an empty cache
            env["SWGPU_CACHE_DIR"] = os.path.join(tmp, "cache2")
            code = (
                "import time, json; t = time.perf_counter(); from swgpu_tools.kernels import "
                "cpu; import swgpu_tools.alignment as A; a = cpu.precompile()['seconds']; "
                "b = A.precompile()['seconds']; print(json.dumps({'state': 'precompile "
                "into an empty cache', 'search_s': a, 'align_s': b, 'total_s': "
                "time.perf_counter() - t}))"
            )
            r = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            )
            row = json.loads(r.stdout.strip().splitlines()[-1])
            print(json.dumps(row), flush=True)
            rows.append(row)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
    }
    print(json.dumps(meta))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
