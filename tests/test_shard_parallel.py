"""The parallel shard step (issue 11.4/11.7) against a plain reference: whatever
the number of worker processes and the size of the pieces they parse, the shard
files are those that ``write_shard`` makes of the line reader's records, the
release digest depends on the records only, and a bad database gives the
sequential reader's error and changes nothing in the output folder."""

from __future__ import annotations

import gzip
import hashlib
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swgpu_tools.errors import InputError
from swgpu_tools.io.fasta import iter_fasta, iter_unique_fasta
from swgpu_tools.io.fasta_blocks import iter_blocks, plan_ranges
from swgpu_tools.io.shardfile import read_database_info, shard_of, write_shard
from swgpu_tools.steps.shard_db import shard_database

LETTERS = "ACDEFGHIKLMNPQRSTVWYacdefXBZUOJ*"


def reference(path, n_shards: int, folder) -> tuple[list[bytes], dict]:
    """Shard files and summary made the plain way: the line reader's records,
    grouped by shard, each group written by write_shard."""
    recs = list(iter_unique_fasta(path))
    os.makedirs(folder, exist_ok=True)
    shards = []
    for k in range(n_shards):
        mine = [r for r in recs if shard_of(r.id, n_shards) == k]
        p = os.path.join(folder, f"ref-{k}")
        write_shard(p, [r.id for r in mine], [r.sequence for r in mine], [r.header for r in mine])
        with open(p, "rb") as fh:
            shards.append(fh.read())
    streams = [
        b"".join(r.header.encode() + b"\n" for r in recs),
        b"".join(r.sequence for r in recs),
        np.array([len(r.sequence) for r in recs], dtype="<i8").tobytes(),
    ]
    digest = hashlib.sha256(b"".join(hashlib.sha256(s).digest() for s in streams)).hexdigest()
    return shards, {
        "sequences": len(recs),
        "residues": sum(len(r.sequence) for r in recs),
        "content_sha256": digest,
    }


def shard_files(folder, n_shards: int) -> list[bytes]:
    return [open(os.path.join(folder, f"shard-{k:04d}.swdb"), "rb").read() for k in range(n_shards)]


@st.composite
def databases(draw):
    """FASTA text with everything the readers accept: wrapped lines, lower case,
    ambiguity letters, tabs in titles, CRLF lines, blank lines, a byte-order
    mark, UniProt and plain ids in any order, a missing last newline."""
    n = draw(st.integers(1, 40))
    numbers = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n, unique=True))
    if draw(st.booleans()):
        numbers.sort()
    wrap = draw(st.sampled_from([0, 0, 1, 7, 60]))
    crlf = draw(st.integers(0, 9)) == 0
    rng = random.Random(draw(st.integers(0, 2**32)))
    out = []
    for i in numbers:
        sid = f"sp|P{i:05d}|N_{i}" if rng.random() < 0.5 else f"id{i}"
        title = rng.choice(["", " some title", " with\ta tab", " ünïcode"])
        seq = "".join(rng.choice(LETTERS) for _ in range(rng.choice([1, 3, 40, 300])))
        lines = [seq] if not wrap else [seq[j : j + wrap] for j in range(0, len(seq), wrap)]
        if rng.random() < 0.05:
            lines.append("")  # a blank line inside a record
        out.append("\n".join([">" + sid + title, *lines]))
    text = "\n".join(out) + ("\n" if draw(st.booleans()) else "")
    if crlf:
        text = text.replace("\n", "\r\n")
    if draw(st.integers(0, 9)) == 0:
        text = "\n \n" + text  # blank lines before the first header
    data = text.encode()
    if draw(st.integers(0, 9)) == 0:
        data = b"\xef\xbb\xbf" + data
    return data


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    data=databases(),
    n_shards=st.integers(1, 5),
    threads=st.integers(1, 3),
    range_bytes=st.integers(1, 400),
    compress=st.booleans(),
)
def test_parallel_shards_equal_the_reference(
    tmp_path_factory, data, n_shards, threads, range_bytes, compress
):
    tmp = tmp_path_factory.mktemp("par")
    path = tmp / ("db.fa.gz" if compress else "db.fa")
    path.write_bytes(gzip.compress(data) if compress else data)
    ref_shards, ref = reference(path, n_shards, tmp / "ref")
    info = shard_database(path, tmp / "out", n_shards, threads=threads, range_bytes=range_bytes)
    assert shard_files(tmp / "out", n_shards) == ref_shards
    assert {k: info[k] for k in ref} == ref
    assert read_database_info(tmp / "out" / "database.json") == info
    assert [p for p in os.listdir(tmp / "out") if p.startswith(".")] == []  # no spill left


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=databases(),
    wrap=st.integers(1, 80),
    threads=st.integers(1, 3),
    range_bytes=st.integers(1, 300),
)
def test_release_digest_depends_on_the_records_only(
    tmp_path_factory, data, wrap, threads, range_bytes
):
    """Rewrapped, recompressed, read by other workers in other pieces: same digest."""
    tmp = tmp_path_factory.mktemp("dig")
    (tmp / "a.fa").write_bytes(data)
    recs = list(iter_fasta(tmp / "a.fa"))
    text = "".join(
        f">{r.header}\n"
        + "\n".join(r.sequence[j : j + wrap].decode() for j in range(0, len(r.sequence), wrap))
        + "\n"
        for r in recs
    )
    (tmp / "b.fa.gz").write_bytes(gzip.compress(text.encode()))
    a = shard_database(tmp / "a.fa", tmp / "oa", 2, threads=1)
    b = shard_database(tmp / "b.fa.gz", tmp / "ob", 3, threads=threads, range_bytes=range_bytes)
    assert a["content_sha256"] == b["content_sha256"]


def _error(fn) -> str | None:
    try:
        fn()
    except InputError as exc:
        return str(exc)
    return None


def _snapshot(folder) -> dict:
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


BAD = ["MK1V", "", "MK V-", "MKV\x07", "M\x00K"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(2, 60),
    where=st.floats(0, 1),
    bad=st.sampled_from(BAD + ["dup", "head"]),
    threads=st.integers(2, 3),
    range_bytes=st.integers(1, 400),
    compress=st.booleans(),
)
def test_bad_database_gives_the_sequential_error_and_changes_nothing(
    tmp_path_factory, n, where, bad, threads, range_bytes, compress
):
    tmp = tmp_path_factory.mktemp("bad")
    good = [(f"sp|Q{i:04d}|X seq {i}", "MKTAYIAKQR" * (1 + i % 5)) for i in range(n)]
    out = tmp / "out"
    (tmp / "good.fa").write_text("".join(f">{h}\n{s}\n" for h, s in good))
    shard_database(tmp / "good.fa", out, 3, threads=1)
    before = _snapshot(out)
    recs = list(good)
    i = max(1, min(n - 1, int(where * n)))
    if bad == "dup":  # a repeated accession, far from the first
        recs[i] = (recs[0][0].replace("seq", "again"), "MK")
    elif bad == "head":  # control character in the id
        recs[i] = (f"sp|Q\x01{i}|X", "MK")
    else:
        recs[i] = (recs[i][0], bad)
    data = "".join(f">{h}\n{s}\n" for h, s in recs).encode()
    path = tmp / ("db.fa.gz" if compress else "db.fa")
    path.write_bytes(gzip.compress(data) if compress else data)
    expected = _error(lambda: list(iter_unique_fasta(path)))
    assert expected is not None
    assert _error(lambda: [b for b in iter_blocks(path)]) in (expected, None)  # dups: None
    got = _error(lambda: shard_database(path, out, 3, threads=threads, range_bytes=range_bytes))
    assert got == expected
    assert _snapshot(out) == before  # no shard, summary or spill folder touched


def test_truncated_gzip_gives_the_sequential_error(tmp_path):
    data = gzip.compress("".join(f">s{i}\n{'MKV' * 50}\n" for i in range(2000)).encode())
    path = tmp_path / "db.fa.gz"
    path.write_bytes(data[: len(data) // 2])
    expected = _error(lambda: list(iter_blocks(path)))
    assert "truncated" in expected
    assert (
        _error(lambda: shard_database(path, tmp_path / "o", 2, threads=2, range_bytes=1000))
        == expected
    )
    assert [p for p in os.listdir(tmp_path / "o")] == []


@pytest.mark.parametrize("text", [b"  >abc\nMK\n", b"x\n>abc\nMK\n", b"\x0b>abc\nMK\n"])
def test_a_header_that_does_not_start_a_line_is_refused_by_every_reader(tmp_path, text):
    path = tmp_path / "db.fa"
    path.write_bytes(text)
    expected = _error(lambda: list(iter_fasta(path)))
    assert "before any '>' header line" in expected
    assert _error(lambda: list(iter_blocks(path))) == expected
    assert _error(lambda: shard_database(path, tmp_path / "o", 1, threads=2)) == expected


@settings(max_examples=60, deadline=None)
@given(data=databases(), range_bytes=st.integers(1, 500))
def test_ranges_cover_the_file_in_whole_records(tmp_path_factory, data, range_bytes):
    path = tmp_path_factory.mktemp("rng") / "db.fa"
    path.write_bytes(data)
    ranges = plan_ranges(path, range_bytes)
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    if data[start : start + 1] != b">":
        assert ranges is None
        return
    assert ranges[0][0] == start and ranges[-1][1] == len(data)
    for (a, b), (c, _) in zip(ranges, ranges[1:]):
        assert b == c and a < b
    for a, _ in ranges:
        assert data[a : a + 1] == b">" and (a == start or data[a - 1 : a] == b"\n")
    # each range ends at the first record start at least range_bytes after its own
    starts = [i + 1 for i in range(len(data) - 1) if data[i : i + 2] == b"\n>"]
    for a, b in ranges:
        later = [s for s in starts if s >= a + range_bytes]
        assert b == (later[0] if later else len(data))


def test_threads_must_be_positive(tmp_path):
    (tmp_path / "db.fa").write_text(">a\nMK\n")
    with pytest.raises(InputError, match="threads must be at least 1"):
        shard_database(tmp_path / "db.fa", tmp_path / "o", 1, threads=0)


def test_stats_name_the_workers_and_phases(tmp_path):
    import json

    (tmp_path / "db.fa").write_text("".join(f">s{i}\nMKV\n" for i in range(100)))
    shard_database(
        tmp_path / "db.fa",
        tmp_path / "o",
        2,
        stats_path=tmp_path / "st.json",
        threads=2,
        range_bytes=100,
    )
    st_ = json.loads((tmp_path / "st.json").read_text())
    assert st_["workers"] == 2 and st_["pieces"] > 1
    assert {"read", "write", "commit"} <= set(st_["phases_s"])


def test_the_workers_variable_caps_the_default_workers(tmp_path, monkeypatch):
    """$SWGPU_SHARD_WORKERS (for measuring a re-scan's shard step beside the warm
    process's loads) caps the default worker count; threads given still decide."""
    import json

    from swgpu_tools.steps import shard_db as module

    monkeypatch.setattr(module, "SMALL_BYTES", 1)  # a small file read by workers
    (tmp_path / "db.fa").write_text("".join(f">s{i}\nMKV\n" for i in range(100)))
    monkeypatch.setattr(module, "usable_cpus", lambda: 4)
    seen = {}
    for env, threads in [("1", None), ("3", None), ("", None), ("x", None), ("1", 2)]:
        monkeypatch.setenv("SWGPU_SHARD_WORKERS", env)
        out = tmp_path / f"o{len(seen)}"
        shard_database(tmp_path / "db.fa", out, 2, stats_path=out / "st.json",
                       threads=threads, range_bytes=100)  # fmt: skip
        seen[(env, threads)] = json.loads((out / "st.json").read_text())["workers"]
    assert seen == {("1", None): 1, ("3", None): 3, ("", None): 4, ("x", None): 4, ("1", 2): 2}


def _near_fasta():
    from test_reliability import near_fasta

    return near_fasta


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(_near_fasta(), databases()), block=st.integers(1, 16), bom=st.booleans())
def test_block_reader_with_tiny_blocks_agrees_with_the_line_reader(
    tmp_path_factory, data, block, bom
):
    path = tmp_path_factory.mktemp("tiny") / "x.fa"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    slow = _error(lambda: list(iter_fasta(path)))
    fast = _error(lambda: list(iter_blocks(path, block)))
    assert fast == slow
    if slow is None:
        assert [(r.id, r.header, r.sequence) for r in iter_fasta(path)] == [
            (i.decode(), h.decode(), b.residues[b.offsets[k] : b.offsets[k + 1]].tobytes())
            for b in iter_blocks(path, block)
            for k, (i, h) in enumerate(zip(b.ids, b.headers))
        ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=_near_fasta(),
    range_bytes=st.integers(1, 64),
    threads=st.integers(1, 3),
    compress=st.booleans(),
)
def test_shard_step_fuzz_agrees_with_the_line_reader(
    tmp_path_factory, data, range_bytes, threads, compress
):
    """Near-FASTA: the parallel step fails with the line reader's message, or makes
    the reference shards."""
    tmp = tmp_path_factory.mktemp("fuzz")
    path = tmp / ("x.fa.gz" if compress else "x.fa")
    path.write_bytes(gzip.compress(data) if compress else data)
    expected = _error(lambda: list(iter_unique_fasta(path)))
    got = _error(
        lambda: shard_database(path, tmp / "out", 2, threads=threads, range_bytes=range_bytes)
    )
    assert got == expected
    if expected is None:
        assert shard_files(tmp / "out", 2) == reference(path, 2, tmp / "ref")[0]
    else:
        assert not (tmp / "out" / "database.json").exists()


def test_spill_folders_of_killed_steps_are_removed(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "o"
    out.mkdir()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    (out / f".spill-{gone}-abc").mkdir()
    (out / f".spill-{gone}-abc" / "partitions").write_bytes(b"x" * 100)
    (out / f".spill-{os.getpid()}-live").mkdir()  # a running step's: kept
    (tmp_path / "db.fa").write_text(">a\nMK\n")
    shard_database(tmp_path / "db.fa", out, 1, threads=1)
    assert sorted(p for p in os.listdir(out) if p.startswith(".")) == [f".spill-{os.getpid()}-live"]
