"""Test-wide set-up: snakemake's SLURM plugin and machines that have SLURM's tools
but no cluster.

snakemake-executor-plugin-slurm (2.8) runs ``scontrol show config`` while Snakemake
loads its plugins, at every start, whatever the executor, whenever ``sinfo`` is on
PATH.  Where SLURM's client tools are installed but no controller answers (the CI
machine after ``.ci/slurm-cluster.sh install``, before the SLURM test starts its
cluster), scontrol retries for up to a minute and the plugin waits 10 s for it: every
Snakemake run of the suite paid that (CI stop 28: the default suite took 493 s
against 190 s).  Outside the ``slurm``-marked tests, a stand-in ``scontrol`` that
fails at once comes first on PATH; the plugin then takes its defaults.  No swgpu
code calls scontrol, and tests that fake SLURM's tools put theirs first.
"""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(autouse=True)
def _scontrol_fails_fast(request, tmp_path_factory, monkeypatch):
    if request.node.get_closest_marker("slurm") or shutil.which("sinfo") is None:
        return
    stand_in = tmp_path_factory.getbasetemp() / "no-slurm-controller"
    tool = stand_in / "scontrol"
    if not tool.exists():
        stand_in.mkdir(exist_ok=True)
        tool.write_text("#!/bin/sh\necho 'scontrol: no controller in this test' >&2\nexit 1\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in}{os.pathsep}{os.environ.get('PATH', '')}")


#: Test files collected first, the longest first (the SIGKILL test, 4-6 minutes on the
#: 2-core VM; the CUDA simulator's kernel runs, 1-3 minutes each).  ``pytest -n
#: --dist loadfile`` hands files to its workers in collection order, so these start
#: at once and the short files fill in beside them.  Each file's tests stay together
#: and in their order (module fixtures are set up once).
FIRST = (
    "test_reliability.py",
    "test_kernels_gpu.py",
    "test_kernels_sim.py",
    "test_gpu_qp2.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))
