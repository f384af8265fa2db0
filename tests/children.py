"""Tests that run a script in a fresh Python process (under the CUDA simulator, or
apart from pytest's own imports) and read what it found: the JSON of its last line
that starts with ``RESULT ``."""

from __future__ import annotations

import json
import subprocess
import sys


def script_result(script: str, *args, env: dict | None = None, timeout: float = 600) -> dict:
    """Run ``python -c script args...``; it must exit with 0 and print a RESULT line."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *(str(a) for a in args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no RESULT line: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return json.loads(lines[-1][len("RESULT ") :])
