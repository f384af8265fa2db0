"""The output fields by BLAST's names (no computation here: cheap to import).

See :mod:`swgpu_tools.io.fields` for the definitions and the values.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # "str", "int", "evalue", "bitscore", "pct3", "pct2"
    description: str


_F = [
    ("qseqid", "str", "query sequence id (the header's first word)"),
    ("qacc", "str", "query accession"),
    ("qaccver", "str", "query accession.version (= accession)"),
    ("qlen", "int", "query length"),
    ("sseqid", "str", "subject sequence id (the header's first word)"),
    ("sallseqid", "str", "all subject sequence ids (= sseqid)"),
    ("sacc", "str", "subject accession"),
    ("saccver", "str", "subject accession.version (= accession)"),
    ("sallacc", "str", "all subject accessions (= sacc)"),
    ("slen", "int", "subject length"),
    ("stitle", "str", "subject title (the header after its first word)"),
    ("salltitles", "str", "all subject titles (= stitle)"),
    ("qstart", "int", "start of the alignment in the query (1-based)"),
    ("qend", "int", "end of the alignment in the query (1-based, inclusive)"),
    ("sstart", "int", "start of the alignment in the subject (1-based)"),
    ("send", "int", "end of the alignment in the subject (1-based, inclusive)"),
    ("qseq", "str", "aligned part of the query, '-' for gaps"),
    ("sseq", "str", "aligned part of the subject, '-' for gaps"),
    ("evalue", "evalue", "expect value (BLAST statistics over the whole database)"),
    ("bitscore", "bitscore", "bit score"),
    ("score", "int", "raw score"),
    ("length", "int", "alignment length (columns)"),
    ("pident", "pct3", "percentage of identical columns"),
    ("nident", "int", "number of identical columns"),
    ("mismatch", "int", "number of mismatches"),
    ("positive", "int", "number of positive-scoring columns (identities included)"),
    ("gapopen", "int", "number of gap openings"),
    ("gaps", "int", "number of gap columns"),
    ("ppos", "pct2", "percentage of positive-scoring columns"),
    ("qcovs", "int", "query coverage per subject (one alignment per subject here)"),
    ("qcovhsp", "int", "query coverage of the alignment"),
    ("btop", "str", "BLAST traceback operations"),
    ("cigar", "str", "CIGAR: runs of = X I D (ours)"),
]

#: Every field an alignment table can hold, in this order.
FIELDS: dict[str, Field] = {n: Field(n, k, d) for n, k, d in _F}

#: BLAST's ``std`` (BLAST+ 2.2.30 and later).
STD = [
    "qaccver",
    "saccver",
    "pident",
    "length",
    "mismatch",
    "gapopen",
    "qstart",
    "qend",
    "sstart",
    "send",
    "evalue",
    "bitscore",
]

#: The default columns of the alignments table.
DEFAULT_COLUMNS = "std qseqid sseqid score qlen slen qcovhsp cigar btop qseq sseq stitle"


def parse_columns(spec) -> list[str]:
    """Column names from a space- (or comma-) separated string or a list; ``std`` expands.

    Raises InputError naming an unknown field and listing the valid ones.
    """
    if spec is None:
        spec = DEFAULT_COLUMNS
    words = spec.replace(",", " ").split() if isinstance(spec, str) else [str(w) for w in spec]
    if not words:
        raise InputError("columns: give at least one field name (e.g. 'std')")
    out: list[str] = []
    for w in words:
        names = STD if w == "std" else [w]
        for n in names:
            if n not in FIELDS:
                raise InputError(
                    f"unknown output field '{w}'; valid fields: std " + " ".join(FIELDS)
                )
            if n not in out:
                out.append(n)
    return out
