"""``swgpu align``: align given pairs of sequences and write one TSV row per pair.

Input is either two FASTA files aligned record by record (record k of the
first file is the query of pair k, record k of the second its subject), or
one interleaved FASTA file (records 1 and 2 are pair 1, records 3 and 4 pair
2, ...; the first of each two is the query).  Ids may repeat (the same
sequence can be in many pairs).  The alignments are computed by
:func:`swgpu_tools.alignment.align_many` (local, global or semi-global mode,
Numba threads on the CPU).

GPU (``backend``, ``swgpu align --backend``): in local and semi-global modes
the score-only passes of the whole batch (each pair's best score, end cell
and start cell: the forward and reverse passes) run on the GPU, with
:func:`swgpu_tools.kernels.gpu.pair_regions`, when one is usable and the
batch is large enough for it to pay (``auto``, the default: an estimate,
start-up included, :func:`swgpu_tools.alignment.cost.batch_backend`; small
batches, a few long pairs, or a GPU that fails run on the CPU), or when
asked (``gpu``: an error if none is usable); the traceback of each region
then runs in parallel on the CPU threads.  Global mode always runs on the
CPU (its traceback recomputes the whole matrix, so a GPU pass would save
nothing).  The alignments are identical either way; the log line says which
backend scored the batch and why.

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
from .io.fasta import iter_fasta
from .logs import get_logger
from .sequences import SequenceSet

log = get_logger(__name__)


PAIR_COLUMNS = [
    "qseqid",
    "sseqid",
    "score",
    "qstart",
    "qend",
    "sstart",
    "send",
    "qlen",
    "slen",
    "length",
    "identities",
    "pident",
    "cigar",
]
ALIGNED_COLUMNS = ["qaln", "saln"]


def _set(records) -> SequenceSet:
    return SequenceSet.from_sequences(
        [r.id for r in records], [r.sequence for r in records], [r.header for r in records]
    )


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
                f"record '{a[-1].id}' (line {a[-1].line}) has no partner"
            )
        return _set(a[0::2]), _set(a[1::2])
    b = list(iter_fasta(second))
    if len(a) != len(b):
        short, long_, recs = (first, second, b) if len(a) < len(b) else (second, first, a)
        extra = recs[min(len(a), len(b))]
        raise InputError(
            f"the two pair files have different numbers of records: {os.fspath(first)} has "
            f"{len(a)}, {os.fspath(second)} has {len(b)}; record {min(len(a), len(b)) + 1} "
            f"of {os.fspath(long_)} ('{extra.id}', line {extra.line}) has no partner in "
            f"{os.fspath(short)}"
        )
    return _set(a), _set(b)


def pair_rows(
    queries: SequenceSet, subjects: SequenceSet, alignments, scheme, aligned_strings: bool = False
):
    """Yield one tuple per pair in the order of :data:`PAIR_COLUMNS` (+ aligned rows)."""
    from .io.fields import alignment_fields
    from .io.tables import format_pident

    n = len(alignments)
    if n == 0:
        return
    idx = np.arange(n, dtype=np.int64)
    f = alignment_fields(queries, subjects, idx, idx, alignments, scheme)
    qids, sids = queries.seqids, subjects.seqids
    cols = [
        f[c].tolist() if isinstance(f[c], np.ndarray) else f[c]
        for c in (
            "score",
            "qstart",
            "qend",
            "sstart",
            "send",
            "qlen",
            "slen",
            "length",
            "nident",
            "pident",
            "cigar",
            "qseq",
            "sseq",
        )
    ]
    for k in range(n):
        score, qs, qe, ss, se, ql, sl, length, ident, pident, cigar, qseq, sseq = (
            c[k] for c in cols
        )
        row = (
            qids[k],
            sids[k],
            score,
            qs,
            qe,
            ss,
            se,
            ql,
            sl,
            length,
            ident,
            format_pident(pident),
            cigar,
        )
        if aligned_strings:
            row += (qseq, sseq)
        yield row


def write_pairs_table(rows, path, aligned_strings: bool = False) -> None:
    """Write :func:`pair_rows` atomically."""
    from .io.atomic import atomic_write

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


def align_pair_files(
    first,
    second,
    out_path,
    scheme,
    mode: str = "local",
    threads: int | None = None,
    aligned_strings: bool = False,
    cell_limit: int | None = None,
    backend: str = "auto",
) -> int:
    """Align the pairs of ``first`` (and ``second``) and write ``out_path``; returns the count.

    backend: "auto", "cpu" or "gpu" for the score passes (see the module doc).
    """
    from .alignment import align_many, pair_backend

    start = time.perf_counter()
    queries, subjects = read_pairs(first, second)
    q = scheme.encode(queries, os.fspath(first))
    s = scheme.encode(subjects, os.fspath(second if second is not None else first))
    idx = np.arange(len(queries), dtype=np.int64)
    if str(backend).lower() == "gpu":
        pair_backend(backend, mode)  # InputError now if no GPU is usable
    stats = {}
    t0 = time.perf_counter()
    try:
        alignments = align_many(
            q,
            s,
            idx,
            idx,
            scheme.matrix,
            scheme.gap_open,
            scheme.gap_extend,
            threads,
            cell_limit=cell_limit,
            mode=mode,
            backend=backend,
            stats=stats,
        )
    except ValueError as exc:  # e.g. scores beyond 32 bits for huge pairs
        raise InputError(str(exc)) from None
    t1 = time.perf_counter()
    write_pairs_table(
        pair_rows(queries, subjects, alignments, scheme, aligned_strings), out_path, aligned_strings
    )
    log.info(f"backend: {stats.get('backend')} ({stats.get('reason')})")
    split = ""
    if stats.get("backend") == "gpu":
        split = (
            f" (score passes on the GPU {stats['gpu_s']:.2f} s, traceback on the CPU "
            f"{stats['cpu_s']:.2f} s)"
        )
    log.info(
        f"aligned {len(alignments):,} pairs ({mode}) in {t1 - t0:.2f} s{split}; "
        f"{time.perf_counter() - start:.2f} s in all; wrote {os.fspath(out_path)}"
    )
    return len(alignments)
