"""precompile() fills the disk cache of the CPU kernels; is_compiled() tells (slow: cold compiles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CHECK = """
import json, sys
from swgpu_tools.kernels import cpu
import swgpu_tools.alignment as A
state = {"search": cpu.is_compiled(), "hits": A.is_compiled("hits"), "pairs": A.is_compiled("pairs")}
if sys.argv[1] == "precompile":
    state["search_run"] = cpu.precompile()
    state["align_run"] = A.precompile()
print(json.dumps(state))
"""


def run(tmp_path, what):
    env = dict(os.environ, SWGPU_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", CHECK, what], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_precompile_then_warm(tmp_path):
    cold = run(tmp_path, "precompile")
    assert not (cold["search"] or cold["hits"] or cold["pairs"])
    assert not cold["search_run"]["was_cached"] and not cold["align_run"]["was_cached"]
    from swgpu_tools.cache import source_digest

    assert cold["search_run"]["cache_dir"] == str(tmp_path / "cache" / "numba" / source_digest())
    warm = run(tmp_path, "precompile")
    assert warm["search"] and warm["hits"] and warm["pairs"]
    assert warm["search_run"]["was_cached"] and warm["align_run"]["was_cached"]
    # loading everything takes a fraction of compiling it
    assert warm["align_run"]["seconds"] < cold["align_run"]["seconds"] / 4
