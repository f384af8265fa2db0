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
import shutil
import tempfile
import time

import numpy as np

from ..errors import InputError
from ..io.atomic import atomic_write
from ..io.fasta import iter_unique_fasta
from ..io.shardfile import read_shard, shard_file_name, write_shard
from ..io.stepstats import StepTimer
from ..logs import get_logger

log = get_logger(__name__)


#: Residues held in memory while the database is read; beyond, records go to
#: spill files (so memory stays bounded whatever the database's size).
MEMORY_RESIDUES = 768 << 20


class _Shard:
    """One shard's records while the database is read: in memory, and in a spill
    file once the records held in memory pass :data:`MEMORY_RESIDUES`."""

    def __init__(self, folder: str, k: int):
        self.base = os.path.join(folder, f"spill-{k:04d}")
        self.ids: list[bytes] = []
        self.headers: list[bytes] = []
        self.seqs: list[bytes] = []
        self.held = 0
        self.spilled = False

    def flush(self) -> None:
        """Append the records held in memory to the spill files."""
        if not self.ids:
            return
        with open(f"{self.base}.ids", "ab") as f:
            f.write(b"\n".join(self.ids) + b"\n")
        with open(f"{self.base}.headers", "ab") as f:
            f.write(b"\n".join(self.headers) + b"\n")
        with open(f"{self.base}.residues", "ab") as f:
            f.write(b"".join(self.seqs))
        with open(f"{self.base}.lengths", "ab") as f:
            f.write(np.fromiter((len(x) for x in self.seqs), dtype="<i8",
                                count=len(self.seqs)).tobytes())
        self.ids, self.headers, self.seqs, self.held = [], [], [], 0
        self.spilled = True

    def records(self) -> tuple[list[bytes], list[bytes], list[bytes]]:
        if not self.spilled:
            return self.ids, self.headers, self.seqs
        self.flush()

        def read(part):
            with open(f"{self.base}.{part}", "rb") as f:
                return f.read()

        ids = read("ids").split(b"\n")[:-1]
        headers = read("headers").split(b"\n")[:-1]
        residues = read("residues")
        off = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(read("lengths"), dtype="<i8"), out=off[1:])
        o = off.tolist()
        return ids, headers, [residues[o[i]:o[i + 1]] for i in range(len(ids))]


def shard_database(database, out_dir, n_shards: int, stats_path=None) -> dict:
    """Split a FASTA database into ``n_shards`` shard files and ``out_dir/database.json``.

    The database is read in blocks (:mod:`swgpu_tools.io.fasta_blocks`), each
    record appended to its shard's spill file, then each shard sorted and
    written: memory holds one block and one shard, whatever the database's
    size.  Nothing in ``out_dir`` changes until the whole database has been
    read without error (a truncated or malformed release changes nothing).
    ``database.json`` holds ``content_blake2b``, the digest of the database's
    text (decompressed), which names the release.
    """
    import zlib
    from concurrent.futures import ThreadPoolExecutor

    from ..io.fasta_blocks import iter_blocks

    if n_shards < 1:
        raise InputError(f"shards must be at least 1, got {n_shards}")
    timer = StepTimer("shard_db")
    os.makedirs(out_dir, exist_ok=True)
    spill_dir = tempfile.mkdtemp(prefix=".spill-", dir=out_dir)
    shards = [_Shard(spill_dir, k) for k in range(n_shards)]
    n_total = 0
    residues_total = 0
    held = 0
    # the release's digest: headers, residues and lengths, each a stream of its own,
    # so that it depends on the records only (not on compression or block sizes);
    # hashed on a thread (hashlib lets go of the GIL) while the next block is parsed
    digests = [hashlib.blake2b(digest_size=32) for _ in range(3)]
    hasher = ThreadPoolExecutor(max_workers=1)
    pending = None
    try:
        with timer.phase("read"):
            for block in iter_blocks(database):
                res = block.residues.tobytes()
                off = block.offsets.tolist()
                lengths = np.diff(block.offsets)
                if pending is not None:
                    pending.result()
                pending = hasher.submit(_hash_block, digests, block.headers, res, lengths)
                for i, (sid, head) in enumerate(zip(block.ids, block.headers)):
                    sh = shards[zlib.crc32(sid) % n_shards]
                    sh.ids.append(sid)
                    sh.headers.append(head)
                    sh.seqs.append(res[off[i]:off[i + 1]])
                n_total += len(block)
                residues_total += off[-1]
                held += off[-1]
                if held > MEMORY_RESIDUES:
                    for sh in shards:
                        sh.flush()
                    held = 0
                if n_total // 1_000_000 != (n_total - len(block)) // 1_000_000:
                    log.info(f"read {n_total:,} sequences ({residues_total:,} residues)")
            if pending is not None:
                pending.result()
        with timer.phase("write"):
            # shards held in memory are written by a few threads at once (sorting,
            # joining, hashing and writing let go of the GIL for the most part)
            spilled = any(sh.spilled for sh in shards)
            workers = 1 if spilled else max(1, min(4, n_shards, os.cpu_count() or 1))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                per_shard = list(pool.map(lambda k: _write_one(database, out_dir, shards, k),
                                          range(n_shards)))
    finally:
        hasher.shutdown(wait=True)
        shutil.rmtree(spill_dir, ignore_errors=True)
    summary = {"sequences": n_total, "residues": residues_total, "shards": per_shard,
               "content_blake2b": hashlib.blake2b(
                   b"".join(d.digest() for d in digests), digest_size=32).hexdigest()}
    with atomic_write(os.path.join(out_dir, "database.json")) as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
        fh.write("\n")
    _record_verified(out_dir, [p["file"] for p in per_shard])
    timer.fields.update(sequences=n_total, residues=residues_total, shards=n_shards)
    rec = timer.write(stats_path)
    size = os.path.getsize(database)
    log.info(f"{n_total:,} sequences, {residues_total:,} residues in {n_shards} shards, "
             f"{rec['wall_s']:.1f} s ({size / max(rec['wall_s'], 1e-9) / 1e6:.0f} MB/s of "
             f"{'compressed ' if _is_gzip(database) else ''}FASTA)")
    return summary


def _write_one(database, out_dir, shards, k: int) -> dict:
    ids, headers, seqs = shards[k].records()
    _check_unique(database, ids)
    header = write_shard(os.path.join(out_dir, shard_file_name(k)), ids, seqs, headers)
    shards[k] = None  # free the shard's records
    log.debug(f"wrote shard {k + 1}: {header['sequences']:,} sequences, "
              f"{header['residues']:,} residues")
    return {"file": shard_file_name(k), "sequences": header["sequences"],
            "residues": header["residues"], "blake2b": header["blake2b"]}


def _hash_block(digests, headers: list[bytes], residues: bytes, lengths: np.ndarray) -> None:
    digests[0].update(b"\n".join(headers) + b"\n")
    digests[1].update(residues)
    digests[2].update(lengths.astype("<i8").tobytes())


def _is_gzip(path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _check_unique(database, ids: list[bytes]) -> None:
    """Duplicate accessions (which share a shard): the line reader names both lines."""
    if len(set(ids)) != len(ids):
        for _ in iter_unique_fasta(database):  # raises with both line numbers
            pass
        raise InputError(f"{os.fspath(database)}: duplicate sequence ids")


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
