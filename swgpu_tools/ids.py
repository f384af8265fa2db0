"""Ids from a FASTA header line, as BLAST reads them with ``-parse_seqids``.

* accession (:func:`parse_id`; BLAST's ``qacc``/``sacc``): the UniProt
  accession of ``sp|ACC|NAME`` and ``tr|ACC|NAME`` headers (``P02232``), the
  first word otherwise.  swgpu keys every record by it.
* sequence id (:func:`seqid_of`; BLAST's ``qseqid``/``sseqid``): the header's
  first word (``sp|P02232|LGB1_VICFA``).
* title (:func:`title_of`; BLAST's ``stitle``): the rest of the header after
  the first word and one separator character; ``N/A`` when there is none.
"""

from __future__ import annotations

import re

_UNIPROT = re.compile(rb"^(?:sp|tr)\|([^|\s]+)\|")


def parse_id(header: bytes) -> bytes:
    """The accession of a header line without its ``>``."""
    m = _UNIPROT.match(header)
    if m:
        return m.group(1)
    parts = header.split(None, 1)
    return parts[0] if parts else b""


def seqid_of(header: str) -> str:
    """BLAST's sequence id: the header's first word."""
    parts = header.split(None, 1)
    return parts[0] if parts else ""


def title_of(header: str) -> str:
    """BLAST's ``stitle``: the header after its first word and one separator; ``N/A`` if empty."""
    stripped = header.lstrip()
    words = stripped.split(None, 1)
    if len(words) < 2:
        return "N/A"
    rest = stripped[len(words[0]) + 1 :]
    return rest if rest.strip() else "N/A"
