"""Self-healing results: damaged outputs found when the workflow starts, and
put right by the same command.

:func:`check_results` runs when the workflow is parsed (main process, not in a
dry run).  It looks at what earlier runs left in ``results/`` and removes
whatever is damaged, so that Snakemake sees those outputs missing and makes
them again:

* a shard file that is missing, truncated or fails its digest: moved to
  ``results/shards/corrupt/``, with ``database.json`` (so the shard step runs)
  and the hit table of the scoring job that holds the shard (so it is scored
  again; its memory of the shard, ``results/state``, stays, so only what
  differs is scored);
* a receipt of the shard step missing (``source.json``, ``shard-NNNN.json``;
  a folder of an older version): ``database.json`` is removed, so the shard
  step and its receipts are made again;
* a scoring job's hits file that cannot be read: removed, with its statistics
  file (the hit table's receipt for rule finish); a statistics file whose hit
  table is missing: removed;
* after either, ``results/hits.tsv`` and the manifest too (Snakemake does not
  make a missing intermediate file again while what was made from it is
  there), so that the merge runs and pulls the shard step and the scoring in;
* the workflow's outputs listed in ``results/swgpu-run.json`` whose digest no
  longer matches: removed, with the manifest;
* a kept release (``results/history/<release>/``) whose files are missing or
  differ from its manifest: moved to ``results/history/.damaged/``; if it was
  the current release its marker goes too, so the history step keeps it again.

Files are checked in full only when their size or modification time differs
from when they were last found whole (notes of this machine's boot:
``results/shards/verified.json`` for shards and hit tables,
``results/.verified.json`` for the manifest's files, ``results/history/.verified.json``
for the kept releases'); a flipped bit that leaves both unchanged is caught when
the file is next read (shards carry a digest that every reader checks).  The
traceback step, which reads and checks the shards that hold hits, notes them too
(after Snakemake touched them), and the merge notes the hit tables it read
(:func:`note_hit_tables`).  The history step notes a release's files as it keeps
them, and Snakemake's ``onsuccess`` notes the manifest's files once it touched them
(:func:`note_outputs`), so the next run reads none of them here: at a re-scan's
start these checks digested the previous release's tables in full (0.1-0.6 s).
"""

from __future__ import annotations

import json
import os
import shutil
import time

from .errors import InputError, OutputError
from .io.outputset import MANIFEST, NOTES
from .logs import get_logger

log = get_logger(__name__)


def _move_aside(path: str, folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    dest = os.path.join(folder, f"{os.path.basename(path)}.{int(time.time() * 1000)}")
    os.replace(path, dest)
    return dest


def _save_notes(folder: str, notes: dict) -> None:
    from .io.shardfile import write_verified

    try:
        write_verified(folder, notes, NOTES)
    except (OSError, OutputError):
        pass  # best effort: a note that cannot be written only costs a digest


def _remove(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def note_hit_tables(stamps: dict) -> None:
    """Note scoring jobs' hit tables as whole (the merge read each in full): ``stamps``
    maps ``<results>/hits/shard-....npz`` to its ``os.stat`` taken before the read.
    The start-up check then need not read them again (:func:`check_shards`; it read
    every table a re-scan found, 0.2-0.6 s of its start on bench200M's 2,000
    queries).  Best effort: a note that cannot be written only costs that check."""
    from .io.shardfile import add_verified, note_stamp

    by_results: dict = {}
    for path, st in stamps.items():
        hits_dir = os.path.dirname(os.path.abspath(os.fspath(path)))
        if os.path.basename(hits_dir) != "hits":
            continue
        shards = os.path.join(os.path.dirname(hits_dir), "shards")
        key = f"hits/{os.path.basename(os.fspath(path))}"
        by_results.setdefault(shards, {})[key] = note_stamp(st)
    for shards, notes in by_results.items():
        if not os.path.isdir(shards):
            continue
        try:
            add_verified(shards, notes)
        except (OSError, OutputError):
            pass


def check_shards(results: str, n_shards: int) -> list[str]:
    """Shard files and the scoring jobs' hit tables (see the module doc); returns what was done."""
    from .io.hitsfile import read_shard_hits
    from .io.shardfile import (
        note_stamp,
        read_shard,
        read_verified,
        receipt_name,
        shard_file_name,
        write_verified,
    )
    from .shardjobs import job_shards

    done: list[str] = []
    shards = os.path.join(results, "shards")
    info_path = os.path.join(shards, "database.json")
    if not os.path.exists(info_path):
        return done
    verified = read_verified(shards)
    rebuild = False
    damaged: set[int] = set()
    for k in range(n_shards):
        name = f"shard-{k:04d}.swdb"
        path = os.path.join(shards, name)
        bad = None
        if not os.path.exists(path):
            bad = "missing"
        else:
            stamp = note_stamp(os.stat(path))
            if verified.get(name) != stamp:
                try:
                    read_shard(path, headers=False)
                    verified[name] = stamp
                except InputError as exc:
                    bad = str(exc)
        if bad:
            rebuild = True
            damaged.add(k)
            if bad != "missing":
                dest = _move_aside(path, os.path.join(shards, "corrupt"))
                done.append(f"shard {path} is damaged ({bad}); moved to {dest}")
            else:
                done.append(f"shard {path} is missing")
            verified.pop(name, None)
    # the receipts the rules take as inputs (workflow/rules/shard_db.smk): one missing
    # (a results folder of an older version, or a deleted file) leaves Snakemake's
    # shard checkpoint incomplete, and then it would not re-evaluate the scoring jobs
    for name in ["source.json"] + [receipt_name(shard_file_name(k)) for k in range(n_shards)]:
        if not os.path.exists(os.path.join(shards, name)):
            rebuild = True
            done.append(f"receipt {os.path.join(shards, name)} is missing")
    # hit tables, one per scoring job, named after its shards (swgpu_tools.shardjobs)
    hits_dir = os.path.join(results, "hits")
    stats_dir = os.path.join(results, "stats", "score_shard")
    names = sorted(os.listdir(hits_dir)) if os.path.isdir(hits_dir) else []
    jobs_seen: set[str] = set()
    for fname in names:
        if not (fname.startswith("shard-") and fname.endswith(".npz")):
            continue
        job = fname[len("shard-") : -len(".npz")]
        jobs_seen.add(job)
        try:
            covers = job_shards(job)
        except ValueError:
            continue
        hits = os.path.join(hits_dir, fname)
        key = f"hits/{fname}"
        if damaged.intersection(covers):
            verified.pop(key, None)
            for p in (hits, os.path.join(stats_dir, f"shard-{job}.json")):
                if _remove(p):
                    done.append(f"removed {p}, to score the rebuilt shard")
            continue
        stamp = note_stamp(os.stat(hits))
        if verified.get(key) == stamp:
            continue
        try:
            read_shard_hits(hits)
            verified[key] = stamp
        except InputError as exc:
            _remove(hits)
            _remove(os.path.join(stats_dir, f"shard-{job}.json"))  # its receipt
            verified.pop(key, None)
            done.append(f"removed {hits}, damaged ({exc}); its shards are scored again")
    # a scoring job's statistics file is the receipt of its hit table for rule
    # finish (workflow/rules/finish.smk): without the table it goes too
    for fname in sorted(os.listdir(stats_dir)) if os.path.isdir(stats_dir) else []:
        job = fname.removeprefix("shard-").removesuffix(".json")
        if fname.startswith("shard-") and fname.endswith(".json") and job not in jobs_seen:
            if _remove(os.path.join(stats_dir, fname)):
                done.append(
                    f"removed {os.path.join(stats_dir, fname)}: its hit table "
                    f"{os.path.join(hits_dir, f'shard-{job}.npz')} is missing; scored again"
                )
    if rebuild and _remove(info_path):
        done.append(f"removed {info_path}, so that the shard step rebuilds the shards")
    os.makedirs(shards, exist_ok=True)
    write_verified(shards, verified)
    return done


def check_outputs(results: str) -> list[str]:
    """The workflow's manifest against its files (see the module doc)."""
    from .io.outputset import _digest

    path = os.path.join(results, MANIFEST)
    try:
        with open(path) as fh:
            manifest = json.load(fh)
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        _remove(path)
        return [f"removed {path} (unreadable)"]
    from .io.shardfile import note_stamp, read_verified

    notes = read_verified(results, NOTES)
    done, noted = [], False
    for name, entry in manifest.get("files", {}).items():
        p = os.path.join(results, name)
        if not os.path.exists(p):
            continue
        stamp = note_stamp(os.stat(p))
        if stamp in ([entry.get("bytes"), entry.get("mtime_ns")], notes.get(name)):
            continue  # as written, or as found whole since
        if stamp[0] != entry.get("bytes") or _digest(p) != entry.get("blake2b"):
            _remove(p)
            notes.pop(name, None)
            done.append(f"removed {p}: it differs from {path} (damaged); it is made again")
        else:
            notes[name] = stamp
        noted = True
    if done:
        _remove(path)
    if noted:
        _save_notes(results, notes)
    return done


def note_outputs(results: str) -> None:
    """Note the manifest's files as found whole, as they are now: Snakemake's
    ``onsuccess``, after it touched the finished job's outputs (which changes their
    modification times, so the manifest's stamps no longer match and the next
    start would digest every table).  A file is noted only where it is the one the
    manifest describes (its size and inode) and was not set back in time.  Best
    effort, as the other notes."""
    from .io.shardfile import note_stamp, read_verified

    try:
        with open(os.path.join(results, MANIFEST)) as fh:
            files = json.load(fh).get("files", {})
    except (OSError, ValueError, AttributeError):
        return
    notes = read_verified(results, NOTES)
    for name, entry in files.items():
        try:
            st = os.stat(os.path.join(results, name))
        except OSError:
            continue
        if (
            st.st_size == entry.get("bytes")
            and st.st_ino == entry.get("ino")
            and st.st_mtime_ns >= entry.get("mtime_ns", st.st_mtime_ns + 1)
        ):
            notes[name] = note_stamp(st)
    _save_notes(results, notes)


def check_history(results: str) -> list[str]:
    """Kept releases against their manifests (see the module doc)."""
    from .io.outputset import _digest
    from .io.shardfile import note_stamp, read_verified
    from .steps.history import FILES
    from .steps.history import MANIFEST as RELEASE_MANIFEST

    history = os.path.join(results, "history")
    if not os.path.isdir(history):
        return []
    notes = read_verified(history, NOTES)
    noted = False
    done = []
    marker = os.path.join(history, "current.json")
    try:
        with open(marker) as fh:
            current = json.load(fh).get("release")
    except (OSError, ValueError):
        current = None
        if os.path.exists(marker):
            _remove(marker)
            done.append(f"removed {marker} (unreadable)")
    for name in sorted(os.listdir(history)):
        folder = os.path.join(history, name)
        if name.startswith(".") or not os.path.isdir(folder):
            continue
        problem = None
        try:
            with open(os.path.join(folder, RELEASE_MANIFEST)) as fh:
                m = json.load(fh)
        except (OSError, ValueError):
            problem = f"no readable {RELEASE_MANIFEST}"
            m = {}
        digests = m.get("files", {})
        for f in FILES.values():
            p = os.path.join(folder, f)
            if problem:
                break
            if not os.path.exists(p):
                problem = f"{f} is missing"
                continue
            stamp = note_stamp(os.stat(p))
            if f not in digests or notes.get(f"{name}/{f}") == stamp:
                continue  # found whole since it was last changed
            if _digest(p) != digests[f]:
                problem = f"{f} differs from its manifest"
            else:
                notes[f"{name}/{f}"] = stamp
                noted = True
        if problem:
            for f in FILES.values():
                noted = notes.pop(f"{name}/{f}", None) is not None or noted
            dest = os.path.join(history, ".damaged", f"{name}.{int(time.time() * 1000)}")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.move(folder, dest)
            done.append(f"kept release {folder} is damaged ({problem}); moved to {dest}")
            if name == current and _remove(marker):
                done.append(f"removed {marker}, so that this release is kept again")
    if noted:
        _save_notes(history, notes)
    return done


def check_results(results: str, n_shards: int) -> list[str]:
    """All of the above; returns one line per thing put right."""
    if not os.path.isdir(results):
        return []
    done = check_outputs(results)
    shards = check_shards(results, n_shards)
    if shards:
        # Snakemake does not make a missing intermediate file again while the
        # files made from it are there: the merged table and the manifest go
        # too, so that the merge (and through it the shard step and the
        # scoring of the damaged shard) runs; the tables come out the same
        for name in ("hits.tsv", "swgpu-run.json"):
            if _remove(os.path.join(results, name)):
                shards.append(
                    f"removed {os.path.join(results, name)}, so that the shards' "
                    f"hits are merged again"
                )
    return done + shards + check_history(results)
