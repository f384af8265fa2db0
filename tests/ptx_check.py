"""Run a PTX-compile check in a child process without the CUDA simulator.

Compiling kernels to PTX needs CUDA's NVVM and NVRTC (pip wheels), but no GPU
or driver.  The check's code prints "SKIP <reason>" and exits 0 when NVVM is
missing (the test is then skipped), asserts what it needs and prints "OK".
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_ptx_check(code: str, args: list[str] | None = None) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(
        [sys.executable, "-c", code, *(args or [])],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    if proc.stdout.startswith("SKIP"):
        pytest.skip(proc.stdout.strip())
    assert "OK" in proc.stdout
