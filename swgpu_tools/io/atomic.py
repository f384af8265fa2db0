"""Atomic writes: a file appears complete or not at all.

:func:`atomic_write` is the one way this package writes a file: a hidden
temporary file in the target's directory, flushed and fsynced, given the
permissions a newly created file would have (or those of the file it
replaces), then ``os.replace``-d over the target; the directory is fsynced
after (best effort).  An exception in the ``with`` body removes the temporary
file and leaves the target untouched.

Write errors (a full disk, a read-only folder, a missing directory) become
:class:`~swgpu_tools.errors.OutputError` naming the file, never a bare
``OSError`` traceback.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from ..errors import OutputError

__all__ = ["atomic_write", "describe_os_error"]

# The process umask, read once, so that replaced files get ordinary permissions
# (mkstemp creates 0600 files).
_UMASK = os.umask(0)
os.umask(_UMASK)

#: ``SWGPU_FSYNC=0``: no fsync at all (the renames stay atomic).  For measuring what
#: the fsyncs cost (benchmarks/workflow_rescan.py); not for results that must
#: survive a machine's crash.
_FSYNC = os.environ.get("SWGPU_FSYNC", "1") != "0"


def describe_os_error(exc: OSError) -> str:
    """A short human reason for an OSError (disk full, permission denied, ...)."""
    if exc.errno == errno.ENOSPC:
        return "no space left on the device (disk full)"
    if exc.errno == errno.EDQUOT:
        return "disk quota exceeded"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno == errno.ENOENT:
        return "the folder does not exist"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a folder"
    if exc.errno == errno.EISDIR:
        return "is a directory"
    return exc.strerror or str(exc)


@contextmanager
def atomic_write(
    path, mode: str = "w", encoding: str = "utf-8", durable: bool = True
) -> Iterator[IO]:
    """Open ``path`` for writing (text ``"w"`` or binary ``"wb"``) so that it
    appears complete or not at all.

    ``durable=False`` skips the file's fsync (the rename stays atomic for every
    process: a killed job never leaves half a file).  Only for files whose
    content is checked against a digest before use after a machine crash (the
    shards: :mod:`swgpu_tools.io.shardfile`); the fsync of a 200 MB shard took
    most of a second on a GPU host.

    >>> with atomic_write("out.tsv") as fh:        # doctest: +SKIP
    ...     fh.write("a\\tb\\n")

    Text mode translates no line ends: write ``\\n``.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    base = os.path.basename(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {describe_os_error(exc)}") from None
    try:
        if mode == "w":
            fh = os.fdopen(fd, "w", encoding=encoding, newline="")
        else:
            fh = os.fdopen(fd, "wb")
        with fh:
            yield fh
            fh.flush()
            if durable and _FSYNC:
                os.fsync(fh.fileno())
        try:
            fmode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            fmode = 0o666 & ~_UMASK
        os.chmod(tmp, fmode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise OutputError(f"{path}: cannot write: {describe_os_error(exc)}") from None
        raise
    _fsync_directory(directory)


def write_json(path, obj) -> None:
    """Write ``obj`` as JSON (one key per line, keys sorted, a final newline) with
    :func:`atomic_write`: manifests, receipts, release markers."""
    with atomic_write(path) as fh:
        json.dump(obj, fh, indent=1, sort_keys=True)
        fh.write("\n")


def _fsync_directory(directory: str) -> None:
    if not _FSYNC:
        return
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
