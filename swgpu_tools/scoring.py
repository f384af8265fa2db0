"""Scoring parameters: substitution matrix and affine gap costs.

Parameter names follow the BLAST convention, which is also SSEARCH's
``-f``/``-g``: a gap of length k costs ``gap_open + k * gap_extend``.  With
the default BLOSUM62, 11, 1 a one-residue gap costs 12 and a two-residue gap
13.  (parasail and opal call the same costs "open 12, extend 1"; Biopython's
``PairwiseAligner`` has ``open_gap_score = -(gap_open + gap_extend)`` and
``extend_gap_score = -gap_extend``.)  Linear gap costs are ``gap_open=0``.

:class:`ScoringScheme` is **frozen and validated once**, when it is made;
every backend (CPU and GPU search, pair passes, traceback) receives the whole
object and trusts it: the matrix is an int32 array (the scheme's own; never
modify it) indexed by the codes :meth:`ScoringScheme.encode` gives, at most
:data:`MAX_ALPHABET` rows.

Instead of a matrix, ``match`` and ``mismatch`` scores (Biopython
PairwiseAligner's ``match_score``/``mismatch_score``; e.g. +1/-1 for DNA,
BLASTN's +2/-3) build an integer matrix over every stored letter
(:data:`IDENTITY_ALPHABET`): identical letters score ``match``, different ones
``mismatch``.  An optional ``wildcard`` letter (e.g. ``N``) scores 0 against
everything, as PairwiseAligner's ``wildcard``.  Nucleotide matrices that
Biopython ships (``NUC.4.4``, ``BLASTN``, ``MEGABLAST``, ``HOXD70``) work by
name, with IUPAC ambiguity codes (see :mod:`swgpu_tools.alphabet`).  Matrix
names are case-insensitive (``blosum62`` is ``BLOSUM62``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from .alphabet import is_nucleotide_alphabet, letter_codes, nucleotide_fraction
from .errors import InputError
from .sequences import EncodedSequences, SequenceSet

#: Most matrix rows a kernel supports (codes are 0 .. MAX_ALPHABET-1).
MAX_ALPHABET = 32

#: Alphabet of a match/mismatch scheme: every stored letter (see alphabet.py).
IDENTITY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ*"


def identity_matrix(
    match: int, mismatch: int, wildcard: str | None = None, alphabet: str = IDENTITY_ALPHABET
) -> np.ndarray:
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


@cache
def matrix_names() -> tuple[str, ...]:
    """Names of the substitution matrices Biopython ships (canonical spelling)."""
    from Bio.Align import substitution_matrices

    return tuple(substitution_matrices.load())


def canonical_matrix_name(name: str) -> str:
    """The canonical spelling of a matrix name (case-insensitive), or InputError."""
    wanted = str(name).strip().upper()
    for known in matrix_names():
        if known.upper() == wanted:
            return known
    raise InputError(
        f"unknown substitution matrix '{name}'; known (any case): {', '.join(matrix_names())}"
    )


@cache
def _load_matrix(name: str) -> tuple[str, np.ndarray]:
    from Bio.Align import substitution_matrices

    m = substitution_matrices.load(name)
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


def load_matrix(name: str) -> tuple[str, np.ndarray]:
    """Load a Biopython substitution matrix by name (any case): (alphabet, int32 square array)."""
    return _load_matrix(canonical_matrix_name(name))


def _int_param(key: str, value, minimum: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer, float))
        or int(value) != value
    ):
        raise InputError(f"{key} must be an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise InputError(f"{key} must be at least {minimum}, got {value}")
    return value


@dataclass(frozen=True, eq=False)
class ScoringScheme:
    """A substitution matrix and BLAST-convention affine gap costs; frozen, validated.

    >>> s = ScoringScheme("BLOSUM62", gap_open=11, gap_extend=1)
    >>> s.gap_cost(1), s.gap_cost(2)
    (12, 13)

    With ``match`` and ``mismatch`` (both integers) the matrix is
    :func:`identity_matrix` instead of ``matrix_name``, which then becomes a
    description such as ``match=1,mismatch=-1`` (no E-value statistics).

    >>> dna = ScoringScheme(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    >>> dna.score_pair("A", "A"), dna.score_pair("A", "G")
    (2, -3)

    Two schemes are equal when they score every pair of letters the same way
    (same name, gaps, match/mismatch/wildcard).
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
        put = object.__setattr__
        put(self, "gap_open", _int_param("gap_open", self.gap_open, 0))
        put(self, "gap_extend", _int_param("gap_extend", self.gap_extend, 0))
        if self.gap_open + self.gap_extend == 0:
            raise InputError("gap_open + gap_extend must be positive (a gap must cost something)")
        if self.match is None and self.mismatch is None:
            if self.wildcard is not None:
                raise InputError("a wildcard letter goes with match/mismatch scores, not a matrix")
            name = canonical_matrix_name(self.matrix_name)
            put(self, "matrix_name", name)
            alphabet, matrix = _load_matrix(name)
            matrix = matrix.copy()  # each scheme owns its array (kernels take it as is)
        else:
            for key in ("match", "mismatch"):
                value = getattr(self, key)
                if value is None:
                    raise InputError("match and mismatch scores go together: give both")
                put(self, key, _int_param(key, value))
            if self.match <= 0:
                raise InputError(f"match must be positive, got {self.match}")
            if self.wildcard is not None:
                wc = str(self.wildcard).upper()
                if len(wc) != 1 or wc not in IDENTITY_ALPHABET:
                    raise InputError(f"wildcard must be one letter, got {self.wildcard!r}")
                put(self, "wildcard", wc)
            alphabet = IDENTITY_ALPHABET
            matrix = identity_matrix(self.match, self.mismatch, self.wildcard)
            put(
                self,
                "matrix_name",
                f"match={self.match},mismatch={self.mismatch}"
                + (f",wildcard={self.wildcard}" if self.wildcard else ""),
            )
        put(self, "alphabet", alphabet)
        put(self, "matrix", matrix)
        put(self, "codes_of_letters", letter_codes(alphabet))

    # -- identity -----------------------------------------------------------
    def _key(self) -> tuple:
        return (
            self.matrix_name,
            self.gap_open,
            self.gap_extend,
            self.match,
            self.mismatch,
            self.wildcard,
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, ScoringScheme) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def digest(self) -> str:
        """A short hex digest of everything that decides scores (names, gaps, matrix values)."""
        h = hashlib.blake2b(digest_size=8)
        h.update(repr(self._key()).encode())
        h.update(np.ascontiguousarray(self.matrix).tobytes())
        return h.hexdigest()

    # -- properties the backends and the statistics use ---------------------
    @property
    def is_nucleotide(self) -> bool:
        """True for a nucleotide matrix (an alphabet of IUPAC nucleotide codes only)."""
        return self.match is None and is_nucleotide_alphabet(self.alphabet)

    @property
    def max_score(self) -> int:
        """The largest substitution score."""
        return int(self.matrix.max())

    @property
    def min_score(self) -> int:
        """The smallest substitution score."""
        return int(self.matrix.min())

    def description(self) -> str:
        """One line: ``BLOSUM62, gaps 11/1 (a gap of k costs 11 + k)``."""
        return (
            f"{self.matrix_name}, gaps {self.gap_open}/{self.gap_extend} "
            f"(a gap of k costs {self.gap_open} + {self.gap_extend}k)"
        )

    def gap_cost(self, length: int) -> int:
        """Cost of one gap of ``length`` residues."""
        return self.gap_open + length * self.gap_extend if length > 0 else 0

    def code_table(self) -> np.ndarray:
        """Each byte's matrix code (uint8, 256 entries); 255 for a letter it cannot score."""
        return np.array([int(c) if c >= 0 else 255 for c in self.codes_of_letters], dtype=np.uint8)

    def encode(self, sequences: SequenceSet, source: str = "input") -> EncodedSequences:
        """Map stored letters to matrix codes; InputError for letters the matrix cannot score."""
        # bytearray.translate: one C pass over the residues (a letter without a
        # code -> 255), into a writable buffer: a read-only array is another
        # Numba type, and the kernels compiled for it would miss the disk cache
        table = self.code_table().tobytes()
        raw = bytearray(memoryview(np.ascontiguousarray(sequences.residues))).translate(table)
        if b"\xff" in raw:
            codes = self.codes_of_letters[sequences.residues]
            pos = int(np.argmax(codes < 0))
            i = int(np.searchsorted(sequences.offsets, pos, side="right") - 1)
            letter = chr(sequences.residues[pos])
            raise InputError(
                f"{source}: record '{sequences.ids[i]}': letter '{letter}' at residue "
                f"position {pos - sequences.offsets[i] + 1} cannot be scored by matrix "
                f"'{self.matrix_name}' (alphabet {self.alphabet})"
            )
        return EncodedSequences(np.frombuffer(raw, dtype=np.uint8), sequences.offsets.copy())

    def check_letters(self, sequences: SequenceSet, source: str, sample: int = 1_000_000) -> None:
        """InputError when the sequences' letters do not suit the scheme: mostly
        nucleotides with a protein matrix, or mostly protein letters with a
        nucleotide matrix (judged on at most ``sample`` residues, at least 50)."""
        res = sequences.residues[:sample]
        if len(res) < 50 or self.match is not None:
            return
        frac = nucleotide_fraction(res)
        if not self.is_nucleotide and frac >= 0.9:
            raise InputError(
                f"{source}: {100 * frac:.0f}% of the letters are A, C, G, T, U or N: these look "
                f"like nucleotide sequences, but matrix {self.matrix_name} scores proteins. "
                f"Give protein sequences, or align nucleotides with swgpu align and a "
                f"nucleotide matrix (--matrix NUC.4.4) or --match/--mismatch"
            )
        if self.is_nucleotide and frac < 0.5:
            raise InputError(
                f"{source}: only {100 * frac:.0f}% of the letters are A, C, G, T, U or N: these "
                f"look like protein sequences, but matrix {self.matrix_name} scores "
                f"nucleotides; use a protein matrix such as BLOSUM62"
            )

    def score_pair(self, a: str, b: str) -> int:
        """Substitution score of two letters (after fallbacks)."""
        ca = self.codes_of_letters[ord(a)]
        cb = self.codes_of_letters[ord(b)]
        return int(self.matrix[ca, cb])


def longest_alignable_pair(matrix: np.ndarray, gap_open: int, gap_extend: int) -> int:
    """The most residues (query + subject) a pair may have for the aligner's int32 cells
    (here, not in the alignment package, so that scoring jobs need not import it)."""
    worst = int(np.abs(matrix).max(initial=0)) + gap_open + gap_extend
    return ((1 << 29) - 1) // max(worst, 1)
