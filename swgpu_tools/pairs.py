"""``swgpu align``: align given pairs of sequences and write one TSV row per pair.

Input is either two FASTA files aligned record by record (record k of the
first file is the query of pair k, record k of the second its subject), or
one interleaved FASTA file (records 1 and 2 are pair 1, records 3 and 4 pair
2, ...; the first of each two is the query).  Ids may repeat (the same
sequence can be in many pairs).  The alignments are computed by
:func:`swgpu_tools.alignment.align_many` (local, global or semi-global mode,
Numba threads on the CPU).

GPU: scoring the batch on a GPU is not implemented; the hook for it is
``align_many(..., ends=...)`` (a forward pass done elsewhere gives each pair's
best score and end cell; the CPU then only runs the reverse pass and the
traceback).

Output columns (:data:`PAIR_COLUMNS`), tab-separated, one header line,
written atomically (:func:`swgpu_tools.tables.atomic_write`):

* ``qseqid sseqid``: the ids;
* ``score``: the alignment score (substitution scores minus gap costs);
* ``qstart qend sstart send``: 1-based inclusive coordinates of the aligned
  region (``0 0`` where the region of that sequence is empty, e.g. a local
  alignment of score 0);
* ``qlen slen``: sequence lengths;
* ``length``: alignment columns; ``identities``: columns of identical letters;
  ``pident``: ``100 * identities / length`` (``%.3f``; 0 for an empty alignment);
* ``cigar``: runs of ``=`` (identical pair), ``X`` (different pair), ``I``
  (query residue against a gap), ``D`` (subject residue against a gap);
  ``*`` for an empty alignment;
* with ``aligned_strings``: ``qaln saln``, the aligned rows with ``-`` for gaps.
"""
from __future__ import annotations

import os
import time

import numpy as np

from .errors import InputError
from .fasta import iter_fasta
from .sequences import SequenceSet

PAIR_COLUMNS = ["qseqid", "sseqid", "score", "qstart", "qend", "sstart", "send", "qlen",
                "slen", "length", "identities", "pident", "cigar"]
ALIGNED_COLUMNS = ["qaln", "saln"]


def _set(records) -> SequenceSet:
    ids = [r.id for r in records]
    seqs = [r.sequence for r in records]
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in seqs], out=offsets[1:])
    residues = np.frombuffer(b"".join(seqs), dtype=np.uint8).copy()
    return SequenceSet(ids, residues, offsets)


def read_pairs(first, second=None) -> tuple[SequenceSet, SequenceSet]:
    """(queries, subjects) of the pairs in one interleaved file or two files.

    Raises InputError for unequal record counts, an odd number of records in
    an interleaved file, and every FASTA problem of :func:`iter_fasta`.
    """
    a = list(iter_fasta(first))
    if second is None:
        if len(a) % 2:
            raise InputError(
                f"{os.fspath(first)}: an interleaved pairs file needs an even number of "
                f"records (query, subject, query, subject, ...); it has {len(a)}: the last "
                f"record '{a[-1].id}' (line {a[-1].line}) has no partner")
        return _set(a[0::2]), _set(a[1::2])
    b = list(iter_fasta(second))
    if len(a) != len(b):
        short, long_, recs = (first, second, b) if len(a) < len(b) else (second, first, a)
        extra = recs[min(len(a), len(b))]
        raise InputError(
            f"the two pair files have different numbers of records: {os.fspath(first)} has "
            f"{len(a)}, {os.fspath(second)} has {len(b)}; record {min(len(a), len(b)) + 1} "
            f"of {os.fspath(long_)} ('{extra.id}', line {extra.line}) has no partner in "
            f"{os.fspath(short)}")
    return _set(a), _set(b)


def pair_rows(queries: SequenceSet, subjects: SequenceSet, alignments,
              aligned_strings: bool = False):
    """Yield one tuple per pair in the order of :data:`PAIR_COLUMNS` (+ aligned rows)."""
    from .tables import alignment_columns, format_pident

    for k, aln in enumerate(alignments):
        qseq = queries.sequence(k)
        sseq = subjects.sequence(k)
        c = alignment_columns(qseq, sseq, aln)
        qs, qe = (c["qstart"], c["qend"]) if aln.query_end > aln.query_start else (0, 0)
        ss, se = (c["sstart"], c["send"]) if aln.subject_end > aln.subject_start else (0, 0)
        row = (queries.ids[k], subjects.ids[k], aln.score, qs, qe, ss, se, len(qseq),
               len(sseq), c["length"], c["identities"], format_pident(c["pident"]),
               c["cigar"] or "*")
        if aligned_strings:
            row += (c["qaln"], c["saln"])
        yield row


def write_pairs_table(rows, path, aligned_strings: bool = False) -> None:
    """Write :func:`pair_rows` atomically."""
    from .tables import atomic_write

    columns = PAIR_COLUMNS + (ALIGNED_COLUMNS if aligned_strings else [])
    with atomic_write(path) as fh:
        fh.write("\t".join(columns) + "\n")
        lines = []
        for row in rows:
            lines.append("\t".join(str(x) for x in row))
            if len(lines) >= 65536:
                fh.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            fh.write("\n".join(lines) + "\n")


def align_pair_files(first, second, out_path, scheme, mode: str = "local",
                     threads: int | None = None, aligned_strings: bool = False,
                     cell_limit: int | None = None, log=None) -> int:
    """Align the pairs of ``first`` (and ``second``) and write ``out_path``; returns the count."""
    from .alignment import align_many

    log = log or (lambda msg: None)
    start = time.perf_counter()
    queries, subjects = read_pairs(first, second)
    q = scheme.encode(queries, os.fspath(first))
    s = scheme.encode(subjects, os.fspath(second if second is not None else first))
    idx = np.arange(len(queries), dtype=np.int64)
    t0 = time.perf_counter()
    try:
        alignments = align_many(q, s, idx, idx, scheme.matrix, scheme.gap_open,
                                scheme.gap_extend, threads, cell_limit=cell_limit, mode=mode)
    except ValueError as exc:  # e.g. scores beyond 32 bits for huge pairs
        raise InputError(str(exc)) from None
    t1 = time.perf_counter()
    write_pairs_table(pair_rows(queries, subjects, alignments, aligned_strings), out_path,
                      aligned_strings)
    log(f"aligned {len(alignments):,} pairs ({mode}) in {t1 - t0:.2f} s; "
        f"{time.perf_counter() - start:.2f} s in all; wrote {os.fspath(out_path)}")
    return len(alignments)
