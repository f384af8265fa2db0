"""GPU score passes for pair batches (swgpu align): swgpu_tools.kernels.gpu.pair_ends
(forward pass) and pair_regions (forward + reverse passes).

* Simulator test (always runs, in a child process with NUMBA_ENABLE_CUDASIM=1):
  tiny random batches, local and semi-global, affine and linear gaps, protein
  and DNA, with ties, score-0 pairs and empty sequences, small register tiles
  (several tiles per query), several launches per batch; the GPU ends and
  regions equal the CPU forward and reverse passes', and
  ``align_pairs(backend="gpu")`` gives the CPU backend's alignments.
* PTX test (where CUDA's NVVM is installed; no GPU needed): sm_90, no local
  memory.
* ``@pytest.mark.gpu`` (a real GPU, ``-m gpu``): thousands of random pairs up
  to a few thousand residues, and scores above 32,767, equal to the CPU.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
from children import script_result
from ptx_check import run_ptx_check

ROOT = Path(__file__).resolve().parents[1]

SIM_SCRIPT = textwrap.dedent(
    r"""
    import json, sys
    import numpy as np
    # the simulator's block scheduler polls its threads while holding the GIL: a short
    # switch interval lets the simulated threads run (about 3x faster here)
    sys.setswitchinterval(0.0002)
    import swgpu_tools.alignment as A
    from swgpu_tools.alignment import scalar
    from swgpu_tools.kernels import gpu
    from swgpu_tools.kernels.gpu import pairs
    from swgpu_tools.scoring import ScoringScheme

    rng = np.random.default_rng(int(sys.argv[1]))
    R = int(sys.argv[2])
    pairs.PAIR_BOUNDARY_ENTRIES = 1  # launches of 8 pairs (the simulator's block): several

    def batch(na, n):
        ps = [(np.zeros(0, np.uint8), np.array([1, 2], np.uint8)),       # empty query
              (np.array([1, 2, 3], np.uint8), np.zeros(0, np.uint8)),    # empty subject
              (np.array([0, 1, 2], np.uint8), np.array([0, 1, 2, 0, 1, 2], np.uint8)),  # ties
              (np.array([2, 2], np.uint8), np.array([1, 2, 1, 2, 1], np.uint8))]
        for t in range(n):
            a = rng.integers(0, na, int(rng.integers(1, 11))).astype(np.uint8)
            if t % 3 == 0:
                b = rng.integers(0, na, int(rng.integers(1, 11))).astype(np.uint8)
            else:
                b = a.copy()
                b[rng.random(len(b)) < 0.2] = rng.integers(0, na)
                b = np.concatenate([rng.integers(0, na, int(rng.integers(0, 3))), b,
                                    b[:2]]).astype(np.uint8)
            ps.append((a, b))
        return ps

    from swgpu_tools.sequences import EncodedSequences

    def scheme_of(name, go, ge):
        if name == "protein":
            return ScoringScheme("BLOSUM62", go, ge)
        return ScoringScheme(match=1, mismatch=-1, gap_open=go, gap_extend=ge)

    prot = scheme_of("protein", 11, 1).matrix
    dna = scheme_of("dna", 0, 2).matrix
    backend = gpu.GpuBackend()
    # a score-0 pair: nothing aligns positively (W against nothing-like letters)
    out = []
    for name, matrix, na in (("protein", prot, 20), ("dna", dna, 4)):
        ps = batch(na, 7)
        if name == "protein":
            ps.append((np.array([17], np.uint8), np.array([4, 4], np.uint8)))  # W vs C C: < 0
        qc = np.concatenate([p[0] for p in ps])
        sc = np.concatenate([p[1] for p in ps])
        qo = np.r_[0, np.cumsum([len(p[0]) for p in ps])]
        so = np.r_[0, np.cumsum([len(p[1]) for p in ps])]
        idx = np.arange(len(ps))
        for go, ge in ((11, 1), (0, 2)):
            for mode in ("local", "semiglobal"):
                reg = gpu.pair_regions(qc, qo, sc, so, idx, idx, matrix, go, ge, mode, R=R)
                # the contract's form (PairBackend): the scheme whole, the default R
                breg = backend.pair_regions(EncodedSequences(qc, qo), EncodedSequences(sc, so),
                                            idx, idx, scheme_of(name, go, ge), mode)
                got = reg[:, [0, 2, 4]]
                exp = []
                for a, b in ps:
                    if mode == "local":
                        exp.append(scalar.forward_end(a, b, matrix, go, ge))
                    else:
                        best, se = scalar.forward_end_semi(a, b, matrix, go, ge)
                        exp.append((best, len(a), se))
                code = 0 if mode == "local" else 2
                exp_reg = [list(map(int, scalar.locate(a, b, matrix, go, ge, code))) for a, b in ps]
                stats = {}
                pairs.PAIR_R = R
                g = A.align_pairs(ps, matrix, go, ge, threads=2, mode=mode, backend="gpu",
                                  stats=stats)
                c = A.align_pairs(ps, matrix, go, ge, threads=2, mode=mode, backend="cpu")
                out.append({"case": f"{name} {go}/{ge} {mode}", "got": got.tolist(),
                            "exp": [list(map(int, e)) for e in exp],
                            "regions": reg.tolist(), "exp_regions": exp_reg,
                            "backend_regions": breg.tolist(),
                            "alignments_equal": g == c, "backend": stats["backend"],
                            "zero_scores": sum(a.score == 0 for a in c)})
    print("RESULT " + json.dumps(out))
    """
)


def test_pair_kernel_source():
    from swgpu_tools.kernels import gpu

    for R in (1, 2, 5, 16):
        for kind in gpu.PAIR_KINDS:
            src = gpu.pair_kernel_source(R, kind, sim=False)
            compile(src, "<pair kernel>", "exec")
            assert ("max3_32(h, f, zero)" in src) == kind.startswith("local")
            assert ("so - j" in src) == kind.endswith("_rev")


@pytest.mark.slow  # 25-30 s on the 2-core machine; .ci/run runs the slow tests too
def test_simulator_pair_ends_and_alignments_match_cpu():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT))
    res = script_result(SIM_SCRIPT, 7, 3, env=env, timeout=600)
    assert len(res) == 8
    for r in res:
        assert r["got"] == r["exp"], r["case"]
        assert r["regions"] == r["exp_regions"], r["case"]
        assert r["backend_regions"] == r["exp_regions"], r["case"]
        assert r["alignments_equal"], r["case"]
        assert r["backend"] == "gpu", r["case"]
    assert any(r["zero_scores"] for r in res if "local" in r["case"])


def _pair_ptx_check(full: bool) -> None:
    code = textwrap.dedent(
        """
        import sys
        from swgpu_tools.kernels import gpu
        full = sys.argv[1] == "full"
        try:
            ptx = [gpu.pair_kernel_ptx(gpu.PAIR_R if full and kind in ("local", "global_rev")
                                       else 4, kind) for kind in gpu.PAIR_KINDS]
        except Exception as exc:
            print("SKIP", type(exc).__name__, exc)
            sys.exit(0)
        for p in ptx:
            assert ".target sm_90" in p
            assert ".local" not in p
            assert "ld.shared.b32" in p and "max.s32" in p
        print("OK")
        """
    )
    run_ptx_check(code, ["full" if full else "small"])


@pytest.mark.slow  # 5 s on the 2-core VM; .ci/run runs it
def test_pair_kernels_compile_for_sm90():
    """Every kind at R = 4.  Needs CUDA's NVVM (e.g. pip nvidia-nvvm), but no GPU or driver."""
    _pair_ptx_check(False)


@pytest.mark.slow
def test_pair_kernels_compile_for_sm90_default_tile():
    """The default tile (PAIR_R rows) of the local and global_rev kinds: no local memory."""
    _pair_ptx_check(True)


def test_auto_falls_back_to_cpu_when_the_gpu_fails(monkeypatch):
    import swgpu_tools.alignment as A
    from swgpu_tools.alignment import cost
    from swgpu_tools.backend import BackendChoice
    from swgpu_tools.kernels import gpu
    from swgpu_tools.scoring import ScoringScheme

    m = ScoringScheme("BLOSUM62", 11, 1).matrix
    rng = np.random.default_rng(4)
    ps = [
        (rng.integers(0, 20, 30).astype(np.uint8), rng.integers(0, 20, 40).astype(np.uint8))
        for _ in range(5)
    ]
    cpu = A.align_pairs(ps, m, 11, 1, backend="cpu")

    def broken(*args, **kwargs):
        raise RuntimeError("out of GPU memory (simulated)")

    checked = []

    def gpu_choice(b, mode):
        checked.append(b)
        return BackendChoice("gpu", "test")

    monkeypatch.setattr(cost, "pair_backend", gpu_choice)
    monkeypatch.setattr(gpu, "pair_regions", broken)
    # a small batch: "auto" expects the CPU to be faster, and does not even check the GPU
    stats = {}
    assert A.align_pairs(ps, m, 11, 1, backend="auto", stats=stats) == cpu
    assert stats["backend"] == "cpu" and "GPU not checked" in stats["reason"] and not checked
    monkeypatch.setattr(cost, "gpu_start_s", lambda: 0.0)
    stats = {}
    assert A.align_pairs(ps, m, 11, 1, backend="auto", stats=stats) == cpu
    assert stats["backend"] == "cpu" and "expected to be faster" in stats["reason"] and checked
    assert cost.gpu_pays(2 * 10**10, 10**6, 2)[0]  # 100,000 protein pairs, 2 threads
    assert not cost.gpu_pays(40000**2, 40000**2, 16)[0]  # one long pair
    monkeypatch.setattr(cost, "gpu_pays", lambda *args: (True, 0.0, 1.0))
    stats = {}
    assert A.align_pairs(ps, m, 11, 1, backend="auto", stats=stats) == cpu
    assert stats["backend"] == "cpu" and "simulated" in stats["reason"]
    with pytest.raises(RuntimeError):
        A.align_pairs(ps, m, 11, 1, backend="gpu")


def test_align_backend_choice_and_cli(tmp_path, capsys):
    from swgpu_tools.alignment import pair_backend
    from swgpu_tools.backend import gpu_status
    from swgpu_tools.cli import main
    from swgpu_tools.errors import InputError

    assert pair_backend("cpu", "local").name == "cpu"
    assert pair_backend("auto", "global").name == "cpu"
    assert "global" in pair_backend("gpu", "global").reason
    with pytest.raises(InputError):
        pair_backend("tpu", "local")
    fa = tmp_path / "p.fa"
    fa.write_text(">a\nMKTAYIAKQRQISFVKSHFSRQ\n>b\nMKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ\n")
    assert main(["align", str(fa), "--out", str(tmp_path / "o.tsv"), "--backend", "cpu"]) == 0
    assert "backend: cpu (CPU backend requested)" in capsys.readouterr().err
    if not gpu_status()[0]:
        assert pair_backend("auto", "local").name == "cpu"
        with pytest.raises(InputError):
            pair_backend("gpu", "semiglobal")
        assert main(["align", str(fa), "--out", str(tmp_path / "g.tsv"), "--backend", "gpu"]) == 2
        assert "no GPU is usable" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# GPU tests
# ---------------------------------------------------------------------------
def _gpu():
    from swgpu_tools.kernels import gpu

    ok, why = gpu.available()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    return gpu


def _random_pairs(rng, n, na, hi, related=0.6):
    ps = []
    for _ in range(n):
        a = rng.integers(0, na, int(rng.integers(1, hi + 1))).astype(np.uint8)
        if rng.random() < related:
            b = a.copy()
            b[rng.random(len(b)) < rng.uniform(0.05, 0.6)] = rng.integers(0, na)
            cut = int(rng.integers(0, max(1, len(b) // 3)))
            b = np.concatenate(
                [
                    rng.integers(0, na, int(rng.integers(0, 50))),
                    b[cut:],
                    rng.integers(0, na, int(rng.integers(0, 50))),
                ]
            ).astype(np.uint8)
            b = b if len(b) else a[:1].copy()
        else:
            b = rng.integers(0, na, int(rng.integers(1, hi + 1))).astype(np.uint8)
        ps.append((a, b))
    return ps


def _check_batch(gpu, ps, matrix, go, ge, modes=("local", "semiglobal")):
    from swgpu_tools.alignment import align_pairs

    qc = np.concatenate([p[0] for p in ps])
    sc = np.concatenate([p[1] for p in ps])
    qo = np.r_[0, np.cumsum([len(p[0]) for p in ps])]
    so = np.r_[0, np.cumsum([len(p[1]) for p in ps])]
    idx = np.arange(len(ps))
    for mode in modes:
        cpu = align_pairs(ps, matrix, go, ge, mode=mode, backend="cpu")
        exp = np.array(
            [
                (a.score, a.query_end if mode == "semiglobal" or a.score else 0, a.subject_end)
                for a in cpu
            ]
        )
        regions = np.array(
            [(a.score, a.query_start, a.query_end, a.subject_start, a.subject_end) for a in cpu]
        )
        for R in sorted({gpu.PAIR_R, 8, 16}):
            got = gpu.pair_ends(qc, qo, sc, so, idx, idx, matrix, go, ge, mode, R=R)
            bad = np.flatnonzero((got != exp).any(axis=1))
            assert len(bad) == 0, (mode, R, len(bad), got[bad[:3]].tolist(), exp[bad[:3]].tolist())
            got = gpu.pair_regions(qc, qo, sc, so, idx, idx, matrix, go, ge, mode, R=R)
            bad = np.flatnonzero((got != regions).any(axis=1))
            assert len(bad) == 0, (
                mode,
                R,
                len(bad),
                got[bad[:3]].tolist(),
                regions[bad[:3]].tolist(),
            )
        stats = {}
        assert align_pairs(ps, matrix, go, ge, mode=mode, backend="gpu", stats=stats) == cpu, mode
        assert stats["backend"] == "gpu" and stats["gpu_s"] > 0
    return exp


@pytest.mark.gpu
def test_gpu_pair_ends_protein_vs_cpu():
    gpu = _gpu()
    from swgpu_tools.scoring import ScoringScheme

    rng = np.random.default_rng(21)
    m = ScoringScheme("BLOSUM62", 11, 1).matrix
    ps = _random_pairs(rng, 1500, 20, 400) + _random_pairs(rng, 300, 23, 2500)
    ps += [(p[0], p[0].copy()) for p in ps[:40]]  # identical pairs: ties along the diagonal
    _check_batch(gpu, ps, m, 11, 1)
    _check_batch(gpu, ps[:600], m, 0, 3)  # linear gaps


@pytest.mark.gpu
def test_gpu_pair_ends_dna_vs_cpu():
    gpu = _gpu()
    from swgpu_tools.scoring import ScoringScheme

    rng = np.random.default_rng(22)
    mm = ScoringScheme(match=1, mismatch=-1, gap_open=0, gap_extend=2).matrix
    ps = _random_pairs(rng, 2000, 4, 700, related=0.8)
    _check_batch(gpu, ps, mm, 0, 2)
    nuc = ScoringScheme("NUC.4.4", 10, 1)
    _check_batch(gpu, ps[:800], nuc.matrix, 10, 1)


@pytest.mark.gpu
def test_gpu_pair_ends_scores_above_int16():
    gpu = _gpu()
    from swgpu_tools.scoring import ScoringScheme

    rng = np.random.default_rng(23)
    m = ScoringScheme("BLOSUM62", 11, 1).matrix
    a = rng.integers(0, 20, 9000).astype(np.uint8)
    b = a.copy()
    b[rng.choice(9000, 300, replace=False)] = rng.integers(0, 20, 300)
    b = np.concatenate([rng.integers(0, 20, 40), b[:4000], b[4005:]]).astype(np.uint8)
    ps = [(a, b), (a, a.copy())] + _random_pairs(rng, 40, 20, 300)
    exp = _check_batch(gpu, ps, m, 11, 1)
    assert exp[0, 0] > 32767 and exp[1, 0] > 32767


@pytest.mark.gpu
def test_gpu_pair_batches_in_many_launches_equal_cpu(monkeypatch):
    """A batch whose boundary rows exceed PAIR_BOUNDARY_ENTRIES runs in several launches
    (one buffer reused); forced here with a tiny limit: launches of one block each."""
    gpu = _gpu()
    from swgpu_tools.scoring import ScoringScheme

    monkeypatch.setattr(gpu, "PAIR_BOUNDARY_ENTRIES", 1 << 12)
    rng = np.random.default_rng(23)
    m = ScoringScheme("BLOSUM62", 11, 1).matrix
    ps = _random_pairs(rng, 1200, 20, 300) + _random_pairs(rng, 40, 20, 1200)
    _check_batch(gpu, ps, m, 11, 1)
