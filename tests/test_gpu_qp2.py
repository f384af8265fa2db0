"""Two queries per register (swgpu_tools.kernels.gpu.qp2).

* Host layouts (no GPU): the plan of tiles, the lane information, the profile and the
  database stream, each checked against a brute-force reading on random inputs.
* Simulator (slow): every score of a search through the qp2 path (tiles, a query across
  a tile edge, several queries in a tile, one starting on lane 0 below another tile, and
  the 32-bit re-scoring of flagged scores) equals the plain-Python reference.
* GPU (``-m gpu``): random databases against the CPU backend, and scores above the
  16-bit range, with qp2 forced on.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.kernels.gpu import qp2
from swgpu_tools.kernels.gpu.codegen import QP2_FLAG, qp2_kernel_source


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 700), min_size=1, max_size=40),
    R=st.sampled_from([4, 8, 32]),
)
def test_plan_lays_every_query_in_whole_lanes_once(lengths, R):
    """Each query's rows, read back tile by tile from the plan, are its rows in order, in
    ceil(len / R) lanes of one half; no two members share a lane; a half's lane 0 is
    'fresh' exactly where a query starts there below another tile; both halves end in
    the last tile."""
    tiles = qp2.plan(lengths, R)
    seen: dict = {}
    for k, t in enumerate(tiles):
        for h, members in enumerate((t.low, t.high)):
            lanes = np.zeros(32, int)
            for q, l0, nl, first in members:
                assert nl > 0 and 0 <= l0 and l0 + nl <= 32
                lanes[l0 : l0 + nl] += 1
                half, nxt = seen.get(q, (h, 0))
                assert half == h and first == nxt, (q, first, nxt)
                seen[q] = (h, first + nl)
            assert lanes.max(initial=0) <= 1
            starts = [m for m in members if m[1] == 0 and m[3] == 0]
            assert t.fresh[h] == (k > 0 and bool(starts))
    for q, n in enumerate(lengths):
        assert seen.get(q, (0, 0))[1] == -(-n // R)
    total = sum(-(-n // R) for n in lengths)
    assert len(tiles) == (0 if total == 0 else -(-max(_halves(lengths, R)) // 32))
    if tiles:
        assert 0 < qp2.fill(lengths, tiles, R) <= 1


@settings(max_examples=100, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 300), min_size=1, max_size=30),
    R=st.sampled_from([4, 8]),
    seed=st.integers(0, 2**16),
)
def test_shares_split_each_tiles_seconds_by_real_rows(lengths, R, seed):
    """Brute force over the rows: each tile's rows (query or padding, from the plan's
    lanes), its seconds split among the queries by the rows each really has there; the
    shares add up to the tiles' seconds; a query of length 0 gets nothing."""
    tiles = qp2.plan(lengths, R)
    secs = np.random.default_rng(seed).uniform(0.01, 1.0, len(tiles))
    want = np.zeros(len(lengths))
    for t, sec in zip(tiles, secs):
        owner = np.full(2 * 32 * R, -1)
        for h, members in enumerate((t.low, t.high)):
            for q, l0, nl, first in members:
                rows = np.arange(first * R, (first + nl) * R)
                real = rows < lengths[q]
                owner[h * 32 * R + l0 * R + np.flatnonzero(real)] = q
        real = owner[owner >= 0]
        for q in set(real.tolist()):
            want[q] += sec * np.count_nonzero(real == q) / len(real)
    got = qp2.shares(lengths, tiles, secs, R)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.sum(), secs.sum(), rtol=1e-9)
    assert (got[np.asarray(lengths) == 0] == 0).all()


def test_shares_a_query_alone_in_its_tiles_gets_their_seconds():
    """Two queries of two full tiles each (one a half): each gets its tiles' seconds,
    halved where the other's rows share the tile."""
    R = 4
    tiles = qp2.plan([64 * R, 32 * R], R)  # 64 lanes: tiles 0-1 low; 32 lanes: tile 0 high
    assert len(tiles) == 2
    got = qp2.shares([64 * R, 32 * R], tiles, [1.0, 3.0], R)
    np.testing.assert_allclose(got, [0.5 + 3.0, 0.5])


def _halves(lengths, R):
    used = [0, 0]
    for n in sorted(lengths, reverse=True):
        if n:
            used[0 if used[0] <= used[1] else 1] += -(-n // R)
    return used


def test_lane_info_masks_and_score_rows():
    t = qp2.Tile(low=[(5, 0, 10, 3), (2, 10, 22, 0)], high=[(7, 0, 32, 0)], fresh=(False, True))
    info = qp2.lane_info(t, {5: 0, 2: 1, 7: 2}).astype(np.int64) & 0xFFFFFFFF
    assert info[0] == 0xFFFF0000  # the high half starts a query on lane 0 below a tile
    assert info[10] == 0xFFFF and not info[1:10].any() and not info[11:32].any()
    low, high = info[32:64].astype(np.int32), info[64:96].astype(np.int32)
    assert low[9] == 0 and low[31] == 1 and (np.delete(low, [9, 31]) == -1).all()
    assert high[31] == 2 and (high[:31] == -1).all()


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10**6), R=st.sampled_from([4, 8]))
def test_profile_words_are_the_packed_scores_of_each_row(seed, R):
    rng = np.random.default_rng(seed)
    K = 24
    matrix = rng.integers(-4, 12, (K, K))
    queries = [rng.integers(0, K, int(n)) for n in rng.integers(1, 3 * 32 * R // 2, 3)]
    tile = qp2.plan([len(q) for q in queries], R)[0]
    prof = qp2.profile(tile, queries, matrix, R).reshape(K + 1, 32 * R)
    for h, members in enumerate((tile.low, tile.high)):
        want = np.full((K + 1, 32 * R), min(int(matrix.min()), 0) - 1)
        for q, l0, nl, first in members:
            rows = queries[q][first * R : (first + nl) * R]
            want[:K, l0 * R : l0 * R + len(rows)] = matrix[:, rows]
        for i in range(32 * R):  # row i: lane i // R, register i % R
            t, r = divmod(i, R)
            col = ((r // 4) * 32 + t) * 4 + r % 4
            word = prof[:, col].astype(np.int64) & 0xFFFFFFFF
            half = (word >> (16 * h)) & 0xFFFF
            assert (np.where(half >= 32768, half - 65536, half) == want[:, i]).all()


class _FakeCuda:
    @staticmethod
    def to_device(a, stream=0):
        return np.asarray(a)

    @staticmethod
    def device_array(n, dtype):
        return np.zeros(n, dtype)


@settings(max_examples=100, deadline=None)
@given(
    lens=st.lists(st.integers(1, 60), min_size=1, max_size=40),
    nr=st.integers(1, 50),
    warps=st.integers(1, 9),
)
def test_stream_holds_every_subject_in_ranges(lens, nr, warps):
    """Read back: each range is its subjects back to back, each subject's first column
    flagged, a flagged pad sentinel after it, pad columns around; the ranges (in the
    table's warp order) cover the subjects in order of their first subject, and rsub0
    names each range's first subject."""
    import numba

    rng = np.random.default_rng(len(lens) * 31 + nr)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    codes = rng.integers(0, 24, int(offsets[-1])).astype(np.uint8)
    real = numba.cuda
    numba.cuda = _FakeCuda
    try:
        s = qp2.Stream(codes, offsets, 24, nr, warps)
    finally:
        numba.cuda = real
    out = s.d_codes
    subj = 0
    for g in np.argsort(s.d_rsub0, kind="stable"):
        a, n = int(s.d_rstart[g]), int(s.d_rlen[g])
        assert (out[a - qp2.PADS : a] == 24).all() and (out[a + n : a + n + qp2.PADS] == 24).all()
        assert out[a + n - 1] == 24 | QP2_FLAG and int(s.d_rsub0[g]) == subj
        pos = a
        while pos < a + n - 1:
            L = lens[subj]
            seg = out[pos : pos + L]
            assert seg[0] & QP2_FLAG and not (seg[1:] & QP2_FLAG).any()
            assert ((seg & 31) == codes[offsets[subj] : offsets[subj + 1]]).all()
            pos += L
            subj += 1
        assert pos == a + n - 1
    assert subj == len(lens)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.integers(1, 10_000), min_size=0, max_size=60), warps=st.integers(1, 12))
def test_warp_order_gives_every_warp_its_share_of_ranges(steps, warps):
    """A permutation of the ranges; warp w (slots w, w + warps, ...) walks the same
    number of ranges as every other warp, or one fewer; each warp's ranges come longest
    first, and no warp gets a range while another warp with room has less load (the
    greedy rule, checked by replaying it)."""
    order = qp2.warp_order(np.array(steps), warps)
    n = len(steps)
    assert sorted(order.tolist()) == list(range(n))
    if not n:
        return
    w_eff = min(warps, n)
    walks = [order[w::w_eff].tolist() for w in range(w_eff)]
    counts = [len(x) for x in walks]
    assert max(counts) - min(counts) <= 1 and sum(counts) == n
    for rs in walks:
        assert [steps[r] for r in rs] == sorted((steps[r] for r in rs), reverse=True)
    # replay: in global longest-first order, each range went to a least-loaded warp
    # among those that still had room
    load = [0] * w_eff
    taken = [0] * w_eff
    owner = {r: w for w, rs in enumerate(walks) for r in rs}
    for r in sorted(range(n), key=lambda r: (-steps[r], r)):
        w = owner[r]
        open_ = [v for v in range(w_eff) if taken[v] < counts[v]]
        assert load[w] == min(load[v] for v in open_)
        load[w] += steps[r]
        taken[w] += 1


def test_warp_order_balances_a_small_database():
    """Heavy-tailed lengths in few ranges a warp (a 50 M-residue shard's case): in database
    order the busiest warp walks far more than the mean, in warp order within 2 %."""
    rng = np.random.default_rng(5)
    lens = np.minimum(rng.lognormal(5.8, 0.7, 200_000).astype(np.int64) + 20, 8_000)
    cum = np.concatenate([[0], np.cumsum(lens)])
    warps = 1_584
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], 4 * warps + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], cuts, [len(lens)]]))
    steps = cum[bounds[1:]] - cum[bounds[:-1]] + 33

    def balance(order):
        load = np.zeros(warps)
        np.add.at(load, np.arange(len(order)) % warps, steps[order])
        return load.mean() / load.max()

    assert balance(np.arange(len(steps))) < 0.9
    assert balance(qp2.warp_order(steps, warps)) > 0.98


def test_kernel_source_renders():
    src = qp2_kernel_source(8, 2, sim=False)
    assert src.count("lds128(prof") == 2 * (2 + 2) and "shfl_up_sync" in src
    assert "hmax3_2" in src and "mad32" in src
    compile(src, "<qp2>", "exec")
    sim = qp2_kernel_source(4, 1, sim=True)
    assert "_xup3(" in sim and "shfl" not in sim
    compile(sim, "<qp2 sim>", "exec")


@settings(max_examples=100, deadline=None)
@given(nq=st.integers(0, 3000), n=st.integers(1, 10**7))
def test_groups_cover_the_queries_in_order_within_the_memory_cap(nq, n):
    parts = qp2.groups(nq, n)
    cap = max(1, qp2.GROUP_BYTES // (8 * n))
    assert np.array_equal(np.concatenate(parts) if parts else np.zeros(0), np.arange(nq))
    sizes = [len(p) for p in parts]
    assert all(0 < k <= cap for k in sizes) and (not sizes or max(sizes) - min(sizes) <= 1)


BENCH_LENGTHS = [144, 189, 222, 375, 464, 567, 657, 729, 850, 1000, 1500, 2005, 2504, 3005]
BENCH_LENGTHS += [3564, 4061, 4548, 4743, 5147, 5478]  # the 20 benchmark queries


def _searcher_facts(**kw):
    from types import SimpleNamespace

    from swgpu_tools.scoring import ScoringScheme

    sc = ScoringScheme()
    facts = dict(mode="s16", _stream=None, n=439_226, _qp2_src=(None, None), qp2="auto",
                 matrix=np.asarray(sc.matrix), gap_open=11, gap_extend=1,
                 lengths=np.full(439_226, 455), record=None)  # fmt: skip
    return SimpleNamespace(**{**facts, **kw})


def test_qp2_is_wanted_where_its_tiles_fill(monkeypatch):
    """'auto': the 20 benchmark queries (97 % of their tiles' rows) take qp2, one short
    query or three (too few rows) keep s16; the switches and the conditions override."""
    monkeypatch.delenv("SWGPU_QP2", raising=False)
    s = _searcher_facts()
    assert qp2.wanted(s, np.array(BENCH_LENGTHS))
    assert not qp2.wanted(s, np.array([144])) and not qp2.wanted(s, np.array([300, 900, 1000]))
    assert qp2.wanted(_searcher_facts(qp2=True), np.array([144]))
    assert not qp2.wanted(_searcher_facts(qp2=False), np.array(BENCH_LENGTHS))
    for kw in (dict(mode="h16"), dict(_stream=object()), dict(gap_open=20), dict(_qp2_src=None)):
        assert not qp2.wanted(_searcher_facts(qp2=True, **kw), np.array(BENCH_LENGTHS)), kw
    assert not qp2.wanted(_searcher_facts(lengths=np.array([5, 0, 7])), np.array(BENCH_LENGTHS))
    monkeypatch.setenv("SWGPU_QP2", "0")
    assert not qp2.wanted(s, np.array(BENCH_LENGTHS))
    monkeypatch.setenv("SWGPU_QP2", "1")
    assert qp2.wanted(s, np.array([144]))


def test_search_path_by_subject_set_size(monkeypatch):
    """``GpuSearcher.path`` (what ``search`` runs, and what gpu_batch_bench.py reports as
    'auto'): 2,000 UniProt-length queries take many queries a launch against a re-scan's
    delta (1,663 subjects, 0.76 M residues; batched 0.32 s against qp2's 2.8 s in run 210)
    and qp2 against a 50 M-residue shard (qp2 4,772 GCUPS, batched 3,381, runs 210-211);
    one short query alone takes neither."""
    from swgpu_tools.kernels.gpu.searcher import GpuSearcher

    for name in ("SWGPU_QP2", "SWGPU_BATCH", "SWGPU_CHAINS"):
        monkeypatch.delenv(name, raising=False)

    def facts(n, residues, **kw):
        return _searcher_facts(**{"n": n, "total_residues": residues, "batch": "auto",
                                  "lengths": np.full(n, 455), **kw})  # fmt: skip

    q2000 = np.full(2_000, 458)
    assert GpuSearcher.path(facts(1_663, 759_240), q2000) == "batched"
    assert GpuSearcher.path(facts(109_820, 50_178_170), q2000) == "qp2"
    assert GpuSearcher.path(facts(109_820, 50_178_170), np.array([144])) == "units"
    assert GpuSearcher.path(facts(109_820, 50_178_170, qp2=False), q2000) == "units"
    assert GpuSearcher.path(facts(1_663, 759_240, batch=False), q2000) == "qp2"


def test_fits_and_overflow_limit():
    m = np.full((24, 24), -1)
    np.fill_diagonal(m, 11)
    assert qp2.fits(m, 11, 1) and not qp2.fits(m, 16, 1)
    assert qp2.overflow_limit(m) == 31744 - 1040 - 11


#: The simulator scripts' start (argv: the tests folder, a seed): random letters ``rs(n)``,
#: and ``reference(qs, db)``: the encoded queries and database and every plain-Python score.
SIM_PREAMBLE = textwrap.dedent(
    r"""
    import json, sys
    import numpy as np
    sys.setswitchinterval(0.0002)
    sys.path.insert(0, sys.argv[1])
    from reference import sw_score
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet
    from swgpu_tools.kernels import gpu

    rng = np.random.default_rng(int(sys.argv[2]))
    scheme = ScoringScheme()
    letters = list("ARNDCQEGHILKMFPSTWYV")

    def rs(n):
        return "".join(rng.choice(letters, n))

    def reference(qs, db):
        edb = scheme.encode(SequenceSet.from_pairs(db))
        eqs = scheme.encode(SequenceSet.from_pairs(qs))
        ref = np.array([[sw_score(eqs.codes[eqs.offsets[i]:eqs.offsets[i + 1]],
                                  edb.codes[edb.offsets[j]:edb.offsets[j + 1]], scheme.matrix,
                                  scheme.gap_open, scheme.gap_extend)
                         for j in range(len(edb))] for i in range(len(eqs))], dtype=np.int32)
        return edb, eqs, ref
    """
)

SIM_SCRIPT = SIM_PREAMBLE + textwrap.dedent(
    r"""
    from swgpu_tools.kernels import top_k_from_scores
    from swgpu_tools.kernels.gpu import qp2

    # R = 4: tiles of 128 rows; the plan: q6, q3, q5 and q0 (from lane 21) in tile 0's low
    # half, q2 and q4 its high half; q0 crosses into tile 1, whose high half starts q1 on
    # lane 0
    qlens = [150, 128, 65, 9, 60, 5, 64, 0]
    qs = [(f"q{i}", rs(n)) for i, n in enumerate(qlens)]
    db = [(f"s{i}", rs(int(rng.integers(1, 30)))) for i in range(6)]
    # (short homologs: the simulator runs a thread per lane, minutes per 100 residues)
    db.append(("hom0", qs[0][1][20:40] + rs(3) + qs[0][1][45:75]))  # across the tile edge
    db.append(("hom1", qs[1][1][10:35]))
    db.append(("hom2", qs[2][1][5:35]))  # q2: 17 lanes of tile 0's high half
    db.append(("dup", db[2][1]))
    db.append(("hom3", qs[3][1] + rs(2)))
    db.append(("one", "W"))
    edb, eqs, ref = reference(qs, db)
    s = gpu.GpuSearcher.from_scheme(edb, scheme, mode="s16", qp2=True, batch=False)
    s.overflow_limit = 60  # the homologs' scores go through the 32-bit re-scoring
    n = len(edb)
    th = s.search(eqs, n)  # every subject: the whole score matrix
    exp = top_k_from_scores(ref, n)
    tiles = qp2.plan(qlens, qp2.ROWS)
    print("RESULT " + json.dumps({
        "equal": bool((th.query_index == exp.query_index).all()
                      and (th.subject_index == exp.subject_index).all()
                      and (th.score == exp.score).all()),
        "flagged": int((ref >= 60).sum()),
        "tiles": len(tiles),
        "fresh": [t.fresh for t in tiles],
        "shared": max(len(t.low) + len(t.high) for t in tiles),
        "used": qp2.wanted(s, np.array(qlens)) and len(s.units) == 1,
    }))
    """
)


@pytest.mark.slow
def test_simulator_qp2_search_matches_reference(monkeypatch):
    """Every score of a qp2 search (top k = every subject) equals the reference's: a
    query across a tile edge, a query starting on lane 0 below a tile, several queries a
    tile, an empty query, the 32-bit re-scoring of flagged scores."""
    from test_kernels_gpu import _sim_child

    monkeypatch.setenv("SWGPU_QP2_ROWS", "4")
    res = _sim_child(SIM_SCRIPT, 3)
    assert res["equal"], res
    assert res["used"] and res["tiles"] == 2 and res["shared"] >= 4, res
    assert [False, True] in res["fresh"] and res["flagged"] >= 3, res


@pytest.mark.gpu
def test_gpu_qp2_random_vs_cpu_and_above_int16():
    """On a GPU, qp2 forced on: random queries and a database with planted homologs (one
    query's self-hit above 32,767, so re-scored) against the CPU backend."""
    from swgpu_tools.kernels import cpu, gpu, top_k_from_scores
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    ok, why = gpu.available()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    rng = np.random.default_rng(11)
    letters = list("ARNDCQEGHILKMFPSTWYV")
    scheme = ScoringScheme()

    def rs(n):
        return "".join(rng.choice(letters, n))

    qlens = [7000, 1500, 900, 640, 300, 144, 64, 33, 12, 1] + list(rng.integers(20, 600, 30))
    qs = [(f"q{i}", rs(int(n))) for i, n in enumerate(qlens)]
    db = [(f"s{i}", rs(int(rng.integers(1, 800)))) for i in range(3000)]
    db += [(f"h{i}", q[1][5 : 5 + 400]) for i, q in enumerate(qs[:20])]
    db.append(("self0", qs[0][1]))  # ~35,000: above the 16-bit and binary16 ranges
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs(qs))
    s = gpu.GpuSearcher.from_scheme(edb, scheme, mode="s16", qp2=True, batch=False)
    want = cpu.score_all(eqs, edb, scheme)
    got = s.all_scores(eqs)
    assert got.max() > 32767
    assert (got == want).all(), np.argwhere(got != want)[:10]
    th = s.search(eqs, 25)
    exp = top_k_from_scores(want.astype(np.int32), 25)
    assert (th.subject_index == exp.subject_index).all() and (th.score == exp.score).all()
