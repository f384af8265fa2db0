"""The warm start's messages, and the environment both sides must share.

A message is a 4-byte big-endian length and that many bytes of JSON.  The
request (client to server) carries the job's standard streams as file
descriptors (``SCM_RIGHTS``).  Replies: ``{"pid": N}`` once the child runs,
``{"refused": why}``, or ``{"retry": why}`` (ask again shortly: the process
that will take it is loading); then ``{"exit": status}`` or ``{"signal": number}``.

Standard library only: the client imports this before anything else.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import sys

from ..jobtimes import JOB_EPOCHS  # (read when a command runs)

#: The server's socket path, set for the jobs by the Snakefile's onstart hook.
ENV = "SWGPU_WARM"

#: Largest message accepted (a request holds the job's whole environment).
MAX_MESSAGE = 16 << 20

_HEADER = struct.Struct("!I")

#: Environment variables read when modules are imported (or that decide which
#: modules are found), so that a child forked from a parent started under other
#: values would not behave like a fresh process: they must be equal on both sides.
_ENV_PREFIXES = ("NUMBA_", "SWGPU_", "PYTHON", "NUMBA_CUDA_")
_ENV_NAMES = ("XDG_CACHE_HOME", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "LD_PRELOAD")
#: ... except these, read by a command when it runs (the child gets the job's).
_ENV_EXCEPT = (ENV, "SWGPU_PROFILE", JOB_EPOCHS)


def fingerprint(env=None, path: bool = True) -> str:
    """What a process's imports depend on: the interpreter, the swgpu_tools it
    runs, its module path (but the script's own folder, ``sys.path[0]``), the
    user, and the environment variables above.  Equal fingerprints mean a child
    of the warm process behaves as a fresh ``swgpu`` of the job would.

    ``path`` False: without the module path, for a job started by the warm
    process's own job command (:func:`write_job_command`: this interpreter and
    this swgpu_tools, run without the ``site`` module): a fresh process's module
    path follows from the interpreter and the environment compared here."""
    env = os.environ if env is None else env
    package = sys.modules.get("swgpu_tools")
    keys = sorted(
        k for k in env if (k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES) and k not in _ENV_EXCEPT
    )
    blob = json.dumps(
        {
            "exe": os.path.realpath(sys.executable),
            "package": os.path.realpath(getattr(package, "__file__", None) or ""),
            "path": sys.path[1:] if path else None,
            "uid": os.getuid(),
            "env": [(k, env[k]) for k in keys],
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    """Send one message, with ``fds`` (file descriptors) beside it."""
    payload = json.dumps(message).encode()
    data = _HEADER.pack(len(payload)) + payload
    if fds:
        sent = socket.send_fds(sock, [data], fds)
        data = data[sent:]
    if data:
        sock.sendall(data)


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict, list[int]]:
    """One message and the file descriptors that came with it.

    Raises EOFError if the peer closed the connection first, ValueError on a
    message that is not one."""
    fds: list[int] = []
    buf = b""
    if max_fds:
        buf, fds, _flags, _addr = socket.recv_fds(sock, 65536, max_fds)
        if not buf:
            raise EOFError("connection closed")
    try:
        while len(buf) < _HEADER.size:
            buf += _recv(sock, _HEADER.size - len(buf))
        (size,) = _HEADER.unpack_from(buf)
        if size > MAX_MESSAGE:
            raise ValueError(f"message of {size} bytes")
        while len(buf) < _HEADER.size + size:
            buf += _recv(sock, _HEADER.size + size - len(buf))
        message = json.loads(buf[_HEADER.size : _HEADER.size + size])
        if not isinstance(message, dict):
            raise ValueError("message is not a JSON object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return message, fds


def _recv(sock: socket.socket, n: int) -> bytes:
    chunk = sock.recv(min(n, 1 << 20))
    if not chunk:
        raise EOFError("connection closed")
    return chunk


#: The job command's Python code (:func:`write_job_command`), run by ``python -S -c``:
#: without the current folder on the module path (as a console script), and with the
#: folder that holds swgpu_tools after the standard library's.
_JOB_CODE = (
    "import sys; sys.flags.safe_path or sys.path.pop(0); sys.path.append({root!r}); "
    "from swgpu_tools.console import job_entry; job_entry()"
)


def write_job_command(path: str) -> None:
    """Write ``path``: an executable ``swgpu`` for a local run's jobs (the warm
    launch puts its folder first on the jobs' PATH) that runs this interpreter
    without the ``site`` module, with this swgpu_tools
    (:func:`swgpu_tools.console.job_entry`).  A job's ``swgpu`` only hands its
    command to the warm process, which needs nothing from the site folders; their
    ``.pth`` files and ``sitecustomize`` cost 0.05-0.1 s of every Python start on a
    GPU host (RESULTS-workflow.md, run 86), several times a run.  Where the warm
    process cannot take the command, the job's process becomes a full ``swgpu``."""
    import shlex

    package = sys.modules["swgpu_tools"].__file__
    root = os.path.dirname(os.path.dirname(os.path.realpath(package)))
    code = _JOB_CODE.format(root=root)
    text = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S -c {shlex.quote(code)} "$@"\n'
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


#: In the warm processes' folder (beside the socket): a lock each child running a job's
#: command holds shared until what the command left for later is done
#: (:mod:`swgpu_tools.later`); the warm launch's stop takes it exclusively, so that a
#: run ends after that work (a re-scan's states), not while it goes on.  A POSIX
#: record lock (``lockf``): a process's own, not inherited by what it forks (the
#: step's helpers would hold a ``flock`` of the same open file as long as they live).
LATER_LOCK = "later.lock"


def later_lock_path(socket_path: str) -> str:
    """The :data:`LATER_LOCK` of the warm processes serving at ``socket_path``."""
    return os.path.join(os.path.dirname(socket_path), LATER_LOCK)


def _open_later_lock(socket_path: str) -> int:
    return os.open(later_lock_path(socket_path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def hold_later_lock(socket_path: str) -> int | None:
    """Open and take :data:`LATER_LOCK` shared (released when this process ends):
    its descriptor, or None where it cannot be taken (nothing waits then)."""
    import fcntl

    try:
        fd = _open_later_lock(socket_path)
    except OSError:
        return None
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # taken exclusively: the warm processes are stopping
        os.close(fd)
        return None
    return fd


def wait_later_lock(socket_path: str, timeout: float) -> bool:
    """Wait (at most ``timeout`` seconds) until no process holds :data:`LATER_LOCK`
    shared; whether it came free."""
    import fcntl
    import time

    try:
        fd = _open_later_lock(socket_path)
    except OSError:
        return True  # no folder: no process holds it
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)
    finally:
        os.close(fd)
