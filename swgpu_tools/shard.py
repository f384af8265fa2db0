"""Database shards: stable partitions of the database in a checked binary file.

A sequence's shard depends only on its id (``crc32(id) % n_shards``), and the
records of a shard are stored sorted by id.  A shard file therefore depends
only on the set of records it holds: when a new database release changes a few
entries, only the shards that hold them change, byte for byte.

File format (``.swdb``), all integers little-endian::

    b"SWGPUDB1"                      magic
    uint64 header_length
    header: JSON (utf-8, sorted keys): format, sequences, residues,
            ids_bytes, blake2b (hex digest of everything after the header)
    ids:      utf-8, each id followed by b"\\n"
    offsets:  int64 x (sequences + 1)
    residues: uint8 canonical letters (see swgpu_tools.alphabet)

Loading verifies the digest, so a truncated or corrupted shard is an error,
never trusted.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib

import numpy as np

from .errors import InputError
from .fasta import iter_unique_fasta
from .io.atomic import atomic_write
from .sequences import SequenceSet

MAGIC = b"SWGPUDB1"
FORMAT_VERSION = 1


def shard_of(seq_id: str, n_shards: int) -> int:
    """The shard (0 .. n_shards-1) that holds sequence ``seq_id``."""
    return zlib.crc32(seq_id.encode("utf-8")) % n_shards


def shard_file_name(index: int) -> str:
    return f"shard-{index:04d}.swdb"


def write_shard(path, ids: list[str], sequences: list[bytes]) -> dict:
    """Write one shard (records sorted by id) atomically; return its header."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    ids_blob = b"".join(ids[i].encode("utf-8") + b"\n" for i in order)
    lengths = np.fromiter((len(sequences[i]) for i in order), dtype=np.int64, count=len(order))
    offsets = np.zeros(len(order) + 1, dtype="<i8")
    np.cumsum(lengths, out=offsets[1:])
    residues = b"".join(sequences[i] for i in order)
    digest = hashlib.blake2b(digest_size=32)
    for part in (ids_blob, offsets.tobytes(), residues):
        digest.update(part)
    header = {
        "format": FORMAT_VERSION,
        "sequences": len(order),
        "residues": int(offsets[-1]),
        "ids_bytes": len(ids_blob),
        "blake2b": digest.hexdigest(),
    }
    header_bytes = json.dumps(header, sort_keys=True).encode("utf-8")
    with atomic_write(path, "wb") as fh:
        fh.write(MAGIC)
        fh.write(struct.pack("<Q", len(header_bytes)))
        fh.write(header_bytes)
        fh.write(ids_blob)
        fh.write(offsets.tobytes())
        fh.write(residues)
    return header


def read_shard(path) -> SequenceSet:
    """Load a shard, verifying its digest; InputError if missing, truncated or corrupt."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"{name}: cannot read shard: {exc.strerror or exc}") from None
    if data[:8] != MAGIC or len(data) < 16:
        raise InputError(f"{name}: not a swgpu shard file (bad magic); re-run the shard step")
    (hlen,) = struct.unpack_from("<Q", data, 8)
    try:
        header = json.loads(data[16:16 + hlen])
        n = int(header["sequences"])
        n_ids = int(header["ids_bytes"])
        n_res = int(header["residues"])
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{name}: corrupt shard header; re-run the shard step") from None
    body = memoryview(data)[16 + hlen:]
    expected = n_ids + 8 * (n + 1) + n_res
    if len(body) != expected:
        raise InputError(
            f"{name}: shard is truncated or corrupt ({len(body)} bytes of data, "
            f"expected {expected}); re-run the shard step"
        )
    if hashlib.blake2b(body, digest_size=32).hexdigest() != header.get("blake2b"):
        raise InputError(f"{name}: shard checksum mismatch (corrupt file); re-run the shard step")
    ids = bytes(body[:n_ids]).decode("utf-8").split("\n")[:-1]
    offsets = np.frombuffer(body, dtype="<i8", count=n + 1, offset=n_ids).astype(np.int64)
    residues = np.frombuffer(body, dtype=np.uint8, offset=n_ids + 8 * (n + 1)).copy()
    return SequenceSet(ids, residues, offsets)


def shard_database(database, out_dir, n_shards: int, log=None) -> dict:
    """Split a FASTA database into ``n_shards`` shard files and a ``database.json`` summary.

    Shard files whose content did not change are rewritten byte-identical.
    Returns the summary (also written to ``out_dir/database.json``).
    """
    if n_shards < 1:
        raise InputError(f"shards must be at least 1, got {n_shards}")
    os.makedirs(out_dir, exist_ok=True)
    ids: list[list[str]] = [[] for _ in range(n_shards)]
    seqs: list[list[bytes]] = [[] for _ in range(n_shards)]
    n_total = 0
    residues_total = 0
    for rec in iter_unique_fasta(database):
        k = shard_of(rec.id, n_shards)
        ids[k].append(rec.id)
        seqs[k].append(rec.sequence)
        n_total += 1
        residues_total += len(rec.sequence)
        if log and n_total % 100000 == 0:
            log(f"read {n_total:,} sequences ({residues_total:,} residues)")
    per_shard = []
    for k in range(n_shards):
        header = write_shard(os.path.join(out_dir, shard_file_name(k)), ids[k], seqs[k])
        per_shard.append({"file": shard_file_name(k), "sequences": header["sequences"],
                          "residues": header["residues"], "blake2b": header["blake2b"]})
        ids[k] = seqs[k] = None  # free memory as we go
        if log:
            log(f"wrote shard {k + 1}/{n_shards}: {header['sequences']:,} sequences, "
                f"{header['residues']:,} residues")
    summary = {"sequences": n_total, "residues": residues_total, "shards": per_shard}
    with atomic_write(os.path.join(out_dir, "database.json")) as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return summary


def read_database_info(path) -> dict:
    """Load ``database.json`` written by :func:`shard_database`."""
    try:
        with open(path) as fh:
            info = json.load(fh)
        int(info["sequences"]), int(info["residues"])
    except FileNotFoundError:
        raise InputError(f"{os.fspath(path)}: file not found") from None
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{os.fspath(path)}: not a swgpu database summary") from None
    return info
