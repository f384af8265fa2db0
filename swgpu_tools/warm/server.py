"""The warm process: the step commands' imports, loaded once; one child per command.

The imports come in four generations (:func:`generations`, in the order the
workflow's jobs need them: the shard step's; the scoring job's, Numba; numba-cuda;
rule finish's, pandas and matplotlib).  :func:`serve` binds its
Unix socket first, loads the first generation (a fraction of a second) and
takes requests; meanwhile a process forked from it loads the next generation,
then takes over the socket and forks the one after.  So a job is never held up
by an import in progress: the most loaded process that is ready takes it, and
the one before it ends once its own children have.  For each request the
process forks a child that becomes the job's ``swgpu`` (its standard streams,
folder, umask, environment and arguments) and runs the command; the exit
status goes back to the job.  The child imports whatever its process had not
loaded yet.

The processes stay single-threaded and never start CUDA (a CUDA context does
not survive a fork): if a stage ever did, requests are refused and the jobs
run their commands themselves.  They end when their Snakemake ends (process
``parent`` is gone), on SIGTERM (the Snakefile's onsuccess and onerror hooks
send it to their process group), or after :data:`IDLE_S` seconds without a
command; children still running then are sent SIGTERM.
"""

from __future__ import annotations

import importlib
import os
import selectors
import signal
import socket
import struct
import sys
import time
import traceback

from .protocol import fingerprint, receive, send, write_job_command
from .standby import Standby, eligible, fork_standby, offer_searches, run_job, state_paths

#: Seconds without any command after which the process ends on its own.
IDLE_S = 3600.0


def _stage_numba() -> None:
    importlib.import_module("numba")
    from numba.core.registry import cpu_target

    from ..cache import scipy_linalg_hidden

    # the CPU kernels' typing (each job's first load), without Numba's BLAS probe
    with scipy_linalg_hidden():
        cpu_target.typing_context.refresh()
        cpu_target.target_context.refresh()


def _stage_scoring() -> None:
    importlib.import_module("swgpu_tools.kernels.cpu")
    from ..kernels import seqhash

    seqhash.preload()  # serial functions: loading them starts no threads


def _stage_matrices() -> None:
    """The names of Biopython's substitution matrices, cached (``scoring.matrix_names``:
    every job's scoring scheme is checked against them; the import of ``Bio.Align``
    took 0.055 s of a re-scan's scoring job on an H200 host, run 243)."""
    from ..scoring import matrix_names

    matrix_names()


def standby_preload() -> None:
    """What the scoring generation loads but numba-cuda (the GPU standby's own
    start loads that): Numba's CPU typing and the scoring job's CPU functions."""
    _stage_numba()
    _stage_scoring()


def rescan_preload() -> None:
    """A GPU standby's preload where a re-scan is expected: its job's CPU work runs in
    a warm child, and the standby only serves its searches (:mod:`swgpu_tools.remote`).
    Their best hits are chosen on the GPU (:func:`swgpu_tools.kernels.gpu.batched.topk_on_gpu`:
    every shard's delta at most ``TOPK_CAP`` sequences), so nothing is loaded; a
    larger delta loads the host's choice, Numba's CPU typing and
    :func:`swgpu_tools.kernels.topk.top_rows`, at its first block (0.4 s on an H200
    host).  With ``SWGPU_GPU_TOPK=0`` (the host's choice, for measuring) they are
    loaded here."""
    from ..kernels import gpu_chooses_hits

    if gpu_chooses_hits():
        return
    _stage_numba()
    from ..kernels import topk

    topk.precompile()  # loaded from the disk cache (compiled there where missing)


def _stage_cuda(gpu: bool):
    def load() -> None:
        importlib.import_module("numba.cuda")  # imported by every scoring job (its check)
        importlib.import_module("swgpu_tools.kernels.gpu")
        if gpu:
            from ..kernels.gpu.cache import init_target

            init_target()  # numba-cuda's typing: no driver call

    return load


def _stage_alignment() -> None:
    """The traceback's alignment kernels and its output columns' kernel, loaded from
    the disk cache (serial functions: loading them starts no threads).  Where the
    cache lacks them, a child process compiles them meanwhile
    (:func:`swgpu_tools.alignment.background.compile_hits`; the step waits for it)."""
    from ..alignment.warmup import load_hits_kernels, load_pairs_kernels, load_singles_kernel

    if load_hits_kernels():
        load_singles_kernel()  # large regions (many threads, long queries)
        load_pairs_kernels()  # fewer than four hits per query (a re-scan's new hits)
    else:
        from ..alignment.background import compile_hits

        pid = compile_hits()
        raise RuntimeError(
            "not in the kernel cache yet"
            + (f": compiling them in the background (pid {pid})" if pid else "")
        )


def _stage_plots() -> None:
    from ..report import plots

    plots.preload()


def _modules(*names: str):
    def load() -> None:
        for name in names:
            importlib.import_module(name)

    return load


def generations(gpu: bool, cuda: bool = True) -> list[list[tuple[str, object]]]:
    """Stages, (name, loader), in generations: what the shard step needs (a
    fraction of a second); the scoring job (Numba; numba-cuda and its typing
    with ``gpu``, a generation of its own: a re-scan's job whose searches the GPU
    standby serves needs only the CPU's; none without ``gpu`` or ``cuda``, where the
    scoring jobs run on the CPU: the generation is empty); rule finish (pandas, the
    traceback and its kernels, the pictures)."""
    first = [
        ("numpy", _modules("numpy")),
        ("steps", _modules("swgpu_tools.steps.shard_db", "swgpu_tools.steps.score_shard")),
    ]
    scoring = [
        ("matrices", _stage_matrices),
        ("numba", _stage_numba),
        ("scoring", _stage_scoring),
    ]
    # (a scoring job that may use a GPU imports numba-cuda for its check, even without one)
    cuda_stages = [("cuda", _stage_cuda(gpu))] if gpu or cuda else []
    finish = [
        ("pandas", _modules("pandas", "Bio.Align")),
        (
            "finish",
            _modules(
                "swgpu_tools.steps.merge_hits",
                "swgpu_tools.steps.traceback",
                "swgpu_tools.steps.history",
                "swgpu_tools.report.make",
            ),
        ),
        ("alignment", _stage_alignment),
        ("plots", _stage_plots),
    ]
    return [first, scoring, cuda_stages, finish]


#: The generation whose imports each command needs (others: the first).  A
#: request for a later generation than this process's, while that generation is
#: loading, is answered "retry": the job asks again shortly and is served by the
#: loaded process, rather than its child importing again what is being loaded.
COMMAND_GENERATION = {
    "score-shard": 2,
    "run-steps": 3,
    "merge": 3,
    "traceback": 3,
    "release": 3,
    "plots": 3,
}
#: ... and a re-scan's scoring job whose searches the GPU standby serves (:meth:`_Server._split`)
SPLIT_GENERATION = 1

#: How long a loading generation may keep requests waiting (then they are served
#: by the processes already loaded).
RETRY_S = 20.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, another user's
        pass
    return True


def _signal(pid: int, signum: int) -> None:
    """Send ``signum`` to ``pid`` if it is still there."""
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def cuda_started() -> bool:
    """Whether this process started the CUDA driver (then it must not fork)."""
    driver = sys.modules.get("numba.cuda.cudadrv.driver")
    if driver is None:
        return False
    obj = getattr(getattr(driver, "Driver", None), "_singleton", None)
    return obj is not None and getattr(obj, "pid", None) is not None


class _Server:
    def __init__(
        self,
        path,
        run_command,
        parent: int | None,
        gpu: bool,
        idle_s: float,
        standby: str | None = None,
        rescan: bool = False,
        cuda: bool = True,
        job_command: str | None = None,
    ):
        self.path = path
        self.run_command = run_command
        self.parent = parent
        self.gpu = gpu
        self.cuda = cuda  # whether scoring jobs may import numba-cuda (not --backend cpu)
        self.idle_s = idle_s
        self.standby_scheme = standby  # a GPU standby's MATRIX:OPEN:EXTEND, or None
        self.standby_rescan = rescan  # a re-scan is expected (see rescan_preload)
        self.standby: Standby | None = None
        self.standby_ours = False  # whether it is this process's child (waitpid reports it)
        self.adopted: set[int] = set()  # jobs' pids that are not this process's children
        self.fingerprint = fingerprint()
        self.fingerprint_no_site = fingerprint(path=False)  # the job command's jobs
        self.job_command = job_command  # where to write the jobs' swgpu, or None
        self.children: dict[int, socket.socket] = {}  # child pid -> its job's connection
        self.reports: dict[int, int] = {}  # child pid -> the pipe its status comes by
        self.stopping = False
        self.draining = False  # the next generation took over: end with the children
        self.refuse = ""
        self.last = time.monotonic()
        self.generation = 0
        self.successor: int | None = None  # the process loading the next generation
        self.from_successor: int | None = None  # its "ready" pipe (read end)
        self.successor_since = 0.0  # when it started loading (monotonic)
        self.to_predecessor: int | None = None  # ours to the one before (write end)
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = self._wake_pipe()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    @staticmethod
    def _wake_pipe() -> tuple[int, int]:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        return r, w

    def _log(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(f"[swgpu warm {stamp}] {self.generation}: {text}", file=sys.stderr, flush=True)

    # -- set-up and main loop -------------------------------------------------

    def _stop(self, *_) -> None:
        self.stopping = True

    def run(self) -> int:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.listener.setblocking(False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self._log(f"listening on {self.path} (pid {os.getpid()}, parent {self.parent})")
        if self.job_command:
            try:
                write_job_command(self.job_command)
            except OSError as exc:  # the jobs' swgpu is then the one on PATH after it
                self._log(f"no job command: {exc}")
        gens = generations(self.gpu, self.cuda)
        while True:
            self._load(gens[self.generation])
            if self.generation == 0 and self.gpu and self.standby_scheme is not None:
                self._fork_standby()
            if self.stopping or self.refuse or self.generation + 1 == len(gens):
                break
            if not self._fork_successor():
                break  # this process serves; the successor loads the next generation
        self._serve()
        return self.shutdown()

    def _load(self, stages) -> None:
        for name, load in stages:
            t = time.perf_counter()
            try:
                load()
            except Exception as exc:  # the children import it themselves
                self._log(f"stage {name}: {type(exc).__name__}: {exc} (left to the commands)")
            self._log(f"stage {name}: {time.perf_counter() - t:.2f} s")
            if cuda_started():
                self.refuse = "the warm process started CUDA (it must not fork)"
                self._log(f"{self.refuse}: every command runs in its own process")
                return

    def _fork_standby(self) -> None:
        """Fork the GPU standby (:mod:`.standby`): it starts the GPU now, for the
        first scoring job that may use it; the next generations keep its handle."""
        if self.refuse:
            return
        self.standby = fork_standby(
            self._close_inherited,
            self.run_command,
            self.standby_scheme,
            rescan_preload if self.standby_rescan else standby_preload,
            batched=self.standby_rescan,
        )
        self.standby_ours = self.standby is not None
        if self.standby is not None:
            expects = " (a re-scan expected)" if self.standby_rescan else ""
            self._log(f"GPU standby: pid {self.standby.pid}{expects}")

    def _fork_successor(self) -> bool:
        """Fork the process that loads the next generation; True in that process."""
        r, w = os.pipe()
        pid = os.fork()
        if pid:
            os.close(w)
            self.successor, self.from_successor = pid, r
            self.successor_since = time.monotonic()
            return False
        os.close(r)
        if self.to_predecessor is not None:
            os.close(self.to_predecessor)
        self.to_predecessor = w
        self.standby_ours = False
        self.sel.close()  # the predecessor's (an epoll instance is shared across a fork)
        self.sel = selectors.DefaultSelector()
        os.close(self.wake_r)
        os.close(self.wake_w)
        self.wake_r, self.wake_w = self._wake_pipe()
        self.generation += 1
        self._log(f"loading (pid {os.getpid()})")
        return True

    def _serve(self) -> None:
        self.sel.register(self.listener, selectors.EVENT_READ, "listen")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        if self.from_successor is not None:
            self.sel.register(self.from_successor, selectors.EVENT_READ, "successor")
        if self.to_predecessor is not None:  # take over: the one before stops accepting
            os.write(self.to_predecessor, b"r")
            os.close(self.to_predecessor)
            self.to_predecessor = None
        self._log("loaded" if self.successor is None else "serving")
        while not self.stopping:
            self.poll(1.0)
            if self.draining and not self.children:
                return
            if self.parent is not None and not _alive(self.parent):
                self._log("Snakemake ended: stopping")
                break
            if not self.children and time.monotonic() - self.last > self.idle_s:
                self._log(f"no command for {self.idle_s:.0f} s: stopping")
                break
        self.stopping = True

    def poll(self, timeout: float) -> None:
        for key, _ in self.sel.select(timeout):
            if key.data == "listen":
                self._accept()
            elif key.data == "wake":
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            elif key.data == "successor":
                self._successor_event()
            elif isinstance(key.data, tuple):  # a child's status, before its exit
                self._reported(key.fileobj, key.data[1])
            else:  # a waiting job's connection: readable means it went away
                self._job_gone(key.fileobj, key.data)
        self._reap()

    def _successor_event(self) -> None:
        ready = os.read(self.from_successor, 1) == b"r"
        self.sel.unregister(self.from_successor)
        os.close(self.from_successor)
        self.from_successor = None
        if ready:  # it accepts from now on; this one ends with its children
            self.sel.unregister(self.listener)
            self.listener.close()
            self.draining = True
            self._log("the next generation took over")
        else:
            self._log("the next generation ended while loading; serving on")
            self.successor = None

    # -- requests ---------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            self.last = time.monotonic()
            try:
                self._handle(conn)
            except Exception as exc:
                self._log(f"request failed: {type(exc).__name__}: {exc}")
                conn.close()

    def _handle(self, conn: socket.socket) -> None:
        conn.setblocking(True)
        conn.settimeout(10.0)
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            conn.close()
            return
        request, fds = receive(conn, max_fds=3)
        try:
            why = self.refuse or ("stopping" if self.stopping else "")
            expected = self.fingerprint if request.get("site", True) else self.fingerprint_no_site
            if not why and request.get("fingerprint") != expected:
                why = "the job's environment differs from the warm process's"
            if why:
                send(conn, {"refused": why})
                conn.close()
                return
            # a re-scan's scoring job: run here, its searches by the GPU standby
            split = self._split(request)
            # a later generation loading the imports the command needs: the GPU
            # standby takes a scoring job now if it is ready (it has its own imports),
            # unless it was told of a re-scan: then it loaded only what serving the
            # searches needs, and the job waits for the scoring generation instead
            later = self._later_generation_loading(request, split)
            pid, report_r, gpu_fd = None, None, None
            if split and not later:
                gpu_fd = offer_searches(self.standby, request)
                self.standby = None  # used, or gone
                if gpu_fd is not None:
                    self._log("the GPU standby serves the searches of the next job")
            elif not later or (
                self.standby is not None
                and self.standby.is_ready()
                and not (split and self.standby_rescan)
            ):
                pid, report_r = self._to_standby(request, fds)
            if pid is None and later:
                send(conn, {"retry": "the imports it needs are loading"})
                conn.close()
                return
            if pid is None:
                sys.stdout.flush()
                sys.stderr.flush()
                report_r, report_w = os.pipe()
                # the signals held from the fork until the child has reset its handlers
                # (one that came in between met this process's handler, and was lost)
                mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
                try:
                    pid = os.fork()
                except BaseException:
                    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                    raise
                if pid == 0:
                    os.close(report_r)
                    self._child(conn, request, fds, report_w, mask, gpu_fd)  # never returns
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                os.close(report_w)
        finally:
            for fd in fds:
                os.close(fd)
            if gpu_fd is not None:
                os.close(gpu_fd)
        conn.settimeout(None)
        self.children[pid] = conn
        self.reports[pid] = report_r
        self.sel.register(report_r, selectors.EVENT_READ, ("report", pid))
        try:
            send(conn, {"pid": pid})
        except OSError:
            self._job_gone(conn, pid)
            return
        self.sel.register(conn, selectors.EVENT_READ, pid)
        how = "" if request.get("site", True) else ", the job command"  # (write_job_command)
        self._log(
            f"pid {pid}: swgpu {' '.join(request['argv'][:1])} (job pid {request.get('pid')}{how})"
        )

    def _to_standby(self, request: dict, fds: list[int]) -> tuple[int | None, int | None]:
        """(pid, report pipe) of the GPU standby if it took the request, else (None, None)."""
        standby = self.standby
        if standby is None or (request.get("argv") or [""])[0] != "score-shard":
            return None, None
        report_r = standby.offer(request, fds)
        if standby.sock is None:
            self.standby = None  # used, or gone
        if report_r is None:
            return None, None
        if not self.standby_ours:
            self.adopted.add(standby.pid)
        self._log(f"pid {standby.pid}: the GPU standby takes the job")
        return standby.pid, report_r

    def _split(self, request: dict) -> bool:
        """Whether a scoring request runs in a child here with its searches served by
        the GPU standby (:mod:`swgpu_tools.remote`): a re-scan (every shard of the job
        has a state file) that the standby could take, and ``SWGPU_GPU_SPLIT`` is
        not ``0`` in the job's environment."""
        standby = self.standby
        if standby is None or standby.sock is None or not eligible(request, standby.env):
            return False
        if (request.get("env") or {}).get("SWGPU_GPU_SPLIT") == "0":
            return False
        states = state_paths(request.get("argv") or [])
        cwd = str(request.get("cwd") or ".")
        return bool(states) and all(os.path.exists(os.path.join(cwd, p)) for p in states)

    def _later_generation_loading(self, request: dict, split: bool = False) -> bool:
        """Whether the request's command needs a later generation than this
        process's, and the next one is loading (for less than :data:`RETRY_S`);
        ``split``: a scoring job whose searches the GPU standby serves (it needs
        the scoring generation's CPU imports, not numba-cuda's)."""
        argv = request.get("argv") or [""]
        needs = SPLIT_GENERATION if split else COMMAND_GENERATION.get(str(argv[0]), 0)
        return (
            needs > self.generation
            and self.from_successor is not None
            and time.monotonic() - self.successor_since < RETRY_S
        )

    def _job_gone(self, conn: socket.socket, pid: int) -> None:
        """The job ended (killed) while its child runs: stop the child."""
        if pid in self.children:
            self._log(f"pid {pid}: its job went away; sending SIGTERM")
            _signal(pid, signal.SIGTERM)
        try:
            self.sel.unregister(conn)
        except (KeyError, ValueError):
            pass

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self.children:  # the successor, or a child already reported
                continue
            if os.WIFSIGNALED(status):
                self._reply(pid, {"signal": os.WTERMSIG(status)})
            else:
                self._reply(pid, {"exit": os.waitstatus_to_exitcode(status)})

    def _reported(self, fd: int, pid: int) -> None:
        """A child wrote its status (its command is done, its outputs complete)
        before it exits: the job may end now, without waiting for the child's
        end, which takes a process that used CUDA another 0.1 s (the context's
        teardown; its GPU lock is held until then).  Nothing written: it died
        first, and waitpid reports it."""
        data = b""
        try:
            data = os.read(fd, 4)
        except OSError:
            pass
        self.sel.unregister(fd)
        os.close(self.reports.pop(pid))
        if len(data) == 4 and pid in self.children:
            self._reply(pid, {"exit": struct.unpack("!i", data)[0]})
        elif pid in self.adopted and pid in self.children:
            # not this process's child: no waitpid will say how it ended
            self._log(f"pid {pid}: ended without a status")
            self._reply(pid, {"exit": 1})

    def _reply(self, pid: int, reply: dict) -> None:
        """Send a child's status to its job and forget the child."""
        conn = self.children.pop(pid)
        self.adopted.discard(pid)
        self.last = time.monotonic()
        self._log(f"pid {pid}: {reply}")
        try:
            self.sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        try:
            send(conn, reply)
        except OSError:
            pass
        conn.close()

    # -- the child --------------------------------------------------------------

    def _close_inherited(self, conn: socket.socket | None = None) -> None:
        """In a forked child: reset the signals and close what belongs to the warm process."""
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.sel.close()
        self.listener.close()
        if conn is not None:
            conn.close()
        for other in self.children.values():
            other.close()
        for fd in self.reports.values():
            os.close(fd)
        os.close(self.wake_r)
        os.close(self.wake_w)
        for fd in (self.from_successor, self.to_predecessor):
            if fd is not None:
                os.close(fd)
        if self.standby is not None:
            self.standby.close()

    def _child(
        self,
        conn: socket.socket,
        request: dict,
        fds: list[int],
        report: int,
        mask=None,
        gpu_fd: int | None = None,
    ) -> None:
        try:
            self._close_inherited(conn)
            if mask is not None:  # held since the fork: delivered now, as the job's
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        run_job(request, fds, report, self.run_command, gpu_fd)  # never returns

    # -- the end ----------------------------------------------------------------

    def shutdown(self) -> int:
        if self.draining and not self.stopping:
            self._log("ended (its children done)")
            return 0
        if self.standby is not None:
            self.standby.close()  # it ends once no warm process holds its socket
        try:
            self.listener.close()
            os.unlink(self.path)
        except OSError:
            pass
        if self.successor is not None and not self.draining:
            _signal(self.successor, signal.SIGTERM)
        for pid in list(self.children):
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10.0
        while self.children and time.monotonic() < deadline:
            time.sleep(0.05)
            self._reap()
        for pid in list(self.children):
            _signal(pid, signal.SIGKILL)
        self._reap()
        self._log("stopped")
        return 0


#: Signals held while a job's child is forked (:meth:`_Server._handle`).
_HELD = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}


def serve(
    path: str,
    run_command,
    parent: int | None = None,
    gpu: bool = False,
    idle_s: float = IDLE_S,
    standby: str | None = None,
    rescan: bool = False,
    cuda: bool = True,
    job_command: str | None = None,
) -> int:
    """Run the warm process on the Unix socket ``path`` until ``parent`` (a
    process id: its Snakemake) ends, SIGTERM, or ``idle_s`` seconds without a
    command.  Each child runs ``run_command(argv)`` (``swgpu argv``: the CLI's
    :func:`~swgpu_tools.cli.run_command`) and exits with its status.  ``gpu``:
    also load numba-cuda's typing (scoring jobs on a GPU); ``standby`` (with
    ``gpu``): fork a GPU standby (:mod:`.standby`) that preloads the scoring
    kernels of this scoring (``MATRIX:OPEN:EXTEND``; ``""``: none); ``rescan``: a
    re-scan is expected (the standby loads what serving its searches needs);
    ``cuda`` False: the scoring jobs run on the CPU (``--backend cpu``), so numba-cuda
    is not loaded (unless ``gpu``); ``job_command``: write the jobs' ``swgpu`` there
    (:func:`.protocol.write_job_command`)."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")  # no thread pools in a process that forks
    return _Server(path, run_command, parent, gpu, idle_s, standby, rescan, cuda, job_command).run()
