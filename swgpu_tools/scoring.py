"""Scoring parameters: substitution matrix and affine gap costs.

Parameter names follow the BLAST convention, which is also SSEARCH's
``-f``/``-g``: a gap of length k costs ``gap_open + k * gap_extend``.  With
the default BLOSUM62, 11, 1 a one-residue gap costs 12 and a two-residue gap
13.  (parasail and opal call the same costs "open 12, extend 1".)  Linear gap
costs are ``gap_open=0``.

Kernels receive the matrix as a small int32 array indexed by residue codes,
plus the two gap costs as positive integers; see :mod:`swgpu_tools.kernels`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .alphabet import letter_codes
from .errors import InputError
from .sequences import EncodedSequences, SequenceSet

#: Most matrix rows a kernel supports (codes are 0 .. MAX_ALPHABET-1).
MAX_ALPHABET = 32


def load_matrix(name: str) -> tuple[str, np.ndarray]:
    """Load a Biopython substitution matrix by name: (alphabet, int32 square array)."""
    from Bio.Align import substitution_matrices

    try:
        m = substitution_matrices.load(name)
    except (FileNotFoundError, ValueError, OSError):
        known = ", ".join(substitution_matrices.load())
        raise InputError(f"unknown substitution matrix '{name}'; known: {known}") from None
    alphabet = m.alphabet
    if not isinstance(alphabet, str) or len(m.shape) != 2:
        raise InputError(f"substitution matrix '{name}' is not a square letter matrix")
    values = np.asarray(m, dtype=np.float64)
    if not np.all(values == np.round(values)):
        raise InputError(
            f"substitution matrix '{name}' has non-integer scores; only integer "
            f"matrices are supported"
        )
    if len(alphabet) > MAX_ALPHABET:
        raise InputError(f"substitution matrix '{name}' has more than {MAX_ALPHABET} letters")
    return alphabet, values.astype(np.int32)


@dataclass
class ScoringScheme:
    """A substitution matrix and BLAST-convention affine gap costs.

    >>> s = ScoringScheme("BLOSUM62", gap_open=11, gap_extend=1)
    >>> s.gap_cost(1), s.gap_cost(2)
    (12, 13)
    """

    matrix_name: str = "BLOSUM62"
    gap_open: int = 11
    gap_extend: int = 1
    alphabet: str = field(init=False)
    matrix: np.ndarray = field(init=False, repr=False)
    codes_of_letters: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for key in ("gap_open", "gap_extend"):
            value = getattr(self, key)
            if isinstance(value, bool) or int(value) != value or value < 0:
                raise InputError(f"{key} must be a non-negative integer, got {value!r}")
            setattr(self, key, int(value))
        if self.gap_open + self.gap_extend == 0:
            raise InputError("gap_open + gap_extend must be positive (a gap must cost something)")
        self.alphabet, self.matrix = load_matrix(self.matrix_name)
        self.codes_of_letters = letter_codes(self.alphabet)

    def gap_cost(self, length: int) -> int:
        """Cost of one gap of ``length`` residues."""
        return self.gap_open + length * self.gap_extend if length > 0 else 0

    def encode(self, sequences: SequenceSet, source: str = "input") -> EncodedSequences:
        """Map stored letters to matrix codes; InputError for letters the matrix cannot score."""
        codes = self.codes_of_letters[sequences.residues]
        if len(codes) and codes.min() < 0:
            pos = int(np.argmax(codes < 0))
            i = int(np.searchsorted(sequences.offsets, pos, side="right") - 1)
            letter = chr(sequences.residues[pos])
            raise InputError(
                f"{source}: record '{sequences.ids[i]}': letter '{letter}' at residue "
                f"position {pos - sequences.offsets[i] + 1} cannot be scored by matrix "
                f"'{self.matrix_name}' (alphabet {self.alphabet})"
            )
        return EncodedSequences(codes.astype(np.uint8), sequences.offsets.copy())

    def score_pair(self, a: str, b: str) -> int:
        """Substitution score of two letters (after fallbacks)."""
        ca = self.codes_of_letters[ord(a)]
        cb = self.codes_of_letters[ord(b)]
        return int(self.matrix[ca, cb])
