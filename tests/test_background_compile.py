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
    monkeypatch.setattr(background, "usable_cpus", lambda: 2)  # one child only
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


def test_with_cpus_to_spare_a_second_child_compiles_the_large_regions(cache, monkeypatch):
    started = []
    monkeypatch.setattr(
        background.subprocess,
        "Popen",
        lambda *a, **k: started.append((a[0], k)) or type("P", (), {"pid": 7 + len(started)}),
    )
    monkeypatch.setattr(background, "usable_cpus", lambda: background.SINGLES_MIN_CPUS)
    assert background.compile_hits() == 8  # the first child's pid
    assert len(started) == 2
    (argv1, k1), (argv2, k2) = started
    assert "first_hits()" in argv1[-1] and "first_singles()" in argv2[-1]
    # each with a lock and a log of its own
    assert [os.path.basename(k["stderr"].name) for k in (k1, k2)] == [
        ".compiling-hits.log",
        ".compiling-singles.log",
    ]
    assert {os.path.basename(p) for p in os.listdir(cache)} >= {
        ".compiling-hits.lock",
        ".compiling-singles.lock",
    }


def test_the_step_waits_for_every_part(cache):
    open(background.lock_path("hits"), "w").close()  # a finished compile
    fd = os.open(background.lock_path("singles"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the second child still compiling
        waited = background.wait("hits", timeout=0.3)
        assert 0.3 <= waited < 3
    finally:
        os.close(fd)
    assert background.wait("hits", timeout=5) < 0.5


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


SINGLES = """
import json
import numpy as np
from swgpu_tools.alignment import batch
from swgpu_tools.alignment.api import align_many
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import EncodedSequences
rng = np.random.default_rng(3)
query = rng.integers(0, 20, 120).astype(np.uint8)
subjects = [rng.integers(0, 20, int(n)).astype(np.uint8) for n in (40, 90, 130, 70, 110, 60)]
queries = EncodedSequences(query, np.array([0, len(query)]))
db = EncodedSequences(np.concatenate(subjects), np.r_[0, np.cumsum([len(x) for x in subjects])])
qi, si = np.zeros(len(subjects), np.int64), np.arange(len(subjects), dtype=np.int64)
# weak hits whose regions exceed the pair lanes' share of the cell limit: one at a time
align_many(queries, db, qi, si, ScoringScheme("BLOSUM62", 11, 1), threads=2, backend="cpu",
           cell_limit=200)
st = batch.traceback_singles.stats
print(json.dumps({"hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values())}))
"""


@pytest.mark.slow
def test_the_second_childs_compile_is_what_the_large_regions_load(tmp_path):
    """first_singles() compiles traceback_singles with the argument types of the real
    path: a later traceback of large regions loads it from the disk cache (a cache
    hit, no compile), which fails when the two drift apart."""
    env = dict(os.environ, SWGPU_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    code = "from swgpu_tools.alignment.warmup import first_singles; first_singles()"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    out = subprocess.run(
        [sys.executable, "-c", SINGLES], env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"hits": 1, "misses": 0}, got
