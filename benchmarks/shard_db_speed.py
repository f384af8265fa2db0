"""Time the shard step (``swgpu shard``) on a FASTA database: wall time, MB/s and
peak memory, for several shard counts, and optionally for several checkouts
(to compare before and after a change on the same machine).

    python benchmarks/shard_db_speed.py --db bench_data/bench_db.fasta --shards 1 4 8
    python benchmarks/shard_db_speed.py --make-db /tmp/bench_db.fasta      # bench200M-like
    python benchmarks/shard_db_speed.py --db DB --tree /path/to/old/checkout --tree .

Each run is ``python -m swgpu_tools.cli shard DB --shards N --out-dir D`` with
``PYTHONPATH`` set to the checkout, in a fresh output folder, after the
database was read once (warm page cache).  Printed per run:

* ``wall_s``: the command's wall time (best of ``--repeat``, all runs listed);
* ``cpu_s``: user and system time of all its processes (least of the runs);
* ``MB/s``: database bytes (as stored, compressed or not) per second of wall time;
* ``max_rss_MiB``: the largest resident set of any one process of the run
  (``wait4``'s ``ru_maxrss``, what ``/usr/bin/time -v`` prints as "Maximum
  resident set size");
* ``sum_MiB``: the largest total memory of all the run's processes together,
  sampled every 20 ms (proportional set sizes from ``/proc/PID/smaps_rollup``,
  so shared pages count once; resident sizes where that file is missing);
* ``anon_MiB``: the same for anonymous memory alone (``Pss_Anon`` + ``Pss_Shmem``):
  without the page cache of the files the step maps (the spill file it reads
  back, which the kernel can drop at any time), when its peak came (seconds
  from the start: compare with read_s) and the largest one process had;
* the step's read and write phases (``--stats``) and whether the shard files and
  ``database.json`` equal those of the first checkout's run.

``--make-db PATH`` writes a synthetic database shaped like bench200M (439,226
UniProt-style records, about 200 million residues, one line per sequence;
``--shuffle`` puts the accessions in random order, as in a real release) unless
PATH exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_db(
    path: Path, records: int = 439_226, residues: float = 2e8, seed: int = 1, shuffle: bool = False
) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(5.8, 0.85, records), 7, 8081)
    lengths = np.maximum(7, np.round(lengths * residues / lengths.sum())).astype(np.int64)
    letters = np.frombuffer(b"ACDEFGHIKLMNPQRSTVWY", dtype=np.uint8)
    numbers = np.arange(1, records + 1)
    if shuffle:
        numbers = rng.permutation(numbers)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        step = 20_000
        for a in range(0, records, step):
            lens = lengths[a : a + step]
            seq = letters[rng.integers(0, 20, int(lens.sum()))].tobytes()
            out, at = [], 0
            for i, n in zip(numbers[a : a + step].tolist(), lens.tolist()):
                out.append(
                    b">sp|S%08d|SYN%08d_SYNTH Synthetic protein %d OS=Synthetic\n%s\n"
                    % (i, i, i, seq[at : at + n])
                )
                at += n
            fh.write(b"".join(out))
    os.replace(tmp, path)
    print(f"wrote {path}: {records:,} records, {int(lengths.sum()):,} residues", flush=True)


def _children(root: int) -> list[int]:
    """root and its descendants (from /proc)."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                parent[int(name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, todo = [root], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        tree += kids
        todo += kids
    return tree


def _memory_kib(pid: int) -> tuple[int, int]:
    """(all, anonymous) memory of a process in KiB: proportional set sizes from
    smaps_rollup (anonymous: Pss_Anon + Pss_Shmem, i.e. without the mapped files'
    page cache), else the resident set size for both."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            got = {}
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("Pss", "Pss_Anon", "Pss_Shmem"):
                    got[key] = int(rest.split()[0])
        if "Pss" in got:
            return got["Pss"], got.get("Pss_Anon", got["Pss"]) + got.get("Pss_Shmem", 0)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    v = int(line.split()[1])
                    return v, v
    except OSError:
        pass
    return 0, 0


def run_once(tree: Path, db: Path, shards: int, threads: int | None, out_dir: Path) -> dict:
    shutil.rmtree(out_dir, ignore_errors=True)
    stats = out_dir.with_suffix(".stats.json")
    cmd = [
        sys.executable,
        "-m",
        "swgpu_tools.cli",
        "shard",
        str(db),
        "--shards",
        str(shards),
        "--out-dir",
        str(out_dir),
        "--stats",
        str(stats),
    ]
    if threads:
        cmd += ["--threads", str(threads)]
    env = dict(os.environ, PYTHONPATH=str(tree))
    peak = [0, 0, 0.0, 0]
    t0 = time.perf_counter()
    # run in the checkout: `python -m` puts the current folder first on sys.path
    proc = subprocess.Popen(
        cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    done = threading.Event()

    def sample():
        while not done.wait(0.02):
            mem = [_memory_kib(p) for p in _children(proc.pid)]
            peak[0] = max(peak[0], sum(m[0] for m in mem))
            if sum(m[1] for m in mem) > peak[1]:
                peak[1] = sum(m[1] for m in mem)
                peak[2] = time.perf_counter() - t0
            peak[3] = max([peak[3]] + [m[1] for m in mem])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(cmd)}\n{err}")
    st = json.loads(stats.read_text())
    digest = hashlib.blake2b(digest_size=16)
    digest.update((out_dir / "database.json").read_bytes())
    for k in range(shards):
        digest.update((out_dir / f"shard-{k:04d}.swdb").read_bytes())
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_MiB": usage.ru_maxrss / 1024,
        "sum_MiB": peak[0] / 1024,
        "anon_MiB": peak[1] / 1024,
        "anon_peak_at_s": peak[2],
        "anon_largest_MiB": peak[3] / 1024,
        "read_s": st["phases_s"].get("read"),
        "write_s": st["phases_s"].get("write"),
        "workers": st.get("workers", "-"),
        "pieces_s": st.get("pieces_s"),
        "shard_max_s": st.get("shard_max_s"),
        "output": digest.hexdigest(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, help="database FASTA (plain or .gz)")
    ap.add_argument(
        "--make-db",
        type=Path,
        metavar="PATH",
        help="write a bench200M-like database here (unless it exists) and use it",
    )
    ap.add_argument("--shuffle", action="store_true", help="--make-db: accessions in random order")
    ap.add_argument(
        "--gzip",
        action="store_true",
        help="time the database gzip-compressed (DB.gz, made once beside it)",
    )
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument(
        "--threads", type=int, default=None, help="pass --threads (checkouts that have the option)"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--tree",
        type=Path,
        action="append",
        help="checkout to time (repeatable; default: this one)",
    )
    ap.add_argument("--work", type=Path, default=None, help="folder for outputs (default: temp)")
    args = ap.parse_args(argv)
    if args.make_db:
        args.make_db = args.make_db.resolve()
        if not args.make_db.exists():
            make_db(args.make_db, shuffle=args.shuffle)
        args.db = args.make_db
    if not args.db:
        ap.error("give --db or --make-db")
    args.db = args.db.resolve()
    if args.gzip:
        import gzip

        gz = args.db.with_name(args.db.name + ".gz")
        if not gz.exists():
            with open(args.db, "rb") as fin, gzip.open(gz, "wb", compresslevel=6) as fout:
                shutil.copyfileobj(fin, fout, 1 << 24)
        args.db = gz
    trees = [t.resolve() for t in (args.tree or [REPO])]
    work = (args.work or Path(tempfile.mkdtemp(prefix="shard-bench-"))).resolve()
    size = args.db.stat().st_size
    with open(args.db, "rb") as fh:  # warm the page cache
        while fh.read(1 << 24):
            pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"database {args.db} ({size / 1e6:.0f} MB); {cpus} CPUs; python {sys.version.split()[0]}")
    print(
        f"{'tree':<28} {'N':>3} {'workers':>7} {'wall_s':>7} {'MB/s':>6} {'max_rss_MiB':>11} "
        f"{'sum_MiB':>8} {'anon_MiB':>8} {'read_s':>6} {'write_s':>7} {'cpu_s':>6}  runs_s  same_output  "
        f"(worker s on pieces, longest shard s)"
    )
    first: dict[int, str] = {}
    for tree in trees:
        for n in args.shards:
            runs = [
                run_once(tree, args.db, n, args.threads, work / f"out-{n}")
                for _ in range(args.repeat)
            ]
            best = min(runs, key=lambda r: r["wall_s"])
            first.setdefault(n, best["output"])
            same = all(r["output"] == first[n] for r in runs)
            label = str(tree)[-28:]
            rss = max(r["max_rss_MiB"] for r in runs)
            total = max(r["sum_MiB"] for r in runs)
            anon = max(r["anon_MiB"] for r in runs)
            at = max(runs, key=lambda r: r["anon_MiB"])
            walls = ",".join(f"{r['wall_s']:.2f}" for r in runs)
            print(
                f"{label:<28} {n:>3} {best['workers']!s:>7} {best['wall_s']:>7.2f} "
                f"{size / best['wall_s'] / 1e6:>6.0f} {rss:>11.0f} {total:>8.0f} {anon:>8.0f} "
                f"{best['read_s']:>6.2f} {best['write_s']:>7.2f} "
                f"{min(r['cpu_s'] for r in runs):>6.2f}  {walls}"
                f"  {'yes' if same else 'NO'}  ({best['pieces_s']}, {best['shard_max_s']})"
                f"  anonymous peak at {at['anon_peak_at_s']:.1f} s; largest process "
                f"{at['anon_largest_MiB']:.0f} MiB",
                flush=True,
            )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
