"""Forked helper processes (early changes, early pictures): ending with the process
that forked them, so that a killed step leaves none of its helpers running."""

from __future__ import annotations

import os
import signal


def end_with_parent(parent: int) -> bool:
    """In a child forked by process ``parent``: be killed (SIGKILL) when the parent
    ends (Linux ``PR_SET_PDEATHSIG``; elsewhere nothing is set).  Returns False when
    the parent had already ended (the child should leave at once)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    return os.getppid() == parent


#: The niceness that helpers working beside the traceback add to their own
#: (``$SWGPU_EARLY_NICE``; 0: none).  The traceback's threads use every CPU the
#: step may: at the lowest priority the helpers take what those threads leave
#: (the step's single-threaded parts, the threads' ends) rather than a share of
#: each CPU, which would hold back the slowest thread and so the whole call.
EARLY_NICE = 19


def yield_cpus() -> int:
    """Lower this process's CPU priority by :data:`EARLY_NICE` (best effort; the
    children it forks inherit it).  Returns the niceness added."""
    try:
        step = int(os.environ.get("SWGPU_EARLY_NICE", EARLY_NICE))
    except ValueError:
        step = EARLY_NICE
    if step <= 0 or not hasattr(os, "nice"):
        return 0
    try:
        os.nice(step)
    except OSError:
        return 0
    return step


def run_child(parent: int, work, *args, beside: bool = False) -> None:
    """In a child forked by ``parent``: ``work(*args)``, then leave without the
    parent's clean-up, with status 0, or 1 after printing the error.  The child is
    killed when ``parent`` ends (:func:`end_with_parent`).  ``beside``: a helper
    working while the parent aligns, at a lower priority (:func:`yield_cpus`).
    Never returns."""
    status = 1
    try:
        if beside:
            yield_cpus()
        if end_with_parent(parent):
            work(*args)
            status = 0
    except BaseException:  # noqa: BLE001 - printed; the parent sees the status
        import traceback

        traceback.print_exc()
    finally:
        os._exit(status)
