"""Traceback: one optimal alignment per hit, with every output field.

:func:`traceback` aligns the hits on the CPU threads (the workflow's traceback
is a CPU job, so GPUs stay free for scoring) and returns the full alignment
table: every field of :data:`swgpu_tools.io.fields.FIELDS` plus the hashes that
let a later run reuse an alignment (:func:`reusable`).

Reuse: an alignment depends only on the two sequences, the scoring scheme and
the alignment code.  :func:`traceback` takes the previous run's full table
and reuses its rows (coordinates and CIGAR) for hits with the same query,
subject and score whose sequence hashes (``qhash``, ``shash``) and
:func:`code_digest` are unchanged; every field is then computed again from
them, so the table is byte-identical to a traceback from scratch.
"""

from __future__ import annotations

import hashlib
import os
import time

import numpy as np

from ..errors import InputError
from ..io.fields import FIELDS, alignment_arrays, fields_of_arrays, ops_from_cigars
from ..logs import get_logger
from ..scoring import ScoringScheme
from ..sequences import SequenceSet

log = get_logger(__name__)

#: Called (no arguments) once the alignments are made, before the table is built and
#: written: ``swgpu run-steps`` lets the early pictures start drawing then
#: (:func:`swgpu_tools.report.make.alignments_done`).  Where the hits left to align
#: hold fewer than :data:`SMALL_ALIGN_CELLS` cells, before they are made instead.
after_align: list = []
#: Query x subject residues below which the alignments are too little work to keep the
#: CPUs free for (a re-scan's few new hits: on the 2-core VM the early pictures waited
#: for 5 alignments and the plots step took ~0.15-0.2 s longer, RESULTS-workflow.md).
SMALL_ALIGN_CELLS = 5e8


def _after_align() -> None:
    for hook in after_align:
        hook()


#: Columns of the internal table kept for reuse, beside the output fields.
REUSE_COLUMNS = [
    "qacc",
    "sacc",
    "score",
    "qstart",
    "qend",
    "sstart",
    "send",
    "cigar",
    "qhash",
    "shash",
]


def sequence_hashes(seqs: SequenceSet, indices) -> list[str]:
    """The content hash of each sequence at ``indices`` as 16 hex digits: the 64-bit
    hash of :mod:`swgpu_tools.kernels.seqhash` (as the re-scan states; compiled,
    without the GIL, each sequence of ``seqs`` once)."""
    from ..cpus import usable_cpus
    from ..kernels.seqhash import hash_ranges

    idx = np.asarray(indices, dtype=np.int64)
    if not len(idx):
        return []
    distinct, where = np.unique(idx, return_inverse=True)
    every = hash_ranges(seqs.residues, seqs.offsets, usable_cpus())
    digests = [f"{h:016x}" for h in every[distinct].tolist()]
    return [digests[j] for j in where.reshape(-1).tolist()]


#: How :func:`sequence_hashes` hashes (part of :func:`code_digest`: a stored table
#: keyed by another hash is not reused; "blake2b-8" before).
HASH_KIND = "seqhash-64"


def code_digest(scheme: ScoringScheme) -> str:
    """What an alignment depends on besides the sequences: the scheme and the alignment
    code (and the kind of sequence hash its keys hold, :data:`HASH_KIND`)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(scheme.digest.encode())
    h.update(HASH_KIND.encode())
    for path in _align_sources():
        with open(path, "rb") as fh:
            h.update(os.path.basename(path).encode())
            h.update(fh.read())
    return h.hexdigest()


#: Modules of the ``alignment`` package that decide when its kernels compile, not what
#: they compute: a change to them keeps the stored alignments reusable.
COMPILE_ONLY = frozenset({"warm.py", "warmup.py", "background.py"})


def _align_sources() -> list[str]:
    """The source files of the alignment code (the ``alignment`` package, but
    :data:`COMPILE_ONLY`)."""
    import importlib.util

    spec = importlib.util.find_spec("swgpu_tools.alignment")
    root = list(spec.submodule_search_locations)[0]
    out = []
    for dirpath, _dirs, files in sorted(os.walk(root)):
        out.extend(
            os.path.join(dirpath, f)
            for f in sorted(files)
            if f.endswith(".py") and not (dirpath == root and f in COMPILE_ONLY)
        )
    # the lanes' vector helpers, inlined into the alignment kernels
    out.append(os.path.join(os.path.dirname(root), "kernels", "simd.py"))
    return out


#: The keys that match a hit with a stored alignment.
REUSE_KEYS = ("qacc", "sacc", "score", "qhash", "shash")


def _codes(old, new) -> tuple[np.ndarray, int]:
    """Integer codes of the values of ``old`` then of ``new`` (equal values, equal
    codes; missing values too) and how many codes there may be."""
    import pandas as pd

    if isinstance(old, np.ndarray) and old.dtype.kind == "i" and new.dtype.kind == "i":
        both = np.concatenate([old.astype(np.int64), new.astype(np.int64)])
        if not len(both):
            return both, 1
        lo, hi = int(both.min()), int(both.max())
        if hi - lo < len(both):  # scores: a small range, taken as it is
            return both - lo, hi - lo + 1
        codes, uniq = pd.factorize(both)
        return codes.astype(np.int64), max(len(uniq), 1)
    # text: both as Series of the same kind (the stored table's arrow strings factorize
    # in C, without a Python object per cell)
    old = old.reset_index(drop=True) if isinstance(old, pd.Series) else pd.Series(old)
    new = new.reset_index(drop=True) if isinstance(new, pd.Series) else pd.Series(new)
    codes, uniq = pd.factorize(pd.concat([old, new], ignore_index=True), use_na_sentinel=False)
    return codes.astype(np.int64), max(len(uniq), 1)


def _reuse_rows(hits, scores, qhash, shash, previous) -> tuple[list, np.ndarray]:
    """(hit rows, previous rows): each hit whose query, subject, score and both
    sequences' hashes are a row of ``previous`` (the last such row where several
    are), hit rows ascending.

    Each key column becomes integer codes over both tables, the five are combined
    into one integer key per row, and each key's last row of ``previous`` is
    found with one pass over the keys (no join of the text columns)."""
    import pandas as pd

    n_prev = len(previous)
    current = {
        "qacc": hits["qacc"],
        "sacc": hits["sacc"],
        "score": np.asarray(scores, dtype=np.int64),
        "qhash": qhash,
        "shash": shash,
    }
    key, size = None, 1
    for c in REUSE_KEYS:
        old = previous[c].to_numpy(np.int64) if c == "score" else previous[c]
        codes, m = _codes(old, current[c])
        if key is None:
            key, size = codes, m
            continue
        if size * m >= 2**62:  # would overflow: renumber the keys so far densely
            key, uniq = pd.factorize(key)
            size = max(len(uniq), 1)
        key, size = key * m + codes, size * m
    key, uniq = pd.factorize(key)
    last = np.full(len(uniq), -1, dtype=np.int64)
    np.maximum.at(last, key[:n_prev], np.arange(n_prev, dtype=np.int64))
    rows = last[key[n_prev:]]
    ks = np.flatnonzero(rows >= 0)
    return ks.tolist(), rows[ks]


def _kernels_loaded() -> int:
    """Compiled versions of the database hits' alignment kernels in this process."""
    from ..alignment.warm import entry_points

    return sum(len(f.signatures) for f in entry_points("hits"))


def _alignment_overloads() -> dict[str, int]:
    """Compiled versions of every Numba function of the alignment code loaded in this
    process (entry points and the functions they call that are not inlined), by
    ``module.function``."""
    import sys

    from numba.core.registry import CPUDispatcher

    return {
        f"{name.rsplit('.', 1)[-1]}.{key}": len(v.overloads)
        for name, mod in list(sys.modules.items())
        if name.startswith(("swgpu_tools.alignment", "swgpu_tools.io.fields"))
        for key, v in list(vars(mod).items())
        if isinstance(v, CPUDispatcher)
    }


def traceback(
    hits,
    queries: SequenceSet,
    subjects: SequenceSet,
    scheme: ScoringScheme,
    threads: int | None = None,
    previous=None,
    previous_code: str | None = None,
    stats: dict | None = None,
):
    """The full alignment table of ``hits`` (rows with qacc, sacc, score, and
    qseqid, sseqid, stitle, evalue, bitscore as merged), in the order of ``hits``.

    ``previous``: a full table of an earlier run (columns :data:`REUSE_COLUMNS`)
    made with alignment code ``previous_code``; rows are reused where exact.
    """
    import pandas as pd

    columns = traceback_columns(
        hits, queries, subjects, scheme, threads, previous, previous_code, stats
    )
    return pd.DataFrame(columns)


def _only_used(seqs: SequenceSet, index: np.ndarray) -> tuple[SequenceSet, np.ndarray]:
    """``seqs`` and ``index`` as they are, or, where the pairs to align use fewer than
    half of ``seqs`` (a re-scan aligns a few hundred new hits, most of its subjects'
    records read for the reused ones), only the sequences used and the index into
    them: the encoding then covers those (10 M residues of 22,000 subjects took
    0.012 s on the 2-core VM for 351 alignments)."""
    used, at = np.unique(np.asarray(index, dtype=np.int64), return_inverse=True)
    if 2 * len(used) >= len(seqs):
        return seqs, index
    return seqs.subset(used), at.reshape(-1).astype(np.asarray(index).dtype)


def traceback_columns(
    hits,
    queries: SequenceSet,
    subjects: SequenceSet,
    scheme: ScoringScheme,
    threads: int | None = None,
    previous=None,
    previous_code: str | None = None,
    stats: dict | None = None,
) -> dict:
    """:func:`traceback`'s table as a dict of its columns (numpy arrays and lists, in
    the table's order), without the DataFrame: what the step writes from."""
    from ..alignment import align_many

    qi = _indices(hits["qacc"], queries.ids, "queries that are not in the query file")
    si = _indices(hits["sacc"], subjects.ids, "subjects that are not in the database")
    n = len(hits)
    marks = [("index", time.perf_counter())]
    qhash = sequence_hashes(queries, qi)
    shash = sequence_hashes(subjects, si)
    scores = hits["score"].to_numpy(np.int64)
    # every alignment as arrays: score, spans, where its operations are in ``blobs``
    got = np.zeros(n, dtype=np.int64)
    q0, q1, s0, s1 = (np.zeros(n, dtype=np.int64) for _ in range(4))
    op_start, op_len = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    have = np.zeros(n, dtype=bool)
    blobs: list[np.ndarray] = []
    reused = 0
    marks.append(("hashes", time.perf_counter()))
    if previous is not None and previous_code is not None and len(previous) and n:
        code = code_digest(scheme)
        if code != previous_code:
            log.info("previous alignments not reused: scoring scheme or alignment code changed")
        else:
            ks, rows = _reuse_rows(hits, scores, qhash, shash, previous)
            ops, off, qspan, sspan = ops_from_cigars(previous["cigar"].to_numpy()[rows].tolist())
            qs = previous["qstart"].to_numpy(np.int64)[rows]
            ss = previous["sstart"].to_numpy(np.int64)[rows]
            qe = previous["qend"].to_numpy(np.int64)[rows]
            se = previous["send"].to_numpy(np.int64)[rows]
            a, b = np.where(qs != 0, qs - 1, 0), np.where(ss != 0, ss - 1, 0)
            whole = (qspan == qe - a) & (sspan == se - b)  # else a damaged row: aligned again
            k = np.asarray(ks, dtype=np.int64)[whole]
            got[k] = previous["score"].to_numpy(np.int64)[rows][whole]
            q0[k], q1[k], s0[k], s1[k] = a[whole], qe[whole], b[whole], se[whole]
            op_start[k] = off[:-1][whole]
            op_len[k] = np.diff(off)[whole]
            have[k] = True
            blobs.append(ops)
            reused = int(whole.sum())
    marks.append(("reuse", time.perf_counter()))
    todo = np.flatnonzero(~have)
    cells = queries.lengths[qi[todo]] * subjects.lengths[si[todo]]
    hooks_first = float(cells.sum()) < SMALL_ALIGN_CELLS
    if hooks_first:
        _after_align()
    t0 = time.perf_counter()
    loaded, overloads = _kernels_loaded(), _alignment_overloads()
    if len(todo):
        q_set, q_idx = _only_used(queries, qi[todo])
        s_set, s_idx = _only_used(subjects, si[todo])
        q_enc = scheme.encode(q_set, "queries")
        s_enc = scheme.encode(s_set, "database")
        # the CPU: the traceback step is a CPU job (no GPU lock)
        done = align_many(
            q_enc,
            s_enc,
            q_idx,
            s_idx,
            scheme.matrix,
            scheme.gap_open,
            scheme.gap_extend,
            threads=threads,
            backend="cpu",
            # the search's scores: the forward passes need no tracking of the best cell
            # (SWGPU_KNOWN_SCORES=0: not given, for measuring what they save)
            scores=None if os.environ.get("SWGPU_KNOWN_SCORES") == "0" else scores[todo],
        )
        base = sum(len(x) for x in blobs)
        got[todo], q0[todo], q1[todo], s0[todo], s1[todo], ops, starts, op_len[todo] = (
            alignment_arrays(done)
        )
        op_start[todo] = base + starts
        blobs.append(ops)
    align_s = time.perf_counter() - t0
    log.info(f"aligned {len(todo):,} hits in {align_s:.2f} s; reused {reused:,} alignments")
    if not hooks_first:
        _after_align()
    wrong = np.flatnonzero(got != scores)
    if len(wrong):
        k = int(wrong[0])
        raise RuntimeError(
            f"internal error: traceback score {got[k]} != scan score "
            f"{scores[k]} for {hits['qacc'].iat[k]} vs {hits['sacc'].iat[k]}"
        )
    marks.append(("align", time.perf_counter()))
    ops = np.concatenate(blobs) if blobs else np.zeros(0, np.uint8)
    fields = fields_of_arrays(
        queries, subjects, qi, si, got, q0, q1, s0, s1, ops, op_start, op_len, scheme
    )
    marks.append(("fields", time.perf_counter()))
    table = dict(fields)
    for c in ("qseqid", "sseqid", "qacc", "sacc", "stitle", "evalue", "bitscore"):
        table[c] = hits[c].to_numpy()
    table["qaccver"] = table["qacc"]
    table["saccver"] = table["sacc"]
    table["sallacc"] = table["sacc"]
    table["sallseqid"] = table["sseqid"]
    table["salltitles"] = table["stitle"]
    table["qhash"] = qhash
    table["shash"] = shash
    marks.append(("table", time.perf_counter()))
    if stats is not None:
        stats.update(alignments=n, aligned=int(len(todo)), reused=reused, align_s=align_s)
        # compiled versions of the hits' kernels in this process before and after the
        # alignments (loaded ahead by the warm process: the same numbers)
        stats["kernels_loaded"] = [loaded, _kernels_loaded()]
        # every alignment function's compiled versions, before and after (a first run:
        # what the alignments loaded from the disk cache or compiled)
        after = _alignment_overloads()
        stats["alignment_overloads"] = [sum(overloads.values()), sum(after.values())]
        # those the alignments loaded (or compiled): what the warm process did not load
        stats["alignment_loaded"] = sorted(k for k, v in after.items() if v > overloads.get(k, 0))
        from ..alignment.warm import waited_s

        # a first run's wait for the kernels compiling in the background (:mod:`background`)
        stats["background_compile_wait_s"] = waited_s.get("hits", 0.0)
        stats["align_phases_s"] = {
            name: round(t - marks[i][1], 4) for i, (name, t) in enumerate(marks[1:])
        }
    return {c: table[c] for c in [*FIELDS, "qhash", "shash"]}


def _indices(accessions, ids, what: str) -> np.ndarray:
    """The index in ``ids`` of each of ``accessions`` (InputError naming the first
    five missing, sorted, as ``hits name <what>``)."""
    index = {a: i for i, a in enumerate(ids)}
    values = accessions.tolist()
    out = np.fromiter(map(index.get, values, [-1] * len(values)), dtype=np.int64, count=len(values))
    if (out < 0).any():
        missing = sorted({a for a, i in zip(values, out.tolist()) if i < 0})
        raise InputError(f"hits name {what}: {missing[:5]}")
    return out
