"""Shards are stable (a sequence's shard depends only on its id), byte-identical
when their content is unchanged, and checked on load."""

import json
import os

import numpy as np
import pytest

from swgpu_tools.errors import InputError
from swgpu_tools.io.shardfile import (
    read_database_info,
    read_shard,
    read_shard_records,
    shard_of,
)
from swgpu_tools.steps.shard_db import shard_database

RNG = np.random.default_rng(7)
LETTERS = np.frombuffer(b"ACDEFGHIKLMNPQRSTVWY", np.uint8)


def random_db(n, seed):
    rng = np.random.default_rng(seed)
    return {
        f"S{i:05d}": LETTERS[rng.integers(0, 20, rng.integers(5, 80))].tobytes().decode()
        for i in range(n)
    }


def write_fasta(path, records):
    with open(path, "w") as fh:
        for sid, seq in records.items():
            fh.write(f">{sid} desc\n{seq}\n")


def shard_bytes(folder, n):
    return [open(os.path.join(folder, f"shard-{k:04d}.swdb"), "rb").read() for k in range(n)]


def test_roundtrip_and_summary(tmp_path):
    recs = random_db(300, 1)
    write_fasta(tmp_path / "db.fa", recs)
    info = shard_database(tmp_path / "db.fa", tmp_path / "s", 5)
    assert info["sequences"] == 300
    assert info["residues"] == sum(len(s) for s in recs.values())
    assert read_database_info(tmp_path / "s" / "database.json") == info
    seen = {}
    for k in range(5):
        shard = read_shard(tmp_path / "s" / f"shard-{k:04d}.swdb")
        assert shard.ids == sorted(shard.ids)
        for i, sid in enumerate(shard.ids):
            assert shard_of(sid, 5) == k
            seen[sid] = shard.sequence(i)
    assert seen == recs


def test_new_release_changes_only_affected_shards(tmp_path):
    v1 = random_db(400, 2)
    write_fasta(tmp_path / "v1.fa", v1)
    shard_database(tmp_path / "v1.fa", tmp_path / "a", 8)
    before = shard_bytes(tmp_path / "a", 8)
    # a new release: records in another order, one changed, one removed, one added
    v2 = dict(reversed(list(v1.items())))
    v2["S00010"] = v2["S00010"] + "W"
    del v2["S00020"]
    v2["NEW0001"] = "MKTAYIAKQR"
    write_fasta(tmp_path / "v2.fa", v2)
    shard_database(tmp_path / "v2.fa", tmp_path / "a", 8)
    after = shard_bytes(tmp_path / "a", 8)
    changed = {k for k in range(8) if before[k] != after[k]}
    assert changed == {shard_of(s, 8) for s in ("S00010", "S00020", "NEW0001")}


@pytest.mark.parametrize(
    "ratio, block",
    [(10**6, 262_144), (10**6, 7), (0, 262_144)],  # one sorted search (ids gathered in
    # one block, or in blocks of 7); a bisection each
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reading_some_records_equals_reading_all_then_choosing(
    tmp_path, seed, ratio, block, monkeypatch
):
    from swgpu_tools.io import shardfile

    monkeypatch.setattr(shardfile, "_BISECT_RATIO", ratio)
    monkeypatch.setattr(shardfile._Lines, "BLOCK", block)
    rng = np.random.default_rng(seed)
    db = random_db(300, seed)
    db.update({f"{p}{rng.integers(1000)}": "MKV" for p in ("a", "Z", "sp|Q", "~", "S0")})
    write_fasta(tmp_path / "db.fa", db)
    shard_database(tmp_path / "db.fa", tmp_path / "s", 1)
    path = tmp_path / "s" / "shard-0000.swdb"
    full = read_shard(path)
    idx = np.sort(rng.choice(len(full), int(rng.integers(0, 40)), replace=False))
    # absent ones too: before the first id, after the last, between, a prefix of one
    wanted = {full.ids[i] for i in idx} | {"absent", "S99999", "", "\x00", "\U0010ffff", "S0"}
    got = read_shard_records(path, wanted)
    ref = full.subset(idx)
    assert got.ids == ref.ids and got.headers == ref.headers
    assert np.array_equal(got.residues, ref.residues)
    assert np.array_equal(got.offsets, ref.offsets)


@pytest.mark.parametrize("reader", ["all", "records"])
@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "ids"])
def test_corrupt_shard_is_detected(tmp_path, damage, reader):
    write_fasta(tmp_path / "db.fa", random_db(50, 3))
    shard_database(tmp_path / "db.fa", tmp_path / "s", 1)
    path = tmp_path / "s" / "shard-0000.swdb"
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:-7]
    elif damage == "flip":
        data[-3] ^= 0x20
    elif damage == "ids":  # not UTF-8 where the ids are
        at = data.index(b"S000")
        data[at : at + 2] = b"\xff\xfe"
    else:
        data[0:8] = b"XXXXXXXX"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="shard"):
        if reader == "all":
            read_shard(path)
        else:
            read_shard_records(path, {"S00001", "S00002"})


def test_duplicate_ids_rejected(tmp_path):
    (tmp_path / "db.fa").write_text(">a\nMK\n>b\nAA\n>a\nCC\n")
    with pytest.raises(InputError, match="duplicate sequence id 'a'"):
        shard_database(tmp_path / "db.fa", tmp_path / "s", 2)
    assert not (tmp_path / "s" / "database.json").exists()


def test_small_pieces_and_memory_give_the_same_shards(tmp_path, monkeypatch):
    """Many pieces (small byte ranges), several workers, and a memory budget that
    lets one shard be written at a time: the shards of one whole-file process."""
    from swgpu_tools.steps import shard_db as step

    db = tmp_path / "db.fa"
    db.write_text(
        "".join(
            f">sp|P{i:05d}|X_{i} entry {i}\n{'MKTAYIAKQR' * (1 + i % 7)}\n"
            for i in reversed(range(300))
        )
    )
    shard_database(db, tmp_path / "one", 3, threads=1)
    monkeypatch.setattr(step, "MEMORY_BYTES", 1)  # one shard at a time
    shard_database(db, tmp_path / "many", 3, threads=3, range_bytes=500)
    for k in range(3):
        name = f"shard-{k:04d}.swdb"
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()
    a = read_database_info(tmp_path / "one" / "database.json")
    b = read_database_info(tmp_path / "many" / "database.json")
    assert a == b and a["sequences"] == 300


def test_release_digest_ignores_compression_and_line_width(tmp_path):
    import gzip

    recs = [(f"s{i} t", "MKTAYIAKQRQISFVKSHFSRQ" * (i + 1)) for i in range(20)]
    (tmp_path / "a.fa").write_text("".join(f">{h}\n{s}\n" for h, s in recs))
    wrapped = "".join(
        f">{h}\n" + "\n".join(s[j : j + 7] for j in range(0, len(s), 7)) + "\n" for h, s in recs
    )
    with gzip.open(tmp_path / "b.fa.gz", "wt") as fh:
        fh.write(wrapped)
    (tmp_path / "c.fa").write_text("".join(f">{h}\n{s}W\n" for h, s in recs))
    digests = [
        shard_database(tmp_path / f, tmp_path / f"o{f}", 2)["content_sha256"]
        for f in ("a.fa", "b.fa.gz", "c.fa")
    ]
    assert digests[0] == digests[1] != digests[2]


def test_shard_receipts_change_only_with_their_shards_content(tmp_path):
    """Each shard's receipt (shard-NNNN.json, the scoring rule's input) holds its
    digest and sizes: the same bytes when the shard's content is the same."""
    import json

    from swgpu_tools.io.shardfile import shard_of

    recs = {f"s{i}": "MKTAYIAKQRQISFVKSHFSRQ" * (i + 1) for i in range(30)}
    (tmp_path / "a.fa").write_text("".join(f">{h}\n{s}\n" for h, s in recs.items()))
    changed = dict(recs, s7=recs["s7"] + "W")
    (tmp_path / "b.fa").write_text("".join(f">{h}\n{s}\n" for h, s in changed.items()))
    a = shard_database(tmp_path / "a.fa", tmp_path / "oa", 3)
    shard_database(tmp_path / "b.fa", tmp_path / "ob", 3)
    for k in range(3):
        ra = (tmp_path / "oa" / f"shard-{k:04d}.json").read_bytes()
        rb = (tmp_path / "ob" / f"shard-{k:04d}.json").read_bytes()
        assert (ra == rb) == (k != shard_of("s7", 3)), k
        assert json.loads(ra) == a["shards"][k]


@pytest.mark.parametrize("version", [2, 3])
def test_older_shard_formats_still_read_and_their_digests_are_still_checked(tmp_path, version):
    """Shards written before format 4 (tests/data/shard_format2.swdb, blake2b, by
    e11f155's code; shard_format3.swdb, one sha256, by 7f8d1e1's) read as before,
    and damage in one is still found."""
    import shutil
    from pathlib import Path

    from swgpu_tools.io.piecedigest import digest_of
    from swgpu_tools.io.shardfile import FORMAT_VERSION, read_shard_unverified, write_shard

    old = Path(__file__).parent / "data" / f"shard_format{version}.swdb"
    assert f'"format": {version}'.encode() in old.read_bytes()[:200] and FORMAT_VERSION == 4
    got = read_shard(old)
    assert list(got.ids) == ["P1", "P2", "Q9"] and list(got.headers)[1] == "P2 second"
    assert bytes(got.residues[20:40]) == b"ACDEFGHIKLMNPQRSTVWY"
    # the same records written now: format 4, the digest over pieces, the same content
    seqs = [got.sequence(i).encode() for i in range(3)]
    write_shard(tmp_path / "new.swdb", list(got.ids), seqs, list(got.headers))
    new = (tmp_path / "new.swdb").read_bytes()
    hlen = int.from_bytes(new[8:16], "little")
    header = json.loads(new[16 : 16 + hlen])
    assert header["format"] == 4 and header["sha256-16MiB"] == digest_of(new[16 + hlen :])
    assert new[16 + hlen :] == old.read_bytes()[-len(new) + 16 + hlen :]
    assert list(read_shard(tmp_path / "new.swdb").ids) == list(got.ids)
    for name in ("old.swdb", "new.swdb"):
        path = tmp_path / name
        if name == "old.swdb":
            shutil.copy(old, path)
        data = bytearray(path.read_bytes())
        data[data.index(b"ACDEFGHIKLMNPQRSTVWY") + 5] = ord("W")
        path.write_bytes(bytes(data))
        with pytest.raises(InputError, match="checksum mismatch"):
            read_shard(path)
        _, check = read_shard_unverified(path)
        with pytest.raises(InputError, match="checksum mismatch"):
            check()


def test_a_shards_later_check_does_not_keep_its_memory(tmp_path):
    """read_shard_unverified's check (a scoring job keeps each shard's until it writes)
    holds no reference to the shard's body: once the job drops the sequences, the
    memory is freed (a job of 8 shards held all 8 until its end: 4 GB at 2e9); the
    check still finds a wrong digest."""
    import gc
    import weakref

    from swgpu_tools.io.shardfile import read_shard_unverified, write_shard

    path = tmp_path / "s.swdb"
    write_shard(path, ["A1", "B2"], [b"MKVLA" * 40, b"WWCC" * 30], ["A1 x", "B2 y"])
    shard, check = read_shard_unverified(path)
    body = shard.residues.base
    while body.base is not None:
        body = body.base
    gone = weakref.ref(body)
    del shard, body
    check()
    gc.collect()
    assert gone() is None, "the check keeps the shard's body"
    data = bytearray(path.read_bytes())
    data[-20] ^= 1
    path.write_bytes(bytes(data))
    shard, check = read_shard_unverified(path)
    with pytest.raises(InputError, match="checksum mismatch"):
        check()
