"""Traceback of database hits as the workflow's traceback step runs it (issue 11.2).

The hit list: the top --top-k (500) hits of every query by exact score (the
CPU search kernel), kept where the BLAST E-value (Spouge, as
``pipeline.merge``) is at most --max-evalue (10); cached in bench_data/ (the
search is not part of the figures).  Then ``align_many(..., backend="cpu")``
on all hits in one call, as ``pipeline.traceback`` calls it, --repeat times.
Reported: the first call (Numba compile or cache load, on a few hits) apart
from the timed runs, and the alignments/s.

The stand-in for bench200M x uniprot_queries500 (6,026 hits at E <= 10) is a
10x smaller database of the same make (``synth_db.py --residues 2e7``): the
number of hits at E <= 10 hardly depends on the database size (the E-value
counts the random hits expected), and their lengths and scores are of the
same kind (weak hits near the cut-off).

    python3 /work/shared/tools/synth_db.py --template /work/shared/data/uniprot20k.fasta.gz \
        --residues 2e7 --db bench_data/bench20M.fasta --queries bench_data/bench_queries.fasta
    zcat /work/shared/data/uniprot_queries500.fasta.gz > bench_data/uniprot_queries500.fasta
    .venv/bin/python benchmarks/align_evalue_hits.py --threads 2 \
        --db bench_data/bench20M.fasta --query-file bench_data/uniprot_queries500.fasta \
        --dump bench_data/aln_u500.npz

``--dump`` writes every alignment (score, coordinates, operations) to an .npz;
``--compare`` checks a run against such a file, byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after PYTHONPATH: compare versions with PYTHONPATH=...

try:  # the align package (issue 13), else the old module
    from swgpu_tools.alignment import align_many  # noqa: E402
except ImportError:  # pragma: no cover - before the split
    from swgpu_tools.alignment import align_many  # noqa: E402
from swgpu_tools.io.fasta import read_fasta  # noqa: E402
from swgpu_tools.kernels import cpu  # noqa: E402
from swgpu_tools.scoring import ScoringScheme  # noqa: E402


def hit_list(args, s, q_enc, d_enc, queries, db):
    """(query index, subject index, score) of the hits at E <= max_evalue; cached."""
    from swgpu_tools import stats

    key = hashlib.sha1(
        f"{os.path.abspath(args.db)} {os.path.getsize(args.db)} "
        f"{os.path.abspath(args.query_file)} {os.path.getsize(args.query_file)} "
        f"{args.top_k}".encode()
    ).hexdigest()[:12]
    cache = ROOT / "bench_data" / f"hits_{key}.npz"
    if cache.exists():
        z = np.load(cache)
        qi, si, sc = z["qi"], z["si"], z["sc"]
    else:
        t = time.perf_counter()
        hits = cpu.search(q_enc, d_enc, s.matrix, s.gap_open, s.gap_extend, args.top_k)
        print(f"search (not part of the figures): {time.perf_counter() - t:.1f} s", flush=True)
        qi, si, sc = hits.query_index, hits.subject_index, hits.score
        cache.parent.mkdir(exist_ok=True)
        np.savez(cache, qi=qi, si=si, sc=sc)
    params = stats.lookup(s.matrix_name, s.gap_open, s.gap_extend)
    qlen = np.diff(q_enc.offsets)[qi]
    slen = np.diff(d_enc.offsets)[si]
    ev = stats.spouge_evalue(
        sc.astype(np.float64),
        qlen.astype(np.int64),
        slen.astype(np.int64),
        db.total_residues,
        params,
    )
    keep = ev <= args.max_evalue
    return qi[keep].astype(np.int64), si[keep].astype(np.int64), sc[keep].astype(np.int64)


def pack(alns):
    """Alignments as arrays: info (n, 5) int64 and the operations, concatenated."""
    info = np.array(
        [(a.score, a.query_start, a.query_end, a.subject_start, a.subject_end) for a in alns],
        dtype=np.int64,
    ).reshape(-1, 5)
    lens = np.array([len(a.operations) for a in alns], dtype=np.int64)
    ops = np.frombuffer(b"".join(a.operations for a in alns), dtype=np.uint8)
    return info, np.r_[0, np.cumsum(lens)].astype(np.int64), ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=str(ROOT / "bench_data/bench20M.fasta"))
    ap.add_argument("--query-file", default=str(ROOT / "bench_data/uniprot_queries500.fasta"))
    ap.add_argument("--top-k", type=int, default=500)
    ap.add_argument("--max-evalue", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="align only the first N hits")
    ap.add_argument("--dump", default=None, help="write the alignments to this .npz")
    ap.add_argument("--compare", default=None, help="compare the alignments with this .npz")
    ap.add_argument("--out", default=None, help="write the figures as JSON")
    args = ap.parse_args()
    import numba

    numba.set_num_threads(args.threads)
    s = ScoringScheme("BLOSUM62", 11, 1)
    queries = read_fasta(args.query_file)
    db = read_fasta(args.db)
    q_enc, d_enc = s.encode(queries), s.encode(db)
    qi, si, sc = hit_list(args, s, q_enc, d_enc, queries, db)
    if args.limit:
        qi, si, sc = qi[: args.limit], si[: args.limit], sc[: args.limit]
    qlen = np.diff(q_enc.offsets)[qi]
    slen = np.diff(d_enc.offsets)[si]
    import swgpu_tools

    print(f"swgpu_tools from {swgpu_tools.__file__}")
    print(
        f"{len(qi):,} hits of {len(np.unique(qi))} queries (E <= {args.max_evalue:g}); "
        f"query lengths {qlen.min()}-{qlen.max()}, subject lengths {slen.min()}-{slen.max()}, "
        f"scores {sc.min()}-{sc.max()}; {int((qlen * slen).sum()):,} cells of the pairs",
        flush=True,
    )

    t = time.perf_counter()
    align_many(q_enc, d_enc, qi[:4], si[:4], s.matrix, 11, 1, args.threads, backend="cpu")
    first = time.perf_counter() - t
    print(f"first call (4 hits: Numba compile or cache load): {first:.2f} s", flush=True)
    times, cpu_times = [], []
    for _ in range(args.repeat):
        t, c = time.perf_counter(), time.process_time()
        alns = align_many(q_enc, d_enc, qi, si, s.matrix, 11, 1, args.threads, backend="cpu")
        times.append(time.perf_counter() - t)
        cpu_times.append(time.process_time() - c)
        print(
            f"align_many: {len(alns):,} alignments in {times[-1]:.2f} s "
            f"({cpu_times[-1]:.2f} s CPU time of all threads)",
            flush=True,
        )
    bad = [k for k, a in enumerate(alns) if a.score != sc[k]]
    assert not bad, f"{len(bad)} scores differ from the search scores, e.g. hit {bad[0]}"
    region = int(
        sum((a.query_end - a.query_start) * (a.subject_end - a.subject_start) for a in alns)
    )
    info, ops_off, ops = pack(alns)
    digest = hashlib.sha1(info.tobytes() + ops_off.tobytes() + ops.tobytes()).hexdigest()
    summary = {
        "alignments": len(alns),
        "queries": int(len(np.unique(qi))),
        "threads": args.threads,
        "first_call_s": first,
        "seconds": times,
        "cpu_seconds": cpu_times,
        "best_s": min(times),
        "alignments_per_s": len(alns) / min(times),
        "pair_cells": int((qlen * slen).sum()),
        "region_cells": region,
        "digest": digest,
    }
    print(json.dumps(summary), flush=True)
    if args.dump:
        np.savez(args.dump, info=info, ops_off=ops_off, ops=ops, qi=qi, si=si)
    if args.compare:
        z = np.load(args.compare)
        same = (
            np.array_equal(z["qi"], qi)
            and np.array_equal(z["si"], si)
            and np.array_equal(z["info"], info)
            and np.array_equal(z["ops_off"], ops_off)
            and np.array_equal(z["ops"], ops)
        )
        print(f"identical to {args.compare}: {same}")
        if not same:
            sys.exit(1)
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
        Path(args.out).write_text(json.dumps({"meta": meta, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
