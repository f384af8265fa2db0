"""Writing the output tables: ``hits.tsv`` and ``alignments.tsv``.

Both are tab-separated with one header line and ``\\n`` line ends, written
atomically (:func:`atomic_write`): a temporary file in the same directory,
flushed and fsynced, then ``os.replace``-d over the target.  An exception while
writing leaves the target untouched and no temporary file behind.

Column definitions follow BLAST+'s tabular output (``CBlastTabularInfo`` in
``c++/src/objtools/align_format/tabular.cpp``, read in the BLAST+ 2.16 source
tree github.com/deepin-community/ncbi-blastplus):

* ``length``: alignment columns, gap columns included;
* ``pident``: ``100 * identities / length``, printed ``%.3f`` (current BLAST+
  prints three decimals, ``NStr::DoubleToString(perc_ident, 3)``; BLAST+ 2.2.26
  printed two);
* ``mismatch``: ``length - identities - gap columns``, i.e. aligned pairs of
  different letters;
* ``gapopen``: number of gap runs (a run in the query and a run in the
  subject that touch count as two, as BLAST counts gap chunks per row);
* ``qstart qend sstart send``: 1-based, inclusive;
* ``evalue``/``bitscore``: :func:`swgpu_tools.stats.format_evalue` /
  :func:`~swgpu_tools.stats.format_bitscore` (BLAST's formatting), ``NA``
  where there are no statistics;
* ``btop``: BLAST's trace-back operations, built as BLAST builds it: runs of
  identical pairs as a number, every other column as two letters, query letter
  first (``AG`` mismatch, ``A-`` query residue against a gap in the subject,
  ``-A`` subject residue against a gap in the query).

Ours, not BLAST's: ``cigar`` (``=`` identical pair, ``X`` different pair,
``I`` query residue against a gap, ``D`` subject residue against a gap),
``qaln``/``saln`` (the aligned rows with ``-`` for gaps), ``score``, ``qlen``,
``slen``.
"""
from __future__ import annotations

import math
from numbers import Integral
from typing import Iterable

import numpy as np

from .alignment import Alignment
from .io.atomic import atomic_write
from .stats import NA, format_bitscore, format_evalue

__all__ = [
    "HITS_COLUMNS",
    "ALIGNMENTS_COLUMNS",
    "atomic_write",
    "alignment_columns",
    "format_pident",
    "write_hits_table",
    "write_alignments_table",
]

HITS_COLUMNS = ["qseqid", "sseqid", "score", "bitscore", "evalue", "qlen", "slen"]
ALIGNMENTS_COLUMNS = [
    "qseqid", "sseqid", "pident", "length", "mismatch", "gapopen",
    "qstart", "qend", "sstart", "send", "evalue", "bitscore",
    "score", "qlen", "slen", "cigar", "btop", "qaln", "saln",
]

_INT_COLUMNS = {"score", "qlen", "slen", "length", "mismatch", "gapopen",
                "qstart", "qend", "sstart", "send"}
_STRING_COLUMNS = {"qseqid", "sseqid", "cigar", "btop", "qaln", "saln"}

# ---------------------------------------------------------------------------
# per-alignment columns
# ---------------------------------------------------------------------------

_GAP = ord("-")


def alignment_columns(query_seq: str, subject_seq: str, aln: Alignment) -> dict:
    """BLAST's tabular pieces (and ours) for one alignment.

    ``query_seq`` and ``subject_seq`` are the whole sequences (stored,
    upper-case letters); ``aln`` is 0-based, end-exclusive.  Returns a dict
    with ``pident`` (float), ``identities``, ``length``, ``mismatch``,
    ``gapopen``, ``gaps``, ``qstart``, ``qend``, ``sstart``, ``send`` (ints,
    1-based inclusive coordinates), ``cigar``, ``btop``, ``qaln``, ``saln``.
    Identity is equality of letters, as in BLAST's tabular code (``X`` against
    ``X`` counts as identical).

    Raises ValueError if the operations do not fit the coordinates or the
    sequences.
    """
    ops = bytes(aln.operations)
    q0, q1, s0, s1 = aln.query_start, aln.query_end, aln.subject_start, aln.subject_end
    if not (0 <= q0 <= q1 <= len(query_seq) and 0 <= s0 <= s1 <= len(subject_seq)):
        raise ValueError(
            f"alignment coordinates query {q0}..{q1}, subject {s0}..{s1} do not fit "
            f"sequences of length {len(query_seq)} and {len(subject_seq)}"
        )
    op = np.frombuffer(ops, dtype=np.uint8)
    is_m = op == ord("M")
    is_i = op == ord("I")
    is_d = op == ord("D")
    if not np.all(is_m | is_i | is_d):
        bad = bytes(sorted(set(ops) - set(b"MID")))
        raise ValueError(f"alignment operations must be M, I or D; found {bad!r}")
    n_q = int(np.count_nonzero(is_m | is_i))
    n_s = int(np.count_nonzero(is_m | is_d))
    if n_q != q1 - q0 or n_s != s1 - s0:
        raise ValueError(
            f"alignment operations consume {n_q} query and {n_s} subject residues, "
            f"but the coordinates span {q1 - q0} and {s1 - s0}"
        )

    length = len(op)
    q_res = np.frombuffer(query_seq[q0:q1].encode("ascii"), dtype=np.uint8)
    s_res = np.frombuffer(subject_seq[s0:s1].encode("ascii"), dtype=np.uint8)
    qrow = np.full(length, _GAP, dtype=np.uint8)
    srow = np.full(length, _GAP, dtype=np.uint8)
    qrow[is_m | is_i] = q_res
    srow[is_m | is_d] = s_res
    qaln = qrow.tobytes().decode("ascii")
    saln = srow.tobytes().decode("ascii")

    ident = is_m & (qrow == srow)
    # per column class: '=' identical pair, 'X' different pair, 'I', 'D'
    cls = np.where(ident, ord("="), np.where(is_m, ord("X"), op)).astype(np.uint8)
    identities = int(np.count_nonzero(ident))
    gaps = int(np.count_nonzero(~is_m))
    mismatch = length - identities - gaps

    # runs of equal class
    if length:
        boundaries = np.flatnonzero(cls[1:] != cls[:-1]) + 1
        starts = np.concatenate(([0], boundaries))
        ends = np.concatenate((boundaries, [length]))
        run_cls = cls[starts]
    else:
        starts = ends = run_cls = np.zeros(0, dtype=np.int64)
    gapopen = int(np.count_nonzero((run_cls == ord("I")) | (run_cls == ord("D"))))

    cigar_parts = []
    btop_parts = []
    for c, a, b in zip(run_cls.tolist(), starts.tolist(), ends.tolist()):
        n = b - a
        cigar_parts.append(f"{n}{chr(c)}")
        if c == ord("="):
            btop_parts.append(str(n))
        else:
            btop_parts.extend(qaln[k] + saln[k] for k in range(a, b))

    return {
        "pident": 100.0 * identities / length if length else 0.0,
        "identities": identities,
        "length": length,
        "mismatch": mismatch,
        "gapopen": gapopen,
        "gaps": gaps,
        "qstart": q0 + 1,
        "qend": q1,
        "sstart": s0 + 1,
        "send": s1,
        "cigar": "".join(cigar_parts),
        "btop": "".join(btop_parts),
        "qaln": qaln,
        "saln": saln,
    }


# ---------------------------------------------------------------------------
# cell formatting
# ---------------------------------------------------------------------------

def format_pident(p) -> str:
    """Percent identity as BLAST+ prints it: ``%.3f`` (``87.500``)."""
    if _missing(p):
        return NA
    if isinstance(p, str):
        return p
    return "%.3f" % float(p)


def _missing(x) -> bool:
    """None, NaN, pandas.NA / NaT."""
    if x is None:
        return True
    if isinstance(x, str):
        return False
    try:
        import pandas as pd

        if x is pd.NA or x is pd.NaT:
            return True
    except ImportError:  # pragma: no cover
        pass
    try:
        return bool(math.isnan(x))
    except (TypeError, ValueError):
        return False


def _fmt_int(x, column: str) -> str:
    if isinstance(x, (Integral, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)) and float(x).is_integer():
        return str(int(x))
    raise ValueError(f"column {column!r}: expected an integer, got {x!r}")


def _fmt_str(x, column: str) -> str:
    if not isinstance(x, str):
        raise ValueError(f"column {column!r}: expected text, got {x!r}")
    if "\t" in x or "\n" in x or "\r" in x:
        raise ValueError(f"column {column!r}: value {x!r} contains a tab or line break")
    return x


def _fmt_number(fmt, x) -> str:
    """Numbers through ``fmt``; text passes through unchanged (already formatted)."""
    if isinstance(x, str):
        return _fmt_str(x, "number")
    return fmt(None if _missing(x) else float(x))


def _format_cell(column: str, x) -> str:
    if column == "evalue":
        return _fmt_number(format_evalue, x)
    if column == "bitscore":
        return _fmt_number(format_bitscore, x)
    if column == "pident":
        return format_pident(x)
    if column in _INT_COLUMNS:
        return _fmt_int(x, column)
    return _fmt_str(x, column)


def _records(rows) -> tuple[list[str], Iterable]:
    """(column names, iterable of row tuples) for a DataFrame or dicts."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        pd = None
    if pd is not None and isinstance(rows, pd.DataFrame):
        return list(rows.columns), rows.itertuples(index=False, name=None)
    rows = list(rows)
    columns = list(rows[0].keys()) if rows else []
    return columns, (tuple(r.get(c) for c in columns) for r in rows)


def _write_table(rows, path, columns: list[str]) -> None:
    have, records = _records(rows)
    missing = [c for c in columns if c not in have]
    if missing and (have or _nonempty(rows)):
        raise ValueError(f"table is missing columns {missing}; it has {have}")
    positions = [have.index(c) for c in columns] if not missing else []
    with atomic_write(path) as fh:
        fh.write("\t".join(columns) + "\n")
        if missing:  # an empty table without columns: header only
            return
        lines = []
        for rec in records:
            lines.append("\t".join(_format_cell(c, rec[i]) for c, i in zip(columns, positions)))
            if len(lines) >= 65536:
                fh.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            fh.write("\n".join(lines) + "\n")


def _nonempty(rows) -> bool:
    try:
        return len(rows) > 0
    except TypeError:
        return True


def write_hits_table(df, path) -> None:
    """Write ``hits.tsv``: ``qseqid sseqid score bitscore evalue qlen slen``.

    ``df`` is a pandas DataFrame (or a list of dicts) with at least those
    columns; extra columns are ignored; row order is kept.  ``bitscore`` and
    ``evalue`` are numbers (NaN/None -> ``NA``) formatted as BLAST does, or
    strings already so formatted (written unchanged).
    """
    _write_table(df, path, HITS_COLUMNS)


def write_alignments_table(rows, path) -> None:
    """Write ``alignments.tsv`` (columns :data:`ALIGNMENTS_COLUMNS`).

    ``rows`` is a pandas DataFrame or a list of dicts, e.g. the dicts of
    :func:`alignment_columns` updated with ``qseqid sseqid evalue bitscore
    score qlen slen``.  Row order is kept; formatting is fixed (``pident``
    ``%.3f``, E-values and bit scores as BLAST prints them), so equal input
    gives byte-identical files.
    """
    _write_table(rows, path, ALIGNMENTS_COLUMNS)
