"""Alignment modes and the result type every alignment returns.

Modes (``mode=``; :data:`MODES`):

* ``"local"`` (Smith-Waterman): the best-scoring pair of segments; score >= 0.
* ``"global"`` (Needleman-Wunsch): both sequences end to end.
* ``"semiglobal"``: the whole query against any part of the subject (gaps at
  both ends of the subject are free), as SSEARCH's glsearch; in Biopython
  terms a global PairwiseAligner with ``end_deletion_score = 0`` and the
  subject as target.

Numba code takes the integer codes (:data:`MODE_LOCAL`, ...); the API takes
the names and turns them into codes with :func:`mode_code`.
"""

from __future__ import annotations

from dataclasses import dataclass

MODE_LOCAL = 0
MODE_GLOBAL = 1
MODE_SEMIGLOBAL = 2
#: The mode names the API documents.
MODES = ("local", "global", "semiglobal")
#: Every accepted spelling (lower case) and its code.
MODE_CODES = {
    "local": MODE_LOCAL,
    "global": MODE_GLOBAL,
    "semiglobal": MODE_SEMIGLOBAL,
    "semi-global": MODE_SEMIGLOBAL,
    "glsearch": MODE_SEMIGLOBAL,
}


def mode_code(mode) -> int:
    """The code of a mode name (any case); ValueError for an unknown one."""
    try:
        return MODE_CODES[str(mode).lower()]
    except KeyError:
        raise ValueError(
            f"unknown alignment mode {mode!r}; use one of {', '.join(MODES)}"
        ) from None


@dataclass
class Alignment:
    """One optimal alignment (local, global or semi-global) of a query with a subject.

    Coordinates are 0-based, end-exclusive (the output tables convert them to
    BLAST's 1-based inclusive form).

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
