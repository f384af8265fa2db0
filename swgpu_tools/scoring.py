"""Scoring parameters: substitution matrix and affine gap costs.

Parameter names follow the BLAST convention, which is also SSEARCH's
``-f``/``-g``: a gap of length k costs ``gap_open + k * gap_extend``.  With
the default BLOSUM62, 11, 1 a one-residue gap costs 12 and a two-residue gap
13.  (parasail and opal call the same costs "open 12, extend 1".)  Linear gap
costs are ``gap_open=0``.

Kernels receive the matrix as a small int32 array indexed by residue codes,
plus the two gap costs as positive integers; see :mod:`swgpu_tools.kernels`.

Instead of a matrix, ``match`` and ``mismatch`` scores (Biopython
PairwiseAligner's ``match_score``/``mismatch_score``; e.g. +1/-1 for DNA,
BLASTN's +2/-3) build an integer matrix over every stored letter
(:data:`IDENTITY_ALPHABET`): identical letters score ``match``, different ones
``mismatch``.  An optional ``wildcard`` letter (e.g. ``N``) scores 0 against
everything, as PairwiseAligner's ``wildcard``.  Nucleotide matrices that
Biopython ships (``NUC.4.4``, ``BLASTN``, ``MEGABLAST``, ``HOXD70``) work by
name, with IUPAC ambiguity codes (see :mod:`swgpu_tools.alphabet`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .alphabet import letter_codes
from .errors import InputError
from .sequences import EncodedSequences, SequenceSet

#: Most matrix rows a kernel supports (codes are 0 .. MAX_ALPHABET-1).
MAX_ALPHABET = 32

#: Alphabet of a match/mismatch scheme: every stored letter (see alphabet.py).
IDENTITY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ*"


def identity_matrix(match: int, mismatch: int, wildcard: str | None = None,
                    alphabet: str = IDENTITY_ALPHABET) -> np.ndarray:
    """int32 matrix over ``alphabet``: ``match`` on the diagonal, ``mismatch`` elsewhere.

    Pairs with the ``wildcard`` letter (if any) score 0.
    """
    n = len(alphabet)
    m = np.full((n, n), int(mismatch), dtype=np.int32)
    np.fill_diagonal(m, int(match))
    if wildcard is not None:
        w = alphabet.index(wildcard)
        m[w, :] = 0
        m[:, w] = 0
    return m


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

    With ``match`` and ``mismatch`` (both integers) the matrix is
    :func:`identity_matrix` instead of ``matrix_name``, which then becomes a
    description such as ``match=1,mismatch=-1`` (no E-value statistics).

    >>> dna = ScoringScheme(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    >>> dna.score_pair("A", "A"), dna.score_pair("A", "G")
    (2, -3)
    """

    matrix_name: str = "BLOSUM62"
    gap_open: int = 11
    gap_extend: int = 1
    match: int | None = None
    mismatch: int | None = None
    wildcard: str | None = None
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
        if self.match is None and self.mismatch is None:
            if self.wildcard is not None:
                raise InputError("a wildcard letter goes with match/mismatch scores, not a matrix")
            self.alphabet, self.matrix = load_matrix(self.matrix_name)
        else:
            for key in ("match", "mismatch"):
                value = getattr(self, key)
                if value is None:
                    raise InputError("match and mismatch scores go together: give both")
                if isinstance(value, bool) or int(value) != value:
                    raise InputError(f"{key} must be an integer, got {value!r}")
                setattr(self, key, int(value))
            if self.match <= 0:
                raise InputError(f"match must be positive, got {self.match}")
            if self.wildcard is not None:
                wc = str(self.wildcard).upper()
                if len(wc) != 1 or wc not in IDENTITY_ALPHABET:
                    raise InputError(f"wildcard must be one letter, got {self.wildcard!r}")
                self.wildcard = wc
            self.alphabet = IDENTITY_ALPHABET
            self.matrix = identity_matrix(self.match, self.mismatch, self.wildcard)
            self.matrix_name = f"match={self.match},mismatch={self.mismatch}" + (
                f",wildcard={self.wildcard}" if self.wildcard else "")
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
