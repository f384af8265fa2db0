"""Reading FASTA files (plain or gzip, or standard input as ``-``) with clear errors.

Ids follow BLAST with ``-parse_seqids``: the **sequence id** (``seqid``,
BLAST's ``qseqid``/``sseqid``) is the header's first word
(``sp|P02232|LGB1_VICFA``); the **accession** (``id``, BLAST's
``qacc``/``sacc``) is the UniProt accession of ``sp|ACC|NAME`` and
``tr|ACC|NAME`` headers (``P02232``) and the first word otherwise.  The
accession keys every record inside swgpu (duplicates, shards, re-scans).  The
**title** (BLAST's ``stitle``) is the rest of the header after the first word
and one separator character, as makeblastdb stores it (``N/A`` when there is
none).

Every problem is an :class:`~swgpu_tools.errors.InputError` naming the file,
and where it applies the line, the record id and the residue position:
missing or unreadable file, empty file, a file that is not FASTA, a record
with no residues, a duplicate id, a character that is not a residue, an id
with control characters.  A UTF-8 byte-order mark at the start of the file is
skipped.  Tabs and other control characters inside a title are replaced by
spaces (tables are tab-separated).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from ..alphabet import canonical, invalid_characters
from ..errors import InputError
from ..ids import parse_id, seqid_of, title_of  # noqa: F401 (re-exported)
from ..sequences import SequenceSet
from .gzipped import DECOMPRESS_ERRORS, GZIP_MAGIC, gzip_open, is_gzip

_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")
_BOM = b"\xef\xbb\xbf"

#: What ``-`` as a file name reads.
STDIN = "-"


class FastaRecord(NamedTuple):
    id: str  # accession (see the module doc)
    header: str  # the header line without '>' and its line end
    sequence: bytes  # canonical letters
    line: int  # 1-based line number of the header


def _open(path):
    if os.fspath(path) == STDIN:
        data = sys.stdin.buffer
        head = data.peek(2)[:2] if hasattr(data, "peek") else b""
        if head == GZIP_MAGIC:
            return gzip_open(data)
        return data
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{path}: file not found")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, not a FASTA file")
    try:
        if is_gzip(path):
            return gzip_open(path)
        return open(path, "rb", buffering=1 << 20)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _describe(byte: int) -> str:
    if 32 < byte < 127:
        return repr(chr(byte))
    if byte == 32:
        return "a space"
    if byte == 9:
        return "a tab"
    if byte >= 128:
        return f"a non-ASCII byte (0x{byte:02x})"
    return f"a control character (0x{byte:02x})"


def _display_name(path) -> str:
    return "standard input" if os.fspath(path) == STDIN else os.fspath(path)


def iter_fasta(path) -> Iterator[FastaRecord]:
    """Yield the records of a FASTA file, validated, in file order.

    Raises InputError for every problem listed in the module docstring except
    duplicate ids (see :func:`read_fasta`).
    """
    yield from records_of(_display_name(path), _open(path))


def records_of(name: str, fh, lineno: int = 0, whole_file: bool = True) -> Iterator[FastaRecord]:
    """The records read from the binary stream ``fh`` (closed after), errors naming
    ``name``; ``lineno``: lines before the stream's first; ``whole_file``: the
    stream is a whole file (a byte-order mark may start it, and it must hold a
    record)."""
    header: bytes | None = None
    header_line = 0
    chunks: list[bytes] = []
    n_residues = 0
    n_records = 0
    first = lineno + 1

    def finish():
        seq = b"".join(chunks)
        sid = parse_id(header)
        bad = _CONTROL.search(seqid_of(header.decode("latin-1")).encode("latin-1"))
        if bad:
            raise InputError(
                f"{name}: line {header_line}: the sequence id contains "
                f"{_describe(bad.group()[0])}, which tables cannot hold"
            )
        try:
            sid_str = sid.decode("ascii")
        except UnicodeDecodeError:
            raise InputError(
                f"{name}: line {header_line}: the sequence id is not plain ASCII"
            ) from None
        header_str = _CONTROL.sub(b" ", header).decode("utf-8", "replace")
        if not sid_str:
            raise InputError(f"{name}: line {header_line}: header has no sequence id")
        if not seq:
            raise InputError(f"{name}: line {header_line}: record '{sid_str}' has no residues")
        return FastaRecord(sid_str, header_str, seq, header_line)

    try:
        with fh:
            for raw in fh:
                lineno += 1
                if lineno == first and whole_file and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                line = raw.rstrip(b"\n")
                if line.startswith(b">"):
                    if header is not None:
                        yield finish()
                        n_records += 1
                    header = line[1:].rstrip(b"\r")
                    header_line = lineno
                    chunks = []
                    n_residues = 0
                    continue
                if header is None:
                    if not line.strip():
                        continue
                    raise InputError(
                        f"{name}: not a FASTA file: line {lineno} comes before any '>' header line"
                    )
                bad = invalid_characters(line)
                if bad:
                    if not line.strip():
                        continue  # a blank line inside a record is harmless
                    col = line.index(bad[:1]) + 1
                    sid = parse_id(header).decode("ascii", "replace")
                    residue = n_residues + len(canonical(line[: col - 1])) + 1
                    raise InputError(
                        f"{name}: line {lineno}, column {col}: record '{sid}': "
                        f"{_describe(bad[0])} at residue position {residue} is not "
                        f"a sequence letter"
                    )
                piece = canonical(line)
                chunks.append(piece)
                n_residues += len(piece)
            if header is not None:
                yield finish()
                n_records += 1
    except DECOMPRESS_ERRORS as exc:
        raise InputError(f"{name}: cannot read (corrupt or truncated?): {exc}") from None
    if n_records == 0 and whole_file:
        raise InputError(f"{name}: contains no FASTA records (empty file?)")


def iter_unique_fasta(path) -> Iterator[FastaRecord]:
    """:func:`iter_fasta`, and an InputError at the first repeated accession."""
    first_line: dict[str, int] = {}
    for rec in iter_fasta(path):
        if rec.id in first_line:
            raise InputError(
                f"{_display_name(path)}: line {rec.line}: duplicate sequence id '{rec.id}' "
                f"(first seen at line {first_line[rec.id]})"
            )
        first_line[rec.id] = rec.line
        yield rec


#: While :func:`remember_reads` is on: what :func:`read_fasta` read, by file (path,
#: size, modification time, inode) and ``unique``.
_remembered: dict | None = None


@contextmanager
def remember_reads():
    """Within it, :func:`read_fasta` of a file unchanged since it was read returns the
    same :class:`SequenceSet` again: a job that runs several steps in one process
    (``swgpu run-steps``: merge, traceback, release, plots) reads its query file
    once.  Off elsewhere, so that an API user's large database is not kept alive."""
    global _remembered
    outer = _remembered
    if outer is None:
        _remembered = {}
    try:
        yield
    finally:
        _remembered = outer


def _file_key(path, unique: bool):
    name = os.fspath(path)
    if name == STDIN:
        return None
    try:
        st = os.stat(name)
    except OSError:
        return None  # the reader names the problem
    return (os.path.realpath(name), st.st_size, st.st_mtime_ns, st.st_ino, unique)


def remembered(path) -> SequenceSet | None:
    """What :func:`read_fasta` read of ``path`` (unchanged since) while
    :func:`remember_reads` is on, else None."""
    if _remembered is None:
        return None
    key = _file_key(path, True)
    return _remembered.get(key) if key else None


def read_fasta(path, unique: bool = True) -> SequenceSet:
    """Read a whole FASTA file (``-``: standard input) into a :class:`SequenceSet`.

    With ``unique`` (the default) accessions must be unique.
    """
    key = _file_key(path, unique) if _remembered is not None else None
    if key is not None and key in _remembered:
        return _remembered[key]
    records = iter_unique_fasta(path) if unique else iter_fasta(path)
    ids: list[str] = []
    headers: list[str] = []
    seqs: list[bytes] = []
    for rec in records:
        ids.append(rec.id)
        headers.append(rec.header)
        seqs.append(rec.sequence)
    out = SequenceSet.from_sequences(ids, seqs, headers)
    if key is not None and _remembered is not None:
        _remembered[key] = out
    return out
