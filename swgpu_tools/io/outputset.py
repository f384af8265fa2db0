"""Output folders written as a set: a lock per folder, files renamed together,
and a manifest written last.

``swgpu search --out-dir DIR`` writes several files (hits.tsv, alignments.tsv,
...).  :class:`OutputSet`:

* takes an exclusive lock on ``DIR/.swgpu.lock`` (:mod:`filelock`) for the
  whole run, so a second run into the same folder waits for the first
  (saying so) or, with ``wait=False``, stops with a message;
* writes every file under a temporary name (:meth:`OutputSet.path`), and on
  :meth:`OutputSet.commit` removes the old manifest, renames the files into
  place, then writes ``DIR/swgpu-run.json`` (run id, time, files with sizes and
  blake2b digests) last.  A reader who checks the manifest
  (:func:`read_manifest`) never takes files of two runs for one set: while the
  renames happen there is no manifest, and afterwards it names exactly the
  files of this run.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid

from ..errors import InputError, OutputError
from ..logs import get_logger
from .atomic import describe_os_error, write_json

log = get_logger(__name__)

MANIFEST = "swgpu-run.json"
LOCK = ".swgpu.lock"
#: Notes of files that a manifest lists, found whole since (``{name: [size,
#: mtime_ns]}``, as the shards' :data:`swgpu_tools.io.shardfile.VERIFIED_FILE`):
#: the workflow's ``results/`` and ``results/history/`` (:mod:`swgpu_tools.health`).
NOTES = ".verified.json"


def new_digest():
    """The manifests' digest (blake2b, 16 bytes), to be fed."""
    return hashlib.blake2b(digest_size=16)


def _digest(path: str) -> str:
    h = new_digest()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class OutputSet:
    """Files of one run in one folder, made visible together (see the module doc)."""

    def __init__(self, directory, wait: bool = True, timeout: float = -1):
        self.dir = os.fspath(directory)
        if os.path.exists(self.dir) and not os.path.isdir(self.dir):
            raise InputError(f"{self.dir}: output folder is an existing file")
        self.wait = wait
        self.timeout = timeout
        self.run_id = uuid.uuid4().hex[:12]
        self._staged: dict[str, str] = {}
        self._lock = None

    def __enter__(self) -> OutputSet:
        from filelock import FileLock, Timeout

        try:
            os.makedirs(self.dir, exist_ok=True)
        except OSError as exc:
            raise OutputError(
                f"{self.dir}: cannot create the output folder: {describe_os_error(exc)}"
            ) from None
        self._lock = FileLock(os.path.join(self.dir, LOCK))
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            if not self.wait:
                raise InputError(
                    f"{self.dir}: another swgpu run is writing into this folder "
                    f"(lock {LOCK}); wait for it or choose another folder"
                ) from None
            log.warning(
                f"{self.dir}: another swgpu run is writing into this folder; waiting "
                f"for it to finish"
            )
            try:
                self._lock.acquire(timeout=self.timeout)
            except Timeout:
                raise InputError(
                    f"{self.dir}: still locked by another swgpu run after {self.timeout:.0f} s"
                ) from None
        except OSError as exc:
            raise OutputError(
                f"{os.path.join(self.dir, LOCK)}: cannot lock: {describe_os_error(exc)}"
            ) from None
        return self

    def path(self, name: str) -> str:
        """A temporary path to write ``name`` to; it becomes ``DIR/name`` on commit."""
        tmp = os.path.join(self.dir, f".{name}.{self.run_id}.part")
        self._staged[name] = tmp
        return tmp

    def commit(self) -> dict:
        """Rename the staged files into place and write the manifest last."""
        manifest_path = os.path.join(self.dir, MANIFEST)
        files = {}
        for name, tmp in self._staged.items():
            if not os.path.exists(tmp):
                raise OutputError(f"{tmp}: staged output missing")
            files[name] = {"bytes": os.path.getsize(tmp), "blake2b": _digest(tmp)}
        try:
            if os.path.exists(manifest_path):
                os.unlink(manifest_path)
            for name, tmp in self._staged.items():
                os.replace(tmp, os.path.join(self.dir, name))
        except OSError as exc:
            raise OutputError(
                f"{self.dir}: cannot move the outputs into place: {describe_os_error(exc)}"
            ) from None
        manifest = {
            "run": self.run_id,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "files": files,
        }
        write_json(manifest_path, manifest)
        self._staged.clear()
        return manifest

    def __exit__(self, exc_type, exc, tb) -> None:
        for tmp in self._staged.values():  # not committed: leave nothing half written
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if self._lock is not None:
            self._lock.release()


def write_manifest(path, files) -> dict:
    """Write a manifest at ``path`` for ``files`` (paths; named relative to the
    manifest's folder), as :meth:`OutputSet.commit` does: after the files."""
    d = os.path.dirname(os.path.abspath(os.fspath(path)))
    entries = {}
    for f in files:
        rel = os.path.relpath(os.path.abspath(os.fspath(f)), d)
        st = os.stat(f)
        entries[rel] = {
            "bytes": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            # which file it is, whatever touches it later (swgpu_tools.health.note_outputs)
            "ino": st.st_ino,
            "blake2b": _digest(os.fspath(f)),
        }
    manifest = {
        "run": uuid.uuid4().hex[:12],
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": entries,
    }
    write_json(path, manifest)
    return manifest


def read_manifest(directory) -> dict:
    """The manifest of a complete output set, checked against the files' digests.

    InputError when there is none (a run in progress or killed) or a file does
    not match it (files of two runs).
    """
    d = os.fspath(directory)
    path = os.path.join(d, MANIFEST)
    try:
        with open(path) as fh:
            manifest = json.load(fh)
    except FileNotFoundError:
        raise InputError(
            f"{d}: no {MANIFEST}: not a complete swgpu output folder (a run is "
            f"writing into it, or one was interrupted)"
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable ({exc})") from None
    for name, info in manifest.get("files", {}).items():
        p = os.path.join(d, name)
        if not os.path.exists(p) or _digest(p) != info.get("blake2b"):
            raise InputError(f"{p}: does not match {MANIFEST} (files of different runs)")
    return manifest
