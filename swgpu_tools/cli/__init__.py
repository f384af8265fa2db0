"""The ``swgpu`` command.

User commands (:mod:`.user`): ``search``, ``align``, ``backend``.  The
workflow's step commands (:mod:`.steps`) are listed apart in ``swgpu --help``.
Every error a user can fix prints one line (``swgpu: error: ...``) and exits
with status 2; an unknown option prints that command's usage.
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..errors import InputError
from ..logs import configure
from .options import SCORING_NOTE, add_verbosity
from .steps import STEPS, add_steps
from .user import add_align, add_backend, add_changes, add_search

USER_COMMANDS = [
    ("search", "search queries against a database; write hits and alignments"),
    ("align", "align given pairs (local, global or semi-global)"),
    ("changes", "hits new, gone or changed between two kept releases; list, prune"),
    ("backend", "which backend (GPU or CPU) would run, and why; precompile kernels"),
]

DESCRIPTION = "Exact Smith-Waterman protein database search on GPUs and CPUs."


def _epilog() -> str:
    lines = ["commands:"]
    lines += [f"  {n:<14}{h}" for n, h in USER_COMMANDS]
    lines += ["", "workflow steps (what the Snakemake rules run; each has --help):"]
    lines += [f"  {n:<14}{h}" for n, h in STEPS]
    lines += ["", "Run 'swgpu COMMAND --help' for a command's options.", "", SCORING_NOTE]
    return "\n".join(lines)


def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    parser = argparse.ArgumentParser(
        prog="swgpu",
        description=DESCRIPTION,
        epilog=_epilog(),
        usage="swgpu [--version] COMMAND [options]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"swgpu {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", title=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    add_search(sub)
    add_align(sub)
    add_changes(sub)
    add_backend(sub)
    add_steps(sub)
    for name, p in sub.choices.items():
        p.prog = f"swgpu {name}"
        add_verbosity(p)
    return parser, sub.choices


def main(argv=None) -> int:
    parser, commands = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    if extra:  # the command's own usage, not the top level's
        commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    configure(getattr(args, "verbose", 0) - getattr(args, "quiet", 0))
    try:
        return args.run(args)
    except InputError as exc:  # OutputError too: both name the file
        print(f"swgpu {args.command}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except OSError as exc:  # a file error that nothing above named: name it here
        from ..io.atomic import describe_os_error

        where = exc.filename or "a file"
        print(
            f"swgpu {args.command}: error: {where}: {describe_os_error(exc)}",
            file=sys.stderr,
            flush=True,
        )
        return 2
    except KeyboardInterrupt:
        print("swgpu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
