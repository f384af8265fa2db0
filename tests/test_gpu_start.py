"""A GPU job's start-up without avoidable work (issue 11): numba-cuda's typing set-up
does not import SciPy's linear algebra for a BLAS probe that the kernels never need,
and leaves it importable; generated kernel modules get their bytecode written even
where Python writes none (PYTHONDONTWRITEBYTECODE).  No GPU needed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba.cuda")

PROBE = textwrap.dedent(
    """
    import os, sys
    {before}
    from swgpu_tools.kernels.gpu.cache import init_target
    init_target()
    init_target()  # idempotent
    arraymath = sys.modules["numba.cuda.np.arraymath"]  # loaded by the typing set-up
    print("loaded during init:", os.path.exists(os.environ["MARKER"]))
    print("blas:", arraymath._HAVE_BLAS)
    import scipy.linalg
    print("importable after:", scipy.linalg.NAME)
    """
)


def _fake_scipy(tmp_path):
    """A scipy package whose linalg records that it was imported."""
    pkg = tmp_path / "fake" / "scipy"
    (pkg / "linalg").mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "1.14.0"\n')
    (pkg / "linalg" / "__init__.py").write_text(
        "import os\nopen(os.environ['MARKER'], 'w').close()\nNAME = 'fake linalg'\n"
    )
    (pkg / "linalg" / "cython_blas.py").write_text("")
    return tmp_path / "fake"


def _probe(tmp_path, before=""):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(_fake_scipy(tmp_path)), os.environ.get("PYTHONPATH", "")]),
        MARKER=str(tmp_path / "imported"),
    )
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(before=before)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_typing_set_up_skips_the_blas_probe_and_leaves_scipy_importable(tmp_path):
    out = _probe(tmp_path)
    assert "loaded during init: False" in out, out
    assert "blas: False" in out, out
    assert "importable after: fake linalg" in out, out


def test_scipy_imported_before_is_left_alone(tmp_path):
    out = _probe(tmp_path, before="import scipy.linalg")
    assert "loaded during init: True" in out, out
    assert "blas: True" in out, out


def test_generated_modules_get_bytecode_where_python_writes_none(tmp_path, monkeypatch):
    from swgpu_tools.kernels.gpu import cache

    monkeypatch.setenv("SWGPU_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    source = f"VALUE = {os.getpid()} * 3\n"
    mod = cache.load_module("bytecode_probe", source)
    assert mod.VALUE == os.getpid() * 3
    path = os.path.join(cache.kernels_dir(), cache.module_name("bytecode_probe", source) + ".py")
    assert os.path.exists(importlib.util.cache_from_source(path))


@pytest.mark.parametrize(
    "env, driver, calls",
    [
        ({}, True, [0]),  # started beside the import, once
        ({"SWGPU_CUINIT_BESIDE": "0"}, True, []),
        ({"NUMBA_ENABLE_CUDASIM": "1"}, True, []),
        ({}, False, []),  # no NVIDIA driver here
    ],
)
def test_the_drivers_start_runs_beside_the_import_only_where_a_driver_is(
    monkeypatch, env, driver, calls
):
    """backend._start_driver_beside calls the driver's cuInit(0) through ctypes on a
    thread where an NVIDIA driver is installed, and nowhere else."""
    import threading

    from swgpu_tools import backend

    seen: list[int] = []
    done = threading.Event()

    class FakeDriver:
        def cuInit(self, flags):  # noqa: N802 (the driver's name)
            seen.append(flags)
            done.set()
            return 0

    for name in ("SWGPU_CUINIT_BESIDE", "NUMBA_ENABLE_CUDASIM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(backend, "driver_installed", lambda: driver)
    monkeypatch.setattr(backend.ctypes, "CDLL", lambda name: FakeDriver())
    backend._start_driver_beside()
    done.wait(5 if calls else 0.2)
    assert seen == calls


@pytest.mark.parametrize(
    "tasks, cpus, jobs",
    [(21, 16, 11), (53, 16, 14), (21, 8, 7), (3, 16, 3), (5, 2, 2), (1, 16, 1), (0, 16, 0)],
)
def test_kernels_compile_in_as_few_children_as_the_fewest_rounds_need(tasks, cpus, jobs):
    from swgpu_tools.kernels.gpu.cache import compile_jobs

    assert compile_jobs(tasks, cpus) == jobs


def test_compiling_children_never_pass_the_cap():
    from swgpu_tools.kernels.gpu.cache import MAX_COMPILE_JOBS, compile_jobs

    for n in range(1, 200):
        for cpus in (1, 2, 16, 128):
            j = compile_jobs(n, cpus)
            cap = min(cpus, MAX_COMPILE_JOBS)
            assert 1 <= j <= cap
            rounds = -(-n // j)
            assert rounds == -(-n // cap)  # no more rounds than the cap allows


def test_the_compiling_childrens_cap_can_be_set(monkeypatch):
    from swgpu_tools.kernels.gpu.cache import compile_jobs

    monkeypatch.setenv("SWGPU_COMPILE_JOBS", "8")
    assert compile_jobs(21, 16) == 7  # three rounds of 7, as before run 149
    monkeypatch.setenv("SWGPU_COMPILE_JOBS", "not a number")
    assert compile_jobs(21, 16) == 11
