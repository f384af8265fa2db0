"""The CUDA simulator's longest kernel tests, in a file of their own: ``pytest -n auto
--dist loadfile`` (.ci/run) runs each test file in one worker, and these take 1-2
minutes each on the 2-core VM, as does the first scheme's run in
``tests/test_kernels_gpu.py`` (whose scripts and checks they use)."""

from __future__ import annotations

import pytest
from test_kernels_gpu import ALL_CASES, CHAINS_SCRIPT, _check_sim, _run_sim, _sim_child


@pytest.mark.slow
def test_simulator_kernels_match_reference_open3_extend2():
    """Every mode of tests/test_kernels_gpu.py's simulator run (all scores, top k, the
    backend) with gap open 3, extend 2, each with the path that reads the gap costs
    most: s32 alone, s16 re-scored and streamed in batches, s16 many queries per launch,
    h16 re-scored (the other paths of ALL_CASES take the same gap constants and run with
    the default scheme)."""
    cases = [c for k, c in enumerate(ALL_CASES) if k in (0, 5, 7, 9)]
    assert {c[0] for c in cases} == {"s32", "s16", "h16"}
    res = _run_sim(2, 3, 2, cases=cases)
    assert "backend" in res
    _check_sim(res, len(cases))


@pytest.mark.slow
def test_simulator_chains_with_wide_groups():
    """Chains of short queries with groups of 8 lanes (member windows of 8 steps, members
    padded to 8 rows, subjects of up to 4 passes), in every mode: every score and the
    top k equal the reference's, and the queries did run in chains."""
    res = _sim_child(CHAINS_SCRIPT, 7)
    for mode, r in res.items():
        assert r["scores"] and r["topk"], (mode, r)
        assert r["min_rows"] == 8 and max(r["units"]) > 1, (mode, r)
