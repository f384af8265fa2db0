"""Output fields by BLAST's names (``-outfmt 6`` field names), and their values.

:data:`FIELDS` lists every field an alignment table can hold, with BLAST+'s
definition (``CBlastTabularInfo`` in ``objtools/align_format/tabular.cpp``).
:func:`parse_columns` reads a column list (``"std qlen slen stitle"``),
expanding ``std`` as BLAST does; an unknown name is an InputError listing the
valid ones.  :func:`alignment_fields` computes every field of many alignments
at once (a Numba pass over the alignment operations); :func:`cigar_btop` is the
one place CIGAR and BTOP strings are made.

Definitions (BLAST's unless marked *ours*):

* ``length``: alignment columns, gap columns included; ``nident``: columns
  of identical letters; ``pident = 100 * nident / length`` (``%.3f``);
* ``positive``: identical columns plus columns whose substitution score is
  > 0; ``ppos = 100 * positive / length`` (``%.2f``);
* ``mismatch``: aligned pairs of different letters
  (``length - nident - gaps``); ``gaps``: gap columns; ``gapopen``: gap runs;
* ``qcovhsp``: ``100 * (qend - qstart + 1) / qlen``, plus 0.5 below 99 and
  truncated (so 99.9 prints 99: BLAST's rounding); ``qcovs``: the same, as
  each subject has one alignment here;
* ``btop``: runs of identical pairs as a number, every other column as two
  letters, query first (``AG``, ``A-``, ``-A``);
* ``cigar`` (*ours*): runs of ``=`` (identical pair), ``X`` (different pair),
  ``I`` (query residue against a gap), ``D`` (subject residue against a gap);
  ``*`` for an empty alignment;
* ``qseq``/``sseq``: the aligned parts with ``-`` for gaps;
* ``evalue``/``bitscore``: as BLAST+ prints them
  (:func:`swgpu_tools.stats.format_evalue`/``format_bitscore``), ``NA`` where
  the scheme has no statistics; ``score``: the raw score;
* ``qseqid``/``sseqid``: the header's first word; ``qacc``/``sacc``: the
  accession (UniProt accession, else the first word); ``qaccver``/``saccver``:
  the same as the accession (FASTA headers carry no separate version);
  ``sallseqid``/``sallacc``: the same as ``sseqid``/``sacc`` (one id per
  record); ``stitle``/``salltitles``: the header after the first word.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from ..cpus import usable_cpus
from .fieldnames import DEFAULT_COLUMNS, FIELDS, STD, Field, parse_columns  # noqa: F401

# ---------------------------------------------------------------------------
# per-alignment values
# ---------------------------------------------------------------------------


@njit(cache=True, nogil=True, boundscheck=False)
def _consumed(ops, ops_start, ops_len):
    """Per alignment (operations ``ops[ops_start[k]:][:ops_len[k]]``): the query and
    subject residues its operations consume, and how many are not M, I or D."""
    n = ops_start.shape[0]
    out = np.zeros((n, 3), dtype=np.int64)
    for k in range(n):
        nq = 0
        ns = 0
        bad = 0
        for t in range(ops_start[k], ops_start[k] + ops_len[k]):
            op = ops[t]
            if op == 77:  # M
                nq += 1
                ns += 1
            elif op == 73:  # I
                nq += 1
            elif op == 68:  # D
                ns += 1
            else:
                bad += 1
        out[k, 0] = nq
        out[k, 1] = ns
        out[k, 2] = bad
    return out


#: The most columns a stored CIGAR may claim (two sequences of at most 2^31 residues):
#: a longer one is a damaged row, aligned again rather than expanded.
MAX_CIGAR_COLUMNS = 1 << 32


@njit(cache=True, nogil=True, boundscheck=False)
def _cigar_kernel(buf, ends):
    """The stored CIGARs ``buf[ends[k-1]:ends[k]]`` (ASCII) as alignment operations, in
    two passes (count, then fill): (operations of all, one after another (uint8: M for
    ``=`` and ``X``, I, D), each one's start in them (n + 1 offsets), its query span and
    its subject span).  A CIGAR that is not runs of ASCII digits each followed by one of
    ``=XID`` (an empty one has none) gives no operations and spans -1."""
    n = ends.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int64)
    qspan = np.zeros(n, dtype=np.int64)
    sspan = np.zeros(n, dtype=np.int64)
    begin = 0
    for k in range(n):
        end = ends[k]
        num = 0
        digits = 0
        cols = 0
        nq = 0
        ns = 0
        good = True
        for t in range(begin, end):
            c = buf[t]
            if 48 <= c <= 57:
                num = num * 10 + (c - 48)
                digits += 1
                if digits > 10:  # no run of 10^10 columns: a damaged row (and no overflow)
                    good = False
                    break
            elif digits and (c == 61 or c == 88 or c == 73 or c == 68):  # = X I D
                cols += num
                if c != 68:
                    nq += num
                if c != 73:
                    ns += num
                num = 0
                digits = 0
            else:
                good = False
                break
        if digits or cols > MAX_CIGAR_COLUMNS:  # digits with no operation; or too long
            good = False
        if good:
            offsets[k + 1] = offsets[k] + cols
            qspan[k] = nq
            sspan[k] = ns
        else:
            offsets[k + 1] = offsets[k]
            qspan[k] = -1
            sspan[k] = -1
        begin = end
    ops = np.empty(offsets[n], dtype=np.uint8)
    begin = 0
    for k in range(n):
        end = ends[k]
        if qspan[k] >= 0:
            w = offsets[k]
            num = 0
            for t in range(begin, end):
                c = buf[t]
                if 48 <= c <= 57:
                    num = num * 10 + (c - 48)
                else:
                    op = 77 if (c == 61 or c == 88) else c  # = and X are M columns
                    for _ in range(num):
                        ops[w] = op
                        w += 1
                    num = 0
        begin = end
    return ops, offsets, qspan, sspan


def ops_from_cigars(cigars: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The alignment operations of stored CIGARs (``=``/``X`` runs as M, I, D; ``*`` is
    empty), all at once (:func:`_cigar_kernel` over their concatenation): (operations of
    all, one after another (uint8), each one's start in them (n + 1 offsets), its query
    span and its subject span (residues of M+I and of M+D columns)).  A CIGAR that is not
    well formed (runs of ASCII digits, each followed by one of ``=XID``) has no
    operations and spans -1."""
    texts = ["" if c == "*" else c for c in cigars]
    ends = np.cumsum(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)))
    buf = np.frombuffer("".join(texts).encode("ascii", "replace"), dtype=np.uint8)
    return _cigar_kernel(buf, ends)


@njit(cache=True, nogil=True, boundscheck=False)
def _columns_kernel(
    qres, qoff, sres, soff, qidx, sidx, qstart, sstart, ops, ops_start, ops_off, positive
):
    """Counts, CIGAR, BTOP and aligned rows of every alignment.

    qres/sres: ASCII letters; alignment k aligns query qidx[k] from qstart[k]
    and subject sidx[k] from sstart[k] (0-based) with the ops_off[k+1] - ops_off[k]
    operations (M, I, D) at ops[ops_start[k]:] (alignments may share or skip parts
    of ``ops``); its aligned rows go to [ops_off[k], ops_off[k+1]) of the query
    and subject rows.  positive: 256 x 256 uint8, 1 where a letter pair scores > 0
    or is identical.  Returns (counts (n, 5): nident, positive, mismatch, gaps,
    gapopen; cigar bytes, offsets; btop bytes, offsets; query row; subject row).
    """
    n = ops_off.shape[0] - 1
    total = ops_off[n]
    counts = np.zeros((n, 5), dtype=np.int64)
    cig = np.empty(max(1, 21 * total + n), dtype=np.uint8)
    cig_off = np.zeros(n + 1, dtype=np.int64)
    bt = np.empty(max(1, 21 * total + n), dtype=np.uint8)
    bt_off = np.zeros(n + 1, dtype=np.int64)
    qrow = np.empty(total, dtype=np.uint8)
    srow = np.empty(total, dtype=np.uint8)
    digits = np.empty(20, dtype=np.uint8)
    cpos = 0
    bpos = 0
    for k in range(n):
        i = qoff[qidx[k]] + qstart[k]
        j = soff[sidx[k]] + sstart[k]
        run_cls = 0
        run_len = 0
        same_run = 0
        prev_gap = 0
        shift = ops_start[k] - ops_off[k]
        for t in range(ops_off[k], ops_off[k + 1] + 1):
            if t < ops_off[k + 1]:
                op = ops[t + shift]
                if op == 77:  # M
                    a = qres[i]
                    b = sres[j]
                    i += 1
                    j += 1
                    if a == b:
                        c = 61  # '='
                        counts[k, 0] += 1
                        counts[k, 1] += 1
                    else:
                        c = 88  # 'X'
                        counts[k, 2] += 1
                        if positive[a, b]:
                            counts[k, 1] += 1
                    gap = 0
                elif op == 73:  # I: query residue, gap in the subject
                    a = qres[i]
                    b = 45
                    c = 73
                    i += 1
                    gap = 1
                else:  # D: subject residue, gap in the query
                    a = 45
                    b = sres[j]
                    c = 68
                    j += 1
                    gap = 2
                qrow[t] = a
                srow[t] = b
                if gap:
                    counts[k, 3] += 1
                    if gap != prev_gap:
                        counts[k, 4] += 1
                prev_gap = gap
                # BTOP: identical runs as numbers, others as letter pairs
                if c == 61:
                    same_run += 1
                else:
                    if same_run > 0:
                        nd = 0
                        x = same_run
                        while x > 0:
                            digits[nd] = 48 + x % 10
                            x //= 10
                            nd += 1
                        for d in range(nd - 1, -1, -1):
                            bt[bpos] = digits[d]
                            bpos += 1
                        same_run = 0
                    bt[bpos] = a
                    bt[bpos + 1] = b
                    bpos += 2
            else:
                c = 0  # flush the last runs
                if same_run > 0:
                    nd = 0
                    x = same_run
                    while x > 0:
                        digits[nd] = 48 + x % 10
                        x //= 10
                        nd += 1
                    for d in range(nd - 1, -1, -1):
                        bt[bpos] = digits[d]
                        bpos += 1
            if c == run_cls:
                run_len += 1
                continue
            if run_len > 0:
                nd = 0
                x = run_len
                while x > 0:
                    digits[nd] = 48 + x % 10
                    x //= 10
                    nd += 1
                for d in range(nd - 1, -1, -1):
                    cig[cpos] = digits[d]
                    cpos += 1
                cig[cpos] = run_cls
                cpos += 1
            run_cls = c
            run_len = 1
        if ops_off[k + 1] == ops_off[k]:
            cig[cpos] = 42  # '*': empty alignment
            cpos += 1
        cig_off[k + 1] = cpos
        bt_off[k + 1] = bpos
    return counts, cig, cig_off, bt, bt_off, qrow, srow


def positive_table(scheme) -> np.ndarray:
    """256 x 256 uint8: 1 where two stored letters are identical or score > 0 under ``scheme``."""
    codes = scheme.codes_of_letters.astype(np.int64)
    ok = codes >= 0
    table = np.zeros((256, 256), dtype=np.uint8)
    idx = np.flatnonzero(ok)
    sub = scheme.matrix[np.ix_(codes[idx], codes[idx])] > 0
    table[np.ix_(idx, idx)] = sub
    np.fill_diagonal(table, 1)
    return table


def _split(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    text = blob[: offsets[-1]].tobytes().decode("ascii")
    off = offsets.tolist()
    return [text[off[k] : off[k + 1]] for k in range(len(off) - 1)]


def qcov(qstart: np.ndarray, qend: np.ndarray, qlen: np.ndarray) -> np.ndarray:
    """BLAST's ``qcovhsp``: ``100 * span / qlen``, +0.5 below 99, truncated."""
    span = np.where(qstart > 0, qend - qstart + 1, 0)
    pct = 100.0 * span / np.maximum(qlen, 1)
    pct = np.where(pct < 99, pct + 0.5, pct)
    return pct.astype(np.int64)


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (no copy)."""
    view = a.view()
    view.flags.writeable = False
    return view


def load_kernel() -> None:
    """Load the fields kernel from Numba's cache now (and with the first such load,
    Numba's CPU target: ~0.25 s), with the signature :func:`alignment_fields` calls:
    ``swgpu run-steps`` does it on a thread while the merge runs."""
    u8, i64, none = np.zeros(1, np.uint8), np.zeros(1, np.int64), np.zeros(0, np.int64)
    args = (u8, i64, u8, i64, none, none, none, none, u8[:0], none, i64)
    _consumed(*map(_read_only, (u8[:0], none, none)))
    ops_from_cigars(["1=1X1I1D"])  # a re-scan's reuse of stored alignments
    _columns_kernel(*map(_read_only, (*args, np.zeros((256, 256), np.uint8))))


def alignment_fields(
    queries, subjects, query_index, subject_index, alignments, scheme
) -> dict[str, object]:
    """Every alignment-derived field of :data:`FIELDS` for many alignments.

    ``queries``/``subjects``: :class:`~swgpu_tools.sequences.SequenceSet`;
    alignment k (an :class:`~swgpu_tools.alignment.Alignment`, 0-based, end-exclusive)
    aligns ``queries[query_index[k]]`` with ``subjects[subject_index[k]]``.
    Returns a dict of numpy arrays (ints) and lists (strings): qstart, qend,
    sstart, send (1-based inclusive; 0 0 for an empty range), length, nident,
    positive, mismatch, gaps, gapopen, pident, ppos, qcovhsp, qcovs, cigar,
    btop, qseq, sseq, score, qlen, slen.
    """
    return fields_of_arrays(
        queries, subjects, query_index, subject_index, *alignment_arrays(alignments), scheme
    )


def alignment_arrays(alignments) -> tuple[np.ndarray, ...]:
    """Alignment objects as :func:`fields_of_arrays` takes them: score, query start
    and end, subject start and end (int64 each), their operations one after another
    (uint8), each one's start in them and its number of operations."""
    n = len(alignments)
    lengths = np.fromiter((len(a.operations) for a in alignments), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return (
        np.fromiter((a.score for a in alignments), dtype=np.int64, count=n),
        np.fromiter((a.query_start for a in alignments), dtype=np.int64, count=n),
        np.fromiter((a.query_end for a in alignments), dtype=np.int64, count=n),
        np.fromiter((a.subject_start for a in alignments), dtype=np.int64, count=n),
        np.fromiter((a.subject_end for a in alignments), dtype=np.int64, count=n),
        np.frombuffer(b"".join(a.operations for a in alignments), dtype=np.uint8),
        starts,
        lengths,
    )


#: Alignments a thread's part of :func:`_columns_kernel`'s work has at least (below, one
#: call): a re-scan's traceback makes the columns of every alignment it keeps, the
#: reused ones too (23,704 in issue 12's bench200M re-scan).
COLUMNS_CHUNK = 4096


def _columns_in_chunks(qres, qoff, sres, soff, qidx, sidx, qstart, sstart, ops, ops_start,
                       ops_off, positive):  # fmt: skip
    """:func:`_columns_kernel`'s outputs, made by runs of alignments on threads (the
    kernel leaves the interpreter's lock; each run's outputs are its own), joined:
    the same counts, rows and texts, with the CIGAR and BTOP buffers only as long as
    their offsets say."""
    n = len(ops_off) - 1
    parts = min(usable_cpus(), n // COLUMNS_CHUNK)
    if parts < 2:
        return _columns_kernel(
            qres, qoff, sres, soff, qidx, sidx, qstart, sstart, ops, ops_start, ops_off, positive
        )
    cuts = np.linspace(0, n, parts + 1).astype(np.int64)

    def run(a: int, b: int):
        off = ops_off[a : b + 1] - ops_off[a]
        return _columns_kernel(
            qres, qoff, sres, soff, *(_read_only(x[a:b]) for x in (qidx, sidx, qstart, sstart)),
            ops, _read_only(ops_start[a:b]), _read_only(off), positive,
        )  # fmt: skip

    with ThreadPoolExecutor(max_workers=parts, thread_name_prefix="swgpu-columns") as pool:
        outs = list(pool.map(run, cuts[:-1].tolist(), cuts[1:].tolist()))

    def joined(blobs, offsets):
        starts = np.cumsum([0] + [int(o[-1]) for o in offsets])
        off = np.concatenate([[0]] + [o[1:] + b for o, b in zip(offsets, starts[:-1])])
        return np.concatenate([x[: int(o[-1])] for x, o in zip(blobs, offsets)]), off

    cig, cig_off = joined([o[1] for o in outs], [o[2] for o in outs])
    bt, bt_off = joined([o[3] for o in outs], [o[4] for o in outs])
    return (
        np.concatenate([o[0] for o in outs]),
        cig,
        cig_off.astype(np.int64),
        bt,
        bt_off.astype(np.int64),
        np.concatenate([o[5] for o in outs]),
        np.concatenate([o[6] for o in outs]),
    )


def fields_of_arrays(
    queries,
    subjects,
    query_index,
    subject_index,
    score,
    q0,
    q1,
    s0,
    s1,
    ops,
    ops_start,
    ops_len,
    scheme,
) -> dict[str, object]:
    """:func:`alignment_fields` of alignments given as arrays: alignment k has
    ``score[k]``, spans ``[q0[k], q1[k])`` and ``[s0[k], s1[k])`` (0-based,
    end-exclusive) and the ``ops_len[k]`` operations (M, I, D) at
    ``ops[ops_start[k]:]`` (alignments may share parts of ``ops`` or skip some):
    many alignments reused from a stored table need no object each."""
    qidx = np.asarray(query_index, dtype=np.int64)
    sidx = np.asarray(subject_index, dtype=np.int64)
    score, q0, q1, s0, s1, ops_start, ops_len = (
        np.asarray(x, dtype=np.int64) for x in (score, q0, q1, s0, s1, ops_start, ops_len)
    )
    ops = np.asarray(ops, dtype=np.uint8)
    n = len(score)
    ops_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ops_len, out=ops_off[1:])
    qlen = queries.lengths[qidx] if n else np.zeros(0, np.int64)
    slen = subjects.lengths[sidx] if n else np.zeros(0, np.int64)
    if n and (np.any(q1 > qlen) or np.any(s1 > slen) or np.any(q0 < 0) or np.any(s0 < 0)):
        raise ValueError("alignment coordinates do not fit the sequences")
    if n and (
        np.any(ops_start < 0) or np.any(ops_len < 0) or np.any(ops_start + ops_len > len(ops))
    ):
        raise ValueError("alignment operations out of range")
    # what each alignment's operations consume (before the columns: they read the
    # sequences where the operations say)
    used = _consumed(*map(_read_only, (ops, ops_start, ops_len)))
    if n and used[:, 2].any():
        bad = np.setdiff1d(np.unique(ops), np.frombuffer(b"DIM", dtype=np.uint8))
        raise ValueError(f"alignment operations must be M, I or D; found {bytes(bad)!r}")
    nq, ns = used[:, 0], used[:, 1]
    if n and (np.any(nq != q1 - q0) or np.any(ns != s1 - s0)):
        k = int(np.flatnonzero((nq != q1 - q0) | (ns != s1 - s0))[0])
        raise ValueError(
            f"alignment {k}: operations consume {nq[k]} query and {ns[k]} "
            f"subject residues, but the coordinates span {q1[k] - q0[k]} and "
            f"{s1[k] - s0[k]}"
        )
    # read-only views: one compiled signature whatever the arrays' origin (a
    # shard's mapped bytes are read-only, a FASTA file's are not), the one that
    # `swgpu backend --precompile` compiles
    counts, cig, cig_off, bt, bt_off, qrow, srow = _columns_in_chunks(
        *map(
            _read_only,
            (
                queries.residues,
                queries.offsets,
                subjects.residues,
                subjects.offsets,
                qidx,
                sidx,
                q0,
                s0,
                ops,
                ops_start,
                ops_off,
                positive_table(scheme),
            ),
        )
    )
    length = ops_len
    with np.errstate(divide="ignore", invalid="ignore"):
        pident = np.where(length > 0, 100.0 * counts[:, 0] / np.maximum(length, 1), 0.0)
        ppos = np.where(length > 0, 100.0 * counts[:, 1] / np.maximum(length, 1), 0.0)
    has_q = q1 > q0
    has_s = s1 > s0
    qstart = np.where(has_q, q0 + 1, 0)
    qend = np.where(has_q, q1, 0)
    sstart = np.where(has_s, s0 + 1, 0)
    send = np.where(has_s, s1, 0)
    cov = qcov(qstart, qend, qlen)
    return {
        "score": score,
        "qlen": qlen.astype(np.int64),
        "slen": slen.astype(np.int64),
        "qstart": qstart,
        "qend": qend,
        "sstart": sstart,
        "send": send,
        "length": length,
        "nident": counts[:, 0],
        "positive": counts[:, 1],
        "mismatch": counts[:, 2],
        "gaps": counts[:, 3],
        "gapopen": counts[:, 4],
        "pident": pident,
        "ppos": ppos,
        "qcovhsp": cov,
        "qcovs": cov.copy(),
        "cigar": _split(cig, cig_off),
        "btop": _split(bt, bt_off),
        "qseq": _split(qrow, ops_off),
        "sseq": _split(srow, ops_off),
    }


def cigar_btop(query_seq: str, subject_seq: str, alignment, scheme=None) -> tuple[str, str]:
    """The CIGAR and BTOP strings of one alignment (see the module doc)."""
    from ..sequences import SequenceSet

    q = SequenceSet.from_sequences(["q"], [query_seq])
    s = SequenceSet.from_sequences(["s"], [subject_seq])
    if scheme is None:
        from ..scoring import ScoringScheme

        scheme = ScoringScheme(match=1, mismatch=-1)
    f = alignment_fields(q, s, [0], [0], [alignment], scheme)
    return f["cigar"][0], f["btop"][0]
