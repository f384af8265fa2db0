"""CPU kernel speed (GCUPS) next to ssearch36, per query.  Not a test.

    .venv/bin/python benchmarks/cpu_gcups.py --threads 2 [--oracle] [QUERIES] [DATABASE]

QUERIES and DATABASE default to ../shared/data/oracle_queries.fasta and
../shared/data/uniprot20k.fasta.gz (relative to the repository).  For every
query it times ``swgpu_tools.kernels.cpu.search`` (top 500; best of
``--repeat`` runs, after a warm-up that compiles or loads the Numba cache) and
``ssearch36 -q -p -s BL62 -f 11 -g 1 -T THREADS -b 500 -d 0 -m 9`` with the
same thread count (skipped if ssearch36 is not on PATH; ``apt-get install
fasta3`` provides it).  GCUPS = query length x database residues / seconds /
1e9.  Prints a Markdown table.

``--oracle [TSV]`` also checks every score of every query against SSEARCH's
oracle table (default ../shared/data/oracle_ssearch36_uniprot20k.tsv.gz).
Rows whose columns are shifted (targets whose description holds "(digits)")
are re-derived by running ssearch36 on those targets only.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def accession(name: str) -> str:
    parts = name.split("|")
    if len(parts) >= 3 and parts[0] in ("sp", "tr"):
        return parts[1]
    return name.split()[0]


def write_plain_fasta(src: Path, dst: Path, keep=None) -> None:
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as fh, open(dst, "w") as out:
        write = keep is None
        for line in fh:
            if line.startswith(">") and keep is not None:
                write = accession(line[1:].strip()) in keep
            if write:
                out.write(line)


def split_queries(path: Path, folder: Path) -> list[Path]:
    files, out = [], None
    with open(path) as fh:
        for line in fh:
            if line.startswith(">"):
                if out:
                    out.close()
                files.append(folder / f"query{len(files)}.fa")
                out = open(files[-1], "w")
            if out:
                out.write(line)
    if out:
        out.close()
    return files


def ssearch_cmd(threads: int, query: Path, db: Path, extra=("-b", "500")) -> list[str]:
    return [
        "ssearch36",
        "-q",
        "-p",
        "-s",
        "BL62",
        "-f",
        "11",
        "-g",
        "1",
        "-T",
        str(threads),
        *extra,
        "-d",
        "0",
        "-m",
        "9",
        str(query),
        str(db),
    ]


def ssearch_scores(cmd: list[str]) -> dict[str, int]:
    """target accession -> s-w score from ssearch36 -m 9 'best scores' lines."""
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    scores = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+) .*\(\s*\d+\)\s+(\d+)\t", line)
        if m:
            scores.setdefault(accession(m.group(1)), int(m.group(2)))
    return scores


def check_oracle(tsv: Path, queries, db, scores: np.ndarray, tmp: Path, query_files, dbpath):
    import pandas as pd

    raw = pd.read_csv(tsv, sep="\t", dtype=str)
    raw["q"] = raw["query"].map(accession).map({x: i for i, x in enumerate(queries.ids)})
    raw["s"] = raw["target"].map(accession).map({x: i for i, x in enumerate(db.ids)})
    if raw["q"].isna().any() or raw["s"].isna().any():
        raise SystemExit("oracle names a query or target missing from the inputs")
    ours = scores[raw["q"].astype(int).to_numpy(), raw["s"].astype(int).to_numpy()]
    good = raw["sw_score"].str.fullmatch(r"\d+") & raw["slen"].str.fullmatch(r"\d+")
    pairs = len(set(zip(raw["q"], raw["s"])))
    equal = int((ours[good] == raw.loc[good, "sw_score"].astype(int)).sum())
    lines = [
        f"oracle rows: {len(raw)} covering {pairs} of "
        f"{len(queries) * len(db)} (query, target) pairs; well-formed: {int(good.sum())}; "
        f"equal to SSEARCH: {equal}/{int(good.sum())}"
    ]
    bad = raw[~good]
    if len(bad) and shutil.which("ssearch36"):
        targets = set(bad["target"].map(accession))
        sub = tmp / "garbled.fa"
        write_plain_fasta(dbpath, sub, keep=targets)
        again = 0
        for _, row in bad.iterrows():
            qi, si = int(row["q"]), int(row["s"])
            fresh = ssearch_scores(
                ssearch_cmd(1, query_files[qi], sub, extra=("-z", "-1", "-b", f"={len(targets)}"))
            )
            again += fresh.get(db.ids[si]) == int(ours[row.name])
        lines.append(
            f"garbled oracle rows (shifted columns): {len(bad)}; equal to a fresh "
            f"ssearch36 run on those targets: {again}/{len(bad)}"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("queries", nargs="?", default=str(SHARED / "oracle_queries.fasta"))
    ap.add_argument("database", nargs="?", default=str(SHARED / "uniprot20k.fasta.gz"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="runs of our kernel per query (best)")
    ap.add_argument("--no-ssearch", action="store_true")
    ap.add_argument("--oracle", nargs="?", const=str(SHARED / "oracle_ssearch36_uniprot20k.tsv.gz"))
    args = ap.parse_args()

    import numba

    numba.set_num_threads(args.threads)
    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.kernels import cpu
    from swgpu_tools.scoring import ScoringScheme

    scheme = ScoringScheme("BLOSUM62", gap_open=11, gap_extend=1)
    queries = read_fasta(args.queries)
    db = read_fasta(args.database)
    q_enc, d_enc = scheme.encode(queries), scheme.encode(db)
    residues = d_enc.total_residues
    # warm-up: compile or load every specialisation from the cache
    cpu.score_all(
        q_enc, scheme.encode(db.subset(np.arange(min(64, len(db))))), scheme.matrix, 11, 1
    )
    have_ssearch = shutil.which("ssearch36") is not None and not args.no_ssearch

    rows, all_scores = [], np.zeros((len(queries), len(db)), dtype=np.int32)
    with tempfile.TemporaryDirectory() as tmpname:
        tmp = Path(tmpname)
        query_files = split_queries(Path(args.queries), tmp)
        dbplain = tmp / "db.fa"
        if have_ssearch or args.oracle:
            write_plain_fasta(Path(args.database), dbplain)
        for qi in range(len(queries)):
            one = q_enc.__class__(
                q_enc.codes[q_enc.offsets[qi] : q_enc.offsets[qi + 1]],
                np.array([0, q_enc.offsets[qi + 1] - q_enc.offsets[qi]]),
            )
            m = int(one.offsets[1])
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                cpu.search(one, d_enc, scheme.matrix, 11, 1, top_k=500)
                best = min(best, time.perf_counter() - t0)
            if args.oracle:
                all_scores[qi] = cpu.score_all(one, d_enc, scheme.matrix, 11, 1)[0]
            ss = None
            if have_ssearch:
                t0 = time.perf_counter()
                subprocess.run(
                    ssearch_cmd(args.threads, query_files[qi], dbplain),
                    check=True,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                ss = time.perf_counter() - t0
            rows.append((queries.ids[qi], m, best, ss))
            print(f"  {queries.ids[qi]} done", file=sys.stderr)
        oracle_lines = []
        if args.oracle:
            oracle_lines = check_oracle(
                Path(args.oracle), queries, db, all_scores, tmp, query_files, Path(args.database)
            )

    def gcups(m, s):
        return m * residues / s / 1e9

    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    cpu_name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu_name = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(
        f"date: {datetime.date.today().isoformat()}  commit: {commit}  machine: "
        f"{os.cpu_count()} CPUs, {cpu_name}  threads: {args.threads}"
    )
    print(f"database: {args.database} ({len(db)} sequences, {residues} residues)")
    print(
        f"ours: swgpu_tools.kernels.cpu.search top_k=500 (best of {args.repeat}); "
        f"ssearch36: {' '.join(ssearch_cmd(args.threads, Path('query.fa'), Path('db.fa')))}"
    )
    print()
    print("| query | length | ours s | ours GCUPS | ssearch36 s | ssearch36 GCUPS | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    tm = ts = tl = 0.0
    for name, m, ours, ss in rows:
        tm += ours
        tl += m
        if ss is None:
            print(f"| {name} | {m} | {ours:.2f} | {gcups(m, ours):.2f} | - | - | - |")
        else:
            ts += ss
            print(
                f"| {name} | {m} | {ours:.2f} | {gcups(m, ours):.2f} | {ss:.2f} | "
                f"{gcups(m, ss):.2f} | {ss / ours:.1f}x |"
            )
    if ts:
        print(
            f"| all | {int(tl)} | {tm:.2f} | {gcups(tl, tm):.2f} | {ts:.2f} | "
            f"{gcups(tl, ts):.2f} | {ts / tm:.1f}x |"
        )
    else:
        print(f"| all | {int(tl)} | {tm:.2f} | {gcups(tl, tm):.2f} | - | - | - |")
    for line in oracle_lines:
        print()
        print(line)


if __name__ == "__main__":
    main()
