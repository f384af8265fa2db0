"""Start and stop the warm process, from the Snakefile's onstart, onsuccess and
onerror hooks (workflow/rules/common.smk).  Standard library only."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from .protocol import ENV, wait_later_lock


@dataclass
class WarmProcess:
    process: subprocess.Popen
    folder: str  # private (mode 0700): holds the socket and the jobs' swgpu
    socket: str
    path_before: str | None = None  # $PATH before the jobs' swgpu was put first


#: The folder (in the warm process's own) of the ``swgpu`` that the jobs run
#: (:func:`swgpu_tools.warm.protocol.write_job_command`), first on their PATH.
JOB_BIN = "bin"


#: Snakemake's command-line options (their ``argparse`` names) that make it do
#: something other than run the workflow's jobs: list, draw, report, lint, unlock,
#: clean up, or run nothing (a dry run, ``--touch``)
NOT_A_RUN = (
    "dryrun",
    "touch",
    "lint",
    "list_target_rules",
    "list_rules",
    "print_compilation",
    "dag",
    "rulegraph",
    "filegraph",
    "d3dag",
    "containerize",
    "report",
    "reporter",
    "generate_unit_tests",
    "unlock",
    "cleanup_metadata",
    "conda_cleanup_envs",
    "conda_create_envs_only",
    "list_conda_envs",
    "cleanup_shadow",
    "container_cleanup_images",
    "list_changes",
    "list_input_changes",
    "list_params_changes",
    "list_untracked",
    "summary",
    "detailed_summary",
    "archive",
    "delete_all_output",
    "delete_temp_output",
)


def snakemake_runs_jobs_here() -> bool:
    """Whether Snakemake's command line (``snakemake.cli.args_to_api``, up the
    stack: call this while the Snakefile is parsed) asks it to run the workflow's
    jobs on this machine: the local executor, Snakemake's default mode (not a
    cluster job's or a group's own Snakemake) and none of :data:`NOT_A_RUN`.  False
    wherever it cannot tell (Snakemake's Python API; the warm process then starts
    from ``onstart``, as it always may).  ``SWGPU_WARM_EARLY=0`` says False (for
    measuring what the early start gains)."""
    if os.environ.get("SWGPU_WARM_EARLY") == "0":
        return False
    frame = sys._getframe(1)
    while frame is not None:
        if (
            frame.f_code.co_name == "args_to_api"
            and frame.f_globals.get("__name__") == "snakemake.cli"
            and "args" in frame.f_locals
        ):
            args = frame.f_locals["args"]
            if getattr(args, "executor", None) not in (None, "local"):
                return False
            # a job of a cluster or a group run by Snakemake itself (--mode remote or
            # subprocess): not the run's main process
            if getattr(getattr(args, "mode", None), "name", "DEFAULT") != "DEFAULT":
                return False
            return not any(getattr(args, name, None) for name in NOT_A_RUN)
        frame = frame.f_back
    return False


def plain_console_script(exe: str) -> bool:
    """Whether ``exe`` is the ``swgpu`` console script as pip writes it (a Python
    script of a few lines that runs ``swgpu_tools.console:entry``), not a wrapper
    of some other kind, which the jobs must keep running (the warm process's job
    command, which it would shadow, runs none)."""
    try:
        with open(exe, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return (
        head.startswith(b"#!")
        and len(head) < 4096
        and b"from swgpu_tools.console import entry" in head
        and b"exec" not in head
    )


def start(
    log_path: str,
    gpu: bool,
    parent: int | None = None,
    standby: str | None = None,
    rescan: bool = False,
    cuda: bool = True,
) -> WarmProcess | None:
    """Start ``swgpu warm-serve`` (the ``swgpu`` on PATH, the jobs' one) and set
    ``$SWGPU_WARM`` in this process, so that the jobs it starts from now on use
    it, and, where that ``swgpu`` is the plain console script
    (:func:`plain_console_script`), put the folder of the ``swgpu`` it writes for
    them first on ``$PATH`` (:func:`.protocol.write_job_command`); None (and nothing
    set) if there is no ``swgpu`` on PATH.  Its log goes
    to ``log_path``.  ``parent``: the process whose end ends it (default: this
    one).  ``standby`` (``MATRIX:OPEN:EXTEND``, with ``gpu``): a GPU standby
    started for the scoring job (:mod:`.standby`); ``rescan``: it should expect a
    re-scan's job (every shard has its re-scan state); ``cuda`` False: the scoring
    jobs run on the CPU (``--backend cpu``): numba-cuda is not loaded."""
    exe = shutil.which("swgpu")
    if exe is None:
        return None
    folder = tempfile.mkdtemp(prefix="swgpu-warm-")  # 0700: only this user connects
    path = os.path.join(folder, "socket")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "ab") as log:
        args = [exe, "warm-serve", "--socket", path, "--parent", str(parent or os.getpid())]
        own_command = plain_console_script(exe)  # else the jobs keep that swgpu
        if own_command:
            args += ["--job-command", os.path.join(folder, JOB_BIN, "swgpu")]
        process = subprocess.Popen(
            args
            + (["--gpu"] if gpu else [])
            + ([] if cuda else ["--no-cuda"])
            + (["--gpu-standby", standby] if gpu and standby else [])
            + (["--rescan"] if gpu and standby and rescan else []),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a Ctrl-C reaches the jobs, which pass it on
        )
    warm = WarmProcess(process, folder, path, os.environ.get("PATH"))
    os.environ[ENV] = path
    if own_command:
        # the jobs' swgpu: the warm process writes it as it starts; until then, and
        # wherever it is missing, the one on PATH after it runs
        bin_dir = os.path.join(folder, JOB_BIN)
        os.environ["PATH"] = bin_dir + (os.pathsep + warm.path_before if warm.path_before else "")
    atexit.register(stop, warm)
    return warm


def stop(warm: WarmProcess | None, timeout: float = 15.0) -> None:
    """End the warm processes, every generation (SIGTERM to their process group;
    each stops any child still running, then ends), and remove their folder;
    jobs started afterwards run their commands themselves.  Waits for the
    first process (the later ones are not this process's children, and their
    exit statuses go to whoever adopts them: a slow init may keep them as zombies
    for a while), then for the children still doing what their job's command left
    for after its status (:func:`~swgpu_tools.warm.protocol.wait_later_lock`), all
    within ``timeout``."""
    if warm is None:
        return
    if os.environ.get(ENV) == warm.socket:
        del os.environ[ENV]
        if warm.path_before is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = warm.path_before
    group = warm.process.pid  # its own session and process group (start_new_session)
    try:
        os.killpg(group, signal.SIGTERM)
    except OSError:
        pass  # none left
    deadline = time.monotonic() + timeout
    try:
        warm.process.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
        warm.process.wait()
    # a job's child still doing what its command left for later (a re-scan's states,
    # written after the job's status): the run ends after it
    if not wait_later_lock(warm.socket, max(0.0, deadline - time.monotonic())):
        print(
            "swgpu: a warm process's work after a job's status did not end in time",
            file=sys.stderr,
        )
    shutil.rmtree(warm.folder, ignore_errors=True)


def params_check_without_pandas() -> bool:
    """Snakemake's check of a job's params (its metadata records; the "params" rerun
    trigger) asks of every value whether it is a pandas object, and imports pandas to
    ask: 0.2-0.9 s in Snakemake's own process, on the critical path of every run
    over existing outputs (a re-scan's DAG).  A value can only be a pandas object
    where pandas is imported already, so this asks only then: the same records,
    without the import.  Called while the Snakefile is parsed, before the DAG.
    Returns whether Snakemake had the method (else nothing changes)."""
    try:
        from snakemake.persistence import PersistenceBase
    except ImportError:
        return False
    if not hasattr(PersistenceBase, "_serialize_param_pandas"):
        return False

    def _serialize_param_pandas(self, value):
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(value, (pd.DataFrame, pd.Series, pd.Index)):
            return repr(pd.util.hash_pandas_object(value).tolist())
        return self._serialize_param_builtin(value)

    PersistenceBase._serialize_param_pandas = _serialize_param_pandas
    return True


def heap_frozen_for_exit() -> int:
    """Move every object the garbage collector tracks in this process to its permanent
    generation (``gc.freeze``), so that the collections of the interpreter's teardown
    pass over none of them: Snakemake's process, with Snakemake, SQLAlchemy and the
    Snakefile's imports loaded, spent 0.41-0.51 s on the 2-core VM between its last
    line ("Complete log") and its exit, nearly all of it in those collections, and
    0.05-0.09 s with this (RESULTS-workflow.md, fortieth session).  Called at the end
    of the Snakefile's ``onsuccess``, after the warm process stopped: what is left to
    run is Snakemake's own exit (its logs are flushed and closed by ``logging``'s exit
    handler, not by a collection); objects made afterwards are collected as before.
    Returns how many objects are frozen."""
    import gc

    gc.freeze()
    return gc.get_freeze_count()
