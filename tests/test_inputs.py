"""Bad input gets a clear message naming file, record and position, exit status 2,
no traceback and no output file; good input is read as documented."""

import gzip
import subprocess
import sys

import pytest

from swgpu_tools.errors import InputError
from swgpu_tools.io.fasta import parse_id, read_fasta
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

GOOD_DB = (
    ">sp|P00001|ONE_HUMAN first\nMKTAYIAKQR\nQISFVKSHFS\n>tr|Q00002|TWO_MOUSE second\nMKVLAAGIVG\n"
)
GOOD_Q = ">q1 a query\nMKTAYIAKQRQISF\n"


def write(path, text, mode="w"):
    with open(path, mode) as fh:
        fh.write(text)
    return str(path)


def swgpu(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "swgpu_tools.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def test_ids_from_uniprot_and_other_headers():
    assert parse_id(b"sp|P12345|NAME_HUMAN desc OS=Homo") == b"P12345"
    assert parse_id(b"tr|A0A024R161|A0A024R161_HUMAN x") == b"A0A024R161"
    assert parse_id(b"gi|123|ref|NP_1.1| protein") == b"gi|123|ref|NP_1.1|"
    assert parse_id(b"myseq some description") == b"myseq"


def test_reads_plain_gzip_lowercase_and_drops_gaps(tmp_path):
    plain = write(tmp_path / "a.fa", ">x\nmk-TA\nyi*\n\n>y\nAC\n")
    gz = tmp_path / "a.fa.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(open(plain).read())
    for path in (plain, gz):
        s = read_fasta(path)
        assert s.ids == ["x", "y"]
        assert s.sequence(0) == "MKTAYI*"
        assert s.sequence(1) == "AC"


def test_crlf_line_endings(tmp_path):
    s = read_fasta(write(tmp_path / "a.fa", ">x desc\r\nMKT\r\nAAA\r\n", "w"))
    assert s.ids == ["x"] and s.sequence(0) == "MKTAAA"


def test_rare_letters_map_as_documented():
    scheme = ScoringScheme("BLOSUM62")
    seqs = SequenceSet.from_pairs([("a", "UOJBZX*")])
    codes = scheme.encode(seqs).codes
    expect = [scheme.alphabet.index(c) for c in "CKXBZX*"]
    assert codes.tolist() == expect
    # writable like every array the kernels were precompiled for (a read-only
    # array is another Numba type: the traceback recompiled for it, 24 s)
    assert codes.flags.writeable and codes.flags.c_contiguous


@pytest.mark.parametrize(
    "text,needle",
    [
        (">x\nMKT1AA\n", "line 2, column 4: record 'x': '1' at residue position 4"),
        (">x\nMKTAA\n>y\nAC.D\n", "line 4, column 3: record 'y': '.' at residue position 3"),
        (">x\nMK\nTA A\n", "line 3, column 3: record 'x': a space at residue position 5"),
        (">x\nMKÄ\n", "record 'x': a non-ASCII byte"),
        (">x\n>y\nMK\n", "line 1: record 'x' has no residues"),
        (">x\nMK\n>x\nAA\n", "line 3: duplicate sequence id 'x' (first seen at line 1)"),
        ("", "contains no FASTA records"),
        ("\n\n", "contains no FASTA records"),
        ("hello world\nthis is not fasta\n", "not a FASTA file: line 1"),
        ("ID   P12345; SWISS-PROT\nSQ   MKT\n", "not a FASTA file"),
    ],
)
def test_bad_fasta_messages(tmp_path, text, needle):
    path = write(tmp_path / "bad.fa", text, "w")
    with pytest.raises(InputError) as err:
        read_fasta(path)
    assert needle in str(err.value)
    assert str(path) in str(err.value)


def test_missing_file_and_corrupt_gzip(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_fasta(tmp_path / "nope.fa")
    bad = tmp_path / "bad.fa.gz"
    text = "".join(f">s{i}\nMKTAYIAKQRQISFVKSHFS\n" for i in range(2000)).encode()
    bad.write_bytes(gzip.compress(text)[:200])
    with pytest.raises(InputError, match="corrupt or truncated"):
        read_fasta(bad)


def test_unknown_matrix_and_bad_gaps():
    with pytest.raises(InputError, match="unknown substitution matrix 'BLOSUM63'"):
        ScoringScheme("BLOSUM63")
    with pytest.raises(InputError, match="gap_open must be at least 0, got -1"):
        ScoringScheme("BLOSUM62", gap_open=-1)
    with pytest.raises(InputError, match="must be positive"):
        ScoringScheme("BLOSUM62", gap_open=0, gap_extend=0)


def test_letter_a_matrix_cannot_score(tmp_path):
    # NUC.4.4 has N as wildcard, so protein letters map to N; a matrix without a wildcard errors
    scheme = ScoringScheme("NUC.4.4")
    assert scheme.encode(SequenceSet.from_pairs([("a", "ACGTU")])).codes.tolist() == [
        scheme.alphabet.index(c) for c in "ACGTT"
    ]


@pytest.mark.parametrize(
    "db_text,q_text,needle",
    [
        (GOOD_DB, ">q1\nMKT#AA\n", "queries.fa: line 2, column 4: record 'q1': '#'"),
        (GOOD_DB + ">sp|P00001|DUP x\nMK\n", GOOD_Q, "duplicate sequence id 'P00001'"),
        ("", GOOD_Q, "db.fa: contains no FASTA records"),
        ("not fasta\n", GOOD_Q, "db.fa: not a FASTA file"),
        (None, GOOD_Q, "db.fa: database file not found"),
    ],
)
def test_cli_bad_input_exits_2_without_output(tmp_path, db_text, q_text, needle):
    db = tmp_path / "db.fa"
    if db_text is not None:
        write(db, db_text)
    q = write(tmp_path / "queries.fa", q_text)
    out = tmp_path / "out"
    r = swgpu("search", q, str(db), "--out-dir", str(out), "--backend", "cpu")
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert not (out / "hits.tsv").exists() and not (out / "alignments.tsv").exists()


def test_cli_help_answers():
    r = swgpu("--help")
    assert r.returncode == 0
    for cmd in ("search", "shard", "score-shard", "merge", "traceback", "backend"):
        assert cmd in r.stdout
    r = swgpu("search", "--help")
    assert "gap of length k costs" in r.stdout and "--top-k" in r.stdout


def test_bom_is_skipped_and_control_characters_named(tmp_path):
    s = read_fasta(write(tmp_path / "bom.fa", b"\xef\xbb\xbf>x desc\nMKT\n", "wb"))
    assert s.ids == ["x"] and s.sequence(0) == "MKT"
    with pytest.raises(InputError, match="line 1: the sequence id contains a control character"):
        read_fasta(write(tmp_path / "ctl.fa", b">x\x01y desc\nMKT\n", "wb"))
    # a tab in a title becomes a space (tables are tab-separated)
    s = read_fasta(write(tmp_path / "tab.fa", b">x a\tb\nMKT\n", "wb"))
    assert s.titles == ["a b"]


def test_ids_titles_like_blast_parse_seqids(tmp_path):
    """sseqid: the first word; sacc: the UniProt accession (else the first word); stitle:
    the rest after one separator, 'N/A' when empty (as blastp -parse_seqids prints them)."""
    s = read_fasta(
        write(
            tmp_path / "t.fa",
            ">s1\nMKT\n>s2   lead spaces  trail  \nMKT\n>sp|P99999|XX_HUMAN desc one\nMKT\n",
        )
    )
    assert s.ids == ["s1", "s2", "P99999"]
    assert s.seqids == ["s1", "s2", "sp|P99999|XX_HUMAN"]
    assert s.titles == ["N/A", "  lead spaces  trail  ", "desc one"]


def test_remembered_reads_are_the_same_until_the_file_changes(tmp_path):
    """io.fasta.remember_reads: within it, an unchanged file is parsed once; a changed
    one (other size or time) is read again; outside it nothing is kept."""
    import os

    from swgpu_tools.io import fasta

    path = tmp_path / "q.fasta"
    path.write_text(">a\nACDE\n>b\nKLMN\n")
    outside = fasta.read_fasta(path)
    assert fasta.read_fasta(path) is not outside and fasta.remembered(path) is None
    with fasta.remember_reads():
        first = fasta.read_fasta(path)
        assert fasta.read_fasta(path) is first and fasta.remembered(path) is first
        assert fasta.read_fasta(path, unique=False) is not first  # another reading
        path.write_text(">a\nACDE\n>c\nKLMNP\n")
        os.utime(path, ns=(1, 1))
        again = fasta.read_fasta(path)
        assert again is not first and again.ids == ["a", "c"]
    assert fasta.remembered(path) is None


@pytest.mark.parametrize("fast", [False, True])
def test_gzip_reading_by_either_library_gives_the_same_bytes_and_errors(tmp_path, fast):
    """io/gzipped: ISA-L (where installed) and the standard library decompress a
    two-member gzip file to the same bytes, and both refuse a file cut short and a
    damaged CRC with one of DECOMPRESS_ERRORS."""
    import gzip

    from swgpu_tools.io import gzipped

    if fast and not gzipped.FAST:
        pytest.skip("isal is not installed")
    text = b"".join(b">s%d\n%s\n" % (k, b"ACDEFGHIKLMNPQRSTVWY" * (k % 7 + 1)) for k in range(3000))
    path = tmp_path / "db.fasta.gz"
    path.write_bytes(gzip.compress(text[:20000]) + gzip.compress(text[20000:]))
    with gzipped.gzip_open(path, fast=fast) as fh:
        assert fh.read() == text

    def stream(data: bytes) -> bytes:  # as io/fasta_blocks._raw_chunks: member by member
        out, d = [], gzipped.decompressobj(fast=fast)
        while data:
            out.append(d.decompress(data))
            data = d.unused_data
            if data:
                d = gzipped.decompressobj(fast=fast)
        if not d.eof:
            raise EOFError("cut short")
        return b"".join(out)

    assert stream(path.read_bytes()) == text
    whole = path.read_bytes()
    bad_crc = bytearray(whole)
    bad_crc[-6] ^= 0xFF  # the last member's CRC32
    for damaged in (whole[: len(whole) // 2], bytes(bad_crc)):
        cut = tmp_path / "cut.fasta.gz"
        cut.write_bytes(damaged)
        with pytest.raises(gzipped.DECOMPRESS_ERRORS):
            with gzipped.gzip_open(cut, fast=fast) as fh:
                fh.read()
        with pytest.raises(gzipped.DECOMPRESS_ERRORS):
            stream(damaged)


def test_a_corrupt_gzip_database_is_a_config_problem_not_a_traceback(tmp_path):
    """The workflow's parse-time check (config.check_config) reads the head of each input:
    a gzip file whose deflate data is damaged (zlib.error, not an OSError) is named as a
    problem, and the shard count's estimate still comes out."""
    from pathlib import Path

    from swgpu_tools.config import check_config, count_records

    text = "".join(
        f">s{i} x\nMKTAYIAKQRQISFVKSHFSQLEERLGLIEVQAPILSRVGDGTQD\n" for i in range(20000)
    )
    raw = bytearray(gzip.compress(text.encode()))
    for k in range(200, 260):
        raw[k] ^= 0x5A
    (tmp_path / "db.fa.gz").write_bytes(bytes(raw))
    (tmp_path / "q.fa").write_text(">q1\nMKTAYIAKQRQISFVKSHFSQLEERLGLIEVQAPILSRVGDGTQDNLSGAEK\n")
    root = Path(__file__).resolve().parent.parent
    check = check_config(
        {"database": "db.fa.gz", "queries": "q.fa"},
        root / "workflow" / "schemas" / "config.schema.yaml",
        str(tmp_path),
    )
    assert any("db.fa.gz: corrupt gzip data" in p for p in check.problems), check.problems
    assert count_records(tmp_path / "db.fa.gz") == (1, False)


def test_the_scoring_scheme_is_checked_apart_or_with_the_rest(tmp_path):
    """check_config(scheme=False) leaves the matrix, gap costs and letters to
    check_scheme (the Snakefile checks them once the warm process has started); by
    default check_config reports them as before, and both ways find the same ones."""
    from pathlib import Path

    from swgpu_tools.config import check_config, check_scheme

    schema = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "config.schema.yaml"
    (tmp_path / "db.fa").write_text("".join(f">s{i}\n{'ACGT' * 20}\n" for i in range(30)))
    (tmp_path / "q.fa").write_text(">q1\nMKTAYIAKQRQISFVKSHFSQLEERLGLIEVQAPILSRVGDGTQDNLSGAEK\n")
    for matrix, wanted in (("BLOSUM63", "unknown substitution matrix"), ("NUC.4.4", "queries")):
        config = {"database": "db.fa", "queries": "q.fa", "matrix": matrix}
        apart = check_config(dict(config), schema, str(tmp_path), scheme=False)
        assert not apart.problems, apart.problems
        filled = dict(config)
        check_config(filled, schema, str(tmp_path), scheme=False)
        scheme = check_scheme(filled, str(tmp_path))
        whole = check_config(dict(config), schema, str(tmp_path))
        assert any(wanted in p for p in scheme.problems), scheme.problems
        assert sorted(whole.problems) == sorted(scheme.problems)
    fine = {"database": "db.fa", "queries": "q.fa", "matrix": "NUC.4.4", "gap_open": 10}
    check_config(fine, schema, str(tmp_path), scheme=False)
    (tmp_path / "q.fa").write_text(">q1\n" + "ACGT" * 20 + "\n")
    assert not check_scheme(fine, str(tmp_path)).problems


def test_the_config_schema_reads_as_pyyamls_safe_loader_reads_it():
    """config._schema reads the workflow's schema with libyaml's safe loader where
    PyYAML has it: the same mapping as PyYAML's own safe loader (every key of
    config/config.yaml described, with a type)."""
    from pathlib import Path

    import yaml

    from swgpu_tools.config import _schema

    path = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"
    with open(path) as fh:
        want = yaml.safe_load(fh)
    got = _schema(path)
    assert got == want
    with open(path.parents[2] / "config" / "config.yaml") as fh:
        keys = set(yaml.safe_load(fh))
    assert keys <= set(got["properties"]) and all("type" in got["properties"][k] for k in keys)
