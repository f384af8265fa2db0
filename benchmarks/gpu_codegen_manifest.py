#!/usr/bin/env python3
"""sha256 manifest of every generated GPU kernel source (no GPU needed).

    python benchmarks/gpu_codegen_manifest.py                 # print the manifest
    python benchmarks/gpu_codegen_manifest.py --write         # rewrite tests/data/gpu_codegen.sha256
    python benchmarks/gpu_codegen_manifest.py --dump DIR      # also write every source into DIR

One line per source: ``sha256  name``.  The sources are those the planner
menus, the precompile and the simulator tests can produce, and more: every
scoring kernel of mode s16/h16/s32, group size G in 1..32 (powers of two), R in
1..5, 8, 12 and 16..32 (steps of 2), single- and multi-pass, for the GPU and for
the CUDA simulator (and the batched variant, several queries per launch, for R
in 1, 2, 4, 16, 24, 28, 32); every pair kernel kind with R in 1..5, 8, 16, 32, GPU and
simulator; the qp2 kernel (two queries per register) with R in 4, 8, 16, 24, 32 and
U in 1, 2, GPU and simulator; and the top-k helper module.  ``tests/test_gpu_codegen.py`` checks
the committed manifest: a change to the generated code (which changes what
Numba compiles and caches) must be deliberate and shows up as a diff here.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "data" / "gpu_codegen.sha256"

MODES = ("s16", "h16", "s32")
GROUPS = (1, 2, 4, 8, 16, 32)
SCORE_R = (1, 2, 3, 4, 5, 8, 12, 16, 18, 20, 22, 24, 26, 28, 30, 32)
PAIR_R = (1, 2, 3, 4, 5, 8, 16, 32)
BATCHED_R = (1, 2, 4, 16, 24, 28, 32)
PAIR_KINDS = ("local", "semi", "local_rev", "global_rev")
QP2_R = (4, 8, 16, 24, 32)


def sources() -> dict[str, str]:
    """{name: source} of every generated kernel source covered by the manifest."""
    sys.path.insert(0, str(ROOT))
    from swgpu_tools.kernels import gpu

    out = {}
    for sim in (False, True):
        for mode in MODES:
            for G in GROUPS:
                for R in SCORE_R:
                    for multipass in (False, True):
                        name = (
                            f"score_{mode}_{G}x{R}{'m' if multipass else ''}{'_sim' if sim else ''}"
                        )
                        out[name] = gpu.kernel_source(mode, G, R, sim=sim, multipass=multipass)
                        if R in BATCHED_R:  # several queries per launch (kernels/gpu/batched.py)
                            bname = (
                                f"score_{mode}_{G}x{R}{'m' if multipass else ''}b"
                                f"{'_sim' if sim else ''}"
                            )
                            out[bname] = gpu.kernel_source(
                                mode, G, R, sim=sim, multipass=multipass, batched=True
                            )
        for kind in PAIR_KINDS:
            for R in PAIR_R:
                out[f"pair_{kind}_r{R}{'_sim' if sim else ''}"] = gpu.pair_kernel_source(
                    R, kind, sim=sim
                )
        if hasattr(gpu.codegen, "qp2_kernel_source"):  # two queries per register (qp2.py)
            for R in QP2_R:
                for U in (1, 2):
                    out[f"qp2_{R}x{U}{'_sim' if sim else ''}"] = gpu.codegen.qp2_kernel_source(
                        R, U, sim=sim
                    )
    if hasattr(gpu, "aux_kernel_source"):
        out["aux"] = gpu.aux_kernel_source()
    else:  # the single-module gpu.py before the split (issue 13)
        out["aux"] = gpu._AUX_SRC.format(nb=gpu.HIST_BINS)
    return out


def manifest(srcs: dict[str, str]) -> str:
    return "".join(
        f"{hashlib.sha256(s.encode()).hexdigest()}  {n}\n" for n, s in sorted(srcs.items())
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--write", action="store_true", help=f"write {MANIFEST.relative_to(ROOT)}")
    ap.add_argument("--dump", metavar="DIR", help="write every source as DIR/<name>.py")
    args = ap.parse_args()
    srcs = sources()
    text = manifest(srcs)
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        for n, s in srcs.items():
            Path(args.dump, n + ".py").write_text(s)
    if args.write:
        MANIFEST.write_text(text)
        print(f"{len(srcs)} sources -> {MANIFEST}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
