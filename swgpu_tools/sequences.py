"""In-memory sequence collections shared by every step.

A :class:`SequenceSet` holds many sequences back to back in one byte array:
``residues[offsets[i]:offsets[i + 1]]`` is sequence ``i``, written in the
canonical letters of :mod:`swgpu_tools.alphabet` (upper-case ASCII, ``*``).
``ids`` are the accessions that key records everywhere; ``headers`` (when
known) are the FASTA header lines, from which BLAST's sequence ids and titles
come (:attr:`SequenceSet.seqids`, :attr:`SequenceSet.titles`).

Kernels never see letters: :meth:`swgpu_tools.scoring.ScoringScheme.encode`
turns a set into :class:`EncodedSequences` (small integer codes that index the
substitution matrix).

One way to build a set: :meth:`SequenceSet.from_sequences` (and
:meth:`SequenceSet.concat`, :meth:`SequenceSet.subset`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ids import seqid_of, title_of


def _offsets(lengths) -> np.ndarray:
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


@dataclass
class SequenceSet:
    """Sequences with their ids, concatenated.

    ids:      one accession per sequence (the id swgpu keys records by).
    residues: uint8 ASCII letters of all sequences, concatenated.
    offsets:  int64, length n + 1; sequence i is residues[offsets[i]:offsets[i+1]].
    headers:  the FASTA header lines (without '>'), or None when not known
              (then the sequence ids are the accessions and titles are 'N/A').
    """

    ids: list[str]
    residues: np.ndarray
    offsets: np.ndarray
    headers: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.residues = np.ascontiguousarray(self.residues, dtype=np.uint8)
        self.offsets = np.ascontiguousarray(self.offsets, dtype=np.int64)
        if len(self.offsets) != len(self.ids) + 1:
            raise ValueError("offsets must have one more entry than ids")
        if self.headers is not None and len(self.headers) != len(self.ids):
            raise ValueError("headers must have one entry per id")

    # -- building -----------------------------------------------------------
    @classmethod
    def from_sequences(cls, ids, sequences, headers=None) -> SequenceSet:
        """Build from ids and sequences (bytes or str of canonical letters)."""
        seqs = [s.encode("ascii") if isinstance(s, str) else bytes(s) for s in sequences]
        ids = list(ids)
        if len(seqs) != len(ids):
            raise ValueError("one sequence per id")
        residues = np.frombuffer(b"".join(seqs), dtype=np.uint8).copy()
        return cls(
            ids,
            residues,
            _offsets([len(s) for s in seqs]),
            None if headers is None else list(headers),
        )

    @classmethod
    def from_pairs(cls, pairs) -> SequenceSet:
        """Build from ``(id, sequence)`` pairs; sequences must be canonical letters."""
        pairs = list(pairs)
        return cls.from_sequences([p[0] for p in pairs], [p[1] for p in pairs])

    @classmethod
    def concat(cls, parts: list[SequenceSet]) -> SequenceSet:
        """The sets one after the other."""
        if not parts:
            return cls([], np.zeros(0, np.uint8), np.zeros(1, np.int64))
        ids = [i for p in parts for i in p.ids]
        headers = None
        if all(p.headers is not None for p in parts):
            headers = [h for p in parts for h in p.headers]
        residues = np.concatenate([p.residues for p in parts])
        lengths = np.concatenate([p.lengths for p in parts])
        return cls(ids, residues, _offsets(lengths), headers)

    def subset(self, indices) -> SequenceSet:
        """A new set with the sequences at ``indices``, in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        parts = [self.residues[self.offsets[i] : self.offsets[i + 1]] for i in indices]
        residues = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        headers = None if self.headers is None else [self.headers[i] for i in indices]
        return SequenceSet(
            [self.ids[i] for i in indices], residues, _offsets(self.lengths[indices]), headers
        )

    # -- reading ------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def total_residues(self) -> int:
        return int(self.offsets[-1])

    def sequence(self, i: int) -> str:
        """Sequence ``i`` as a str."""
        return self.residues[self.offsets[i] : self.offsets[i + 1]].tobytes().decode("ascii")

    @property
    def seqids(self) -> list[str]:
        """BLAST's sequence ids (``qseqid``/``sseqid``): each header's first word."""
        if self.headers is None:
            return list(self.ids)
        return [seqid_of(h) or i for h, i in zip(self.headers, self.ids)]

    @property
    def titles(self) -> list[str]:
        """BLAST's titles (``stitle``): each header after its first word; ``N/A`` if none."""
        if self.headers is None:
            return ["N/A"] * len(self.ids)
        return [title_of(h) for h in self.headers]


@dataclass
class EncodedSequences:
    """Sequences as matrix codes, ready for a kernel.

    codes:   uint8, all sequences concatenated; each value indexes the
             substitution matrix of the scheme that encoded them.
    offsets: int64, length n + 1 (as in :class:`SequenceSet`).
    """

    codes: np.ndarray
    offsets: np.ndarray

    @classmethod
    def from_codes(cls, parts) -> EncodedSequences:
        """The sequences whose codes are the uint8 arrays ``parts``, in that order."""
        parts = list(parts)
        codes = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        return cls(codes, _offsets([len(p) for p in parts]))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def total_residues(self) -> int:
        return int(self.offsets[-1])

    def slice(self, start: int, stop: int) -> EncodedSequences:
        """Sequences ``start`` to ``stop - 1``, their codes a view."""
        off = self.offsets[start : stop + 1]
        return EncodedSequences(self.codes[off[0] : off[-1]], (off - off[0]).astype(np.int64))

    def subset(self, indices) -> EncodedSequences:
        """The sequences at ``indices``, in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        return EncodedSequences.from_codes(
            self.codes[self.offsets[i] : self.offsets[i + 1]] for i in indices
        )
