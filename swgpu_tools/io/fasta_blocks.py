"""Reading large FASTA files fast: whole blocks at a time.

:func:`iter_blocks` reads a FASTA file (plain or gzip) in blocks of about
``block_bytes`` and yields, per block, the records it completes: accessions
and header lines (as bytes), canonical residues and offsets.  The work is done
by C-level byte operations (``bytes.translate``, ``re.findall``, numpy on the
newline positions), not per residue in Python.

It accepts and refuses exactly what :func:`swgpu_tools.io.fasta.iter_fasta`
does: a block that holds anything unusual (a letter that is not a residue, an
empty record, ``-`` or ``\\r`` in a sequence, a control character or invalid
UTF-8 in a header, a non-ASCII id, text before the first header) is read again
by that line-by-line reader, which raises its precise error (file, line,
column, record, residue position) or cleans it as documented there.

For parallel readers: :func:`record_chunks` yields the text in chunks of whole
records (what :func:`iter_blocks` parses), :func:`parse_chunk` parses one, and
:func:`plan_ranges` cuts a plain file into byte ranges of whole records that
separate processes can read and parse on their own.

Memory: one block plus the records it completes, whatever the file's size.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..alphabet import RESIDUE_LETTERS
from ..errors import InputError
from .fasta import STDIN, _open, records_of
from .gzipped import DECOMPRESS_ERRORS, GZIP_MAGIC, decompressobj, is_gzip

BLOCK_BYTES = 16 << 20
_BOM = b"\xef\xbb\xbf"

_UPPER = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: accession: UniProt's (sp|ACC|, tr|ACC|), else the first word (as swgpu_tools.ids),
#: of each line of the joined headers
_IDS = re.compile(rb"^(?:(?:sp|tr)\|([^|\s]+)\||[ \x0b\x0c]*(\S*))", re.M)
#: bytes a header may hold on the fast path: not the controls nor DEL (a header
#: with one, '\r' of a CRLF file included, goes to the line reader); the
#: newline joins the headers
_HEADER_OK = bytes(b for b in range(256) if b >= 32 and b != 127) + b"\n"


@dataclass
class Block:
    """Records of one block: ids (accessions, ASCII bytes), headers (UTF-8 bytes,
    without '>' and line end), residues (canonical letters, concatenated, uint8)
    and offsets (n + 1)."""

    ids: list[bytes]
    headers: list[bytes]
    residues: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


def _raw_chunks(path: str, size: int) -> Iterator[bytes]:
    gz = is_gzip(path)
    with open(path, "rb", buffering=0) as fh:
        if not gz:
            while True:
                data = fh.read(size)
                if not data:
                    return
                yield data
        d = decompressobj()
        pending: list[bytes] = []
        have = 0
        while True:
            raw = fh.read(1 << 22)
            if not raw:
                break
            while raw:
                out = d.decompress(raw)
                pending.append(out)
                have += len(out)
                raw = d.unused_data  # a further gzip member
                if raw:
                    d = decompressobj()
            if have >= size:
                yield b"".join(pending)
                pending, have = [], 0
        if not d.eof:
            raise EOFError("compressed file ended before the end-of-stream marker")
        if pending:
            yield b"".join(pending)


def record_chunks(path, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[bytes, int]]:
    """The text of a FASTA file (plain or gzip) as chunks of whole records, with the
    line number of each chunk's first line: every chunk starts with '>' at a line
    start and ends with a newline (one is added at the end of the file).

    Text before the first header other than blank lines (and a byte-order mark)
    raises the line reader's error.  Raises InputError for a file that cannot be
    read; does not check that the file holds a record (:func:`iter_blocks` does).
    """
    name = os.fspath(path)
    if name == STDIN:
        raise InputError("the database must be a file, not standard input")
    _open(path).close()  # the reader's errors for a missing path or a folder
    carry = b""
    line_no = 1  # line number of the first line of `carry`
    started = False
    bom = True  # the first bytes may still be a byte-order mark
    try:
        for chunk in _raw_chunks(name, block_bytes):
            data = carry + chunk if carry else chunk
            if not started:
                if bom:
                    if len(data) < 3 and _BOM.startswith(data):
                        carry = data
                        continue
                    bom = False
                    if data.startswith(_BOM):
                        data = data[3:]
                head = data.find(b">")
                # before the first header: blank lines only (the line reader refuses
                # anything else, a '>' that does not start a line included)
                if head < 0:
                    if data.strip():
                        _line_reader(name, data, line_no)  # raises
                    keep = data.rfind(b"\n") + 1  # a partial line goes on in the next chunk
                    line_no += data.count(b"\n", 0, keep)
                    carry = data[keep:]
                    continue
                if data[:head].strip() or (head and data[head - 1] != 10):
                    _line_reader(name, data, line_no)  # raises
                line_no += data.count(b"\n", 0, head)
                data = data[head:]
                started = True
            cut = data.rfind(b"\n>")
            if cut < 0:
                carry = data
                continue
            yield data[: cut + 1], line_no
            line_no += data.count(b"\n", 0, cut + 1)
            carry = data[cut + 1 :]
        if started and carry:
            if not carry.endswith(b"\n"):
                carry += b"\n"
            yield carry, line_no
        elif carry.strip():  # text and no header
            _line_reader(name, carry, line_no)  # raises
    except DECOMPRESS_ERRORS as exc:
        raise InputError(f"{name}: cannot read (corrupt or truncated?): {exc}") from None


def iter_blocks(path, block_bytes: int = BLOCK_BYTES) -> Iterator[Block]:
    """Yield the records of a FASTA file in blocks (see the module doc)."""
    name = os.fspath(path)
    n_records = 0
    for data, line_no in record_chunks(path, block_bytes):
        parsed = parse_chunk(name, data, line_no)
        n_records += len(parsed)
        yield parsed
    if n_records == 0:
        raise InputError(f"{name}: contains no FASTA records (empty file?)")


def parse_chunk(name: str, data: bytes, first_line: int = 1) -> Block:
    """The records of ``data``, whole records as :func:`record_chunks` yields them
    (``first_line``: the line number of its first line, for error messages)."""
    return _parse(name, data, len(data), first_line)[0]


def plan_ranges(path, range_bytes: int) -> list[tuple[int, int]] | None:
    """Byte ranges ``[begin, end)`` of a plain FASTA file, each of about
    ``range_bytes`` and made of whole records (each begins with '>' at a line
    start), together the whole file after a byte-order mark; None when the file
    is compressed or its first byte (after a byte-order mark) is not '>' (then
    read it with :func:`record_chunks`).  Reads only a little of the file around
    each cut.  The last range may lack its final newline."""
    name = os.fspath(path)
    size = os.path.getsize(name)
    with open(name, "rb", buffering=0) as fh:
        head = fh.read(4)
        if head[:2] == GZIP_MAGIC:
            return None
        start = 3 if head.startswith(b"\xef\xbb\xbf") else 0
        if head[start : start + 1] != b">":
            return None
        cuts = [start]
        fd = fh.fileno()
        pos = start + max(1, range_bytes)
        while pos < size:
            cut = _next_record(fd, pos, size)
            if cut >= size:
                break
            cuts.append(cut)
            pos = cut + max(1, range_bytes)
    cuts.append(size)
    return list(zip(cuts[:-1], cuts[1:]))


def _next_record(fd: int, pos: int, size: int, window: int = 1 << 16) -> int:
    """The offset of the first '>' at a line start at or after ``pos`` (> 0); ``size``
    when there is none."""
    at = pos - 1  # a '\n' at pos - 1 starts a line at pos
    while at < size:
        data = os.pread(fd, window + 1, at)  # windows overlap by one byte
        i = data.find(b"\n>")
        if i >= 0:
            return at + i + 1
        if len(data) <= 1:
            break
        at += len(data) - 1
        window = min(window * 2, 1 << 24)
    return size


def _line_reader(name: str, text: bytes, first_line: int, whole_file: bool = False) -> list:
    """The line-by-line reader's records of ``text`` (or its error)."""
    return list(records_of(name, io.BytesIO(text), first_line - 1, whole_file))


def _slow_block(name: str, text: bytes, first_line: int) -> Block:
    recs = _line_reader(name, text, first_line)
    return Block(
        [r.id.encode("ascii") for r in recs],
        [r.header.encode("utf-8") for r in recs],
        np.frombuffer(b"".join(r.sequence for r in recs), dtype=np.uint8),
        _offsets([len(r.sequence) for r in recs]),
    )


def _parse(name: str, data: bytes, end: int, first_line: int) -> tuple[Block, int]:
    """The records of ``data[:end]`` (whole records: starts with '>', ends with a
    newline) and the number of lines they span."""
    a = np.frombuffer(data, dtype=np.uint8, count=end)
    nl = np.flatnonzero(a == 10)
    starts = np.empty(len(nl), dtype=np.int64)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    head = np.flatnonzero(a[starts] == 62)  # '>'
    rec_start = starts[head]
    head_end = nl[head]
    rec_end = np.append(rec_start[1:], end)
    # residues per record: the bytes after the header line, less the newlines
    n_nl = np.searchsorted(nl, rec_end, "left") - np.searchsorted(nl, head_end, "right")
    lengths = rec_end - head_end - 1 - n_nl
    text = data[:end] if end < len(data) else data
    rs, he, re_ = rec_start.tolist(), head_end.tolist(), rec_end.tolist()
    headers = [text[s + 1 : h] for s, h in zip(rs, he)]
    seq_text = b"".join([text[h + 1 : e] for h, e in zip(he, re_)])
    residues = seq_text.translate(_UPPER, b"\n")
    joined_headers = b"\n".join(headers)
    found = _IDS.findall(joined_headers)
    ids = [u or w for u, w in found]
    if (
        len(residues) != int(lengths.sum())
        or np.any(lengths == 0)
        or residues.translate(None, RESIDUE_LETTERS)
        or joined_headers.translate(None, _HEADER_OK)
        or len(ids) != len(headers)
        or not all(ids)
        or not b"".join(ids).isascii()
        or not _is_utf8(joined_headers)
    ):
        return _slow_block(name, text, first_line), len(nl)
    return Block(ids, headers, np.frombuffer(residues, dtype=np.uint8), _offsets(lengths)), len(nl)


def _is_utf8(b: bytes) -> bool:
    if b.isascii():
        return True
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _offsets(lengths) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out
