"""A database file's receipt and content digest (rule ``shard_db`` writes the receipt).

Snakemake never reads the database file itself.  A checksum-based rerun would
have it compute the file's sha256 when it builds the DAG (whenever the file is
newer than its receipt) and again when the receipt's job ends: 0.3-0.8 s of a
run on bench200M, all of it before the first step.  Instead, the workflow
passes the file's content digest (:func:`database_content`) as a parameter of
rule ``shard_db``:

* the digest is computed only when the file's stamp (size, times, inode) differs
  from the one noted with the last digest, by several threads over 16 MiB pieces;
* a new release changes the digest, so the shard step runs (Snakemake's
  ``params`` trigger) and writes the shards and a new receipt;
* a touched file has a new stamp and the same digest: no job runs;
* a new or changed file that ends part-way (a gzip stream cut short, a last record
  with no residues) is refused here, when the workflow is parsed, before any job
  could touch the previous release's shards (:func:`check_complete`).

Standard library only: this runs when the workflow is parsed and in the first
job, and each import is time on the way to the first result.
"""

from __future__ import annotations

import json
import mmap
import os

from ..cpus import usable_cpus
from ..errors import InputError, OutputError
from ..io.atomic import write_json
from ..io.gzipped import DECOMPRESS_ERRORS, GZIP_MAGIC, gzip_open
from ..io.piecedigest import NAME as DIGEST_NAME
from ..io.piecedigest import digest_of
from ..logs import get_logger

log = get_logger(__name__)


def file_stamp(path) -> list[int]:
    """What changes whenever a file's content may have: size, modification and
    change times (the latter cannot be set back), inode and device."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def content_digest(path, threads: int | None = None) -> str:
    """``sha256-16MiB:<hex>`` (:mod:`swgpu_tools.io.piecedigest`): the sha256 of the
    file's size and of the sha256 of each 16 MiB piece in order, the pieces hashed
    by ``threads`` threads (hashlib lets go of the interpreter while it hashes)."""
    threads = threads or min(usable_cpus(), 16)
    if not os.path.getsize(path):  # (an empty file cannot be mapped)
        return f"{DIGEST_NAME}:{digest_of(b'', threads)}"
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
        return f"{DIGEST_NAME}:{digest_of(view, threads)}"


#: Bytes of the file's end (decompressed) that :func:`check_complete` reads.
TAIL_BYTES = 1 << 16


def check_complete(database) -> None:
    """Refuse (:class:`~swgpu_tools.errors.InputError`) a database file that ends
    part-way: a gzip stream cut short or failing its CRC (the whole file is
    decompressed: seconds per GB), or a last record with no residues (a header cut
    off, or no sequence after it).  A plain file cut at a line break inside a
    sequence is still valid FASTA and cannot be told apart."""
    path = os.fspath(database)
    with open(path, "rb") as f:
        gz = f.read(2) == GZIP_MAGIC
        if not gz:
            f.seek(max(0, os.fstat(f.fileno()).st_size - TAIL_BYTES))
            tail = f.read()
    if gz:
        tail, n = b"", 0
        try:
            with gzip_open(path) as g:
                while chunk := g.read(1 << 24):
                    n += len(chunk)
                    tail = (tail + chunk)[-TAIL_BYTES:]
        except DECOMPRESS_ERRORS as exc:
            raise InputError(
                f"{path}: the gzip stream is damaged or cut short after {n:,} bytes of "
                f"FASTA ({exc}); nothing was changed.  Is the download complete?"
            ) from None
    body = tail.rstrip()
    nl = body.rfind(b"\n>")
    if nl < 0 and not body.startswith(b">"):
        return  # the last record began before the tail: it has residues
    start = nl + 1  # (0: the record the tail starts with)
    end = body.find(b"\n", start)
    if end < 0 or not body[end:].strip():
        header = body[start : end if end >= 0 else len(body)][:80].decode("ascii", "replace")
        raise InputError(
            f"{path}: its last record ({header!r}) has no residues: the file looks cut "
            "short; nothing was changed.  Is the download complete?"
        )


def database_content(database, note_path) -> str:
    """The database file's content digest.  It is computed only when the file's
    stamp differs from the one in ``note_path`` (a small JSON file, written then;
    the workflow keeps it under ``.snakemake/``, so that a dry run in a new
    folder makes no ``results/``).  A note that cannot be read or written only
    costs the digest again."""
    stamp = file_stamp(database)
    path = os.path.abspath(os.fspath(database))
    try:
        with open(note_path, encoding="utf-8") as f:
            note = json.load(f)
        if note.get("database") == path and note.get("stamp") == stamp:
            return str(note["content"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    check_complete(database)  # a new or changed file: refused before any job runs
    content = content_digest(database)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(note_path)), exist_ok=True)
        write_json(note_path, {"database": path, "stamp": stamp, "content": content})
    except (OSError, OutputError):
        pass
    return content


def write_source_receipt(database, out_path, content: str | None = None) -> dict:
    """Write ``out_path``, the receipt of a database file: its path, size and content
    digest (``content``, as the workflow computed it; None: :func:`content_digest`
    here).  The same content gives the same receipt.

    The shard step writes it beside the shards, last (``swgpu shard --receipt``;
    workflow/rules/shard_db.smk): the record of the release the shards hold.
    """
    content = content or content_digest(database)
    receipt = {
        "database": os.path.abspath(os.fspath(database)),
        "bytes": os.path.getsize(database),
        "content": content,
    }
    write_json(out_path, receipt)
    log.info(
        f"{receipt['database']}: {receipt['bytes']:,} bytes, new or changed (content "
        f"{content}): {out_path}"
    )
    return receipt
