"""Alignment output formats besides TSV: SAM, Parquet and a pairwise text view.

Each writer takes the alignment table as a DataFrame with the fields of
:data:`swgpu_tools.io.fields.FIELDS` (numbers as numbers, ``evalue``/``bitscore``
as floats with NaN where the scheme has no statistics) and writes atomically.

* SAM (:func:`write_sam`): Biopython's ``Bio.Align`` SAM writer; subjects are
  the references (one ``@SQ`` line each, ``DS`` = title), queries the reads
  (whole query sequence, unaligned ends soft-clipped), CIGAR ``M/I/D``, the
  best hit of each query primary and the others secondary (flag 256),
  ``AS:i`` the raw score, ``NM:i`` mismatches plus gap columns, ``ZE:f`` the
  E-value and ``ZB:f`` the bit score when known.  Protein letters are written
  as they are, as MMseqs2 does (htslib reads the records; it stores sequence
  letters in a nucleotide code, so tools that decode SEQ show protein letters
  as ``N``).
* Parquet (:func:`write_parquet`): one typed column per field (int64,
  float64, string; null for missing statistics), via pyarrow.
* Pairwise text (:func:`write_pairwise`): for people, BLAST-like: per hit the
  subject line, length, score, E-value, identities, positives, gaps, then the
  alignment in blocks of 60 columns with a match line (the letter for an
  identity, ``+`` for a positive score, space otherwise).
"""

from __future__ import annotations

import math

import numpy as np

from ..stats import format_bitscore, format_evalue
from .atomic import atomic_write
from .fields import FIELDS

#: Output formats of the alignment table and their file suffixes.
FORMATS = {"tsv": ".tsv", "sam": ".sam", "parquet": ".parquet", "pairwise": ".txt"}


def write_sam(table, queries, subjects, path) -> None:
    """Write ``table`` (rows with qacc, sacc, qstart, qend, sstart, send, qseq, sseq,
    score, ...) as SAM; ``queries``/``subjects`` give the whole sequences by accession."""
    from Bio import Align
    from Bio.Align import Alignment, Alignments
    from Bio.Seq import Seq
    from Bio.SeqRecord import SeqRecord

    q_index = {a: i for i, a in enumerate(queries.ids)}
    s_index = {a: i for i, a in enumerate(subjects.ids)}
    s_seqids, s_titles = subjects.seqids, subjects.titles
    q_seqids = queries.seqids
    targets: dict[str, SeqRecord] = {}
    q_records: dict[str, SeqRecord] = {}
    alignments = []
    seen_query: set[str] = set()
    cols = {
        c: table[c].tolist()
        for c in (
            "qacc",
            "sacc",
            "qstart",
            "qend",
            "sstart",
            "send",
            "qseq",
            "sseq",
            "score",
            "mismatch",
            "gaps",
            "evalue",
            "bitscore",
        )
    }
    for k in range(len(table)):
        qa, sa = cols["qacc"][k], cols["sacc"][k]
        si, qi = s_index[sa], q_index[qa]
        t = targets.get(sa)
        if t is None:
            title = s_titles[si]
            t = SeqRecord(
                Seq(subjects.sequence(si)),
                id=s_seqids[si],
                description="" if title == "N/A" else title,
            )
            targets[sa] = t
        q = q_records.get(qa)
        if q is None:
            q = SeqRecord(Seq(queries.sequence(qi)), id=q_seqids[qi], description="")
            q_records[qa] = q
        coords = _coordinates(
            cols["qseq"][k], cols["sseq"][k], cols["sstart"][k] - 1, cols["qstart"][k] - 1
        )
        if coords is None:  # an empty local alignment (score 0): not written
            continue
        aln = Alignment([t, q], coords)
        aln.score = int(cols["score"][k])
        aln.flag = 0 if qa not in seen_query else 256
        seen_query.add(qa)
        tags = {"NM": int(cols["mismatch"][k]) + int(cols["gaps"][k])}
        for name, key in (("ZE", "evalue"), ("ZB", "bitscore")):
            try:
                v = float(cols[key][k])
            except (TypeError, ValueError):
                continue
            if not math.isnan(v):
                tags[name] = v
        aln.annotations = tags
        alignments.append(aln)
    out = Alignments(alignments)
    out.targets = list(targets.values())
    out.metadata = {}
    with atomic_write(path) as fh:
        Align.write(out, fh, "sam")


def _coordinates(qseq: str, sseq: str, s0: int, q0: int):
    """Biopython coordinates (2 x k: subject row, query row) of gapped rows."""
    if not qseq:
        return None
    q = np.frombuffer(qseq.encode("ascii"), dtype=np.uint8) != ord("-")
    s = np.frombuffer(sseq.encode("ascii"), dtype=np.uint8) != ord("-")
    state = q.astype(np.int8) * 2 + s.astype(np.int8)  # 3 pair, 2 query only, 1 subject only
    cuts = np.flatnonzero(np.diff(state)) + 1
    bounds = np.r_[0, cuts, len(state)]
    sp = np.r_[0, np.cumsum(s)][bounds] + s0
    qp = np.r_[0, np.cumsum(q)][bounds] + q0
    return np.vstack([sp, qp])


def write_parquet(table, path, columns: list[str]) -> None:
    """Write the ``columns`` of ``table`` as Parquet, one typed column per field."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays, names = [], []
    for c in columns:
        kind = FIELDS[c].kind if c in FIELDS else "str"
        values = table[c]
        if kind == "int":
            arr = pa.array(np.asarray(values, dtype=np.int64), type=pa.int64())
        elif kind in ("evalue", "bitscore", "pct3", "pct2"):
            v = _floats(values)
            arr = pa.array(v, type=pa.float64(), mask=np.isnan(v))
        else:
            arr = pa.array(list(values), type=pa.string())
        arrays.append(arr)
        names.append(c)
    tbl = pa.table(arrays, names=names)
    with atomic_write(path, "wb") as fh:
        pq.write_table(tbl, fh, compression="zstd")


def _floats(values) -> np.ndarray:
    """Numbers, or BLAST-formatted text (``NA`` -> NaN), as float64."""
    out = np.empty(len(values), dtype=np.float64)
    for k, v in enumerate(values):
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            out[k] = np.nan
    return out


def read_parquet(path):
    """Read a Parquet table back as a DataFrame."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pandas()


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({int(round(100.0 * a / b)) if b else 0}%)"


def pairwise_lines(row: dict, width: int = 60):
    """The text of one alignment (a row of the full table), BLAST-like."""
    yield f">{row['sseqid']} {row['stitle']}" if row["stitle"] != "N/A" else f">{row['sseqid']}"
    yield f"Length={row['slen']}"
    yield ""
    ev, bits = row["evalue"], row["bitscore"]
    ev = ev if isinstance(ev, str) else format_evalue(ev)
    bits = bits if isinstance(bits, str) else format_bitscore(bits)
    yield f" Score = {bits.strip()} bits ({row['score']}),  Expect = {ev.strip()}"
    length = int(row["length"])
    yield (
        f" Identities = {_pct(int(row['nident']), length)}, "
        f"Positives = {_pct(int(row['positive']), length)}, "
        f"Gaps = {_pct(int(row['gaps']), length)}"
    )
    yield ""
    qseq, sseq = row["qseq"], row["sseq"]
    qpos, spos = int(row["qstart"]), int(row["sstart"])
    match = row.get("_match")
    pad = max(len(str(int(row["qend"]))), len(str(int(row["send"]))), 4) + 1
    for b in range(0, len(qseq), width):
        qa, sa = qseq[b : b + width], sseq[b : b + width]
        ma = match[b : b + width] if match is not None else ""
        qn = sum(ch != "-" for ch in qa)
        sn = sum(ch != "-" for ch in sa)
        yield f"Query  {qpos:<{pad}}{qa}  {qpos + qn - 1 if qn else qpos - 1}"
        yield f"       {'':<{pad}}{ma}"
        yield f"Sbjct  {spos:<{pad}}{sa}  {spos + sn - 1 if sn else spos - 1}"
        yield ""
        qpos += qn
        spos += sn


def _match_line(qseq: str, sseq: str, positive: np.ndarray) -> str:
    out = []
    for a, b in zip(qseq, sseq):
        if a == b and a != "-":
            out.append(a)
        elif a != "-" and b != "-" and positive[ord(a), ord(b)]:
            out.append("+")
        else:
            out.append(" ")
    return "".join(out)


def write_pairwise(table, queries, scheme, path) -> None:
    """Write the alignments as BLAST-like pairwise text, grouped by query."""
    from .fields import positive_table

    positive = positive_table(scheme)
    q_index = {a: i for i, a in enumerate(queries.ids)}
    q_seqids, q_titles = queries.seqids, queries.titles
    records = table.to_dict("records")
    with atomic_write(path) as fh:
        current = None
        for row in records:
            if row["qacc"] != current:
                current = row["qacc"]
                qi = q_index[current]
                title = q_titles[qi]
                fh.write(
                    f"Query= {q_seqids[qi]}"
                    + (f" {title}" if title != "N/A" else "")
                    + f"\n\nLength={int(queries.lengths[qi])}\n\n"
                )
            row["_match"] = _match_line(row["qseq"], row["sseq"], positive)
            for line in pairwise_lines(row):
                fh.write(line + "\n")
