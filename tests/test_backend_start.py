"""The scoring backend's start-up on a thread (BackendStart), without a GPU.

CI has no GPU: 'gpu' must fail with the reason, from the thread, in the caller;
'auto' falls back to the CPU and scores the same as 'cpu'.
"""

import os
import subprocess
import sys
import threading
import time

import pytest

from swgpu_tools.backend import BackendStart, gpu_status
from swgpu_tools.engine.scan import score
from swgpu_tools.errors import InputError
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

pytestmark = pytest.mark.skipif(gpu_status()[0], reason="these check the no-GPU behaviour")


def _set(ids, seqs):
    return SequenceSet.from_sequences(ids, seqs)


def test_gpu_request_fails_in_the_caller_with_the_reason():
    start = BackendStart("gpu", "auto", background=True)
    with pytest.raises(InputError, match="no GPU is usable"):
        start.result()


def test_auto_falls_back_to_cpu_and_scores_like_cpu():
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    queries = _set(["q1", "q2"], ["MKTAYIAKQRQISFVKSHFSRQ", "WWWWCCCHHH"])
    db = _set(["a", "b", "c"], ["MKTAYIAKQRQ", "QISFVKSHFSRQMKT", "CCCHHHWW"])
    run = BackendStart("auto", "auto", background=True).result()
    assert run.name == "cpu" and "no usable GPU" in run.choice.reason and run.gpu_id is None
    started = BackendStart("auto", "auto", background=True)
    a = score(queries, db, scheme, top_k=3, started=started)
    b = score(queries, db, scheme, top_k=3, backend="cpu")
    assert a.subjects == b.subjects and (a.score == b.score).all() and (a.s == b.s).all()
    assert int(a.score[0]) == int(a.score.max())


def test_process_age_is_the_age_of_this_process():
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("needs Linux /proc")
    t0 = time.time()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(0.5); "
            "from swgpu_tools.io.stepstats import process_age; print(process_age())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    age = float(out.stdout)
    assert 0.5 <= age <= time.time() - t0 + 0.05


def test_a_prestarted_gpu_taken_for_a_rescan_loads_the_batched_kernels(monkeypatch):
    """A start made ahead (the warm process's GPU standby) taken by a re-scan
    (``batched``) loads the several-queries-per-launch kernels on the start's thread;
    by a job with another scheme, that scheme's kernels; a first scan, no batched
    ones.  (The GPU's calls are stood in for: CI has none.)"""
    import swgpu_tools.backend as be
    from swgpu_tools.kernels.gpu import backend as gpu_backend

    calls = []
    monkeypatch.setattr(gpu_backend, "SIM", False)
    monkeypatch.setattr(
        gpu_backend,
        "preload_kernels",
        lambda scheme, batched=False: calls.append((scheme.gap_open, batched)) or 1,
    )
    monkeypatch.setattr(be, "bind_gpu", lambda gpu_id: None)

    class Started:
        name, choice, gpu_id, steps = "gpu", None, 0, {}

    class Ahead:
        began = time.perf_counter()

        def result(self):
            return Started()

    standby = ScoringScheme("BLOSUM62", 11, 1)
    other = ScoringScheme("BLOSUM62", 10, 1)
    # (the job's scheme, whether it is a re-scan, whether the start made ahead loaded
    # the batched kernels already, the loads then made on the job's behalf)
    for scheme, batched, ahead_batched, want in (
        (standby, True, False, [(11, True)]),
        (other, False, False, [(10, False)]),
        (standby, False, False, []),
        (standby, True, True, []),  # a standby told of a re-scan: loaded already
        (other, True, True, [(10, False), (10, True)]),  # ... but of another scheme
    ):
        calls.clear()
        stop = threading.Event()  # the start's single-query kernels: no more once set
        monkeypatch.setattr(be, "_PRESTARTED", [(Ahead(), standby, stop, ahead_batched)])
        got = be.start_backend("auto", "auto", scheme=scheme, batched=batched)
        assert calls == want
        assert ("batched kernels" in got.steps) == any(b for _, b in want)
        assert stop.is_set() == batched


def test_a_set_stop_ends_the_preload_of_scoring_kernels(monkeypatch, tmp_path):
    """preload_kernels loads no more kernels once its ``stop`` is set (a re-scan's job
    took the start made ahead: it needs the batched kernels, not those)."""
    from swgpu_tools.kernels.gpu import backend as gpu_backend
    from swgpu_tools.kernels.gpu import cache, searcher

    loaded = []

    class Kernel:
        overloads = {}

    def get_kernel(mode, G, R, multipass, batched=False):
        loaded.append((G, R))
        if len(loaded) == 3:
            stop.set()
        return Kernel()

    monkeypatch.setattr(cache, "compiled_marker", lambda *a: str(tmp_path))  # exists
    monkeypatch.setattr(cache, "get_kernel", get_kernel)
    monkeypatch.setattr(searcher, "kernel_mode", lambda *a: "s16")  # (asks the device)
    stop = threading.Event()
    n = gpu_backend.preload_kernels(ScoringScheme("BLOSUM62", 11, 1), stop=stop)
    assert n == 3 and len(loaded) == 3
    loaded.clear()
    assert gpu_backend.preload_kernels(ScoringScheme("BLOSUM62", 11, 1)) > 3


def test_a_rescans_preload_loads_the_qp2_blocks_kernel_where_it_is_compiled(monkeypatch, tmp_path):
    """With ``batched`` (a re-scan's delta) the preload also loads qp2's block kernel,
    which the delta's search takes with many queries, where the disk cache holds it
    (its marker); not for single-query kernels, not where it is not compiled."""
    from swgpu_tools.kernels.gpu import backend as gpu_backend
    from swgpu_tools.kernels.gpu import cache, searcher

    qp2 = []

    class Kernel:
        overloads = {}

    marker = tmp_path / "qp2b.ok"
    monkeypatch.setattr(cache, "compiled_marker", lambda *a: str(tmp_path / "none"))
    monkeypatch.setattr(cache, "get_kernel", lambda *a: Kernel())
    monkeypatch.setattr(cache, "qp2_marker", lambda R, U, blocks: str(marker))
    monkeypatch.setattr(
        cache, "get_qp2_kernel", lambda R, U, blocks=False: qp2.append(blocks) or Kernel()
    )
    monkeypatch.setattr(searcher, "kernel_mode", lambda *a: "s16")
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    assert gpu_backend.preload_kernels(scheme, batched=True) == 0 and qp2 == []
    marker.write_text("")
    assert gpu_backend.preload_kernels(scheme) == 0 and qp2 == []
    assert gpu_backend.preload_kernels(scheme, batched=True) == 1 and qp2 == [True]


def test_a_rescans_start_loads_the_batched_kernels_before_the_single_query_ones(monkeypatch):
    """A re-scan's start (``batched``: also the GPU standby told of a re-scan) loads the
    batched kernels first, then the single-query ones (which a set ``stop`` ends);
    a first scan's, the single-query ones only.  (The GPU's calls are stood in for.)"""
    import swgpu_tools.backend as be
    from swgpu_tools.kernels import gpu as gpu_kernels
    from swgpu_tools.kernels.gpu import backend as gpu_backend

    order = []
    monkeypatch.setattr(be, "_PRESTARTED", [])
    monkeypatch.setattr(be, "_start_driver_beside", lambda: None)
    monkeypatch.setattr(be, "_init_gpu_typing_beside", lambda: None)
    monkeypatch.setattr(be, "acquire_gpu", lambda device: 0)
    monkeypatch.setattr(be, "bind_gpu", lambda gpu_id: None)
    monkeypatch.setattr(be, "choose_backend", lambda backend: be.BackendChoice("gpu", "test"))
    monkeypatch.setattr(gpu_backend, "SIM", False)
    monkeypatch.setattr(
        gpu_backend,
        "preload_kernels",
        lambda scheme, batched=False, stop=None: order.append("batched" if batched else "single"),
    )

    def warm_up(scheme=None, stop=None):
        order.append("helpers")
        return {"helpers": 0.0, **gpu_backend.load_scoring_kernels(scheme, stop)}

    monkeypatch.setattr(gpu_kernels, "warm_up", warm_up)
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    got = be.start_backend("auto", "auto", scheme=scheme, batched=True)
    assert order == ["helpers", "batched", "single"]
    assert {"batched kernels", "scoring kernels"} <= set(got.steps)
    order.clear()
    be.start_backend("auto", "auto", scheme=scheme, batched=False)
    assert order == ["helpers", "single"]
