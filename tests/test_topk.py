"""The host's top-k per row and segment of a score block (swgpu_tools/kernels/topk.py),
which the GPU's batched searches and a re-scan's joint delta search use, against a
full sort of each segment (kernels.top_k_from_scores)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.kernels import top_k_from_scores
from swgpu_tools.kernels.topk import MAX_SPAN, top_rows


def _reference(scores, k, segments):
    rows, cols, vals = [], [], []
    for r in range(scores.shape[0]):
        for a, b in zip(segments[:-1], segments[1:]):
            if b == a or k == 0:
                continue
            exp = top_k_from_scores(scores[r : r + 1, a:b], k)
            rows += [r] * len(exp.score)
            cols += (exp.subject_index.astype(np.int64) + a).tolist()
            vals += exp.score.tolist()
    return rows, cols, vals


@settings(max_examples=300, deadline=None)
@given(
    m=st.integers(0, 6),
    n=st.integers(1, 40),
    k=st.integers(0, 45),
    hi=st.sampled_from([0, 1, 5, 300, MAX_SPAN + 5, 2**31 - 2]),
    cuts=st.lists(st.integers(0, 40), max_size=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_top_rows_equal_a_full_sort_of_each_segment(m, n, k, hi, cuts, seed):
    """Many ties (narrow score ranges), ranges too wide to count (sorted instead), k
    below, at and above a segment's length, empty segments."""
    scores = np.random.default_rng(seed).integers(0, hi + 1, (m, n)).astype(np.int32)
    segments = [0] + sorted(min(c, n) for c in cuts) + [n]
    rows, cols, vals = top_rows(scores, k, segments)
    want = _reference(scores, k, segments)
    assert (rows.tolist(), cols.tolist(), vals.tolist()) == want


def test_top_rows_refuses_segments_that_do_not_cover_the_row():
    import pytest

    with pytest.raises(ValueError):
        top_rows(np.zeros((1, 5), np.int32), 2, [0, 3])
    with pytest.raises(ValueError):
        top_rows(np.zeros((1, 5), np.int32), 2, [0, 4, 2, 5])
