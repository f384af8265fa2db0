"""Tests of the GPU backend (swgpu_tools.kernels.gpu).

* Simulator tests (always run): the generated kernels run under Numba's CUDA
  simulator in a child process (NUMBA_ENABLE_CUDASIM must be set before
  numba.cuda is imported), on tiny random inputs with tiny kernel shapes so
  that pair packing, multi-pass temp columns, padding, the 16-bit overflow
  re-scoring path (with a lowered threshold) and top-k tie-breaking are all
  exercised; scores are compared with the plain-Python reference.
* PTX test (runs where CUDA's NVVM library is installed, no GPU needed): the
  kernels compile for sm_90 and use the DPX-capable s16x2 instructions.
* ``@pytest.mark.gpu`` tests (run on a GPU machine with ``-m gpu``): SSEARCH
  oracle equality, planted benchmark hits, scores above 32,767, a
  40,000 x 40,000 pair, and random databases against the CPU backend.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from children import script_result
from ptx_check import run_ptx_check

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

SIM_SCRIPT = textwrap.dedent(
    r"""
    import json, os, sys
    import numpy as np
    # the simulator's block scheduler polls its threads while holding the GIL: a short
    # switch interval lets the simulated threads run (about 3x faster here)
    sys.setswitchinterval(0.0002)
    sys.path.insert(0, sys.argv[1])
    from reference import sw_score
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet
    from swgpu_tools.kernels import gpu, top_k_from_scores
    from swgpu_tools.kernels.gpu import planner

    # tiny shapes: capacities 2, 4, 8; longer subjects take several passes
    planner.CONFIGS = ((2, 1), (2, 2), (2, 4))
    rng = np.random.default_rng(int(sys.argv[2]))
    go, ge = int(sys.argv[3]), int(sys.argv[4])
    scheme = ScoringScheme("BLOSUM62", go, ge)
    letters = list("ARNDCQEGHILKMFPSTWYVXBZ")

    def rs(n):
        return "".join(rng.choice(letters, n))

    db = [(f"s{i}", rs(int(rng.integers(1, 19)))) for i in range(7)]
    db.append(("dup", db[2][1]))          # a tie with s2 for every query
    db.append(("hom", db[0][1][:4] + rs(2) + db[0][1][4:]))
    qs = [("q0", db[2][1][1:] + rs(1)), ("q1", rs(int(rng.integers(1, 9))))]
    qs.append(("q2", db[8][1][2:9]))  # three queries: the two query slots are reused
    qs.append(("q3", rs(7)))  # q2's length: one launch serves both in batches
    qs.append(("q4", ""))  # no residues: all scores 0
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs(qs))
    ref = np.array([[sw_score(eqs.codes[eqs.offsets[i]:eqs.offsets[i + 1]],
                              edb.codes[edb.offsets[j]:edb.offsets[j + 1]],
                              scheme.matrix, go, ge) for j in range(len(edb))]
                    for i in range(len(eqs))])
    out = {"ref": ref.tolist()}
    exp = top_k_from_scores(ref, 4)

    def same(th):
        return bool(len(th) == len(exp) and (th.query_index == exp.query_index).all()
                    and (th.subject_index == exp.subject_index).all()
                    and (th.score == exp.score).all())

    # budget 300 (600) bytes: a few subjects per batch (streamed, double-buffered, top-k merged)
    full = sys.argv[6] == "full"  # else top-k only (the scores of all pairs not read back)
    # batches of at most 2 queries per launch: two blocks in flight, queries of one
    # length bucket in one launch
    gpu.batched.MAX_QUERIES = 2
    # chains (kernels/gpu/chains.py) at this scale: queries of 12 residues or more alone,
    # the others chained, a chain closed at 3 members or 14 rows
    gpu.chains.ALONE_ROWS, gpu.chains.CHAIN_ROWS, gpu.chains.MAX_MEMBERS = 12, 14, 3
    for mode, limit, budget, depth, *batch in json.loads(sys.argv[5]):
        batch = bool(batch and batch[0])
        s = gpu.GpuSearcher.from_scheme(edb, scheme, mode=mode, max_resident_bytes=budget,
                                        batch=batch)
        s.pipeline_depth = depth            # queries in flight in search()
        if limit is not None:
            s.overflow_limit = limit        # force the 32-bit re-scoring path
        got = s.all_scores(eqs).tolist() if full else ref.tolist()
        th = s.search(eqs, 4)
        key = f"{'b' if batch else ''}{mode}-{limit}-{depth}-{budget}"
        if batch:
            assert getattr(s, "rescored", 0) > 0 or limit is None, key
        out[key] = {
            "scores": got,
            "batches": 1 if s.batches is None else len(s.batches),
            "slots": len(s._slots),
            "topk_equal": same(th),
        }
        if batch:  # a re-scan's joint delta search: the top 3 of each run of subjects
            segs = [0, 3, 3, 8, 9]
            ths = s.search(eqs, 3, segments=segs)
            want = []
            for i in range(len(eqs)):
                for a, b in zip(segs[:-1], segs[1:]):
                    e = top_k_from_scores(ref[i : i + 1, a:b], 3)
                    want += [(i, int(j) + a, int(v)) for j, v in zip(e.subject_index, e.score)]
            out[key]["segments_equal"] = want == list(
                zip(ths.query_index.tolist(), ths.subject_index.tolist(), ths.score.tolist())
            )
    # the backend contract object (kernels/__init__.py): the scheme whole
    if full:
        backend = gpu.GpuBackend(mode="s32")
        first = backend.searcher(edb, scheme)
        out["backend"] = {"topk_equal": same(backend.search(eqs, edb, scheme, 4)),
                          "kept": backend.searcher(edb, scheme) is first}
    print("RESULT " + json.dumps(out))
    """
)


#: (mode, overflow limit, queries in flight, memory budget[, queries batched per
#: launch]) cases: every mode, the re-scoring path (limit lowered to 12), one and
#: two queries in flight, streamed batches (budget 300 bytes), many queries per
#: launch (kernels/gpu/batched.py)
ALL_CASES = [
    ("s32", None, None, 2),
    ("s16", None, None, 2),
    ("s16", 12, None, 2),
    ("s16", 12, None, 1),
    ("s32", None, 300, 2),
    ("s16", 12, 300, 2),
    ("s32", None, None, 2, True),
    ("s16", 12, None, 2, True),
    ("h16", None, None, 2),
    ("h16", 12, 300, 2),
    ("h16", 12, None, 2, True),
]


def _sim_child(script: str, *args, variant: str = "") -> dict:
    """Run ``script`` (argv: the tests folder, then ``args``) under the CUDA simulator in a
    child process, with the s16 kernel ``variant``; the JSON of its last RESULT line."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT))
    env["SWGPU_KERNEL_VARIANT"] = variant
    return script_result(script, TESTS, *args, env=env, timeout=900)


def _run_sim(seed, go=11, ge=1, cases=ALL_CASES, full=True, variant=""):
    mode = "full" if full else "top-k"
    return _sim_child(SIM_SCRIPT, seed, go, ge, json.dumps(cases), mode, variant=variant)


def _check_sim(res, n_cases):
    ref = res.pop("ref")
    backend = res.pop("backend", None)
    assert backend is None or backend == {"topk_equal": True, "kept": True}, backend
    assert len(res) == n_cases
    for key, val in res.items():
        assert val["scores"] == ref, f"{key}: {val['scores']} != {ref}"
        assert val["topk_equal"], key
        assert val["segments_equal"] if key.startswith("b") else True, key
        assert val["slots"] == int(key.split("-")[2]), (key, val["slots"])
        if key.endswith("-300"):
            assert val["batches"] >= 3, (key, val["batches"])
        elif not key.endswith("-None"):
            assert val["batches"] >= 2, (key, val["batches"])
        else:
            assert val["batches"] == 1, (key, val["batches"])


@pytest.mark.slow  # 50-130 s on 2 cores: the CUDA simulator runs a thread per GPU thread
def test_simulator_kernels_match_reference_fast():
    """Default run: top hits of the s16 and h16 kernels with the 32-bit re-scoring path,
    streamed in batches, and many queries per launch (the slow tests add all scores,
    every mode and GpuBackend)."""
    cases = [("s16", 12, 600, 2), ("s16", 12, None, 2, True), ("h16", 12, None, 2)]
    _check_sim(_run_sim(1, cases=cases, full=False), 3)


@pytest.mark.slow  # a variant kept for comparisons, not the default kernel: 25-33 s
def test_simulator_s16_without_the_low_half_bias_matches_reference():
    """The s16 kernel as it was before the low-half bias and the unrolled step loop
    (``SWGPU_KERNEL_VARIANT=nolob,u1``, kept for comparisons): all scores, a multi-pass
    subject and the re-scoring path."""
    cases = [("s16", 12, None, 2), ("s16", None, 600, 1)]
    _check_sim(_run_sim(3, cases=cases, full=True, variant="nolob,u1,b0"), 2)


@pytest.mark.slow
@pytest.mark.parametrize("seed,go,ge", [(1, 11, 1)])  # (2, 3, 2): tests/test_kernels_sim.py
def test_simulator_kernels_match_reference(seed, go, ge):
    res = _run_sim(seed, go, ge)
    assert "backend" in res
    _check_sim(res, len(ALL_CASES))


NEAR_LIMIT_SCRIPT = textwrap.dedent(
    r"""
    import json, sys
    import numpy as np
    sys.setswitchinterval(0.0002)
    sys.path.insert(0, sys.argv[1])
    from reference import sw_score
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet
    from swgpu_tools.kernels import gpu
    from swgpu_tools.kernels.gpu import planner

    planner.CONFIGS = ((2, 2), (2, 4))
    rng = np.random.default_rng(int(sys.argv[2]))
    # large scores, few cells: a 15-letter match scores 30,000, near the s16 limit
    # (32,767 - max score - open - extend with the low half's bias: 29,267)
    scheme = ScoringScheme(match=2000, mismatch=-1500, gap_open=1000, gap_extend=500)

    def rs(n):
        return "".join(rng.choice(list("ACGT"), n))

    q = rs(20)
    db = [("copy", q)] + [(f"sub{k}", q[k % 5 : k % 5 + 13 + k % 5]) for k in range(10)]
    db += [(f"mut{k}", q[:8] + rs(1) + q[9 : 15 + k]) for k in range(4)]
    db += [(f"r{k}", rs(int(rng.integers(0, 12)))) for k in range(5)]
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs([("q", q)]))
    qc = eqs.codes[eqs.offsets[0] : eqs.offsets[1]]
    ref = [sw_score(qc, edb.codes[edb.offsets[j] : edb.offsets[j + 1]], scheme.matrix,
                    scheme.gap_open, scheme.gap_extend) for j in range(len(edb))]
    s = gpu.GpuSearcher.from_scheme(edb, scheme, mode="s16")
    got = s.all_scores(eqs)[0].tolist()
    print("RESULT " + json.dumps({"ref": ref, "got": got, "limit": s.overflow_limit}))
    """
)


@pytest.mark.parametrize(
    "variant",
    # the variant kept for comparisons (not the default kernel) with the slow tests
    ["", pytest.param("nolob,u1,b0", marks=pytest.mark.slow)],
)
def test_simulator_s16_scores_near_the_16_bit_limit(variant):
    """Scores from 26,000 to 40,000 (a scheme of large scores on short sequences): the
    packed kernel with its low half biased by open + extend, and without, re-scores every
    pair whose 16-bit best may have overflowed and matches the reference everywhere."""
    res = _sim_child(NEAR_LIMIT_SCRIPT, 5, variant=variant)
    ref = res["ref"]
    assert res["got"] == ref
    # the case is what it says: scores on both sides of the limit, and above int16
    assert max(ref) > 32767 and any(res["limit"] - 3000 < r < res["limit"] for r in ref)
    assert any(res["limit"] <= r <= 32767 for r in ref)


CHAINS_SCRIPT = textwrap.dedent(
    r"""
    import json, sys
    import numpy as np
    sys.setswitchinterval(0.0002)
    sys.path.insert(0, sys.argv[1])
    from reference import sw_score
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet
    from swgpu_tools.kernels import gpu, top_k_from_scores
    from swgpu_tools.kernels.gpu import planner

    # groups of 8 and 4 lanes: a chain member's window is 8 steps, members at least 8 rows
    planner.CONFIGS = ((8, 1), (8, 2), (4, 3))
    gpu.chains.ALONE_ROWS, gpu.chains.CHAIN_ROWS, gpu.chains.MAX_MEMBERS = 18, 30, 4
    rng = np.random.default_rng(int(sys.argv[2]))
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    letters = list("ARNDCQEGHILKMFPSTWYV")

    def rs(n):
        return "".join(rng.choice(letters, n))

    db = [(f"s{i}", rs(int(rng.integers(1, 40)))) for i in range(9)]
    qs = [(f"q{i}", rs(int(rng.integers(0, 21)))) for i in range(7)]
    qs.append(("hit", db[3][1][2:15]))  # a member whose best is far above the others
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs(qs))
    ref = np.array([[sw_score(eqs.codes[eqs.offsets[i]:eqs.offsets[i + 1]],
                              edb.codes[edb.offsets[j]:edb.offsets[j + 1]], scheme.matrix, 11, 1)
                     for j in range(len(edb))] for i in range(len(eqs))])
    exp = top_k_from_scores(ref, 3)
    out = {}
    for mode in ("s16", "h16", "s32"):
        s = gpu.GpuSearcher.from_scheme(edb, scheme, mode=mode, batch=False)
        got = s.all_scores(eqs)
        th = s.search(eqs, 3)
        out[mode] = {
            "scores": bool((got == ref).all()),
            "topk": bool((th.query_index == exp.query_index).all()
                         and (th.subject_index == exp.subject_index).all()
                         and (th.score == exp.score).all()),
            "units": [len(u) for u in s.units],
            "min_rows": s.min_member_rows(),
        }
    print("RESULT " + json.dumps(out))
    """
)


def test_kernel_source_shapes():
    from swgpu_tools.kernels import gpu

    src = gpu.kernel_source("s16", 8, 4, sim=False, multipass=False)
    assert "vaddmax2_relu" in src and "shfl_up_sync" in src and "temp[" not in src
    src = gpu.kernel_source("h16", 8, 4, sim=False, multipass=True)
    assert "haddmax2_relu" in src and "hlo32(best)" in src and "vaddmax2" not in src
    src = gpu.kernel_source("s32", 4, 3, sim=True, multipass=True)
    assert "_xup(" in src and "temp[" in src and "shfl" not in src
    compile(src, "<kernel>", "exec")


@pytest.mark.parametrize(
    "cc,env,go,expect",
    [
        ((9, 0), "auto", 11, "s16"),  # Hopper: DPX
        ((8, 6), "auto", 11, "h16"),  # Ampere/Ada: binary16 pairs
        ((8, 0), "auto", 11, "h16"),
        ((7, 5), "auto", 11, "s32"),  # no packed path
        ((9, 0), "h16", 11, "h16"),  # the no-DPX path forced on Hopper (the stand-in)
        ((9, 0), "s32", 11, "s32"),
        ((8, 6), "auto", 2000, "s32"),  # gap costs too large to be exact in binary16
        ((9, 0), "h16", 2000, "s32"),
        ((9, 0), "auto", 2000, "s16"),  # ... but fine in 16-bit integers
        ((7, 5), "h16", 11, ValueError),
        ((8, 6), "s16", 11, ValueError),
    ],
)
def test_kernel_mode_choice(monkeypatch, cc, env, go, expect):
    from swgpu_tools.kernels.gpu import searcher
    from swgpu_tools.scoring import ScoringScheme

    monkeypatch.setattr(searcher, "compute_capability", lambda: cc)
    monkeypatch.setenv("SWGPU_GPU_MODE", env)
    m = ScoringScheme("BLOSUM62", 11, 1).matrix
    if expect is ValueError:
        with pytest.raises(ValueError):
            searcher.kernel_mode(m, go, 1)
    else:
        assert searcher.kernel_mode(m, go, 1) == expect


@pytest.mark.parametrize(
    "cc,env,expect",
    [
        ((9, 0), "auto", ("s16", "s32")),
        ((8, 6), "auto", ("h16", "s32")),
        ((7, 5), "auto", ("s32",)),
        ((9, 0), "h16", ("h16", "s32")),  # what SWGPU_GPU_MODE=h16 searches with
    ],
)
def test_precompile_modes_follow_the_device(monkeypatch, cc, env, expect):
    from swgpu_tools.kernels.gpu import cache

    monkeypatch.setattr(cache, "compute_capability", lambda: cc)
    monkeypatch.setenv("SWGPU_GPU_MODE", env)
    assert cache.device_modes() == expect


def test_available_never_raises():
    from swgpu_tools.kernels import gpu

    ok, why = gpu.available()
    assert isinstance(ok, bool) and isinstance(why, str) and why


@pytest.mark.slow  # 15-18 s on the 2-core VM (NVVM compiles every shape); .ci/run runs it
def test_kernels_compile_for_sm90():
    """Needs CUDA's NVVM (e.g. pip nvidia-nvvm + nvidia-cuda-nvrtc), but no GPU or driver."""
    code = textwrap.dedent(
        """
        import sys
        from swgpu_tools.kernels import gpu
        try:
            # small shapes (the step loop is unrolled over R): every check below is
            # about the instructions and the absence of local arrays, not the shape
            ptx16 = gpu.kernel_ptx("s16", 8, 4, multipass=True)
            ptx32 = gpu.kernel_ptx("s32", 4, 4, multipass=False)
            ptxb = gpu.kernel_ptx("s16", 4, 4, multipass=True, batched=True)
            ptxh = gpu.kernel_ptx("h16", 8, 4, multipass=True, cc=(8, 0))
        except Exception as exc:
            print("SKIP", type(exc).__name__, exc)
            sys.exit(0)
        assert ".target sm_90" in ptx16
        assert "max.s16x2" in ptx16 and "add.s16x2" in ptx16 and "ld.shared.b32" in ptx16
        assert ".local" not in ptx16
        assert "max.s32" in ptx32
        assert "max.s16x2" in ptxb and ".local" not in ptxb  # the batched variant
        # the no-DPX path: binary16 pairs on sm_80
        assert ".target sm_80" in ptxh and ".local" not in ptxh
        assert "max.f16x2" in ptxh and "add.rn.f16x2" in ptxh and "fma.rn.relu.f16x2" in ptxh
        assert "s16x2" not in ptxh
        assert ".maxntid 128" in ptxh and ".minnctapersm 4" in ptxh  # launch bounds
        print("OK")
        """
    )
    run_ptx_check(code)


# ---------------------------------------------------------------------------
# GPU tests
# ---------------------------------------------------------------------------


def _gpu():
    from swgpu_tools.kernels import gpu

    ok, why = gpu.available()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    return gpu


def _data_dir():
    for cand in (
        os.environ.get("SWGPU_TEST_DATA"),
        ROOT / "gpu_bench_data",
        ROOT.parent / "shared" / "data",
    ):
        if cand and (Path(cand) / "oracle_queries.fasta").exists():
            return Path(cand)
    pytest.skip("oracle data not found (set SWGPU_TEST_DATA)")


def _modes(gpu):
    """The kernel paths this GPU runs; 'qp2': s16 with two queries per register."""
    cc = gpu.compute_capability()
    if cc >= (9, 0):
        return ["s16", "qp2", "h16", "s32"]
    return ["h16", "s32"] if cc >= (8, 0) else ["s32"]


def _searcher(gpu, edb, matrix, mode, **kw):
    """A searcher of ``mode`` (:func:`_modes`): 'qp2' is s16 with qp2 forced on, 's16'
    with it off (a plain s16 search)."""
    if mode in ("s16", "qp2"):
        kw["qp2"], mode = mode == "qp2", "s16"
    return gpu.GpuSearcher(edb, matrix, 11, 1, mode=mode, **kw)


def _cpu_scores(eqs, edb, scheme):
    from swgpu_tools.kernels import cpu

    return cpu.score_all(eqs, edb, scheme.matrix, scheme.gap_open, scheme.gap_extend)


@pytest.mark.gpu
def test_gpu_oracle_ssearch():
    gpu = _gpu()
    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.scoring import ScoringScheme

    d = _data_dir()
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    db = read_fasta(d / "uniprot20k.fasta.gz")
    qs = read_fasta(d / "oracle_queries.fasta")
    edb, eqs = scheme.encode(db), scheme.encode(qs)
    expect = np.full((len(qs), len(db)), -1, dtype=np.int64)
    qpos = {q: i for i, q in enumerate(qs.ids)}
    dpos = {s: j for j, s in enumerate(db.ids)}

    def acc(x):
        parts = x.split("|")
        return parts[1] if len(parts) > 2 and parts[0] in ("sp", "tr") else x

    malformed = 0
    with gzip.open(d / "oracle_ssearch36_uniprot20k.tsv.gz", "rt") as fh:
        for line in fh:
            if line.startswith("query") or not line.strip():
                continue
            f = line.rstrip("\n").split("\t")
            if not (f[2].isdigit() and f[3].isdigit()):
                malformed += 1  # 70 rows where SSEARCH's description text shifted the columns
                continue
            expect[qpos[acc(f[0])], dpos[acc(f[1])]] = int(f[3])
    assert malformed <= 100
    known = expect >= 0
    assert known.sum() >= len(qs) * len(db) - 100
    for mode in _modes(gpu):
        s = _searcher(gpu, edb, scheme.matrix, mode)
        got = s.all_scores(eqs)
        bad = np.argwhere((got != expect) & known)
        assert len(bad) == 0, f"{mode}: {len(bad)} mismatches, first {bad[:5].tolist()}"


@pytest.mark.gpu
def test_gpu_random_vs_cpu_and_topk():
    gpu = _gpu()
    from swgpu_tools.kernels import cpu
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    rng = np.random.default_rng(5)
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    letters = np.array(list("ARNDCQEGHILKMFPSTWYVXBZU"))
    lens = np.concatenate(
        [rng.integers(1, 40, 300), rng.integers(40, 1100, 300), rng.integers(1100, 4000, 40)]
    )
    db = [(f"s{i}", "".join(rng.choice(letters, n))) for i, n in enumerate(lens)]
    db += [(f"d{i}", db[i * 7][1]) for i in range(20)]  # duplicates: ties
    qs = [
        ("q%d" % i, "".join(rng.choice(letters, n))) for i, n in enumerate([1, 17, 144, 600, 2100])
    ]
    qs.append(("qh", db[650][1][:800]))
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs(qs))
    ref = _cpu_scores(eqs, edb, scheme)
    exp = cpu.search(eqs, edb, scheme.matrix, 11, 1, 25)
    for mode in _modes(gpu):
        s = _searcher(gpu, edb, scheme.matrix, mode)
        got = s.all_scores(eqs)
        assert (got == ref).all(), f"{mode}: {(got != ref).sum()} mismatches"
        th = s.search(eqs, 25)
        assert (th.query_index == exp.query_index).all()
        assert (th.subject_index == exp.subject_index).all()
        assert (th.score == exp.score).all()
        # streamed in batches (forced small budget): identical scores and hits
        budget = (int(edb.offsets[-1]) + gpu.BYTES_PER_SUBJECT * len(lens)) // 3
        sb = _searcher(gpu, edb, scheme.matrix, mode, max_resident_bytes=budget)
        assert sb.batches is not None and len(sb.batches) >= 5, sb.batches
        assert (sb.all_scores(eqs) == ref).all(), f"{mode} batched"
        tb = sb.search(eqs, 25)
        assert (tb.query_index == exp.query_index).all()
        assert (tb.subject_index == exp.subject_index).all()
        assert (tb.score == exp.score).all()


@pytest.mark.gpu
def test_gpu_scores_above_int16():
    gpu = _gpu()
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    rng = np.random.default_rng(11)
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    aa = np.array(list("ARNDCQEGHILKMFPSTWYV"))
    base = rng.choice(aa, 10000)
    near = base.copy()
    pos = rng.choice(10000, 60, replace=False)
    near[pos] = rng.choice(aa, 60)
    near = np.concatenate([near[:5000], near[5010:], rng.choice(aa, 7)])  # a gap too
    db = [("decoy%d" % i, "".join(rng.choice(aa, n))) for i, n in enumerate([300, 9000, 12000])]
    db.insert(1, ("near", "".join(near)))
    db.append(("self", "".join(base)))
    qs = [("q", "".join(base))]
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs(qs))
    ref = _cpu_scores(eqs, edb, scheme)
    assert ref[0, 1] > 40000 and ref[0, 4] > 40000
    for mode in _modes(gpu):
        s = _searcher(gpu, edb, scheme.matrix, mode)
        got = s.all_scores(eqs)
        assert (got == ref).all(), (mode, got.tolist(), ref.tolist())
        th = s.search(eqs, 2)
        assert th.subject_index.tolist() == [4, 1]


@pytest.mark.gpu
def test_gpu_topk_among_scores_above_2048():
    """The top-k cut inside a crowd of scores above 2,048, where h16 rounds and re-scores:
    one query at a time (GPU histogram and selection) and batched, against the CPU."""
    gpu = _gpu()
    from swgpu_tools.kernels import cpu
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    rng = np.random.default_rng(17)
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    aa = np.array(list("ARNDCQEGHILKMFPSTWYV"))
    base = rng.choice(aa, 700)
    db = []
    for i in range(60):  # copies with 0..35% of positions changed: scores ~1,500..3,700
        c = base.copy()
        k = int(len(c) * 0.35 * i / 60)
        pos = rng.choice(len(c), k, replace=False)
        c[pos] = rng.choice(aa, k)
        db.append((f"c{i}", "".join(c)))
    db += [
        (f"r{i}", "".join(rng.choice(aa, int(n)))) for i, n in enumerate(rng.integers(50, 900, 200))
    ]
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs([("q", "".join(base)), ("q2", "".join(base[:650]))]))
    ref = _cpu_scores(eqs, edb, scheme)
    assert ((ref > 2048) & (ref < 4096)).sum() >= 40
    for k in (5, 17, 30):
        exp = cpu.search(eqs, edb, scheme.matrix, 11, 1, k)
        for mode in _modes(gpu):
            for batch in (False, True):
                th = _searcher(gpu, edb, scheme.matrix, mode, batch=batch).search(eqs, k)
                key = (mode, batch, k)
                assert th.subject_index.tolist() == exp.subject_index.tolist(), key
                assert th.score.tolist() == exp.score.tolist(), key
    # a re-scan's joint search: the best k of each run of subjects (segments), in one
    # batched search on the GPU, against one CPU search per run
    from swgpu_tools.kernels import by_segment

    segs = [0, 25, 25, 130, len(edb)]
    for k in (5, 30):
        exp = by_segment(
            lambda q, d, kk, pr: cpu.search(q, d, scheme.matrix, 11, 1, kk), eqs, edb, k, segs
        )
        for mode in _modes(gpu):
            s = _searcher(gpu, edb, scheme.matrix, mode, batch=True)
            th = s.search(eqs, k, segments=segs)
            assert s.topk_on_gpu  # the best of each segment chosen on the GPU
            assert th.subject_index.tolist() == exp.subject_index.tolist(), (mode, k)
            assert th.score.tolist() == exp.score.tolist(), (mode, k)


@pytest.mark.gpu
def test_gpu_segment_choice_equals_the_hosts_on_large_blocks():
    """``segment_topk_kernel`` (the batched search's choice per row and segment) against
    the host's :func:`~swgpu_tools.kernels.topk.top_rows` on a re-scan's shapes: 300 rows,
    segments up to TOPK_CAP columns, k below and above their lengths, crowded ties and
    scores up to 2^31 - 1."""
    _gpu()
    from numba import cuda

    from swgpu_tools.kernels.gpu import batched, cache
    from swgpu_tools.kernels.gpu.codegen import TOPK_CAP
    from swgpu_tools.kernels.topk import segment_places, top_rows

    rng = np.random.default_rng(5)
    segs = np.array([0, 1650, 3300, 3300, 3301, 3301 + TOPK_CAP], np.int64)
    n = int(segs[-1])
    for k, hi in ((1000, 60), (1000, 2**31 - 1), (4000, 3000), (1, 5)):
        block = rng.integers(0, hi, (300, n), dtype=np.int64).astype(np.int32)
        assert batched.topk_on_gpu(segs, k)
        offs = segment_places(segs, k)
        per = int(offs[-1])
        dc = cuda.device_array(300 * per, np.int32)
        dv = cuda.device_array(300 * per, np.int32)
        cache.aux().segment_topk_kernel[300 * (len(segs) - 1), batched.TOPK_THREADS](
            cuda.to_device(block.reshape(-1)), n, cuda.to_device(segs), cuda.to_device(offs),
            k, dc, dv,
        )  # fmt: skip
        _, cols, vals = top_rows(block, k, segs)
        assert (dc.copy_to_host() == cols).all(), (k, hi)
        assert (dv.copy_to_host() == vals).all(), (k, hi)
    assert not batched.topk_on_gpu(np.array([0, TOPK_CAP + 1]), 10)  # left to the host


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_long_pair_40000():
    gpu = _gpu()
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    rng = np.random.default_rng(3)
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    aa = np.array(list("ARNDCQEGHILKMFPSTWYV"))
    a = rng.choice(aa, 40000)
    b = a.copy()
    b[rng.choice(40000, 8000, replace=False)] = rng.choice(aa, 8000)
    db = [("b", "".join(b)), ("r", "".join(rng.choice(aa, 40000)))]
    edb = scheme.encode(SequenceSet.from_pairs(db))
    eqs = scheme.encode(SequenceSet.from_pairs([("a", "".join(a))]))
    ref = _cpu_scores(eqs, edb, scheme)
    for mode in _modes(gpu):
        got = _searcher(gpu, edb, scheme.matrix, mode).all_scores(eqs)
        assert (got == ref).all(), (mode, got.tolist(), ref.tolist())


@pytest.mark.gpu
def test_gpu_planted_bench_hits():
    gpu = _gpu()
    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.scoring import ScoringScheme

    dbp = os.environ.get("SWGPU_BENCH_DB")
    qp = os.environ.get("SWGPU_BENCH_QUERIES")
    if not (dbp and qp and Path(dbp).exists() and Path(qp).exists()):
        pytest.skip("set SWGPU_BENCH_DB and SWGPU_BENCH_QUERIES (synth_db.py output)")
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    db, qs = read_fasta(dbp), read_fasta(qp)
    edb, eqs = scheme.encode(db), scheme.encode(qs)
    # ids: queries ">sp|BQ01|BENCH01_144 ...", planted copies ">sp|PL01019|PLANT01_019 ..."
    known = {
        ("BQ01", "PL01019"): 732,
        ("BQ01", "PL01018"): 714,
        ("BQ02", "PL02019"): 968,
        ("BQ03", "PL03018"): 1075,
        ("BQ03", "PL03019"): 1064,
    }
    qpos = {x: i for i, x in enumerate(qs.ids)}
    dpos = {x: i for i, x in enumerate(db.ids)}
    for mode in [m for m in _modes(gpu) if m in ("s16", "qp2")] or [None]:
        if mode is None:
            s = gpu.GpuSearcher(edb, scheme.matrix, 11, 1)
        else:
            s = _searcher(gpu, edb, scheme.matrix, mode)
        th = s.search(eqs, 30)
        for (qn, sn), score in known.items():
            sel = (th.query_index == qpos[qn]) & (th.subject_index == dpos[sn])
            assert sel.any() and int(th.score[sel][0]) == score, (mode, qn, sn, th.score[sel])


SHARED_RACE_SCRIPT = textwrap.dedent(
    r"""
    import sys, time
    import numpy as np
    from numba import cuda, int32
    if sys.argv[1] == "fixed":
        import swgpu_tools.kernels.gpu_intrinsics  # noqa: F401  (locks the simulator)

    plain_empty = np.empty

    def slow_empty(*args, **kwargs):  # a thread switch inside the allocation
        time.sleep(0.01)
        return plain_empty(*args, **kwargs)

    np.empty = slow_empty

    @cuda.jit
    def count(out):
        sh = cuda.shared.array(1, dtype=int32)
        if cuda.threadIdx.x == 0:
            sh[0] = 0
        cuda.syncthreads()
        cuda.atomic.add(sh, 0, 1)
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            out[0] = sh[0]

    out = np.zeros(1, np.int32)
    count[1, 16](out)
    print("COUNT", int(out[0]))
    """
)


@pytest.mark.parametrize("mode", ["fixed", "plain"])
def test_simulator_shared_arrays_are_one_per_block(mode):
    """numba-cuda's simulator allocates a shared array with an unlocked check-then-set;
    a thread switch there gave threads arrays of their own (a lost histogram count in a
    loaded CI run).  Importing the kernels' helpers locks it: all 16 threads count into
    one array.  The plain simulator, with the same forced switch, loses counts (this
    shows the test can see the race)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", SHARED_RACE_SCRIPT, mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = int(proc.stdout.split("COUNT")[-1])
    assert (got == 16) if mode == "fixed" else (got < 16), (mode, got)
