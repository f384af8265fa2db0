"""Step statistics as data: one small JSON file per workflow step or command.

Each step writes what it measured (seconds per phase, GCUPS, backend, device,
sizes, peak memory) with :func:`write_step_stats`; the report and the
workflow read these files with :func:`read_step_stats`, never log text.

Format (JSON object, sorted keys)::

    {"step": "score_shard", "format": 1, "swgpu": "0.1.0",
     "started": "2026-11-23T03:40:00Z", "finished": "...", "wall_s": 1.23,
     "host": "node1", "peak_rss_bytes": 123456789, ... step fields ...}
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time

from ..errors import InputError, OutputError
from ..jobtimes import JOB_EPOCHS, process_age
from .atomic import atomic_write

FORMAT = 1


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _thread_usage() -> tuple[float, int]:
    """(CPU seconds, minor page faults) of the calling thread so far (Linux; the
    process's elsewhere)."""
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    u = resource.getrusage(who)
    return u.ru_utime + u.ru_stime, int(u.ru_minflt)


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far (bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


class StepTimer:
    """Collects a step's phases and fields; :meth:`write` saves them.

    >>> t = StepTimer("merge_hits")          # doctest: +SKIP
    >>> with t.phase("read"): ...             # doctest: +SKIP
    >>> t.fields["hits"] = 1234               # doctest: +SKIP
    >>> t.write("results/stats/merge_hits.json")  # doctest: +SKIP
    """

    def __init__(self, step: str):
        self.step = step
        self.start = time.time()
        self._t0 = time.perf_counter()
        # the process's start-up (imports) before the step; in a chain of steps
        # (swgpu run-steps), the time since the previous step ended
        self.process_age = (
            self.start - _PREVIOUS_STEP_END[0] if _PREVIOUS_STEP_END else process_age()
        )
        self.phases: dict[str, float] = {}
        # per phase, the calling thread's CPU seconds and minor page faults: a phase
        # whose CPU time is well below its wall time waited (the interpreter's lock,
        # another thread, I/O); one with many faults touched new or shared pages
        self.phase_cpu: dict[str, float] = {}
        self.phase_faults: dict[str, int] = {}
        self.fields: dict = {}

    def phase(self, name: str):
        timer = self

        class _Phase:
            def __enter__(self_inner):
                self_inner.u = _thread_usage()
                self_inner.t = time.perf_counter()
                return self_inner

            def __exit__(self_inner, *exc):
                timer.phases[name] = (
                    timer.phases.get(name, 0.0) + time.perf_counter() - self_inner.t
                )
                cpu, faults = _thread_usage()
                timer.phase_cpu[name] = timer.phase_cpu.get(name, 0.0) + cpu - self_inner.u[0]
                timer.phase_faults[name] = (
                    timer.phase_faults.get(name, 0) + faults - self_inner.u[1]
                )
                return False

        return _Phase()

    def record(self) -> dict:
        from .. import __version__

        now = time.time()
        out = {
            "step": self.step,
            "format": FORMAT,
            "swgpu": __version__,
            "started": _iso(self.start),
            "finished": _iso(now),
            "wall_s": round(time.perf_counter() - self._t0, 6),
            "phases_s": {k: round(v, 6) for k, v in self.phases.items()},
            "phases_thread_cpu_s": {k: round(v, 4) for k, v in self.phase_cpu.items()},
            "phases_minor_faults": dict(self.phase_faults),
            "before_step_s": None if self.process_age is None else round(self.process_age, 3),
            "start_epoch": round(self.start, 3),
            "host": socket.gethostname(),
            "peak_rss_bytes": peak_rss_bytes(),
        }
        job = os.environ.get(JOB_EPOCHS)  # a job run by the warm process
        if job:
            try:
                values = [float(x) for x in job.split(",")]
                out["job_epochs"] = dict(zip(("process", "asked", "taken"), values))
            except ValueError:
                pass
        out.update(self.fields)
        return out

    def write(self, path) -> dict:
        rec = self.record()
        if path:
            write_step_stats(path, rec)
        return rec


#: When the previous step of this process ended (``swgpu run-steps``), else empty.
_PREVIOUS_STEP_END: list[float] = []


def previous_step_ended() -> None:
    """Note that a step of this process ended: the next step's ``before_step_s``
    counts from now, not from the process's start."""
    _PREVIOUS_STEP_END[:] = [time.time()]


#: Marks of the Snakemake process's own start (its epoch seconds), in order.
_START_MARKS: dict[str, float] = {}


def mark_start(name: str) -> None:
    """Note the time of a point of the workflow's start in Snakemake's process
    (the Snakefile's parse began and ended, ``onstart`` began, the warm process
    started); :func:`write_start_marks` saves them."""
    _START_MARKS[name] = time.time()


def write_start_marks(path) -> None:
    """Save the marks as step statistics (``step`` "snakemake_start"): the process's
    start and each mark, as seconds since the process started, so that a run's time
    before its first job is attributed (Python and Snakemake's imports, the
    Snakefile's parse, the DAG, the warm start).  Best effort."""
    age = process_age()
    started = time.time() - age if age is not None else min(_START_MARKS.values(), default=0.0)
    record = {
        "step": "snakemake_start",
        "format": FORMAT,
        "process_start_epoch": round(started, 3),
        "marks_s": {k: round(v - started, 3) for k, v in _START_MARKS.items()},
    }
    try:
        write_step_stats(path, record, durable=False)
    except (OSError, OutputError):
        pass


def write_step_stats(path, record: dict, durable: bool = True) -> None:
    """Write one step's statistics (a JSON object) atomically."""
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    with atomic_write(path, durable=durable) as fh:
        json.dump(record, fh, indent=1, sort_keys=True, default=_jsonable)
        fh.write("\n")


def _jsonable(x):
    try:
        import numpy as np

        if isinstance(x, np.integer):
            return int(x)
        if isinstance(x, np.floating):
            return float(x)
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def read_step_stats(path) -> dict:
    """Read a file written by :func:`write_step_stats`; InputError if it is not one."""
    try:
        with open(path) as fh:
            rec = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{os.fspath(path)}: file not found") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{os.fspath(path)}: not a step statistics file ({exc})") from None
    if not isinstance(rec, dict) or "step" not in rec:
        raise InputError(f"{os.fspath(path)}: not a step statistics file (no 'step')")
    return rec
