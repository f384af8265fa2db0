"""Chains of short queries (swgpu_tools.kernels.gpu.chains): which queries go together
and where their rows lie, checked against a brute-force reading of the layout on
random inputs (no GPU: host arrays only).  The kernels that read these layouts are
checked against the plain-Python reference under the CUDA simulator
(test_kernels_gpu.py) and on a GPU (``-m gpu``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.kernels.gpu import chains
from swgpu_tools.kernels.gpu.codegen import PADQ

lengths = st.lists(st.integers(0, 70), min_size=0, max_size=30)


@settings(max_examples=200, deadline=None)
@given(
    qlens=lengths,
    alone=st.integers(2, 60),
    rows=st.integers(1, 200),
    members=st.integers(1, 6),
    nmax=st.integers(1, 50),
    min_rows=st.sampled_from([2, 4, 8, 32]),
)
def test_units_cover_every_query_once_in_order(qlens, alone, rows, members, nmax, min_rows):
    old = chains.ALONE_ROWS, chains.CHAIN_ROWS, chains.MAX_MEMBERS, chains.MEMBER_WORDS
    chains.ALONE_ROWS, chains.CHAIN_ROWS, chains.MAX_MEMBERS, chains.MEMBER_WORDS = (
        alone,
        rows,
        members,
        100,
    )
    try:
        units = chains.units(np.array(qlens, dtype=np.int64), nmax, min_rows)
    finally:
        chains.ALONE_ROWS, chains.CHAIN_ROWS, chains.MAX_MEMBERS, chains.MEMBER_WORDS = old
    cap = max(1, min(members, 100 // nmax))
    flat = np.concatenate(units).tolist() if units else []
    assert sorted(flat) == list(range(len(qlens)))  # every query exactly once
    firsts = [int(u[0]) for u in units]
    assert firsts == sorted(firsts)  # units in the order of their first query
    # the rule, written out: queries with no residues or at least `alone` long are alone;
    # the others fill a chain in query order until it holds `rows` rows or `cap` members
    want, cur, held = [], [], 0
    for q, L in enumerate(qlens):
        if L == 0 or L >= alone or cap == 1:
            want.append([q])
            continue
        cur.append(q)
        held += chains.padded_rows(L, min_rows)
        if held >= rows or len(cur) == cap:
            want.append(cur)
            cur, held = [], 0
    if cur:
        want.append(cur)
    want.sort(key=lambda u: u[0])
    assert [u.tolist() for u in units] == want


@settings(max_examples=200, deadline=None)
@given(
    qlens=st.lists(st.integers(0, 40), min_size=1, max_size=12),
    data=st.data(),
    min_rows=st.sampled_from([2, 4, 32]),
    rowstride=st.sampled_from([1, 25, 625]),
)
def test_layout_puts_each_member_where_its_start_says(qlens, data, min_rows, rowstride):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    qoffs = np.concatenate(([0], np.cumsum(qlens))).astype(np.int64)
    qcodes = rng.integers(0, 24, int(qoffs[-1])).astype(np.uint8)
    cmap = np.arange(256, dtype=np.int64) + 1  # code c -> table row c + 1
    # random units: consecutive runs of queries, queries with no residues alone
    order = list(range(len(qlens)))
    units, cur = [], []
    for q in order:
        if qlens[q] == 0:
            units.append(np.array([q]))
            continue
        cur.append(q)
        if data.draw(st.booleans()):
            units.append(np.array(cur))
            cur = []
    if cur:
        units.append(np.array(cur))
    allq, starts, ulens, mstart, mstarts = chains.layout_arrays(
        qcodes, qoffs, units, cmap, rowstride, min_rows
    )
    assert starts[0] == 0 and len(starts) == len(units) + 1
    for u, mem in enumerate(units):
        block = allq[starts[u] : starts[u + 1]]
        first = mstart[mstarts[u] : mstarts[u + 1]]
        assert len(first) == len(mem) + 1 and first[0] == 0 and first[-1] == ulens[u]
        if ulens[u] == 0:
            assert len(block) == 0
            continue
        assert len(block) == ulens[u] + 2 * PADQ
        assert not block[:PADQ].any() and not block[-PADQ:].any()
        rows = block[PADQ:-PADQ]
        for j, q in enumerate(mem.tolist()):
            a, b = int(first[j]), int(first[j + 1])
            want = (qcodes[qoffs[q] : qoffs[q + 1]].astype(np.int64) + 1) * rowstride * 4
            assert (rows[a : a + qlens[q]] == want).all()
            assert not rows[a + qlens[q] : b].any()  # padding rows: the padding letter
            if len(mem) > 1:  # chain members: even, at least min_rows (the widest group)
                assert (b - a) % 2 == 0 and b - a >= min_rows and b - a - qlens[q] <= min_rows
            else:  # a unit of one query: its rows exactly
                assert b - a == qlens[q]


def test_chains_can_be_turned_off(monkeypatch):
    qlens = np.array([5, 7, 0, 9, 3000, 4], dtype=np.int64)
    on = chains.units(qlens, 10, 2)
    assert [u.tolist() for u in on] == [[0, 1, 3, 5], [2], [4]]
    monkeypatch.setenv("SWGPU_CHAINS", "0")
    assert [u.tolist() for u in chains.units(qlens, 10, 2)] == [[q] for q in range(6)]


def _searcher(n, residues, batch="auto"):
    from types import SimpleNamespace

    return SimpleNamespace(n=n, total_residues=residues, batch=batch, record=None, _stream=None)


def test_batches_for_small_databases_chains_for_shards(monkeypatch):
    """The 'auto' choice between many queries per launch and chains, at the sizes it was
    measured on (RESULTS-gpu.md, run 145): batches won on a re-scan's delta and on
    uniprot20k, chains on a 50 M-residue shard of bench200M (500 UniProt queries and
    144-aa ones); without chains, the 144-aa queries go back to batches."""
    from swgpu_tools.kernels.gpu import batched

    monkeypatch.delenv("SWGPU_CHAINS", raising=False)
    monkeypatch.delenv("SWGPU_BATCH", raising=False)
    q500 = np.full(500, 492)
    short = np.full(280, 144)
    assert batched.use_batches(_searcher(1_663, 759_240), np.full(2_000, 492))
    assert batched.use_batches(_searcher(20_000, 9_055_569), q500)
    assert not batched.use_batches(_searcher(109_807, 49_956_808), q500)
    assert not batched.use_batches(_searcher(109_807, 49_956_808), short)
    assert not batched.use_batches(_searcher(200_000, 1_000_000), short)  # too many subjects
    monkeypatch.setenv("SWGPU_CHAINS", "0")
    assert batched.use_batches(_searcher(109_807, 49_956_808), short)
    monkeypatch.setenv("SWGPU_BATCH", "0")
    assert not batched.use_batches(_searcher(20_000, 9_055_569), q500)
