"""The host's top-k per row and segment of a score block (swgpu_tools/kernels/topk.py),
which the GPU's batched searches and a re-scan's joint delta search use, against a
full sort of each segment (kernels.top_k_from_scores)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.kernels import top_k_from_scores
from swgpu_tools.kernels.topk import MAX_SPAN, segment_places, top_rows


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


_SIM_CHOICE = r"""
import json, sys
import numpy as np
from numba import cuda
from swgpu_tools.kernels.gpu import batched, cache
from swgpu_tools.kernels.topk import segment_places

out = []
for m, n, k, hi, segments, seed in json.loads(sys.argv[2]):  # (argv[1]: the tests' folder)
    scores = np.random.default_rng(seed).integers(0, hi + 1, (m, n)).astype(np.int32)
    segs = np.array(segments, np.int64)
    assert batched.topk_on_gpu(segs, k)
    offs = segment_places(segs, k)
    per = int(offs[-1])
    dc, dv = cuda.device_array(m * per, np.int32), cuda.device_array(m * per, np.int32)
    cache.aux().segment_topk_kernel[m * (len(segs) - 1), batched.TOPK_THREADS](
        cuda.to_device(scores.reshape(-1)), n, cuda.to_device(segs), cuda.to_device(offs), k, dc, dv
    )
    out.append([scores.tolist(), dc.copy_to_host().tolist(), dv.copy_to_host().tolist()])
print("RESULT " + json.dumps(out))
"""

#: (rows, columns, k, highest score, segments, seed): ties in narrow score ranges, the
#: widest scores, an empty segment, k below, at and above a segment's length.
_SIM_CASES = [
    (3, 37, 5, 3, [0, 9, 9, 30, 37], 1),
    (2, 40, 40, 2**31 - 2, [0, 17, 40], 2),
    (2, 33, 12, 40, [0, 33], 3),
]


def test_the_gpus_choice_per_segment_equals_a_full_sort_in_the_simulator():
    """The batched search's top-k on the GPU (``segment_topk_kernel``, a bitonic sort per
    row and segment in shared memory) gives each segment's best in the same order as a
    full sort of it, under the CUDA simulator."""
    import json

    from test_kernels_gpu import _sim_child

    for (m, n, k, hi, segments, _seed), (scores, cols, vals) in zip(
        _SIM_CASES, _sim_child(_SIM_CHOICE, json.dumps(_SIM_CASES))
    ):
        _, want_cols, want_vals = _reference(np.array(scores, np.int32), k, segments)
        assert (cols, vals) == (want_cols, want_vals), (m, n, k, hi, segments)


class _OnDevice:
    """A stand-in for a device array: slices, and a copy to the host."""

    def __init__(self, a):
        self.a = a

    def __getitem__(self, where):
        return _OnDevice(self.a[where])

    def copy_to_host(self):
        return self.a.copy()


@settings(max_examples=200, deadline=None)
@given(
    m=st.integers(1, 5),
    n=st.integers(1, 40),
    k=st.integers(1, 45),
    limit=st.integers(1, 40),
    cuts=st.lists(st.integers(0, 40), max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_gpus_choice_with_overflowed_scores_mended_equals_the_exact_choice(
    m, n, k, limit, cuts, seed
):
    """The batched search's GPU choice is made on packed scores, which saturate at the
    overflow limit; ``batched._rescore_chosen`` re-scores the chosen pairs at or above
    it and orders them again, or chooses a row again from its whole row where a
    segment's every choice overflowed.  With the 32-bit re-scores taken from the exact
    scores, the result must equal the choice on the exact scores (a full sort of each
    segment)."""
    from swgpu_tools.kernels.gpu import batched

    rng = np.random.default_rng(seed)
    exact = rng.integers(0, 60, (m, n)).astype(np.int32)
    over = exact >= limit
    packed = np.where(over, limit + rng.integers(0, 3, (m, n)), exact).astype(np.int32)
    segments = np.array([0] + sorted(min(c, n) for c in cuts) + [n], np.int64)
    offs = segment_places(segments, k)
    per = int(offs[-1])
    _, cols, vals = top_rows(packed, k, segments)  # what the GPU chose
    cols, vals = cols.reshape(m, per).astype(np.int64), vals.reshape(m, per).copy()

    class Searcher:
        overflow_limit = limit

    Searcher.n = n
    members = rng.permutation(m)  # rows are queries in any order

    def rescored(searcher, rows, subjects, members_, *rest):
        return exact[np.argsort(members)][members_[rows], subjects]

    original = batched._rescored
    batched._rescored = rescored
    try:
        batched._rescore_chosen(
            Searcher(),
            cols,
            vals,
            k,
            segments,
            offs,
            _OnDevice(packed.reshape(-1)),
            members,
            *(None,) * 4,  # the query codes, offsets, tables and slot of a real search
        )
    finally:
        batched._rescored = original
    _, want_cols, want_vals = top_rows(exact, k, segments)
    assert cols.reshape(-1).tolist() == want_cols.tolist()
    assert vals.reshape(-1).tolist() == want_vals.tolist()
