"""Step ``traceback``: ``hits.tsv`` -> one alignment per hit, in every chosen format.

Writes the alignment table (TSV with the chosen BLAST columns, with or
without a header), and where asked the same alignments as SAM, Parquet and
pairwise text, next to it (``alignments.sam``, ``alignments.parquet``,
``alignments.txt``).  With ``internal_path`` it also keeps what each alignment was made from and
is (accessions, score, coordinates, CIGAR, both sequences' hashes; a TSV whose
first line names the alignment code's digest), from which the next run reuses
unchanged alignments (:mod:`swgpu_tools.engine.traceback`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..engine.traceback import REUSE_COLUMNS, code_digest, traceback_columns
from ..errors import InputError, OutputError
from ..io.fasta import read_fasta
from ..io.fields import parse_columns
from ..io.formats import FORMATS, write_pairwise, write_parquet, write_sam
from ..io.shardfile import is_noted, note_verified, read_shard_records, read_verified, shard_of
from ..io.stepstats import StepTimer
from ..io.tables import HITS_COLUMNS, read_table, write_table
from ..logs import get_logger
from ..scoring import ScoringScheme
from ..sequences import SequenceSet

log = get_logger(__name__)


def preload() -> None:
    """Import and load what this step's first call would (pandas, Numba, the
    alignment package, the fields kernel): ``swgpu run-steps`` calls it on a thread
    while the merge runs, so that the traceback starts warm."""
    import pandas  # noqa: F401

    from .. import alignment  # noqa: F401
    from ..io.fields import load_kernel

    load_kernel()


def read_hits(path):
    return read_table(path, HITS_COLUMNS, what="hits table")


def load_subjects(shard_paths, wanted: set, stats: dict | None = None) -> SequenceSet:
    """The sequences with accessions in ``wanted`` from the given shard files.

    Only shards that can hold a wanted accession are read (a sequence's shard
    depends only on its accession).  ``stats``: gets ``subject_shards`` (read)
    and ``subject_shards_hashed`` (of them, those whose digest was checked: no
    note of this boot vouched for them).
    """
    paths = [os.fspath(p) for p in shard_paths]
    # each shard is asked for the accessions it can hold (all of them where the
    # files are not the numbered shards of one database)
    asked = {p: wanted for p in paths}
    names = [os.path.basename(p) for p in paths]
    if all(n.startswith("shard-") and n.endswith(".swdb") for n in names) and paths:
        numbers = [int(n[6:-5]) for n in names]
        if sorted(numbers) == list(range(len(paths))):
            by_number: dict[int, set] = {}
            for a in wanted:
                by_number.setdefault(shard_of(a, len(paths)), set()).add(a)
            asked = {paths[numbers.index(k)]: accs for k, accs in sorted(by_number.items())}
    todo = [path for path in paths if path in asked]
    stamps = {p: os.stat(p) for p in todo if os.path.exists(p)}
    # a shard the scoring job checked in this boot (and that did not change since)
    # is not hashed again, and only the wanted records' pages are read
    notes = {d: read_verified(d) for d in {os.path.dirname(p) or "." for p in stamps}}
    trusted = {p: is_noted(p, st, notes[os.path.dirname(p) or "."]) for p, st in stamps.items()}
    if stats is not None:
        stats["subject_shards"] = len(todo)
        stats["subject_shards_hashed"] = sum(not t for t in trusted.values())

    def read(p):
        return read_shard_records(p, asked[p], trusted=trusted.get(p, False))

    if len(todo) <= 1:
        parts = [read(p) for p in todo]
    else:  # reading and hashing let go of the GIL: shards at once
        with ThreadPoolExecutor(max_workers=min(len(todo), 8)) as pool:
            parts = list(pool.map(read, todo))
    # each shard's digest was checked: the next run's start-up check need not read
    # them again (Snakemake touched them after the shard step, whose note is stale);
    # best effort: a note that cannot be written only costs a check later
    try:
        note_verified({p: st for p, st in stamps.items() if not trusted[p]})
    except (OSError, OutputError):
        pass
    return SequenceSet.concat([p for p in parts if len(p)])


#: Reads started ahead by :func:`prefetch_previous`, by what they read: (thread, box).
_PREFETCHED: dict = {}


def _prefetch_key(shard_paths, previous_internal):
    try:
        st = os.stat(previous_internal)
    except (OSError, TypeError):
        return None
    shards = tuple(os.path.realpath(os.fspath(p)) for p in shard_paths)
    return (shards, os.path.realpath(previous_internal), st.st_ino, st.st_size, st.st_mtime_ns)


def _read_ahead(shard_paths, previous_internal, box: dict) -> None:
    """Fill ``box`` as :func:`prefetch_previous` reads ahead (an error under "error")."""
    t0 = time.perf_counter()
    try:
        box["previous"] = read_internal(previous_internal)
        t1 = time.perf_counter()
        fields: dict = {}
        wanted = set(box["previous"][0]["sacc"])
        box["subjects"] = load_subjects(shard_paths, wanted, fields)
        box["fields"] = fields
        box["seconds"] = {"previous": t1 - t0, "subjects": time.perf_counter() - t1}
    except Exception as exc:  # noqa: BLE001 - the step reads them itself
        box["error"] = exc


def _read_ahead_forked(shard_paths, previous_internal, box: dict):
    """:func:`_read_ahead` in a forked child that sends the box back pickled (so that
    its reading, mostly Python, does not hold this process's interpreter lock beside
    the merge); a thread here takes it in.  Returns that thread.

    The pickle (~26 MB for a re-scan of 2,000 queries) goes through an anonymous
    memory file, taken in by one read: through the pipe, 64 KB at a time, each chunk
    waited for the interpreter lock beside the merge (0.26 s for 26 MB on an H200
    host, run 268).  The pipe carries only the pickle's size and time (and the pickle
    itself where there is no memory file)."""
    import pickle
    import struct

    from ..forked import run_child

    read_end, write_end = os.pipe()
    try:
        memfd = os.memfd_create("swgpu-read-ahead") if hasattr(os, "memfd_create") else None
    except OSError:
        memfd = None
    parent = os.getpid()
    forked_at = time.time()  # the timeline (box["timeline"]): seconds since the fork
    try:
        pid = os.fork()
    except OSError:
        for fd in (read_end, write_end, memfd):
            if fd is not None:
                os.close(fd)
        raise
    if pid == 0:  # the child: never returns
        os.close(read_end)

        def work() -> None:
            got: dict = {"timeline": {"child_began": time.time() - forked_at}}
            _read_ahead(shard_paths, previous_internal, got)
            if "error" in got:
                got["error"] = RuntimeError(str(got["error"]))  # picklable
            got["timeline"]["child_read"] = time.time() - forked_at
            data = memoryview(pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL))
            with os.fdopen(write_end, "wb") as fh:
                if memfd is not None:
                    done = 0
                    while done < len(data):
                        done += os.write(memfd, data[done:])
                else:
                    fh.write(data)
                # last: when the pickle was made (seconds since the fork), its size
                fh.write(struct.pack("<dq", time.time() - forked_at, len(data)))

        run_child(parent, work)
    os.close(write_end)

    def take() -> None:
        try:
            with os.fdopen(read_end, "rb") as fh:
                data = fh.read()
            received = time.time() - forked_at
            os.waitpid(pid, 0)
            pickled, size = struct.unpack("<dq", data[-16:])
            if memfd is not None:
                data = bytearray(size)
                view, done = memoryview(data), 0
                while done < size:
                    n = os.preadv(memfd, [view[done:]], done)
                    if n <= 0:
                        raise EOFError("read-ahead: short memory file")
                    done += n
                received = time.time() - forked_at
            else:
                data = memoryview(data)[:-16]
            box.update(pickle.loads(data))
            box.setdefault("timeline", {}).update(
                child_pickled=pickled,
                pickle_bytes=size,
                received=received,
                unpickled=time.time() - forked_at,
            )
        except Exception as exc:  # noqa: BLE001 - a child that failed: the step reads
            box["error"] = exc
        finally:
            if memfd is not None:
                os.close(memfd)
        box["forked_at"] = forked_at

    thread = threading.Thread(target=take, name="swgpu-traceback-prefetch", daemon=True)
    thread.start()
    return thread


def prefetch_previous(shard_paths, previous_internal, forked: bool = False) -> bool:
    """Start reading, on a thread, a re-scan's previous alignments (``previous_internal``)
    and the records of their subjects from ``shard_paths`` (``swgpu run-steps`` calls
    this before the merge: most of a re-scan's hits are the previous release's, so
    the traceback then reads only the records of the new ones).  ``forked``: the
    reading in a forked child instead (:func:`_read_ahead_forked`; call it before
    this process starts other threads; a thread where fork fails).  False when there
    is nothing to read ahead.
    :func:`traceback_hits` takes it when its arguments are the same and the file did
    not change; an error here leaves the reading to it."""
    key = _prefetch_key(shard_paths, previous_internal)
    if key is None or key in _PREFETCHED:
        return False
    box: dict = {}
    thread = None
    if forked:
        with contextlib.suppress(OSError):  # no fork here: a thread
            thread = _read_ahead_forked(shard_paths, previous_internal, box)
    if thread is None:
        thread = threading.Thread(
            target=_read_ahead,
            args=(shard_paths, previous_internal, box),
            name="swgpu-traceback-prefetch",
            daemon=True,
        )
        thread.start()
    _PREFETCHED[key] = (thread, box)
    return True


def _take_prefetched(shard_paths, previous_internal) -> dict | None:
    """What :func:`prefetch_previous` read for these arguments (waiting for it), or None."""
    key = _prefetch_key(shard_paths, previous_internal)
    item = _PREFETCHED.pop(key, None) if key is not None else None
    if item is None:
        return None
    thread, box = item
    thread.join()
    return box if "subjects" in box else None


def output_paths(out_path, formats) -> dict[str, str]:
    """Where each format goes: the TSV at ``out_path``, the others beside it."""
    base = os.fspath(out_path)
    stem = base[:-4] if base.endswith(".tsv") else base
    return {f: (base if f == "tsv" else stem + FORMATS[f]) for f in formats}


def write_alignments(
    table, queries, subjects, scheme, paths: dict[str, str], columns, header: bool = True
) -> dict[str, str]:
    """Write the alignment table (a DataFrame, or a dict of its columns) in each format
    of ``paths`` ({format: path})."""
    if isinstance(table, dict) and set(paths) - {"tsv"}:  # the other writers take a DataFrame
        import pandas as pd

        table = pd.DataFrame(table)
    for fmt in paths:  # the TSV (the workflow's declared output) last
        if fmt == "sam":
            write_sam(table, queries, subjects, paths[fmt])
        elif fmt == "parquet":
            write_parquet(table, paths[fmt], columns)
        elif fmt == "pairwise":
            write_pairwise(table, queries, scheme, paths[fmt])
    if "tsv" in paths:
        write_table(table, paths["tsv"], columns, header=header)
    return paths


def traceback_hits(
    hits_path,
    queries_path,
    shard_paths,
    out_path,
    scheme: ScoringScheme,
    threads: int | None = None,
    columns=None,
    header: bool = True,
    formats=("tsv",),
    internal_path=None,
    previous_internal=None,
    stats_path=None,
):
    """Align every hit of ``hits_path`` and write the alignment outputs; returns the
    full alignment table as a dict of its columns
    (:func:`swgpu_tools.engine.traceback.traceback_columns`)."""
    cols = parse_columns(columns)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown formats {unknown}")
    timer = StepTimer("traceback")
    with timer.phase("read"):
        t = [time.perf_counter()]
        hits = read_hits(hits_path)
        t.append(time.perf_counter())
        queries = read_fasta(queries_path)
        t.append(time.perf_counter())
        asked = time.time()
        ahead = _take_prefetched(shard_paths, previous_internal) if previous_internal else None
        if ahead is not None and "forked_at" in ahead:  # the read-ahead child's timeline
            timer.fields["read_ahead_timeline_s"] = {
                **{k: round(v, 4) for k, v in ahead.get("timeline", {}).items()},
                "asked": round(asked - ahead["forked_at"], 4),
                "taken": round(time.time() - ahead["forked_at"], 4),
            }
        wanted = set(hits["sacc"])
        if ahead is not None:  # read beside the merge: only the new subjects' records now
            have = ahead["subjects"]
            missing = wanted - set(have.ids)
            fields: dict = {}
            more = load_subjects(shard_paths, missing, fields) if missing else None
            subjects = SequenceSet.concat([have, more]) if more is not None and len(more) else have
            timer.fields["subject_shards"] = ahead["fields"].get("subject_shards", 0)
            timer.fields["subject_shards_hashed"] = ahead["fields"].get(
                "subject_shards_hashed", 0
            ) + fields.get("subject_shards_hashed", 0)
            timer.fields["read_ahead_s"] = {k: round(v, 4) for k, v in ahead["seconds"].items()}
            timer.fields["read_ahead_subjects"] = [len(have), len(missing)]
        else:
            subjects = load_subjects(shard_paths, wanted, timer.fields)
        t.append(time.perf_counter())
        previous, previous_code = None, None
        if ahead is not None:
            previous, previous_code = ahead["previous"]
        elif previous_internal and os.path.exists(previous_internal):
            try:
                previous, previous_code = read_internal(previous_internal)
            except (InputError, OSError, ValueError) as exc:  # an unreadable cache: no reuse
                log.warning(f"previous alignments {previous_internal} not used ({exc})")
        t.append(time.perf_counter())
    timer.fields["read_phases_s"] = {
        k: round(b - a, 4)
        for k, a, b in zip(("hits", "queries", "subjects", "previous"), t[:-1], t[1:])
    }
    with timer.phase("align"):
        table = traceback_columns(
            hits, queries, subjects, scheme, threads, previous, previous_code, stats=timer.fields
        )
    with timer.phase("write"):
        if internal_path:
            _write_internal(table, internal_path, code_digest(scheme))
        paths = write_alignments(
            table, queries, subjects, scheme, output_paths(out_path, formats), cols, header
        )
    timer.fields["formats"] = list(formats)
    timer.write(stats_path)
    log.info(f"wrote {len(table['qacc']):,} alignments: {', '.join(paths.values())}")
    return table


def _write_internal(table, path, code: str) -> None:
    """The reuse table: a first line ``# swgpu alignment code <digest>``, then a TSV."""
    from ..io.atomic import atomic_write
    from ..io.tables import column_cells, write_rows

    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    cols = [column_cells(table, c) for c in REUSE_COLUMNS]
    with atomic_write(path) as fh:
        fh.write(f"# swgpu alignment code {code}\n")
        fh.write("\t".join(REUSE_COLUMNS) + "\n")
        write_rows(fh, cols)


def read_internal(path):
    """(DataFrame of :data:`REUSE_COLUMNS`, code digest) of a reuse table."""
    with open(path) as fh:
        first = fh.readline()
    if not first.startswith("# swgpu alignment code "):
        raise InputError(f"{path}: not a swgpu alignment reuse table")
    code = first.split()[-1]
    import csv

    import pandas as pd

    df = pd.read_csv(
        path,
        sep="\t",
        skiprows=1,
        dtype=str,
        quoting=csv.QUOTE_NONE,
        keep_default_na=False,
        na_filter=False,
    )
    if list(df.columns) != REUSE_COLUMNS:
        raise InputError(f"{path}: columns {list(df.columns)}, expected {REUSE_COLUMNS}")
    for c in ("score", "qstart", "qend", "sstart", "send"):
        df[c] = df[c].astype("int64")
    return df, code
