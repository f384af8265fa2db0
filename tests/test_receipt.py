"""The database's receipt and content digest (rule shard_db; swgpu_tools/steps/receipt.py).

The workflow passes the digest as a parameter instead of letting Snakemake checksum
the database, so the digest must change with any change of content, stay the same
for the same content, and be computed again only when the file's stamp changed.
"""

import hashlib
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.io import piecedigest
from swgpu_tools.steps import receipt


def _reference(data: bytes, piece: int) -> str:
    """The digest's definition, one piece at a time."""
    total = hashlib.sha256(f"{receipt.DIGEST_NAME} {len(data)}\n".encode())
    for k in range(0, len(data), piece):
        total.update(hashlib.sha256(data[k : k + piece]).digest())
    return f"{receipt.DIGEST_NAME}:{total.hexdigest()}"


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=200), threads=st.integers(1, 5))
def test_content_digest_equals_its_definition(tmp_path_factory, data, threads):
    """Pieces of 16 bytes (so that files of 0, 1, exactly k and k + 1 pieces all
    occur), hashed by several threads: the same digest as one piece at a time."""
    path = tmp_path_factory.mktemp("d") / "db.fasta"
    path.write_bytes(data)
    old = piecedigest.PIECE_BYTES
    piecedigest.PIECE_BYTES = 16
    try:
        got = receipt.content_digest(path, threads=threads)
    finally:
        piecedigest.PIECE_BYTES = old
    assert got == _reference(data, 16)


def test_database_content_is_computed_again_only_when_the_stamp_changes(tmp_path, monkeypatch):
    db = tmp_path / "db.fasta"
    db.write_bytes(b">a\nACDE\n>b\nKLMN\n")
    note = tmp_path / ".snakemake/swgpu/database-stamp.json"
    calls = []
    real = receipt.content_digest
    monkeypatch.setattr(receipt, "content_digest", lambda p: calls.append(p) or real(p))

    first = receipt.database_content(db, note)
    assert first == real(db) and len(calls) == 1
    assert json.loads(note.read_text())["content"] == first
    assert receipt.database_content(db, note) == first and len(calls) == 1  # noted
    # touched: computed again, the same digest
    st = os.stat(db)
    os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert receipt.database_content(db, note) == first and len(calls) == 2
    assert receipt.database_content(db, note) == first and len(calls) == 2
    # the same size, one letter changed, the modification time set back: the change
    # time still moved, so the new content is seen
    st = os.stat(db)
    db.write_bytes(b">a\nACDE\n>b\nKLMQ\n")
    os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed = receipt.database_content(db, note)
    assert changed != first and changed == real(db) and len(calls) == 3
    # another file at the same path (a new inode), same content: computed again
    copy = tmp_path / "copy.fasta"
    copy.write_bytes(db.read_bytes())
    os.replace(copy, db)
    assert receipt.database_content(db, note) == changed and len(calls) == 4
    # a note that cannot be read only costs the digest again
    note.write_text("{not json")
    assert receipt.database_content(db, note) == changed and len(calls) == 5


def test_receipt_holds_the_content_not_the_time(tmp_path):
    """Two receipts of the same content are the same bytes (so the shard step, whose
    input the receipt is, does not run again); another content, another receipt."""
    db = tmp_path / "db.fasta"
    db.write_bytes(b">a\nACDE\n")
    a, b, c = (tmp_path / f"{n}.json" for n in "abc")
    receipt.write_source_receipt(db, a, receipt.content_digest(db))
    receipt.write_source_receipt(db, b, receipt.content_digest(db))
    assert a.read_bytes() == b.read_bytes()
    db.write_bytes(b">a\nACDF\n")
    receipt.write_source_receipt(db, c, receipt.content_digest(db))
    assert json.loads(c.read_text())["content"] != json.loads(a.read_text())["content"]


def test_the_shard_step_writes_the_receipt_last(tmp_path, monkeypatch):
    """`swgpu shard --receipt` (rule shard_db) writes the database's receipt, the same
    bytes as `swgpu receipt`, after the shards and database.json; with no digest
    given it computes it; a failing shard step writes none."""
    from swgpu_tools.cli import main
    from swgpu_tools.steps import shard_db

    db = tmp_path / "db.fasta"
    db.write_bytes(b">a\nACDE\n>b\nKLMN\n")
    out = tmp_path / "shards"
    digest = receipt.content_digest(db)
    order = []
    real = shard_db.write_json
    monkeypatch.setattr(shard_db, "write_json", lambda p, o: order.append(p) or real(p, o))
    assert main(["shard", str(db), "--shards", "2", "--out-dir", str(out),
                 "--receipt", str(tmp_path / "r.json"), "--content", digest]) == 0  # fmt: skip
    assert main(["receipt", str(db), "--out", str(tmp_path / "alone.json")]) == 0
    assert (tmp_path / "r.json").read_bytes() == (tmp_path / "alone.json").read_bytes()
    assert [os.path.basename(p) for p in order][-1] == "database.json"  # then the receipt
    assert (tmp_path / "r.json").stat().st_mtime_ns >= (out / "database.json").stat().st_mtime_ns
    assert main(["shard", str(db), "--shards", "2", "--out-dir", str(out),
                 "--receipt", str(tmp_path / "r2.json")]) == 0  # fmt: skip
    assert json.loads((tmp_path / "r2.json").read_text())["content"] == digest
    db.write_bytes(b">a\nACDE\n>a\nKLMN\n")  # an accession twice: refused, no receipt
    with pytest.raises(Exception, match="a"):
        shard_db.shard_database(db, out, 2, receipt_path=tmp_path / "r3.json")
    assert not (tmp_path / "r3.json").exists()


def test_missing_database_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        receipt.database_content(tmp_path / "none.fasta", tmp_path / "note.json")


# -- a release cut short is refused when the workflow is parsed (check_complete) --------

records = st.lists(
    st.tuples(st.text("abcXYZ_|", min_size=1, max_size=12), st.text("ACDEKLMW", max_size=90)),
    min_size=1,
    max_size=6,
)


def _fasta(recs) -> bytes:
    return b"".join(f">{name}\n{seq}\n".encode() for name, seq in recs)


def _last_record_empty(data: bytes) -> bool:
    """The reference: split the text into records the plain way."""
    last = data.decode().split("\n>")[-1]  # the last record (the first: with its '>')
    _header, _, rest = last.partition("\n")
    return not rest.strip()


@settings(max_examples=150, deadline=None)
@given(recs=records, frac=st.floats(0.0, 1.0))
def test_a_plain_file_cut_anywhere_is_refused_exactly_when_its_last_record_is_empty(
    tmp_path_factory, recs, frac
):
    data = _fasta(recs)
    cut = data[: max(2, int(len(data) * frac))]  # at least '>' and one character
    path = tmp_path_factory.mktemp("cut") / "db.fasta"
    path.write_bytes(cut)
    if _last_record_empty(cut):
        with pytest.raises(receipt.InputError, match="has no residues"):
            receipt.check_complete(path)
    else:
        receipt.check_complete(path)


full_records = st.lists(
    st.tuples(st.text("abcXYZ_|", min_size=1, max_size=12), st.text("ACDEKLMW", min_size=1)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(recs=full_records, frac=st.floats(0.0, 0.999))
def test_a_gzip_file_cut_short_is_refused(tmp_path_factory, recs, frac):
    import gzip

    data = gzip.compress(_fasta(recs))
    folder = tmp_path_factory.mktemp("gz")
    whole, cut = folder / "whole.fasta.gz", folder / "cut.fasta.gz"
    whole.write_bytes(data)
    receipt.check_complete(whole)
    cut.write_bytes(data[: max(2, int(len(data) * frac))])
    with pytest.raises(receipt.InputError, match="gzip stream is damaged or cut short"):
        receipt.check_complete(cut)


def test_a_gzip_file_failing_its_crc_and_a_long_last_record(tmp_path):
    import gzip

    data = bytearray(gzip.compress(b">a\nACDE\n>b\nKLMN\n"))
    data[-8] ^= 0xFF  # the CRC32 in the trailer
    bad = tmp_path / "bad.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(receipt.InputError, match="gzip stream"):
        receipt.check_complete(bad)
    long = tmp_path / "long.fasta"  # the last header lies before the tail read
    long.write_bytes(b">a\nAC\n>b\n" + b"ACDEFGHIKL\n" * (receipt.TAIL_BYTES // 8) + b"\n\n")
    receipt.check_complete(long)


def test_a_refused_file_leaves_no_note(tmp_path):
    """Refused files are refused again on the next run: their stamp is not noted."""
    db = tmp_path / "db.fasta"
    db.write_bytes(b">a\nACDE\n>b")
    note = tmp_path / "note.json"
    for _ in range(2):
        with pytest.raises(receipt.InputError, match="'>b'"):
            receipt.database_content(db, note)
    assert not note.exists()
