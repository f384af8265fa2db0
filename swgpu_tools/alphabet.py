"""Which characters a FASTA sequence may hold, and how they are stored.

Stored (canonical) letters: the upper-case ASCII letters ``A``-``Z`` and ``*``.
Input is case-insensitive; ``-`` (a gap in aligned FASTA) is dropped.  Any
other character (digits, punctuation, spaces inside a line, non-ASCII bytes)
is an input error naming the file, record and position.

When sequences are scored, each stored letter is mapped to a row of the
substitution matrix (see :func:`letter_codes`):

* a letter in the matrix's alphabet scores as itself;
* otherwise the first fallback of :data:`FALLBACKS` that the matrix has is
  used: ``U`` (selenocysteine) as ``C``, ``O`` (pyrrolysine) as ``K``,
  ``J`` (leucine or isoleucine) as ``X``; for nucleotide matrices ``U``
  (uracil) as ``T``;
* anything still unmatched scores as the matrix's wildcard: ``X`` for
  protein matrices, ``N`` for nucleotide matrices.  A matrix with neither
  cannot score such a letter, and that is an input error.
"""
from __future__ import annotations

import numpy as np

#: Characters accepted in sequence lines (both cases); ``-`` is accepted and dropped.
RESIDUE_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ*"
DROPPED = b"-"

#: Letters a matrix may lack, with what they score as (first one present wins).
FALLBACKS = {
    "U": ("C", "T"),
    "O": ("K",),
    "J": ("X",),
}
WILDCARDS = ("X", "N")

# bytes.translate tables: upper-case letters; and the set of accepted bytes.
_UPPER = bytes.maketrans(
    b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
_ACCEPTED = RESIDUE_LETTERS + RESIDUE_LETTERS.lower() + DROPPED + b"\r"


def canonical(line: bytes) -> bytes:
    """Upper-case ``line`` and drop ``-`` and carriage returns (no validation)."""
    return line.translate(_UPPER, DROPPED + b"\r")


def invalid_characters(line: bytes) -> bytes:
    """The bytes of ``line`` that are not accepted sequence characters."""
    return line.translate(None, _ACCEPTED)


def letter_codes(matrix_alphabet: str) -> np.ndarray:
    """A 256-entry table from stored letter (ASCII) to matrix row, -1 where unscorable."""
    table = np.full(256, -1, dtype=np.int16)
    index = {c: i for i, c in enumerate(matrix_alphabet)}
    wildcard = next((index[w] for w in WILDCARDS if w in index), -1)
    for byte in RESIDUE_LETTERS:
        letter = chr(byte)
        if letter in index:
            code = index[letter]
        else:
            code = next((index[f] for f in FALLBACKS.get(letter, ()) if f in index), wildcard)
        table[byte] = code
    return table
