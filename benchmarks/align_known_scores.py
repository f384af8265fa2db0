"""The traceback's alignments with and without the search's scores (issue 11.2).

    python benchmarks/align_known_scores.py DIR QUERIES [--threads 1] [--parts]

DIR holds a finished run's ``hits.tsv`` and the hits' subjects as ``subjects.fasta``
(``benchmarks/traceback_inputs_dump.py`` writes both); QUERIES is the query FASTA.
Times ``align_many`` of all hits without scores, with them (``scores=``, as the traceback
step passes them) and with wrong ones (±1 on two pairs of three), a warm-up call first,
and prints a digest of each call's alignments (they must all be the same).  ``--parts``
also times the forward passes, backward bands and band tracebacks of the strong hits one
group at a time on one thread, as ``alignment.hits`` runs them.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np


def load(folder: str, queries_path: str):
    import pandas as pd

    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.scoring import ScoringScheme

    scheme = ScoringScheme()
    hits = pd.read_csv(f"{folder}/hits.tsv", sep="\t")
    queries = read_fasta(queries_path)
    subjects = read_fasta(f"{folder}/subjects.fasta")
    qindex = {(a.split("|")[1] if "|" in a else a): i for i, a in enumerate(queries.ids)}
    sindex = {a: i for i, a in enumerate(subjects.ids)}
    qi = hits["qacc"].map(qindex).to_numpy(np.int64).copy()
    si = hits["sacc"].map(sindex).to_numpy(np.int64).copy()
    q, s = scheme.encode(queries, "queries"), scheme.encode(subjects, "database")
    return scheme, hits["score"].to_numpy(np.int64).copy(), q, s, qi, si


def digest(alignments) -> str:
    return hashlib.sha1(repr(alignments).encode()).hexdigest()[:12]


def parts(scheme, scores, q, s, qi, si) -> str:
    from swgpu_tools.alignment import query_lanes as QL
    from swgpu_tools.alignment.band import backward_band, forward_band_traceback
    from swgpu_tools.alignment.hits import BAND_MIN_SCORE, _groups
    from swgpu_tools.alignment.params import kernel_scoring

    mat, go, ge = kernel_scoring(scheme.matrix, scheme.gap_open, scheme.gap_extend)
    qoff, soff = q.offsets, s.offsets
    perm, starts = _groups(np.arange(len(qi), dtype=np.int64), qi, np.diff(soff)[si], 16)
    probe = np.zeros(1, np.int16)
    buf = np.zeros(QL.GRID_BYTES // 4, np.int32)
    ops = np.zeros(int((np.diff(qoff).max() + np.diff(soff).max()) * 2), np.uint8)
    t_fwd = t_band = t_trace = 0.0
    cells = 0
    for t in range(len(starts) - 1):
        ks = perm[starts[t] : starts[t + 1]]
        qq = q.codes[qoff[qi[ks[0]]] : qoff[qi[ks[0]] + 1]]
        m, subj = len(qq), si[ks].astype(np.int64)
        nc, nr, step, ncols = QL.grid_shape(m, soff, subj, 16)
        grid = QL.grid_view(buf, nc, nr, 16)
        best, qe, se = (np.zeros(16, np.int64) for _ in range(3))
        t0 = time.perf_counter()
        QL.lanes_pass(
            qq, s.codes, soff, subj, mat, go, ge, False, qe, se, best, best, qe, se, probe,
            grid, step, scores[ks],
        )  # fmt: skip
        t_fwd += time.perf_counter() - t0
        lo, hi, hoff = (np.empty(m + 1, np.int64) for _ in range(3))
        for lane in range(len(ks)):
            if best[lane] < BAND_MIN_SCORE:
                continue
            sub = s.codes[soff[subj[lane]] : soff[subj[lane] + 1]]
            t0 = time.perf_counter()
            a, b, n, hvals = backward_band(
                qq, sub, qe[lane], se[lane], best[lane], mat, go, ge, grid[:, :, lane], step,
                step, m, ncols, lo, hi, hoff, 1 << 26,
            )  # fmt: skip
            t_band += time.perf_counter() - t0
            cells += n
            t0 = time.perf_counter()
            forward_band_traceback(
                qq[qe[lane] - a : qe[lane]], sub[se[lane] - b : se[lane]], mat, go, ge,
                best[lane], lo, hi, hoff, hvals, ops, len(ops), 1 << 26,
            )  # fmt: skip
            t_trace += time.perf_counter() - t0
    return (
        f"forward passes {t_fwd:.3f} s, backward bands {t_band:.3f} s ({cells / 1e6:.1f} M "
        f"cells), band tracebacks {t_trace:.3f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("queries")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--parts", action="store_true")
    args = ap.parse_args()
    from swgpu_tools.alignment import align_many

    scheme, scores, q, s, qi, si = load(args.folder, args.queries)
    wrong = scores + (np.arange(len(scores)) % 3 - 1)
    for name, known in (("none", None), ("scores", scores), ("wrong", wrong)):
        align_many(q, s, qi, si, scheme, threads=args.threads, backend="cpu", scores=known)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            got = align_many(
                q, s, qi, si, scheme, threads=args.threads, backend="cpu", scores=known
            )
            times.append(time.perf_counter() - t0)
        print(
            f"{name:7s} {min(times):.3f} s (best of 3; {len(qi):,} hits) {digest(got)}", flush=True
        )
    if args.parts:
        parts(scheme, scores, q, s, qi, si)  # loads the kernels
        print(parts(scheme, scores, q, s, qi, si))


if __name__ == "__main__":
    main()
