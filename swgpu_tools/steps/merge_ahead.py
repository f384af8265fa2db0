"""The merge made ahead by the only scoring job of a database.

A scoring job whose shards are all the database's (a re-scan on one GPU, the
usual case) holds, when it writes its hit table, everything the merge step of
rule ``finish`` reads: that table, the queries, ``database.json``.  So it also
makes the merge's ``hits.tsv`` then (:func:`make_ahead`: the same function on
the same rows, on a thread beside the job's state files), into
``results/internal/hits-ahead.tsv`` with a key (``hits-ahead.json``): the
merge's inputs as they were (each file's path, size, time and inode) and its
options.  The merge step takes that file instead of merging again
(:func:`adopt`) only where the key equals its own inputs and options, else it
merges as always; so the tables are the same bytes either way.

The job does not know the merge's E-value filters (``max_evalue``, ``dbsize``):
they are no options of the scoring rule, so that changing them runs only rule
``finish``.  The Snakefile notes them when it is parsed
(:func:`note_filters`, ``results/internal/merge-filters.json``); a job that
finds no note merges nothing ahead.  ``SWGPU_MERGE_AHEAD=0`` turns it off (for
measuring: the same tables).
"""

from __future__ import annotations

import json
import os
import time

from .. import __version__
from ..errors import OutputError
from ..io.atomic import write_json
from ..logs import get_logger

log = get_logger(__name__)

FILTERS = "merge-filters.json"
AHEAD = "hits-ahead.tsv"
KEY = "hits-ahead.json"


def _internal(hits_path) -> str:
    """``results/internal`` of a scoring job's table ``results/hits/shard-....npz``."""
    results = os.path.dirname(os.path.dirname(os.path.abspath(os.fspath(hits_path))))
    return os.path.join(results, "internal")


def enabled() -> bool:
    return os.environ.get("SWGPU_MERGE_AHEAD", "1") != "0"


def note_filters(results: str, max_evalue, dbsize) -> None:
    """Note the merge's E-value filters for the scoring jobs (written only when they
    changed; best effort: without the note no merge is made ahead)."""
    path = os.path.join(results, "internal", FILTERS)
    want = {"max_evalue": max_evalue, "dbsize": dbsize}
    try:
        with open(path, encoding="utf-8") as fh:
            if json.load(fh) == want:
                return
    except (OSError, ValueError):
        pass
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json(path, want)
    except (OSError, OutputError):
        pass


def _stamp(path, times: bool = True) -> list:
    st = os.stat(path)
    return [os.path.realpath(os.fspath(path)), st.st_size, st.st_ino] + (
        [st.st_mtime_ns] if times else []
    )


def _key(hits_path, queries_path, info_path, scheme, top_k, max_evalue, residues) -> dict:
    """What the merge's table depends on.  The hit table without its times: Snakemake
    touches a job's outputs when the job ends (the job removes the key before it
    writes the table, :func:`discard`, so a key names only the table written with it)."""
    return {
        "swgpu": __version__,
        "hits": [_stamp(hits_path, times=False)],
        "queries": _stamp(queries_path),
        "database_info": _stamp(info_path),
        "scheme": scheme.digest,
        "top_k": int(top_k),
        "max_evalue": None if max_evalue is None else float(max_evalue),
        "db_residues": int(residues),
    }


def filters_for(hits_path) -> dict | None:
    """The noted filters of the run that writes ``hits_path``, or None."""
    if not enabled():
        return None
    try:
        with open(os.path.join(_internal(hits_path), FILTERS), encoding="utf-8") as fh:
            note = json.load(fh)
        return {"max_evalue": note["max_evalue"], "dbsize": note["dbsize"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def discard(hits_path) -> None:
    """Remove a merge made ahead for the table at ``hits_path`` (before the table is
    written again)."""
    for name in (KEY, AHEAD):
        try:
            os.unlink(os.path.join(_internal(hits_path), name))
        except OSError:
            pass


def make_ahead(
    hits_path, table, queries_path, queries, info_path, scheme, top_k, filters, threads
) -> None:
    """The merge of ``table`` (the job's hit table, just written at ``hits_path``) into
    ``results/internal/hits-ahead.tsv`` and its key.  Best effort: whatever fails
    leaves the merge step to merge as always."""
    from ..engine.merge import merge
    from ..io.shardfile import read_database_info
    from ..io.tables import HITS_COLUMNS, write_table

    folder = _internal(hits_path)
    try:
        t = time.perf_counter()
        residues = int(filters["dbsize"] or read_database_info(info_path)["residues"])
        max_evalue = filters["max_evalue"]
        key = _key(hits_path, queries_path, info_path, scheme, top_k, max_evalue, residues)
        hits = merge([table], queries, residues, scheme, top_k, max_evalue, threads=threads)
        os.makedirs(folder, exist_ok=True)
        write_table(hits, os.path.join(folder, AHEAD), HITS_COLUMNS)
        key["merged"] = {
            "shard_hits": len(table),
            "hits": len(hits),
            "seconds": round(time.perf_counter() - t, 4),
        }
        write_json(os.path.join(folder, KEY), key)
    except Exception as exc:  # noqa: BLE001 - the merge step merges as always
        log.debug(f"no merge made ahead: {exc}")
        discard(hits_path)


def adopt(hit_paths, queries_path, info_path, out_path, scheme, top_k, max_evalue, residues):
    """Where a merge made ahead has the key of these inputs and options: move its table
    to ``out_path`` and return what it recorded (``shard_hits``, ``hits``,
    ``seconds``); else None (and nothing changed)."""
    if not enabled() or len(hit_paths) != 1:
        return None
    folder = _internal(hit_paths[0])
    try:
        with open(os.path.join(folder, KEY), encoding="utf-8") as fh:
            made = json.load(fh)
        merged = made.pop("merged")
        want = _key(hit_paths[0], queries_path, info_path, scheme, top_k, max_evalue, residues)
        if made != json.loads(json.dumps(want)):  # made for other inputs: never taken
            discard(hit_paths[0])
            return None
        os.replace(os.path.join(folder, AHEAD), out_path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    try:
        os.unlink(os.path.join(folder, KEY))
    except OSError:
        pass
    return merged
