"""The GPU shape planner (swgpu_tools.kernels.gpu.planner): plain numpy, no GPU.

Checked against what a plan must be, computed here independently: every
subject scored exactly once; s16 items pair neighbours of the length order;
a single-pass shape only gets items that fit; passes per warp task are the
ceiling of its longest item over the shape's width; cells and residues add up;
launch order by critical path; the cheapest shape wins when one shape is
clearly cheapest; bucket lengths stay within a sixth of an octave.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.kernels.gpu import planner
from swgpu_tools.kernels.gpu.codegen import WARP


def _plan(lengths, mode, L, one=None, multi=None, sim=False, subset=None):
    lengths = np.asarray(lengths, dtype=np.int64)
    sub = np.arange(len(lengths)) if subset is None else np.asarray(subset, dtype=np.int64)
    order = sub[np.argsort(lengths[sub], kind="stable")]
    one, multi = planner.menu(mode, one, multi, sim=sim)
    return planner.plan(lengths, order, mode, L, one, multi, sim=sim), order


def _check(parts, lengths, order, mode, sim=False):
    lengths = np.asarray(lengths, dtype=np.int64)
    ipi = 2 if mode == "s16" else 1
    seen = []
    for p in parts:
        items = np.asarray(p.items).reshape(-1, ipi)
        assert items.shape[0] == p.n_items and p.items.dtype == np.int32
        ppw = 1 if sim else WARP // p.G
        assert p.n_wtasks == -(-p.n_items // ppw)
        W = p.G * p.R
        ilen = np.where(items >= 0, lengths[np.maximum(items, 0)], 0).max(axis=1)
        # passes of each warp task: its longest item over the width, at least 1
        want = [
            max(1, -(-int(ilen[k * ppw : (k + 1) * ppw].max()) // W)) for k in range(p.n_wtasks)
        ]
        assert np.asarray(p.wnpass).tolist() == want
        assert p.max_passes == max(want)
        assert p.cells == sum(want) * ppw * W * ipi
        assert p.residues == int(lengths[items[items >= 0]].sum())
        seen.extend(items[items >= 0].ravel().tolist())
        if mode == "s16":  # pairs of neighbours in the length order
            pos = {int(s): k for k, s in enumerate(order)}
            for a, b in items:
                if b >= 0:
                    assert pos[int(b)] == pos[int(a)] + 1 and pos[int(a)] % 2 == 0
                else:
                    assert pos[int(a)] == len(order) - 1 and len(order) % 2 == 1
    assert sorted(seen) == sorted(np.asarray(order).tolist())  # each subject exactly once
    crit = [p.critical for p in parts]
    assert crit == sorted(crit, reverse=True)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 6000), min_size=1, max_size=300),
    L=st.integers(1, 5000),
    mode=st.sampled_from(["s16", "s32"]),
)
def test_plan_properties(lengths, L, mode):
    parts, order = _plan(lengths, mode, planner.length_bucket(L))
    _check(parts, lengths, order, mode)
    multi = {(G, R) for G, R in planner.MULTI_SHAPES[mode]}
    for p in parts:
        if p.max_passes > 1:  # only multi-pass shapes take several passes
            assert (p.G, p.R) in multi


@settings(max_examples=20, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=40),
    L=st.integers(1, 30),
    data=st.data(),
)
def test_plan_of_a_subset_and_under_the_simulator(lengths, L, data):
    subset = data.draw(st.lists(st.integers(0, len(lengths) - 1), min_size=1, unique=True))
    planner_configs = planner.CONFIGS
    try:
        planner.CONFIGS = ((2, 1), (2, 2), (2, 4))
        for mode in ("s16", "s32"):
            parts, order = _plan(lengths, mode, L, sim=True, subset=subset)
            _check(parts, lengths, order, mode, sim=True)
            assert {(p.G, p.R) for p in parts} <= {(2, 1), (2, 2), (2, 4)}
    finally:
        planner.CONFIGS = planner_configs


def test_single_pass_only_when_it_fits():
    lengths = [10, 20, 30, 64, 65, 200]
    parts, order = _plan(lengths, "s32", 100, one=[(4, 16)], multi=[(8, 32)])
    _check(parts, lengths, order, "s32")
    for p in parts:
        items = np.asarray(p.items)
        if (p.G, p.R) == (4, 16):
            assert max(lengths[i] for i in items) <= 64
    # 65 and 200 need the multi-pass shape
    multi = [p for p in parts if (p.G, p.R) == (8, 32)]
    assert multi and {65, 200} <= {lengths[i] for p in multi for i in np.asarray(p.items)}


def test_cheapest_shape_wins():
    # 200,000 subjects of length 500: 32x16 and 16x32 both have W = 512, but
    # 16x32 fills its pipeline in 15 steps instead of 31 and R = 32 is rated faster
    lengths = np.full(200_000, 500)
    parts, _ = _plan(lengths, "s32", 1000, one=[(32, 16), (16, 32)], multi=[(32, 32)])
    assert [(p.G, p.R) for p in parts] == [(16, 32)]
    # few subjects: one warp task would take over half of the query's estimated
    # time (the critical-path limit), so the narrower register count wins
    parts, _ = _plan(lengths[:5000], "s32", 1000, one=[(32, 16), (16, 32)], multi=[(32, 32)])
    assert [(p.G, p.R) for p in parts] == [(32, 16)]


def test_menu_and_overrides():
    assert planner.menu("s16") == (planner.SHAPES["s16"], planner.MULTI_SHAPES["s16"])
    assert planner.menu("s32", [(4, 16), (8, 32)]) == (((4, 16), (8, 32)), ((8, 32),))
    assert planner.menu("s32", [(4, 16)], [(32, 32)]) == (((4, 16),), ((32, 32),))
    assert planner.menu("s16", None, None, sim=True)[1] == (
        max(planner.CONFIGS, key=lambda c: c[0] * c[1]),
    )
    assert planner.parse_configs("8x16,16x32;32x32") == ([(8, 16), (16, 32)], [(32, 32)])
    assert planner.parse_configs("8x16") == ([(8, 16)], None)
    assert planner.parse_configs(((4, 16),)) == ([(4, 16)], None)
    assert planner.parse_configs(None) == (None, None)


@pytest.mark.parametrize("L", [1, 2, 3, 17, 144, 600, 2100, 4095])
def test_length_bucket(L):
    b = planner.length_bucket(L)
    assert 2 ** (-1 / 6) - 1e-9 <= b / L <= 2 ** (1 / 6) + 1e-9
    assert planner.length_bucket(L + 1) >= b  # monotone
    assert planner.length_bucket(5000) == planner.length_bucket(4096) == 4096


def test_plans_made_ahead_on_threads_are_the_plans_and_each_is_made_once():
    """PlansAhead (the GPU search's plans made while earlier queries score): what it
    hands out for a key is planner.plan's plan for it, each key is made once however
    often it is started, a key never started gives None, and an error in a plan is
    raised where it is taken."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 3000, 5000).astype(np.int64)
    order = np.argsort(lengths, kind="stable")
    one, multi = planner.menu("s16")
    made = []

    def make(mode, L):
        made.append((mode, L))
        return planner.plan(lengths, order, mode, L, one, multi)

    ahead = planner.PlansAhead()
    keys = [("s16", 144), ("s16", 1000), ("s16", 5478)]
    ahead.start(keys, make)
    ahead.start(keys[:2], make)  # already started: not made again
    ahead.start([("s16", 222), ("s16", 222)], make)  # twice in one call: made once
    assert ahead.take(("s16", 222)) is not None and ahead.take(("s16", 222)) is None
    for key in reversed(keys):
        got = ahead.take(key)
        want = planner.plan(lengths, order, *key, one, multi)
        assert [(p.G, p.R, p.n_items, p.max_passes, p.cells) for p in got] == [
            (p.G, p.R, p.n_items, p.max_passes, p.cells) for p in want
        ]
        for a, b in zip(got, want):
            assert np.array_equal(a.items, b.items) and np.array_equal(a.wnpass, b.wnpass)
        assert ahead.take(key) is None  # taken: gone
    assert sorted(made) == sorted(keys + [("s16", 222)])
    assert ahead.take(("s16", 7)) is None

    def broken(mode, L):
        raise ValueError(f"no plan for {L}")

    ahead.start([("s16", 9)], broken)
    with pytest.raises(ValueError, match="no plan for 9"):
        ahead.take(("s16", 9))
