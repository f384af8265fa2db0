"""Reading large FASTA files fast: whole blocks at a time with numpy.

:func:`iter_blocks` reads a FASTA file (plain or gzip) in blocks of about
``block_bytes`` and yields, per block, the records it completes as arrays:
accessions, header lines, canonical residues and offsets.  It accepts and
refuses exactly what :func:`swgpu_tools.io.fasta.iter_fasta` does: a block
that holds anything unusual (a letter that is not a residue, an empty record,
a control character in a header, a non-ASCII id, text before the first
header) is read again by that line-by-line reader, which raises its precise
error (file, line, column, record, residue position) or cleans the headers.

Memory: one block plus the records it completes, whatever the file's size.
"""
from __future__ import annotations

import io
import os
import zlib
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..alphabet import DROPPED, RESIDUE_LETTERS
from ..errors import InputError
from ..ids import parse_id
from .fasta import STDIN, _open, records_of

BLOCK_BYTES = 64 << 20

# byte classes: 0 not allowed in a sequence line, 1 residue letter (either case),
# 2 dropped ('-', '\r')
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[np.frombuffer(RESIDUE_LETTERS + RESIDUE_LETTERS.lower(), dtype=np.uint8)] = 1
_CLASS[np.frombuffer(DROPPED + b"\r", dtype=np.uint8)] = 2
_UPPER = np.arange(256, dtype=np.uint8)
_UPPER[ord("a"):ord("z") + 1] -= 32
# bytes that send a header line to the line reader: controls (but \r) and DEL
_ODD_HEADER = np.zeros(256, dtype=bool)
_ODD_HEADER[:32] = True
_ODD_HEADER[13] = False
_ODD_HEADER[127] = True


@dataclass
class Block:
    """Records of one block: ids (accessions), headers (str, without '>' and line
    end), residues (canonical letters, concatenated) and offsets (n + 1)."""

    ids: list[str]
    headers: list[str]
    residues: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


def _raw_chunks(path: str, size: int) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    with open(path, "rb", buffering=0) as fh:
        if not gz:
            while True:
                data = fh.read(size)
                if not data:
                    return
                yield data
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
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
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            if have >= size:
                yield b"".join(pending)
                pending, have = [], 0
        if not d.eof:
            raise EOFError("compressed file ended before the end-of-stream marker")
        if pending:
            yield b"".join(pending)


def _line_reader(name: str, text: bytes, first_line: int, whole_file: bool = False) -> list:
    """The line-by-line reader's records of ``text`` (or its error)."""
    return list(records_of(name, io.BytesIO(text), first_line - 1, whole_file))


def iter_blocks(path, block_bytes: int = BLOCK_BYTES) -> Iterator[Block]:
    """Yield the records of a FASTA file in blocks (see the module doc)."""
    name = os.fspath(path)
    if name == STDIN:
        raise InputError("the database must be a file, not standard input")
    _open(path).close()  # the reader's errors for a missing path or a folder
    carry = b""
    line_no = 1            # line number of the first line of `carry`
    n_records = 0
    started = False
    try:
        for chunk in _raw_chunks(name, block_bytes):
            data = carry + chunk
            if not started:
                if line_no == 1 and data.startswith(b"\xef\xbb\xbf"):
                    data = data[3:]
                head = data.find(b">")
                if head < 0 or data[:head].strip():  # text before the first header
                    if data.strip():
                        _line_reader(name, data, line_no, whole_file=True)
                    line_no += data.count(b"\n")
                    carry = b""
                    continue
                line_no += data.count(b"\n", 0, head)
                data = data[head:]
                started = True
            cut = data.rfind(b"\n>")
            if cut < 0:
                carry = data
                continue
            block, carry = data[:cut + 1], data[cut + 1:]
            parsed = _parse(name, block, line_no)
            n_records += len(parsed)
            line_no += block.count(b"\n")
            yield parsed
        if started and carry:
            parsed = _parse(name, carry if carry.endswith(b"\n") else carry + b"\n", line_no)
            n_records += len(parsed)
            yield parsed
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{name}: cannot read (corrupt or truncated?): {exc}") from None
    if n_records == 0:
        raise InputError(f"{name}: contains no FASTA records (empty file?)")


def _slow_block(name: str, text: bytes, first_line: int) -> Block:
    recs = _line_reader(name, text, first_line)
    return Block([r.id for r in recs], [r.header for r in recs],
                 np.frombuffer(b"".join(r.sequence for r in recs), dtype=np.uint8).copy(),
                 _offsets([len(r.sequence) for r in recs]))


def _parse(name: str, text: bytes, first_line: int) -> Block:
    """The records of ``text``: whole records, starting with '>', ending with a newline."""
    a = np.frombuffer(text, dtype=np.uint8)
    nl = np.flatnonzero(a == 10)
    starts = np.concatenate(([0], nl[:-1] + 1))
    is_head = a[starts] == 62  # '>'
    line_of_byte = np.zeros(len(a), dtype=np.int64)
    line_of_byte[starts[1:]] = 1
    np.cumsum(line_of_byte, out=line_of_byte)
    in_head = is_head[line_of_byte]
    seq_bytes = ~in_head & (a != 10)
    cls = _CLASS[a]
    if np.any(seq_bytes & (cls == 0)) or np.any(in_head & (a != 10) & _ODD_HEADER[a]):
        return _slow_block(name, text, first_line)
    keep = seq_bytes & (cls == 1)
    residues = _UPPER[a[keep]]
    head_lines = np.flatnonzero(is_head)
    kept_before = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))
    rec_start = starts[head_lines]
    rec_end = np.concatenate((rec_start[1:], [len(a)]))
    lengths = kept_before[rec_end] - kept_before[rec_start]
    if np.any(lengths == 0):
        return _slow_block(name, text, first_line)
    head_end = nl[head_lines]
    headers, ids = [], []
    for s, e in zip((rec_start + 1).tolist(), head_end.tolist()):
        h = text[s:e]
        if h.endswith(b"\r"):
            h = h[:-1]
        i = parse_id(h)
        if not i or not i.isascii():
            return _slow_block(name, text, first_line)
        headers.append(h.decode("utf-8", "replace"))
        ids.append(i.decode("ascii"))
    return Block(ids, headers, residues, _offsets(lengths))


def _offsets(lengths) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out
