"""Peak memory and time of one long global alignment (bounded-memory traceback).

Each configuration runs in a fresh child process, which reports its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) twice: after imports, Numba
compilation and a small warm-up alignment (the baseline), and after the long
alignment.  The pair: a 40,000-residue protein made of concatenated UniProt
template sequences, and a mutated copy (~70% identity, ~2% indels) cut to
40,000 residues; BLOSUM62, gaps 11 + k; mode global.  The alignment is checked
by re-scoring its operations.

    .venv/bin/python benchmarks/align_long_memory.py --length 40000 \
        --cell-limits 200000000,50000000 --modes global
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from align_pairs_bench import mutate, uniprot_templates
from swgpu_tools.alignment import align
from swgpu_tools.alignment.traceback import checkpoint_plan
from swgpu_tools.scoring import ScoringScheme

length, limit, mode, template = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
s = ScoringScheme("BLOSUM62", 11, 1)
rng = np.random.default_rng(40)
temps = uniprot_templates(template)
parts, total = [], 0
while total < length:
    t = temps[int(rng.integers(len(temps)))]
    parts.append(t)
    total += len(t)
a = "".join(parts)[:length]
b = mutate(rng, a, "ARNDCQEGHILKMFPSTWYV", 0.30, 0.02)[:length]
enc = lambda x: s.codes_of_letters[np.frombuffer(x.encode(), np.uint8)].astype(np.uint8)
q, d = enc(a), enc(b)
align(q[:300], d[:300], s.matrix, 11, 1, mode=mode, cell_limit=5000)  # compile + warm up
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
aln = align(q, d, s.matrix, 11, 1, mode=mode, cell_limit=limit)
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ops = np.frombuffer(aln.operations, np.uint8)
# re-score the operations
M = s.matrix
i, j, score, prev = aln.query_start, aln.subject_start, 0, 0
for op in ops:
    if op == 77:
        score += int(M[q[i], d[j]]); i += 1; j += 1
    elif op == 73:
        score -= 1 + (11 if prev != 73 else 0); i += 1
    else:
        score -= 1 + (11 if prev != 68 else 0); j += 1
    prev = op
rb, depth, K = checkpoint_plan(len(q), len(d), limit)
print("RESULT " + json.dumps({
    "length": length, "mode": mode, "cell_limit": limit, "seconds": dt,
    "baseline_rss_mb": base / 1024, "peak_rss_mb": peak / 1024,
    "score": aln.score, "rescored_ok": score == aln.score, "columns": int(len(ops)),
    "plan": {"rows_per_block": rb, "levels": depth, "checkpoints_per_level": K}}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--length", type=int, default=40_000)
    ap.add_argument("--cell-limits", default="200000000,50000000")
    ap.add_argument("--modes", default="global")
    ap.add_argument("--template", default=str(ROOT.parent / "shared/data/uniprot20k.fasta.gz"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for mode in args.modes.split(","):
        for limit in args.cell_limits.split(","):
            p = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(ROOT),
                    str(args.length),
                    limit,
                    mode,
                    args.template,
                ],
                capture_output=True,
                text=True,
                env=dict(os.environ, NUMBA_NUM_THREADS="1"),
            )
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if p.returncode or not line:
                print(p.stdout, p.stderr, file=sys.stderr)
                raise SystemExit(f"child failed for {mode} {limit}")
            row = json.loads(line[0][7:])
            print(json.dumps(row), flush=True)
            rows.append(row)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
    }
    print(json.dumps(meta))
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
