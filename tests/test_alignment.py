"""Traceback: the alignment reproduces the kernel score and is well formed."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import alignment_score, sw_score

from swgpu_tools.alignment import Alignment, align_local, align_many, align_pairs, scalar
from swgpu_tools.alignment import query_lanes as QL
from swgpu_tools.io.fasta import read_fasta
from swgpu_tools.kernels import cpu
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

DATA = Path(__file__).parent / "data"
LETTERS = "ARNDCQEGHILKMFPSTWYVBZX*"
_SCHEMES: dict = {}


def scheme(name, gap_open=11, gap_extend=1):
    key = (name, gap_open, gap_extend)
    if key not in _SCHEMES:
        _SCHEMES[key] = ScoringScheme(name, gap_open=gap_open, gap_extend=gap_extend)
    return _SCHEMES[key]


def codes(s, text):
    return s.codes_of_letters[np.frombuffer(text.encode(), dtype=np.uint8)].astype(np.uint8)


def check_alignment(aln: Alignment, q, d, s, expected_score):
    """Every structural property, plus score == expected_score."""
    assert aln.score == expected_score
    ops = aln.operations
    assert isinstance(ops, bytes)
    assert 0 <= aln.query_start <= aln.query_end <= len(q)
    assert 0 <= aln.subject_start <= aln.subject_end <= len(d)
    if expected_score == 0:
        assert ops == b"" and aln.query_end == aln.query_start
        assert aln.subject_end == aln.subject_start
        return
    assert set(ops) <= set(b"MID")
    assert ops[:1] == b"M" and ops[-1:] == b"M"
    assert ops.count(b"M") + ops.count(b"I") == aln.query_end - aln.query_start
    assert ops.count(b"M") + ops.count(b"D") == aln.subject_end - aln.subject_start
    rescored = alignment_score(
        q, d, aln.query_start, aln.subject_start, ops, s.matrix, s.gap_open, s.gap_extend
    )
    assert rescored == aln.score


seq = st.text(alphabet=LETTERS, min_size=1, max_size=60)
# related pairs give long alignments with gaps; unrelated ones short or empty
pair = st.one_of(
    st.tuples(seq, seq),
    st.builds(
        lambda a, cut, ins: (a, a[:cut] + ins + a[cut + len(ins) // 2 :]),
        seq,
        st.integers(0, 60),
        st.text(alphabet=LETTERS, max_size=8),
    ),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p=pair,
    gap=st.tuples(st.integers(0, 15), st.integers(1, 5)),
    matrix=st.sampled_from(("BLOSUM62", "BLOSUM45", "PAM30")),
    cell_limit=st.sampled_from((1, 7, 200_000_000)),
)
def test_random_pairs(p, gap, matrix, cell_limit):
    s = scheme(matrix, *gap)
    q, d = codes(s, p[0]), codes(s, p[1])
    want = sw_score(q, d, s.matrix, s.gap_open, s.gap_extend)
    aln = align_local(q, d, s.matrix, s.gap_open, s.gap_extend, cell_limit=cell_limit)
    check_alignment(aln, q, d, s, want)
    # checkpointed traceback (tiny cell_limit) gives the very same alignment
    if cell_limit != 200_000_000:
        assert align_local(q, d, s.matrix, s.gap_open, s.gap_extend) == aln


def test_gap_extend_zero_and_linear_gaps():
    rng = np.random.default_rng(11)
    for go, ge in ((5, 0), (0, 1), (0, 3), (11, 1)):
        s = scheme("BLOSUM62", go, ge)
        for _ in range(20):
            a = "".join(rng.choice(list(LETTERS[:20]), rng.integers(5, 50)))
            b = a[: len(a) // 3] + "".join(rng.choice(list(LETTERS), 4)) + a[len(a) // 2 :]
            q, d = codes(s, a), codes(s, b)
            aln = align_local(q, d, s.matrix, go, ge, cell_limit=5)
            check_alignment(aln, q, d, s, sw_score(q, d, s.matrix, go, ge))


def test_tie_rules_documented():
    s = scheme("BLOSUM62")
    q = codes(s, "WW")
    d = codes(s, "WWAAAWW")
    aln = align_local(q, d, s.matrix, 11, 1)
    # two equal local alignments: the first end in row-major order wins
    assert (
        aln.score,
        aln.query_start,
        aln.query_end,
        aln.subject_start,
        aln.subject_end,
        aln.operations,
    ) == (22, 0, 2, 0, 2, b"MM")
    nothing = align_local(codes(s, "W"), codes(s, "P"), s.matrix, 11, 1)
    assert nothing == Alignment(0, 0, 0, 0, 0, b"")


def test_align_many_matches_align_local():
    s = scheme("BLOSUM62")
    rng = np.random.default_rng(5)
    texts = ["".join(rng.choice(list(LETTERS[:20]), n)) for n in rng.integers(1, 120, 30)]
    texts += [texts[0][::-1] + texts[0], texts[1] + "WWWW" + texts[2]]
    seqs = s.encode(SequenceSet.from_pairs([(f"s{i}", t) for i, t in enumerate(texts)]))
    qi = rng.integers(0, len(texts), 60)
    si = rng.integers(0, len(texts), 60)
    got = align_many(seqs, seqs, qi, si, s.matrix, 11, 1, threads=2)
    piece = lambda i: seqs.codes[seqs.offsets[i] : seqs.offsets[i + 1]]  # noqa: E731
    scores = cpu.score_all(seqs, seqs, s.matrix, 11, 1)
    for k, aln in enumerate(got):
        assert aln == align_local(piece(qi[k]), piece(si[k]), s.matrix, 11, 1)
        check_alignment(aln, piece(qi[k]), piece(si[k]), s, int(scores[qi[k], si[k]]))
    again = align_pairs(
        [(piece(a), piece(b)) for a, b in zip(qi, si)], s.matrix, 11, 1, threads=1, cell_limit=50
    )
    assert again == got
    assert align_many(seqs, seqs, [], [], s.matrix, 11, 1) == []


def test_lane_passes_agree_with_scalar_passes():
    """The SIMD forward/reverse passes find the same cells as the scalar ones."""
    s = scheme("BLOSUM62")
    rng = np.random.default_rng(21)
    for trial in range(40):
        go, ge = (11, 1) if trial % 2 else (int(rng.integers(0, 6)), int(rng.integers(1, 4)))
        q = rng.integers(0, 23, rng.integers(1, 80)).astype(np.uint8)
        subjects = []
        for _ in range(rng.integers(1, QL.ALN_LANES + 1)):
            if rng.random() < 0.5:  # related: a mutated piece of the query
                piece = q[rng.integers(0, len(q)) :].copy()
                piece[rng.random(len(piece)) < 0.2] = rng.integers(0, 23)
                subjects.append(
                    np.concatenate([rng.integers(0, 23, rng.integers(0, 9)), piece]).astype(
                        np.uint8
                    )
                )
            else:
                subjects.append(rng.integers(0, 23, rng.integers(1, 90)).astype(np.uint8))
        subjects = [x if len(x) else q[:1].copy() for x in subjects]
        for probe in (np.zeros(1, np.int16), np.zeros(1, np.int32)):
            lanes = 32 // probe.itemsize
            check_lane_passes(q, subjects[:lanes], s, go, ge, probe, check_grid=trial < 6)


def local_dp(q, d, matrix, go, ge):
    """The whole local DP matrix H (rows 0..len(q), columns 0..len(d)), plain Python."""
    neg = -(10**9)
    H = np.zeros((len(q) + 1, len(d) + 1), dtype=np.int64)
    F = [neg] * (len(d) + 1)
    for i in range(1, len(q) + 1):
        e = neg
        for j in range(1, len(d) + 1):
            e = max(e - ge, H[i, j - 1] - go - ge)
            F[j] = max(F[j] - ge, H[i - 1, j] - go - ge)
            H[i, j] = max(0, H[i - 1, j - 1] + int(matrix[q[i - 1], d[j - 1]]), e, F[j])
    return H


def check_lane_passes(q, subjects, s, go, ge, probe, check_grid):
    codes = np.concatenate(subjects)
    off = np.r_[0, np.cumsum([len(x) for x in subjects])].astype(np.int64)
    n = len(subjects)
    idx = np.arange(n, dtype=np.int64)
    best, qe, se = (np.zeros(QL.ALN_LANES, np.int64) for _ in range(3))
    lanes = 32 // probe.itemsize
    grid, step, ncols = QL.forward_grid(len(q), off, idx, lanes)
    assert QL.lanes_pass(
        q,
        codes,
        off,
        idx,
        s.matrix,
        go,
        ge,
        False,
        qe,
        se,
        best,
        best,
        qe,
        se,
        probe,
        grid,
        step,
        np.zeros(0, np.int64),
    )
    live = np.flatnonzero(best[:n] > 0)
    for k in range(n):
        assert (best[k], qe[k], se[k]) == scalar.forward_end(q, subjects[k], s.matrix, go, ge)
    # the pass given the best scores (a search's): the same ends and grid samples; a
    # wrong score changes nothing
    for wrong in (0, 1, -1):
        known = best[:n].copy()
        known[0] += wrong
        g2 = np.full_like(grid, -7)
        g2[0] = 0
        g2[:, 0] = 0
        b2, q2, s2 = (np.zeros(QL.ALN_LANES, np.int64) for _ in range(3))
        assert QL.lanes_pass(
            q,
            codes,
            off,
            idx,
            s.matrix,
            go,
            ge,
            False,
            q2,
            s2,
            b2,
            b2,
            q2,
            s2,
            probe,
            g2,
            step,
            known,
        )
        assert (b2[:n] == best[:n]).all() and (q2[:n] == qe[:n]).all() and (s2[:n] == se[:n]).all()
        assert (g2[:, :, :n] == grid[:, :, :n]).all()
        if check_grid:  # the forward pass's samples for the bands: DP values at grid points
            H = local_dp(q, subjects[k], s.matrix, go, ge)
            for c in range(1, grid.shape[0]):
                j = min(c * step, ncols)
                if j <= len(subjects[k]):
                    rows = [min(r * step, len(q)) for r in range(1, grid.shape[1])]
                    assert list(grid[c, 1:, k]) == [H[i, j] for i in rows]
    if len(live) == 0:
        return
    found, a, b = (np.zeros(QL.ALN_LANES, np.int64) for _ in range(3))
    nogrid = np.zeros((0, 0, 0), np.int32)
    assert QL.lanes_pass(
        q,
        codes,
        off,
        idx[live],
        s.matrix,
        go,
        ge,
        True,
        qe[live].copy(),
        se[live].copy(),
        best[live].copy(),
        found,
        a,
        b,
        probe,
        nogrid,
        1,
        np.zeros(0, np.int64),
    )
    for r, k in enumerate(live):
        assert found[r] == best[k] + 1
        assert (a[r], b[r]) == scalar.reverse_start(
            q, subjects[k], qe[k], se[k], best[k], s.matrix, go, ge
        )


def test_int16_lanes_overflow_falls_back_to_int32():
    """A self-alignment scoring far above 32767 comes out exact from align_many."""
    s = scheme("BLOSUM62")
    text = "W" * 3200 + "ACDEFGHIKLMNPQRSTVWY" * 20
    seqs = s.encode(SequenceSet.from_pairs([("a", text), ("b", text[:3000]), ("c", "WWW")]))
    got = align_many(seqs, seqs, [0, 0, 0], [0, 1, 2], s.matrix, 11, 1, threads=1)
    piece = lambda i: seqs.codes[seqs.offsets[i] : seqs.offsets[i + 1]]  # noqa: E731
    scores = cpu.score_all(seqs, seqs, s.matrix, 11, 1)
    assert scores[0, 0] > 32767
    for k, aln in enumerate(got):
        check_alignment(aln, piece(0), piece(k), s, int(scores[0, k]))
        assert aln == align_local(piece(0), piece(k), s.matrix, 11, 1)
    known = scores[0, :3].astype(np.int64)
    assert align_many(seqs, seqs, [0] * 3, [0, 1, 2], s, threads=1, scores=known) == got


def test_known_scores_give_the_same_alignments():
    """Database hits (query lanes) given their best scores, as the traceback step gives
    a search's: the same alignments as without them, and with wrong scores too."""
    s = scheme("BLOSUM62")
    rng = np.random.default_rng(11)
    queries = ["".join(rng.choice(list(LETTERS[:20]), n)) for n in (40, 150, 333)]
    texts = []
    for q in queries:
        for _ in range(23):
            t = list(q[rng.integers(0, len(q) // 3) :])
            for x in np.flatnonzero(rng.random(len(t)) < rng.uniform(0.05, 0.6)):
                t[x] = rng.choice(list(LETTERS[:20]))
            flank = "".join(rng.choice(list(LETTERS[:20]), rng.integers(0, 40)))
            texts.append(flank + "".join(t) if rng.random() < 0.7 else flank + flank)
    qs = s.encode(SequenceSet.from_pairs([(f"q{i}", t) for i, t in enumerate(queries)]))
    db = s.encode(SequenceSet.from_pairs([(f"d{i}", t) for i, t in enumerate(texts)]))
    qi = np.repeat(np.arange(3), 23)
    si = np.arange(len(texts))
    best = cpu.score_all(qs, db, s.matrix, 11, 1)[qi, si].astype(np.int64)
    plain = align_many(qs, db, qi, si, s, threads=2)
    assert [a.score for a in plain] == best.tolist()
    assert align_many(qs, db, qi, si, s, threads=2, scores=best) == plain
    wrong = best + rng.integers(-2, 3, len(best))
    assert align_many(qs, db, qi, si, s, threads=2, scores=wrong) == plain
    with pytest.raises(ValueError, match="scores must have shape"):
        align_many(qs, db, qi, si, s, threads=2, scores=best[:-1])
    # a small cell limit: weak hits' regions one at a time with checkpoints, strong ones'
    # bands falling back to the scalar passes
    assert min(best) < 200 and max(best) >= 200  # weak hits and strong ones
    for known in (None, best):
        assert align_many(qs, db, qi, si, s, threads=2, cell_limit=64, scores=known) == plain


# ---------------------------------------------------------------------------
# SSEARCH oracle pairs
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def oracle_pairs():
    import pandas as pd

    with gzip.open(DATA / "oracle_ssearch36_subset.tsv.gz", "rt") as fh:
        oracle = pd.read_csv(fh, sep="\t")
    # each query's 8 best hits (the long alignments) and 8 weak ones
    ordered = oracle.sort_values(["query", "sw_score", "target"], ascending=[True, False, True])
    top = ordered.groupby("query").head(8)
    weak = oracle[oracle["sw_score"] < 40].groupby("query").head(8)
    return pd.concat([top, weak])


def test_oracle_pairs(oracle_pairs):
    s = scheme("BLOSUM62", 11, 1)
    queries = read_fasta(DATA / "oracle_queries.fasta")
    db = read_fasta(DATA / "oracle_db.fasta.gz")
    q, d = s.encode(queries), s.encode(db)
    qi = np.array([queries.ids.index(x) for x in oracle_pairs["query"]])
    si = np.array([db.ids.index(x) for x in oracle_pairs["target"]])
    got = align_many(q, d, qi, si, s.matrix, 11, 1, threads=2)
    same_coords = 0
    for k, (aln, row) in enumerate(zip(got, oracle_pairs.itertuples())):
        qc = q.codes[q.offsets[qi[k]] : q.offsets[qi[k] + 1]]
        dc = d.codes[d.offsets[si[k]] : d.offsets[si[k] + 1]]
        check_alignment(aln, qc, dc, s, int(row.sw_score))
        # SSEARCH's coordinates describe one optimal alignment: information only
        same_coords += (
            aln.query_start + 1,
            aln.query_end,
            aln.subject_start + 1,
            aln.subject_end,
        ) == (row.qstart, row.qend, row.sstart, row.send)
    print(f"{same_coords}/{len(got)} oracle alignments have SSEARCH's exact coordinates")


OTHER_COLUMNS = r"""
import json, sys
import numpy as np
from swgpu_tools.alignment import align_many
from swgpu_tools.alignment import query_lanes as QL
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import EncodedSequences

rng = np.random.default_rng(int(sys.argv[1]))
q = [rng.integers(0, 20, int(n)).astype(np.uint8) for n in (150, 421, 61)]
subjects, qi = [], []
for k, query in enumerate(q):
    for j in range(40):  # strong hits (mutated copies, banded) and weak ones (pair lanes)
        if j % 3 == 0:
            s = query.copy()
            s[rng.random(len(s)) < 0.15] = rng.integers(0, 20)
            s = np.concatenate([rng.integers(0, 20, j).astype(np.uint8), s])
        else:
            s = rng.integers(0, 20, int(rng.integers(20, 500))).astype(np.uint8)
        subjects.append(s)
        qi.append(k)
def enc(xs):
    return EncodedSequences(np.concatenate(xs), np.r_[0, np.cumsum([len(x) for x in xs])])
got = align_many(enc(q), enc(subjects), np.array(qi, np.int64), np.arange(len(subjects), dtype=np.int64),
                 ScoringScheme("BLOSUM62", 11, 1), threads=2, backend="cpu")
print(json.dumps({"cols": QL.ALN_COLS, "alignments": [
    [a.score, a.query_start, a.query_end, a.subject_start, a.subject_end, repr(a.operations)]
    for a in got]}))
"""


@pytest.mark.slow
def test_the_other_column_count_gives_the_same_alignments():
    """The query lanes' passes carry 4 subject columns per pass over the query where
    the CPU has AVX512VL, else 2 (query_lanes.ALN_COLS): database hits aligned with
    the other count (``SWGPU_ALN_COLS``, in a process of its own, with its own kernel
    cache folder) are the same alignments (subjects of every length modulo 4)."""
    import json
    import os
    import subprocess
    import sys

    from swgpu_tools.alignment.query_lanes import ALN_COLS

    runs = {}
    for cols in (ALN_COLS, 6 - ALN_COLS):
        env = dict(os.environ, SWGPU_ALN_COLS=str(cols))
        env.pop("NUMBA_CACHE_DIR", None)  # the count's own cache folder (cache.source_digest)
        proc = subprocess.run(
            [sys.executable, "-c", OTHER_COLUMNS, "3"], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[cols] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(r["cols"] for r in runs.values()) == [2, 4]
    first, second = runs.values()
    assert len(first["alignments"]) == 120 and first["alignments"] == second["alignments"]
