"""The warm start (swgpu_tools.warm): a job's ``swgpu`` command runs in a child of
the warm process with the job's arguments, folder, environment and standard
streams, and ends with the child's status; a signal to the job reaches the
child; a job that goes away takes its child with it; a job whose environment
differs, or that finds no warm process, runs its command itself; the warm
process ends with its parent.  The workflow tests run with the warm start on
(config default), so every step's tables are checked through it as well."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swgpu_tools.warm import launch
from swgpu_tools.warm.client import forward
from swgpu_tools.warm.protocol import ENV, fingerprint

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "swgpu_tools" / "data"
#: the console script beside this Python (a virtual environment), else the one on PATH
SWGPU = (
    str(Path(sys.executable).parent / "swgpu")
    if (Path(sys.executable).parent / "swgpu").exists()
    else shutil.which("swgpu") or "swgpu"
)


def _wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Warm:
    """A warm process started as the Snakefile starts it, its log, its socket."""

    def __init__(
        self,
        tmp_path: Path,
        parent_cmd: list[str] | None = None,
        gpu: bool = False,
        standby: str | None = None,
        rescan: bool = False,
        job_command: str | None = None,
    ):
        self.log = tmp_path / "warm.log"
        self.socket = str(tmp_path / "s")
        env = {k: v for k, v in os.environ.items() if k != ENV}
        args = [SWGPU, "warm-serve", "--socket", self.socket] + (["--gpu"] if gpu else [])
        args += ["--job-command", job_command] if job_command else []
        args += ["--gpu-standby", standby] if standby else []
        args += ["--rescan"] if rescan else []
        if parent_cmd is None:
            args += ["--parent", str(os.getpid())]
            self.proc = subprocess.Popen(
                args, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, env=env
            )
        else:  # started by a shell that ends: "--parent $$"
            cmd = " ".join(args) + f" --parent $$ >{self.log} 2>&1 & {' '.join(parent_cmd)}"
            self.proc = subprocess.Popen(["sh", "-c", cmd], env=env)
        _wait_for(lambda: "loaded" in self.text(), what="the warm process's imports")

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def children(self, command: str) -> list[int]:
        return [int(p) for p in re.findall(rf"pid (\d+): swgpu {command} ", self.text())]

    def env(self, **extra) -> dict:
        return {**os.environ, ENV: self.socket, **extra}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)


@pytest.fixture
def warm(tmp_path):
    w = Warm(tmp_path)
    yield w
    w.stop()


def _receipt(fasta, out, env, cwd=None) -> subprocess.CompletedProcess:
    """A job's ``swgpu receipt`` (a quick command) with the given environment."""
    return subprocess.run(
        [SWGPU, "receipt", str(fasta), "--out", str(out)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not reaped yet) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_forwarded_command_imports_no_command_line_module(warm, tmp_path):
    """The console script hands a job's command to the warm process before the
    command-line modules are imported (swgpu_tools/console.py); with no warm process
    it runs the command itself."""
    db = str(DATA / "example_database.fasta.gz")

    def receipt(out, env):  # the console script, its imports listed (-X importtime)
        return subprocess.run(
            [sys.executable, "-X", "importtime", SWGPU, "receipt", db, "--out", str(out)],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def imported(proc) -> list[str]:
        assert proc.returncode == 0, proc.stderr
        return re.findall(r"\| +(swgpu_tools[\w.]*)$", proc.stderr, re.M)

    forwarded = imported(receipt(tmp_path / "r.json", warm.env()))
    assert len(warm.children("receipt")) == 1
    assert "swgpu_tools.warm.client" in forwarded
    assert not [m for m in forwarded if m.startswith("swgpu_tools.cli")], forwarded
    alone = {k: v for k, v in warm.env().items() if k != ENV}
    assert "swgpu_tools.cli" in imported(receipt(tmp_path / "r2.json", alone))
    assert len(warm.children("receipt")) == 1  # not forwarded
    assert (tmp_path / "r.json").read_bytes() == (tmp_path / "r2.json").read_bytes()


def test_the_job_command_hands_commands_over_without_site_else_runs_them_itself(tmp_path):
    """The warm process's job command (a local run's jobs' ``swgpu``) runs Python
    without its site module and hands the command over; where the warm process
    refuses it (another environment) or is missing, and for a command that fails,
    the job's process runs it as the console script would (same output, status and
    messages)."""
    cmd = tmp_path / "bin" / "swgpu"
    w = Warm(tmp_path, job_command=str(cmd))
    try:
        _wait_for(cmd.exists, what="the job command")
        line = cmd.read_text().splitlines()[1]
        words = shlex.split(line)
        assert words[:3] == ["exec", sys.executable, "-S"] or (
            words[0] == "exec" and os.path.samefile(words[1], sys.executable) and words[2] == "-S"
        ), line
        fasta = str(DATA / "example_queries.fasta")

        def job(out, env, *extra):
            return subprocess.run(
                [str(cmd), "receipt", fasta, "--out", str(out), *extra],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip

        served = job(tmp_path / "a.json", w.env())
        assert served.returncode == 0, served.stderr
        assert len(w.children("receipt")) == 1  # served: its fingerprint without the path
        refused = job(tmp_path / "b.json", w.env(NUMBA_OPT="1"))
        assert refused.returncode == 0, refused.stderr
        missing = job(tmp_path / "c.json", {**os.environ, ENV: str(tmp_path / "nothing")})
        assert missing.returncode == 0, missing.stderr
        assert len(w.children("receipt")) == 1  # both ran in the job's own process
        alone = _receipt(
            fasta, tmp_path / "d.json", {k: v for k, v in os.environ.items() if k != ENV}
        )
        assert alone.returncode == 0, alone.stderr
        made = [(tmp_path / f"{x}.json").read_bytes() for x in "abcd"]
        assert made[0] == made[1] == made[2] == made[3]
        for env in (w.env(), {**os.environ, ENV: str(tmp_path / "nothing")}):  # a bad option
            bad = job(tmp_path / "e.json", env, "--no-such-option")
            assert bad.returncode == 2
            assert "usage: swgpu receipt" in bad.stderr, bad.stderr
    finally:
        w.stop()


def test_a_command_runs_in_a_child_with_the_jobs_folder_streams_and_status(warm, tmp_path):
    work = tmp_path / "job"
    work.mkdir()
    # the job's folder (a relative output path) and its stderr (the log line)
    proc = _receipt(str(DATA / "example_database.fasta.gz"), "r.json", warm.env(), cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "new or changed" in proc.stderr  # written by the child to the job's stderr
    receipt = json.loads((work / "r.json").read_text())
    assert receipt["bytes"] == os.path.getsize(DATA / "example_database.fasta.gz")
    assert len(warm.children("receipt")) == 1  # the warm process ran it
    assert "{'exit': 0}" in warm.text()

    # a failing command: its status (2) and its message come back
    proc = _receipt(str(tmp_path / "missing.fasta"), "x.json", warm.env(), cwd=work)
    assert proc.returncode == 2
    assert "missing.fasta" in proc.stderr
    assert len(warm.children("receipt")) == 2
    assert "{'exit': 2}" in warm.text()


def test_a_step_run_by_the_warm_process_records_when_its_job_started_and_asked(warm, tmp_path):
    """A job handed to the warm process: its step's statistics say when the job's own
    process started, when it first asked and when a child took it (``job_epochs``),
    before the step's start (what separates a step from the one before: Snakemake,
    the hand-over, the child's own start); the variable that carries them is no part
    of the environment's fingerprint."""
    from swgpu_tools.warm.protocol import JOB_EPOCHS, fingerprint

    assert fingerprint({JOB_EPOCHS: "1,2"}) == fingerprint({})
    t0 = time.time()
    proc = subprocess.run(
        [SWGPU, "shard", str(DATA / "example_database.fasta.gz"), "--shards", "2"]
        + ["--out-dir", str(tmp_path / "shards"), "--stats", str(tmp_path / "shard_db.json")],
        env=warm.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert warm.children("shard")  # the warm process ran it
    rec = json.loads((tmp_path / "shard_db.json").read_text())
    job = rec["job_epochs"]
    assert t0 - 1 <= job["process"] <= job["asked"] <= job["taken"] + 0.001, rec
    assert job["taken"] <= rec["start_epoch"] + 0.001, rec


def test_the_jobs_environment_reaches_the_child(warm, tmp_path):
    """SWGPU_PROFILE is read when the command runs: the child gets the job's value."""
    prof = tmp_path / "prof"
    proc = _receipt(
        str(DATA / "example_queries.fasta"), str(tmp_path / "r"), warm.env(SWGPU_PROFILE=str(prof))
    )
    assert proc.returncode == 0, proc.stderr
    assert warm.children("receipt")
    assert [p.name.split("-")[0] for p in prof.iterdir()] == ["receipt"]


def test_a_warm_process_started_under_swgpu_profile_profiles_its_commands_not_itself(
    tmp_path, monkeypatch
):
    """A workflow run with SWGPU_PROFILE set starts the warm process with it: the
    warm process must not run under the profiler, or its children inherit one
    (Python 3.12 then refuses theirs: every job failed)."""
    prof = tmp_path / "prof"
    monkeypatch.setenv("SWGPU_PROFILE", str(prof))
    w = Warm(tmp_path)
    try:
        proc = _receipt(str(DATA / "example_queries.fasta"), str(tmp_path / "r"), w.env())
        assert proc.returncode == 0, proc.stderr
        assert w.children("receipt")
    finally:
        w.stop()
    assert [p.name.split("-")[0] for p in prof.iterdir()] == ["receipt"]


def test_another_environment_or_no_warm_process_runs_the_command_here(warm, tmp_path):
    # a Numba setting (read at import time) that the warm process did not have
    proc = _receipt(
        str(DATA / "example_queries.fasta"), str(tmp_path / "a"), warm.env(NUMBA_OPT="1")
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a").exists()
    assert warm.children("receipt") == []  # refused, so run by the job itself
    assert fingerprint({"NUMBA_OPT": "1"}) != fingerprint({})
    assert fingerprint({"OMP_NUM_THREADS": "4"}) == fingerprint({})  # set per job by Snakemake

    # nothing listening at the path: the job runs it
    assert forward(["--version"], path=str(tmp_path / "nothing-here")) is None
    proc = _receipt(
        str(DATA / "example_queries.fasta"),
        str(tmp_path / "b"),
        {**os.environ, ENV: str(tmp_path / "nothing-here")},
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "b").exists()


def _blocked_shard_command(warm, tmp_path):
    """A command that waits on its standard input (the job's pipe, passed on)."""
    job = subprocess.Popen(
        [SWGPU, "shard", "/dev/stdin", "--shards", "1", "--out-dir", str(tmp_path / "sh")],
        env=warm.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _wait_for(lambda: warm.children("shard"), what="the child")
    (child,) = warm.children("shard")
    assert _alive(child)
    return job, child


def test_a_signal_to_the_job_reaches_the_child_and_the_job_ends_as_it_did(warm, tmp_path):
    job, child = _blocked_shard_command(warm, tmp_path)
    job.send_signal(signal.SIGTERM)
    job.communicate(timeout=60)
    assert job.returncode == -signal.SIGTERM  # ended by the same signal as its child
    _wait_for(lambda: not _alive(child), timeout=20, what="the child's end")
    assert "{'signal': 15}" in warm.text()


def test_a_job_that_goes_away_takes_its_child_with_it(warm, tmp_path):
    job, child = _blocked_shard_command(warm, tmp_path)
    job.kill()  # SIGKILL: nothing passed on; the warm process sees the job go
    job.wait(60)  # its stdin stays open: the child would wait on it forever
    _wait_for(lambda: not _alive(child), timeout=20, what="the child's end")
    assert "its job went away" in warm.text()
    job.stdin.close()
    # and the warm process still serves the next job
    proc = _receipt(str(DATA / "example_queries.fasta"), str(tmp_path / "r"), warm.env())
    assert proc.returncode == 0, proc.stderr
    assert len(warm.children("receipt")) == 1


def test_the_warm_process_ends_with_its_parent(tmp_path):
    w = Warm(tmp_path, parent_cmd=["sleep", "1"])
    w.proc.wait(30)  # the shell (its parent) ended
    pids = [int(p) for p in re.findall(r"\(pid (\d+)", w.text())]
    assert len(pids) == 4  # the four generations
    _wait_for(lambda: not any(map(_alive, pids)), timeout=20, what="the warm processes' end")
    assert "Snakemake ended: stopping" in w.text()
    assert not os.path.exists(w.socket)


def test_the_job_command_is_put_first_only_in_place_of_the_plain_console_script(tmp_path):
    """pip's console script gives way to the warm process's job command; a wrapper of
    another kind (one that runs something else first) stays the jobs' swgpu."""
    from swgpu_tools.warm.launch import plain_console_script

    pip = tmp_path / "pip-swgpu"
    pip.write_text(
        f"#!{sys.executable}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
        "from swgpu_tools.console import entry\nif __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        "    sys.exit(entry())\n"
    )
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(
        "#!/bin/sh\nexec python3 -c 'from swgpu_tools.console import entry; entry()' \"$@\"\n"
    )
    fake = tmp_path / "fake"
    fake.write_text(f"#!{sys.executable}\nimport os, sys\nos.execv('/bin/true', ['true'])\n")
    assert plain_console_script(str(pip))
    assert not plain_console_script(str(wrapper))
    assert not plain_console_script(str(fake))
    assert not plain_console_script(str(tmp_path / "missing"))


def test_launch_sets_and_clears_the_jobs_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("PATH", f"{Path(SWGPU).parent}{os.pathsep}{os.environ['PATH']}")
    handle = launch.start(str(tmp_path / "logs" / "warm.log"), gpu=False)
    try:
        assert handle is not None and os.environ[ENV] == handle.socket
        assert oct(os.stat(handle.folder).st_mode & 0o777) == "0o700"
        # the jobs' swgpu (the warm process's job command) first on their PATH
        job_bin = os.path.join(handle.folder, launch.JOB_BIN)
        assert os.environ["PATH"].split(os.pathsep)[0] == job_bin
        log = tmp_path / "logs" / "warm.log"
        _wait_for(lambda: "loaded" in log.read_text(), what="the imports")
        assert shutil.which("swgpu") == os.path.join(job_bin, "swgpu")
        proc = subprocess.run(  # a job started now (this process's environment)
            ["swgpu", "receipt", str(DATA / "example_queries.fasta"), "--out", str(tmp_path / "r")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "swgpu receipt" in log.read_text()
    finally:
        launch.stop(handle)
    assert ENV not in os.environ
    assert os.environ["PATH"].split(os.pathsep)[0] == str(Path(SWGPU).parent)  # as before
    assert handle.process.returncode == 0
    assert not os.path.exists(handle.folder)


@pytest.mark.gpu
def test_gpu_search_in_a_child_of_the_warm_process_equals_its_own_process(tmp_path):
    """The warm process loads numba-cuda and its typing without starting CUDA;
    its child starts CUDA and scores on the GPU as a fresh process does."""
    args = [SWGPU, "search", str(DATA / "example_queries.fasta")]
    args += [str(DATA / "example_database.fasta.gz"), "--backend", "gpu", "--top-k", "50"]
    env = {k: v for k, v in os.environ.items() if k != ENV}
    own = subprocess.run(
        args + ["-o", str(tmp_path / "own.tsv")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if own.returncode and "GPU" in own.stderr:
        pytest.skip(f"no usable GPU: {own.stderr.strip()[-300:]}")
    assert own.returncode == 0, own.stderr
    w = Warm(tmp_path, gpu=True)
    try:
        assert "started CUDA" not in w.text()
        forked = subprocess.run(
            args + ["-o", str(tmp_path / "warm.tsv")],
            env=w.env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert forked.returncode == 0, forked.stderr
        assert len(w.children("search")) == 1
        own_rows = (tmp_path / "own.tsv").read_text()
        assert own_rows.count("\n") > 50
        assert (tmp_path / "warm.tsv").read_text() == own_rows
    finally:
        w.stop()


@pytest.fixture
def bare_server(tmp_path):
    """A warm server object in this process, neither listening nor loading: for
    its request and reply logic."""
    from swgpu_tools.warm import server as warm_server

    srv = warm_server._Server(str(tmp_path / "s"), None, None, False, 1.0)
    yield srv
    srv.listener.close()
    srv.sel.close()
    signal.set_wakeup_fd(-1)
    os.close(srv.wake_r)
    os.close(srv.wake_w)


def test_a_command_whose_imports_are_loading_waits_for_them(bare_server):
    """A request for a later generation than the serving process's, while that
    generation loads, is answered "retry" (the job asks again and is served by
    the loaded process); never once the load took longer than RETRY_S."""
    from swgpu_tools.warm import server as warm_server

    srv = bare_server
    srv.from_successor, srv.successor_since = 99, time.monotonic()

    def waits(command):
        return srv._later_generation_loading({"argv": [command, "x"]})

    assert waits("score-shard") and waits("run-steps")
    assert not waits("shard") and not waits("receipt") and not waits("check-shards")
    # a re-scan's job whose searches the GPU standby serves needs the CPU's imports only
    assert srv._later_generation_loading({"argv": ["score-shard", "x"]}, split=True)
    srv.generation = 1  # the scoring generation (CPU) serves, numba-cuda's loads
    assert not srv._later_generation_loading({"argv": ["score-shard", "x"]}, split=True)
    assert waits("score-shard") and waits("run-steps")
    srv.generation = 2  # numba-cuda's serves, the finish one loads
    assert not waits("score-shard") and waits("run-steps")
    srv.successor_since -= warm_server.RETRY_S + 1  # a load that hangs
    assert not waits("run-steps")
    srv.successor_since = time.monotonic()
    srv.from_successor = None  # nothing loading
    assert not waits("run-steps")


def test_the_job_asks_again_after_a_retry_and_runs_the_command_itself_when_refused(tmp_path):
    """The client's side: "retry" replies make it ask again; "refused" makes it
    return None (the job runs its command itself)."""
    import socket
    import threading

    from swgpu_tools.warm.protocol import receive, send

    path = str(tmp_path / "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    asked = []

    def serve():
        for reply in ({"retry": "loading"}, {"retry": "loading"}, {"refused": "no"}):
            conn, _ = listener.accept()
            request, fds = receive(conn, max_fds=3)
            for fd in fds:
                os.close(fd)
            asked.append(request["argv"])
            send(conn, reply)
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        assert forward(["score-shard", "a"], path) is None
    finally:
        thread.join(10)
        listener.close()
    assert asked == [["score-shard", "a"]] * 3


def test_each_command_waits_only_for_a_generation_that_exists():
    from swgpu_tools.cli.steps import STEPS
    from swgpu_tools.warm.server import COMMAND_GENERATION, SPLIT_GENERATION, generations

    known = {name for name, _ in STEPS} | {"run-steps"}
    assert set(COMMAND_GENERATION) <= known
    assert all(0 < g < len(generations(True)) for g in COMMAND_GENERATION.values())
    # the scoring job waits for the generation that loads numba-cuda; a re-scan's
    # whose searches the GPU standby serves, for the one that loads Numba's CPU side
    scoring = generations(True)[COMMAND_GENERATION["score-shard"]]
    assert "cuda" in [name for name, _ in scoring]
    split = [name for g in generations(True)[: SPLIT_GENERATION + 1] for name, _ in g]
    assert "numba" in split and "scoring" in split and "cuda" not in split
    assert "matrices" in split  # every job checks its scheme's matrix name


def test_scoring_on_the_cpu_leaves_the_cuda_generation_empty(tmp_path, monkeypatch):
    """Where the scoring jobs run on the CPU (--backend cpu: the warm launch's cuda
    False, `warm-serve --no-cuda`), the generation a scoring job waits for loads
    nothing (numba-cuda is not imported: 0.6 s of the 2-core VM's re-scan the job
    waited for); the others are as they were."""
    from swgpu_tools.warm.server import COMMAND_GENERATION, generations

    g = COMMAND_GENERATION["score-shard"]
    names = [[n for n, _ in gen] for gen in generations(False, cuda=False)]
    assert names[g] == [] and names == [
        [n for n, _ in gen] if k != g else [] for k, gen in enumerate(generations(False))
    ]
    assert [n for n, _ in generations(True, cuda=False)[g]] == ["cuda"]  # a GPU: kept
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("PATH", f"{Path(SWGPU).parent}{os.pathsep}{os.environ['PATH']}")
    handle = launch.start(str(tmp_path / "warm.log"), gpu=False, cuda=False)
    try:
        log = tmp_path / "warm.log"
        _wait_for(lambda: "loaded" in log.read_text(), what="the imports")
        text = log.read_text()
        assert "stage cuda" not in text and "stage numba" in text and "stage pandas" in text
        assert f"{len(names) - 1}: loaded" in text  # every generation, the empty one too
    finally:
        launch.stop(handle)


def test_the_numba_stage_loads_the_cpu_typing_without_importing_scipy_linalg(tmp_path):
    """Numba's BLAS probe (``import scipy.linalg``, 0.29 s of the stage on a GPU host)
    is skipped in the warm process's Numba stage; ``scipy.linalg`` imports as usual
    afterwards, and a CPU kernel still runs.  A stand-in SciPy (on PYTHONPATH) notes
    each import of its ``linalg``."""
    linalg = tmp_path / "scipy" / "linalg"
    linalg.mkdir(parents=True)
    (tmp_path / "scipy" / "__init__.py").write_text('__version__ = "1.14.1"\n')
    marker = tmp_path / "imported"
    (linalg / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write('linalg\\n')\n")
    (linalg / "cython_blas.py").write_text("")
    code = (
        "import numpy as np\n"
        "from swgpu_tools.warm.server import _stage_numba\n"
        "_stage_numba()\n"
        "from numba.np import arraymath\n"
        "from swgpu_tools.kernels.seqhash import hash_ranges\n"
        "h = hash_ranges(np.frombuffer(b'MKTAYIAKQR', np.uint8), np.array([0, 4, 10]), 1)\n"
        "import scipy.linalg\n"
        "print(arraymath._HAVE_BLAS, len(h), scipy.linalg is not None)"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "2", "True"]
    assert marker.read_text() == "linalg\n"  # once: the import after the stage, not the probe


def test_the_matrices_stage_leaves_the_matrix_names_cached():
    """A job forked after the stage finds the names cached (no import of Bio.Align)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from swgpu_tools.warm.server import _stage_matrices\n"
        "from swgpu_tools.scoring import matrix_names\n"
        "assert 'Bio.Align' not in sys.modules\n"
        "_stage_matrices()\n"
        "print(matrix_names.cache_info().currsize, 'Bio.Align.substitution_matrices' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "True"]


def test_a_childs_status_reaches_its_job_before_the_child_ends(bare_server):
    """The child writes its status to a pipe once its command is done and then
    exits (a process that used CUDA takes ~0.1 s more to end): the server answers
    the job from the pipe, without waiting for the exit."""
    import selectors
    import socket
    import struct

    from swgpu_tools.warm.protocol import receive

    srv = bare_server
    job, conn = socket.socketpair()
    r, w = os.pipe()
    pid = 999_999  # no such child: only its pipe speaks
    try:
        srv.children[pid] = conn
        srv.reports[pid] = r
        srv.sel.register(r, selectors.EVENT_READ, ("report", pid))
        srv.poll(0.05)
        assert pid in srv.children  # nothing yet
        os.write(w, struct.pack("!i", 3))
        srv.poll(1.0)
        job.settimeout(5)
        assert receive(job)[0] == {"exit": 3}
        assert pid not in srv.children and pid not in srv.reports
    finally:
        os.close(w)
        job.close()


def _job_in_a_warm_child(tmp_path, command, env=None) -> tuple[int, int]:
    """Fork a child that runs ``command`` as a warm child runs a job's (run_job, no
    streams handed over): its pid, and the pipe its status comes by."""
    from swgpu_tools.warm.standby import run_job

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the warm child
        os.close(r)
        request = {"fds": [], "cwd": str(tmp_path), "umask": 0o022, "argv": ["x"]}
        run_job({**request, "env": env or {}}, [], w, command)
    os.close(w)
    return pid, r


def test_work_left_for_later_runs_after_the_status_is_given(tmp_path, capfd):
    """What a command leaves for later (swgpu_tools.later: a shard step's scratch
    folder, say) runs in the warm child after its status went to the job; elsewhere
    it runs at once; an error in it is printed and the rest still runs."""
    import struct

    from swgpu_tools.later import deferring, later, run_pending

    marker = tmp_path / "later"

    def command(argv):
        def slow():
            time.sleep(1.5)
            marker.write_text("done")

        later(slow)
        return 3

    pid, r = _job_in_a_warm_child(tmp_path, command)
    t0 = time.monotonic()
    status = struct.unpack("!i", os.read(r, 4))[0]
    took = time.monotonic() - t0
    assert status == 3 and not marker.exists() and took < 1.2, took
    os.waitpid(pid, 0)
    os.close(r)
    assert marker.read_text() == "done"

    done = []
    later(done.append, "now")  # outside a warm child's command: at once
    assert done == ["now"]
    with deferring():
        later(lambda: 1 / 0)
        later(done.append, "after")
    assert done == ["now"]
    run_pending()
    assert done == ["now", "after"]
    assert "ZeroDivisionError" in capfd.readouterr().err


def test_the_warm_launch_stops_after_the_work_left_for_later(tmp_path, monkeypatch):
    """A warm child holds the later lock (warm.protocol.LATER_LOCK) while it runs a
    job's command and what the command left for after its status, and only it (not
    a process it forked); the warm launch's stop returns after that work, not while
    it goes on (a re-scan's states written after the scoring job's status)."""
    import signal
    import struct

    from swgpu_tools.later import later
    from swgpu_tools.warm.protocol import hold_later_lock, wait_later_lock

    socket_path = str(tmp_path / "socket")  # (the lock lies beside it)
    marker = tmp_path / "later"
    helper = tmp_path / "helper"

    def command(argv):
        h = os.fork()
        if h == 0:  # a helper the step forked, outliving it: holds no lock
            time.sleep(8)
            os._exit(0)
        helper.write_text(str(h))

        def slow():
            time.sleep(1.0)
            marker.write_text("done")

        later(slow)
        return 0

    pid, r = _job_in_a_warm_child(tmp_path, command, {ENV: socket_path})
    try:
        assert struct.unpack("!i", os.read(r, 4))[0] == 0
        assert not wait_later_lock(socket_path, 0.2) and not marker.exists()  # held
        t0 = time.monotonic()
        assert wait_later_lock(socket_path, 10)  # free once the child ended
        assert time.monotonic() - t0 < 5, "waited for the helper, which holds no lock"
        assert marker.read_text() == "done"
    finally:
        os.waitpid(pid, 0)
        os.close(r)
        os.kill(int(helper.read_text()), signal.SIGKILL)

    # launch.stop: a process still at its later work, holding the lock
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("PATH", f"{Path(SWGPU).parent}{os.pathsep}{os.environ['PATH']}")
    handle = launch.start(str(tmp_path / "warm.log"), gpu=False)
    marker2 = tmp_path / "later2"
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(ready_r)
        os.write(ready_w, b"x" if hold_later_lock(handle.socket) is not None else b"-")
        time.sleep(1.0)
        marker2.write_text("done")
        os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"x"
    os.close(ready_r)
    launch.stop(handle)
    assert marker2.read_text() == "done"  # stop returned after it
    assert not os.path.exists(handle.folder)
    os.waitpid(child, 0)


def test_which_scoring_jobs_the_gpu_standby_may_take():
    from swgpu_tools.warm.standby import eligible

    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "32", "PATH": "/bin"}

    def job(*argv, **extra):
        return {"argv": list(argv), "env": {**env, **extra}}

    assert eligible(job("score-shard", "a.swdb", "--queries", "q"), env)
    assert eligible(job("score-shard", "a", "--backend", "gpu", "--device", "auto"), env)
    assert eligible(job("score-shard", "a", "--backend=auto"), env)
    assert eligible(job("score-shard", "a", PATH="/usr/bin"), env)  # not a CUDA setting
    assert not eligible(job("score-shard", "a", "--backend", "cpu"), env)
    assert not eligible(job("score-shard", "a", "--backend=cpu"), env)
    assert not eligible(job("score-shard", "a", "--device", "1"), env)
    assert not eligible(job("score-shard", "a", "--device=0"), env)
    assert not eligible(job("search", "q", "db"), env)
    assert not eligible(job("score-shard", "a", CUDA_VISIBLE_DEVICES="1"), env)
    assert not eligible(job("score-shard", "a", CUDA_DEVICE_MAX_CONNECTIONS="8"), env)
    assert not eligible({"argv": ["score-shard", "a"], "env": {}}, env)  # CUDA_* unset there


def _score_shard_job(env, tmp_path, shard, name, *extra, queries=None) -> dict:
    out, stats = tmp_path / f"{name}.npz", tmp_path / f"{name}.json"
    queries = queries or DATA / "example_queries.fasta"
    proc = subprocess.run(
        [SWGPU, "score-shard", str(shard), "--queries", str(queries)]
        + ["--out", str(out), "--stats", str(stats), "--top-k", "20", "--threads", "2", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return {"hits": out.read_bytes(), "stats": json.loads(stats.read_text())}


def test_the_gpu_standby_takes_the_first_scoring_job_that_may_use_it(tmp_path):
    """The warm process forks a standby that starts the backend at once; the first
    score-shard job that may use it runs in it (its start-up is then the wait for
    the standby's), with the same hits as in its own process; a --backend cpu job
    is not given to it, and a later job runs in a child as before.  (Without a GPU,
    the standby's start chooses the CPU: the hand-over is the same.)"""
    _standby_case(tmp_path)


@pytest.mark.gpu
def test_the_gpu_standby_scores_on_the_gpu_it_started(tmp_path):
    from swgpu_tools.backend import gpu_status

    if not gpu_status()[0]:
        pytest.skip(f"no usable GPU: {gpu_status()[1]}")
    took, later = _standby_case(tmp_path)
    assert took["stats"]["backend"] == later["stats"]["backend"] == "gpu"


def _standby_case(tmp_path):
    from swgpu_tools.io.hitsfile import read_shard_hits

    shards = tmp_path / "shards"
    subprocess.run(
        [SWGPU, "shard", str(DATA / "example_database.fasta.gz"), "--shards", "1"]
        + ["--out-dir", str(shards)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    shard = shards / "shard-0000.swdb"
    own_env = {k: v for k, v in os.environ.items() if k != ENV}
    own = _score_shard_job(own_env, tmp_path, shard, "own")
    w = Warm(tmp_path, gpu=True, standby="BLOSUM62:11:1")
    try:
        _wait_for(lambda: "GPU standby: pid" in w.text(), what="the standby")
        pid = int(re.search(r"GPU standby: pid (\d+)", w.text()).group(1))
        assert _alive(pid)
        cpu = _score_shard_job(w.env(), tmp_path, shard, "cpu", "--backend", "cpu")
        assert "the GPU standby takes" not in w.text() and _alive(pid)
        took = _score_shard_job(w.env(), tmp_path, shard, "standby")
        assert f"pid {pid}: the GPU standby takes the job" in w.text()
        assert "prestarted wait" in took["stats"]["startup_s"]
        assert "prestarted wait" not in cpu["stats"]["startup_s"]
        assert took["stats"]["started_by"] == "standby" and cpu["stats"]["started_by"] == "own"
        _wait_for(lambda: not _alive(pid), timeout=20, what="the standby's end")
        later = _score_shard_job(w.env(), tmp_path, shard, "later")
        jobs = w.children("score-shard")  # the cpu job's child, the standby, a new child
        assert len(jobs) == 3 and jobs[1] == pid and pid not in (jobs[0], jobs[2])
        assert "prestarted wait" not in later["stats"]["startup_s"]
        assert later["stats"]["started_by"] == "own"
    finally:
        w.stop()

    def rows(name):
        h = read_shard_hits(tmp_path / f"{name}.npz")
        return [(h.queries[q], h.subjects[s], int(x)) for q, s, x in zip(h.q, h.s, h.score)]

    expected = rows("own")
    assert len(expected) > 50
    for name in ("cpu", "standby", "later"):
        assert rows(name) == expected, name
    assert own["stats"]["hits"] == took["stats"]["hits"] > 0
    return took, later


def _ask(srv, request: dict, fds: list[int]) -> dict:
    """The serving process's reply to one job's ``request`` (sent with ``fds``)."""
    import socket

    from swgpu_tools.warm.protocol import receive, send

    job, conn = socket.socketpair()
    try:
        send(job, request, fds)
        srv._handle(conn)
        job.settimeout(5)
        return receive(job)[0]
    finally:
        job.close()


def _take_offer(sock, offers: list) -> None:
    """The standby's side of a job offered whole on ``sock``: taken (the offer noted in
    ``offers``), its descriptors closed."""
    from swgpu_tools.warm.protocol import receive

    got, fds = receive(sock, max_fds=8)
    offers.append(got)
    os.write(fds[-1], b"y")
    for fd in fds:
        os.close(fd)


@contextlib.contextmanager
def _fake_standby(srv, env: dict | None = None):
    """A GPU standby for ``srv`` (pid 424,242, started under ``env``) that is only a
    socket: yields (its end of the socket, the read ends of three pipes standing for a
    job's streams); closes them after."""
    import socket

    from swgpu_tools.warm.standby import Standby

    pipes = [os.pipe() for _ in range(3)]
    ours, theirs = socket.socketpair()
    srv.standby, srv.standby_ours = Standby(424_242, ours, env), True
    try:
        yield theirs, [r for r, _ in pipes]
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)
        ours.close()
        theirs.close()


def test_a_ready_standby_takes_a_scoring_job_while_the_scoring_generation_loads(bare_server):
    """A score-shard request while the generation that runs scoring jobs still loads:
    "retry" while the GPU standby has not said it is ready; once it has, the
    serving process hands the job to it at once (the standby has its own imports;
    the job waited for that generation, 0.5-0.9 s on an H100 host)."""
    import threading

    from swgpu_tools.warm.standby import READY

    srv = bare_server
    srv.from_successor, srv.successor_since = 99, time.monotonic()  # loading
    request = {"argv": ["score-shard", "s.swdb"], "fingerprint": srv.fingerprint, "pid": 1}
    with _fake_standby(srv) as (theirs, fds):
        assert "retry" in _ask(srv, request, fds)  # not ready yet
        theirs.sendall(READY)
        taker = threading.Thread(target=_take_offer, args=(theirs, []))
        taker.start()
        assert _ask(srv, request, fds) == {"pid": 424_242}
        taker.join(5)
        assert srv.standby is None and 424_242 in srv.children


def test_a_standby_told_of_a_rescan_never_takes_a_whole_rescan_job(bare_server, tmp_path):
    """A re-scan's scoring job (every ``--state`` file there) that reaches the first
    generation while the scoring one loads: a standby started with ``--rescan`` loaded
    only what serving searches needs, so the job is told "retry" even once the standby
    is ready (on an H200 host the standby running the whole job read its shards for
    1.1 s instead of 0.2 s); a standby without the hint takes it as before."""
    import threading

    from swgpu_tools.warm.standby import READY

    srv = bare_server
    srv.from_successor, srv.successor_since = 99, time.monotonic()  # loading
    (tmp_path / "a.npz").write_bytes(b"state")
    request = {
        "argv": ["score-shard", "s.swdb", "--state", "a.npz"],
        "fingerprint": srv.fingerprint,
        "pid": 1,
        "cwd": str(tmp_path),
        "env": {},
    }
    offers: list = []
    with _fake_standby(srv, env={}) as (theirs, fds):
        theirs.sendall(READY)
        srv.standby_rescan = True
        assert srv._split(request)
        assert "retry" in _ask(srv, request, fds)
        assert srv.standby is not None and srv.standby.is_ready() and not srv.children
        srv.standby_rescan = False
        taker = threading.Thread(target=_take_offer, args=(theirs, offers))
        taker.start()
        assert _ask(srv, request, fds) == {"pid": 424_242}
        taker.join(5)
        assert len(offers) == 1 and "serve" not in offers[0]  # the whole job


def test_the_signals_are_held_while_a_jobs_child_is_forked(bare_server, monkeypatch):
    """The serving process holds SIGTERM and its kin from the fork until the child has
    reset its handlers (a SIGTERM passed on by the job in between met the server's
    handler in the child and was lost: the child ran on, CI25); the parent's mask is
    as before afterwards."""
    srv = bare_server
    seen = []

    def fork():
        seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))
        return 424_243  # the parent's side only

    monkeypatch.setattr(os, "fork", fork)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    request = {"argv": ["shard", "x.fasta"], "fingerprint": srv.fingerprint, "pid": 1}
    pipes = [os.pipe() for _ in range(3)]
    try:
        assert _ask(srv, request, [r for r, _ in pipes]) == {"pid": 424_243}
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)
    assert seen and {signal.SIGTERM, signal.SIGINT} <= seen[0]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_a_job_on_the_standby_that_ends_without_a_status_gets_one(bare_server):
    """The standby is not the serving process's child (waitpid never reports it): if
    its pipe closes with no status (killed), its job is answered "exit 1" at once,
    not left waiting."""
    import selectors
    import socket

    from swgpu_tools.warm.protocol import receive

    srv = bare_server
    job, conn = socket.socketpair()
    r, w = os.pipe()
    pid = 999_998
    try:
        srv.children[pid] = conn
        srv.reports[pid] = r
        srv.adopted.add(pid)
        srv.sel.register(r, selectors.EVENT_READ, ("report", pid))
        os.close(w)
        w = None
        srv.poll(1.0)
        job.settimeout(5)
        assert receive(job)[0] == {"exit": 1}
        assert pid not in srv.children and pid not in srv.adopted
    finally:
        if w is not None:
            os.close(w)
        job.close()


def _called_from_snakemakes_cli(argv: list[str]) -> bool:
    """snakemake_runs_jobs_here() as the Snakefile's parse calls it: below a function
    ``args_to_api`` of the module ``snakemake.cli``, with Snakemake's own parse of
    ``argv`` as its ``args``."""
    from snakemake.cli import get_argument_parser

    args = get_argument_parser().parse_args(argv)
    if args.executor is None:  # as args_to_api sets it first
        args.executor = "local"
    scope = {"__name__": "snakemake.cli", "launch": launch}
    exec("def args_to_api(args):\n    return launch.snakemake_runs_jobs_here()\n", scope)
    return scope["args_to_api"](args)


@pytest.mark.parametrize(
    "argv, runs",
    [
        (["--cores", "2"], True),
        (["--cores", "2", "--rerun-incomplete", "--keep-going"], True),
        (["--cores", "2", "-n"], False),
        (["--cores", "2", "--touch"], False),
        (["--unlock"], False),
        (["--summary"], False),
        (["--list-rules"], False),
        (["--dag"], False),
        (["--report", "r.html"], False),
        (["--delete-all-output"], False),
        (["--lint"], False),
        (["--executor", "slurm", "--jobs", "4"], False),
        (["--cores", "2", "--mode", "remote"], False),
        (["--cores", "2", "--mode", "subprocess"], False),
    ],
)
def test_the_warm_process_starts_at_the_parse_only_for_a_run_of_jobs_here(argv, runs):
    # --executor slurm needs its plugin to parse; without it, the case cannot be made
    if "slurm" in argv:
        pytest.importorskip("snakemake_executor_plugin_slurm")
    assert _called_from_snakemakes_cli(argv) is runs


def test_the_early_start_knows_every_option_it_names_and_is_off_outside_the_cli():
    from snakemake.cli import get_argument_parser

    args = get_argument_parser().parse_args([])
    # an option Snakemake renamed would never stop the early start: name them all
    missing = [name for name in launch.NOT_A_RUN if not hasattr(args, name)]
    assert not missing
    # Snakemake's Python API (no command line up the stack): onstart starts it
    assert launch.snakemake_runs_jobs_here() is False


PARAMS_CHECK = """
import json, sys, types
from snakemake.persistence import PersistenceBase
original = PersistenceBase._serialize_param_pandas
values = [1, "a", 2.5, None, [1, "x"], {"k": 3}, (1, 2), b"z", True, object()]
def records(method):
    me = types.SimpleNamespace()
    me._serialize_param_builtin = lambda v: PersistenceBase._serialize_param_builtin(me, v)
    return [str(method(me, v)) for v in values]  # (object(): the UNREPRESENTABLE mark)
from swgpu_tools.warm.launch import params_check_without_pandas
assert "pandas" not in sys.modules
patched = params_check_without_pandas()
new = records(PersistenceBase._serialize_param_pandas)
without = "pandas" not in sys.modules
old = records(original)  # (imports pandas)
import pandas as pd
frame = pd.DataFrame({"a": [1, 2]})
same_frame = original(None, frame) == PersistenceBase._serialize_param_pandas(None, frame)
print(json.dumps([patched, without, new == old, same_frame]))
"""


def test_snakemakes_params_check_gives_the_same_records_without_importing_pandas():
    """The Snakefile replaces Snakemake's check of params for pandas objects with one
    that does not import pandas (it cost a re-scan's DAG 0.2-0.9 s): the same record
    for every value, a DataFrame's too once pandas is imported; and the method is
    still there in the installed Snakemake (else the change would do nothing)."""
    proc = subprocess.run(
        [sys.executable, "-c", PARAMS_CHECK], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [True, True, True, True]


@pytest.mark.parametrize("rescan", [False, True], ids=["standby", "rescan-standby"])
def test_a_rescans_searches_are_served_by_the_gpu_standby(tmp_path, rescan):
    """A re-scan's scoring job (every shard has a state) runs in a child of the warm
    process, its searches served by the GPU standby over a socket
    (swgpu_tools.remote): the same hits and state as the job in its own process;
    the standby ends with the job; so too where the standby was told to expect a
    re-scan (``--rescan``: a lighter CPU preload).  (Without a GPU the standby's start
    chooses the CPU: the split is the same.)"""
    _split_case(tmp_path, rescan)


@pytest.mark.gpu
@pytest.mark.parametrize("rescan", [False, True], ids=["standby", "rescan-standby"])
def test_a_rescans_searches_are_served_on_the_standbys_gpu(tmp_path, rescan):
    """... on the GPU: where the standby expected a re-scan, its own start loaded the
    batched kernels (the job's start loads none); else the job's start loads them."""
    from swgpu_tools.backend import gpu_status

    if not gpu_status()[0]:
        pytest.skip(f"no usable GPU: {gpu_status()[1]}")
    split, own = _split_case(tmp_path, rescan, gpu=True)
    assert split["stats"]["backend"] == own["stats"]["backend"] == "gpu"
    assert split["stats"]["device_uuid"] == own["stats"]["device_uuid"]
    steps = split["stats"]["startup_s"]
    assert ("standby prestarted batched kernels" in steps) == rescan, steps
    assert ("standby batched kernels" in steps) == (not rescan), steps


def _split_case(tmp_path, rescan=False, gpu=False):
    """``gpu``: a delta the re-scan's cost model gives to the GPU (3e10 cells: half of
    the database changed, 100 queries), not to the CPU (the small one's 4e8 cells)."""
    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.io.hitsfile import read_shard_hits

    db = read_fasta(DATA / "example_database.fasta.gz")
    pairs = [(db.ids[i], db.sequence(i)) for i in range(len(db))]
    queries = None
    if gpu:
        queries = tmp_path / "queries.fasta"
        queries.write_text("".join(f">q{a}\n{s}\n" for a, s in pairs[:100]))
    changed = 2 if gpu else 7
    v2 = [(a, s[::-1] if i % changed == 0 else s) for i, (a, s) in enumerate(pairs)]
    v2 += [(f"NEW{i}", pairs[i][1][: len(pairs[i][1]) // 2]) for i in range(5)]  # added
    (tmp_path / "v2.fasta").write_text("".join(f">{a}\n{s}\n" for a, s in v2))
    for name, fasta in (("v1", DATA / "example_database.fasta.gz"), ("v2", tmp_path / "v2.fasta")):
        subprocess.run(
            [SWGPU, "shard", str(fasta), "--shards", "1", "--out-dir", str(tmp_path / name)],
            check=True,
            capture_output=True,
            timeout=300,
        )
    own_env = {k: v for k, v in os.environ.items() if k != ENV}
    state = tmp_path / "state-v1.npz"
    _score_shard_job(
        own_env, tmp_path, tmp_path / "v1/shard-0000.swdb", "v1", "--state", str(state),
        queries=queries,
    )  # fmt: skip
    for name in ("own", "split"):
        shutil.copy(state, tmp_path / f"state-{name}.npz")
    own = _score_shard_job(
        own_env, tmp_path, tmp_path / "v2/shard-0000.swdb", "own",
        "--state", str(tmp_path / "state-own.npz"), queries=queries,
    )  # fmt: skip
    w = Warm(tmp_path, gpu=True, standby="BLOSUM62:11:1", rescan=rescan)
    try:
        _wait_for(lambda: "GPU standby: ready" in w.text(), what="the standby")
        pid = int(re.search(r"GPU standby: pid (\d+)", w.text()).group(1))
        assert ("(a re-scan expected)" in w.text()) == rescan
        split = _score_shard_job(
            w.env(), tmp_path, tmp_path / "v2/shard-0000.swdb", "split",
            "--state", str(tmp_path / "state-split.npz"), queries=queries,
        )  # fmt: skip
        assert "the GPU standby serves the searches of the next job" in w.text()
        assert "GPU standby: serves the searches of job pid" in w.text()
        assert f"pid {pid}: the GPU standby takes" not in w.text()
        _wait_for(lambda: not _alive(pid), timeout=20, what="the standby's end")
    finally:
        w.stop()
    assert split["stats"]["mode"] == "incremental" and split["stats"]["delta_sequences"] > 5
    assert "standby wait" in split["stats"]["startup_s"]  # its searches ran there
    assert split["stats"]["started_by"] == "remote" and own["stats"]["started_by"] == "own"
    assert split["stats"]["rescan_estimate"]["backend"] != "cpu"
    assert "standby wait" not in own["stats"]["startup_s"]

    def rows(name):
        h = read_shard_hits(tmp_path / f"{name}.npz")
        return [(h.queries[q], h.subjects[s], int(x)) for q, s, x in zip(h.q, h.s, h.score)]

    assert rows("split") == rows("own") and len(rows("own")) > 50
    assert (tmp_path / "state-split.npz").read_bytes() == (tmp_path / "state-own.npz").read_bytes()
    return split, own


def test_the_warm_launch_tells_the_gpu_standby_of_a_rescan(monkeypatch, tmp_path):
    """``launch.start``: ``--rescan`` goes with a GPU standby only (the Snakefile passes
    ``rescan`` where every shard has its state)."""
    from swgpu_tools.warm import launch

    seen = []

    class Popen:
        def __init__(self, args, **kwargs):
            seen.append(args)

    monkeypatch.setattr(launch.shutil, "which", lambda name: "/bin/swgpu")
    monkeypatch.setattr(launch.subprocess, "Popen", Popen)
    monkeypatch.setattr(launch.atexit, "register", lambda *a: None)
    monkeypatch.delenv(ENV, raising=False)
    for gpu, standby, rescan, want in (
        (True, "BLOSUM62:11:1", True, True),
        (True, "BLOSUM62:11:1", False, False),
        (True, None, True, False),
        (False, "BLOSUM62:11:1", True, False),
    ):
        seen.clear()
        w = launch.start(str(tmp_path / "warm.log"), gpu, standby=standby, rescan=rescan)
        shutil.rmtree(w.folder)
        assert ("--rescan" in seen[0]) == want, (gpu, standby, rescan)
        assert ("--gpu-standby" in seen[0]) == bool(gpu and standby)
    monkeypatch.delenv(ENV, raising=False)


def test_a_rescan_standby_preloads_numbas_cpu_side_only_for_the_hosts_choice(monkeypatch):
    """The standby told of a re-scan loads nothing of Numba's CPU side: its batched
    searches choose each row's best hits on the GPU; with ``SWGPU_GPU_TOPK=0`` (the
    host's choice) it loads Numba's CPU typing and ``top_rows``, as before."""
    from swgpu_tools.kernels import topk
    from swgpu_tools.warm import server as warm_server

    loaded = []
    monkeypatch.setattr(warm_server, "_stage_numba", lambda: loaded.append("numba"))
    monkeypatch.setattr(topk, "precompile", lambda: loaded.append("top_rows"))
    monkeypatch.delenv("SWGPU_GPU_TOPK", raising=False)
    warm_server.rescan_preload()
    assert loaded == []
    monkeypatch.setenv("SWGPU_GPU_TOPK", "0")
    warm_server.rescan_preload()
    assert loaded == ["numba", "top_rows"]


def test_the_workflows_process_leaves_its_heap_to_no_collection_at_exit():
    """warm.launch.heap_frozen_for_exit (the Snakefile's onsuccess): every object the
    collector tracked is in the permanent generation, which no collection, the
    teardown's included, passes over; objects made afterwards are collected as
    before.  (In a child process: the test run's own heap stays as it is.)"""
    code = (
        "import gc\n"
        "from swgpu_tools.warm.launch import heap_frozen_for_exit\n"
        "held = [[i] for i in range(50000)]\n"
        "tracked = len(gc.get_objects())\n"
        "frozen = heap_frozen_for_exit()\n"
        "assert frozen >= tracked > 50000, (frozen, tracked)\n"
        "assert len(gc.get_objects()) < 100, len(gc.get_objects())\n"
        "a = []; a.append(a); del a\n"
        "assert gc.collect() >= 1\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
