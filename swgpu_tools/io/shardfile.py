"""Shard files (``.swdb``): a part of the database in a checked binary file.

A sequence's shard depends only on its accession (``crc32(id) % n_shards``,
:func:`shard_of`), and the records of a shard are stored sorted by accession.
A shard file therefore depends only on the set of records it holds: when a
new database release changes a few entries, only the shards that hold them
change, byte for byte.

File format, all integers little-endian::

    b"SWGPUDB1"                      magic
    uint64 header_length
    header: JSON (utf-8, sorted keys): format (4), sequences, residues,
            ids_bytes, headers_bytes, sha256-16MiB (hex digest of everything
            after the header, :mod:`swgpu_tools.io.piecedigest`; format 3:
            sha256; formats 1 and 2: blake2b, 32 bytes)
    ids:      utf-8 accessions, each followed by b"\\n"
    offsets:  int64 x (sequences + 1)
    residues: uint8 canonical letters (see swgpu_tools.alphabet)
    headers:  utf-8 FASTA header lines (no control characters), each
              followed by b"\\n" (format 2; format 1 files have none)

Loading verifies the digest, so a truncated or corrupted shard is an error,
never trusted.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from ..cpus import usable_cpus
from ..errors import InputError
from ..sequences import SequenceSet
from . import piecedigest
from .atomic import atomic_write, write_json

MAGIC = b"SWGPUDB1"
FORMAT_VERSION = 4
#: The digest of a shard's body that format 4 records: sha256 over 16 MiB pieces,
#: hashed on several threads (format 3: one sha256, 0.17-0.41 s for a 200 MB shard
#: on one thread, which bounded the shard step's write of one shard; formats 1 and
#: 2: blake2b, about half sha256's speed where the CPU has SHA instructions).
DIGEST = piecedigest.NAME
#: Threads that hash one shard's pieces (when writing and when checking).
DIGEST_THREADS = 8

#: Each format's digest (the header key names it too).
_ALGORITHMS = {1: "blake2b", 2: "blake2b", 3: "sha256", 4: DIGEST}


def _new_digest(algorithm: str):
    """An object with hashlib's ``update``/``hexdigest`` for a shard body's digest:
    ``DIGEST``, format 3's sha256, or the 32-byte blake2b of formats 1 and 2."""
    if algorithm == DIGEST:
        return piecedigest.PieceDigest(min(DIGEST_THREADS, usable_cpus()))
    return hashlib.blake2b(digest_size=32) if algorithm == "blake2b" else hashlib.new(algorithm)


def shard_of(seq_id: str, n_shards: int) -> int:
    """The shard (0 .. n_shards-1) that holds the sequence with accession ``seq_id``."""
    return zlib.crc32(seq_id.encode("utf-8")) % n_shards


def shard_file_name(index: int) -> str:
    return f"shard-{index:04d}.swdb"


def receipt_name(shard_name: str) -> str:
    """The receipt of a shard file (``shard-0000.swdb`` -> ``shard-0000.json``): its
    digest, sequences and residues, written with it by the shard step.  Rules take
    the receipt as their input instead of the shard, so that Snakemake checksums a
    few bytes instead of the shard (see workflow/rules/shard_db.smk)."""
    return shard_name.removesuffix(".swdb") + ".json"


def write_shard(path, ids: list, sequences: list[bytes], headers: list | None = None) -> dict:
    """Write one shard (records sorted by accession) atomically; return its header.

    ``ids`` and ``headers``: str or UTF-8 bytes; ``sequences``: canonical letters."""
    ids = [i.encode("utf-8") if isinstance(i, str) else i for i in ids]
    if headers is None:
        headers = ids
    headers = [h.encode("utf-8") if isinstance(h, str) else h for h in headers]
    order = sorted(range(len(ids)), key=ids.__getitem__)
    ids_blob = b"".join([ids[i] + b"\n" for i in order])
    headers_blob = b"".join([headers[i] + b"\n" for i in order])
    lengths = np.fromiter((len(sequences[i]) for i in order), dtype=np.int64, count=len(order))
    offsets = np.zeros(len(order) + 1, dtype="<i8")
    np.cumsum(lengths, out=offsets[1:])
    residues = b"".join([sequences[i] for i in order])
    return write_shard_blobs(path, ids_blob, offsets, residues, headers_blob)


#: Bodies from this size on are hashed and written on two threads, in pieces of
#: at most :data:`_PIECE_BYTES`.
_OVERLAP_BYTES = 4 << 20
_PIECE_BYTES = 16 << 20


def write_shard_blobs(
    path,
    ids_blob,
    offsets: np.ndarray,
    residues,
    headers_blob,
    headers_bytes: int | None = None,
    timings: dict | None = None,
) -> dict:
    """Write a shard from its parts, records already sorted by accession (as
    :func:`write_shard` lays them out): ``ids_blob`` and ``headers_blob`` each
    record's accession and header followed by ``\\n``, ``offsets`` (n + 1) and the
    residues.  ``residues`` and ``headers_blob`` are bytes-like, or iterables of
    bytes-like pieces (made while the earlier ones are hashed and written), then
    of ``offsets[-1]`` and ``headers_bytes`` bytes in all.  Atomic; returns the
    header.  ``timings``: filled with the seconds spent handing the body's pieces to
    the digest's threads and waiting for them at the end (``hash_s``), and writing
    (``write_s``) the body, each on its own thread from 4 MiB on."""
    offsets = np.ascontiguousarray(offsets, dtype="<i8")
    if headers_bytes is None:
        headers_bytes = memoryview(headers_blob).nbytes
    ids_bytes = memoryview(ids_blob).nbytes
    header = {
        "format": FORMAT_VERSION,
        "sequences": len(offsets) - 1,
        "residues": int(offsets[-1]),
        "ids_bytes": ids_bytes,
        "headers_bytes": headers_bytes,
        DIGEST: "0" * 64,
    }
    hlen = len(json.dumps(header, sort_keys=True).encode("utf-8"))
    digest = _new_digest(DIGEST)
    body = ids_bytes + offsets.nbytes + header["residues"] + headers_bytes
    parts = (ids_blob, offsets, residues, headers_blob)
    expected = (ids_bytes, offsets.nbytes, header["residues"], headers_bytes)
    # no fsync: a shard is checked against its digest before use unless a note of
    # this boot vouches for it (read_verified), and a crash means a new boot
    with atomic_write(path, "wb", durable=boot_id() is None) as fh:
        # the body first, after the header's place; then the header, whose length
        # does not depend on the digest
        fh.seek(len(MAGIC) + 8 + hlen)
        sink = _Sink(fh, digest, threaded=body >= _OVERLAP_BYTES)
        try:
            for part, size in zip(parts, expected):
                wrote = 0
                for piece in _pieces(part):
                    sink.put(piece)
                    wrote += memoryview(piece).nbytes
                if wrote != size:
                    raise ValueError(f"shard part of {wrote} bytes, expected {size}")
        except BaseException:
            sink.close(check=False)
            raise
        sink.close()
        t = time.perf_counter()
        header[DIGEST] = digest.hexdigest()  # waits for the pieces' threads
        if timings is not None:
            hash_s = sink.busy[0] + time.perf_counter() - t
            timings.update(hash_s=round(hash_s, 4), write_s=round(sink.busy[1], 4))
        header_bytes = json.dumps(header, sort_keys=True).encode("utf-8")
        assert len(header_bytes) == hlen
        fh.seek(0)
        fh.write(MAGIC + struct.pack("<Q", hlen) + header_bytes)
    return header


def _pieces(part):
    """A part as pieces of at most :data:`_PIECE_BYTES` (a bytes-like part), or the
    part's own pieces (an iterable)."""
    try:
        view = memoryview(part).cast("B")
    except TypeError:
        yield from part
        return
    for at in range(0, len(view), _PIECE_BYTES):
        yield view[at : at + _PIECE_BYTES]


class _Sink:
    """Hashes and writes pieces in order: at once, or on two threads (hashlib and
    file writes let go of the GIL, so the next piece is made meanwhile)."""

    def __init__(self, fh, digest, threaded: bool):
        self.steps = (digest.update, fh.write)
        self.busy = [0.0, 0.0]  # seconds in each step
        self.errors: list[BaseException] = []
        self.threads = []
        if threaded:
            import queue
            import threading

            for k in range(len(self.steps)):
                q: queue.Queue = queue.Queue(maxsize=4)
                t = threading.Thread(target=self._run, args=(q, k), daemon=True)
                t.start()
                self.threads.append((q, t))

    def _step(self, k: int, piece) -> None:
        t = time.perf_counter()
        self.steps[k](piece)
        self.busy[k] += time.perf_counter() - t

    def _run(self, q, k: int) -> None:
        while (piece := q.get()) is not None:
            if not self.errors:
                try:
                    self._step(k, piece)
                except BaseException as exc:  # noqa: B036 (raised by the caller)
                    self.errors.append(exc)

    def put(self, piece) -> None:
        if self.errors:
            raise self.errors[0]
        if not self.threads:
            for k in range(len(self.steps)):
                self._step(k, piece)
            return
        for q, _ in self.threads:
            q.put(piece)

    def close(self, check: bool = True) -> None:
        for q, _ in self.threads:
            q.put(None)
        for _, t in self.threads:
            t.join()
        self.threads = []
        if check and self.errors:
            raise self.errors[0]


class _ShardBody:
    """A shard file in memory with its header parsed; the digest is checked on a thread.

    The file is read into one buffer that the loaded arrays view (no copy); the
    body's digest runs on a thread (hashlib lets go of the GIL), overlapping
    the decoding of ids and headers; :meth:`verify` waits for it.  Nothing read
    is returned before :meth:`verify` passed.
    """

    def __init__(self, path, mapped: bool = False, verify: bool = True):
        self.name = name = os.fspath(path)
        try:
            with open(name, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if mapped and size >= 16:  # read-only, pages from the page cache
                    buf = np.frombuffer(
                        mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), np.uint8
                    )
                    got = len(buf)
                else:
                    buf = np.empty(size, dtype=np.uint8)
                    got = fh.readinto(memoryview(buf))
        except OSError as exc:
            raise InputError(f"{name}: cannot read shard: {exc.strerror or exc}") from None
        buf = buf[:got]
        if bytes(buf[:8]) != MAGIC or got < 16:
            raise InputError(f"{name}: not a swgpu shard file (bad magic); re-run the shard step")
        (hlen,) = struct.unpack_from("<Q", buf, 8)
        try:
            header = json.loads(bytes(buf[16 : 16 + hlen]))
            self.version = int(header.get("format", 1))
            self.n = int(header["sequences"])
            self.n_ids = int(header["ids_bytes"])
            self.n_res = int(header["residues"])
            self.n_head = int(header.get("headers_bytes", 0))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise InputError(f"{name}: corrupt shard header; re-run the shard step") from None
        if self.version not in _ALGORITHMS:
            raise InputError(
                f"{name}: shard format {self.version} is not known to this swgpu; "
                "re-run the shard step"
            )
        self.body = body = buf[16 + hlen :]
        expected = self.n_ids + 8 * (self.n + 1) + self.n_res + self.n_head
        if len(body) != expected:
            raise InputError(
                f"{name}: shard is truncated or corrupt ({len(body)} bytes of data, "
                f"expected {expected}); re-run the shard step"
            )
        algorithm = _ALGORITHMS[self.version]
        self._check = None
        if verify:
            self._check = _DigestCheck(name, algorithm, header.get(algorithm), body)
        self.res_start = self.n_ids + 8 * (self.n + 1)

    def verify(self) -> None:
        if self._check is not None:  # (None: vouched for by a note of this boot)
            self._check()

    @contextlib.contextmanager
    def decoding(self, then_verify: bool = True):
        """Decode inside: afterwards the digest is verified (``then_verify``); a
        decoding error in a file whose digest is right is reported as a corrupt
        shard."""
        try:
            yield
        except (ValueError, IndexError) as exc:
            self.verify()
            raise InputError(f"{self.name}: corrupt shard ({exc}); re-run the shard step") from None
        if then_verify:
            self.verify()

    def sequences(self, headers: bool = True) -> SequenceSet:
        """Every record (decode inside :meth:`decoding`); ``headers=False``: no headers."""
        ids = self.ids_blob().decode("utf-8").split("\n")[:-1]
        heads = _TextLines(self.headers_blob()) if headers and self.version >= 2 else None
        return SequenceSet(ids, self.residues(), self.offsets(), heads)

    def ids_blob(self) -> bytes:
        return self.body[: self.n_ids].tobytes()

    def offsets(self) -> np.ndarray:
        return self.body[self.n_ids : self.res_start].view("<i8").astype(np.int64)

    def residues(self) -> np.ndarray:
        return self.body[self.res_start : self.res_start + self.n_res]

    def headers_blob(self) -> bytes | None:
        if self.version < 2:
            return None
        return self.body[self.res_start + self.n_res :].tobytes()


class _DigestCheck:
    """A shard body's digest, computed on a thread (hashlib lets go of the GIL);
    calling it waits for the digest and raises InputError if it is wrong.  It holds
    no reference to the body once the digest is computed, so a caller that keeps it
    until later (a scoring job, until it writes) does not keep the shard's memory."""

    def __init__(self, name: str, algorithm: str, expected: str | None, body: np.ndarray):
        self.name = name
        self.expected = expected  # the header's
        self.digest: list[str] = []
        # the body reaches the thread as an argument: the thread drops it when done
        self.thread = threading.Thread(
            target=_hash_into, args=(self.digest, algorithm, body), name="swgpu-shard-digest",
            daemon=True,
        )  # fmt: skip
        self.thread.start()

    def __call__(self) -> None:
        self.thread.join()
        if self.digest[0] != self.expected:
            raise InputError(
                f"{self.name}: shard checksum mismatch (corrupt file); re-run the shard step"
            )


def _vouched() -> None:
    """The check of a shard a note of this boot vouched for: nothing to wait for."""


def _hash_into(out: list, algorithm: str, body: np.ndarray) -> None:
    h = _new_digest(algorithm)
    h.update(memoryview(body))
    out.append(h.hexdigest())


class _Lines:
    """The lines of a blob as a read-only sequence of bytes (for :mod:`bisect`)."""

    def __init__(self, blob: bytes):
        self.blob = blob
        # each line's start and end (exclusive, at its newline)
        self.ends = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 10)
        self.starts = np.empty_like(self.ends)
        if len(self.ends):
            self.starts[0] = 0
            self.starts[1:] = self.ends[:-1] + 1

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, k: int) -> bytes:
        return self.blob[self.starts[k] : self.ends[k]]

    #: Lines per block of :meth:`fixed_width` (its index arrays stay a few tens of MB).
    BLOCK = 262_144

    def fixed_width(self) -> np.ndarray:
        """The lines as one numpy byte-string array (``S<width>``, NUL-padded, so
        ordered as the bytes are where no line holds a NUL), gathered from the blob
        by numpy a block of lines at a time: no Python object per line."""
        n = len(self.ends)
        lens = self.ends - self.starts
        width = max(int(lens.max()) if n else 1, 1)
        buf = np.frombuffer(self.blob, dtype=np.uint8)
        out = np.zeros((n, width), dtype=np.uint8)
        cols = np.arange(width)
        for a in range(0, n, self.BLOCK):
            b = min(n, a + self.BLOCK)
            valid = cols[None, :] < lens[a:b, None]
            out[a:b][valid] = buf[(self.starts[a:b, None] + cols[None, :])[valid]]
        return out.view(f"S{width}").reshape(n)


class _TextLines(Sequence):
    """A shard's ids or header lines as str, decoded when read: a scoring job reads
    only its hits' headers, the traceback only its subjects' ids."""

    def __init__(self, blob: bytes):
        self.raw = _Lines(blob)  # the lines as bytes (the ids: sorted, for bisection)

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return self.raw[k].decode("utf-8")

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None


def read_shard(path, headers: bool = True) -> SequenceSet:
    """Load a shard, verifying its digest; InputError if missing, truncated or corrupt.

    ``headers=False`` leaves the FASTA headers out (``SequenceSet.headers`` None);
    otherwise they are a sequence of str decoded when read.
    """
    shard = _ShardBody(path)
    with shard.decoding():
        return shard.sequences(headers)


def read_shard_unverified(path, mapped: bool = False) -> tuple[SequenceSet, Callable[[], None]]:
    """:func:`read_shard`, returned before its digest is known: (the shard, a
    function that waits for the digest and raises InputError if it is wrong).

    For a reader that has other work while the digest is computed (a scoring job:
    the encoding of the residues, then the scan), so the digest is off its path.
    The caller must call the function before anything it writes depends on the
    shard, and when it meets an error in the shard's content (then the function
    names a corrupt file as such).  ``mapped``: the file mapped (read-only, its pages
    from the page cache) instead of read into new memory: for a reader that touches
    few of its residues (a re-scan encodes only its delta; 50 MB a shard copied and
    first touched took ~0.1 s a shard on the GPU hosts)."""
    shard = _ShardBody(path, mapped=mapped)
    with shard.decoding(then_verify=False):
        # (the check, not the body's bound method: it keeps no reference to the body)
        return shard.sequences(), shard._check or _vouched


def read_shard_records(path, wanted, trusted: bool = False) -> SequenceSet:
    """The records of a shard whose accessions are in ``wanted``, in the shard's order.

    The whole file's digest is verified as by :func:`read_shard` (``trusted``:
    not, for a shard a note of this boot vouches for: :func:`is_noted`), but
    only the wanted records are decoded: a shard's records are sorted by
    accession (byte order), so each wanted accession is found by bisection.
    The file is mapped, not read: memory holds only the wanted records (and,
    trusted, only their pages are read).
    """
    shard = _ShardBody(path, mapped=True, verify=not trusted)
    with shard.decoding():
        return _records(shard, wanted)


#: Wanted records are found by one bisection each (about 10 us each) when they
#: are fewer than the shard's ids over this; else by one sorted search over an
#: array of every id (about 0.23 us per id: 0.1 s for 439,226 ids).
_BISECT_RATIO = 40


def _records(shard: _ShardBody, wanted) -> SequenceSet:
    blob = shard.ids_blob()
    ids = _TextLines(blob)
    found: list[int] = []
    want = sorted({a.encode("utf-8") for a in wanted})
    if want and len(ids) and len(want) * _BISECT_RATIO <= len(ids):
        # a few: one bisection each over the lines (no array of every id)
        lines = ids.raw
        for w in want:
            k = bisect.bisect_left(lines, w)
            if k < len(lines) and lines[k] == w:
                found.append(k)
    elif want and len(ids):
        # the ids as one numpy byte-string array, searched for all wanted at once
        # (one bisection per accession in Python took ~0.3 s for 20,000 hits)
        keys = ids.raw.fixed_width()
        w = np.array(want, dtype=bytes)
        k = np.searchsorted(keys, w, side="left")
        hit = k < len(keys)
        hit[hit] = keys[k[hit]] == w[hit]
        found = k[hit].tolist()
    blob = shard.headers_blob()
    heads = None if blob is None else _TextLines(blob)
    # the whole shard as a set whose ids and headers decode when read: only the subset's are
    return SequenceSet(ids, shard.residues(), shard.offsets(), heads).subset(found)


#: Notes of shards found whole: name -> [size, mtime_ns] (in the shards' folder;
#: written by the shard step, the scoring jobs and the traceback after checking a
#: shard's digest, read by the start-of-run check, :mod:`swgpu_tools.health`, and
#: the traceback).  A note holds for the machine's boot it was written in: the
#: page cache, which every process reads, holds what was written until the
#: machine stops, so a note vouches for a shard written without fsync; after a
#: crash or a restart the notes are void and each shard is checked again.
VERIFIED_FILE = "verified.json"
_BOOT_KEY = "_boot"


def boot_id() -> str | None:
    """This boot's id (Linux); None where there is none (then notes never expire,
    and shards are written with fsync)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def read_verified(folder, name: str = VERIFIED_FILE) -> dict:
    """The notes of ``folder``'s :data:`VERIFIED_FILE` ({shard file name: [size, mtime_ns]});
    empty where the file is missing or unreadable, or written in another boot.
    ``name``: another notes file of the same kind (:mod:`swgpu_tools.health`)."""
    try:
        with open(os.path.join(folder, name)) as fh:
            notes = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(notes, dict) or notes.pop(_BOOT_KEY, None) != boot_id():
        return {}
    return notes


def write_verified(folder, notes: dict, name: str = VERIFIED_FILE) -> None:
    """Replace ``folder``'s notes with ``notes`` (of this boot)."""
    write_json(os.path.join(folder, name), {**notes, _BOOT_KEY: boot_id()})


def note_stamp(st: os.stat_result) -> list[int]:
    """What a note records of a file (its ``os.stat``): size and modification time."""
    return [st.st_size, st.st_mtime_ns]


def is_noted(path, st: os.stat_result, notes: dict | None = None) -> bool:
    """Whether a note of this boot vouches for the shard at ``path`` as it is
    (``st``: its ``os.stat``); ``notes``: its folder's, if already read."""
    if notes is None:
        notes = read_verified(os.path.dirname(os.fspath(path)) or ".")
    return notes.get(os.path.basename(os.fspath(path))) == note_stamp(st)


def note_verified(stamps: dict) -> None:
    """Note shards known whole (just written, or read with their digest checked) in
    their folder's :data:`VERIFIED_FILE`: ``stamps`` maps a shard's path to its
    ``os.stat`` (for a read, taken before it, so a change during or after the read
    is still caught).  OutputError (or OSError) where the note cannot be written."""
    by_dir: dict = {}
    for path, st in stamps.items():
        by_dir.setdefault(os.path.dirname(os.fspath(path)) or ".", {})[
            os.path.basename(os.fspath(path))
        ] = note_stamp(st)
    for folder, notes in by_dir.items():
        add_verified(folder, notes)


def add_verified(folder, notes: dict, name: str = VERIFIED_FILE) -> None:
    """Add ``notes`` ({name: [size, mtime_ns]}) to ``folder``'s :data:`VERIFIED_FILE`
    (or the notes file ``name``).  OutputError where the note cannot be written."""
    verified = read_verified(folder, name)
    verified.update(notes)
    write_verified(folder, verified, name)


def read_database_info(path) -> dict:
    """Load ``database.json`` written by the shard step."""
    try:
        with open(path) as fh:
            info = json.load(fh)
        int(info["sequences"]), int(info["residues"])
    except FileNotFoundError:
        raise InputError(f"{os.fspath(path)}: file not found") from None
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{os.fspath(path)}: not a swgpu database summary") from None
    return info
