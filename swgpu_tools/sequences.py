"""In-memory sequence collections shared by every step.

A :class:`SequenceSet` holds many sequences back to back in one byte array:
``residues[offsets[i]:offsets[i + 1]]`` is sequence ``i``, written in the
canonical letters of :mod:`swgpu_tools.alphabet` (upper-case ASCII, ``*``).
Kernels never see letters: :meth:`swgpu_tools.scoring.ScoringScheme.encode`
turns a set into :class:`EncodedSequences` (small integer codes that index the
substitution matrix).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SequenceSet:
    """Sequences with their ids, concatenated.

    ids:      one id per sequence (accession for UniProt headers).
    residues: uint8 ASCII letters of all sequences, concatenated.
    offsets:  int64, length n + 1; sequence i is residues[offsets[i]:offsets[i+1]].
    """

    ids: list[str]
    residues: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        self.residues = np.ascontiguousarray(self.residues, dtype=np.uint8)
        self.offsets = np.ascontiguousarray(self.offsets, dtype=np.int64)
        if len(self.offsets) != len(self.ids) + 1:
            raise ValueError("offsets must have one more entry than ids")

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
        return self.residues[self.offsets[i]:self.offsets[i + 1]].tobytes().decode("ascii")

    def subset(self, indices) -> "SequenceSet":
        """A new set with the sequences at ``indices``, in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        lengths = self.lengths[indices]
        offsets = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        parts = [self.residues[self.offsets[i]:self.offsets[i + 1]] for i in indices]
        residues = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        return SequenceSet([self.ids[i] for i in indices], residues, offsets)

    @classmethod
    def from_pairs(cls, pairs) -> "SequenceSet":
        """Build from ``(id, sequence_str)`` pairs; sequences must be canonical letters."""
        ids, seqs = [], []
        for sid, seq in pairs:
            ids.append(sid)
            seqs.append(seq.encode("ascii") if isinstance(seq, str) else bytes(seq))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in seqs], out=offsets[1:])
        residues = np.frombuffer(b"".join(seqs), dtype=np.uint8).copy()
        return cls(ids, residues, offsets)


@dataclass
class EncodedSequences:
    """Sequences as matrix codes, ready for a kernel.

    codes:   uint8, all sequences concatenated; each value indexes the
             substitution matrix of the scheme that encoded them.
    offsets: int64, length n + 1 (as in :class:`SequenceSet`).
    """

    codes: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def total_residues(self) -> int:
        return int(self.offsets[-1])
