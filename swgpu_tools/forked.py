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


def run_child(parent: int, work, *args) -> None:
    """In a child forked by ``parent``: ``work(*args)``, then leave without the
    parent's clean-up, with status 0, or 1 after printing the error.  The child is
    killed when ``parent`` ends (:func:`end_with_parent`).  Never returns."""
    status = 1
    try:
        if end_with_parent(parent):
            work(*args)
            status = 0
    except BaseException:  # noqa: BLE001 - printed; the parent sees the status
        import traceback

        traceback.print_exc()
    finally:
        os._exit(status)
