"""The two halves of the shard step's work, run by worker processes
(:mod:`swgpu_tools.steps.shard_db` schedules them).

:func:`spill_chunk` parses a piece of the database (a byte range of a plain
file, read by the worker itself, or a chunk of text handed to it) and writes

* a *partition file*: the piece's records grouped by shard (``crc32(id) %
  n_shards``), sorted by accession within each shard, with an index of where
  each shard's records lie, so that a shard's writer reads only its part;
* the piece's share of the release digest's three streams (headers, residues,
  lengths, in file order), which the main process hashes in file order: handed
  over in a slot of a memory ring shared with the main process
  (:func:`init_worker`), or in a file when it does not fit.

:func:`write_shard_from_spill` gathers one shard's records from every
partition file, sorts them by accession (runs already sorted: a merge),
refuses duplicate accessions and writes the shard file
(:func:`swgpu_tools.io.shardfile.write_shard_blobs`, byte-identical to
:func:`~swgpu_tools.io.shardfile.write_shard`).

Partition file layout (integers ``<i8``)::

    bases:  4 integers, where the ids, headers, lengths and residues parts start
    index:  (n_shards + 1) x 4 integers: records, id bytes, header bytes and
            residues before shard k in each part (cumulative)
    ids:      accessions, each followed by b"\\n"
    headers:  header lines, each followed by b"\\n"
    lengths:  residues per record
    residues: canonical letters
"""
from __future__ import annotations

import operator
import os
import zlib
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, OutputError
from ..io.atomic import describe_os_error
from ..io.fasta_blocks import parse_chunk
from ..io.shardfile import write_shard_blobs


@dataclass
class SpillJob:
    """One piece of the database: ``data`` (text of whole records), or the byte
    range ``[begin, end)`` of the plain file ``path`` (``last``: it ends the file)."""

    name: str                # the database's name in error messages
    index: int               # the piece's place in the file (0, 1, ...)
    n_shards: int
    folder: str              # spill folder
    path: str | None = None
    begin: int = 0
    end: int = 0
    last: bool = False
    data: bytes | None = None
    first_line: int = 1      # known for chunks; ranges report errors via the line reader
    canon_inline: bool = False  # return the digest streams themselves (same process)
    slot: int = 0            # the ring slot for the digest streams


#: In a worker process: the memory ring shared with the main process, and the
#: size of one slot of it (see :func:`init_worker`).
_RING = None
_SLOT_BYTES = 0


def init_worker(ring, slot_bytes: int) -> None:
    """In a (forked) worker: where to hand the digest streams over."""
    global _RING, _SLOT_BYTES
    _RING, _SLOT_BYTES = ring, slot_bytes


def partition_path(folder: str, index: int) -> str:
    return os.path.join(folder, f"part-{index:06d}")


def canon_path(folder: str, index: int) -> str:
    return os.path.join(folder, f"digest-{index:06d}")


def spilled_shard_path(folder: str, k: int) -> str:
    return os.path.join(folder, f"shard-{k:04d}.swdb")


def _lines(items: list[bytes]) -> bytes:
    """Each item followed by a newline."""
    return b"\n".join(items) + b"\n" if items else b""


def _read_range(path: str, begin: int, end: int) -> bytes:
    out = bytearray(end - begin)
    view = memoryview(out)
    with open(path, "rb", buffering=0) as fh:
        got = 0
        while got < len(out):
            n = os.preadv(fh.fileno(), [view[got:]], begin + got)
            if n <= 0:
                raise EOFError(f"the file ended at byte {begin + got} while being read "
                               f"(changed while the shard step ran?)")
            got += n
    return bytes(out)


def _write_file(path: str, parts) -> None:
    try:
        with open(path, "wb") as fh:
            for part in parts:
                fh.write(part)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write a spill file of the shard step: "
                          f"{describe_os_error(exc)}") from None


def spill_chunk(job: SpillJob) -> dict:
    """Parse one piece and write its partition file (and digest streams); return
    its sizes: sequences, residues, and per shard records and bytes (numpy)."""
    if job.data is not None:
        data = job.data
    else:
        try:
            with open(job.path, "rb", buffering=0) as fh:
                data = os.pread(fh.fileno(), job.end - job.begin, job.begin)
            if len(data) < job.end - job.begin:  # a short read
                data = _read_range(job.path, job.begin, job.end)
        except (OSError, EOFError) as exc:
            raise InputError(f"{job.name}: cannot read (corrupt or truncated?): {exc}") from None
        if job.last and not data.endswith(b"\n"):
            data += b"\n"
    block = parse_chunk(job.name, data, job.first_line)
    del data
    ids, headers = block.ids, block.headers
    n = len(ids)
    n_shards = job.n_shards
    lengths = np.diff(block.offsets).astype("<i8")
    out = {"index": job.index, "sequences": n, "residues": int(block.offsets[-1])}

    # the digest streams, in file order
    streams = (_lines(headers), block.residues, lengths)
    sizes = [memoryview(x).nbytes for x in streams]
    if job.canon_inline:
        out["canon"] = ("streams", streams)
    elif _RING is not None and sum(sizes) <= _SLOT_BYTES:
        at = job.slot * _SLOT_BYTES
        for x, size in zip(streams, sizes):
            _RING[at:at + size] = x
            at += size
        out["canon"] = ("slot", job.slot * _SLOT_BYTES, sizes)
    else:
        path = canon_path(job.folder, job.index)
        _write_file(path, streams)
        out["canon"] = ("file", path, sizes)
    del streams

    # records grouped by shard, sorted by accession within each
    shard = np.fromiter(map(zlib.crc32, ids), dtype=np.int64, count=n) % n_shards
    order = sorted(range(n), key=ids.__getitem__)
    if n_shards > 1:
        o = np.array(order, dtype=np.int64)
        perm = o[np.argsort(shard[o], kind="stable")]
        order = perm.tolist()
    else:
        perm = np.array(order, dtype=np.int64)
    ids_part = _lines([ids[i] for i in order])
    heads_part = _lines([headers[i] for i in order])
    lens_part = lengths[perm]
    res = memoryview(block.residues)
    off = block.offsets.tolist()
    res_part = b"".join([res[off[i]:off[i + 1]] for i in order])

    counts = np.bincount(shard, minlength=n_shards).astype(np.int64)
    id_len = np.fromiter(map(len, ids), dtype=np.int64, count=n) + 1
    head_len = np.fromiter(map(len, headers), dtype=np.int64, count=n) + 1
    sizes = np.zeros((n_shards, 4), dtype=np.int64)
    sizes[:, 0] = counts
    sizes[:, 1] = np.bincount(shard, weights=id_len, minlength=n_shards)
    sizes[:, 2] = np.bincount(shard, weights=head_len, minlength=n_shards)
    sizes[:, 3] = np.bincount(shard, weights=lengths, minlength=n_shards)
    index = np.zeros((n_shards + 1, 4), dtype="<i8")
    np.cumsum(sizes, axis=0, out=index[1:])
    bases = np.zeros(4, dtype="<i8")
    bases[0] = 32 + index.nbytes
    bases[1] = bases[0] + len(ids_part)
    bases[2] = bases[1] + len(heads_part)
    bases[3] = bases[2] + lens_part.nbytes
    _write_file(partition_path(job.folder, job.index),
                (bases, index, ids_part, heads_part, lens_part, res_part))
    out["records"] = counts
    out["bytes"] = sizes[:, 1] + sizes[:, 2] + sizes[:, 3] + 8 * counts
    return out


@dataclass
class WriteJob:
    k: int            # the shard
    n_pieces: int     # partition files part-000000 ... in the folder
    folder: str


def _pread_into(fd: int, view: memoryview, offset: int) -> None:
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if n <= 0:
            raise OSError(f"spill file ended early at byte {offset + got}")
        got += n


def _gather(job: WriteJob) -> tuple[bytearray, bytearray, np.ndarray, bytearray]:
    """Shard ``job.k``'s ids, headers, lengths and residues from every partition
    file, in piece order (each piece's run sorted by accession)."""
    spans = []
    totals = np.zeros(4, dtype=np.int64)
    for i in range(job.n_pieces):
        path = partition_path(job.folder, i)
        with open(path, "rb", buffering=0) as fh:
            bases = np.frombuffer(os.pread(fh.fileno(), 32, 0), dtype="<i8")
            rows = np.frombuffer(os.pread(fh.fileno(), 64, 32 + 32 * job.k),
                                 dtype="<i8").reshape(2, 4)
        a, b = rows
        if b[0] == a[0]:
            continue
        # ids, headers, lengths, residues: where they start, how many bytes
        starts = bases + np.array([a[1], a[2], 8 * a[0], a[3]])
        size = np.array([b[1] - a[1], b[2] - a[2], 8 * (b[0] - a[0]), b[3] - a[3]])
        spans.append((path, starts, size))
        totals += size
    bufs = [bytearray(int(t)) for t in totals]
    views = [memoryview(b) for b in bufs]
    at = np.zeros(4, dtype=np.int64)
    for path, starts, size in spans:
        with open(path, "rb", buffering=0) as fh:
            for p in range(4):
                _pread_into(fh.fileno(), views[p][at[p]:at[p] + size[p]], int(starts[p]))
        at += size
    return bufs[0], bufs[1], np.frombuffer(bufs[2], dtype="<i8"), bufs[3]


def write_shard_from_spill(job: WriteJob) -> dict:
    """Gather, sort and write shard ``job.k`` into the spill folder; return its
    summary, or ``{"k": k, "duplicate": True}`` when two records share an accession
    (then nothing is written)."""
    ids_buf, heads_buf, lengths, residues = _gather(job)
    ids = bytes(ids_buf).split(b"\n")[:-1]
    del ids_buf
    n = len(ids)
    order = sorted(range(n), key=ids.__getitem__)
    ordered = [ids[i] for i in order]
    if any(map(operator.eq, ordered, ordered[1:])):
        return {"k": job.k, "duplicate": True}
    offsets = np.zeros(n + 1, dtype="<i8")
    if order == list(range(n)):  # already in order (one piece, or a sorted file)
        np.cumsum(lengths, out=offsets[1:])
        ids_blob, heads_blob, res_blob = _lines(ordered), heads_buf, residues
    else:
        heads = bytes(heads_buf).split(b"\n")[:-1]
        del heads_buf
        ids_blob = _lines(ordered)
        heads_blob = _lines([heads[i] for i in order])
        del heads
        start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=start[1:])
        s = start.tolist()
        view = memoryview(residues)
        res_blob = b"".join([view[s[i]:s[i + 1]] for i in order])
        del view, residues
        np.cumsum(lengths[order], out=offsets[1:])
    del ordered, order
    header = write_shard_blobs(spilled_shard_path(job.folder, job.k), ids_blob, offsets,
                               res_blob, heads_blob)
    return {"k": job.k, "sequences": header["sequences"], "residues": header["residues"],
            "blake2b": header["blake2b"]}
