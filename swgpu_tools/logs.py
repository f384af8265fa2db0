"""Logging and progress bars.

Every module logs through the standard :mod:`logging` module, under the
``swgpu`` logger (``logging.getLogger(__name__)`` inside the package).  The
``swgpu`` command calls :func:`configure` once: ``-v`` shows DEBUG, ``-q``
only warnings and errors; messages go to standard error as
``[swgpu 12:34:56] message`` (``WARNING:``/``ERROR:`` prefixed), which is what
the workflow's log files hold.  Library users get no output unless they
configure logging themselves.

:func:`progress` wraps long loops in a tqdm bar when a person watches (standard
error is a terminal) and logs a line every few seconds otherwise (a log file,
a cluster job), so logs stay readable.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

ROOT = "swgpu"

T = TypeVar("T")


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        level = "" if record.levelno == logging.INFO else f"{record.levelname}: "
        if record.levelno == logging.DEBUG:
            level = "debug: "
        text = f"[swgpu {stamp}] {level}{record.getMessage()}"
        if record.exc_info and record.levelno >= logging.ERROR:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure(verbosity: int = 0, stream=None) -> logging.Logger:
    """Send the ``swgpu`` logger to ``stream`` (standard error): INFO by default,
    DEBUG with ``verbosity > 0``, WARNING with ``verbosity < 0``."""
    logger = logging.getLogger(ROOT)
    for handler in list(logger.handlers):
        if getattr(handler, "_swgpu", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._swgpu = True  # type: ignore[attr-defined]
    handler.setFormatter(_Formatter())
    logger.addHandler(handler)
    logger.setLevel(
        logging.DEBUG if verbosity > 0 else logging.WARNING if verbosity < 0 else logging.INFO
    )
    logger.propagate = False
    return logger


def get_logger(name: str = ROOT) -> logging.Logger:
    """The logger of a module (``get_logger(__name__)``) under ``swgpu``."""
    if name.startswith("swgpu_tools"):
        name = ROOT + name[len("swgpu_tools") :]
    return logging.getLogger(name)


def _interactive() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def progress(
    items: Iterable[T],
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    logger: logging.Logger | None = None,
    every_s: float = 10.0,
) -> Iterator[T]:
    """Iterate ``items`` showing progress: a tqdm bar on a terminal, else a log
    line at most every ``every_s`` seconds (and at the end)."""
    logger = logger or get_logger()
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    if _interactive() and logger.isEnabledFor(logging.INFO):
        try:
            from tqdm import tqdm
        except ImportError:  # pragma: no cover - tqdm is a dependency
            pass
        else:
            yield from tqdm(
                items,
                total=total,
                desc=desc,
                unit=unit,
                leave=False,
                file=sys.stderr,
                dynamic_ncols=True,
            )
            return
    start = last = time.monotonic()
    done = 0
    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            of = f"/{total:,}" if total else ""
            logger.info(f"{desc}: {done:,}{of} {unit} ({now - start:.0f} s)")


class ProgressBar:
    """A progress display for work reported as counts: a tqdm bar when a person
    watches (standard error is a terminal), else nothing (the caller logs its
    own lines for log files).  ``update(done)`` takes the running total."""

    def __init__(
        self, total: int, desc: str, unit: str = "it", logger: logging.Logger | None = None
    ):
        self._bar = None
        logger = logger or get_logger()
        if _interactive() and logger.isEnabledFor(logging.INFO):
            try:
                from tqdm import tqdm

                self._bar = tqdm(
                    total=total,
                    desc=desc,
                    unit=unit,
                    leave=False,
                    file=sys.stderr,
                    dynamic_ncols=True,
                )
            except ImportError:  # pragma: no cover
                self._bar = None

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def update(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
