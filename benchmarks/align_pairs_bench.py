"""Batched pairwise alignment (scores + CIGARs): swgpu vs parasail vs Biopython.

Workloads (fixed seeds, generated here):
  dna      1,000 DNA pairs x 512 bp: a random sequence and a mutated copy
           (10% substitutions, ~2% indels of 1-3 bp, cut/padded to 512 bp);
           +1/-1, linear gaps of 2 per residue (gap_open 0, gap_extend 2).
  protein  protein pairs of 200-1,000 residues: windows of UniProt template
           sequences and mutated copies (identity 30-95%, indels), 20% of the
           pairs unrelated; BLOSUM62, gaps 11 + k (BLAST convention).

Tools (all on the same pairs, modes local / global / semi-global):
  swgpu      swgpu_tools.alignment.align_pairs (threads over Numba code);
             timed once for the alignments alone and once including the rows
             that `swgpu align` writes (CIGAR =/X/I/D, identities:
             swgpu_tools.pairs.pair_rows).
  parasail   sw_trace_striped_16 / nw_trace_scan_16 / sg_dx_trace_scan_16
             (score + CIGAR per pair), in a process pool of --threads workers.
  biopython  PairwiseAligner: score + first optimal alignment (its .aligned
             coordinates; no CIGAR string), process pool of --threads workers.
Scores of all tools are compared pair by pair (on the pairs they share); the
swgpu CIGARs of the first --rescore pairs are re-scored in Python.

    .venv/bin/python benchmarks/align_pairs_bench.py --threads 2 \
        --protein-pairs 100000 --others-subset 2000 --out bench_align_pairs.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swgpu_tools.alignment import align_pairs  # noqa: E402
from swgpu_tools.pairs import pair_rows  # noqa: E402
from swgpu_tools.scoring import ScoringScheme  # noqa: E402
from swgpu_tools.sequences import SequenceSet  # noqa: E402

AA = "ARNDCQEGHILKMFPSTWYV"
PARASAIL = {
    "local": "sw_trace_striped_16",
    "global": "nw_trace_scan_16",
    "semiglobal": "sg_dx_trace_scan_16",
}


# ---------------------------------------------------------------------------
# workloads
# ---------------------------------------------------------------------------
def mutate(rng, seq: str, letters: str, sub: float, indel: float) -> str:
    out = []
    i = 0
    while i < len(seq):
        r = rng.random()
        if r < indel / 2:  # deletion of 1-3
            i += int(rng.integers(1, 4))
            continue
        if r < indel:  # insertion of 1-3
            out.extend(rng.choice(list(letters), int(rng.integers(1, 4))))
        c = seq[i]
        out.append(rng.choice(list(letters)) if rng.random() < sub else c)
        i += 1
    return "".join(out)


def dna_pairs(n=1000, length=512, seed=1):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        a = "".join(rng.choice(list("ACGT"), length))
        b = mutate(rng, a, "ACGT", 0.10, 0.02)[:length]
        b += "".join(rng.choice(list("ACGT"), length - len(b)))
        pairs.append((a, b))
    return pairs


def uniprot_templates(path, lo=200):
    seqs, cur = [], []
    with gzip.open(path, "rt") as fh:
        for line in fh:
            if line.startswith(">"):
                if cur:
                    seqs.append("".join(cur))
                cur = []
            else:
                cur.append(line.strip().upper())
    if cur:
        seqs.append("".join(cur))
    clean = re.compile(r"[^ACDEFGHIKLMNPQRSTVWY]")
    return [clean.sub("A", s) for s in seqs if len(s) >= lo]


def protein_pairs(n, templates, seed=2, lo=200, hi=1000):
    rng = np.random.default_rng(seed)
    pairs = []

    def window(length):
        t = templates[int(rng.integers(len(templates)))]
        length = min(length, len(t))
        start = int(rng.integers(0, len(t) - length + 1))
        return t[start : start + length]

    for _ in range(n):
        a = window(int(rng.integers(lo, hi + 1)))
        if rng.random() < 0.2:
            b = window(int(rng.integers(lo, hi + 1)))
        else:
            ident = rng.uniform(0.30, 0.95)
            b = mutate(rng, a, AA, 1 - ident, 0.03)
            b = b[:hi] if len(b) >= lo else b + window(lo - len(b))
        pairs.append((a, b))
    return pairs


# ---------------------------------------------------------------------------
# tools
# ---------------------------------------------------------------------------
def encode(scheme, text):
    return scheme.codes_of_letters[np.frombuffer(text.encode(), dtype=np.uint8)].astype(np.uint8)


def cigar_score(q, s, qs, ss, cigar, scheme):
    i, j, score = qs, ss, 0
    for n, op in re.findall(r"(\d+)([=XIDM])", cigar):
        n = int(n)
        if op in "=XM":
            score += sum(scheme.score_pair(q[i + k], s[j + k]) for k in range(n))
            i += n
            j += n
        else:
            score -= scheme.gap_open + n * scheme.gap_extend
            i, j = (i + n, j) if op == "I" else (i, j + n)
    return score


def run_swgpu(pairs, scheme, mode, threads):
    enc = [(encode(scheme, a), encode(scheme, b)) for a, b in pairs]
    qs = SequenceSet.from_pairs((f"q{k}", a) for k, (a, _) in enumerate(pairs))
    ss = SequenceSet.from_pairs((f"s{k}", b) for k, (_, b) in enumerate(pairs))
    align_pairs(
        enc[:8], scheme.matrix, scheme.gap_open, scheme.gap_extend, threads, mode=mode
    )  # compile
    list(
        pair_rows(
            qs.subset(range(8)),
            ss.subset(range(8)),
            align_pairs(
                enc[:8], scheme.matrix, scheme.gap_open, scheme.gap_extend, threads, mode=mode
            ),
        )
    )
    t0 = time.perf_counter()
    alns = align_pairs(enc, scheme.matrix, scheme.gap_open, scheme.gap_extend, threads, mode=mode)
    t1 = time.perf_counter()
    rows = list(pair_rows(qs, ss, alns))  # the TSV rows of swgpu align: CIGAR, identities
    t2 = time.perf_counter()
    cols = [{"qstart": r[3], "sstart": r[5], "cigar": r[12]} for r in rows]
    return alns, cols, t1 - t0, t2 - t0


_W = {}


def _parasail_chunk(args):
    import parasail

    chunk, mode, kind, go, ge, match, mismatch = args
    if kind == "dna":
        mat = parasail.matrix_create("ACGT", match, mismatch)
    else:
        mat = parasail.blosum62
    fn = getattr(parasail, PARASAIL[mode])
    out = []
    for a, b in chunk:
        r = fn(a, b, go + ge, ge, mat)
        out.append((r.score, r.cigar.decode.decode(), r.cigar.beg_query, r.cigar.beg_ref))
    return out


def _biopython_chunk(args):
    from Bio.Align import PairwiseAligner, substitution_matrices

    chunk, mode, kind, go, ge, match, mismatch = args
    al = PairwiseAligner(mode="local" if mode == "local" else "global")
    if kind == "dna":
        al.match_score, al.mismatch_score = match, mismatch
    else:
        al.substitution_matrix = substitution_matrices.load("BLOSUM62")
    al.open_gap_score = -(go + ge)
    al.extend_gap_score = -ge
    if mode == "semiglobal":
        al.end_deletion_score = 0
    out = []
    for a, b in chunk:
        alns = al.align(b, a)  # target = subject
        first = alns[0]
        out.append((alns.score, first.aligned[0].shape[0]))
    return out


def run_pool(fn, pairs, mode, kind, scheme, workers):
    match = scheme.match if scheme.match is not None else 0
    mismatch = scheme.mismatch if scheme.mismatch is not None else 0
    nchunks = max(1, workers * 8)
    chunks = [pairs[k::nchunks] for k in range(nchunks)]
    args = [(c, mode, kind, scheme.gap_open, scheme.gap_extend, match, mismatch) for c in chunks]
    ctx = mp.get_context("fork")
    with ctx.Pool(workers) as pool:
        pool.map(fn, [(c[:2],) + a[1:] for c, a in zip(chunks, args)])  # warm up workers
        t0 = time.perf_counter()
        res = pool.map(fn, args)
        dt = time.perf_counter() - t0
    out = [None] * len(pairs)
    for k, part in enumerate(res):
        for r, item in enumerate(part):
            out[k + r * nchunks] = item
    return out, dt


def bench(kind, pairs, scheme, modes, threads, others_subset, tools, rescore):
    cells = sum(len(a) * len(b) for a, b in pairs)
    rows = []
    for mode in modes:
        alns, cols, t_aln, t_all = run_swgpu(pairs, scheme, mode, threads)
        # CIGARs re-score to their scores (the first --rescore pairs: Python is slow)
        checked = list(zip(pairs, alns, cols))[:rescore]
        bad = sum(
            cigar_score(a, b, c["qstart"] - 1, c["sstart"] - 1, c["cigar"], scheme) != x.score
            for (a, b), x, c in checked
            if x.operations
        )
        row = {
            "workload": kind,
            "mode": mode,
            "pairs": len(pairs),
            "cells": cells,
            "swgpu_s": t_aln,
            "swgpu_with_cigar_s": t_all,
            "swgpu_pairs_per_s": len(pairs) / t_aln,
            "swgpu_gcups": cells / t_aln / 1e9,
            "cigars_rescored": len(checked),
            "cigar_rescore_failures": bad,
        }
        sub = pairs[:others_subset]
        sub_cells = sum(len(a) * len(b) for a, b in sub)
        row["others_pairs"] = len(sub)
        if "parasail" in tools:
            res, dt = run_pool(_parasail_chunk, sub, mode, kind, scheme, threads)
            row["parasail_s"] = dt
            row["parasail_pairs_per_s"] = len(sub) / dt
            row["parasail_gcups"] = sub_cells / dt / 1e9
            row["parasail_score_mismatches"] = sum(r[0] != x.score for r, x in zip(res, alns))
        if "biopython" in tools:
            res, dt = run_pool(_biopython_chunk, sub, mode, kind, scheme, threads)
            row["biopython_s"] = dt
            row["biopython_pairs_per_s"] = len(sub) / dt
            row["biopython_gcups"] = sub_cells / dt / 1e9
            row["biopython_score_mismatches"] = sum(int(r[0]) != x.score for r, x in zip(res, alns))
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--protein-pairs", type=int, default=100_000)
    ap.add_argument("--dna-pairs", type=int, default=1000)
    ap.add_argument(
        "--others-subset",
        type=int,
        default=2000,
        help="pairs given to parasail and Biopython (the first N)",
    )
    ap.add_argument("--modes", default="local,global,semiglobal")
    ap.add_argument(
        "--rescore",
        type=int,
        default=5000,
        help="swgpu CIGARs re-scored in Python per mode (the first N pairs)",
    )
    ap.add_argument("--workloads", default="dna,protein")
    ap.add_argument("--tools", default="parasail,biopython")
    ap.add_argument("--template", default=str(ROOT.parent / "shared/data/uniprot20k.fasta.gz"))
    ap.add_argument("--out", default=None, help="JSON file for the results")
    args = ap.parse_args()
    import numba

    numba.set_num_threads(args.threads)
    modes = args.modes.split(",")
    tools = args.tools.split(",") if args.tools else []
    rows = []
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "threads": args.threads,
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "loadavg_start": os.getloadavg(),
    }
    if "dna" in args.workloads:
        s = ScoringScheme(match=1, mismatch=-1, gap_open=0, gap_extend=2)
        rows += bench(
            "dna",
            dna_pairs(args.dna_pairs),
            s,
            modes,
            args.threads,
            args.dna_pairs,
            tools,
            args.rescore,
        )
    if "protein" in args.workloads:
        s = ScoringScheme("BLOSUM62", 11, 1)
        pairs = protein_pairs(args.protein_pairs, uniprot_templates(args.template))
        rows += bench(
            "protein", pairs, s, modes, args.threads, args.others_subset, tools, args.rescore
        )
    meta["loadavg_end"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
