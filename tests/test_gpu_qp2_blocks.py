"""qp2 a tile a block (swgpu_tools.kernels.gpu.qp2_blocks): a re-scan's delta search.

* Host layouts (no GPU): the chain plan, the tiles' query rows (the profile the kernel
  builds from them equals :func:`qp2.profile`'s), the padded stream; brute-force readings
  on random inputs.
* Simulator (slow): a search by segments through the path (a chain of three tiles, a
  query starting on lane 0 below another tile, several queries a tile, an empty query,
  the 32-bit re-scoring of flagged scores) equals the plain-Python reference's top k of
  each segment.
* GPU (``-m gpu``): random queries (one above the 16-bit range) against the CPU
  backend's scores, by segments, and the same hits as the batched kernels.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gpu_qp2 import SIM_PREAMBLE, _FakeCuda

from swgpu_tools.kernels.gpu import qp2, qp2_blocks
from swgpu_tools.kernels.gpu.codegen import QP2_FLAG, qp2_kernel_source


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 1500), min_size=1, max_size=60),
    R=st.sampled_from([4, 8, 32]),
)
def test_chain_plan_lays_every_query_once_within_its_chain(lengths, R):
    """Read back tile by tile: each query's rows in order, in ceil(len / R) lanes of one
    half, in consecutive tiles of ONE chain; no two members share a lane; a half's lane 0
    is 'fresh' exactly where a query starts there in a chain's later tile; chains
    longest first; a query of at most 32 lanes never crosses a tile edge."""
    tiles, start, count = qp2_blocks.chain_plan(lengths, R)
    assert len(start) == len(count) and (count >= 1).all()
    assert list(start) == list(np.concatenate([[0], np.cumsum(count)[:-1]])) if len(count) else True
    assert int(count.sum()) == len(tiles) and list(count) == sorted(count, reverse=True)
    chain_of = np.repeat(np.arange(len(count)), count)
    seen: dict = {}
    for k, t in enumerate(tiles):
        first_of_chain = k == start[chain_of[k]]
        for h, members in enumerate((t.low, t.high)):
            lanes = np.zeros(32, int)
            for q, l0, nl, first in members:
                assert nl > 0 and 0 <= l0 and l0 + nl <= 32
                lanes[l0 : l0 + nl] += 1
                half, nxt, last = seen.get(q, (h, 0, None))
                assert half == h and first == nxt, (q, first, nxt)
                if first:  # continued: from the tile before, in the same chain, at lane 0
                    assert last == k - 1 and not first_of_chain and l0 == 0
                seen[q] = (h, first + nl, k)
            assert lanes.max(initial=0) <= 1
            starts = [m for m in members if m[1] == 0 and m[3] == 0]
            assert t.fresh[h] == (not first_of_chain and bool(starts))
    for q, n in enumerate(lengths):
        assert seen.get(q, (0, 0, 0))[1] == -(-n // R)
    total = sum(-(-n // R) for n in lengths)
    assert (not tiles) == (total == 0)
    # no worse than one tile per query, and whole-query packing fills most of a tile
    assert len(tiles) <= sum(1 for n in lengths if n) + sum(-(-n // R) // 32 for n in lengths)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), R=st.sampled_from([4, 8]))
def test_profile_from_query_rows_equals_the_hosts(seed, R):
    """What the kernel builds in shared memory (its index arithmetic, replayed here from
    the rendered source's formula) from ``query_rows`` and ``matrix_words`` equals
    :func:`qp2.profile` for every tile."""
    rng = np.random.default_rng(seed)
    K = 24
    matrix = rng.integers(-4, 12, (K, K))
    queries = [rng.integers(0, K, int(n)).astype(np.uint8) for n in rng.integers(1, 90 * R, 7)]
    tiles, _, _ = qp2_blocks.chain_plan([len(q) for q in queries], R)
    rows = qp2_blocks.query_rows(tiles, queries, K, R)
    mext = qp2_blocks.matrix_words(matrix)
    W, K1 = 32 * R, K + 1
    src = qp2_kernel_source(R, 2, sim=False, blocks=True)
    assert f"i = int32((p >> 2) & 31) * {R} + int32(((p >> 7) << 2) | (p & 3))" in src
    p = np.arange(W)
    i = ((p >> 2) & 31) * R + (((p >> 7) << 2) | (p & 3))
    for k, tile in enumerate(tiles):
        lo = mext.reshape(K1, K1)[:, rows[(2 * k) * W + i]]
        hi = mext.reshape(K1, K1)[:, rows[(2 * k + 1) * W + i]]
        built = ((hi.astype(np.int64) << 16) | lo).astype(np.uint32).view(np.int32)
        assert (built.ravel() == qp2.profile(tile, queries, matrix, R)).all(), k


@settings(max_examples=100, deadline=None)
@given(
    lens=st.lists(st.integers(1, 60), min_size=1, max_size=40),
    nr=st.integers(1, 50),
    warps=st.integers(1, 12),
)
def test_padded_stream_gives_every_warp_as_many_ranges(lens, nr, warps):
    """A multiple of ``warps`` ranges; the subjects' ranges as without padding; each empty
    range is a flagged sentinel alone with pad columns of its own around it."""
    import numba

    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    codes = np.random.default_rng(nr).integers(0, 24, int(offsets[-1])).astype(np.uint8)
    real = numba.cuda
    numba.cuda = _FakeCuda
    try:
        plain = qp2.Stream(codes, offsets, 24, nr, warps)
        s = qp2.Stream(codes, offsets, 24, nr, warps, multiple=warps)
    finally:
        numba.cuda = real
    assert s.n_ranges % warps == 0 and s.n_ranges - plain.n_ranges < warps
    empty = np.flatnonzero(s.d_rlen == 1) if min(lens) > 0 else []
    assert len(empty) == s.n_ranges - plain.n_ranges
    got = sorted(
        (int(s.d_rsub0[g]), s.d_codes[s.d_rstart[g] : s.d_rstart[g] + s.d_rlen[g]].tobytes())
        for g in range(s.n_ranges)
        if g not in set(empty)
    )
    want = sorted(
        (int(plain.d_rsub0[g]), plain.d_codes[a : a + plain.d_rlen[g]].tobytes())
        for g, a in enumerate(plain.d_rstart)
    )
    assert got == want
    pads = set()
    for g in empty:
        a = int(s.d_rstart[g])
        assert s.d_codes[a] == 24 | QP2_FLAG and int(s.d_rsub0[g]) == len(lens)
        around = s.d_codes[a - qp2.PADS : a + qp2.PADS + 1]
        assert (np.delete(around, qp2.PADS) == 24).all()
        pads.add(a)
    assert len(pads) == len(empty)


def test_block_kernel_source_renders_and_the_plain_one_is_unchanged():
    plain = qp2_kernel_source(8, 2, sim=False)
    assert "boff" not in plain and "atomic" not in plain and "blocks=" not in plain
    src = qp2_kernel_source(8, 2, sim=False, blocks=True)
    assert "cuda.atomic.add(counter, 0, 1)" in src and "bnd[uint64(base + boff)]" in src
    assert "profg" not in src and src.count("lds128(prof") == 2 * (2 + 2)
    # 12 warps a block: ptxas must keep it within 65,536 / 384 registers (it took 184
    # without the bounds, and the launch failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    assert "LAUNCH_BOUNDS = (384, 1)" in src and "LAUNCH_BOUNDS" not in plain
    compile(src, "<qp2 blocks>", "exec")
    compile(qp2_kernel_source(4, 1, sim=True, blocks=True), "<qp2 blocks sim>", "exec")


SIM_SCRIPT = SIM_PREAMBLE + textwrap.dedent(
    r"""
    from swgpu_tools.kernels.gpu import qp2_blocks
    from swgpu_tools.kernels.topk import top_rows

    # R = 4: a half is 32 lanes x 4 rows; q0 (75 lanes) makes a chain of three tiles, q1
    # (35 lanes) its other half, lengthened by a one-tile bin starting on lane 0
    qlens = [300, 140, 65, 9, 60, 5, 64, 0, 30, 100, 128]
    qs = [(f"q{i}", rs(n)) for i, n in enumerate(qlens)]
    db = [(f"s{i}", rs(int(rng.integers(1, 25)))) for i in range(6)]
    db.append(("hom0", qs[0][1][100:140] + rs(3) + qs[0][1][145:175]))  # across q0's edges
    db.append(("hom1", qs[1][1][110:135]))
    db.append(("hom2", qs[2][1][5:35]))
    db.append(("hom9", qs[9][1][60:90]))
    db.append(("one", "W"))
    edb, eqs, ref = reference(qs, db)
    n, k = len(edb), 3
    segs = np.array([0, 4, 8, n])
    s = gpu.GpuSearcher.from_scheme(edb, scheme, mode="s16", qp2=True, batch=True)
    s.overflow_limit = 60  # the homologs' scores go through the 32-bit re-scoring
    th = s.search(eqs, k, segments=segs)
    _, cols, vals = top_rows(ref, k, segs)
    got_c = th.subject_index.reshape(len(qlens), -1)
    got_v = th.score.reshape(len(qlens), -1)
    tiles, start, count = qp2_blocks.chain_plan(qlens, 4)
    print("RESULT " + json.dumps({
        "path": s.batch_path,
        "equal": bool((got_c == cols.reshape(got_c.shape)).all()
                      and (got_v == vals.reshape(got_v.shape)).all()),
        "rescored": int(s.rescored),
        "flagged": int((ref >= 60).sum()),
        "chains": count.tolist(),
        "fresh": [t.fresh for t in tiles],
    }))
    """
)


@pytest.mark.slow
def test_simulator_qp2_blocks_search_matches_reference(monkeypatch):
    """Each segment's top k of a search through the path equals the reference's: a chain
    of three tiles (the boundary words of a block), a query starting on lane 0 of a
    chain's later tile, several queries a tile, an empty query, flagged scores re-scored."""
    from test_kernels_gpu import _sim_child

    monkeypatch.setenv("SWGPU_QP2_ROWS", "4")
    res = _sim_child(SIM_SCRIPT, 3)
    assert res["path"] == "qp2 blocks" and res["equal"], res
    assert res["chains"][0] == 3 and [False, True] in res["fresh"], res
    assert res["flagged"] >= 3 and res["rescored"] == res["flagged"], res


@pytest.mark.gpu
def test_gpu_qp2_blocks_by_segments_vs_cpu_and_batched():
    """On a GPU: random queries (one self-hit above 32,767, so re-scored) against a
    delta-sized database with planted homologs, by four segments: the path's hits equal
    the CPU backend's scores' top k of each segment, and the batched kernels' hits."""
    from swgpu_tools.kernels import cpu, gpu
    from swgpu_tools.kernels.topk import top_rows
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    ok, why = gpu.available()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    rng = np.random.default_rng(12)
    letters = list("ARNDCQEGHILKMFPSTWYV")
    scheme = ScoringScheme()

    def rs(n):
        return "".join(rng.choice(letters, n))

    qlens = [7000, 2500, 1500, 1025, 1024, 900, 300, 144, 33, 12] + list(rng.integers(20, 900, 150))
    qs = [(f"q{i}", rs(int(n))) for i, n in enumerate(qlens)]
    db = [(f"s{i}", rs(int(rng.integers(1, 1200)))) for i in range(2000)]
    db += [(f"h{i}", q[1][5 : 5 + 400]) for i, q in enumerate(qs[:40])]
    db.append(("long", rs(7600)))
    db.append(("self0", qs[0][1]))  # ~35,000: above the 16-bit and binary16 ranges
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs(qs))
    n, k = len(edb), 20
    segs = np.array([0, 500, 1000, 1500, n])
    want = cpu.score_all(eqs, edb, scheme)
    assert want.max() > 32767
    _, cols, vals = top_rows(want.astype(np.int32), k, segs)
    s = gpu.GpuSearcher.from_scheme(edb, scheme, mode="s16", qp2=True, batch=True)
    th = s.search(eqs, k, segments=segs)
    assert s.batch_path == "qp2 blocks" and s.qp2_blocks_plan["chains"] > 1
    assert (th.subject_index == cols.ravel()).all() and (th.score == vals.ravel()).all()
    s.qp2 = False
    tb = s.search(eqs, k, segments=segs)
    assert s.batch_path == "batched"
    assert (tb.subject_index == th.subject_index).all() and (tb.score == th.score).all()


def test_the_path_is_wanted_for_a_delta_and_many_queries(monkeypatch):
    """'auto': 2,000 UniProt-length queries against a re-scan's delta take the path
    (run 276), 20 queries (a few tiles for 132 blocks) keep the batched kernels; True and
    the switch override the query count, never the conditions (an empty subject, h16,
    boundary words past the cap)."""
    from types import SimpleNamespace

    from swgpu_tools.scoring import ScoringScheme

    monkeypatch.delenv("SWGPU_QP2_BLOCKS", raising=False)
    monkeypatch.setattr(qp2_blocks, "_blocks", lambda: 132)
    monkeypatch.setattr(qp2_blocks, "SIM", False)

    def facts(**kw):
        base = dict(mode="s16", _stream=None, n=6_589, _qp2_src=(None, None), qp2="auto",
                    matrix=np.asarray(ScoringScheme().matrix), gap_open=11, gap_extend=1,
                    lengths=np.full(6_589, 447), total_residues=2_946_895)  # fmt: skip
        return SimpleNamespace(**{**base, **kw})

    many, few = np.full(2_000, 492), np.full(20, 492)
    assert qp2_blocks.wanted(facts(), many) and not qp2_blocks.wanted(facts(), few)
    assert qp2_blocks.wanted(facts(qp2=True), few)
    assert not qp2_blocks.wanted(facts(qp2=False), many)
    for kw in (
        dict(mode="h16"),
        dict(_stream=object()),
        dict(_qp2_src=None),
        dict(lengths=np.array([5, 0, 7])),
        dict(total_residues=2 * 10**7),  # 132 blocks x 20 M columns x 8 bytes > 8 GiB
    ):
        assert not qp2_blocks.wanted(facts(qp2=True, **kw), many), kw
    monkeypatch.setenv("SWGPU_QP2_BLOCKS", "0")
    assert not qp2_blocks.wanted(facts(), many)
    monkeypatch.setenv("SWGPU_QP2_BLOCKS", "1")
    assert qp2_blocks.wanted(facts(), few)
