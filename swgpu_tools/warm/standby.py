"""The GPU standby: a child of the warm process that starts the GPU before a scoring job comes.

A scoring job's GPU start (its lock, the CUDA driver and context, the helper
and scoring kernels from the disk cache) takes about 0.9 s on an H100 host.
The job overlaps it with reading its shard, but the start is the longer of
the two.  The warm process itself must never start CUDA (a context does not
survive a fork), so it forks one *standby* as soon as it runs: a process that
starts the GPU at once (:func:`swgpu_tools.backend.prestart`) and then waits
for one command.  The first ``score-shard`` command that may run on it (no
``--backend cpu``, ``--device auto``, the same ``CUDA_*`` environment) is
handed to it instead of a new child; it becomes that job's ``swgpu``
exactly as a child does (:func:`run_job`), with its GPU already started.

The standby takes one command and ends with it.  It ends without one after
:data:`IDLE_S` seconds (so a run that scores on the CPU, or nothing, does not
keep a GPU locked for long), when the warm processes are gone (its socket
closes), or on SIGTERM with their process group.

The hand-over: the warm process sends the request and the job's file
descriptors, with the write end of a pipe, over a socket pair.  The standby's
reader answers on the pipe at once: ``y`` (taken; the pipe then brings the
exit status, as a child's report pipe does) or ``n`` (not for it).  Nothing,
or a closed pipe, means it is gone: the warm process forks a child as usual.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback

from .protocol import ENV, JOB_EPOCHS, hold_later_lock, receive, send

#: The variable that gives a job its socket to the standby (swgpu_tools.remote.ENV_FD;
#: not imported from there: the warm process's first generation loads no backend).
GPU_FD = "SWGPU_GPU_SERVER_FD"

#: Seconds the standby waits for a command before it ends (and frees its GPU).
IDLE_S = 120.0

#: Seconds the warm process waits for the standby's answer to a hand-over.
ANSWER_S = 5.0
#: What the standby sends on its socket once it takes commands (its preload done; a
#: standby told of a re-scan sends it at once, its preload then runs on a thread):
#: the warm process may then hand it a scoring job before its own generation that
#: would run such a job has loaded (:meth:`Standby.is_ready`).
READY = b"R"


def eligible(request: dict, env=None) -> bool:
    """Whether a request may run on the standby: ``swgpu score-shard`` that may use
    a GPU (no ``--backend cpu``), on any GPU (``--device auto``, the default), with
    the ``CUDA_*`` environment the standby's GPU started under (``env``: default
    this process's)."""
    argv = [str(a) for a in request.get("argv") or []]
    if argv[:1] != ["score-shard"]:
        return False
    options = {"--backend": "auto", "--device": "auto"}
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in options:
            if not eq:
                value = argv[i + 1] if i + 1 < len(argv) else ""
            options[name] = value
    if options["--backend"] == "cpu" or options["--device"] != "auto":
        return False
    env = os.environ if env is None else env
    theirs = request.get("env") or {}
    cuda = {k for k in (*env, *theirs) if k.startswith("CUDA_")}
    return all(env.get(k) == theirs.get(k) for k in cuda)


def state_paths(argv: list) -> list[str]:
    """The ``--state`` files of a ``score-shard`` command line (its shards' memories of
    the last release; ``--state A B ...`` up to the next option, or ``--state=A``)."""
    argv = [str(a) for a in argv]
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith("--state="):
            out.append(arg.partition("=")[2])
        elif arg == "--state":
            for value in argv[i + 1 :]:
                if value.startswith("-"):
                    break
                out.append(value)
    return out


class Standby:
    """The warm process's handle on its standby (one command, then gone)."""

    def __init__(self, pid: int, sock: socket.socket, env: dict | None = None):
        self.pid = pid
        self.sock: socket.socket | None = sock
        self.ready = False  # it said :data:`READY`: it answers an offer at once
        #: the environment its start began in (None: this process's), which a job's must
        #: match (:func:`eligible`; the warm process's later generations import numba-cuda,
        #: which sets CUDA defaults in theirs)
        self.env = env

    def is_ready(self) -> bool:
        """Whether the standby has loaded what it loads before taking a command (it
        sends :data:`READY` then), without waiting."""
        if not self.ready and self.sock is not None:
            try:
                if select.select([self.sock], [], [], 0)[0]:
                    got = self.sock.recv(1, socket.MSG_DONTWAIT)
                    if got == READY:
                        self.ready = True
                    elif not got:  # it ended
                        self.close()
            except (OSError, ValueError):
                pass
        return self.ready

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def offer(self, request: dict, fds: list[int]) -> int | None:
        """Hand a request (and the job's file descriptors) to the standby: the read
        end of the pipe its status will come by, or None (not for it, or gone)."""
        if self.sock is None:
            return None
        r, w = os.pipe()
        try:
            send(self.sock, request, [*fds, w])
        except OSError:  # it ended, or took another command
            os.close(r)
            self.close()
            return None
        finally:
            os.close(w)
        answer = b""
        if select.select([r], [], [], ANSWER_S)[0]:
            try:
                answer = os.read(r, 1)
            except OSError:
                pass
        if answer == b"y":
            self.close()  # one command per standby
            return r
        os.close(r)
        if answer != b"n":
            self.close()  # gone, or not answering: never asked again
            if not answer:
                try:
                    os.kill(self.pid, signal.SIGTERM)
                except OSError:
                    pass
        return None


def fork_standby(
    close_inherited, run_command, scoring: str, preload=None, batched: bool = False
) -> Standby | None:
    """Fork the standby (in the warm process: ``close_inherited`` closes, in the
    child, what it must not keep of the warm process's and restores the signals'
    defaults; ``scoring``, ``MATRIX:OPEN:EXTEND``: the scoring kernels to load;
    ``preload`` loads, beside the GPU's start, what a scoring job needs on the
    CPU; ``batched``: a re-scan is expected, its batched kernels are loaded
    first); None if fork fails."""
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ)  # before the start sets its defaults (CUDA_DEVICE_MAX_CONNECTIONS)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError:
        parent_end.close()
        child_end.close()
        return None
    if pid:
        child_end.close()
        return Standby(pid, parent_end, env)
    status = 1
    try:
        parent_end.close()
        close_inherited()
        status = _standby_main(child_end, run_command, scoring, preload, env, batched)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(status)


def _scheme(scoring: str):
    """The ScoringScheme of ``MATRIX:OPEN:EXTEND`` (None for none, or one it cannot make:
    the job's own start loads its kernels then)."""
    matrix, _, gaps = scoring.partition(":")
    gap_open, _, gap_extend = gaps.partition(":")
    if not matrix:
        return None
    from ..scoring import ScoringScheme

    try:
        return ScoringScheme(matrix, int(gap_open), int(gap_extend))
    except Exception:
        return None


def _standby_main(
    sock: socket.socket, run_command, scoring: str, preload, env: dict, batched: bool = False
) -> int:
    from .. import backend

    # (close_inherited restored the other signals' defaults)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the job, not this
    print(f"[swgpu warm] GPU standby: starting, pid {os.getpid()}", file=sys.stderr, flush=True)
    start = backend.prestart(_scheme(scoring), batched=batched)
    # SWGPU_STANDBY_READY_EARLY=1 (to measure): ready at once, leaving what the preload
    # loads to the job, which then reads its shards while the start's thread imports
    # Numba (the preload waits for that import; READY came 1.2-1.6 s after the fork)
    early = os.environ.get("SWGPU_STANDBY_READY_EARLY") == "1"
    loading = None  # a re-scan's standby: the preload's thread
    if preload is not None and not early:
        if batched and os.environ.get("SWGPU_STANDBY_PRELOAD_AFTER", "1") != "0":
            # a re-scan's: its job waits for the GPU's start, whose imports would share
            # the interpreter lock with the preload (run 229: the start took 1.2 s
            # beside it, 0.65 s alone); so the preload runs on a thread once the start
            # is over (begun at the job's offer instead, it slowed the start's last
            # steps: run 231), and the standby reads its offer at once.  The job's
            # start is answered once both are done (remote.serve: ``ready``)
            loading = threading.Thread(
                target=_preload_after, args=(start, preload), name="swgpu-preload", daemon=True
            )
            loading.start()
        else:
            _preload(preload)
    try:
        sock.sendall(READY)
    except OSError:  # the warm process closed its end: an offer it sent first (a job's
        pass  # searches, made before this was ready) is still to be read below
    print("[swgpu warm] GPU standby: ready", file=sys.stderr, flush=True)
    sock.settimeout(IDLE_S)
    while True:
        try:
            request, fds = receive(sock, max_fds=8)
        except (OSError, EOFError, ValueError):  # idle, or the warm processes are gone
            return 0
        if not fds:
            continue
        if request.get("serve"):  # a job's searches (its own process runs the rest)
            sock.close()  # later offers fail at once
            return _serve_searches(request, fds, env, loading)
        *job_fds, answer = fds
        if not eligible(request, env):
            os.write(answer, b"n")
            for fd in fds:
                os.close(fd)
            continue
        os.write(answer, b"y")
        sock.close()  # later offers fail at once
        signal.signal(signal.SIGINT, signal.default_int_handler)
        run_job(request, job_fds, answer, run_command)  # never returns


def _preload(preload) -> None:
    try:
        preload()
    except Exception as exc:  # the job loads it then
        print(f"[swgpu warm] GPU standby: preload: {exc}", file=sys.stderr, flush=True)


def _preload_after(start, preload) -> None:
    """``preload`` once the GPU's start made ahead (``start``) is over."""
    start.wait()
    _preload(preload)


def _serve_searches(
    request: dict, fds: list[int], env: dict, loading: threading.Thread | None = None
) -> int:
    """Serve the searches of the job of ``request`` on the socket in ``fds``
    (:func:`swgpu_tools.remote.serve`), then end; the socket is closed at once where
    the job may not run here (:func:`eligible`): the job then starts its own backend.
    ``loading``: the preload's thread, which the job's start waits for."""
    for fd in fds[1:]:
        os.close(fd)
    conn = socket.socket(fileno=fds[0])
    if not eligible(request, env):
        conn.close()
        return 0
    from ..remote import serve

    print(
        f"[swgpu warm] GPU standby: serves the searches of job pid {request.get('pid')}",
        file=sys.stderr,
        flush=True,
    )
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return serve(conn, ready=None if loading is None else loading.join)
    finally:
        conn.close()


def offer_searches(standby: Standby, request: dict) -> int | None:
    """Offer the standby a job's searches (:mod:`swgpu_tools.remote`) without waiting
    for it: the job's end of a new socket pair (a file descriptor to hand to the job),
    or None if the standby is gone.  The standby is used up either way."""
    if standby.sock is None:
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        send(standby.sock, {**request, "serve": True}, [theirs.fileno()])
    except OSError:
        ours.close()
        return None
    finally:
        theirs.close()
        standby.close()  # one job per standby
    return ours.detach()


def run_job(
    request: dict, fds: list[int], report: int, run_command, gpu_fd: int | None = None
) -> None:
    """Become the job's ``swgpu``: its standard streams (``fds``, placed at
    ``request["fds"]``), folder, umask, environment and arguments; run the
    command, write its status to ``report`` (the outputs are complete then),
    and exit with it.  Never returns.  ``gpu_fd``: a socket to the GPU standby that
    serves the job's searches (:func:`offer_searches`), named in its environment."""
    status = 1
    # held until the work the command leaves for later is done (warm.launch.stop waits)
    socket_path = (request.get("env") or {}).get(ENV)
    if socket_path:
        hold_later_lock(str(socket_path))
    try:
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
        if env.get(JOB_EPOCHS):  # when the job was taken (its step's statistics)
            env[JOB_EPOCHS] += f",{time.time():.3f}"
        if gpu_fd is not None:  # its searches are served by the GPU standby
            env[GPU_FD] = str(gpu_fd)
        os.environ.clear()
        os.environ.update(env)
        argv = [str(a) for a in request["argv"]]
        sys.argv = ["swgpu", *argv]
        from ..later import deferring

        with deferring():  # work that changes no output: after the status (below)
            status = run_command(argv)
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
            # the status now (the outputs are complete), then what the command left for
            # after it (swgpu_tools.later), then the exit
            os.write(report, struct.pack("!i", status if isinstance(status, int) else 1))
            from ..later import run_pending

            # finished even where Snakemake, done with this job, stops the warm processes
            # meanwhile (a SIGTERM at its end): a re-scan state, say, is written whole
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
            run_pending()
        finally:
            os._exit(status if isinstance(status, int) else 1)
