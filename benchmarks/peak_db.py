#!/usr/bin/env python3
"""Equal-length protein databases for the peak-speed benchmark (CUDASW++ 4.0's setting).

CUDASW++ 4.0 measures its peak speed (its ``runpeakbenchmark.sh``) on built-in
"pseudo databases": ``--pseudodb NUM LENGTH`` holds NUM copies of one random
sequence of LENGTH residues drawn uniformly from the 20 standard amino acids
(NUM = 1,000,000 and LENGTH = 128, 256, 512, 768, 1024, 2048 in its script).
swgpu reads FASTA, so this writes such databases as FASTA files, one per length,
for both tools to read (CUDASW++ through its ``makedb``):

    python3 benchmarks/peak_db.py --lengths 128 256 512 1024 2048 --residues 1e8 \
        --out-dir /tmp/peak

writes ``/tmp/peak/peak_128.fasta`` ... with round(residues / length) sequences
each (781,250 x 128 ... 48,828 x 2048 for 1e8 residues).  By default every
sequence is drawn independently with BLAST's standard background composition
(Robinson & Robinson 1991, the one BLOSUM62's statistics assume);
``--composition uniform`` draws the 20 letters uniformly as CUDASW++ does and
``--identical`` repeats a single sequence as its pseudo database does.  Smith-
Waterman does the same work on every cell whatever the letters, so these only
matter for score overflows (none on random sequences).  Only numpy is needed;
the same arguments always give the same files.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

LETTERS = "ARNDCQEGHILKMFPSTWYV"
# BLAST's standard amino-acid background frequencies (Robinson & Robinson 1991), per mille.
ROBINSON = {
    "A": 78.05,
    "R": 51.29,
    "N": 44.87,
    "D": 53.64,
    "C": 19.25,
    "Q": 42.64,
    "E": 62.95,
    "G": 73.77,
    "H": 21.99,
    "I": 51.42,
    "L": 90.19,
    "K": 57.44,
    "M": 22.43,
    "F": 38.56,
    "P": 52.03,
    "S": 71.20,
    "T": 58.41,
    "W": 13.30,
    "Y": 32.16,
    "V": 64.41,
}
CHUNK_RESIDUES = 1 << 24  # rows are generated and written in blocks of about this many residues


def composition(name: str) -> np.ndarray:
    if name == "uniform":
        p = np.ones(len(LETTERS))
    elif name == "background":
        p = np.array([ROBINSON[c] for c in LETTERS])
    else:
        raise ValueError(f"unknown composition {name!r}")
    return p / p.sum()


def num_sequences(length: int, residues: float) -> int:
    return max(1, int(round(residues / length)))


def write_db(
    path: str,
    length: int,
    count: int,
    rng: np.random.Generator,
    probs: np.ndarray,
    identical: bool = False,
) -> int:
    """Write ``count`` sequences of ``length`` residues, one line each, ids ``peakL_0000001``...

    Every record has the same byte width, so whole blocks of records are built as one
    numpy array.  Returns the number of residues written."""
    letters = np.frombuffer(LETTERS.encode(), dtype=np.uint8)
    digits = len(str(count))
    prefix = f">peak{length}_".encode()
    hw = len(prefix) + digits + 1  # header line width, newline included
    width = hw + length + 1
    fixed = np.empty(width, dtype=np.uint8)
    fixed[: len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    fixed[hw - 1] = ord("\n")
    fixed[-1] = ord("\n")
    one = letters[rng.choice(len(letters), size=length, p=probs)] if identical else None
    rows = max(1, CHUNK_RESIDUES // max(length, 1))
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        for start in range(0, count, rows):
            n = min(rows, count - start)
            block = np.broadcast_to(fixed, (n, width)).copy()
            ids = np.arange(start + 1, start + n + 1, dtype=np.int64)
            for d in range(digits):  # most significant digit first
                block[:, len(prefix) + d] = ord("0") + (ids // 10 ** (digits - 1 - d)) % 10
            if identical:
                block[:, hw : hw + length] = one
            else:
                block[:, hw : hw + length] = letters[
                    rng.choice(len(letters), size=(n, length), p=probs)
                ]
            fh.write(block.tobytes())
    os.replace(tmp, path)
    return count * length


#: The lengths of CUDASW++ 4.0's 20 benchmark queries (its allqueries.fasta).
QUERY_LENGTHS = [144, 189, 222, 375, 464, 567, 657, 729, 850, 1000, 1500, 2005, 2504, 3005,
                 3564, 4061, 4548, 4743, 5147, 5478]  # fmt: skip


def write_queries(path: str) -> None:
    """Random queries of the 20 benchmark lengths (uniform letters, seed 1), ``>Q01_144`` ..."""
    rng = np.random.default_rng(1)
    aa = np.array(list(LETTERS))
    with open(path, "w") as fh:
        for i, n in enumerate(QUERY_LENGTHS):
            fh.write(f">Q{i + 1:02d}_{n}\n{''.join(rng.choice(aa, n))}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=[128, 256, 512, 1024, 2048],
        help="sequence length of each database (one file per length)",
    )
    ap.add_argument(
        "--residues",
        type=float,
        default=1e8,
        help="residues wanted in each database (sequences = round(residues / length))",
    )
    ap.add_argument(
        "--count",
        type=int,
        default=None,
        help="sequences per database instead of --residues (CUDASW++'s script: 1000000)",
    )
    ap.add_argument("--out-dir", required=True, help="writes OUT_DIR/peak_<length>.fasta")
    ap.add_argument("--composition", choices=["background", "uniform"], default="background")
    ap.add_argument(
        "--identical",
        action="store_true",
        help="repeat one random sequence (as CUDASW++'s --pseudodb does)",
    )
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument(
        "--queries",
        default=None,
        metavar="FASTA",
        help="also write random queries of CUDASW++'s 20 benchmark lengths here",
    )
    args = ap.parse_args(argv)
    if any(L < 1 for L in args.lengths):
        ap.error("lengths must be positive")
    os.makedirs(args.out_dir, exist_ok=True)
    probs = composition(args.composition)
    if args.queries:
        write_queries(args.queries)
        print(f"{args.queries}: {len(QUERY_LENGTHS)} random queries", flush=True)
    for L in args.lengths:
        rng = np.random.default_rng([args.seed, L])  # each file independent of the others
        n = args.count if args.count else num_sequences(L, args.residues)
        path = os.path.join(args.out_dir, f"peak_{L}.fasta")
        res = write_db(path, L, n, rng, probs, identical=args.identical)
        print(f"{path}: {n} sequences x {L} = {res} residues", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
