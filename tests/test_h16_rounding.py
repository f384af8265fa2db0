"""The rule that makes the binary16 ("h16") GPU kernels exact.

The h16 kernels run the s16 kernels' recurrence in IEEE binary16 lanes, whose
sums are rounded to nearest even above 2,048.  The searcher re-scores in 32
bits every pair whose computed best reaches ``H16_OVERFLOW`` (2,048), and keeps
the others as they are.  That is exact if (a) a computed best below 2,048 equals
the true score and (b) a true score of 2,048 or more always gives a computed
best of 2,048 or more.  This test checks both on pairs whose scores lie around
2,048, with a model of the kernel's arithmetic in binary16 (the same operations
in the same order as ``templates/score_kernel.py.in`` with the h16 helpers),
against the plain integer reference.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import sw_score

from swgpu_tools.kernels.gpu.searcher import H16_OVERFLOW
from swgpu_tools.scoring import ScoringScheme


def r16(v: int) -> int:
    """``v`` rounded to the nearest binary16 value (ties to even), as an int."""
    a = abs(v)
    if a <= 2048:
        return v
    e = a.bit_length() - 11  # keep 11 significant bits
    q, rem = divmod(a, 1 << e)
    half = 1 << (e - 1)
    if rem > half or (rem == half and q & 1):
        q += 1
    return (q << e) if v > 0 else -(q << e)


def h16_best(q, s, matrix, go, ge) -> int:
    """Best local score as the h16 kernel computes it (binary16 sums, exact maxima)."""
    oe = go + ge
    n = len(s)
    h = [0] * (n + 1)  # previous row's H; h[0] is the column before the subject
    f = [-oe] * (n + 1)  # the kernel starts F (and E) at -(open + extend)
    best = 0
    for qa in q:
        row = matrix[qa]
        e = -oe
        diag = 0
        new = [0] * (n + 1)
        for j in range(1, n + 1):
            x = max(max(r16(diag + int(row[s[j - 1]])), 0), f[j])  # ADDMAXR: relu(add) then max
            diag = h[j]
            hj = max(x, e)  # MAX
            t = r16(hj - oe)  # ADD
            e = max(r16(e - ge), t)  # ADDMAX
            f[j] = max(r16(f[j] - ge), t)  # ADDMAX
            new[j] = hj
            best = max(best, hj)
        h = new
    return best


def test_r16_matches_numpy_float16():
    vals = np.arange(-70000, 70000, 7)
    vals = vals[np.abs(vals) <= 65504]
    expect = vals.astype(np.float16).astype(np.int64)
    assert [r16(int(v)) for v in vals] == expect.tolist()


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(300, 460),
    muts=st.integers(0, 60),
    indel=st.integers(0, 6),
    gaps=st.sampled_from([(11, 1), (10, 1), (3, 2), (5, 5)]),
    seed=st.integers(0, 2**32 - 1),
)
def test_h16_overflow_rule(n, muts, indel, gaps, seed):
    go, ge = gaps
    scheme = ScoringScheme("BLOSUM62", go, ge)
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 20, n)
    s = q.copy()
    pos = rng.choice(n, muts, replace=False)
    s[pos] = rng.integers(0, 20, muts)
    cut = int(rng.integers(1, n - 10))
    s = np.concatenate([s[:cut], s[cut + indel :]])  # a deletion (length indel)
    # letter codes of the scheme's alphabet: the first 20 are the amino acids
    qc = np.asarray([scheme.alphabet.index(c) for c in "ARNDCQEGHILKMFPSTWYV"])[q]
    sc = np.asarray([scheme.alphabet.index(c) for c in "ARNDCQEGHILKMFPSTWYV"])[s]
    true = sw_score(qc, sc, scheme.matrix, go, ge)
    got = h16_best(qc.tolist(), sc.tolist(), scheme.matrix, go, ge)
    if true < H16_OVERFLOW:
        assert got == true, (true, got)
    else:
        assert got >= H16_OVERFLOW, (true, got)
