"""A job's side of the warm start: hand the command to the warm process, wait.

:func:`forward` returns None whenever the warm process cannot take the command
(none listening, it refused, or it ended before starting it): the caller then
runs the command itself.  Once the child runs, this process only waits, passes
on the signals it gets (Snakemake stopping a job), and returns the child's exit
status.  Standard library only, so that a job that runs its command itself
loses nothing.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

from .protocol import ENV, JOB_EPOCHS, fingerprint, receive, send

#: Signals passed on to the child (what Snakemake or a person sends a job).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)


def _open_fds() -> list[int]:
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            continue
        fds.append(fd)
    return fds


#: Between a "retry" reply (the imports the command needs are loading) and the
#: next request; the server stops asking after its RETRY_S.
RETRY_PAUSE_S = 0.02


def forward(argv: list[str], path: str | None = None) -> int | None:
    """Run ``swgpu argv`` in a child of the warm process at ``path`` (default:
    ``$SWGPU_WARM``); its exit status, or None if this process must run it."""
    path = path or os.environ.get(ENV)
    if not path:
        return None
    # when this job's process started and first asked (its step's statistics record
    # them: Snakemake's part of a gap between steps, and the wait to be taken)
    from ..jobtimes import process_age  # (standard library only too)

    started = time.time() - (process_age() or 0.0)
    os.environ[JOB_EPOCHS] = f"{started:.3f},{time.time():.3f}"
    while True:
        status = _forward_once(argv, path)
        if status != "retry":
            return status
        time.sleep(RETRY_PAUSE_S)


def _forward_once(argv: list[str], path: str) -> int | str | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
        except OSError:
            return None  # not (yet, or any more) listening
        umask = os.umask(0)
        os.umask(umask)
        fds = _open_fds()
        request = {
            "argv": list(argv),
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "umask": umask,
            "fds": fds,
            # (the warm process's job command runs Python without the site module)
            "site": not sys.flags.no_site,
            "fingerprint": fingerprint(path=not sys.flags.no_site),
            "pid": os.getpid(),
        }
        try:
            send(sock, request, fds)
            reply, _ = receive(sock)
        except (OSError, EOFError, ValueError):
            return None  # it ended before starting the command: run it here
        if "retry" in reply:
            return "retry"  # the warm process that will take it is loading
        if "pid" not in reply:
            return None  # refused (another environment, or stopping)
        return _wait(sock, int(reply["pid"]))
    finally:
        sock.close()


def _wait(sock: socket.socket, child: int) -> int:
    def pass_on(signum, _frame):
        try:
            os.kill(child, signum)
        except OSError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, pass_on)
    try:
        reply, _ = receive(sock)
    except (OSError, EOFError, ValueError):
        print(
            "swgpu: error: the warm-start process ended before this command did "
            "(see results/logs/warm-start.log); run the workflow again",
            file=sys.stderr,
            flush=True,
        )
        return 1
    if "signal" in reply:  # end as the child did
        signum = int(reply["signal"])
        for s in FORWARDED:
            signal.signal(s, signal.SIG_DFL)
        try:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        except (OSError, ValueError):
            pass
        return 128 + signum
    return int(reply.get("exit", 1))
