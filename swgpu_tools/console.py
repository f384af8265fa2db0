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


def entry() -> None:
    argv = sys.argv[1:]
    if os.environ.get(WARM_ENV) and argv[:1] != ["warm-serve"]:
        from .warm.client import forward

        status = forward(argv)
        if status is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)  # (nothing loaded here needs the interpreter's teardown)
    from .cli import entry as run_here

    run_here()
