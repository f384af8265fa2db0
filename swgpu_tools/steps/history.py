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
releases are removed with :func:`prune` (``swgpu history --prune N``) or by
deleting their folders.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid

from ..errors import InputError
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
    digest = info.get("content_blake2b")
    if not digest:
        raise InputError("database.json has no content digest: re-run the shard step")
    return f"db-{digest[:12]}"


def _copy(src, dst) -> None:
    with open(src, "rb") as fin, atomic_write(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


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
        for key, src in (
            ("hits", hits_path),
            ("alignments", alignments_path),
            ("internal", internal_path),
        ):
            _copy(src, os.path.join(tmp, FILES[key]))
        from ..io.outputset import _digest

        manifest = {
            "files": {f: _digest(os.path.join(tmp, f)) for f in FILES.values()},
            "release": name,
            "scanned": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "scanned_unix": time.time(),
            "database": {
                "content_blake2b": info.get("content_blake2b"),
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
    write_json(marker_path, {"release": name, "path": final})
    log.info(f"kept release {name} in {final}")
    return manifest


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


def previous_release(history_dir, current: str) -> dict | None:
    """The newest kept release other than ``current`` scanned before it."""
    kept = releases(history_dir)
    cur = next((m for m in kept if m["release"] == current), None)
    before = [
        m
        for m in kept
        if m["release"] != current
        and (cur is None or m.get("scanned_unix", 0) <= cur.get("scanned_unix", 0))
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
    """``changes.tsv``: the current release (``marker_path``) against the previous release."""
    with open(marker_path) as fh:
        current = json.load(fh)["release"]
    prev = previous_release(history_dir, current)
    if prev is None:  # the first release: every hit is new, in the order of hits.tsv
        n = _all_new(hits_path, out_path)
        log.info(f"release {current}: no previous release, {n:,} new hits -> {os.fspath(out_path)}")
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
        f"-> {os.fspath(out_path)}"
    )
    return table


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
