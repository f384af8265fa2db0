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
import mmap
import multiprocessing
import os
import queue
import resource
import shutil
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from ..cpus import usable_cpus
from ..errors import InputError, OutputError
from ..io.atomic import write_json
from ..io.fasta import iter_unique_fasta
from ..io.gzipped import is_gzip
from ..io.shardfile import note_verified, read_shard, receipt_name, shard_file_name
from ..io.stepstats import StepTimer
from ..later import later
from ..logs import get_logger

log = get_logger(__name__)


#: Memory the step aims to stay within (all its processes together): bounds the
#: size of the pieces parsed at once and how many shards are written at once.
MEMORY_BYTES = 2 << 30
#: What the main process holds meanwhile (the read's summary, the digest ring, its
#: Python): the shard writers share the rest of MEMORY_BYTES.  Measured on the
#: H100 host with 2e9 residues in 8 shards: 8 writers at once and the main
#: process took 2,183 MiB of anonymous memory (writers about 240 MB each); 7 at
#: once (a 512 MiB reserve) 2,013 MiB; the reserve leaves room for the estimate's
#: error (benchmarks/RESULTS-shard_db.md).
MAIN_RESERVE_BYTES = 1 << 30
#: Largest piece of the file a worker parses at once.
MAX_RANGE_BYTES = 8 << 20
MIN_RANGE_BYTES = 1 << 20
#: Databases smaller than this are read by one process unless ``threads`` says
#: otherwise (starting workers would take longer).
SMALL_BYTES = 4 << 20


def _env_workers() -> int:
    """``$SWGPU_SHARD_WORKERS`` as a positive int (unset or not one: no limit)."""
    try:
        value = int(os.environ.get("SWGPU_SHARD_WORKERS", ""))
    except ValueError:
        return 1 << 30
    return value if value > 0 else 1 << 30


def shard_database(
    database,
    out_dir,
    n_shards: int,
    stats_path=None,
    threads: int | None = None,
    range_bytes: int | None = None,
    receipt_path=None,
    file_digest: str | None = None,
) -> dict:
    """Split a FASTA database into ``n_shards`` shard files and ``out_dir/database.json``.

    ``threads`` worker processes (default: every CPU this process may use) parse
    pieces of the file (byte ranges of a plain file, each read by its worker;
    chunks of a gzip file, decompressed here) and spill each piece's records,
    grouped by shard, to a file in a temporary folder in ``out_dir``; then each
    shard's records are gathered from it, sorted and written, several shards at
    once.  Memory: a few pieces (``range_bytes``, default at most 8 MiB) per
    worker, then the shards being written (as many at once as
    :data:`MEMORY_BYTES` allows), whatever the database's size.  Nothing in ``out_dir`` changes until
    the whole database has been read without error and no accession repeats
    (a truncated or malformed release changes nothing): errors are those of the
    sequential reader (:func:`swgpu_tools.io.fasta_blocks.iter_blocks`), which
    reads the file again to name the first problem's line and record.
    ``database.json`` holds ``content_sha256``, the digest of the records
    (headers, residues, lengths), which names the release.

    ``receipt_path``: also write the database file's receipt there, last
    (:func:`swgpu_tools.steps.receipt.write_source_receipt`: its path, size and
    content digest: ``file_digest`` where the workflow computed it, else computed
    here), so that the shard files' set is complete where the receipt is.
    """
    from ..io.fasta_blocks import BLOCK_BYTES, plan_ranges

    if n_shards < 1:
        raise InputError(f"shards must be at least 1, got {n_shards}")
    if threads is not None and threads < 1:
        raise InputError(f"threads must be at least 1, got {threads}")
    from ..io.fasta import STDIN, _open

    name = os.fspath(database)
    if name == STDIN:
        raise InputError("the database must be a file, not standard input")
    _open(database).close()  # the reader's errors for a missing path or a folder
    size = os.path.getsize(name)
    # each worker holds a few pieces and a Python of its own (about 64 MiB): no
    # more than MEMORY_BYTES allows, unless threads asks for more.  $SWGPU_SHARD_WORKERS
    # (for measuring): at most that many (a re-scan's shard step runs beside the warm
    # process's Numba import and the GPU standby's start)
    cap = _env_workers()
    workers = threads or (
        min(usable_cpus(), max(1, MEMORY_BYTES >> 26), cap) if size >= SMALL_BYTES else 1
    )
    if "fork" not in multiprocessing.get_all_start_methods():
        workers = 1
    if range_bytes is None:
        range_bytes = (
            BLOCK_BYTES
            if workers == 1
            else max(
                MIN_RANGE_BYTES,
                min(MAX_RANGE_BYTES, size // (4 * workers), MEMORY_BYTES // (8 * workers)),
            )
        )
    ranges = plan_ranges(name, range_bytes)
    timer = StepTimer("shard_db")
    os.makedirs(out_dir, exist_ok=True)
    _remove_stale_spills(out_dir)
    spill_dir = tempfile.mkdtemp(prefix=f".spill-{os.getpid()}-", dir=out_dir)
    pool = ring = None
    # the digest streams of the pieces being parsed pass through a ring of slots
    # of memory shared with the workers (made before they are forked)
    n_slots = 2 * workers
    slot_bytes = range_bytes + range_bytes // 2
    spill_path = os.path.join(spill_dir, "partitions")
    if not (threads is not None or len(ranges or [0, 0]) > 1 or n_shards > 1):
        workers = 1  # one piece, one shard: nothing to do in parallel
    try:
        open(spill_path, "wb").close()
        if workers > 1:
            from .shard_spill import SpillState, init_worker

            ring = mmap.mmap(-1, n_slots * slot_bytes)
            context = multiprocessing.get_context("fork")
            state = SpillState(spill_path, context.Value("q", 0), ring, slot_bytes)
            pool = ProcessPoolExecutor(
                max_workers=workers, mp_context=context, initializer=init_worker, initargs=(state,)
            )
            run = pool
        else:
            from .shard_spill import Counter, SpillState

            run = _Inline(SpillState(spill_path, Counter()))
        release = _ReleaseDigest(ring, n_slots)
        try:
            with timer.phase("read"):
                read = _read(
                    run, workers, database, ranges, range_bytes, n_shards, spill_dir, release
                )
            with timer.phase("write"):
                per_shard = _write(run, workers, database, read, n_shards, spill_dir, spill_path)
                shard_s = [p.pop("seconds") for p in per_shard]
                shard_t = [p.pop("timings", None) or {} for p in per_shard]
            with timer.phase("digest"):  # what the release digest's thread has left
                content = release.hexdigest()
            with timer.phase("commit"):
                _commit(spill_dir, out_dir, n_shards)
        finally:
            release.stop()
    finally:
        if pool is not None:  # (their peak memory is counted once they are waited for)
            pool.shutdown(wait=True, cancel_futures=True)
        # the ring's unmapping and the spill folder's removal (0.08 s on a GPU host)
        # change no output: after the job's status where a command runs this
        later(_clean_up, ring, spill_dir)
    summary = {
        "sequences": read["sequences"],
        "residues": read["residues"],
        "shards": per_shard,
        "content_sha256": content,
    }
    for part in per_shard:  # the same bytes whenever the shard's content is the same
        write_json(os.path.join(out_dir, receipt_name(part["file"])), part)
    write_json(os.path.join(out_dir, "database.json"), summary)
    _record_verified(out_dir, [p["file"] for p in per_shard])
    if receipt_path is not None:
        from .receipt import write_source_receipt

        write_source_receipt(database, receipt_path, file_digest)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    timer.fields.update(
        sequences=read["sequences"],
        residues=read["residues"],
        shards=n_shards,
        workers=workers,
        pieces=read["pieces"],
        children_peak_rss_bytes=children,
        # seconds the workers spent on the pieces (all together), and
        # on each shard (the longest)
        pieces_s=round(read["piece_s"], 3),
        shard_max_s=round(max(shard_s), 3),
        # the longest shard's body: seconds hashing and writing (each on a thread)
        shard_max_body_s=shard_t[max(range(len(shard_s)), key=shard_s.__getitem__)],
    )
    rec = timer.write(stats_path)
    log.info(
        f"{read['sequences']:,} sequences, {read['residues']:,} residues in {n_shards} "
        f"shards, {rec['wall_s']:.1f} s ({size / max(rec['wall_s'], 1e-9) / 1e6:.0f} MB/s "
        f"of {'compressed ' if is_gzip(database) else ''}FASTA, {workers} "
        f"worker{'s' if workers > 1 else ''})"
    )
    return summary


class _Inline:
    """Runs jobs at once, in this process (one worker)."""

    def __init__(self, state):
        self.state = state

    def submit(self, fn, *args) -> Future:
        from .shard_spill import spill_chunk

        if fn is spill_chunk:
            args = (*args, self.state)
        fut: Future = Future()
        try:
            fut.set_result(fn(*args))
        except BaseException as exc:  # noqa: B036 (handed over like a pool's future)
            fut.set_exception(exc)
        return fut


def _jobs(database, ranges, range_bytes: int, n_shards: int, folder: str, inline: bool):
    """The pieces of the database, in file order."""
    from ..io.fasta_blocks import record_chunks
    from .shard_spill import SpillJob

    name = os.fspath(database)
    if ranges is not None:  # a plain file: each worker reads its own byte range
        for i, (begin, end) in enumerate(ranges):
            yield SpillJob(
                name,
                i,
                n_shards,
                folder,
                path=name,
                begin=begin,
                end=end,
                last=i == len(ranges) - 1,
                canon_inline=inline,
            )
        return
    # compressed (or starting with blank lines): the text is read here, parsed there
    for i, (data, line) in enumerate(record_chunks(database, range_bytes)):
        yield SpillJob(name, i, n_shards, folder, data=data, first_line=line, canon_inline=inline)


class _ReleaseDigest:
    """``content_sha256``: the sha256 of the digests of three streams, the
    headers (each followed by a newline), the residues and the lengths (``<i8``),
    of the records in file order.  The pieces' streams are hashed in file order
    on a thread (hashlib lets go of the GIL) that goes on while the shards are
    written.  They come in a slot of the ring when one is free (:meth:`slot`),
    else in a file: parsing never waits for the digest."""

    def __init__(self, ring, n_slots: int):
        self.ring = ring
        # sha256, not blake2b (before 2026-11-25, ``content_blake2b``): about twice
        # as fast where the CPU has SHA instructions, and this one thread's digest
        # of the whole database is what the shard step waits for with 4 shards or more
        self.digests = [hashlib.sha256() for _ in range(3)]
        self.queue: queue.Queue = queue.Queue()
        # the slot freed last is used first: only as many slots are ever touched
        # (made resident) as pieces are in flight
        self.free: queue.LifoQueue = queue.LifoQueue()
        for slot in range(n_slots if ring is not None else 0):
            self.free.put(slot)
        self.errors: list[BaseException] = []
        self.thread: threading.Thread | None = None

    def slot(self) -> int | None:
        """A free slot for the next piece, or None."""
        try:
            return self.free.get_nowait()
        except queue.Empty:
            return None

    def start(self) -> None:
        """Start the thread (after the worker processes were forked)."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="release-digest", daemon=True)
            self.thread.start()

    def put(self, canon, slot: int | None) -> None:
        """The next piece's streams (which were put in ``slot``, or not)."""
        if self.errors:
            raise self.errors[0]
        self.queue.put((canon, slot))

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            canon, slot = item
            try:
                if not self.errors:
                    self._hash(*canon)
            except BaseException as exc:  # noqa: B036 (raised by the main thread)
                self.errors.append(exc)
            finally:
                if slot is not None:
                    self.free.put(slot)

    def _hash(self, kind: str, where, sizes) -> None:
        if kind == "streams":
            for d, part in zip(self.digests, where):
                d.update(part)
            return
        if kind == "slot":
            data = memoryview(self.ring)[where : where + sum(sizes)]
        else:
            with open(where, "rb") as fh:
                data = memoryview(fh.read())
            os.unlink(where)
        with data:
            at = 0
            for d, n in zip(self.digests, sizes):
                with data[at : at + n] as part:
                    d.update(part)
                at += n

    def stop(self) -> None:
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()
            self.thread = None

    def hexdigest(self) -> str:
        self.stop()
        if self.errors:
            raise self.errors[0]
        return hashlib.sha256(b"".join(d.digest() for d in self.digests)).hexdigest()


def _read(
    run,
    workers: int,
    database,
    ranges,
    range_bytes: int,
    n_shards: int,
    folder: str,
    release: _ReleaseDigest,
) -> dict:
    """Parse and spill every piece; hand the digest streams to ``release``."""
    import numpy as np

    from .shard_spill import spill_chunk

    inline = isinstance(run, _Inline)
    records = np.zeros(n_shards, dtype=np.int64)
    nbytes = np.zeros(n_shards, dtype=np.int64)
    totals = {"sequences": 0, "residues": 0, "pieces": 0, "regions": [], "piece_s": 0.0}

    def collect(item) -> None:
        fut, slot = item
        out = fut.result()
        release.put(out["canon"], slot)
        totals["regions"].append(out["region"])
        np.add(records, out["records"], out=records)
        np.add(nbytes, out["bytes"], out=nbytes)
        before = totals["sequences"]
        totals["sequences"] += out["sequences"]
        totals["residues"] += out["residues"]
        totals["pieces"] += 1
        totals["piece_s"] += out["seconds"]
        if totals["sequences"] // 1_000_000 != before // 1_000_000:
            log.info(f"read {totals['sequences']:,} sequences ({totals['residues']:,} residues)")

    # at most 2 pieces per worker in flight (the rest wait as small jobs, or in
    # the chunk reader); results collected in file order
    pending: deque = deque()
    try:
        for job in _jobs(database, ranges, range_bytes, n_shards, folder, inline):
            job.slot = release.slot()
            pending.append((run.submit(spill_chunk, job), job.slot))
            release.start()
            if len(pending) >= 2 * workers:
                collect(pending.popleft())
        while pending:
            collect(pending.popleft())
    except InputError as exc:
        for fut, _ in pending:
            fut.cancel()
        if isinstance(exc, OutputError):
            raise
        _first_error(database, exc)
    if totals["sequences"] == 0:
        _first_error(
            database, InputError(f"{os.fspath(database)}: contains no FASTA records (empty file?)")
        )
    totals["records"], totals["bytes"] = records, nbytes
    return totals


def _first_error(database, exc: InputError):
    """Raise the sequential reader's first error (its line and record are those of
    the file, which a worker parsing a piece of it cannot know); ``exc`` if it
    finds none."""
    from ..io.fasta_blocks import iter_blocks

    for _ in iter_blocks(database):
        pass
    raise exc


def _footprint(records: int, nbytes: int) -> int:
    """About the memory a writer takes for a shard of this size: the accessions as
    Python objects, the order and the positions of every record (about 250 bytes
    a record), and the batches being hashed and written; its residues and
    headers are read from the mapped spill file, a batch at a time."""
    return 250 * records + nbytes // 20 + (64 << 20)


def _clean_up(ring, spill_dir) -> None:
    """Unmap the ring, remove the spill folder."""
    if ring is not None:
        ring.close()
    shutil.rmtree(spill_dir, ignore_errors=True)


def _remove_stale_spills(out_dir) -> None:
    """Remove the spill folders of shard steps that were killed (their process is
    gone): each holds up to a database's worth of data."""
    for name in os.listdir(out_dir):
        parts = name.split("-")
        if not (name.startswith(".spill-") and len(parts) >= 3 and parts[1].isdigit()):
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            log.info(
                f"removing {name} in {os.fspath(out_dir)}, left by a shard step that was stopped"
            )
            shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
        except OSError:  # alive (another user's, say): leave it
            pass


def _write(
    run, workers: int, database, read: dict, n_shards: int, folder: str, spill_path: str
) -> list[dict]:
    """Write every shard into the spill folder, as many at once as workers and
    :data:`MEMORY_BYTES` (less :data:`MAIN_RESERVE_BYTES`) allow; a repeated
    accession raises (nothing written
    to ``out_dir``)."""
    from .shard_spill import WriteJob, write_shard_from_spill

    cost = [_footprint(int(r), int(b)) for r, b in zip(read["records"], read["bytes"])]
    results: list[dict | None] = [None] * n_shards
    running: dict = {}
    duplicate = False
    k = 0
    while (k < n_shards and not duplicate) or running:
        while (
            k < n_shards
            and not duplicate
            and len(running) < workers
            and (
                not running or sum(running.values()) + cost[k] <= MEMORY_BYTES - MAIN_RESERVE_BYTES
            )
        ):
            job = WriteJob(k, read["regions"], spill_path, folder)
            running[run.submit(write_shard_from_spill, job)] = cost[k]
            k += 1
        done, _ = wait(list(running), return_when=FIRST_COMPLETED)
        for fut in done:
            del running[fut]
            out = fut.result()
            if out.get("duplicate"):
                duplicate = True
            else:
                results[out["k"]] = out
    if duplicate:
        _check_unique(database)
    per_shard = []
    for k, out in enumerate(results):
        log.debug(
            f"wrote shard {k + 1}: {out['sequences']:,} sequences, {out['residues']:,} residues"
        )
        per_shard.append(
            {
                "file": shard_file_name(k),
                "sequences": out["sequences"],
                "residues": out["residues"],
                "digest": out["digest"],
                "seconds": out["seconds"],
                "timings": out.get("timings"),
            }
        )
    return per_shard


def _commit(folder: str, out_dir, n_shards: int) -> None:
    """Move the shards written in the spill folder into ``out_dir`` (each keeps the
    permissions of the file it replaces, as :func:`atomic_write` does)."""
    from .shard_spill import spilled_shard_path

    for k in range(n_shards):
        final = os.path.join(out_dir, shard_file_name(k))
        try:
            mode = os.stat(final).st_mode & 0o7777
        except FileNotFoundError:
            mode = None
        src = spilled_shard_path(folder, k)
        if mode is not None:
            os.chmod(src, mode)
        os.replace(src, final)
    try:
        fd = os.open(out_dir, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_unique(database) -> None:
    """Duplicate accessions were found: the line reader names both lines."""
    for _ in iter_unique_fasta(database):  # raises with both line numbers
        pass
    raise InputError(f"{os.fspath(database)}: duplicate sequence ids")


def _record_verified(out_dir, names) -> None:
    """Note size and modification time of the shards just written (whole by
    construction), so the start-of-run check need not read them again.  Under
    Snakemake this note goes stale at once (it touches a job's outputs after the
    job); the traceback step notes the shards again when it has read them."""
    note_verified(
        {os.path.join(out_dir, name): os.stat(os.path.join(out_dir, name)) for name in names}
    )


def check_shards(shard_paths, quarantine_dir=None) -> list[str]:
    """Verify shard files (magic, sizes, digest); move corrupt ones aside.

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
                dest = os.path.join(
                    quarantine_dir, f"{os.path.basename(os.fspath(path))}.{int(time.time())}"
                )
                os.replace(path, dest)
                log.warning(
                    f"moved {os.fspath(path)} to {dest}; the next workflow run rebuilds "
                    f"it (snakemake reruns shard_db because the shard is missing)"
                )
        else:
            log.info(f"ok {os.fspath(path)}")
    if bad:
        raise InputError(
            f"{len(bad)} corrupt or truncated shard file(s): {', '.join(bad)}"
            + (
                "; moved aside, run the workflow again to rebuild them"
                if quarantine_dir is not None
                else "; re-run the shard step"
            )
        )
    return bad
