"""A re-scan's searches served by another process (swgpu_tools.remote): the messages'
arrays arrive as sent (random dtypes and shapes); a search through :func:`serve` on a
socket returns what the backend returns in this process, by segments too; an error
there reaches the job; a standby that is gone leaves the job a backend of its own."""

from __future__ import annotations

import select
import socket
import threading
import time

import numpy as np
import pytest
from children import script_result
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools import remote
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet
from swgpu_tools.warm.standby import GPU_FD, state_paths


@settings(max_examples=60, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=3), max_size=5),
    dtype=st.sampled_from(["uint8", "int32", "int64", "float64"]),
    seed=st.integers(0, 2**16),
)
def test_arrays_arrive_as_sent(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    arrays = [(rng.random(s) * 100).astype(dtype) for s in shapes]
    a, b = socket.socketpair()
    with a, b:
        out: list = []
        # (a thread reads while this one writes: a socket's buffer is smaller than some)
        t = threading.Thread(target=lambda: out.append(remote.receive_message(b)))
        t.start()
        remote.send_message(a, {"x": 1}, arrays)
        t.join(30)
        message, got = out[0]
    assert message == {"x": 1}
    assert len(got) == len(arrays)
    for x, y in zip(arrays, got):
        assert x.dtype == y.dtype and x.shape == y.shape and (x == y).all()


def _sets(seed: int, n_q: int, n_d: int):
    rng = np.random.default_rng(seed)
    letters = list("ARNDCQEGHILKMFPSTWYV")

    def rs(n):
        return "".join(rng.choice(letters, n))

    qs = SequenceSet.from_pairs([(f"q{i}", rs(int(rng.integers(5, 60)))) for i in range(n_q)])
    db = [(f"s{i}", rs(int(rng.integers(1, 80)))) for i in range(n_d)]
    db += [(f"h{i}", qs.sequence(i)[2:]) for i in range(3)]  # homologs
    return qs, SequenceSet.from_pairs(db)


def _served():
    """A RemoteStart whose standby side runs :func:`remote.serve` on a thread."""
    scheme = ScoringScheme()
    job, standby = socket.socketpair()
    server = threading.Thread(target=remote.serve, args=(standby,), daemon=True)
    server.start()
    return remote.RemoteStart(job, scheme), scheme, job, standby, server


def test_a_search_served_on_a_socket_equals_the_backends_own():
    from swgpu_tools.kernels.cpu import CpuBackend

    start, scheme, job, standby, server = _served()
    qs, db = _sets(3, 12, 40)
    eq, ed = scheme.encode(qs), scheme.encode(db)
    run = start.result()
    assert isinstance(run, remote.RemoteStarted) and run.name == "cpu"  # (no GPU here)
    assert "standby wait" in run.steps
    searcher = run.searcher()
    own = CpuBackend()
    for segments in (None, np.array([0, 17, len(db)], np.int64)):
        got = searcher.search(eq, ed, scheme, 5, segments=segments)
        want = own.search(eq, ed, scheme, 5, segments=segments)
        for name in ("query_index", "subject_index", "score"):
            assert (getattr(got, name) == getattr(want, name)).all(), (name, segments)
        assert len(got) == (12 * 5 if segments is None else 12 * 10)
    # a request it cannot serve: an error back, and the loop goes on
    remote.send_message(job, {"op": "search", "scheme": {}, "top_k": 5})
    reply, _ = remote.receive_message(job)
    assert "error" in reply
    again = searcher.search(eq, ed, scheme, 5)
    assert (again.score == own.search(eq, ed, scheme, 5).score).all()
    job.close()  # the job ends: so does the standby's loop
    server.join(10)
    assert not server.is_alive()
    standby.close()


def test_the_jobs_start_is_answered_once_the_standbys_preload_is_done():
    """``serve(..., ready=...)``: the start's answer waits for ``ready`` (a re-scan
    standby's CPU preload), and the job's start counts that wait as the standby's."""
    scheme = ScoringScheme()
    job, standby = socket.socketpair()
    gate, entered = threading.Event(), threading.Event()

    def ready() -> None:
        entered.set()
        gate.wait()

    server = threading.Thread(
        target=remote.serve, args=(standby,), kwargs={"ready": ready}, daemon=True
    )
    server.start()
    start = remote.RemoteStart(job, scheme)
    start._read_ack(True)  # the first answer (when its start began) comes at once ...
    # (the backend's start may take a while on a busy machine: the gate opens only
    # once the standby waits at it, or the wait measured would be none)
    assert entered.wait(60)
    assert not select.select([job], [], [], 0.3)[0]  # ... the backend's only after ready
    gate.set()
    run = start.result()
    assert run.steps["standby preload wait"] >= 0.2
    job.close()
    server.join(10)
    standby.close()


def test_an_error_in_the_standby_fails_the_jobs_search():
    scheme = ScoringScheme()
    job, standby = socket.socketpair()
    qs, db = _sets(4, 3, 5)

    def fails():
        remote.receive_message(standby)
        remote.send_message(standby, {"error": "CudaAPIError: out of memory"})

    t = threading.Thread(target=fails)
    t.start()
    searcher = remote.RemoteSearcher(job)
    with pytest.raises(remote.RemoteError, match="out of memory"):
        searcher.search(scheme.encode(qs), scheme.encode(db), scheme, 3)
    t.join(10)
    job.close()
    standby.close()


def test_the_jobs_wait_for_the_standby_counts_from_when_the_standbys_start_began():
    """The cost model's start-up left (``seconds_left``): from the age the standby gives
    at once (its start made ahead began earlier than the job), 0 once it answered."""
    job, standby = socket.socketpair()
    start = remote.RemoteStart(job, ScoringScheme())
    assert remote.receive_message(standby)[0]["op"] == "start"
    assert 2.9 < start.seconds_left(3.0) <= 3.0  # nothing heard yet: from the job's ask
    remote.send_message(standby, {"began": time.time() - 2.5})
    time.sleep(0.05)
    assert 0.0 < start.seconds_left(3.0) < 0.46  # its start began 2.55 s ago
    assert start.seconds_left(2.0) == 0.0
    remote.send_message(
        standby, {"name": "gpu", "reason": "a GPU", "gpu_id": 0, "uuid": "GPU-x", "steps": {}}
    )
    run = start.result()
    assert run.name == "gpu" and run.device_uuid == "GPU-x" and start.seconds_left(3.0) == 0.0
    job.close()
    standby.close()


def test_a_standby_that_is_gone_leaves_the_job_its_own_backend():
    scheme = ScoringScheme()
    job, standby = socket.socketpair()
    standby.close()
    start = remote.RemoteStart(job, scheme, backend="cpu")
    run = start.result()
    assert not isinstance(run, remote.RemoteStarted) and run.name == "cpu"
    assert start.seconds_left(3.0) == 0.0
    job.close()


def test_the_job_finds_its_socket_once_in_its_environment(monkeypatch):
    assert remote.ENV_FD == GPU_FD  # (the standby module names it without importing remote)
    monkeypatch.delenv(remote.ENV_FD, raising=False)
    assert remote.remote_start(ScoringScheme()) is None
    job, standby = socket.socketpair()
    monkeypatch.setenv(remote.ENV_FD, str(job.detach()))
    start = remote.remote_start(ScoringScheme())
    assert start is not None and remote.ENV_FD not in __import__("os").environ
    assert remote.receive_message(standby)[0]["op"] == "start"  # asked at once
    start.sock.close()
    standby.close()


def test_state_paths_of_a_scoring_command_line():
    assert state_paths(
        ["score-shard", "a.swdb", "--state", "s/0.npz", "s/1.npz", "--top-k", "5"]
    ) == [
        "s/0.npz",
        "s/1.npz",
    ]
    assert state_paths(["score-shard", "a", "--state=s.npz"]) == ["s.npz"]
    assert state_paths(["score-shard", "a", "--queries", "q"]) == []


BEFORE_READY = r"""
import json, os, socket, sys, time
sys.path.insert(0, sys.argv[1])
from test_remote import _sets
from swgpu_tools import remote
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.warm.standby import fork_standby, offer_searches

gate_r, gate_w = os.pipe()

def preload():  # (in the standby) loading until the script says go
    os.read(gate_r, 1)

# forked first, as from the warm process (no Numba threads started in this process yet)
standby = fork_standby(lambda: None, None, "BLOSUM62:11:1", preload)
request = {"argv": ["score-shard", "a.swdb"], "env": dict(os.environ), "pid": 1}
fd = offer_searches(standby, request)
out = {"offered": fd is not None, "used_up": standby.sock is None}
os.write(gate_w, b"x")  # its preload ends now, after the warm process's end closed
scheme = ScoringScheme()
start = remote.RemoteStart(socket.socket(fileno=fd), scheme)
run = start.result()
out["remote"] = isinstance(run, remote.RemoteStarted)
qs, db = _sets(5, 6, 30)
got = run.searcher().search(scheme.encode(qs), scheme.encode(db), scheme, 4)
start.sock.close()  # the job ends: so does the standby
deadline = time.monotonic() + 30
out["exit"] = None
while time.monotonic() < deadline:
    pid, status = os.waitpid(standby.pid, os.WNOHANG)
    if pid:
        out["exit"] = os.waitstatus_to_exitcode(status)
        break
    time.sleep(0.05)
from swgpu_tools.kernels.cpu import CpuBackend
want = CpuBackend().search(scheme.encode(qs), scheme.encode(db), scheme, 4)
out["equal"] = bool((got.subject_index == want.subject_index).all()
                    and (got.score == want.score).all() and len(got) == 24)
print("RESULT " + json.dumps(out))
"""


def test_a_standby_offered_a_jobs_searches_before_it_was_ready_serves_them():
    """The warm process offers the standby a job's searches and closes its end while
    the standby still loads (its READY then finds no reader): the standby reads the
    offer all the same and serves the job (the same hits as the CPU backend here);
    then it ends.  (In a fresh process: a fork after this one ran Numba's threads
    would hang.)"""
    from pathlib import Path

    out = script_result(BEFORE_READY, str(Path(__file__).parent), timeout=120)
    assert out == {"offered": True, "used_up": True, "remote": True, "exit": 0, "equal": True}


READY_BEFORE_PRELOAD = r"""
import json, os, select, sys
sys.path.insert(0, sys.argv[1])
from swgpu_tools.warm.standby import READY, fork_standby

batched = sys.argv[2] == "1"
gate_r, gate_w = os.pipe()
done_r, done_w = os.pipe()

def preload():  # (in the standby) loading until the script says go
    os.read(gate_r, 1)
    os.write(done_w, b"p")

standby = fork_standby(lambda: None, None, "BLOSUM62:11:1", preload, batched=batched)
out = {}
# READY while the preload is held (3 s where it must not come: the preload is not
# started on a thread then, and nothing else holds it)
got = select.select([standby.sock], [], [], 30 if batched else 3)[0]
out["ready_while_held"] = bool(got) and standby.sock.recv(1) == READY
os.write(gate_w, b"x")
out["preloaded"] = bool(select.select([done_r], [], [], 30)[0])
if not out["ready_while_held"]:
    out["ready_after"] = bool(select.select([standby.sock], [], [], 30)[0])
standby.close()  # the warm process is gone: the standby ends
pid, status = os.waitpid(standby.pid, 0)
out["exit"] = os.waitstatus_to_exitcode(status)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("batched", [True, False], ids=["rescan", "scan"])
def test_a_standby_told_of_a_rescan_is_ready_before_its_preload(batched):
    """A standby that expects a re-scan (``batched``) says READY and reads its offers
    while its CPU preload still waits (that runs on a thread once the GPU's start is
    over: a re-scan's job waits for the GPU, not for it); one that expects a scan from
    scratch (it may run the whole job) says READY only after its preload."""
    from pathlib import Path

    here = str(Path(__file__).parent.parent)
    out = script_result(READY_BEFORE_PRELOAD, here, str(int(batched)), timeout=120)
    want = {"ready_while_held": batched, "preloaded": True, "exit": 0}
    if not batched:
        want["ready_after"] = True
    assert out == want


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=30), st.integers(1, 5))
def test_the_query_column_is_left_out_only_where_it_is_implied(column, n_queries):
    """``_per_query`` against its definition: a count c such that the column is each
    query 0..n-1 repeated c times in order; None where there is none."""
    q = np.asarray(column, dtype=np.int32)
    got = remote._per_query(q, n_queries)
    implied = [
        c
        for c in range(len(q) + 1)
        if c * n_queries == len(q) and q.tolist() == [i for i in range(n_queries) for _ in range(c)]
    ]
    assert got == (implied[0] if implied else None)
    if got is not None:
        assert np.repeat(np.arange(n_queries, dtype=np.int32), got).tolist() == q.tolist()
