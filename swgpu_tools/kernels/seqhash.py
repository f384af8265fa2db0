"""64-bit content hashes of sequences: how a re-scan tells which sequences changed
(:mod:`swgpu_tools.io.statefile`, :mod:`swgpu_tools.engine.increment`).

Per sequence: FNV-1a over its residue letters, started from the FNV offset
basis mixed with the sequence's length, then splitmix64's finaliser.  Compiled
with Numba and run without the GIL, in chunks of about equal residues on the
thread pool (:mod:`swgpu_tools.alignment.pool`): a scoring job hashes its
shard while the GPU starts, and one Python call per sequence (``hashlib``)
held the GIL for 0.4 s on the 2-core machine and 1-2 s on an H100 host for
bench200M's 439,000 sequences, beside the GPU start-up's own Python work.

Not a cryptographic hash.  Each FNV-1a step and the finaliser are bijections
of the 64-bit state, so two sequences of the same length that differ in one
residue always hash apart; other pairs of different sequences collide with a
probability of about 2^-64.  The values depend only on the letters, so they
are the same on every machine and for every scoring scheme.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..alignment.pool import run_chunks

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)

#: Residues per chunk of work (below this a job is one chunk, on the calling thread).
CHUNK_RESIDUES = 4_000_000


@njit(cache=True, nogil=True, inline="always")
def _start(length):  # pragma: no cover - compiled
    """The FNV offset basis mixed with the sequence's length."""
    return np.uint64(0xCBF29CE484222325) ^ (np.uint64(length) * np.uint64(0x9E3779B97F4A7C15))


@njit(cache=True, nogil=True, inline="always")
def _finish(h):  # pragma: no cover - compiled
    """splitmix64's finaliser."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@njit(cache=True, nogil=True, boundscheck=False)
def _hash_chunk(c, nchunks, residues, offsets, bounds, out):  # pragma: no cover - compiled
    prime = np.uint64(0x100000001B3)
    for i in range(bounds[c], bounds[c + 1]):
        a, b = offsets[i], offsets[i + 1]
        h = _start(b - a)
        for p in range(a, b):
            h = (h ^ np.uint64(residues[p])) * prime
        out[i] = _finish(h)


@njit(cache=True, nogil=True, boundscheck=False)
def _hash_encode_chunk(
    c, nchunks, residues, offsets, bounds, table, out, codes, bad
):  # pragma: no cover - compiled
    """:func:`_hash_chunk`, and each residue's code (``table``) into ``codes``; the
    chunk's first residue without one (code 255) into ``bad[c]`` (-1: none)."""
    prime = np.uint64(0x100000001B3)
    first_bad = -1
    for i in range(bounds[c], bounds[c + 1]):
        a, b = offsets[i], offsets[i + 1]
        h = _start(b - a)
        for p in range(a, b):
            x = residues[p]
            h = (h ^ np.uint64(x)) * prime
            code = table[x]
            codes[p] = code
            if code == 255 and first_bad < 0:
                first_bad = p
        out[i] = _finish(h)
    bad[c] = first_bad


def _chunk_bounds(offsets: np.ndarray, n: int, threads: int) -> np.ndarray:
    """Chunk c: the sequences from the first one starting at or after its share of residues."""
    total = int(offsets[-1] - offsets[0])
    nchunks = max(1, min(n, total // CHUNK_RESIDUES + 1, 8 * max(1, threads)))
    marks = offsets[0] + (total * np.arange(nchunks + 1, dtype=np.int64)) // nchunks
    bounds = np.searchsorted(offsets[:-1], marks, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n
    return bounds


def hash_ranges(residues: np.ndarray, offsets: np.ndarray, threads: int = 1) -> np.ndarray:
    """uint64 hash of ``residues[offsets[i]:offsets[i + 1]]`` for every i."""
    residues = np.ascontiguousarray(residues, dtype=np.uint8)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    out = np.empty(max(n, 0), dtype=np.uint64)
    if n <= 0:
        return out
    bounds = _chunk_bounds(offsets, n, threads)
    run_chunks(_hash_chunk, len(bounds) - 1, threads, residues, offsets, bounds, out)
    return out


def hash_and_translate(
    residues: np.ndarray, offsets: np.ndarray, table: np.ndarray, threads: int = 1
) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`hash_ranges`, and in the same pass ``table[residues]`` (uint8; 255 marks
    a letter without a code): (hashes, codes, position of the first 255 or -1).
    The residues must be exactly the sequences' (``offsets[0] == 0``,
    ``offsets[-1] == len(residues)``)."""
    residues = np.ascontiguousarray(residues, dtype=np.uint8)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    table = np.ascontiguousarray(table, dtype=np.uint8)
    n = len(offsets) - 1
    if len(table) != 256 or (n >= 0 and (offsets[0] != 0 or offsets[-1] != len(residues))):
        raise ValueError("hash_and_translate: a 256-entry table and whole residues")
    out = np.empty(max(n, 0), dtype=np.uint64)
    codes = np.empty(len(residues), dtype=np.uint8)
    if n <= 0:
        return out, codes, -1
    bounds = _chunk_bounds(offsets, n, threads)
    bad = np.full(len(bounds) - 1, -1, dtype=np.int64)
    run_chunks(
        _hash_encode_chunk, len(bad), threads, residues, offsets, bounds, table, out, codes, bad
    )
    found = bad[bad >= 0]
    return out, codes, int(found.min()) if len(found) else -1


@njit(cache=True, nogil=True, inline="always")
def _cmp(a, a0, a1, b, b0, b1):  # pragma: no cover - compiled
    """Byte order of the lines a[a0:a1] and b[b0:b1]: -1, 0 or 1."""
    n = min(a1 - a0, b1 - b0)
    for k in range(n):
        x, y = a[a0 + k], b[b0 + k]
        if x != y:
            return -1 if x < y else 1
    la, lb = a1 - a0, b1 - b0
    return 0 if la == lb else (-1 if la < lb else 1)


@njit(cache=True, nogil=True, boundscheck=False)
def _ascending(a, starts, ends):  # pragma: no cover - compiled
    for i in range(1, len(starts)):
        if _cmp(a, starts[i - 1], ends[i - 1], a, starts[i], ends[i]) >= 0:
            return False
    return True


@njit(cache=True, nogil=True, boundscheck=False)
def _match_lines(a, a_starts, a_ends, b, b_starts, b_ends, out):  # pragma: no cover - compiled
    """Where both line lists ascend strictly: ``out[i]`` = the index of line i of a
    among the lines of b, -1 where it is not there; True.  Else False."""
    if not (_ascending(a, a_starts, a_ends) and _ascending(b, b_starts, b_ends)):
        return False
    j, nb = 0, len(b_starts)
    for i in range(len(a_starts)):
        while j < nb and _cmp(b, b_starts[j], b_ends[j], a, a_starts[i], a_ends[i]) < 0:
            j += 1
        if j < nb and _cmp(b, b_starts[j], b_ends[j], a, a_starts[i], a_ends[i]) == 0:
            out[i] = j
        else:
            out[i] = -1
    return True


def _line_bounds(blob: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, starts, ends) of the lines of ``blob`` (joined by newlines, none at the end)."""
    buf = np.frombuffer(blob, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    starts = np.concatenate([[0], nl + 1]).astype(np.int64)
    ends = np.concatenate([nl, [len(buf)]]).astype(np.int64)
    return buf, starts, ends


def match_sorted(lines: bytes, n_lines: int, among: bytes, n_among: int) -> np.ndarray | None:
    """For each of the ``n_lines`` lines of ``lines`` (UTF-8, joined by newlines), its
    index among the ``n_among`` lines of ``among``, -1 where it is not there; None where
    either list does not ascend strictly in byte order (a shard's accessions and a
    re-scan state's do: then the caller matches them otherwise).  One pass over both,
    compiled: no Python object per line (a dict of 110,000 accessions took 0.05 s a
    shard on an H200 host)."""
    out = np.full(n_lines, -1, dtype=np.int64)
    if n_lines == 0 or n_among == 0:
        return out
    a, a0, a1 = _line_bounds(lines)
    b, b0, b1 = _line_bounds(among)
    if len(a0) != n_lines or len(b0) != n_among:  # a line held a newline
        return None
    return out if _match_lines(a, a0, a1, b, b0, b1, out) else None


def preload() -> None:
    """Load this module's compiled functions (from Numba's disk cache) for the arrays a
    scoring job passes, by calling them on one residue: a process that forks jobs, or
    waits for one, then has them ready (they are serial: no thread pool starts)."""
    residues = np.zeros(1, dtype=np.uint8)
    offsets = np.array([0, 1], dtype=np.int64)
    hash_ranges(residues, offsets, 1)
    hash_and_translate(residues, offsets, np.zeros(256, dtype=np.uint8), 1)
    match_sorted(b"a", 1, b"a", 1)


def entry_points():
    """The Numba functions of this module (for the precompile and the cold-cache notice)."""
    return (_hash_chunk, _hash_encode_chunk, _match_lines)


def reference_hash(letters: bytes) -> int:
    """The same hash in plain Python, one sequence (tests; slow)."""
    mask = (1 << 64) - 1
    h = int(_FNV_OFFSET) ^ ((len(letters) * 0x9E3779B97F4A7C15) & mask)
    for x in letters:
        h = ((h ^ x) * int(_FNV_PRIME)) & mask
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & mask
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & mask
    return h ^ (h >> 31)
