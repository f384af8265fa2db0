"""CPU kernel: exact scores (reference, SSEARCH oracle) and top-k selection."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import sw_score

from swgpu_tools.io.fasta import read_fasta
from swgpu_tools.kernels import cpu, top_k_from_scores
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

DATA = Path(__file__).parent / "data"
LETTERS = "ARNDCQEGHILKMFPSTWYVBZX*"
MATRICES = ("BLOSUM62", "BLOSUM45", "PAM30")
_SCHEMES: dict = {}


def scheme(name, gap_open=11, gap_extend=1):
    key = (name, gap_open, gap_extend)
    if key not in _SCHEMES:
        _SCHEMES[key] = ScoringScheme(name, gap_open=gap_open, gap_extend=gap_extend)
    return _SCHEMES[key]


def encode(s, seqs, prefix):
    return s.encode(SequenceSet.from_pairs([(f"{prefix}{i}", q) for i, q in enumerate(seqs)]))


def pieces(enc):
    return [enc.codes[enc.offsets[i] : enc.offsets[i + 1]] for i in range(len(enc))]


def reference_scores(s, q_enc, d_enc):
    return np.array(
        [
            [sw_score(q, d, s.matrix, s.gap_open, s.gap_extend) for d in pieces(d_enc)]
            for q in pieces(q_enc)
        ],
        dtype=np.int32,
    )


seq = st.text(alphabet=LETTERS, min_size=1, max_size=60)
gaps = st.tuples(st.integers(0, 15), st.integers(1, 5))
HYP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HYP
@given(
    queries=st.lists(seq, min_size=1, max_size=3),
    subjects=st.lists(seq, min_size=1, max_size=40),
    gap=gaps,
    matrix=st.sampled_from(MATRICES),
)
def test_score_all_equals_reference(queries, subjects, gap, matrix):
    s = scheme(matrix, *gap)
    q, d = encode(s, queries, "q"), encode(s, subjects, "s")
    got = cpu.score_all(q, d, s.matrix, s.gap_open, s.gap_extend)
    assert got.dtype == np.int32 and got.shape == (len(queries), len(subjects))
    np.testing.assert_array_equal(got, reference_scores(s, q, d))


@HYP
@given(
    queries=st.lists(seq, min_size=1, max_size=2),
    subjects=st.lists(seq, min_size=1, max_size=70),
    gap=gaps,
    matrix=st.sampled_from(MATRICES),
    top_k=st.integers(1, 80),
)
def test_search_equals_reference_top_k(queries, subjects, gap, matrix, top_k):
    s = scheme(matrix, *gap)
    q, d = encode(s, queries, "q"), encode(s, subjects, "s")
    hits = cpu.search(q, d, s.matrix, s.gap_open, s.gap_extend, top_k)
    expected = top_k_from_scores(reference_scores(s, q, d), top_k)
    np.testing.assert_array_equal(hits.query_index, expected.query_index)
    np.testing.assert_array_equal(hits.subject_index, expected.subject_index)
    np.testing.assert_array_equal(hits.score, expected.score)
    for a in (hits.query_index, hits.subject_index, hits.score):
        assert a.dtype == np.int32


def test_linear_and_extreme_gap_costs():
    """gap_open=0 (linear), gap_extend=0, and costs too big for narrow lanes."""
    rng = np.random.default_rng(7)
    queries = ["".join(rng.choice(list(LETTERS), n)) for n in (1, 17, 60)]
    subjects = ["".join(rng.choice(list(LETTERS), n)) for n in rng.integers(1, 60, 45)]
    subjects += ["WWWWCCCCHHHH" * 3, queries[2][::-1], queries[2][5:50]]
    for go, ge in ((0, 1), (0, 4), (5, 0), (11, 1), (200, 3), (40000, 1)):
        s = scheme("BLOSUM62", go, ge)
        q, d = encode(s, queries, "q"), encode(s, subjects, "s")
        np.testing.assert_array_equal(
            cpu.score_all(q, d, s.matrix, go, ge), reference_scores(s, q, d), err_msg=f"{go},{ge}"
        )


def test_wide_matrix_values_and_portable_profile():
    """Scores beyond int8 (no int8 level) and the non-AVX2 column profile."""
    rng = np.random.default_rng(8)
    s = scheme("BLOSUM62", 11, 1)
    queries = ["".join(rng.choice(list(LETTERS), n)) for n in (3, 40)]
    subjects = ["".join(rng.choice(list(LETTERS), n)) for n in rng.integers(1, 60, 40)]
    q, d = encode(s, queries, "q"), encode(s, subjects, "s")
    for factor, go, ge in ((20, 200, 20), (300, 3000, 300)):
        big = s.matrix * factor
        want = np.array([[sw_score(a, b, big, go, ge) for b in pieces(d)] for a in pieces(q)])
        np.testing.assert_array_equal(cpu.score_all(q, d, big, go, ge), want)
    prep = cpu._Prepared(d, s.matrix, 11, 1)
    prep.use_shuffle = False  # what a CPU without AVX2 runs
    row = np.zeros(len(d), np.int32)
    prep.score_query(pieces(q)[1], row, np.zeros(len(d), np.uint8))
    np.testing.assert_array_equal(row, reference_scores(s, q, d)[1])


def test_saturating_lanes_are_rescored_exactly():
    """Self-scores far beyond int8 and int16 lane limits are exact."""
    s = scheme("BLOSUM62")
    rng = np.random.default_rng(3)
    base = "".join(rng.choice(list(LETTERS[:20]), 3500))
    subjects = [
        base,
        base[:20],
        "W" * 3100,
        base[::-1],
        base[:1000] + "PPPP" + base[1000:2000],
        "A" * 5,
    ]
    queries = [base, "W" * 3000, base[:60]]
    q, d = encode(s, queries, "q"), encode(s, subjects, "s")
    got = cpu.score_all(q, d, s.matrix, 11, 1)
    self_score = int(sum(s.matrix[c, c] for c in pieces(q)[0]))
    assert got[0, 0] == self_score > 127  # the int16 level
    assert got[1, 2] == 3000 * 11 > 32767  # past int16: the int32 rescore
    # cheap exact values for the rest: the reference on the short ones
    assert got[2, 1] == sw_score(pieces(q)[2], pieces(d)[1], s.matrix, 11, 1)
    assert got[2, 5] == sw_score(pieces(q)[2], pieces(d)[5], s.matrix, 11, 1)
    # a 4-residue insertion costs 15: the best alignment keeps both halves
    half = sum(int(s.matrix[c, c]) for c in pieces(q)[0][:2000])
    assert got[0, 4] == half - 15


def test_empty_database_and_top_k_larger_than_database():
    s = scheme("BLOSUM62")
    q = encode(s, ["ACDEFG", "WW"], "q")
    d = encode(s, ["ACD", "WWW", "ACD"], "s")
    hits = cpu.search(q, d, s.matrix, 11, 1, top_k=10)
    assert len(hits) == 6
    # ties keep the lower subject index first
    assert list(hits.subject_index[:3]) == [0, 2, 1]
    empty = s.encode(SequenceSet([], np.zeros(0, np.uint8), np.zeros(1, np.int64)))
    hits = cpu.search(q, empty, s.matrix, 11, 1, top_k=5)
    assert len(hits) == 0
    assert cpu.score_all(q, empty, s.matrix, 11, 1).shape == (2, 0)


def test_progress_is_reported():
    s = scheme("BLOSUM62")
    q = encode(s, ["ACDEFG", "WW", "KLM"], "q")
    d = encode(s, ["ACD", "WWW"], "s")
    seen = []
    cpu.search(q, d, s.matrix, 11, 1, top_k=1, progress=lambda a, b: seen.append((a, b)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


@settings(max_examples=200, deadline=None)
@given(scores=st.lists(st.integers(-3, 6), min_size=1, max_size=200), top_k=st.integers(1, 250))
def test_select_top_k_order_and_ties(scores, top_k):
    scores = np.array(scores, dtype=np.int32)
    got = cpu.select_top_k(scores, top_k)
    # the same as a full stable sort: score descending, then index ascending
    expected = sorted(range(len(scores)), key=lambda i: (-int(scores[i]), i))[:top_k]
    assert list(got) == expected


# ---------------------------------------------------------------------------
# SSEARCH oracle (tests/data, made by tests/data/make_oracle_subset.py)
# ---------------------------------------------------------------------------
def load_oracle():
    import pandas as pd

    with gzip.open(DATA / "oracle_ssearch36_subset.tsv.gz", "rt") as fh:
        return pd.read_csv(fh, sep="\t")


@pytest.fixture(scope="module")
def oracle_data():
    s = scheme("BLOSUM62", 11, 1)
    queries = read_fasta(DATA / "oracle_queries.fasta")
    db = read_fasta(DATA / "oracle_db.fasta.gz")
    return s, queries, db, load_oracle()


def test_oracle_subset_files_match(oracle_data):
    _, queries, db, oracle = oracle_data
    assert len(queries) == 7 and len(db) == 2000
    assert len(oracle) == 7 * 2000
    assert set(oracle["query"]) == set(queries.ids)
    assert set(oracle["target"]) == set(db.ids)


def test_oracle_scores_equal_ssearch(oracle_data):
    s, queries, db, oracle = oracle_data
    q, d = s.encode(queries), s.encode(db)
    scores = cpu.score_all(q, d, s.matrix, 11, 1)
    qi = {x: i for i, x in enumerate(queries.ids)}
    si = {x: i for i, x in enumerate(db.ids)}
    got = scores[oracle["query"].map(qi).to_numpy(), oracle["target"].map(si).to_numpy()]
    want = oracle["sw_score"].to_numpy()
    bad = np.flatnonzero(got != want)
    assert len(bad) == 0, oracle.iloc[bad[:10]].assign(ours=got[bad[:10]]).to_string()
    # the top of each query is the same list as SSEARCH's (ties in any order)
    hits = cpu.search(q, d, s.matrix, 11, 1, top_k=50)
    for name, i in qi.items():
        ours = hits.score[hits.query_index == i]
        theirs = np.sort(oracle.loc[oracle["query"] == name, "sw_score"].to_numpy())[::-1][:50]
        np.testing.assert_array_equal(ours, theirs)


@HYP
@given(
    queries=st.lists(seq, min_size=1, max_size=40),
    subjects=st.lists(seq, min_size=1, max_size=6),
    gap=gaps,
    matrix=st.sampled_from(MATRICES),
    top_k=st.integers(1, 8),
)
def test_many_queries_against_few_subjects_transposed(queries, subjects, gap, matrix, top_k):
    """Each subject scored against the queries (a re-scan's delta): the same hits,
    scores and ties as one query at a time, and as the reference."""
    s = scheme(matrix, *gap)
    q, d = encode(s, queries, "q"), encode(s, subjects, "s")
    args = (q, d, s.matrix, s.gap_open, s.gap_extend, top_k, None)
    plain = cpu._search(*args, transpose=False)
    swapped = cpu._search(*args, transpose=True)
    for name in ("query_index", "subject_index", "score"):
        np.testing.assert_array_equal(getattr(swapped, name), getattr(plain, name))
    ref = top_k_from_scores(reference_scores(s, q, d), top_k)
    np.testing.assert_array_equal(swapped.score, ref.score)
    np.testing.assert_array_equal(swapped.subject_index, ref.subject_index)
    # the automatic choice takes it where it pays, with a symmetric matrix only
    assert cpu._transpose_pays(40, 6, s.matrix) == bool(np.array_equal(s.matrix, s.matrix.T))
    assert not cpu._transpose_pays(6, 6, s.matrix)
