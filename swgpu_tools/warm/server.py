"""The warm process: the step commands' imports, loaded once; one child per command.

:func:`serve` listens on a Unix socket from its first moment, and loads the
imports in stages (:data:`STAGES`, in the order the workflow's jobs need them).
Between stages, and afterwards, it takes requests: for each, it forks a child
that becomes the job's ``swgpu`` (its standard streams, folder, umask,
environment and arguments) and runs the command; the exit status goes back to
the job.  A request that comes during a stage waits for that stage only; the
child imports whatever the later stages had not loaded yet.

The parent stays single-threaded and never starts CUDA (a CUDA context does
not survive a fork): if a stage ever did, every later request is refused and
the jobs run their commands themselves.  The process ends when its Snakemake
ends (its parent process changes), on SIGTERM (the Snakefile's onsuccess and
onerror hooks), or after :data:`IDLE_S` seconds without a command; children
still running then are sent SIGTERM.
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

from .protocol import ENV, fingerprint, receive, send

#: Seconds without any command after which the process ends on its own.
IDLE_S = 3600.0


def _stage_numba() -> None:
    importlib.import_module("numba")
    from numba.core.registry import cpu_target

    cpu_target.typing_context.refresh()  # the CPU kernels' typing (each job's first load)
    cpu_target.target_context.refresh()


def _stage_cuda(gpu: bool):
    def load() -> None:
        importlib.import_module("numba.cuda")  # imported by every scoring job (its check)
        importlib.import_module("swgpu_tools.kernels.gpu")
        if gpu:
            from ..kernels.gpu.cache import init_target

            init_target()  # numba-cuda's typing: no driver call

    return load


def _stage_plots() -> None:
    from ..report import plots

    plots.preload()


def _modules(*names: str):
    def load() -> None:
        for name in names:
            importlib.import_module(name)

    return load


def stages(gpu: bool) -> list[tuple[str, object]]:
    """(name, loader) in the order the workflow's jobs need them: the shard
    step; the scoring job (Numba; numba-cuda and its typing with ``gpu``);
    rule finish (pandas, the traceback, the pictures)."""
    return [
        ("numpy", _modules("numpy")),
        ("steps", _modules("swgpu_tools.steps.shard_db", "swgpu_tools.steps.score_shard")),
        ("numba", _stage_numba),
        ("scoring", _modules("swgpu_tools.kernels.cpu", "swgpu_tools.kernels.seqhash")),
        ("cuda", _stage_cuda(gpu)),
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
        ("plots", _stage_plots),
    ]


def cuda_started() -> bool:
    """Whether this process started the CUDA driver (then it must not fork)."""
    driver = sys.modules.get("numba.cuda.cudadrv.driver")
    if driver is None:
        return False
    obj = getattr(getattr(driver, "Driver", None), "_singleton", None)
    return obj is not None and getattr(obj, "pid", None) is not None


def _log(text: str) -> None:
    print(f"[swgpu warm {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


class _Server:
    def __init__(self, path, run_command, parent: int | None, gpu: bool, idle_s: float):
        self.path = path
        self.run_command = run_command
        self.parent = parent
        self.gpu = gpu
        self.idle_s = idle_s
        self.fingerprint = fingerprint()
        self.children: dict[int, socket.socket] = {}  # child pid -> its job's connection
        self.stopping = False
        self.refuse = ""
        self.last = time.monotonic()
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    # -- set-up and main loop -------------------------------------------------

    def listen(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, "listen")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)

    def _stop(self, *_) -> None:
        self.stopping = True

    def run(self) -> int:
        self.listen()
        _log(f"listening on {self.path} (pid {os.getpid()}, parent {self.parent})")
        for name, load in stages(self.gpu):
            self.poll(0.0)
            if self.stopping:
                break
            t = time.perf_counter()
            try:
                load()
            except Exception as exc:  # the children import it themselves
                _log(f"stage {name}: {type(exc).__name__}: {exc} (left to the commands)")
            _log(f"stage {name}: {time.perf_counter() - t:.2f} s")
            if cuda_started():
                self.refuse = "the warm process started CUDA (it must not fork)"
                _log(f"{self.refuse}: every command runs in its own process")
                break
        _log("loaded")
        while not self.stopping:
            self.poll(1.0)
            if self.parent is not None and os.getppid() != self.parent:
                _log("Snakemake ended: stopping")
                break
            if not self.children and time.monotonic() - self.last > self.idle_s:
                _log(f"no command for {self.idle_s:.0f} s: stopping")
                break
        return self.shutdown()

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
            else:  # a waiting job's connection: readable means it went away
                self._job_gone(key.fileobj, key.data)
        self._reap()

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
                _log(f"request failed: {type(exc).__name__}: {exc}")
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
            if not why and request.get("fingerprint") != self.fingerprint:
                why = "the job's environment differs from the warm process's"
            if why:
                send(conn, {"refused": why})
                conn.close()
                return
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                self._child(conn, request, fds)  # never returns
        finally:
            for fd in fds:
                os.close(fd)
        conn.settimeout(None)
        self.children[pid] = conn
        try:
            send(conn, {"pid": pid})
        except OSError:
            self._job_gone(conn, pid)
            return
        self.sel.register(conn, selectors.EVENT_READ, pid)
        _log(f"pid {pid}: swgpu {' '.join(request['argv'][:1])} (job pid {request.get('pid')})")

    def _job_gone(self, conn: socket.socket, pid: int) -> None:
        """The job ended (killed) while its child runs: stop the child."""
        if pid in self.children:
            _log(f"pid {pid}: its job went away; sending SIGTERM")
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        try:
            self.sel.unregister(conn)
        except (KeyError, ValueError):
            pass

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            self.last = time.monotonic()
            if os.WIFSIGNALED(status):
                reply = {"signal": os.WTERMSIG(status)}
            else:
                reply = {"exit": os.waitstatus_to_exitcode(status)}
            _log(f"pid {pid}: {reply}")
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

    def _child(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        status = 1
        try:
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.sel.close()
            self.listener.close()
            conn.close()
            for other in self.children.values():
                other.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            for target, fd in zip(request["fds"], fds):
                if fd != target:
                    os.dup2(fd, target)
            for fd in fds:
                if fd not in request["fds"]:
                    os.close(fd)
            sys.stdin = os.fdopen(0, "r", closefd=False)
            sys.stdout = os.fdopen(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)
            sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False, errors="backslashreplace")
            os.chdir(request["cwd"])
            os.umask(int(request["umask"]))
            env = {str(k): str(v) for k, v in request["env"].items() if k != ENV}
            os.environ.clear()
            os.environ.update(env)
            argv = [str(a) for a in request["argv"]]
            sys.argv = ["swgpu", *argv]
            status = self.run_command(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            try:
                import logging

                sys.stdout.flush()
                sys.stderr.flush()
                logging.shutdown()
            finally:
                os._exit(status)

    # -- the end ----------------------------------------------------------------

    def shutdown(self) -> int:
        try:
            self.listener.close()
            os.unlink(self.path)
        except OSError:
            pass
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + 10.0
        while self.children and time.monotonic() < deadline:
            time.sleep(0.05)
            self._reap()
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self._reap()
        _log("stopped")
        return 0


def serve(
    path: str, run_command, parent: int | None = None, gpu: bool = False, idle_s: float = IDLE_S
) -> int:
    """Run the warm process on the Unix socket ``path`` until ``parent`` (a
    process id: its Snakemake) ends, SIGTERM, or ``idle_s`` seconds without a
    command.  Each child runs ``run_command(argv)`` (``swgpu argv``: the CLI's
    :func:`~swgpu_tools.cli.run_command`) and exits with its status.  ``gpu``:
    also load numba-cuda's typing (scoring jobs on a GPU)."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")  # no thread pools in a process that forks
    return _Server(path, run_command, parent, gpu, idle_s).run()
