"""The two halves of the shard step's work, run by worker processes
(:mod:`swgpu_tools.steps.shard_db` schedules them).

:func:`spill_chunk` parses a piece of the database (a byte range of a plain
file, read by the worker itself, or a chunk of text handed to it) and writes

* the piece's *partition*: its records grouped by shard (``crc32(id) %
  n_shards``), sorted by accession within each shard, with an index of where
  each shard's records lie, into a region of the spill file that it reserves;
  a shard's writer then maps the spill file and reads only its part;
* the piece's share of the release digest's three streams (headers, residues,
  lengths, in file order), which the main process hashes in file order: handed
  over in a slot of a memory ring shared with the main process, or in a file
  when no slot is free or it does not fit.

:func:`write_shard_from_spill` gathers one shard's records from every
partition, sorts them by accession (runs already sorted: a merge), refuses
duplicate accessions and writes the shard file
(:func:`swgpu_tools.io.shardfile.write_shard_blobs`, byte-identical to
:func:`~swgpu_tools.io.shardfile.write_shard`).

Partition layout (integers ``<i8``, positions from the region's start)::

    bases:  4 integers, where the ids, headers, lengths and residues parts start
    index:  (n_shards + 1) x 4 integers: records, id bytes, header bytes and
            residues before shard k in each part (cumulative)
    ids:      accessions, each followed by b"\\n"
    headers:  header lines, each followed by b"\\n"
    lengths:  residues per record
    residues: canonical letters
"""

from __future__ import annotations

import mmap
import operator
import os
import time
import zlib
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, OutputError
from ..io.atomic import describe_os_error
from ..io.fasta_blocks import parse_chunk
from ..io.shardfile import DIGEST, write_shard_blobs


@dataclass
class SpillState:
    """What the workers share with the main process: the spill file, the counter
    that hands out its regions (a ``multiprocessing.Value`` or :class:`Counter`),
    and the ring of digest slots (an anonymous shared mmap, or None)."""

    spill_path: str
    counter: object
    ring: object = None
    slot_bytes: int = 0


class Counter:
    """The region counter of a single process."""

    def __init__(self):
        import threading

        self.value = 0
        self._lock = threading.Lock()

    def get_lock(self):
        return self._lock


#: In a worker process: the state it was forked with (:func:`init_worker`).
_STATE: SpillState | None = None


def init_worker(state: SpillState) -> None:
    """In a (forked) worker: the spill file, region counter and digest ring."""
    global _STATE
    _STATE = state


def _reserve(counter, size: int) -> int:
    with counter.get_lock():
        at = counter.value
        counter.value = at + size
    return at


@dataclass
class SpillJob:
    """One piece of the database: ``data`` (text of whole records), or the byte
    range ``[begin, end)`` of the plain file ``path`` (``last``: it ends the file)."""

    name: str  # the database's name in error messages
    index: int  # the piece's place in the file (0, 1, ...)
    n_shards: int
    folder: str  # spill folder
    path: str | None = None
    begin: int = 0
    end: int = 0
    last: bool = False
    data: bytes | None = None
    first_line: int = 1  # known for chunks; ranges report errors via the line reader
    canon_inline: bool = False  # return the digest streams themselves (same process)
    slot: int | None = None  # the ring slot for the digest streams (None: a file)


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
                raise EOFError(
                    f"the file ended at byte {begin + got} while being read "
                    f"(changed while the shard step ran?)"
                )
            got += n
    return bytes(out)


def _write_file(path: str, parts, at: int | None = None) -> None:
    """Write ``parts`` to a new file, or at ``at`` in an existing one."""
    try:
        fd = os.open(
            path, os.O_WRONLY if at is not None else os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
        )
        try:
            pos = at or 0
            for part in parts:
                view = memoryview(part).cast("B")
                while len(view):
                    n = os.pwrite(fd, view, pos)
                    pos += n
                    view = view[n:]
        finally:
            os.close(fd)
    except OSError as exc:
        raise OutputError(
            f"{path}: cannot write a spill file of the shard step: {describe_os_error(exc)}"
        ) from None


def spill_chunk(job: SpillJob, state: SpillState | None = None) -> dict:
    """Parse one piece and write its partition (and digest streams); return its
    sizes: sequences, residues, and per shard records and bytes (numpy), and
    where its partition lies in the spill file (``region``)."""
    state = state or _STATE
    t0 = time.perf_counter()
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
        out["canon"] = ("streams", streams, None)
    elif job.slot is not None and sum(sizes) <= state.slot_bytes:
        at = job.slot * state.slot_bytes
        for x, size in zip(streams, sizes):
            state.ring[at : at + size] = x
            at += size
        out["canon"] = ("slot", job.slot * state.slot_bytes, sizes)
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
    if order == list(range(n)):  # in order already (a sorted file, one shard)
        ids_part, heads_part = _lines(ids), _lines(headers)
        lens_part, res_part = lengths, block.residues
    else:
        ids_part = _lines([ids[i] for i in order])
        heads_part = _lines([headers[i] for i in order])
        lens_part = lengths[perm]
        res_part = _gather_items(block.residues, block.offsets, perm)

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
    parts = (bases, index, ids_part, heads_part, lens_part, res_part)
    region = _reserve(state.counter, sum(memoryview(x).nbytes for x in parts))
    _write_file(state.spill_path, parts, region)
    out["region"] = region
    out["records"] = counts
    out["bytes"] = sizes[:, 1] + sizes[:, 2] + sizes[:, 3] + 8 * counts
    out["seconds"] = time.perf_counter() - t0
    return out


def _runs(begin: np.ndarray, end: np.ndarray, order) -> tuple[np.ndarray, np.ndarray]:
    """The items ``[begin[i], end[i])`` for i in ``order`` as runs of adjacent items
    (an item that starts where the one before it ended extends its run): a few
    long runs for a file that is sorted, or nearly."""
    b, e = begin[order], end[order]
    cut = np.flatnonzero(b[1:] != e[:-1]) + 1
    first = np.concatenate([[0], cut]) if len(b) else cut
    last = np.concatenate([cut, [len(b)]]) - 1 if len(b) else cut
    return b[first], e[last]


def _gather_items(data, starts: np.ndarray, order: np.ndarray) -> bytes:
    """``data[starts[i]:starts[i + 1]]`` for i in ``order``, joined (``data``: a
    buffer; slices of bytes are the fastest Python makes)."""
    if isinstance(data, np.ndarray):
        data = data.base if isinstance(data.base, bytes) else data.tobytes()
    begin, end = _runs(starts[:-1], starts[1:], order)
    return b"".join(map(data.__getitem__, map(slice, begin.tolist(), end.tolist())))


@dataclass
class WriteJob:
    k: int  # the shard
    regions: list[int]  # where each piece's partition lies in the spill file
    spill_path: str
    folder: str


#: Bytes gathered at once while the previous ones are hashed and written.
_BATCH_BYTES = 8 << 20


def _parts(mm: mmap.mmap, regions: list[int], k: int):
    """Per piece holding records of shard ``k``: (records, and the start and size
    of its ids, headers, lengths and residues in the spill file)."""
    out = []
    for at in regions:
        bases = np.frombuffer(mm, dtype="<i8", count=4, offset=at)
        a, b = np.frombuffer(mm, dtype="<i8", count=8, offset=at + 32 + 32 * k).reshape(2, 4)
        if b[0] == a[0]:
            continue
        start = at + bases + np.array([a[1], a[2], 8 * a[0], a[3]])
        size = np.array([b[1] - a[1], b[2] - a[2], 8 * (b[0] - a[0]), b[3] - a[3]])
        out.append((int(b[0] - a[0]), start.tolist(), size.tolist()))
    return out


def write_shard_from_spill(job: WriteJob) -> dict:
    """Gather, sort and write shard ``job.k`` into the spill folder; return its
    summary, or ``{"k": k, "duplicate": True}`` when two records share an accession
    (then nothing is written)."""
    t0 = time.perf_counter()
    with open(job.spill_path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
    try:
        out = _write_shard(job, mm)
        out["seconds"] = time.perf_counter() - t0
        return out
    finally:
        try:
            mm.close()
        except BufferError:  # a view still held (an exception's traceback): unmapped later
            pass


def _write_shard(job: WriteJob, mm: mmap.mmap) -> dict:
    timings: dict = {}
    parts = _parts(mm, job.regions, job.k)
    ids = b"".join([mm[s[0] : s[0] + z[0]] for _, s, z in parts]).split(b"\n")[:-1]
    n = len(ids)
    lengths = np.concatenate(
        [np.frombuffer(mm, dtype="<i8", count=r, offset=s[2]) for r, s, _ in parts]
        or [np.zeros(0, dtype="<i8")]
    )
    order = sorted(range(n), key=ids.__getitem__)
    ordered = [ids[i] for i in order]
    del ids
    if any(map(operator.eq, ordered, ordered[1:])):
        return {"k": job.k, "duplicate": True}
    offsets = np.zeros(n + 1, dtype="<i8")
    heads_bytes = sum(z[1] for _, _, z in parts)
    path = spilled_shard_path(job.folder, job.k)
    if order == list(range(n)):  # already in order (one piece, or a sorted file)
        del order
        np.cumsum(lengths, out=offsets[1:])
        view = memoryview(mm)
        try:
            header = write_shard_blobs(
                path,
                _lines(ordered),
                offsets,
                [view[s[3] : s[3] + z[3]] for _, s, z in parts],
                [view[s[1] : s[1] + z[1]] for _, s, z in parts],
                headers_bytes=heads_bytes,
                timings=timings,
            )
        finally:
            view.release()
    else:
        np.cumsum(lengths[order], out=offsets[1:])
        # where each record's residues and header line lie in the spill file
        counts = [r for r, _, _ in parts]
        within = np.cumsum(lengths) - lengths  # from the first piece's first record
        first = np.cumsum([0] + counts[:-1])
        res_begin = within + np.repeat(
            np.array([s[3] for _, s, _ in parts]) - within[first], counts
        )
        res_end = res_begin + lengths
        head_begin = np.empty(n, dtype=np.int64)
        head_end = np.empty(n, dtype=np.int64)
        i = 0
        for r, s, z in parts:
            ends = (
                s[1]
                + 1
                + np.flatnonzero(np.frombuffer(mm, dtype=np.uint8, count=z[1], offset=s[1]) == 10)
            )
            head_end[i : i + r] = ends
            head_begin[i] = s[1]
            head_begin[i + 1 : i + r] = ends[:-1]
            i += r
        # residues and headers gathered a batch at a time while the earlier
        # batches are hashed and written
        header = write_shard_blobs(
            path,
            _lines(ordered),
            offsets,
            _batches(mm, res_begin, res_end, order),
            _batches(mm, head_begin, head_end, order),
            headers_bytes=heads_bytes,
            timings=timings,
        )
    return {
        "k": job.k,
        "sequences": header["sequences"],
        "residues": header["residues"],
        "digest": f"{DIGEST}:{header[DIGEST]}",
        "timings": timings,  # (not in the receipt: the shard step takes it out)
    }


def _batches(mm, begin: np.ndarray, end: np.ndarray, order: list[int]):
    """``mm[begin[i]:end[i]]`` for i in ``order``, joined a batch (about
    :data:`_BATCH_BYTES`) at a time; a long run of adjacent items as a view."""
    starts, ends = _runs(begin, end, order)
    done = np.cumsum(ends - starts)
    at = 0
    while at < len(starts):
        stop = max(
            at + 1,
            int(np.searchsorted(done, done[at] - (ends[at] - starts[at]) + _BATCH_BYTES, "right")),
        )
        if stop == at + 1:
            yield memoryview(mm)[int(starts[at]) : int(ends[at])]
        else:
            yield b"".join(
                map(mm.__getitem__, map(slice, starts[at:stop].tolist(), ends[at:stop].tolist()))
            )
        at = stop
