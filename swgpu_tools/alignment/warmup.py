"""Compiling every CPU alignment kernel ahead (``swgpu backend --precompile``).

Kept apart from :mod:`.warm` (cache state and notices), which :mod:`.api`
imports: this module runs the API on made-up sequences.
"""

from __future__ import annotations

import time

import numpy as np

from ..kernels.jitcache import cache_folder
from .warm import KINDS, is_compiled


def _output_columns(queries, db, qi, si, alignments, scheme) -> None:
    """The output columns of alignments (:func:`swgpu_tools.io.fields.alignment_fields`,
    its Numba kernel), as the traceback step computes them for its table."""
    from ..io.fields import alignment_fields
    from ..sequences import SequenceSet

    letters = np.frombuffer(scheme.alphabet.encode("ascii"), dtype=np.uint8)

    def as_set(enc):  # the matrix codes back to letters
        ids = [f"s{k}" for k in range(len(enc.offsets) - 1)]
        return SequenceSet(ids, letters[enc.codes], enc.offsets)

    alignment_fields(as_set(queries), as_set(db), qi, si, alignments, scheme)


def load_hits_kernels() -> bool:
    """Load the kernels the traceback step calls first (database hits in int16 lanes,
    their output columns) from the disk cache, on one thread (no thread is
    started: the warm process loads them before it forks).  False, loading
    nothing, when the cache does not hold them (compiling is left to the step,
    or to :func:`first_hits` in the background)."""
    if not is_compiled("hits"):
        return False
    first_hits()
    return True


def load_singles_kernel() -> bool:
    """Load the traceback of large regions one at a time (:func:`first_singles`) from the
    disk cache, where it is there (False, loading nothing, where it is not).  With
    many threads the step takes that path for weak hits of long queries (16 threads:
    regions over 12.5 M cells)."""
    from ..kernels.jitcache import cache_warm
    from .batch import traceback_singles

    if not cache_warm([traceback_singles]):
        return False
    first_singles()
    return True


def load_pairs_kernels() -> bool:
    """Load the database hits' pair-lane path (:func:`first_pairs`) from the disk cache,
    where it is there (False, loading nothing, where it is not).  A traceback of fewer
    than four hits per query takes it: a re-scan's new hits, spread over many queries."""
    if not is_compiled("pairs"):
        return False
    first_pairs()
    return True


def first_pairs() -> None:
    """Run the database hits' alignments on made-up hits of one each per query, the
    pair-lane path (:func:`swgpu_tools.alignment.batch.locate_chunk_pairs`, which a
    traceback of fewer than four hits per query takes), on one thread."""
    from ..scoring import ScoringScheme
    from ..sequences import EncodedSequences
    from .api import align_many

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    rng = np.random.default_rng(4)
    qs = [rng.integers(0, 20, int(n)).astype(np.uint8) for n in (80, 100)]
    ss = [np.concatenate([qs[0][:40], qs[0][45:]]), rng.integers(0, 20, 90).astype(np.uint8)]
    queries, db = EncodedSequences.from_codes(qs), EncodedSequences.from_codes(ss)
    qi, si = np.arange(2, dtype=np.int64), np.arange(2, dtype=np.int64)
    align_many(queries, db, qi, si, scheme, threads=1, backend="cpu")


def first_hits() -> None:
    """Run the kernels the traceback step calls first on one made-up query's hits
    (compiling them where the disk cache lacks them)."""
    from ..io.fields import load_kernel
    from ..kernels.seqhash import hash_ranges
    from ..scoring import ScoringScheme
    from ..sequences import EncodedSequences
    from .api import align_many

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    rng = np.random.default_rng(2)
    query = rng.integers(0, 20, 120).astype(np.uint8)
    # one query's hits (in query lanes, as a database's): strong ones (bands) and
    # weak ones (traced back in pair lanes)
    subjects = [query.copy(), np.concatenate([query[:50], query[60:]])]
    subjects += [rng.integers(0, 20, int(n)).astype(np.uint8) for n in (40, 90, 130, 70, 110, 60)]
    queries = EncodedSequences.from_codes([query])
    db = EncodedSequences.from_codes(subjects)
    qi, si = np.zeros(len(subjects), np.int64), np.arange(len(subjects), dtype=np.int64)
    hash_ranges(db.codes, db.offsets, 1)  # the reuse keys (engine.traceback.sequence_hashes)
    align_many(queries, db, qi, si, scheme, threads=1, backend="cpu")
    load_kernel()


def first_singles() -> None:
    """Call the traceback of regions one at a time, with checkpoints
    (:func:`swgpu_tools.alignment.batch.traceback_singles`), on one made-up region,
    with the argument types :func:`~swgpu_tools.alignment.batch.traceback_regions`
    passes (compiling it where the disk cache lacks it, and nothing else): the path
    of weak hits whose region is larger than the threads' share of the cell limit
    (16 threads: weak hits of a 5,000-aa query)."""
    from ..scoring import ScoringScheme
    from .batch import traceback_singles
    from .modes import mode_code
    from .params import kernel_scoring

    matrix, gap_open, gap_extend = kernel_scoring(ScoringScheme("BLOSUM62", 11, 1))
    rng = np.random.default_rng(3)
    codes = np.ascontiguousarray(rng.integers(0, 20, 60), dtype=np.uint8)
    off = np.array([0, 30, 60], dtype=np.int64)  # a query and a subject of 30
    one = np.zeros(1, dtype=np.int64)
    info = np.array([[0, 0, 30, 0, 30, 0]], dtype=np.int64)  # a region (its score unchecked)
    room = np.array([0, 60], dtype=np.int64)
    ops = np.zeros(60, dtype=np.uint8)
    traceback_singles(
        0, 1, codes, off, codes, off, one, one + 1, matrix, gap_open, gap_extend,
        200, mode_code("local"), one.copy(), info, ops, room,
    )  # fmt: skip


def _precompile_hits():
    """The database hits' kernels (int16 and int32 lanes, bands and their scalar
    fallbacks, weak hits in pair lanes) and their output columns, on made-up
    sequences; returns (query, subjects) for the pairs' part."""
    from ..scoring import ScoringScheme
    from ..sequences import EncodedSequences
    from .api import align_many

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    rng = np.random.default_rng(2)
    query = rng.integers(0, 20, 300).astype(np.uint8)
    subjects = [
        query.copy(),
        np.concatenate([query[:120], query[140:]]),
        rng.integers(0, 20, 250).astype(np.uint8),
    ]
    subjects += [rng.integers(0, 20, int(n)).astype(np.uint8) for n in rng.integers(20, 200, 9)]
    wall = np.full(3000, 17, dtype=np.uint8)  # W: a self-score past the int16 lanes
    queries = EncodedSequences.from_codes([query, wall])
    db = EncodedSequences.from_codes(subjects + [wall, wall[:2900]])
    qi = np.r_[np.zeros(len(subjects), np.int64), [1, 1, 1, 1]]
    si = np.r_[np.arange(len(subjects)), [len(subjects), len(subjects) + 1, 0, 1]]
    for cell_limit in (None, 64):  # 64: bands and regions too large, the scalar paths
        got = align_many(
            queries, db, qi, si, scheme, threads=1, backend="cpu", cell_limit=cell_limit
        )
    _output_columns(queries, db, qi, si, got, scheme)
    from ..io.fields import load_kernel

    load_kernel()  # with the stored CIGARs' reader of a re-scan
    return query, subjects


def precompile(log=None) -> dict:
    """Compile (or load from the disk cache) every CPU alignment kernel a run may need.

    Database hits (int16 and int32 lanes, bands and their scalar fallbacks,
    weak hits in pair lanes, large regions one at a time), batches of pairs
    in the three modes with and without pair lanes and from given end cells,
    and single pairs, on made-up sequences.  ``log``: a callable for progress
    lines.  Returns {"what", "seconds", "was_cached", "cache_dir"}.
    """
    from ..scoring import ScoringScheme
    from .api import align, align_pairs

    t0 = time.perf_counter()
    was = all(is_compiled(k) for k in KINDS)
    if log:
        log(
            f"CPU alignment kernels: {'loading from' if was else 'compiling into'} {cache_folder()}"
        )
    query, subjects = _precompile_hits()
    scheme = ScoringScheme("BLOSUM62", 11, 1)
    pairs = [(query, s) for s in subjects]
    dna = ScoringScheme(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    for mode in ("local", "global", "semiglobal"):
        for s in (scheme, dna):
            ps = pairs if s is scheme else [(a % 4, b % 4) for a, b in pairs]
            for lanes in (True, False):
                got = align_pairs(ps, s, threads=1, mode=mode, pair_lanes=lanes, backend="cpu")
            if mode != "global":
                ends = np.array([(a.score, a.query_end, a.subject_end) for a in got])
                for lanes in (True, False):
                    align_pairs(ps, s, threads=1, mode=mode, ends=ends, pair_lanes=lanes)
        align(query, subjects[1], scheme, mode=mode)
    return {
        "what": "CPU alignment kernels",
        "seconds": time.perf_counter() - t0,
        "was_cached": was,
        "cache_dir": cache_folder(),
    }
