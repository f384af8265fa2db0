"""Steps ``history`` and ``changes``: every scanned database release kept, and
what changed between releases.

``results/history/<release>/`` holds a release's ``hits.tsv``,
``alignments.tsv``, ``alignments.reuse.tsv`` (what the next traceback reuses
alignments from) and ``manifest.json`` (release name,
database content digest and size, scan time, the configuration, swgpu's
version).  ``<release>`` is the ``release`` given in the configuration (e.g.
``2026_05``), else ``db-`` and the first 12 hex digits of the database's
content digest (``database.json``), so re-running one release under other
filters replaces its entry and never counts as a new release.

A release folder is written under a temporary name and renamed into place
(the old one moved aside first and removed after), so it is complete or
absent.  ``changes.tsv`` compares the current release with the *previous
release* (the newest other release scanned before it), never with an earlier
run of the same release; :func:`compare_releases` compares any two.  Old
releases are removed with :func:`prune` (``swgpu changes --prune N``) or by
deleting their folders.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from ..errors import InputError, OutputError
from ..forked import run_child
from ..io.atomic import atomic_write, write_json
from ..logs import get_logger
from .changes import CHANGES_COLUMNS

log = get_logger(__name__)

MANIFEST = "manifest.json"
FILES = {"hits": "hits.tsv", "alignments": "alignments.tsv", "internal": "alignments.reuse.tsv"}


def release_name(info: dict, release: str | None = None) -> str:
    """The name a release is kept under (see the module doc)."""
    if release:
        name = str(release).strip()
        if not name or "/" in name or name.startswith("."):
            raise InputError(f"release: '{release}' cannot name a folder")
        return name
    # content_blake2b: the shard steps before 2026-11-25 (the same release then gets
    # another name once, after an upgrade)
    digest = info.get("content_sha256") or info.get("content_blake2b")
    if not digest:
        raise InputError("database.json has no content digest: re-run the shard step")
    return f"db-{digest[:12]}"


def _copy(src, dst) -> str:
    """Copy ``src`` to ``dst``; returns the copy's digest (as the manifests'), taken
    from the bytes written, so the copy is not read again."""
    from ..io.outputset import new_digest

    h = new_digest()
    with open(src, "rb") as fin, atomic_write(dst, "wb") as fout:
        for chunk in iter(lambda: fin.read(1 << 20), b""):
            h.update(chunk)
            fout.write(chunk)
    return h.hexdigest()


def record_release(
    hits_path,
    alignments_path,
    internal_path,
    database_info_path,
    history_dir,
    marker_path,
    release: str | None = None,
    config: dict | None = None,
) -> dict:
    """Keep this scan under ``history_dir/<release>/``; write ``marker_path`` (which
    release is current) last."""
    from ..io.shardfile import read_database_info

    info = read_database_info(database_info_path)
    name = release_name(info, release)
    os.makedirs(history_dir, exist_ok=True)
    final = os.path.join(history_dir, name)
    tmp = os.path.join(history_dir, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    os.makedirs(tmp)
    try:
        copies = [(hits_path, "hits"), (alignments_path, "alignments"), (internal_path, "internal")]
        # on threads: the reads, writes and hashes leave the GIL
        with ThreadPoolExecutor(max_workers=len(copies)) as pool:
            done = pool.map(lambda c: _copy(c[0], os.path.join(tmp, FILES[c[1]])), copies)
            digests = {FILES[key]: d for (_, key), d in zip(copies, done)}
        stamps = {f: os.stat(os.path.join(tmp, f)) for f in FILES.values()}
        manifest = {
            "files": digests,
            "release": name,
            "scanned": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "scanned_unix": time.time(),
            "database": {
                **{
                    k: info[k]
                    for k in ("content_sha256", "content_blake2b")
                    if info.get(k) is not None
                },
                "sequences": info["sequences"],
                "residues": info["residues"],
                "path": info.get("path"),
            },
            "config": config or {},
        }
        from .. import __version__

        manifest["swgpu"] = __version__
        write_json(os.path.join(tmp, MANIFEST), manifest)
        old = None
        if os.path.exists(final):
            old = os.path.join(history_dir, f".{name}.{uuid.uuid4().hex[:8]}.old")
            os.replace(final, old)
        os.replace(tmp, final)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _note_kept(history_dir, name, stamps)
    write_json(marker_path, {"release": name, "path": final})
    log.info(f"kept release {name} in {final}")
    return manifest


def _note_kept(history_dir, name: str, stamps: dict) -> None:
    """Note the files just kept as whole, so that the next start-up check does not
    digest them (:func:`swgpu_tools.health.check_history`)."""
    from ..io.outputset import NOTES
    from ..io.shardfile import add_verified, note_stamp

    try:
        add_verified(
            history_dir, {f"{name}/{f}": note_stamp(st) for f, st in stamps.items()}, NOTES
        )
    except (OSError, OutputError):
        pass  # best effort: costs one digest at the next start


def releases(history_dir) -> list[dict]:
    """The kept releases' manifests, oldest scan first."""
    out = []
    if not os.path.isdir(history_dir):
        return out
    for name in os.listdir(history_dir):
        if name.startswith(".") or not os.path.isdir(os.path.join(history_dir, name)):
            continue
        path = os.path.join(history_dir, name, MANIFEST)
        try:
            with open(path) as fh:
                m = json.load(fh)
        except (OSError, ValueError):
            log.warning(
                f"{os.path.join(history_dir, name)}: no readable {MANIFEST}; not a kept "
                f"release (remove it, or re-run that release)"
            )
            continue
        if all(os.path.exists(os.path.join(history_dir, name, f)) for f in FILES.values()):
            m["_dir"] = os.path.join(history_dir, name)
            out.append(m)
        else:
            log.warning(f"{os.path.join(history_dir, name)}: files missing; ignored")
    return sorted(out, key=lambda m: (m.get("scanned_unix", 0), m["release"]))


def find_release(history_dir, name: str) -> dict:
    for m in releases(history_dir):
        if m["release"] == name:
            return m
    known = ", ".join(m["release"] for m in releases(history_dir)) or "none"
    raise InputError(f"{history_dir}: no kept release '{name}' (kept: {known})")


def previous_release(history_dir, current: str, kept_at: float | None = None) -> dict | None:
    """The newest kept release other than ``current`` scanned before it; ``kept_at``:
    as if ``current`` were kept at that time (a release not kept yet)."""
    kept = releases(history_dir)
    if kept_at is None:
        cur = next((m for m in kept if m["release"] == current), None)
        kept_at = None if cur is None else cur.get("scanned_unix", 0)
    before = [
        m
        for m in kept
        if m["release"] != current and (kept_at is None or m.get("scanned_unix", 0) <= kept_at)
    ]
    return before[-1] if before else None


def newest_internal(history_dir) -> str | None:
    """The full alignment table of the newest kept release (for reuse), or None."""
    kept = releases(history_dir)
    return os.path.join(kept[-1]["_dir"], FILES["internal"]) if kept else None


def _hits(path):
    from ..io.tables import read_table

    return read_table(path, text=True)  # every column as written


def write_changes(hits_path, marker_path, history_dir, out_path, queries_path=None):
    """``changes.tsv``: the current release (``marker_path``) against the previous release.

    Where :func:`start_changes_early` computed them for this release against the
    same previous release, its file is taken instead (returns None then)."""
    with open(marker_path) as fh:
        current = json.load(fh)["release"]
    prev = previous_release(history_dir, current)
    if take_changes_early(out_path, current, prev):
        log.info(
            f"changes of release {current} computed beside the traceback: {os.fspath(out_path)}"
        )
        return None
    return _write_changes_against(hits_path, current, prev, out_path, queries_path)


def _write_changes_against(
    hits_path, current: str, prev: dict | None, out_path, queries_path, shown=None
):
    """Write the changes of release ``current`` against ``prev`` to ``out_path`` (the
    log names ``shown``, default ``out_path``)."""
    shown = os.fspath(out_path if shown is None else shown)
    if prev is None:  # the first release: every hit is new, in the order of hits.tsv
        n = _all_new(hits_path, out_path)
        log.info(f"release {current}: no previous release, {n:,} new hits -> {shown}")
        return None
    from ..io.fasta import read_fasta
    from ..io.tables import write_table
    from .changes import compare

    order = list(read_fasta(queries_path).ids) if queries_path else None
    table = compare(
        _hits(os.path.join(prev["_dir"], FILES["hits"])) if prev else None, _hits(hits_path), order
    )
    write_table(table, out_path, CHANGES_COLUMNS)
    counts = table["change"].value_counts().to_dict()
    against = f"release {prev['release']}" if prev else "no previous release (every hit is new)"
    log.info(
        f"release {current} against {against}: {counts.get('new', 0):,} new, "
        f"{counts.get('gone', 0):,} gone, {counts.get('score', 0):,} changed score "
        f"-> {shown}"
    )
    return table


#: changes.tsv being computed beside the traceback by :func:`start_changes_early`:
#: its real path -> (process, temporary file, release, previous release or None)
_EARLY: dict[str, tuple[int, str, str, str | None]] = {}


def start_changes_early(
    hits_path, database_info_path, history_dir, out_path, queries_path=None, release=None
) -> None:
    """Fork a process that writes ``changes.tsv`` of this scan's release now, into a
    temporary file beside ``out_path``, while this one goes on (``swgpu run-steps``
    calls this after the merge: the changes need only the hits, and are made beside
    the traceback).  The previous release is the one :func:`previous_release` will
    name once this release is kept, the newest kept release of another name.  The
    release step's :func:`write_changes` takes the file if that still holds, and
    otherwise writes the changes itself."""
    from ..io.shardfile import read_database_info

    current = release_name(read_database_info(database_info_path), release)
    prev = previous_release(history_dir, current, kept_at=time.time())
    out = os.fspath(out_path)
    folder, base = os.path.split(out)
    for name in os.listdir(folder or "."):  # what a killed run's early process left
        if name.startswith((f"{base}.early.", f".{base}.early.")):
            _unlink(os.path.join(folder, name))
    parent = os.getpid()
    tmp = f"{out}.early.{parent}.tmp"
    pid = os.fork()
    if pid == 0:  # the child: its changes into tmp (the log names out)
        run_child(parent, _write_changes_against, hits_path, current, prev, tmp, queries_path, out)
    _EARLY[os.path.realpath(out)] = (pid, tmp, current, prev["release"] if prev else None)


def early_changes_file(out_path) -> str | None:
    """The file :func:`start_changes_early`'s process writes ``out_path``'s changes
    into (it exists once they are whole), or None when none was started."""
    item = _EARLY.get(os.path.realpath(os.fspath(out_path)))
    return item[1] if item else None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _discard(tmp: str) -> None:
    """Remove ``tmp`` and what an atomic write of it left (``.<name>.*``)."""
    folder, base = os.path.split(tmp)
    _unlink(tmp)
    for name in os.listdir(folder or "."):
        if name.startswith(f".{base}."):
            _unlink(os.path.join(folder, name))


def take_changes_early(out_path, current: str, prev: dict | None) -> bool:
    """Wait for :func:`start_changes_early`'s process for ``out_path``.  If it wrote
    the changes of release ``current`` against ``prev``, move its file into place:
    True.  Otherwise (none started, it failed, or the releases differ) remove what
    it wrote: False, and the caller writes the changes."""
    item = _EARLY.pop(os.path.realpath(os.fspath(out_path)), None)
    if item is None:
        return False
    pid, tmp, early_current, early_prev = item
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = -1
    same = early_current == current and early_prev == (prev["release"] if prev else None)
    if status == 0 and same and os.path.exists(tmp):
        os.replace(tmp, out_path)
        return True
    if status != 0:
        log.warning(f"the early changes process ended with status {status}; writing them here")
    _discard(tmp)
    return False


def cancel_changes_early() -> None:
    """Stop the processes :func:`start_changes_early` started (a later step failed)
    and remove what they wrote."""
    while _EARLY:
        _, (pid, tmp, _, _) = _EARLY.popitem()
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        _discard(tmp)


def _all_new(hits_path, out_path) -> int:
    """changes.tsv of a first release, straight from hits.tsv (no pandas: a step with
    nothing to compare costs almost nothing)."""
    with open(hits_path, encoding="utf-8", newline="") as fh:
        head = fh.readline().rstrip("\n").split("\t")
        col = {
            c: head.index(c)
            for c in ("qseqid", "sseqid", "qacc", "sacc", "score", "evalue", "slen")
        }
        lines = ["\t".join(CHANGES_COLUMNS)]
        for line in fh:
            f = line.rstrip("\n").split("\t")
            lines.append(
                "\t".join(
                    (
                        f[col["qseqid"]],
                        f[col["sseqid"]],
                        f[col["qacc"]],
                        f[col["sacc"]],
                        "new",
                        "NA",
                        f[col["score"]],
                        "NA",
                        f[col["evalue"]],
                        f[col["slen"]],
                    )
                )
            )
    with atomic_write(out_path) as out:
        out.write("\n".join(lines) + "\n")
    return len(lines) - 1


def compare_releases(history_dir, a: str, b: str):
    """The changes from kept release ``a`` to kept release ``b``."""
    from .changes import compare

    ma, mb = find_release(history_dir, a), find_release(history_dir, b)
    return compare(
        _hits(os.path.join(ma["_dir"], FILES["hits"])),
        _hits(os.path.join(mb["_dir"], FILES["hits"])),
    )


def prune(history_dir, keep: int) -> list[str]:
    """Remove all but the ``keep`` newest kept releases; returns the removed names."""
    if keep < 1:
        raise InputError(f"keep at least 1 release, got {keep}")
    kept = releases(history_dir)
    gone = kept[:-keep]
    for m in gone:
        shutil.rmtree(m["_dir"])
        log.info(f"removed release {m['release']} ({m['_dir']})")
    return [m["release"] for m in gone]
