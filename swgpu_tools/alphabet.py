"""Which characters a FASTA sequence may hold, and how they are stored.

Stored (canonical) letters: the upper-case ASCII letters ``A``-``Z`` and ``*``.
Input is case-insensitive; ``-`` (a gap in aligned FASTA) is dropped.  Any
other character (digits, punctuation, spaces inside a line, non-ASCII bytes)
is an input error naming the file, record and position.

When sequences are scored, each stored letter is mapped to a row of the
substitution matrix (see :func:`letter_codes`):

* a letter in the matrix's alphabet scores as itself;
* otherwise, for protein matrices, ``U`` (selenocysteine) scores as ``C``,
  ``O`` (pyrrolysine) as ``K`` and ``J`` (leucine or isoleucine) as ``X``
  (:data:`PROTEIN_FALLBACKS`); for nucleotide matrices (an alphabet of
  IUPAC nucleotide codes only) ``U`` (uracil) scores as ``T``;
* anything still unmatched scores as the matrix's wildcard: ``X`` for
  protein matrices, ``N`` for nucleotide matrices.  A matrix with neither
  cannot score such a letter, and that is an input error.
"""

from __future__ import annotations

import numpy as np

#: Characters accepted in sequence lines (both cases); ``-`` is accepted and dropped.
RESIDUE_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ*"
DROPPED = b"-"

#: Letters a protein matrix may lack, and what they score as.
PROTEIN_FALLBACKS = {"U": "C", "O": "K", "J": "X"}
#: The same for nucleotide matrices.
NUCLEOTIDE_FALLBACKS = {"U": "T"}
NUCLEOTIDE_CODES = set("ACGTUNRYKMSWBDHVX*")
WILDCARDS = ("X", "N")


def is_nucleotide_alphabet(matrix_alphabet: str) -> bool:
    """True for an alphabet made of IUPAC nucleotide codes only (e.g. NUC.4.4)."""
    return set(matrix_alphabet.upper()) <= NUCLEOTIDE_CODES


# bytes.translate tables: upper-case letters; and the set of accepted bytes.
_UPPER = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
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
    fallbacks = (
        NUCLEOTIDE_FALLBACKS if is_nucleotide_alphabet(matrix_alphabet) else PROTEIN_FALLBACKS
    )
    for byte in RESIDUE_LETTERS:
        letter = chr(byte)
        if letter in index:
            code = index[letter]
        else:
            code = index.get(fallbacks.get(letter, ""), wildcard)
        table[byte] = code
    return table


_NUCLEOTIDE_LETTERS = np.zeros(256, dtype=bool)
_NUCLEOTIDE_LETTERS[np.frombuffer(b"ACGTUN", dtype=np.uint8)] = True


def nucleotide_fraction(residues: np.ndarray) -> float:
    """Share of the stored letters that are A, C, G, T, U or N (0 for none)."""
    residues = np.asarray(residues, dtype=np.uint8)
    if len(residues) == 0:
        return 0.0
    return float(_NUCLEOTIDE_LETTERS[residues].mean())
