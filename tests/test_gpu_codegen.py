"""GPU kernel sources (swgpu_tools.kernels.gpu.codegen), no GPU needed.

* Every generated source (scoring kernels of both modes, all group sizes, 12
  register counts, single- and multi-pass, GPU and simulator variants; pair
  kernels of every kind; the top-k helpers) has the sha256 recorded in
  ``tests/data/gpu_codegen.sha256``.  That manifest was taken from the
  single-module ``kernels/gpu.py`` before the split into templates (issue 13),
  so this shows the templates generate byte-identical kernels; the batched
  variants (several queries per launch) were added to it later, leaving the
  641 earlier entries unchanged, then the h16 (binary16) kernels, leaving the 881
  earlier ones unchanged.  The chains of short queries (kernels/gpu/chains.py)
  changed every scoring kernel but the batched ones, deliberately; the manifest was
  written again then.  After a deliberate kernel change:
  ``python benchmarks/gpu_codegen_manifest.py --write``.
* The template language itself, on small templates of its own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _manifest_module():
    spec = importlib.util.spec_from_file_location(
        "gpu_codegen_manifest", ROOT / "benchmarks" / "gpu_codegen_manifest.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_generated_sources_match_the_manifest():
    man = _manifest_module()
    recorded = {}
    for line in man.MANIFEST.read_text().splitlines():
        digest, name = line.split("  ")
        recorded[name] = digest
    srcs = man.sources()
    # 1,152 score + 504 batched + 64 pair + 20 qp2 + aux
    assert len(srcs) == len(recorded) == 1741
    got = {n: hashlib.sha256(s.encode()).hexdigest() for n, s in srcs.items()}
    differ = sorted(n for n in recorded if got.get(n) != recorded[n])
    assert not differ, f"{len(differ)} generated sources changed, e.g. {differ[:5]}"


def test_manifest_covers_every_shape_the_planner_can_use():
    from swgpu_tools.kernels.gpu import codegen, planner

    names = set(_manifest_module().sources())
    for mode in ("s16", "h16", "s32"):
        for G, R in planner.SHAPES[mode]:
            assert f"score_{mode}_{G}x{R}" in names
        for G, R in planner.MULTI_SHAPES[mode]:
            assert f"score_{mode}_{G}x{R}m" in names
            assert f"score_{mode}_{G}x{R}mb" in names
        for G, R in planner.BATCH_SHAPES[mode]:
            assert f"score_{mode}_{G}x{R}b" in names
    for G, R in ((2, 1), (2, 2), (2, 4)):  # the simulator tests' shapes
        assert f"score_s16_{G}x{R}m_sim" in names and f"score_s32_{G}x{R}_sim" in names
    for kind in codegen.PAIR_KINDS:
        assert f"pair_{kind}_r32" in names and f"pair_{kind}_r3_sim" in names
    from swgpu_tools.kernels.gpu import qp2

    assert f"qp2_{qp2.R_DEFAULT}x{qp2.U_DEFAULT}" in names and f"qp2_4x{qp2.U_DEFAULT}_sim" in names


def test_sources_are_python_and_name_their_shape():
    from swgpu_tools.kernels.gpu import codegen

    src = codegen.kernel_source("s16", 8, 5, sim=False, multipass=True)
    compile(src, "<kernel>", "exec")
    assert "G = 8\nR = 5\nW = 40\n" in src
    assert "x4 = int32((ca * D + cb) * 4 + sbase)" in src and "x5 " not in src
    # the multi-pass fast step loop unrolled twice (two copies of the row) and the chain
    # window's step once, R odd
    assert src.count("vmax3_2(best,") == 6 and src.count("best = vmax2(best, h4)") == 3
    one = codegen.kernel_source("s16", 8, 5, sim=False, multipass=False)
    assert one.count("vmax3_2(best,") == 4 and "nsteps = int32(L + 7)" in one and "kb" in one
    # the low half kept + (open + extend): H's max3 takes the floor kb, H - oe is a 32-bit add
    assert "h0 = vmax3_2(xx0, e, kb)" in src and "t = add32(h4, cadd)" in src
    assert "xx1 = vaddmax2(h0, sc1, f1)" in src
    # a chain member's first row: only in the window's step, which resets every register
    assert src.count("if s - lane == bst:") == 1 and one.count("if s - lane == bst:") == 1
    window = src[src.index("if s - lane == bst:") :]
    window = window[: window.index("sc0 = ")]
    for r in range(5):
        assert f"h{r} = kb" in window and f"f{r} = negb" in window
    # each member's best and the pass's last one, stored then kept as the maximum
    for v in ("bsave", "best"):
        assert f"va = int32(int32({v} << 16) >> 16) - kb" in src
        assert f"vb = int32({v} >> 16)" in src
    assert src.count("va = max(va, scores[mbase + sa])") == 2
    assert "nsteps = int32((L + 8) & -2)" in src
    assert [ln.strip() for ln in src.splitlines() if "shfl_xor" in ln] == [
        f"{v} = vmax2({v}, cuda.shfl_xor_sync(0xFFFFFFFF, {v}, {o}))"
        for v in ("bsave", "best")
        for o in (4, 2, 1)
    ]
    batched = codegen.kernel_source("s16", 8, 5, sim=False, multipass=True, batched=True)
    assert "bst" not in batched and "scores[obase + sa] = int32(int32(best << 16)" in batched
    src = codegen.pair_kernel_source(4, "local_rev", sim=True)
    compile(src, "<pair kernel>", "exec")
    assert "cm = max3_32(hl0, hl1, hl2)\n" in src and "cm = max32(cm, hl3)" in src
    compile(codegen.aux_kernel_source(), "<aux>", "exec")


def test_template_language(tmp_path, monkeypatch):
    from swgpu_tools.kernels.gpu import codegen

    (tmp_path / "t.py.in").write_text(
        "%# a comment\n"
        "head {n} {name!r}\n"
        "  %if n > 2\n"
        "big\n"
        "%elif n == 2\n"
        "two\n"
        "%else\n"
        "small\n"
        "%end\n"
        "%for i in range(n)\n"
        "%if i % 2\n"
        "    odd{i}\n"
        "%end\n"
        "%end\n"
        "%for a, b in pairs\n"
        "{a}-{b}\n"
        "%end\n"
        "%include inc\n"
        "\n"
    )
    (tmp_path / "inc.py.in").write_text("inc {n * 10}\n")
    monkeypatch.setattr(codegen, "TEMPLATES", tmp_path)
    codegen._template.cache_clear()
    try:
        out = codegen.render("t", n=3, name="x", pairs=[(1, 2), (3, 4)])
        assert out == "head 3 'x'\nbig\n    odd1\n1-2\n3-4\ninc 30\n\n"
        assert codegen.render("t", n=2, name="y", pairs=[]).startswith(
            "head 2 'y'\ntwo\n    odd1\n"
        )
        assert codegen.render("t", n=0, name="", pairs=[]) == "head 0 ''\nsmall\ninc 0\n\n"
        (tmp_path / "bad.py.in").write_text("%if True\nno end\n")
        with pytest.raises(codegen.TemplateError, match="bad.py.in:1"):
            codegen.render("bad")
        (tmp_path / "bad2.py.in").write_text("%while x\n")
        with pytest.raises(codegen.TemplateError, match="unknown directive"):
            codegen.render("bad2")
    finally:
        codegen._template.cache_clear()


def test_the_s16_variant_switches_parse_and_change_only_s16():
    from swgpu_tools.kernels.gpu import codegen

    assert codegen._variant("") == codegen.S16_DEFAULT == {"LOB": True, "U": 2, "B": 3, "PROBE": ""}
    assert codegen._variant("nolob, u1,b0") == {"LOB": False, "U": 1, "B": 0, "PROBE": ""}
    assert codegen._variant("nof,cf")["PROBE"] == "cf,nof"
    for bad in ("eshift", "u3", "b2", "lob=1"):
        with pytest.raises(ValueError, match="SWGPU_KERNEL_VARIANT"):
            codegen._variant(bad)
    before = {m: codegen.kernel_source(m, 8, 5, sim=False) for m in ("s16", "h16", "s32")}
    try:
        codegen.set_variant("nolob,u1,b0")
        old = codegen.kernel_source("s16", 8, 5, sim=False)
        assert (
            "kb" not in old and "vaddmax2_relu(h0, sc1, f1)" in old and "LAUNCH_BOUNDS" not in old
        )
        assert ("s16", False) not in codegen.LAUNCH_BOUNDS
        for m in ("h16", "s32"):
            assert codegen.kernel_source(m, 8, 5, sim=False) == before[m]
        # the speed-of-light probes (timing only): s16's table addresses and F chain
        codegen.set_variant("cf,nof")
        probe = codegen.kernel_source("s16", 8, 5, sim=False)
        assert "((tid + 4) & 31) * 4 + sbase" in probe and "f4 = t" in probe
        assert "(ca * D + cb)" not in probe and "(ca * D + cb)" in before["s16"]
        for m in ("h16", "s32"):
            assert codegen.kernel_source(m, 8, 5, sim=False) == before[m]
    finally:
        codegen.set_variant("")
    assert codegen.kernel_source("s16", 8, 5, sim=False) == before["s16"]
    assert "LAUNCH_BOUNDS = (128, 3)" in before["s16"]
    assert codegen.LAUNCH_BOUNDS[("s16", True)] == (128, 3)


def test_launch_bounds_are_data_and_the_override_parses():
    from swgpu_tools.kernels.gpu import codegen

    assert codegen.LAUNCH_BOUNDS == {
        ("h16", True): (128, 4),
        ("s16", False): (128, 3),
        ("s16", True): (128, 3),
    }
    src = codegen.kernel_source("h16", 8, 32, sim=False, multipass=True)
    assert "LAUNCH_BOUNDS = (128, 4)" in src
    assert "LAUNCH_BOUNDS" not in codegen.kernel_source("h16", 8, 32, sim=True, multipass=True)
    assert "LAUNCH_BOUNDS = (128, 3)" in codegen.kernel_source("s16", 8, 32, sim=False)
    assert "LAUNCH_BOUNDS" not in codegen.kernel_source("s32", 8, 32, sim=False, multipass=True)
    got = codegen._bounds_override("s16=128x4, h16m=0,s32m=256x2")
    assert got == {("s16", False): (128, 4), ("h16", True): None, ("s32", True): (256, 2)}
    for bad in ("x16=128x4", "s16", "s16=abc", "s16=128"):
        with pytest.raises(ValueError, match="SWGPU_LAUNCH_BOUNDS"):
            codegen._bounds_override(bad)
