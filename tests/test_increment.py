"""Re-scans that score only what changed (swgpu_tools.engine.increment): after
any history of releases, a shard's top-k per query equals a scan from scratch.

The search is brute force over an independent score table (a plain
O(mn) Smith-Waterman of every pair, tests/reference.py), so these tests check
the increment logic alone; test_rescan.py runs it through the workflow.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swgpu_tools.engine.increment import scan_shard
from swgpu_tools.io.statefile import read_state, write_state
from swgpu_tools.sequences import SequenceSet

LETTERS = "ACDEFGHIKLMNPQRSTVWY"


def _score(a: str, b: str) -> int:
    """A cheap stand-in score with many ties: shared letters (a pure function of the pair)."""
    return len(set(a) & set(b)) + (5 if a == b else 0)


class BruteSearch:
    def __init__(self, queries: SequenceSet, shard: SequenceSet):
        self.q = [queries.sequence(i) for i in range(len(queries))]
        self.s = [shard.sequence(i) for i in range(len(shard))]
        self.ids = shard.ids
        self.cells = 0

    def __call__(self, qi, si, k):
        si = np.arange(len(self.s)) if si is None else np.asarray(si)
        out = []
        for q in qi:
            scores = np.array([_score(self.q[q], self.s[j]) for j in si], dtype=np.int64)
            self.cells += len(si)
            # the kernels' order: score descending, then shard index (accession order)
            order = np.lexsort((si, -scores))[:k]
            out.append((si[order].astype(np.int64), scores[order]))
        return out


def _shard(records: dict[str, str]) -> SequenceSet:
    ids = sorted(records)
    return SequenceSet.from_sequences(ids, [records[i] for i in ids])


def _scratch(queries, shard, top_k):
    res = scan_shard(queries, shard, "s", top_k, 0, None, BruteSearch(queries, shard))
    return [(list(a), list(b)) for a, b in res.top]


seqs = st.text(alphabet=LETTERS, min_size=3, max_size=8)


@st.composite
def histories(draw):
    n = draw(st.integers(3, 25))
    first = {f"s{i:03d}": draw(seqs) for i in range(n)}
    releases = [first]
    for _ in range(draw(st.integers(1, 4))):
        cur = dict(releases[-1])
        for key in list(cur):
            r = draw(st.integers(0, 9))
            if r == 0:
                del cur[key]  # removed
            elif r == 1:
                cur[key] = draw(seqs)  # changed
        for j in range(draw(st.integers(0, 4))):
            cur[f"n{len(releases)}_{j}"] = draw(seqs)  # added
        if not cur:
            cur["s999"] = draw(seqs)
        releases.append(cur)
    queries = {f"q{i}": draw(seqs) for i in range(draw(st.integers(1, 4)))}
    top_ks = [draw(st.integers(1, 6)) for _ in releases]
    margin = draw(st.integers(0, 3))
    return releases, queries, top_ks, margin


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories())
def test_any_release_history_gives_the_scratch_top_k(history, tmp_path_factory):
    releases, queries, top_ks, margin = history
    qset = SequenceSet.from_sequences(list(queries), list(queries.values()))
    state = None
    path = tmp_path_factory.mktemp("state") / "shard.npz"
    for release, top_k in zip(releases, top_ks):
        shard = _shard(release)
        search = BruteSearch(qset, shard)
        res = scan_shard(qset, shard, "s", top_k, margin, state, search)
        got = [(list(a), list(b)) for a, b in res.top]
        assert got == _scratch(qset, shard, top_k)
        write_state(path, res.state)
        state = read_state(path)
        assert state is not None and state.subjects == shard.ids


def test_only_new_and_changed_sequences_are_scored():
    rng = np.random.default_rng(3)
    release = {f"s{i:04d}": "".join(rng.choice(list(LETTERS), 12)) for i in range(400)}
    queries = SequenceSet.from_sequences(["q0", "q1"], ["ACDEFGHIKL", "MNPQRSTVWY"])
    first = scan_shard(
        queries, _shard(release), "s", 5, 5, None, BruteSearch(queries, _shard(release))
    )
    second = dict(release)
    for key in list(second)[:4]:
        second[key] = "WWWWW"  # 4 changed
    second["new1"] = "ACDEFGHIKLMN"  # 1 added
    del second["s0100"]  # 1 removed
    shard = _shard(second)
    search = BruteSearch(queries, shard)
    res = scan_shard(queries, shard, "s", 5, 5, first.state, search)
    assert res.stats["mode"] == "incremental" and res.stats["delta_sequences"] == 5
    assert search.cells == 2 * 5  # each query against the 5 new or changed only
    assert [(list(a), list(b)) for a, b in res.top] == _scratch(queries, shard, 5)


def test_margin_running_out_rescans_only_that_query():
    # q0's stored hits are all removed: it is scored against the whole shard again
    release = {f"s{i:03d}": "AAAAA" for i in range(10)}
    release.update({f"t{i:03d}": "CCCCC" for i in range(10)})
    queries = SequenceSet.from_sequences(["q0", "q1"], ["AAAAA", "CCCCC"])
    first = scan_shard(
        queries, _shard(release), "s", 2, 1, None, BruteSearch(queries, _shard(release))
    )
    second = {k: v for k, v in release.items() if k not in ("s000", "s001", "s002")}
    shard = _shard(second)
    search = BruteSearch(queries, shard)
    res = scan_shard(queries, shard, "s", 2, 1, first.state, search)
    assert res.stats["margin_ran_out"] == 1 and res.stats["full_queries"] == 1
    assert [(list(a), list(b)) for a, b in res.top] == _scratch(queries, shard, 2)


@pytest.mark.parametrize("change", ["scheme", "query", "none"])
def test_what_forces_a_full_scan(change):
    release = {f"s{i:03d}": "ACDEFG"[: 3 + i % 3] for i in range(20)}
    shard = _shard(release)
    queries = SequenceSet.from_sequences(["q0"], ["ACDE"])
    first = scan_shard(queries, shard, "s", 3, 3, None, BruteSearch(queries, shard))
    scheme = "other" if change == "scheme" else "s"
    q2 = SequenceSet.from_sequences(["q0"], ["WWWW" if change == "query" else "ACDE"])
    search = BruteSearch(q2, shard)
    res = scan_shard(q2, shard, scheme, 3, 3, first.state, search)
    assert res.stats["full_queries"] == (0 if change == "none" else 1)
    assert search.cells == (0 if change == "none" else 20)
