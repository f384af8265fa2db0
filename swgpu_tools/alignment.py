"""Pairwise alignment with traceback (CPU).

:class:`Alignment` is what every traceback returns and what the output tables
are written from.  Coordinates are 0-based, end-exclusive; the tables convert
them to BLAST's 1-based inclusive form.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Alignment:
    """One optimal local alignment of a query with a subject.

    operations: one byte per alignment column:
      b"M"  a query residue aligned with a subject residue (identical or not),
      b"I"  a query residue against a gap in the subject,
      b"D"  a subject residue against a gap in the query.
    """

    score: int
    query_start: int
    query_end: int
    subject_start: int
    subject_end: int
    operations: bytes
