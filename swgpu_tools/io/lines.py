"""Many short text lines (FASTA header lines) held as one UTF-8 blob.

A scoring job keeps the header line of every subject it hits (about 100,000
a shard of bench200M); the merge needs the titles of only the few thousand
subjects left at the end.  As one blob with each line's start and end, the
lines are chosen, joined, written and read with a handful of bytes operations,
and only the lines that are read are decoded.
"""

from __future__ import annotations

import numpy as np


class Lines:
    """Lines ``blob[starts[i]:ends[i]]`` (bytes, no newline), decoded to str when read."""

    __slots__ = ("blob", "starts", "ends")

    def __init__(self, blob: bytes, starts: np.ndarray, ends: np.ndarray):
        self.blob = blob
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.asarray(ends, dtype=np.int64)

    @classmethod
    def from_blob(cls, blob: bytes, n: int) -> Lines:
        """``n`` lines joined by newlines (as :meth:`packed` writes them)."""
        if n == 0:
            return cls(b"", np.zeros(0, np.int64), np.zeros(0, np.int64))
        ends = np.append(np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 10), len(blob))
        if len(ends) != n:
            raise ValueError(f"{len(ends)} lines where {n} were expected")
        starts = np.concatenate([[0], ends[:-1] + 1])
        return cls(blob, starts, ends)

    @classmethod
    def from_strings(cls, lines) -> Lines:
        lines = list(lines)
        if any("\n" in x for x in lines):
            raise ValueError("a line holds a newline")
        return cls.from_blob("\n".join(lines).encode("utf-8"), len(lines))

    @classmethod
    def concat(cls, parts: list[Lines]) -> Lines:
        """The lines of ``parts`` one after another (their blobs joined once; no
        work per line)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.from_blob(b"", 0)
        if len(parts) == 1:
            return parts[0]
        shift = np.cumsum([0] + [len(p.blob) for p in parts[:-1]])
        return cls(
            b"".join(p.blob for p in parts),
            np.concatenate([p.starts + o for p, o in zip(parts, shift)]),
            np.concatenate([p.ends + o for p, o in zip(parts, shift)]),
        )

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, k: int) -> str:
        return self.blob[self.starts[k] : self.ends[k]].decode("utf-8")

    def take(self, indices) -> Lines:
        """The lines at ``indices``, in that order: the same blob, no copy (the
        lines are joined only when written: :meth:`packed`)."""
        idx = np.asarray(indices, dtype=np.int64)
        return Lines(self.blob, self.starts[idx], self.ends[idx])

    def packed(self) -> bytes:
        """The lines joined by newlines.  Lines that follow each other in the blob
        with a newline between (most of a shard's header lines a job keeps) are
        copied as one slice: a Python object per run of them, not per line (0.11 s
        for 400,000 lines on an H200 host, one per line)."""
        n = len(self)
        if not n:
            return b""
        follows = self.starts[1:] == self.ends[:-1] + 1  # the next line one byte later
        if follows.any():
            at = self.ends[:-1][follows]  # ... and that byte a newline
            follows[follows] = np.frombuffer(self.blob, dtype=np.uint8)[at] == 10
        if self.starts[0] == 0 and self.ends[-1] == len(self.blob) and follows.all():
            return self.blob  # compact already
        cut = np.flatnonzero(~follows)  # a run ends at each of these lines, and at the last
        starts = self.starts[np.concatenate([[0], cut + 1])].tolist()
        ends = self.ends[np.append(cut, n - 1)].tolist()
        return b"\n".join([self.blob[a:b] for a, b in zip(starts, ends)])

    def tolist(self) -> list[str]:
        if not len(self):
            return []
        return self.packed().decode("utf-8").split("\n")

    def __eq__(self, other) -> bool:
        return isinstance(other, Lines) and self.tolist() == other.tolist()

    __hash__ = None
