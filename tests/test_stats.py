"""Tests for swgpu_tools.stats (BLAST's Karlin-Altschul statistics).

Reference numbers come from two places:

* hand derivations from the algorithm (commented step by step below);
* a real BLAST+ 2.2.26 blastp XML report stored in Biopython's test suite,
  ``Tests/Blast/xml_2226_blastp_001.xml`` (github.com/biopython/biopython):
  BLOSUM62, gap 11/1, database ``minirefseq_prot`` with 20 sequences and
  6406 residues.  For each query it reports the length adjustment
  (``Statistics_hsp-len``) and the effective search space
  (``Statistics_eff-space``), and for each HSP the raw score, the bit score
  and the E-value.
"""

from __future__ import annotations

import math

import pytest

from swgpu_tools import stats
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.stats import (
    NA,
    bit_score,
    effective_search_space,
    evalue,
    format_bitscore,
    format_evalue,
    length_adjustment,
    lookup,
    spouge_evalue,
)

B62 = lookup("BLOSUM62", 11, 1)

# xml_2226_blastp_001.xml: database size
DB_SEQS = 20
DB_RES = 6406


# ---------------------------------------------------------------- table lookups


def test_blosum62_default_row():
    p = lookup("BLOSUM62", 11, 1)
    assert p is not None
    assert (p.lambda_, p.K, p.H, p.alpha, p.beta) == (0.267, 0.041, 0.14, 1.9, -30)
    assert (p.C, p.alpha_v, p.sigma) == (0.669720, 42.602800, 43.636200)
    # Spouge's correction also needs the ungapped row's alpha and alpha_v
    assert (p.alpha_un, p.alpha_v_un) == (0.7916, 4.964660)


@pytest.mark.parametrize(
    "matrix, gap_open, gap_extend, lam, K, H, alpha, beta",
    [
        ("BLOSUM62", 10, 1, 0.243, 0.024, 0.10, 2.5, -44),
        ("BLOSUM62", 9, 2, 0.279, 0.058, 0.19, 1.5, -19),
        ("BLOSUM50", 13, 2, 0.193, 0.035, 0.12, 1.6, -32),
        ("BLOSUM45", 14, 2, 0.195, 0.032, 0.10, 1.9, -36),
        ("BLOSUM80", 10, 1, 0.299, 0.071, 0.27, 1.1, -14),
        ("BLOSUM90", 10, 1, 0.290, 0.075, 0.28, 1.04, -15),
        ("PAM30", 9, 1, 0.294, 0.11, 0.61, 0.48, -6),
        ("PAM70", 10, 1, 0.291, 0.091, 0.41, 0.71, -9),
        ("PAM250", 14, 2, 0.182, 0.024, 0.073, 2.5, -53),
    ],
)
def test_table_rows(matrix, gap_open, gap_extend, lam, K, H, alpha, beta):
    p = lookup(matrix, gap_open, gap_extend)
    assert p is not None
    assert (p.lambda_, p.K, p.H, p.alpha, p.beta) == (lam, K, H, alpha, beta)


def test_lookup_is_case_insensitive_like_blast():
    assert lookup("blosum62", 11, 1) == lookup("BLOSUM62", 11, 1)


@pytest.mark.parametrize(
    "matrix, gap_open, gap_extend",
    [
        ("BLOSUM62", 11, 3),  # matrix known, gap costs not tabulated
        ("BLOSUM62", 0, 1),  # linear gaps
        ("BLOSUM62", 32767, 32767),  # the ungapped row is not a gapped scheme
        ("PAM250", 11, 1),
        ("BENNER22", 11, 1),  # no BLAST table at all
        ("IDENTITY", 1, 1),
    ],
)
def test_unsupported_schemes_have_no_statistics(matrix, gap_open, gap_extend):
    assert lookup(matrix, gap_open, gap_extend) is None


def test_table_size_matches_blast():
    # BLOSUM45 14 rows, BLOSUM50 16, BLOSUM62 12, BLOSUM80 10, BLOSUM90 8,
    # PAM250 16, PAM30 7, PAM70 7 (each including the ungapped row).
    assert len(stats.supported()) == 13 + 15 + 11 + 9 + 7 + 15 + 6 + 6


def test_every_tabulated_scheme_is_a_valid_scoring_scheme():
    # the names must be ones Biopython (our matrix source) knows
    for matrix, gap_open, gap_extend in stats.supported():
        ScoringScheme(matrix, gap_open, gap_extend)


# ------------------------------------------------------------------ bit scores


@pytest.mark.parametrize(
    "raw, reported",
    # (Hsp_score, Hsp_bit-score) pairs from xml_2226_blastp_001.xml
    [
        (350, 139.428),
        (219, 88.9669),
        (204, 83.1889),
        (29, 15.779),
        (522, 205.682),
        (101, 43.5134),
        (72, 32.3426),
        (506, 199.519),
    ],
)
def test_bit_score_matches_blast_report(raw, reported):
    assert bit_score(raw, B62) == pytest.approx(reported, abs=5e-4)


def test_bit_score_formula_by_hand():
    # (0.267 * 100 - ln 0.041) / ln 2 = (26.7 + 3.1941832) / 0.6931472
    assert bit_score(100, B62) == pytest.approx(43.12819, abs=1e-5)
    assert B62.bit_score(100) == bit_score(100, B62)


# ---------------------------------------------------------- length adjustment


def test_length_adjustment_by_hand_m102():
    """BLOSUM62 11/1, m=102, n=6406, N=20, derived by hand from the algorithm.

    alpha/lambda = 1.9/0.267 = 7.116105, beta = -30, log K = -3.194183.
    ell_max: a=20, -b = 102*20 + 6406 = 8446, c = 102*6406 - 6406/0.041 = 497168.1,
             ell_max = 2c / (8446 + sqrt(8446^2 - 4*20*c)) = 70.70.
    i=1: ell=0, ss=653412, ell_bar = 7.116105*(ln 653412 - 3.194183) - 30 = 42.554
         (>= ell: ell_min=0; gap 42.6 > 1; in range -> next 42.554)
    i=2: ell=42.554, ss=59.446*5554.92, ell_bar = 37.698 < ell -> ell_max = 42.554;
         in range -> next 37.698
    i=3: ell=37.698, ss=64.302*5652.04, ell_bar = 38.379 >= ell -> ell_min = 37.698,
         38.379 - 37.698 <= 1: converged.
    floor(37.698) = 37; ceil = 38 <= ell_max, f(38) = 7.116105*(ln(64*5646) - 3.194183)
    - 30 = 38.338 >= 38, so L = 38.  Search space (102-38)*(6406-20*38) = 361344.
    BLAST 2.2.26+ reported exactly these: hsp-len 38, eff-space 361344.
    """
    L, converged = length_adjustment(102, DB_RES, DB_SEQS, B62)
    assert (L, converged) == (38, True)
    assert effective_search_space(102, DB_RES, DB_SEQS, B62) == 361344


@pytest.mark.parametrize(
    "query_length, hsp_len, eff_space",
    # (Iteration_query-len, Statistics_hsp-len, Statistics_eff-space)
    [(32, 7, 156650), (102, 38, 361344), (98, 37, 345626)],
)
def test_length_adjustment_matches_blast_report(query_length, hsp_len, eff_space):
    L, _ = length_adjustment(query_length, DB_RES, DB_SEQS, B62)
    assert L == hsp_len
    assert effective_search_space(query_length, DB_RES, DB_SEQS, B62) == eff_space


def test_length_adjustment_zero_when_search_space_too_small():
    # c = m*n - max(m, n)/K = 100 - 10/0.041 < 0: BLAST returns 0 (not converged)
    assert length_adjustment(10, 10, 1, B62) == (0, False)
    assert length_adjustment(0, 1000, 1, B62) == (0, False)


def test_length_adjustment_keeps_search_space_meaningful():
    """BLAST's documented guarantee: K (m - L)(n - N L) > max(m, n), converged or not."""
    p = B62
    cases = [
        (300, 10**8, 300000),
        (50, 10**6, 5000),
        (1000, 2 * 10**9, 10**7),
        (32, 6406, 20),
        (5000, 200000, 100000),
        (250, 10**11, 4 * 10**8),
    ]
    for m, n, N in cases:
        L, _ = length_adjustment(m, n, N, p)
        assert L >= 0
        assert p.K * (m - L) * (n - N * L) > max(m, n)
        assert effective_search_space(m, n, N, p) == (m - L) * (n - N * L)


def test_length_adjustment_is_a_fixed_point_bracket():
    """When the iteration converges, L = floor(fixed point of f): f(L) >= L > f(L+1) - 1."""
    p = B62

    def f(ell, m, n, N):
        return (p.alpha / p.lambda_) * (p.logK + math.log((m - ell) * (n - N * ell))) + p.beta

    for m, n, N in [
        (300, 10**8, 300000),
        (1000, 2 * 10**9, 10**7),
        (500, 10**9, 3 * 10**6),
        (250, 10**11, 4 * 10**8),
        (102, 6406, 20),
    ]:
        L, converged = length_adjustment(m, n, N, p)
        assert converged
        assert f(L, m, n, N) >= L
        assert f(L + 1, m, n, N) < L + 1
    # a short query in a database of short sequences: the fixed point lies beyond
    # what the search space allows, BLAST reports "not converged" and the best value
    L, converged = length_adjustment(50, 10**6, 5000, p)
    assert not converged and f(L, 50, 10**6, 5000) > L


# ------------------------------------------------------------------- E-values


def test_classic_evalue_by_hand():
    # searchsp 361344 * 0.041 * exp(-0.267 * 60) = 14815.104 * 1.10307e-7
    assert evalue(60, 102, DB_RES, DB_SEQS, B62) == pytest.approx(1.634207e-3, rel=1e-6)
    assert B62.evalue(60, 102, DB_RES, DB_SEQS) == evalue(60, 102, DB_RES, DB_SEQS, B62)


# Spouge E-values against blastp 2.12 itself (exact printed strings, every
# tabulated matrix/gap pair): tests/test_blast_fixture.py.  (BLAST+ 2.2.26's
# report above used the error function where current BLAST+ uses the normal
# CDF, so it is no reference for them.)


def test_spouge_evalue_approaches_product_form_for_long_sequences():
    """For m, n >> the expected alignment length, area -> (m - l(y)) (n - l(y))."""
    p = B62
    y, m, n, db = 80, 10**7, 10**7, 10**9
    ell = p.alpha * y + 2 * (p.gap_open + p.gap_extend) * (p.alpha_un - p.alpha)
    approx = p.K * math.exp(-p.lambda_ * y) * (m - ell) * (n - ell) * db / n
    assert spouge_evalue(y, m, n, db, p) == pytest.approx(approx, rel=1e-6)


def test_spouge_evalue_grows_with_lengths_and_falls_with_score():
    e = lambda y, m, n: spouge_evalue(y, m, n, 10**8, B62)  # noqa: E731
    assert e(100, 300, 400) > e(101, 300, 400)
    assert e(100, 600, 400) > e(100, 300, 400)
    assert B62.spouge_evalue(100, 300, 400, 10**8) == e(100, 300, 400)


# ----------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    "value, text",
    [
        (0.0, "0.0"),
        (9.9e-181, "0.0"),
        (1.0e-180, "1.00e-180"),
        (2.44722e-169, "2.45e-169"),
        (1.99275e-46, "1.99e-46"),
        (2e-45, "2.00e-45"),
        (1.12281e-05, "1.12e-05"),
        (0.00089, "8.90e-04"),
        (0.0009, "0.001"),
        (0.05, "0.050"),
        (0.0999, "0.100"),
        (0.1, "0.10"),
        (0.999, "1.00"),
        (1.5, "1.5"),
        (7.12269, "7.1"),
        (9.99, "10.0"),
        (10.0, "10"),
        (123.6, "124"),
        (None, NA),
        (float("nan"), NA),
    ],
)
def test_format_evalue_like_blast_tabular(value, text):
    assert format_evalue(value) == text


@pytest.mark.parametrize(
    "value, text",
    [
        (477.248, "477"),
        (139.428, "139"),
        (99.95, " 99"),  # > 99.9: truncated integer, width 3
        (88.9669, "89.0"),
        (15.779, "15.8"),
        (9.5, " 9.5"),  # %4.1lf pads, as BLAST does
        (12345.6, "12345"),
        (100000.5, "1.000e+05"),
        (None, NA),
        (float("nan"), NA),
    ],
)
def test_format_bitscore_like_blast(value, text):
    assert format_bitscore(value) == text


# ------------------------------------------------------------ array arguments


def test_array_arguments_match_scalar_calls():
    import numpy as np

    raw = np.array([60, 70, 350, 29])
    m = np.array([102, 98, 102, 32])
    n = np.array([100, 350, 105, 132])
    e = evalue(raw, m, DB_RES, DB_SEQS, B62)
    s = spouge_evalue(raw, m, n, DB_RES, B62)
    b = bit_score(raw, B62)
    for i in range(len(raw)):
        assert e[i] == evalue(int(raw[i]), int(m[i]), DB_RES, DB_SEQS, B62)
        assert s[i] == pytest.approx(
            spouge_evalue(int(raw[i]), int(m[i]), int(n[i]), DB_RES, B62), rel=1e-15
        )
        assert b[i] == bit_score(int(raw[i]), B62)
    assert isinstance(evalue(60, 102, DB_RES, DB_SEQS, B62), float)
    assert isinstance(bit_score(60, B62), float)


def test_erfc_shortcut_equals_math_erfc():
    """stats._erfc skips math.erfc where the result is exactly 2.0; it must return
    what math.erfc returns everywhere (BLAST+'s ErfC is double-precision erfc)."""
    import math

    import numpy as np

    from swgpu_tools import stats

    xs = np.concatenate(
        [np.linspace(-40, 40, 40001), np.nextafter(-8.0, [-9.0, 0.0]), [-8.0, np.nan, -np.inf]]
    )
    got = stats._erfc(xs)
    assert np.array_equal(got, np.array([math.erfc(v) for v in xs]), equal_nan=True)
    assert float(stats._erfc(-3.0)) == math.erfc(-3.0)


def test_spouge_floor_is_never_above_the_evalue_and_tight_for_long_sequences():
    """The merge drops hits whose floor (stats.spouge_evalue_floor) is above the
    E-value cut-off before computing E-values: the floor must never exceed the
    E-value, over scores, lengths and every tabulated scheme; for long sequences it
    must be close (else it filters nothing)."""
    import numpy as np

    rng = np.random.default_rng(5)
    n = 20000
    raw = rng.integers(1, 3000, n).astype(np.float64)
    m = rng.integers(1, 40000, n).astype(np.float64)
    sl = rng.integers(1, 40000, n).astype(np.float64)
    checked = 0
    for matrix, go, ge in [
        ("BLOSUM62", 11, 1),
        ("BLOSUM62", 10, 1),
        ("BLOSUM45", 14, 2),
        ("PAM30", 9, 1),
        ("BLOSUM80", 10, 1),
    ]:
        params = stats.lookup(matrix, go, ge)
        if params is None:
            continue
        for db in (0, 10**6, 2 * 10**8):
            e = stats.spouge_evalue(raw, m, sl, db, params)
            low = stats.spouge_evalue_floor(raw, m, sl, db, params)
            assert (low <= e * (1 + 1e-12)).all()
            checked += 1
            long = (m > 300) & (sl > 300) & (raw < 60)
            assert (low[long] > 0.5 * e[long]).mean() > 0.9
    assert checked >= 12


def test_the_floor_screen_keeps_every_hit_whose_floor_may_pass_and_few_others():
    """stats.spouge_floor_may_pass, the merge's first look at the E-value floor: every
    hit whose floor is at most the cut-off is kept (brute force over scores, lengths,
    cut-offs, database sizes and the tabulated schemes), and it keeps few others
    (else it saves nothing)."""
    import numpy as np

    rng = np.random.default_rng(11)
    n = 30000
    qlens = rng.integers(1, 40000, 700)
    q = rng.integers(0, len(qlens), n)
    raw = rng.integers(1, 400, n)
    sl = np.where(rng.random(n) < 0.02, rng.integers(-1, 3, n), rng.integers(1, 40000, n))
    sl[:3] = [2**24 - 1, 2**24, 2**31]  # the longest lengths' classes
    checked = kept_extra = passing = 0
    for matrix, go, ge in [("BLOSUM62", 11, 1), ("BLOSUM45", 14, 2), ("PAM30", 9, 1)]:
        params = stats.lookup(matrix, go, ge)
        for db in (0, 10**6, 2 * 10**8):
            with np.errstate(divide="ignore", invalid="ignore"):  # the lengths 0 and -1
                low = stats.spouge_evalue_floor(raw.astype(np.float64), qlens[q], sl, db, params)
            for cutoff in (1e-30, 1e-5, 10.0, 1e6):
                ok = stats.spouge_floor_may_pass(qlens, q, raw, sl, db, params, cutoff)
                could = ~(low > cutoff)
                assert ok[could].all(), (matrix, db, cutoff)
                kept_extra += int((ok & ~could).sum())
                passing += int(could.sum())
                checked += 1
    assert checked == 36
    assert 0 < passing and kept_extra < 0.1 * n * checked


def test_floor_screen_with_a_table_kept_for_wider_scores_keeps_the_same_hits():
    """stats.LeastPassing, the floor screen's table made once for the merge's whole score
    range and kept: the screen of any subset of the hits (a narrower range of scores)
    with it keeps exactly the hits a table made for that subset keeps (brute force
    over the tabulated schemes, database sizes and cut-offs), and a table whose range
    does not span the hits is not used (made again)."""
    import numpy as np

    rng = np.random.default_rng(12)
    n = 30000
    qlens = rng.integers(1, 5000, 300)
    q = rng.integers(0, len(qlens), n)
    raw = rng.integers(1, 400, n)
    sl = np.where(rng.random(n) < 0.001, 0, rng.integers(20, 6000, n))
    kept = 0
    for matrix, go, ge in [("BLOSUM62", 11, 1), ("BLOSUM45", 14, 2), ("PAM30", 9, 1)]:
        params = stats.lookup(matrix, go, ge)
        for db in (0, 10**6, 2 * 10**8):
            for cutoff in (1e-30, 1e-5, 10.0, 1e6):
                wide = stats.LeastPassing(qlens, int(raw.min()), int(raw.max()), db, params, cutoff)
                for lo, hi in [(1, 399), (30, 60), (45, 46), (200, 399)]:
                    sub = np.flatnonzero((raw >= lo) & (raw <= hi))
                    args = (qlens, q[sub], raw[sub], sl[sub], db, params, cutoff)
                    fresh = stats.spouge_floor_may_pass(*args)
                    assert (stats.spouge_floor_may_pass(*args, wide) == fresh).all()
                    kept += int(fresh.sum())
                narrow = stats.LeastPassing(qlens, 100, 120, db, params, cutoff)
                assert not narrow.spans(int(raw.min()), int(raw.max()))
                every = stats.spouge_floor_may_pass(qlens, q, raw, sl, db, params, cutoff)
                with_narrow = stats.spouge_floor_may_pass(
                    qlens, q, raw, sl, db, params, cutoff, narrow
                )
                assert (with_narrow == every).all()
    assert 0 < kept < 36 * 4 * n
