"""The ``swgpu`` console script.

A local workflow run's job (``$SWGPU_WARM`` set) hands its command to the warm-start
process (:mod:`swgpu_tools.warm`) before the command-line modules are imported:
their imports (argparse's parsers, the options' modules) took about 40 ms of every
job's start on the 2-core machine, for a process that only forwards.  Anything
else, and a command the warm process does not take, runs here
(:func:`swgpu_tools.cli.entry`).
"""

from __future__ import annotations

import os
import sys

from .warm.protocol import ENV as WARM_ENV


def _hand_over(argv: list[str]) -> None:
    """Run ``argv`` in a child of the warm process, where there is one that takes it,
    and end this process with its status; else return (the caller runs it)."""
    if os.environ.get(WARM_ENV) and argv[:1] != ["warm-serve"]:
        from .warm.client import forward

        status = forward(argv)
        if status is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)  # (nothing loaded here needs the interpreter's teardown)


def entry() -> None:
    _hand_over(sys.argv[1:])
    from .cli import entry as run_here

    run_here()


#: What the job command runs where the warm process does not take the command: the
#: command-line entry in a Python with its site module (the job's process replaced).
_RUN_HERE = (
    "import sys; sys.flags.safe_path or sys.path.pop(0); sys.argv[0] = 'swgpu'; "
    "from swgpu_tools.cli import entry; entry()"
)


def job_entry() -> None:
    """``swgpu`` as a local run's jobs start it: the warm process's job command
    (:func:`swgpu_tools.warm.protocol.write_job_command`), a Python without its site
    module.  The command goes to the warm process; where that cannot take it, this
    process becomes a full ``swgpu`` (same arguments, environment and process)."""
    argv = sys.argv[1:]
    _hand_over(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-c", _RUN_HERE, *argv])
