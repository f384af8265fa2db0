"""Work a command leaves until after its exit status is given.

A workflow job is done for Snakemake once its outputs are complete; what a step
still has to do after that (a pool's workers ending, a large memory map unmapped,
a scratch folder removed: 0.09 s of a re-scan's shard step on a GPU host, run 249)
need not keep the next job waiting.  While a child of the warm process runs a
job's command (:func:`swgpu_tools.warm.standby.run_job`), :func:`later` keeps
such work, and the child runs it once the status went to the job
(:func:`run_pending`).  Elsewhere (a job's own process, whose status is its end;
the Python API) :func:`later` runs it at once, and :func:`deferred` says so.
Only for work that changes no declared output.
"""

from __future__ import annotations

import sys
import traceback
from contextlib import contextmanager

_pending: list = []
_deferring: list[bool] = [False]


def later(fn, *args) -> None:
    """Run ``fn(*args)`` after the command's status is given (at once where no status
    comes before the process's end)."""
    if _deferring[0]:
        _pending.append((fn, args))
    else:
        fn(*args)


def deferred() -> bool:
    """Whether :func:`later` now keeps its work for after the command's status (a
    step may then order its writes differently)."""
    return _deferring[0]


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
