"""The ``swgpu`` command as a user meets it: options checked before any file is
read, BLAST's names and conventions, every output format read back by its own
reader (pandas, pysam, pyarrow), standard input, one-file output, and output
folders written as a set."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from swgpu_tools.io.fields import FIELDS, STD, parse_columns
from swgpu_tools.io.tables import HITS_COLUMNS, read_table

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "swgpu_tools" / "data"
QUERIES = DATA / "example_queries.fasta"
DATABASE = DATA / "example_database.fasta.gz"
MISSING = "/nonexistent/db.fasta"


def swgpu(*args, stdin=None, cwd=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "swgpu_tools.cli", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


# ------------------------------------------------------------------ mistakes


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--threads", "0"], "--threads must be at least 1, got 0"),
        (["--top-k", "0"], "--top-k must be at least 1, got 0"),
        (["--max-evalue", "-1"], "--max-evalue must be positive, got -1"),
        (["--max-evalue", "0"], "--max-evalue must be positive, got 0"),
        (["--dbsize", "0"], "--dbsize must be a positive number of residues"),
        (["--matrix", "BLOSUM63"], "unknown substitution matrix 'BLOSUM63'; known (any case): "),
        (["--gap-open", "0", "--gap-extend", "0"], "gap_open + gap_extend must be positive"),
        (["--columns", "std qsequid"], "unknown output field 'qsequid'; valid fields: std qseqid"),
        (
            ["--format", "xml"],
            "--format: unknown format xml; choose from tsv, sam, parquet, pairwise",
        ),
        (["--device", "one"], "--device must be 'auto' or a GPU number"),
    ],
)
def test_options_are_checked_before_any_file_is_read(tmp_path, args, needle):
    # the database does not exist: the option's message must come first
    r = swgpu("search", QUERIES, MISSING, "--out-dir", tmp_path / "out", *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and MISSING not in r.stderr
    assert not (tmp_path / "out").exists()


def test_gpu_backend_without_a_gpu_fails_before_reading(tmp_path):
    from swgpu_tools.backend import gpu_status

    if gpu_status()[0]:
        pytest.skip("this machine has a usable GPU")
    r = swgpu("search", QUERIES, MISSING, "--backend", "gpu", "--out-dir", tmp_path / "o")
    assert r.returncode == 2 and "--backend gpu: no GPU is usable here" in r.stderr
    assert MISSING not in r.stderr


def test_unknown_option_prints_the_commands_usage():
    r = swgpu("search", QUERIES, DATABASE, "--evalue", "1")
    assert r.returncode == 2
    assert "usage: swgpu search" in r.stderr
    assert "unrecognized arguments: --evalue" in r.stderr


def test_help_lists_user_commands_first_and_steps_apart():
    r = swgpu("--help")
    assert r.returncode == 0
    text = r.stdout
    user, steps = text.index("commands:"), text.index("workflow steps")
    assert user < steps
    for cmd in ("search", "align", "backend"):
        assert re.search(rf"^  {cmd}\b", text[user:steps], re.M)
    for cmd in ("shard", "score-shard", "merge", "traceback", "check-shards", "plots"):
        assert re.search(rf"^  {cmd}\b", text[steps:], re.M)
        assert not re.search(rf"^  {cmd}\b", text[user:steps], re.M)
    r = swgpu("search", "--help")
    assert r.returncode == 0
    tail = r.stdout[r.stdout.index("Examples:") :]
    assert "swgpu search" in tail and "Columns (--columns" in tail
    for name in FIELDS:  # every field is listed with its meaning
        assert re.search(rf"^  {name}\s+\S", tail, re.M), name


def test_lower_case_matrix_names_work_and_matrices_without_statistics_warn(tmp_path):
    r = swgpu(
        "search",
        QUERIES,
        DATABASE,
        "--matrix",
        "blosum45",
        "--backend",
        "cpu",
        "--top-k",
        "3",
        "--out-dir",
        tmp_path / "o",
    )
    assert r.returncode == 0, r.stderr
    warnings = [l for l in r.stderr.splitlines() if "WARNING" in l]
    assert len(warnings) == 1
    assert (
        "BLOSUM45 with gaps 11/1" in warnings[0]
        and "default gaps for BLOSUM45 are 14/2" in warnings[0]
    )
    assert "E-values are NA" in warnings[0]
    hits = read_table(tmp_path / "o" / "hits.tsv", HITS_COLUMNS)
    assert (hits["evalue"] == "NA").all()
    assert hits.groupby("qacc").size().max() == 3  # no E-value cut-off: top_k each


def test_nucleotides_with_a_protein_matrix_are_an_error(tmp_path):
    rng = np.random.default_rng(1)
    dna = "".join(rng.choice(list("ACGT"), 300))
    q = tmp_path / "dna.fa"
    q.write_text(f">d1\n{dna}\n")
    r = swgpu("search", q, DATABASE, "--backend", "cpu", "--out-dir", tmp_path / "o")
    assert r.returncode == 2
    assert "look like nucleotide sequences, but matrix BLOSUM62 scores proteins" in r.stderr
    assert not (tmp_path / "o" / "hits.tsv").exists()
    r = swgpu(
        "search",
        QUERIES,
        DATABASE,
        "--matrix",
        "NUC.4.4",
        "--backend",
        "cpu",
        "--out-dir",
        tmp_path / "o2",
    )
    assert r.returncode == 2
    assert "look like protein sequences, but matrix NUC.4.4 scores nucleotides" in r.stderr


# ------------------------------------------------------------------ outputs


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One search of the bundled example with every format, into a folder."""
    out = tmp_path_factory.mktemp("search") / "results"
    r = swgpu(
        "search",
        QUERIES,
        DATABASE,
        "--out-dir",
        out,
        "--backend",
        "cpu",
        "--format",
        "tsv,sam,parquet,pairwise",
        "--max-evalue",
        "1",
    )
    assert r.returncode == 0, r.stderr
    return out


def test_folder_is_written_as_a_set_with_a_manifest(run):
    from swgpu_tools.io.outputset import read_manifest

    manifest = read_manifest(run)
    assert sorted(manifest["files"]) == [
        "alignments.parquet",
        "alignments.sam",
        "alignments.tsv",
        "alignments.txt",
        "hits.tsv",
    ]
    assert not [n for n in os.listdir(run) if n.endswith(".part")]


def test_tsv_reads_back_with_blast_columns(run):
    hits = read_table(run / "hits.tsv", HITS_COLUMNS)
    aln = pd.read_csv(run / "alignments.tsv", sep="\t", dtype=str, keep_default_na=False, quoting=3)
    assert list(aln.columns) == parse_columns(
        "std qseqid sseqid score qlen slen qcovhsp cigar btop qseq sseq stitle"
    )
    assert list(aln.columns[:12]) == STD
    assert len(aln) == len(hits) > 20
    # ids as BLAST -parse_seqids prints them: first word, accession
    assert aln["sseqid"].str.match(r"^(sp|tr)\|").all()
    assert (aln["saccver"] == aln["sseqid"].str.split("|").str[1]).all()
    assert (aln["qaccver"].to_numpy() == hits["qacc"].to_numpy()).all()
    assert not (aln["stitle"] == "").any()
    # recompute BLAST's definitions from the aligned strings
    for row in aln.head(200).itertuples():
        q, s = row.qseq, row.sseq
        length = len(q)
        ident = sum(a == b for a, b in zip(q, s))
        gaps = q.count("-") + s.count("-")
        assert int(row.length) == length
        assert row.pident == "%.3f" % (100.0 * ident / length)
        assert int(row.mismatch) == length - ident - gaps
        assert int(row.gapopen) == len(re.findall("-+", q)) + len(re.findall("-+", s))
        assert int(row.qend) - int(row.qstart) + 1 == len(q.replace("-", ""))
        assert int(row.send) - int(row.sstart) + 1 == len(s.replace("-", ""))
        cov = 100.0 * (int(row.qend) - int(row.qstart) + 1) / int(row.qlen)
        assert int(row.qcovhsp) == int(cov + 0.5 if cov < 99 else cov)


def test_sam_reads_back_with_pysam(run):
    pysam = pytest.importorskip("pysam")
    aln = read_table(run / "alignments.tsv")
    with pysam.AlignmentFile(str(run / "alignments.sam"), "r") as sam:
        refs = dict(zip(sam.references, sam.lengths))
        records = list(sam)
    assert len(records) == len(aln)
    seen = set()
    for rec, row in zip(records, aln.itertuples()):
        assert rec.query_name == row.qseqid and rec.reference_name == row.sseqid
        assert refs[row.sseqid] == int(row.slen)
        assert rec.reference_start == int(row.sstart) - 1
        assert rec.reference_end == int(row.send)
        assert rec.get_tag("AS") == int(row.score)
        # CIGAR ops: M for aligned pairs, I for query residues against gaps, D for subject
        # residues against gaps, S for the unaligned ends of the query
        ops = "".join(op * int(n) for n, op in re.findall(r"(\d+)([MIDS])", rec.cigarstring))
        core = ops.strip("S")
        expect = "".join(
            "I" if b == "-" else "D" if a == "-" else "M" for a, b in zip(row.qseq, row.sseq)
        )
        assert core == expect
        assert ops.count("S") == int(row.qlen) - len(row.qseq.replace("-", ""))
        assert rec.is_secondary == (row.qseqid in seen)
        seen.add(row.qseqid)
    # protein letters are written as they are (htslib shows them in its nucleotide code)
    text = [l for l in (run / "alignments.sam").read_text().splitlines() if not l.startswith("@")]
    assert text[0].split("\t")[9].startswith("M")


def test_parquet_reads_back_typed(run):
    import pyarrow.parquet as pq

    table = pq.read_table(run / "alignments.parquet")
    tsv = read_table(run / "alignments.tsv")
    assert table.num_rows == len(tsv)
    types = {f.name: str(f.type) for f in table.schema}
    assert types["qstart"] == "int64" and types["score"] == "int64"
    assert types["evalue"] == "double" and types["pident"] == "double"
    assert types["sseqid"] == "string"
    df = table.to_pandas()
    assert (df["qseqid"] == tsv["qseqid"]).all()
    from swgpu_tools.stats import format_bitscore, format_evalue

    assert [format_evalue(v) for v in df["evalue"]] == tsv["evalue"].tolist()
    assert [format_bitscore(v) for v in df["bitscore"]] == tsv["bitscore"].tolist()


def test_pairwise_text_is_blast_like(run):
    text = (run / "alignments.txt").read_text()
    aln = read_table(run / "alignments.tsv")
    assert text.count("\n>") + text.startswith(">") == len(aln)
    assert text.count("Query= ") == aln["qseqid"].nunique()
    first = aln.iloc[0]
    assert f"Score = {first['bitscore'].strip()} bits ({first['score']})" in text
    blocks = re.findall(r"^Query  (\d+)\s+(\S+)  (\d+)$", text, re.M)
    assert all(len(b[1]) <= 60 for b in blocks)
    # match line: the letter where identical, '+' for a positive substitution, else space
    from swgpu_tools.scoring import ScoringScheme

    scheme = ScoringScheme()
    lines = text.splitlines()
    checked = 0
    for k, line in enumerate(lines):
        m = re.match(r"^Query  (\d+\s+)(\S+)  \d+$", line)
        if not m:
            continue
        start = len("Query  ") + len(m.group(1))
        q = m.group(2)
        mid = lines[k + 1][start : start + len(q)].ljust(len(q))
        s = lines[k + 2][start : start + len(q)]
        for a, b, c in zip(q, s, mid):
            want = (
                a if a == b else "+" if "-" not in (a, b) and scheme.score_pair(a, b) > 0 else " "
            )
            assert c == want
        checked += 1
    assert checked >= len(aln)


def test_standard_input_and_one_output_file(tmp_path):
    queries = QUERIES.read_text()
    out = tmp_path / "o.tsv"
    r = swgpu(
        "search",
        "-",
        DATABASE,
        "-o",
        out,
        "--backend",
        "cpu",
        "--columns",
        "std",
        "--no-header",
        stdin=queries,
    )
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert len(lines[0].split("\t")) == 12 and not lines[0].startswith("qaccver")
    assert sorted(os.listdir(tmp_path)) == ["o.tsv"]
    sam = tmp_path / "x.sam"
    r = swgpu("search", QUERIES, DATABASE, "-o", sam, "--backend", "cpu", "--top-k", "2")
    assert r.returncode == 0, r.stderr
    assert sam.read_text().startswith("@SQ\t")


def test_a_second_run_into_the_same_folder_waits_or_refuses(tmp_path):
    from filelock import FileLock

    out = tmp_path / "results"
    out.mkdir()
    lock = FileLock(str(out / ".swgpu.lock"))
    lock.acquire()
    try:
        r = swgpu("search", QUERIES, DATABASE, "--out-dir", out, "--backend", "cpu", "--no-wait")
        assert r.returncode == 2 and "another swgpu run is writing into this folder" in r.stderr
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "swgpu_tools.cli",
                "search",
                str(QUERIES),
                str(DATABASE),
                "--out-dir",
                str(out),
                "--backend",
                "cpu",
                "--top-k",
                "2",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(5)
        assert proc.poll() is None  # still waiting for the lock
        assert not (out / "hits.tsv").exists()
    finally:
        lock.release()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "waiting for it to finish" in err
    assert (out / "hits.tsv").exists()


def test_score_shard_on_a_missing_gpu_fails_clearly(tmp_path):
    """score-shard starts the GPU beside reading its shard (no check before): without
    a GPU, --backend gpu still ends in one clear line, exit status 2, no table."""
    from swgpu_tools.backend import gpu_status
    from swgpu_tools.io.shardfile import write_shard

    if gpu_status()[0]:
        pytest.skip("this machine has a usable GPU")
    write_shard(tmp_path / "s.swdb", ["a", "b"], [b"ACDEFGHIK", b"LMNPQRSTVW"])
    r = swgpu(
        "score-shard",
        tmp_path / "s.swdb",
        "--queries",
        QUERIES,
        "--out",
        tmp_path / "h.npz",
        "--backend",
        "gpu",
    )
    assert r.returncode == 2 and "no GPU is usable" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "h.npz").exists()


def test_the_installed_version_is_the_one_swgpu_version_prints(capsys):
    """pyproject takes its version from swgpu_tools.__version__: `pip show swgpu` and
    `swgpu --version` agree (they said 0.1.0 and 0.2.0)."""
    import importlib.metadata

    import swgpu_tools
    from swgpu_tools.cli import main

    assert importlib.metadata.version("swgpu") == swgpu_tools.__version__
    try:
        main(["--version"])
    except SystemExit:
        pass
    assert capsys.readouterr().out.split() == ["swgpu", swgpu_tools.__version__]
