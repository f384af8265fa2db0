"""The ``swgpu`` command.

User commands (:mod:`.user`): ``search``, ``align``, ``backend``.  The
workflow's step commands (:mod:`.steps`) are listed apart in ``swgpu --help``.
Every error a user can fix prints one line (``swgpu: error: ...``) and exits
with status 2; an unknown option prints that command's usage.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading

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
    lines += [f"  {'run-steps':<14}several of these steps in one process (rule finish)"]
    lines += ["", "Run 'swgpu COMMAND --help' for a command's options.", "", SCORING_NOTE]
    return "\n".join(lines)


@functools.cache
def parsers() -> tuple[argparse.ArgumentParser, dict]:
    """:func:`build_parser`'s parsers, built once a process (parsing does not change
    them; ``run-steps`` parses each step's options several times)."""
    return build_parser()


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
    sub.choices["warm-serve"].set_defaults(command_runner=run_command)
    for name, p in sub.choices.items():
        p.prog = f"swgpu {name}"
        add_verbosity(p)
    return parser, sub.choices


#: Separates the steps of ``swgpu run-steps``.
STEP_SEPARATOR = ":::"

RUN_STEPS_HELP = f"""usage: swgpu run-steps STEP [OPTIONS ...] [{STEP_SEPARATOR} STEP [OPTIONS ...] ...]

Run several workflow steps in one process, in the order given, each with the
options of 'swgpu STEP'.  It stops at the first step that fails and exits with
that step's status.  One process pays the start-up (Python, imports, compiled
kernels loaded) once instead of once per step: the workflow's rule 'finish'
runs merge, traceback, release and plots this way.

example:
  swgpu run-steps merge ... {STEP_SEPARATOR} traceback ... {STEP_SEPARATOR} release ...
"""


def run_steps(argv: list[str]) -> int:
    """``swgpu run-steps``: the steps in ``argv`` (separated by :data:`STEP_SEPARATOR`)
    in this process, in order; the first failing step's status, else 0."""
    if not argv or argv[0] in ("-h", "--help"):
        print(RUN_STEPS_HELP, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    steps: list[list[str]] = [[]]
    for arg in argv:
        if arg == STEP_SEPARATOR:
            steps.append([])
        else:
            steps[-1].append(arg)
    known = {name for name, _ in STEPS} - {"warm-serve"}
    for step in steps:
        if not step or step[0] not in known:
            name = step[0] if step else "(nothing)"
            print(
                f"swgpu run-steps: error: {name!r} is not a workflow step "
                f"(one of: {', '.join(sorted(known))})",
                file=sys.stderr,
            )
            return 2
    from ..io.fasta import remember_reads
    from ..io.tables import keep_for_reading

    _prefetch_traceback(steps)  # (first: it may fork)
    warming = _warm_traceback(steps)
    try:
        # the steps' query file read once; the merge's hits table handed to the traceback
        with remember_reads(), keep_for_reading(_hits_handed_over(steps)):
            return _chain(steps, warming)
    finally:
        if "swgpu_tools.report.make" in sys.modules:  # a step failed: no pictures left behind
            sys.modules["swgpu_tools.report.make"].cancel_early()
        if "swgpu_tools.steps.history" in sys.modules:  # nor changes
            sys.modules["swgpu_tools.steps.history"].cancel_changes_early()


def _chain(steps: list[list[str]], warming) -> int:
    """Run ``steps`` in order (:func:`run_steps`); the first failing step's status, else 0."""
    from ..io.stepstats import previous_step_ended

    for k, step in enumerate(steps):
        status = main(step)
        if status:
            return status
        previous_step_ended()
        if step[0] == "merge":
            if warming is not None:  # done before forking: no import half made
                warming.join()
            # SWGPU_EARLY_STEPS=0: neither made beside the traceback (for measuring
            # whether their processes slow its alignments)
            if os.environ.get("SWGPU_EARLY_STEPS", "1") != "0":
                _changes_early(step, steps[k + 1 :])
                _plots_early(step, steps[k + 1 :])
        if step[0] == "traceback" and "swgpu_tools.report.make" in sys.modules:
            sys.modules["swgpu_tools.report.make"].traceback_done()
    return 0


def _warm_traceback(steps: list[list[str]]):
    """With a merge before a traceback: a thread that loads what the traceback
    needs (Numba, its kernels: 0.4-0.7 s) while the merge runs; else None.  Best
    effort: what fails to load here is loaded by the traceback."""
    if _merge_and_traceback(steps) is None:
        return None

    def load() -> None:
        try:
            from ..steps.traceback import preload

            preload()
        except Exception as exc:  # noqa: BLE001 - the traceback loads it itself
            from ..logs import get_logger

            get_logger(__name__).debug(f"traceback not preloaded: {exc}")

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    return thread


def _merge_and_traceback(steps: list[list[str]]) -> tuple[list[str], list[str]] | None:
    """The first merge of ``steps`` and the first traceback after it, or None."""
    names = [s[0] for s in steps]
    if "merge" not in names or "traceback" not in names[names.index("merge") :]:
        return None
    m = names.index("merge")
    return steps[m], steps[names.index("traceback", m)]


def _parsed_quietly(step: list[str]):
    """A step's parsed options; argparse's errors unprinted (the step prints its own
    when it runs) and raised as SystemExit."""
    import contextlib
    import io

    _, commands = parsers()
    with contextlib.redirect_stderr(io.StringIO()):
        return commands[step[0]].parse_args(step[1:])


def _prefetch_traceback(steps: list[list[str]]) -> None:
    """With a merge before a traceback that reuses a kept release's alignments: read
    those and their subjects' records in a forked child while the merge runs
    (:func:`swgpu_tools.steps.traceback.prefetch_previous`; the reading, mostly Python,
    on a thread here took the merge's interpreter lock: run 222, RESULTS-workflow.md,
    the finish job 0.16 s shorter forked).  Best effort.  ``SWGPU_PREFETCH_TRACEBACK=0``:
    no reading ahead; ``=thread``: on a thread (both for measuring)."""
    pair = _merge_and_traceback(steps)
    if pair is None or os.environ.get("SWGPU_PREFETCH_TRACEBACK", "1") == "0":
        return
    try:
        t = _parsed_quietly(pair[1])
        previous = t.previous
        if previous and os.path.isdir(previous):
            from ..steps.history import newest_internal

            previous = newest_internal(previous)
        if previous and t.shards:
            from ..steps.traceback import prefetch_previous

            forked = os.environ.get("SWGPU_PREFETCH_TRACEBACK") != "thread"
            prefetch_previous(t.shards, previous, forked=forked)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the traceback reads them itself
        from ..logs import get_logger

        get_logger(__name__).debug(f"no read ahead for the traceback: {exc}")


def _hits_handed_over(steps: list[list[str]]) -> list[str]:
    """The hits table of a merge that a traceback after it reads (``--hits``, the same
    file by real path): kept in memory as read (:func:`swgpu_tools.io.tables.keep_for_reading`),
    so that the traceback does not read it again; else nothing."""
    pair = _merge_and_traceback(steps)
    if pair is None:
        return []
    try:
        m, t = (_parsed_quietly(step) for step in pair)
    except (Exception, SystemExit):  # noqa: BLE001
        return []
    return [m.out] if os.path.realpath(m.out) == os.path.realpath(t.hits) else []


def _start_early(merge: list[str], later: list[list[str]], name: str, what: str, start) -> None:
    """The first ``name`` step after this merge, if it reads the merge's hits table:
    ``start(its parsed options)`` now, so that ``what`` is made beside the steps in
    between (the traceback).  Best effort: if it cannot start, that step makes it."""
    steps = [s for s in later if s[0] == name]
    if not steps:
        return
    try:
        m = _parsed_quietly(merge)  # (argparse's errors: the steps print their own)
        args = _parsed_quietly(steps[0])
        if os.path.realpath(m.out) == os.path.realpath(args.hits):
            start(args)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the later step makes it
        from ..logs import get_logger

        get_logger(__name__).debug(f"{what} not started early: {exc}")


def _changes_early(merge: list[str], later: list[list[str]]) -> None:
    """The release step's ``changes.tsv``, see
    :func:`swgpu_tools.steps.history.start_changes_early`."""

    def start(r):
        from ..steps.history import start_changes_early

        start_changes_early(
            r.hits, r.database_info, r.history, r.changes, queries_path=r.queries, release=r.release
        )

    _start_early(merge, later, "release", "changes", start)


def _plots_early(merge: list[str], later: list[list[str]]) -> None:
    """The plots step's pictures that need only the hits table, see
    :func:`swgpu_tools.report.make.start_early`."""

    names = [s[0] for s in later]
    aligns = "plots" in names and "traceback" in names[: names.index("plots")]

    def start(p):
        from ..engine import traceback
        from ..report.make import alignments_done, start_early
        from ..steps.history import early_changes_file

        changes = early_changes_file(p.changes) if p.changes else None
        # the drawing starts once the alignments are made: its processes would take CPUs
        # from the alignments' threads (SWGPU_EARLY_GATE=0: at once, for measuring)
        gate = aligns and os.environ.get("SWGPU_EARLY_GATE", "1") != "0"
        start_early(
            p.hits, p.step_stats, p.out_dir, queries_path=p.queries, changes_path=changes,
            gate=gate,
        )  # fmt: skip
        if gate and alignments_done not in traceback.after_align:
            traceback.after_align.append(alignments_done)

    _start_early(merge, later, "plots", "pictures", start)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "run-steps":
        return run_steps(list(argv[1:]))
    parser, commands = parsers()
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


#: Commands that the workflow runs (files in, files out), ended by :func:`entry` at once.
_WORKFLOW_COMMANDS = frozenset(name for name, _ in STEPS) | {"run-steps"}


def _profiled(argv: list[str]) -> int:
    """:func:`main` under cProfile; the statistics go to ``$SWGPU_PROFILE/<command>-<pid>.prof``
    (read them with ``python -m pstats``), for finding where a workflow step's time goes."""
    import cProfile

    folder = os.environ["SWGPU_PROFILE"]
    os.makedirs(folder, exist_ok=True)
    prof = cProfile.Profile()
    try:
        return prof.runcall(main, argv)
    finally:
        name = argv[0] if argv else "swgpu"
        prof.dump_stats(os.path.join(folder, f"{name}-{os.getpid()}.prof"))


def run_command(argv: list[str]) -> int:
    """``swgpu argv`` in this process (under cProfile with ``$SWGPU_PROFILE``): its status.
    What :func:`entry` runs, and what a child of the warm-start process runs
    (:mod:`swgpu_tools.warm`).  The warm process itself is not profiled: its
    children, forked while it runs, would inherit the profiler, and Python 3.12
    refuses a second one in a process."""
    profile = os.environ.get("SWGPU_PROFILE") and argv[:1] != ["warm-serve"]
    return _profiled(argv) if profile else main(argv)


def entry() -> None:
    """The ``swgpu`` command run in this process (:mod:`swgpu_tools.console` hands a
    workflow job's command to the warm-start process first, where there is one):
    :func:`main`, then exit with its status.

    After a workflow step (or ``run-steps``) the process ends at once
    (``os._exit``, after flushing the standard streams and the logs), without
    the interpreter's teardown: with the compiled alignment kernels loaded,
    that teardown took 0.3-0.4 s of every traceback job, 7% of a small re-scan.
    Every output is complete and closed by then (written to a temporary file
    and renamed).  Other commands exit normally.  With ``$SWGPU_PROFILE`` set to
    a folder, the command runs under cProfile and leaves its statistics there.
    """
    import logging

    argv = sys.argv[1:]
    status = run_command(argv)
    if argv and argv[0] in _WORKFLOW_COMMANDS:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(status)
    sys.exit(status)
