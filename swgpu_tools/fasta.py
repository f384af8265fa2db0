"""Reading FASTA files (plain or gzip) with clear errors.

Ids: a UniProt header (``>sp|P12345|NAME_HUMAN desc`` or ``>tr|...``) gives
its accession (``P12345``); any other header gives its first word.

Every problem is an :class:`~swgpu_tools.errors.InputError` naming the file,
and where it applies the line, the record id and the residue position:
missing or unreadable file, empty file, a file that is not FASTA, a record
with no residues, a duplicate id, a character that is not a residue.
"""
from __future__ import annotations

import gzip
import os
import re
import zlib
from typing import Iterator, NamedTuple

import numpy as np

from .alphabet import canonical, invalid_characters
from .errors import InputError
from .sequences import SequenceSet

_UNIPROT = re.compile(rb"^(?:sp|tr)\|([^|\s]+)\|")


class FastaRecord(NamedTuple):
    id: str
    header: str
    sequence: bytes  # canonical letters
    line: int  # 1-based line number of the header


def parse_id(header: bytes) -> bytes:
    """Sequence id from a header line without its ``>``."""
    m = _UNIPROT.match(header)
    if m:
        return m.group(1)
    parts = header.split(None, 1)
    return parts[0] if parts else b""


def _open(path) -> "object":
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{path}: file not found")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, not a FASTA file")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
        if magic == b"\x1f\x8b":
            return gzip.open(path, "rb")
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


def iter_fasta(path) -> Iterator[FastaRecord]:
    """Yield the records of a FASTA file, validated, in file order.

    Raises InputError for every problem listed in the module docstring except
    duplicate ids (see :func:`read_fasta`).
    """
    name = os.fspath(path)
    fh = _open(path)
    header = None
    header_line = 0
    chunks: list[bytes] = []
    n_residues = 0
    n_records = 0
    lineno = 0

    def finish():
        seq = b"".join(chunks)
        sid = parse_id(header)
        try:
            sid_str = sid.decode("ascii")
            header_str = header.decode("utf-8", "replace").rstrip("\r")
        except UnicodeDecodeError:
            raise InputError(
                f"{name}: line {header_line}: the sequence id is not plain ASCII"
            ) from None
        if not sid_str:
            raise InputError(f"{name}: line {header_line}: header has no sequence id")
        if not seq:
            raise InputError(f"{name}: line {header_line}: record '{sid_str}' has no residues")
        return FastaRecord(sid_str, header_str, seq, header_line)

    try:
        with fh:
            for raw in fh:
                lineno += 1
                line = raw.rstrip(b"\n")
                if line.startswith(b">"):
                    if header is not None:
                        yield finish()
                        n_records += 1
                    header = line[1:].strip()
                    header_line = lineno
                    chunks = []
                    n_residues = 0
                    continue
                if header is None:
                    if not line.strip():
                        continue
                    raise InputError(
                        f"{name}: not a FASTA file: line {lineno} comes before any "
                        f"'>' header line"
                    )
                bad = invalid_characters(line)
                if bad:
                    col = line.index(bad[:1]) + 1
                    sid = parse_id(header).decode("ascii", "replace")
                    residue = n_residues + len(canonical(line[: col - 1])) + 1
                    if not line.strip():
                        # a blank line inside a record is harmless
                        continue
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
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{name}: cannot read (corrupt or truncated?): {exc}") from None
    if n_records == 0:
        raise InputError(f"{name}: contains no FASTA records (empty file?)")


def iter_unique_fasta(path) -> Iterator[FastaRecord]:
    """:func:`iter_fasta`, and an InputError at the first repeated id."""
    first_line: dict[str, int] = {}
    for rec in iter_fasta(path):
        if rec.id in first_line:
            raise InputError(
                f"{os.fspath(path)}: line {rec.line}: duplicate sequence id '{rec.id}' "
                f"(first seen at line {first_line[rec.id]})"
            )
        first_line[rec.id] = rec.line
        yield rec


def read_fasta(path) -> SequenceSet:
    """Read a whole FASTA file into a :class:`SequenceSet`; ids must be unique."""
    ids: list[str] = []
    seqs: list[bytes] = []
    for rec in iter_unique_fasta(path):
        ids.append(rec.id)
        seqs.append(rec.sequence)
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs)), out=offsets[1:])
    residues = np.frombuffer(b"".join(seqs), dtype=np.uint8).copy()
    return SequenceSet(ids, residues, offsets)
