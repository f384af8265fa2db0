"""Huge sequences end to end: peak memory, wall time and progress lines of ``swgpu search``.

Not a test.  Two cases, each one child ``swgpu search --backend cpu`` process
(``python -m swgpu_tools.cli``), whose peak RSS comes from ``os.wait4``'s
rusage and whose log lines are printed with the seconds since its start:

* ``query``: one random query of ``--query-len`` residues (default 20 M)
  against ``--subjects`` short random subjects (60-120 residues);
* ``subject``: ``--queries`` random queries of 200 residues against a database
  of one random subject of ``--subject-len`` residues (default 20 M) and
  ``--subjects`` short ones.

``--plant`` adds a homologous pair (a mutated copy of a stretch of the huge
sequence), so that there is a hit to align: the traceback step refuses pairs
of more than ~23 M residues in all with BLOSUM62 11/1
(:func:`swgpu_tools.alignment.params.check_range`), so a planted hit on a
100 M-residue sequence ends the run with that error after the scoring.  By
default the E-value cut-off (``--max-evalue``, 1e-3) leaves no hit to align:
the run measures the scoring.

    .venv/bin/python benchmarks/huge_sequences.py --case query --threads 2
    .venv/bin/python benchmarks/huge_sequences.py --case subject --threads 2
    # another tree (e.g. main, for "before" numbers): --tree /tmp/main-copy

BLOSUM62, gaps 11/1, top 500.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LETTERS = np.frombuffer(b"ACDEFGHIKLMNPQRSTVWY", np.uint8)
# background frequencies (Robinson & Robinson), so random sequences look like proteins
FREQ = np.array(
    [78, 19, 54, 63, 39, 74, 22, 51, 57, 90, 22, 45, 52, 43, 51, 71, 58, 64, 13, 32], float
)
FREQ /= FREQ.sum()


def random_protein(rng, n: int) -> np.ndarray:
    out = np.empty(n, np.uint8)
    step = 10_000_000
    for a in range(0, n, step):
        b = min(n, a + step)
        out[a:b] = LETTERS[rng.choice(20, size=b - a, p=FREQ)]
    return out


def mutate(rng, seq: np.ndarray, rate: float = 0.2) -> np.ndarray:
    out = seq.copy()
    hit = rng.random(len(out)) < rate
    out[hit] = LETTERS[rng.integers(0, 20, int(hit.sum()))]
    return out


def write_fasta(path: Path, records) -> None:
    with open(path, "wb") as fh:
        for name, seq in records:
            fh.write(b">" + name.encode() + b"\n")
            for a in range(0, len(seq), 1 << 20):  # long lines: fine for the reader
                fh.write(seq[a : a + (1 << 20)].tobytes() + b"\n")


def make_inputs(args, folder: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(7)
    short = [random_protein(rng, int(rng.integers(60, 121))) for _ in range(args.subjects)]
    if args.case == "query":
        q = random_protein(rng, args.query_len)
        at = args.query_len // 2
        queries = [("huge_query", q)]
        db = [(f"s{i}", s) for i, s in enumerate(short)]
        if args.plant:
            db.insert(0, ("planted", mutate(rng, q[at : at + 100])))
    else:
        qs = [random_protein(rng, 200) for _ in range(args.queries)]
        big = random_protein(rng, args.subject_len)
        at = args.subject_len // 3
        if args.plant:
            big[at : at + 200] = mutate(rng, qs[0])
        queries = [(f"q{i}", q) for i, q in enumerate(qs)]
        db = [("huge_subject", big)] + [(f"s{i}", s) for i, s in enumerate(short)]
    qf, df = folder / "queries.fa", folder / "db.fa"
    write_fasta(qf, queries)
    write_fasta(df, db)
    return qf, df


CHECK = r"""
import sys
from swgpu_tools.io.fasta import read_fasta
from swgpu_tools.kernels import cpu
from swgpu_tools.scoring import ScoringScheme
s = ScoringScheme("BLOSUM62", 11, 1)
q, d = s.encode(read_fasta(sys.argv[1])), s.encode(read_fasta(sys.argv[2]))
hits = cpu.search(q, d, s, top_k=int(sys.argv[3]))
for a, b, c in zip(hits.query_index, hits.subject_index, hits.score):
    print(f"  score: query {a} subject {b} score {c}")
"""


def top_scores(args, qf: Path, df: Path) -> list[str]:
    """Top scores per query from the CPU kernel's API (the table keeps only hits that
    pass the E-value cut-off and can be aligned)."""
    tree = str(Path(args.tree).resolve()) if args.tree else str(ROOT)
    env = dict(os.environ, PYTHONPATH=tree)
    cmd = [sys.executable, "-c", CHECK, str(qf), str(df), str(args.check_scores)]
    res = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
    return res.stdout.splitlines()


def run(args, qf: Path, df: Path, out: Path) -> dict:
    env = dict(os.environ)
    tree = str(Path(args.tree).resolve()) if args.tree else str(ROOT)
    env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "swgpu_tools.cli", "search", "--backend", "cpu"]
    cmd += ["--threads", str(args.threads), "--max-evalue", str(args.max_evalue)]
    cmd += ["-o", str(out), str(qf), str(df)]
    print("$ PYTHONPATH=" + tree, " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    # cwd: the tree (python -m puts the working folder first on sys.path)
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stderr=subprocess.PIPE, text=True)
    lines = []

    def reader():
        for line in proc.stderr:
            line = line.rstrip()
            lines.append(line)
            print(f"  {time.perf_counter() - t0:7.1f} s | {line}", flush=True)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    timer = threading.Timer(args.timeout, proc.kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    th.join(5)
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        "peak_rss_gb": usage.ru_maxrss * 1024 / 1e9,
        "timed_out": wall >= args.timeout,
        "lines": lines,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", choices=["query", "subject"], required=True)
    ap.add_argument("--query-len", type=int, default=20_000_000)
    ap.add_argument("--subject-len", type=int, default=20_000_000)
    ap.add_argument("--subjects", type=int, default=7, help="short subjects (default 7)")
    ap.add_argument("--queries", type=int, default=2, help="queries of the subject case")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-evalue", type=float, default=1e-3)
    ap.add_argument("--plant", action="store_true", help="add a homologous pair (see above)")
    ap.add_argument(
        "--check-scores",
        type=int,
        default=0,
        metavar="K",
        help="then print the top K scores per query from the kernel's API (another run)",
    )
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds, then kill")
    ap.add_argument("--tree", help="source tree to run (default: this one)")
    ap.add_argument("--keep", help="folder for the inputs and output (default: a temp folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="swgpu-huge-") as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        qf, df = make_inputs(args, folder)
        print(f"inputs written in {time.perf_counter() - t:.1f} s", flush=True)
        res = run(args, qf, df, folder / "hits.tsv")
        hits = (folder / "hits.tsv").read_text().splitlines() if res["rc"] == 0 else []
        scores = top_scores(args, qf, df) if args.check_scores else []
    size = args.query_len if args.case == "query" else args.subject_len
    print()
    print(f"case {args.case} ({size:,} residues), {args.threads} threads, {platform.node()}")
    print(f"date {datetime.date.today()}, cpu count {os.cpu_count()}")
    print(
        f"rc {res['rc']}{' (killed at the timeout)' if res['timed_out'] else ''}, "
        f"wall {res['wall_s']:.1f} s, peak RSS {res['peak_rss_gb']:.2f} GB, "
        f"{len(res['lines'])} log lines"
    )
    for line in hits[:6]:
        print("  hit:", line[:200])
    print("\n".join(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
