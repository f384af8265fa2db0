"""Work a command leaves until after its exit status is given.

A workflow job is done for Snakemake once its outputs are complete; what a step
still has to do after that (a pool's workers ending, a large memory map unmapped,
a scratch folder removed: 0.09 s of a re-scan's shard step on a GPU host, run 249)
need not keep the next job waiting.  While a ``swgpu`` command runs
(:func:`swgpu_tools.cli.run_command`), :func:`later` keeps such work, and the
command's process runs it once the status is given (:func:`run_pending`: in a
child of the warm process after the status went to the job, else just before
the process exits).  Outside a command (the Python API) :func:`later` runs it at
once.  Only for work that changes no output.
"""

from __future__ import annotations

import sys
import traceback
from contextlib import contextmanager

_pending: list = []
_deferring: list[bool] = [False]


def later(fn, *args) -> None:
    """Run ``fn(*args)`` after the command's status is given (at once outside a command)."""
    if _deferring[0]:
        _pending.append((fn, args))
    else:
        fn(*args)


@contextmanager
def deferring():
    """Within it, :func:`later` keeps its work for :func:`run_pending`."""
    before = _deferring[0]
    _deferring[0] = True
    try:
        yield
    finally:
        _deferring[0] = before


def run_pending() -> None:
    """Run the work kept so far, in order; an error is printed and the rest goes on."""
    while _pending:
        fn, args = _pending.pop(0)
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - the status is given already
            traceback.print_exc(file=sys.stderr)
