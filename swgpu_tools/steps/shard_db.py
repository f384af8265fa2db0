"""Steps ``shard_db`` and ``check_shards``: the database as stable shard files.

:func:`shard_database` splits a FASTA database into ``n_shards`` shard files
(:mod:`swgpu_tools.io.shardfile`) and ``database.json`` (sequences, residues,
per-shard sizes and digests).  Shard files whose content did not change are
rewritten byte-identical, so Snakemake's checksums see no change.

:func:`check_shards` verifies shard files and moves corrupt ones aside so that
the next run of the workflow rebuilds them.
"""
from __future__ import annotations

import hashlib
import json
import os
import time

from ..errors import InputError
from ..io.atomic import atomic_write
from ..io.fasta import iter_unique_fasta
from ..io.shardfile import read_shard, shard_file_name, shard_of, write_shard
from ..io.stepstats import StepTimer
from ..logs import get_logger

log = get_logger(__name__)


def shard_database(database, out_dir, n_shards: int, stats_path=None) -> dict:
    """Split a FASTA database into ``n_shards`` shard files and ``out_dir/database.json``.

    Returns the summary written to ``database.json``.
    """
    if n_shards < 1:
        raise InputError(f"shards must be at least 1, got {n_shards}")
    timer = StepTimer("shard_db")
    os.makedirs(out_dir, exist_ok=True)
    ids: list[list[str]] = [[] for _ in range(n_shards)]
    seqs: list[list[bytes]] = [[] for _ in range(n_shards)]
    heads: list[list[str]] = [[] for _ in range(n_shards)]
    n_total = 0
    residues_total = 0
    content = hashlib.blake2b(digest_size=32)  # the records, whatever the compression
    with timer.phase("read"):
        for rec in iter_unique_fasta(database):
            content.update(rec.header.encode("utf-8") + b"\n" + rec.sequence + b"\n")
            k = shard_of(rec.id, n_shards)
            ids[k].append(rec.id)
            seqs[k].append(rec.sequence)
            heads[k].append(rec.header)
            n_total += 1
            residues_total += len(rec.sequence)
            if n_total % 100000 == 0:
                log.info(f"read {n_total:,} sequences ({residues_total:,} residues)")
    per_shard = []
    with timer.phase("write"):
        for k in range(n_shards):
            header = write_shard(os.path.join(out_dir, shard_file_name(k)), ids[k], seqs[k],
                                 heads[k])
            per_shard.append({"file": shard_file_name(k), "sequences": header["sequences"],
                              "residues": header["residues"], "blake2b": header["blake2b"]})
            ids[k] = seqs[k] = heads[k] = None  # free memory as we go
            log.debug(f"wrote shard {k + 1}/{n_shards}: {header['sequences']:,} sequences, "
                      f"{header['residues']:,} residues")
    summary = {"sequences": n_total, "residues": residues_total, "shards": per_shard,
               "content_blake2b": content.hexdigest()}
    with atomic_write(os.path.join(out_dir, "database.json")) as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
        fh.write("\n")
    _record_verified(out_dir, [p["file"] for p in per_shard])
    timer.fields.update(sequences=n_total, residues=residues_total, shards=n_shards)
    rec = timer.write(stats_path)
    log.info(f"{n_total:,} sequences, {residues_total:,} residues in {n_shards} shards, "
             f"{rec['wall_s']:.1f} s")
    return summary


def _record_verified(out_dir, names) -> None:
    """Note size and modification time of the shards just written (whole by
    construction), so the start-of-run check need not read them again."""
    path = os.path.join(out_dir, "verified.json")
    try:
        with open(path) as fh:
            verified = json.load(fh)
    except (OSError, ValueError):
        verified = {}
    for name in names:
        st = os.stat(os.path.join(out_dir, name))
        verified[name] = [st.st_size, st.st_mtime_ns]
    with atomic_write(path) as fh:
        json.dump(verified, fh, sort_keys=True)


def check_shards(shard_paths, quarantine_dir=None) -> list[str]:
    """Verify shard files (magic, sizes, blake2b); move corrupt ones aside.

    Returns the corrupt paths.  With ``quarantine_dir``, each corrupt or
    truncated shard is moved there (``<name>.<unix time>``) so that the
    workflow's ``shard_db`` checkpoint, whose output is then missing, rebuilds
    it on the next run; without, it is only reported.  Raises InputError naming
    every bad shard when there is one.
    """
    bad = []
    for path in shard_paths:
        try:
            read_shard(path, headers=False)
        except InputError as exc:
            bad.append(os.fspath(path))
            log.error(f"CORRUPT {exc}")
            if quarantine_dir is not None and os.path.exists(path):
                os.makedirs(quarantine_dir, exist_ok=True)
                dest = os.path.join(quarantine_dir,
                                    f"{os.path.basename(os.fspath(path))}.{int(time.time())}")
                os.replace(path, dest)
                log.warning(f"moved {os.fspath(path)} to {dest}; the next workflow run rebuilds "
                            f"it (snakemake reruns shard_db because the shard is missing)")
        else:
            log.info(f"ok {os.fspath(path)}")
    if bad:
        raise InputError(f"{len(bad)} corrupt or truncated shard file(s): {', '.join(bad)}"
                         + ("; moved aside, run the workflow again to rebuild them"
                            if quarantine_dir is not None else "; re-run the shard step"))
    return bad
