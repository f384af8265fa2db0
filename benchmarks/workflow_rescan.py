"""Incremental re-scan versus scratch scan with the Snakemake workflow.

    .venv/bin/python benchmarks/workflow_rescan.py --database ../shared/data/uniprot20k.fasta.gz \
        --queries ../shared/data/oracle_queries.fasta --shards 16 --workdir /tmp/rescan

Makes release v2 of the database by changing a fraction of its entries (half
of them substituted at one position, a quarter removed, a quarter added as
mutated copies under new ids), then times, with backend cpu:

  1. scratch scan of v1            (folder v1then2)
  2. incremental re-scan to v2     (same folder, config.database -> v2)
  3. scratch scan of v2            (folder v2)

and reports the jobs each run executed and whether the tables of 2 and 3 are
byte-identical.  A second change set (--small-fraction) shows the other end.
"""
from __future__ import annotations

import argparse
import filecmp
import gzip
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def read_fasta(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    recs, head, seq = [], None, []
    with opener(path, "rt") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith(">"):
                if head is not None:
                    recs.append((head, "".join(seq)))
                head, seq = line[1:], []
            else:
                seq.append(line.strip())
    if head is not None:
        recs.append((head, "".join(seq)))
    return recs


def write_fasta(path, recs):
    with open(path, "w") as fh:
        for h, s in recs:
            fh.write(f">{h}\n")
            for i in range(0, len(s), 60):
                fh.write(s[i:i + 60] + "\n")


def release_v2(recs, fraction, seed):
    rng = random.Random(seed)
    n = max(4, round(len(recs) * fraction))
    idx = rng.sample(range(len(recs)), n)
    change, remove, copy = idx[: n // 2], set(idx[n // 2: 3 * n // 4]), idx[3 * n // 4:]
    out = [list(r) for r in recs]
    letters = "ACDEFGHIKLMNPQRSTVWY"
    for i in change:
        h, s = out[i]
        p = rng.randrange(len(s))
        out[i][1] = s[:p] + rng.choice([c for c in letters if c != s[p]]) + s[p + 1:]
    added = []
    for k, i in enumerate(copy):
        h, s = recs[i]
        s = "".join(rng.choice(letters) if rng.random() < 0.1 else c for c in s)
        added.append((f"sp|NEW{k:05d}|NEW{k:05d}_TEST added in v2", s))
    v2 = [tuple(r) for i, r in enumerate(out) if i not in remove] + added
    return v2, dict(changed=len(change), removed=len(remove), added=len(added))


def snakemake(workdir, database, args):
    (workdir / "config.yaml").write_text(
        f"database: {database}\nqueries: {args.queries}\nshards: {args.shards}\n"
        f"backend: cpu\nthreads: 1\n")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    start = time.perf_counter()
    proc = subprocess.run([str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory",
                           str(workdir), "--configfile", str(workdir / "config.yaml"),
                           "--cores", str(args.cores)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(proc.stderr[-4000:])
    jobs = {}
    for m in re.finditer(r"^(?:local)?(?:rule|checkpoint) (\w+):", proc.stdout + proc.stderr, re.M):
        jobs[m.group(1)] = jobs.get(m.group(1), 0) + 1
    return wall, jobs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--database", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--small-fraction", type=float, default=0.0005)
    ap.add_argument("--workdir", default="/tmp/rescan")
    args = ap.parse_args()
    args.queries = os.path.abspath(args.queries)
    root = Path(args.workdir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    recs = read_fasta(args.database)
    write_fasta(root / "v1.fasta", recs)
    rows = []
    for label, fraction, seed in [("1%", args.fraction, 1), ("small", args.small_fraction, 2)]:
        v2, what = release_v2(recs, fraction, seed)
        write_fasta(root / f"v2-{label}.fasta", v2)
        inc = root / f"inc-{label}"
        scratch = root / f"scratch-{label}"
        inc.mkdir()
        scratch.mkdir()
        t1, j1 = snakemake(inc, root / "v1.fasta", args)
        t2, j2 = snakemake(inc, root / f"v2-{label}.fasta", args)
        t3, j3 = snakemake(scratch, root / f"v2-{label}.fasta", args)
        same = all(filecmp.cmp(inc / "results" / f, scratch / "results" / f, shallow=False)
                   for f in ("hits.tsv", "alignments.tsv"))
        rows.append((label, what, t1, j1, t2, j2, t3, j3, same))
        print(f"[{label}] v2 = {what}", flush=True)
        print(f"  scratch v1:        {t1:7.1f} s  jobs {j1}", flush=True)
        print(f"  incremental v1->v2:{t2:7.1f} s  jobs {j2}", flush=True)
        print(f"  scratch v2:        {t3:7.1f} s  jobs {j3}", flush=True)
        print(f"  hits.tsv and alignments.tsv byte-identical (incremental vs scratch): {same}",
              flush=True)
        for name, d in (("incremental", inc), ("scratch", scratch)):
            tb = (d / "results/benchmarks/traceback.tsv").read_text().splitlines()[-1].split("\t")[0]
            reuse = [ln.split("] ", 1)[1] for ln in
                     (d / "results/logs/traceback.log").read_text().splitlines() if "reused" in ln]
            print(f"  {name} traceback: {tb} s ({reuse[0] if reuse else '?'})", flush=True)
        changes = (inc / "results" / "changes.tsv").read_text().splitlines()[1:]
        kinds = {}
        for line in changes:
            k = line.split("\t")[2]
            kinds[k] = kinds.get(k, 0) + 1
        print(f"  changes.tsv: {kinds}", flush=True)


if __name__ == "__main__":
    main()
