"""Tests for swgpu_tools.io.fields and io.tables: BLAST tabular fields, CIGAR/BTOP,
the table writer and reader, atomic writes."""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.alignment import Alignment
from swgpu_tools.errors import InputError, OutputError
from swgpu_tools.io.atomic import atomic_write
from swgpu_tools.io.fields import FIELDS, STD, alignment_fields, parse_columns
from swgpu_tools.io.tables import HITS_COLUMNS, format_pident, read_table, write_table
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

SCHEME = ScoringScheme("BLOSUM62", 11, 1)
ALIGNMENTS_COLUMNS = parse_columns("std score qlen slen cigar btop qseq sseq")


def alignment_columns(query: str, subject: str, aln: Alignment, scheme=SCHEME) -> dict:
    """The fields of one alignment, under the names these tests use."""
    q = SequenceSet.from_sequences(["q"], [query])
    s = SequenceSet.from_sequences(["s"], [subject])
    f = alignment_fields(q, s, [0], [0], [aln], scheme)
    c = {k: (v[0].item() if isinstance(v, np.ndarray) else v[0]) for k, v in f.items()}
    c.update(identities=c["nident"], qaln=c["qseq"], saln=c["sseq"])
    return c


def write_hits_table(df, path):
    write_table(df, path, HITS_COLUMNS)


def write_alignments_table(rows, path):
    if isinstance(rows, list):
        rows = pd.DataFrame(rows)
    write_table(rows, path, ALIGNMENTS_COLUMNS)


def from_rows(qaln: str, saln: str, q_offset: int = 0, s_offset: int = 0):
    """(query, subject, Alignment) from two aligned rows (score left 0)."""
    ops = bytearray()
    for a, b in zip(qaln, saln, strict=True):
        assert not (a == "-" and b == "-")
        ops += b"I" if b == "-" else b"D" if a == "-" else b"M"
    q = qaln.replace("-", "")
    s = saln.replace("-", "")
    query = "W" * q_offset + q + "WW"
    subject = "Y" * s_offset + s + "Y"
    aln = Alignment(0, q_offset, q_offset + len(q), s_offset, s_offset + len(s), bytes(ops))
    return query, subject, aln


# --------------------------------------------------------- hand-made examples


def test_mismatch_and_query_insertion():
    q, s, aln = from_rows("MKVLAAGIVALLLAAGCS", "MKVLSAGIV--LLAAGCS")
    c = alignment_columns(q, s, aln)
    assert c["cigar"] == "4=1X4=2I7="
    assert c["btop"] == "4AS4A-L-7"
    assert (c["length"], c["identities"], c["mismatch"], c["gapopen"], c["gaps"]) == (
        18,
        15,
        1,
        1,
        2,
    )
    assert format_pident(c["pident"]) == "83.333"
    assert (c["qstart"], c["qend"], c["sstart"], c["send"]) == (1, 18, 1, 16)
    assert c["qaln"] == "MKVLAAGIVALLLAAGCS" and c["saln"] == "MKVLSAGIV--LLAAGCS"


def test_adjacent_insertion_and_deletion_are_two_gap_openings():
    q, s, aln = from_rows("ACDE--FGH", "AC--KLFGH", q_offset=3, s_offset=5)
    assert aln.operations == b"MMIIDDMMM"
    c = alignment_columns(q, s, aln)
    assert c["cigar"] == "2=2I2D3="
    assert c["btop"] == "2D-E--K-L3"
    assert (c["length"], c["mismatch"], c["gapopen"], c["gaps"]) == (9, 0, 2, 4)
    assert format_pident(c["pident"]) == "55.556"  # 5/9
    assert (c["qstart"], c["qend"], c["sstart"], c["send"]) == (4, 10, 6, 12)


def test_all_mismatches_and_identical_wildcards():
    q, s, aln = from_rows("AAA", "CCC")
    c = alignment_columns(q, s, aln)
    assert (c["cigar"], c["btop"], c["mismatch"], c["pident"]) == ("3X", "ACACAC", 3, 0.0)
    # BLAST compares letters: X against X counts as identical
    q, s, aln = from_rows("AXXB", "AXXZ")
    c = alignment_columns(q, s, aln)
    assert (c["cigar"], c["btop"], c["identities"]) == ("3=1X", "3BZ", 3)


def test_gap_at_subject_side_and_trailing_mismatch():
    q, s, aln = from_rows("MA-K", "MARR")
    c = alignment_columns(q, s, aln)
    assert c["cigar"] == "2=1D1X"
    assert c["btop"] == "2-RKR"


def test_real_blast_hsps_from_biopython_test_suite():
    """HSPs from BLAST+ 2.2.26 (Biopython Tests/Blast/xml_2226_blastp_001.xml).

    BLAST reported: identity 69, gaps 2, align-len 102 (query 1-102, hit 1-100);
    and identity 48, gaps 5, align-len 105 (query 1-101, hit 1-104).
    """
    qseq = (
        "MKKFIALLFFILLLSGCGVNSQKSQGEDVSPDSNIETKEGTYVGLADTHTIEVTVDNEPVSLDITEESTSDLDKF"
        "NSGDKVTITYEKNDEGQLLLKDIERAN"
    )
    hseq = (
        "MKKIFGCLFFILLLAGCGVTNEKSQGEDAG--EKLVTKEGTYVGLADTHTIEVTVDHEPVSFDITEESADDVKNL"
        "NNGEKVTVKYQKNSKGQLVLKDIEPAN"
    )
    q, s, aln = from_rows(qseq, hseq)
    c = alignment_columns(q, s, aln)
    assert (c["identities"], c["gaps"], c["length"]) == (69, 2, 102)
    assert (c["mismatch"], c["gapopen"]) == (102 - 69 - 2, 1)
    assert (c["qstart"], c["qend"], c["sstart"], c["send"]) == (1, 102, 1, 100)
    assert format_pident(c["pident"]) == "67.647"

    qseq = (
        "MKKFIALLFFILL----LSGCGVNSQKSQGEDVSPDSNIETKEGTYVGLADTHTIEVTVDNEPVSLDITEESTSDL"
        "DKFNSGDKVTITYEKNDEGQLLLKDIERA"
    )
    hseq = (
        "MKKTIAASFLILLFSVVLAACGTAEQSKKGSG-SSENQAQKETAYYVGMADTHTIEVKVDDQPVSFEFSDDFSDVL"
        "NKFSENDKVSITYFTNDKGQKEIKEIEKA"
    )
    q, s, aln = from_rows(qseq, hseq)
    c = alignment_columns(q, s, aln)
    assert (c["identities"], c["gaps"], c["length"]) == (48, 5, 105)
    assert c["gapopen"] == 2
    assert (c["qend"], c["send"]) == (101, 104)
    assert c["btop"].startswith("3FT2LALS1FL3-F-S-V-V1SA")


def test_empty_alignment():
    c = alignment_columns("ACD", "EFG", Alignment(0, 1, 1, 2, 2, b""))
    assert (c["length"], c["pident"], c["cigar"], c["btop"], c["gapopen"]) == (0, 0.0, "*", "", 0)
    assert (c["qstart"], c["qend"], c["sstart"], c["send"]) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "aln, message",
    [
        (Alignment(0, 0, 3, 0, 3, b"MMI"), "consume"),
        (Alignment(0, 0, 3, 0, 3, b"MMX"), "M, I or D"),
        (Alignment(0, 0, 9, 0, 3, b"MMMMMMMMM"), "do not fit"),
    ],
)
def test_inconsistent_alignment_is_an_error(aln, message):
    with pytest.raises(ValueError, match=message):
        alignment_columns("ACDEF", "ACD", aln)


def test_pident_printed_with_three_decimals_like_current_blast():
    assert format_pident(100.0) == "100.000"
    assert format_pident(87.5) == "87.500"
    assert format_pident(200 / 3) == "66.667"
    assert format_pident(float("nan")) == "NA"


# ------------------------------------------------------------- atomic writes


def test_atomic_write_writes_and_replaces(tmp_path):
    target = tmp_path / "out.tsv"
    with atomic_write(target) as fh:
        fh.write("a\tb\n")
    assert target.read_bytes() == b"a\tb\n"
    umask = os.umask(0)
    os.umask(umask)
    assert (target.stat().st_mode & 0o777) == (0o666 & ~umask)
    with atomic_write(str(target)) as fh:
        fh.write("c\n")
    assert target.read_bytes() == b"c\n"
    assert os.listdir(tmp_path) == ["out.tsv"]


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "out.tsv"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_write(target) as fh:
            fh.write("partial\n" * 1000)
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_atomic_write_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "out.tsv"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(target) as fh:
            fh.write("new\n")
            raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.tsv"]


def test_writer_error_leaves_no_file(tmp_path):
    target = tmp_path / "hits.tsv"
    bad = pd.DataFrame(
        {
            "qseqid": ["q1", "q2"],
            "sseqid": ["s1", "s\t2"],
            "qacc": ["q1", "q2"],
            "sacc": ["s1", "s2"],
            "score": [10, 9],
            "bitscore": [8.0, 7.0],
            "evalue": [1.0, 2.0],
            "qlen": [5, 5],
            "slen": [6, 6],
            "stitle": ["a", "b"],
        }
    )
    with pytest.raises(ValueError, match="tab"):
        write_hits_table(bad, target)
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="missing columns"):
        write_hits_table(bad.drop(columns=["slen"]), target)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------- writers


def hits_frame():
    return pd.DataFrame(
        {
            "qseqid": ["q1", "q1", "q2"],
            "sseqid": ["sp|P1|A", "sp|P2|B", "s3"],
            "qacc": ["q1", "q1", "q2"],
            "sacc": ["P1", "P2", "s3"],
            "stitle": ["one", "N/A", "three"],
            "score": np.array([350, 29, 40], dtype=np.int64),
            "bitscore": [139.42808385111766, 15.779019981647249, np.nan],
            "evalue": [1.69e-46, 7.12269, np.nan],
            "qlen": np.array([102, 102, 30], dtype=np.int64),
            "slen": np.array([100, 132, 50], dtype=np.int64),
            "extra": [1, 2, 3],
        }
    )


def test_write_hits_table_exact_bytes(tmp_path):
    target = tmp_path / "hits.tsv"
    write_hits_table(hits_frame(), target)
    assert target.read_text() == (
        "qseqid\tsseqid\tqacc\tsacc\tscore\tbitscore\tevalue\tqlen\tslen\tstitle\n"
        "q1\tsp|P1|A\tq1\tP1\t350\t139\t1.69e-46\t102\t100\tone\n"
        "q1\tsp|P2|B\tq1\tP2\t29\t15.8\t7.1\t102\t132\tN/A\n"
        "q2\ts3\tq2\ts3\t40\tNA\tNA\t30\t50\tthree\n"
    )
    first = target.read_bytes()
    write_hits_table(hits_frame(), target)
    assert target.read_bytes() == first


def test_write_hits_table_empty_and_preformatted(tmp_path):
    target = tmp_path / "hits.tsv"
    write_hits_table(hits_frame().iloc[:0], target)
    assert target.read_text() == "\t".join(HITS_COLUMNS) + "\n"
    write_hits_table({c: [] for c in HITS_COLUMNS}, target)
    assert target.read_text() == "\t".join(HITS_COLUMNS) + "\n"
    df = hits_frame()
    df["evalue"] = ["1.69e-46", "10.0", "NA"]  # strings are written as given
    write_hits_table(df, target)
    assert target.read_text().splitlines()[2].split("\t")[6] == "10.0"


def test_write_alignments_table_from_dicts(tmp_path):
    q, s, aln = from_rows("MKVLAAGIVALLLAAGCS", "MKVLSAGIV--LLAAGCS")
    row = alignment_columns(q, s, aln)
    row.update(
        qaccver="q1",
        saccver="s1",
        evalue=2.5e-5,
        bitscore=43.51,
        score=101,
        qlen=len(q),
        slen=len(s),
    )
    target = tmp_path / "alignments.tsv"
    write_alignments_table([row], target)
    lines = target.read_text().splitlines()
    assert lines[0] == "\t".join(ALIGNMENTS_COLUMNS)
    assert lines[1] == "\t".join(
        [
            "q1",
            "s1",
            "83.333",
            "18",
            "1",
            "1",
            "1",
            "18",
            "1",
            "16",
            "2.50e-05",
            "43.5",
            "101",
            "20",
            "17",
            "4=1X4=2I7=",
            "4AS4A-L-7",
            "MKVLAAGIVALLLAAGCS",
            "MKVLSAGIV--LLAAGCS",
        ]
    )
    write_alignments_table(pd.DataFrame([row]), tmp_path / "b.tsv")
    assert (tmp_path / "b.tsv").read_bytes() == target.read_bytes()


# ------------------------------------------------------------ property tests

LETTERS = "ARNDCQEGHILKMFPSTWYVBZX"


def score_from_ops(query: str, subject: str, aln: Alignment, scheme: ScoringScheme) -> int:
    """Score of an alignment from its operations (independent of tables.py)."""
    total, qi, si, prev = 0, aln.query_start, aln.subject_start, None
    for op in aln.operations:
        if op == ord("M"):
            total += scheme.score_pair(query[qi], subject[si])
            qi += 1
            si += 1
        elif op == ord("I"):
            total -= scheme.gap_extend + (scheme.gap_open if prev != op else 0)
            qi += 1
        else:
            total -= scheme.gap_extend + (scheme.gap_open if prev != op else 0)
            si += 1
        prev = op
    return total


def rescore_rows(qaln: str, saln: str, scheme: ScoringScheme) -> int:
    """Score of two printed aligned rows with BLAST gap costs (open + k*extend)."""
    total = 0
    k = 0
    n = len(qaln)
    while k < n:
        if qaln[k] != "-" and saln[k] != "-":
            total += scheme.score_pair(qaln[k], saln[k])
            k += 1
            continue
        side = 0 if saln[k] == "-" else 1  # 0: gap in subject row, 1: gap in query row
        run = 0
        while k < n and (saln[k] == "-" if side == 0 else qaln[k] == "-"):
            run += 1
            k += 1
        total -= scheme.gap_open + run * scheme.gap_extend
    return total


_SCHEMES: dict = {}


def _scheme(args) -> ScoringScheme:
    if args not in _SCHEMES:
        _SCHEMES[args] = ScoringScheme(*args)
    return _SCHEMES[args]


@st.composite
def alignments(draw):
    ops = draw(st.lists(st.sampled_from("MMMMID"), min_size=0, max_size=60))
    ops = "".join(ops)
    q_used = ops.count("M") + ops.count("I")
    s_used = ops.count("M") + ops.count("D")
    q_pre = draw(st.integers(0, 5))
    s_pre = draw(st.integers(0, 5))
    alphabet = st.sampled_from(LETTERS[:6] if draw(st.booleans()) else LETTERS)
    query = "".join(
        draw(st.lists(alphabet, min_size=q_pre + q_used + 3, max_size=q_pre + q_used + 3))
    )
    subject = "".join(
        draw(st.lists(alphabet, min_size=s_pre + s_used + 2, max_size=s_pre + s_used + 2))
    )
    aln = Alignment(0, q_pre, q_pre + q_used, s_pre, s_pre + s_used, ops.encode())
    return query, subject, aln


def decode_cigar(cigar: str) -> str:
    return "".join(op * int(n) for n, op in re.findall(r"(\d+)([=XID])", cigar))


def decode_btop(btop: str, qaln_identical_source: str) -> tuple[str, str]:
    """Rebuild the two rows from BTOP; identical runs are read from the query row."""
    qrow, srow, pos = [], [], 0
    for number, pair in re.findall(r"(\d+)|(..)", btop):
        if number:
            seg = qaln_identical_source[pos : pos + int(number)]
            qrow.append(seg)
            srow.append(seg)
            pos += int(number)
        else:
            qrow.append(pair[0])
            srow.append(pair[1])
            pos += 1
    return "".join(qrow), "".join(srow)


@settings(max_examples=300, deadline=None)
@given(
    alignments(),
    st.sampled_from(
        [("BLOSUM62", 11, 1), ("BLOSUM62", 10, 1), ("PAM30", 9, 1), ("BLOSUM50", 13, 2)]
    ),
)
def test_rescoring_printed_rows_gives_the_score(example, scheme_args):
    query, subject, aln = example
    scheme = _scheme(scheme_args)
    aln.score = score_from_ops(query, subject, aln, scheme)
    c = alignment_columns(query, subject, aln, scheme)

    assert rescore_rows(c["qaln"], c["saln"], scheme) == aln.score
    # the rows are the aligned residues with gaps
    assert c["qaln"].replace("-", "") == query[aln.query_start : aln.query_end]
    assert c["saln"].replace("-", "") == subject[aln.subject_start : aln.subject_end]
    assert len(c["qaln"]) == len(c["saln"]) == c["length"] == len(aln.operations)
    # CIGAR: M split into =/X by letter equality, I/D kept
    expanded = decode_cigar(c["cigar"])
    assert expanded.replace("=", "M").replace("X", "M") == aln.operations.decode()
    for k, op in enumerate(expanded):
        if op in "=X":
            assert (c["qaln"][k] == c["saln"][k]) == (op == "=")
    # BTOP rebuilds both rows
    assert decode_btop(c["btop"], c["qaln"]) == (c["qaln"], c["saln"])
    # BLAST's counts
    identities = sum(a == b for a, b in zip(c["qaln"], c["saln"]))
    assert c["identities"] == identities
    assert c["mismatch"] == c["length"] - identities - c["qaln"].count("-") - c["saln"].count("-")
    assert c["gapopen"] == len(re.findall("-+", c["qaln"])) + len(re.findall("-+", c["saln"]))
    if c["length"]:
        assert c["pident"] == 100.0 * identities / c["length"]

    def span(a, b):  # 1-based inclusive; 0 0 for an empty range
        return (a + 1, b) if b > a else (0, 0)

    assert (c["qstart"], c["qend"]) == span(aln.query_start, aln.query_end)
    assert (c["sstart"], c["send"]) == span(aln.subject_start, aln.subject_end)
    # BLAST's positives: identical letters, or a substitution score above 0
    positives = sum(
        a != "-" and b != "-" and (a == b or scheme.score_pair(a, b) > 0)
        for a, b in zip(c["qaln"], c["saln"])
    )
    assert c["positive"] == positives
    if c["length"]:
        assert c["ppos"] == 100.0 * positives / c["length"]


# ------------------------------------------------------------- field names


def test_std_expands_as_blast_and_unknown_names_are_listed():
    assert parse_columns("std") == STD
    assert STD[:2] == ["qaccver", "saccver"] and STD[-2:] == ["evalue", "bitscore"]
    assert parse_columns("qseqid,std qseqid") == ["qseqid"] + STD
    with pytest.raises(
        InputError, match="unknown output field 'qsequid'.*valid fields: std qseqid"
    ):
        parse_columns("std qsequid")
    for required in (
        "qseqid qacc sseqid sacc stitle salltitles qlen slen length pident nident "
        "mismatch positive ppos gapopen gaps qstart qend sstart send qcovhsp evalue "
        "bitscore score qseq sseq btop cigar"
    ).split():
        assert required in FIELDS


@pytest.mark.parametrize(
    "qstart, qend, qlen, expected",
    [
        (6, 59, 59, 92),
        (12, 59, 59, 81),  # round half up below 99
        (1, 1932, 1934, 99),
        (7, 4291, 4291, 99),  # 99.9 and 99.86 print 99 (BLAST)
        (1, 59, 59, 100),
        (0, 0, 10, 0),
    ],
)
def test_qcovhsp_rounds_as_blastp(qstart, qend, qlen, expected):
    from swgpu_tools.io.fields import qcov

    got = qcov(np.array([qstart]), np.array([qend]), np.array([qlen]))
    assert int(got[0]) == expected


# ------------------------------------------------------------- reading back


HOSTILE_IDS = ['"s1', "NA", "nan", "#x", 'sp|"Q1|X_HUMAN', "N/A", "null", "-", "1e5", "TRUE"]


def test_tables_round_trip_hostile_ids(tmp_path):
    df = pd.DataFrame(
        {
            "qseqid": HOSTILE_IDS,
            "sseqid": list(reversed(HOSTILE_IDS)),
            "qacc": HOSTILE_IDS,
            "sacc": HOSTILE_IDS,
            "score": np.arange(len(HOSTILE_IDS), dtype=np.int64),
            "bitscore": [np.nan] * len(HOSTILE_IDS),
            "evalue": [1e-5] * len(HOSTILE_IDS),
            "qlen": [5] * len(HOSTILE_IDS),
            "slen": [7] * len(HOSTILE_IDS),
            "stitle": ['a "quoted" title', "NA", "#", "", "x", "y", "z", "w", "v", "u"],
        }
    )
    path = tmp_path / "hits.tsv"
    write_table(df, path, HITS_COLUMNS)
    back = read_table(path, HITS_COLUMNS)
    assert back["qseqid"].tolist() == HOSTILE_IDS
    assert back["sseqid"].tolist() == list(reversed(HOSTILE_IDS))
    assert back["stitle"].tolist() == df["stitle"].tolist()
    assert back["score"].tolist() == df["score"].tolist()
    assert back["bitscore"].tolist() == ["NA"] * len(HOSTILE_IDS)
    write_table(back, tmp_path / "again.tsv", HITS_COLUMNS)
    assert (tmp_path / "again.tsv").read_bytes() == path.read_bytes()


def test_headerless_table_reads_back_with_given_columns(tmp_path):
    df = hits_frame()
    path = tmp_path / "h.tsv"
    write_table(df, path, HITS_COLUMNS, header=False)
    assert not path.read_text().startswith("qseqid")
    back = read_table(path, HITS_COLUMNS, header=False)
    assert back["sseqid"].tolist() == df["sseqid"].tolist()


def test_write_errors_name_the_file(tmp_path, monkeypatch):
    (tmp_path / "plain").write_text("a file, not a folder")
    with pytest.raises(OutputError, match=r"plain/x.tsv: cannot write: a part of the path"):
        write_table(hits_frame(), tmp_path / "plain" / "x.tsv", HITS_COLUMNS)
    with pytest.raises(OutputError, match="does not exist"):
        write_table(hits_frame(), tmp_path / "missing" / "x.tsv", HITS_COLUMNS)

    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    target = tmp_path / "full.tsv"
    with pytest.raises(OutputError, match=r"full.tsv: cannot write: no space left .*disk full"):
        write_table(hits_frame(), target, HITS_COLUMNS)
    assert not target.exists() and os.listdir(tmp_path) == ["plain"]


@given(
    st.lists(st.integers(-(2**62), 2**62), max_size=30),
    st.lists(st.text(max_size=8), max_size=30),
    st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_columns_written_at_once_equal_the_checked_cells(ints, texts, as_array):
    """format_column's whole-column paths (plain ints, plain text) give the same
    cells as the value-by-value path, and text with a tab or line break still fails."""
    from swgpu_tools.io import tables

    values = np.asarray(ints, dtype=np.int64) if as_array else ints
    assert tables.format_column("score", values) == [str(v) for v in ints]
    bad = [t for t in texts if any(c in t for c in "\t\n\r")]
    if bad:
        with pytest.raises(ValueError, match="contains a tab or line break"):
            tables.format_column("sseqid", texts)
    else:
        assert tables.format_column("sseqid", texts) == [tables._text_cell(t, "x") for t in texts]
    with pytest.raises(ValueError):
        tables.format_column("sseqid", texts + [5])


@pytest.mark.slow  # 20 s on the 2-core VM (Numba compiles the columns twice); .ci/run runs it
def test_output_columns_compile_one_signature_for_any_array_origin():
    """The traceback's table columns come from one compiled Numba signature whether
    the sequences' arrays are writable (a FASTA file's) or read-only (a shard's
    mapped bytes), the one `swgpu backend --precompile` compiles (issue 11)."""
    import numpy as np

    from swgpu_tools.alignment import align_many
    from swgpu_tools.io import fields
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    text = np.frombuffer(b"MKTAYIAKQRQISFVKSHFSRQMKTAYIAKQRQISFVKSHFSRQ", dtype=np.uint8)
    outs = []
    for writable in (True, False):
        res = text.copy()
        res.flags.writeable = writable
        seqs = SequenceSet(["a", "b"], res, np.array([0, 22, 44]))
        enc = scheme.encode(seqs)
        got = align_many(enc, enc, [0], [1], scheme)
        outs.append(fields.alignment_fields(seqs, seqs, [0], [1], got, scheme))
    assert len(fields._columns_kernel.signatures) == 1
    assert len(fields._consumed.signatures) == 1
    assert outs[0]["cigar"] == outs[1]["cigar"] and outs[0]["cigar"][0]


def test_columns_made_by_runs_on_threads_equal_one_call(monkeypatch):
    """fields_of_arrays makes the columns of many alignments by runs of them on threads
    (io.fields._columns_in_chunks: a re-scan's traceback makes every kept alignment's
    columns); the columns equal those of one call, whatever the runs' bounds."""
    import numpy as np

    from swgpu_tools.alignment import align_many
    from swgpu_tools.io import fields
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    scheme = ScoringScheme("BLOSUM62", 11, 1)
    rng = np.random.default_rng(8)
    letters = np.frombuffer(b"ACDEFGHIKLMNPQRSTVWY", dtype=np.uint8)
    base = rng.choice(letters, 300)
    seqs = []
    for _ in range(24):  # relatives of one sequence: gaps, mismatches, ends cut
        s = base[rng.integers(0, 40) : 300 - rng.integers(0, 40)].copy()
        s[rng.random(len(s)) < 0.15] = rng.choice(letters, 1)[0]
        cut = rng.integers(10, len(s) - 10)
        s = np.concatenate([s[:cut], rng.choice(letters, rng.integers(0, 6)), s[cut + 3 :]])
        seqs.append(s.tobytes().decode())
    db = SequenceSet.from_sequences([f"s{i}" for i in range(len(seqs))], seqs)
    enc = scheme.encode(db)
    qi = rng.integers(0, len(seqs), 60)
    si = rng.integers(0, len(seqs), 60)
    got = align_many(enc, enc, qi, si, scheme)
    monkeypatch.setattr(fields, "COLUMNS_CHUNK", 10**9)
    one = fields.alignment_fields(db, db, qi, si, got, scheme)
    monkeypatch.setattr(fields, "usable_cpus", lambda: 4)
    for chunk in (7, 15, 29):
        monkeypatch.setattr(fields, "COLUMNS_CHUNK", chunk)
        runs = fields.alignment_fields(db, db, qi, si, got, scheme)
        assert runs.keys() == one.keys()
        for key in one:
            a, b = one[key], runs[key]
            same = np.array_equal(a, b) if isinstance(a, np.ndarray) else list(a) == list(b)
            assert same, key
    assert any("-" in q for q in one["qseq"]) and len(set(one["cigar"])) > 10


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.sampled_from([0.0, -0.0, float("nan"), 1e-180, 3.5e-7, 12.25, 33.1, -2.5, 1e300]),
        min_size=0,
        max_size=300,
    ),
    st.sampled_from(["evalue", "bitscore", "pident"]),
)
def test_numbers_formatted_once_per_value_equal_formatting_each_row(values, column):
    """Cells of a numeric column are formatted once per distinct value (by its bits):
    the same text as formatting every row on its own, -0.0 and NaN included."""
    from swgpu_tools.io import tables

    arr = np.asarray(values, dtype=np.float64)
    fmt = {"evalue": tables.format_evalue, "bitscore": tables.format_bitscore}.get(
        column, lambda v: "N/A" if v is None else "%.3f" % v
    )
    want = [fmt(None if v != v else v) for v in arr.tolist()]
    assert tables._formatted_once(fmt, arr) == want
