"""The scoring backend's start-up on a thread (BackendStart), without a GPU.

CI has no GPU: 'gpu' must fail with the reason, from the thread, in the caller;
'auto' falls back to the CPU and scores the same as 'cpu'.
"""

import os
import subprocess
import sys
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
