"""The traceback's alignment kernels compiled in the background of a first run
(swgpu_tools.alignment.background): the lock a waiter honours, and (slow) a real
compile in a child process that leaves the kernels in an empty disk cache."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import subprocess
import sys

import pytest

from swgpu_tools.alignment import background


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(background, "cache_folder", lambda: str(tmp_path))
    return tmp_path


def test_no_background_compile_no_wait(cache):
    assert background.wait("hits", timeout=5) == 0.0


def test_a_held_lock_is_waited_for_then_given_up(cache, caplog):
    fd = os.open(background.lock_path(), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a compile in progress
        with caplog.at_level(logging.INFO):
            waited = background.wait("hits", timeout=0.3)
        assert 0.3 <= waited < 3
        text = caplog.text
        assert "compiling in the background" in text and "compiling here" in text
    finally:
        os.close(fd)  # the compile ended
    assert background.wait("hits", timeout=5) < 0.5


def test_no_second_compile_while_one_holds_the_lock(cache, monkeypatch):
    started = []
    monkeypatch.setattr(
        background.subprocess,
        "Popen",
        lambda *a, **k: started.append(k) or type("P", (), {"pid": 7}),
    )
    fd = os.open(background.lock_path(), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert background.compile_hits() is None and not started
    finally:
        os.close(fd)
    assert background.compile_hits() == 7
    assert len(started[0]["pass_fds"]) == 1  # the lock travels with the child
    assert started[0]["env"][background.COMPILER_ENV] == "1"  # which does not wait for itself
    # and imports this swgpu_tools, not one in the working folder (-P)
    here = os.path.dirname(os.path.dirname(os.path.abspath(background.__file__)))
    assert started[0]["env"]["PYTHONPATH"].split(os.pathsep)[0] == os.path.dirname(here)


def test_the_compiling_child_does_not_wait_for_itself(cache, monkeypatch):
    fd = os.open(background.lock_path(), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        monkeypatch.setenv(background.COMPILER_ENV, "1")
        assert background.wait("hits", timeout=5) == 0.0
    finally:
        os.close(fd)


CHILD = """
import json
import swgpu_tools.alignment as A
from swgpu_tools.alignment import background
before = A.is_compiled("hits")
pid = background.compile_hits()
waited = background.wait("hits")
print(json.dumps({"before": before, "pid": pid, "waited": waited, "after": A.is_compiled("hits")}))
"""


@pytest.mark.slow
def test_background_compile_fills_an_empty_cache(tmp_path):
    env = dict(os.environ, SWGPU_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert not got["before"] and got["pid"] and got["after"], got
    assert got["waited"] > 1.0  # it waited for the child's compile, not a cached load
