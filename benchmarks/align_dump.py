"""Dump the alignments of a fixed random batch, to compare two versions of the code.

Every alignment (score, coordinates, operations) of a seeded batch of pairs,
in all three modes, with pair lanes on and off, with a small cell limit
(checkpointed traceback), as database hits (many pairs per query: the
query-shared lanes), and one by one with ``align``.  Run it on two versions
(e.g. a ``git archive`` of the old commit on PYTHONPATH) and compare the
outputs::

    git archive 129d1ee swgpu_tools | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base .venv/bin/python benchmarks/align_dump.py --out /tmp/base.txt
    .venv/bin/python benchmarks/align_dump.py --out /tmp/new.txt
    cmp /tmp/base.txt /tmp/new.txt

The output has one line per alignment (``config k score qs qe ss se ops``)
and ends with a SHA-1 of everything above it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

import numpy as np

import swgpu_tools
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

try:
    from swgpu_tools.alignment import align, align_many, align_pairs
except ImportError:  # before the split (issue 13)
    from swgpu_tools.alignment import align, align_many, align_pairs


def protein_pairs(rng, n):
    pairs = []
    for t in range(n):
        a = rng.integers(0, 23, int(rng.integers(1, 300))).astype(np.uint8)
        if t % 3 == 0:  # unrelated, very different lengths
            b = rng.integers(0, 23, int(rng.integers(1, 400))).astype(np.uint8)
        else:  # related: mutated, with a prefix, a cut and a few indels
            b = a.copy()
            b[rng.random(len(b)) < 0.15 + 0.02 * (t % 10)] = rng.integers(0, 23)
            cuts = np.sort(rng.integers(0, len(b) + 1, int(rng.integers(0, 4))))
            parts, last = [], 0
            for c in cuts:
                parts.append(b[last:c])
                if rng.random() < 0.5:
                    parts.append(rng.integers(0, 23, int(rng.integers(1, 6))))
                    last = c
                else:
                    last = min(len(b), c + int(rng.integers(1, 6)))
            parts.append(b[last:])
            b = np.concatenate([rng.integers(0, 23, int(rng.integers(0, 15)))] + parts)
            b = b.astype(np.uint8) if len(b) else a[:1].copy()
        pairs.append((a, b))
    return pairs


def lines(tag, alns):
    for k, a in enumerate(alns):
        yield (
            f"{tag} {k} {a.score} {a.query_start} {a.query_end} {a.subject_start} "
            f"{a.subject_end} {a.operations.decode()}"
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--pairs", type=int, default=240)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    print(f"swgpu_tools from {swgpu_tools.__file__}", file=sys.stderr)
    rng = np.random.default_rng(20261123)
    blosum = ScoringScheme("BLOSUM62", 11, 1)
    pam = ScoringScheme("PAM30", 0, 3)  # linear gaps
    dna = ScoringScheme(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    pairs = protein_pairs(rng, args.pairs)
    dna_pairs = [(a % 4, b % 4) for a, b in pairs[: args.pairs // 2]]
    out = []
    for sname, s, ps in (
        ("blosum62", blosum, pairs),
        ("pam30lin", pam, pairs),
        ("dna", dna, dna_pairs),
    ):
        for mode in ("local", "global", "semiglobal"):
            for lanes in (True, False):
                alns = align_pairs(
                    ps,
                    s.matrix,
                    s.gap_open,
                    s.gap_extend,
                    threads=args.threads,
                    mode=mode,
                    pair_lanes=lanes,
                )
                out.extend(lines(f"pairs/{sname}/{mode}/lanes={int(lanes)}", alns))
            alns = align_pairs(
                ps,
                s.matrix,
                s.gap_open,
                s.gap_extend,
                threads=args.threads,
                mode=mode,
                cell_limit=20_000,
            )
            out.extend(lines(f"pairs/{sname}/{mode}/cell_limit=20000", alns))
            one = [
                align(a, b, s.matrix, s.gap_open, s.gap_extend, mode=mode, cell_limit=700)
                for a, b in ps[:60]
            ]
            out.extend(lines(f"align/{sname}/{mode}/cell_limit=700", one))
    # database hits: many subjects per query (query-shared lanes), some long and strong
    texts = [rng.integers(0, 20, int(n)).astype(np.uint8) for n in rng.integers(20, 600, 12)]
    subjects = []
    for t in range(400):
        q = texts[t % len(texts)]
        if t % 4 == 0:
            b = q.copy()
            b[rng.random(len(b)) < 0.1 * (t % 7)] = rng.integers(0, 20)
            subjects.append(np.concatenate([rng.integers(0, 20, int(rng.integers(0, 40))), b]))
        else:
            subjects.append(rng.integers(0, 20, int(rng.integers(5, 900))))
    letters = np.frombuffer(b"ARNDCQEGHILKMFPSTWYV", np.uint8)
    qset = SequenceSet.from_pairs(
        [(f"q{i}", letters[t].tobytes().decode()) for i, t in enumerate(texts)]
    )
    sset = SequenceSet.from_pairs(
        [(f"s{i}", letters[t.astype(np.int64)].tobytes().decode()) for i, t in enumerate(subjects)]
    )
    qe, se = blosum.encode(qset), blosum.encode(sset)
    qi = np.arange(400) % len(texts)
    si = np.arange(400)
    for lanes in (True, False):
        alns = align_many(
            qe,
            se,
            qi,
            si,
            blosum.matrix,
            11,
            1,
            threads=args.threads,
            pair_lanes=lanes,
            backend="cpu",
        )
        out.extend(lines(f"hits/blosum62/local/lanes={int(lanes)}", alns))
    for mode in ("global", "semiglobal"):
        alns = align_many(
            qe, se, qi, si, blosum.matrix, 11, 1, threads=args.threads, mode=mode, backend="cpu"
        )
        out.extend(lines(f"hits/blosum62/{mode}", alns))
    text = "\n".join(out) + "\n"
    digest = hashlib.sha1(text.encode()).hexdigest()
    with open(args.out, "w") as fh:
        fh.write(text + f"sha1 {digest}\n")
    print(f"{len(out)} alignments, sha1 {digest}")


if __name__ == "__main__":
    main()
