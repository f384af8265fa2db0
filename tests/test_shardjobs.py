"""Scoring jobs of several shards: job names, the plan, joined hit tables, health."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.io.hitsfile import ShardHits, concat_shard_hits, read_shard_hits, write_shard_hits
from swgpu_tools.shardjobs import auto_per_job, job_name, job_shards, plan_jobs


@given(st.integers(1, 300), st.integers(1, 400))
@settings(max_examples=200, deadline=None)
def test_plan_covers_every_shard_once_in_runs(n, per_job):
    jobs = plan_jobs(n, per_job)
    shards = [k for j in jobs for k in job_shards(j)]
    assert shards == list(range(n))  # every shard once, in order
    assert all(1 <= len(job_shards(j)) <= per_job for j in jobs)
    assert len(jobs) == -(-n // per_job)
    for j in jobs:
        ks = job_shards(j)
        assert job_name(ks[0], ks[-1]) == j


@pytest.mark.parametrize(
    "name, shards",
    [("0002", [2]), ("0000-0003", [0, 1, 2, 3]), ("0010-0010", [10]), ("12345", [12345])],
)
def test_job_names(name, shards):
    assert job_shards(name) == shards


@pytest.mark.parametrize("bad", ["", "2", "0003-0001", "0000-", "abcd", "0000-0001-0002"])
def test_bad_job_names(bad):
    with pytest.raises(ValueError):
        job_shards(bad)


@pytest.mark.parametrize(
    "n, slots, per_job", [(4, 1, 4), (4, 2, 2), (5, 2, 3), (4, 8, 1), (4, None, 1), (1, 1, 1)]
)
def test_auto_per_job(n, slots, per_job):
    assert auto_per_job(n, slots) == per_job


def _hits(queries, rows, subjects, offset=0):
    """A ShardHits from rows (query index, subject index, score)."""
    q = np.array([r[0] for r in rows], dtype=np.int32)
    s = np.array([r[1] for r in rows], dtype=np.int32)
    score = np.array([r[2] for r in rows], dtype=np.int32)
    return ShardHits(
        list(queries),
        q,
        s,
        score,
        list(subjects),
        [f"id_{x} title {x}" for x in subjects],
        np.arange(offset + 10, offset + 10 + len(subjects), dtype=np.int64),
    )


def test_joined_hit_tables_keep_every_hit_part_by_part(tmp_path):
    queries = ["qa", "qb"]
    a = _hits(queries, [(0, 0, 50), (0, 1, 20), (1, 1, 30)], ["s1", "s2"])
    b = _hits(queries, [(0, 0, 40), (1, 1, 90), (1, 0, 30)], ["t1", "t2"], offset=5)
    joined = concat_shard_hits([a, b])

    def triples(h):
        return sorted(
            (h.queries[q], h.subjects[s], int(x), h.headers[s], int(h.slen[s]))
            for q, s, x in zip(h.q, h.s, h.score)
        )

    assert triples(joined) == sorted(triples(a) + triples(b))
    # the parts one after another, each per query best first
    rows = list(zip(joined.q.tolist(), (-joined.score).tolist()))
    assert rows[:3] == sorted(rows[:3]) and rows[3:] == sorted(rows[3:])
    assert [joined.subjects[s] for s in joined.s] == ["s1", "s2", "s2", "t1", "t2", "t1"]
    assert joined.subjects == ["s1", "s2", "t1", "t2"]
    path = tmp_path / "shard-0000-0001.npz"
    write_shard_hits(path, joined)
    back = read_shard_hits(path)
    assert triples(back) == triples(joined)
    with pytest.raises(ValueError):
        concat_shard_hits([a, _hits(["qx"], [], [])])


def test_health_removes_the_job_table_that_holds_a_damaged_shard(tmp_path):
    """A damaged shard takes the hit table of the job that scored it (and only that
    one) with it, so that the job runs again."""
    import os

    from swgpu_tools.health import check_shards
    from swgpu_tools.io.shardfile import write_shard

    results = tmp_path / "results"
    (results / "shards").mkdir(parents=True)
    (results / "shards" / "database.json").write_text("{}")
    (results / "shards" / "source.json").write_text("{}")  # the rules' receipts
    (results / "stats" / "score_shard").mkdir(parents=True)
    for k in range(4):
        write_shard(results / "shards" / f"shard-{k:04d}.swdb", [f"s{k}"], [b"ACDEFG"])
        (results / "shards" / f"shard-{k:04d}.json").write_text("{}")
    h = _hits(["q"], [(0, 0, 5)], ["s0"])
    for job in ("0000-0001", "0002-0003"):
        write_shard_hits(results / "hits" / f"shard-{job}.npz", h)
        (results / "stats" / "score_shard" / f"shard-{job}.json").write_text("{}")
    assert check_shards(str(results), 4) == []
    path = results / "shards" / "shard-0003.swdb"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))  # a new stamp: the shard is checked again
    done = check_shards(str(results), 4)
    assert any("shard-0003.swdb is damaged" in d for d in done), done
    assert not (results / "hits" / "shard-0002-0003.npz").exists()
    assert not (results / "stats" / "score_shard" / "shard-0002-0003.json").exists()
    assert (results / "hits" / "shard-0000-0001.npz").exists()
    # a missing receipt makes the shard step run again (database.json goes)
    write_shard(path, ["s3"], [b"ACDEFG"])  # shard 3 rebuilt
    (results / "shards" / "database.json").write_text("{}")
    (results / "shards" / "shard-0001.json").unlink()
    done = check_shards(str(results), 4)
    assert any("shard-0001.json is missing" in d for d in done), done
    assert not (results / "shards" / "database.json").exists()
    # a statistics file without its hit table (the table deleted by hand) goes
    (results / "shards" / "database.json").write_text("{}")
    (results / "shards" / "shard-0001.json").write_text("{}")
    (results / "hits" / "shard-0000-0001.npz").unlink()
    done = check_shards(str(results), 4)
    assert any("shard-0000-0001.npz is missing; scored again" in d for d in done), done
    assert not (results / "stats" / "score_shard" / "shard-0000-0001.json").exists()
    assert (results / "shards" / "database.json").exists()


def test_shards_the_traceback_read_are_not_read_again_by_the_health_check(tmp_path, monkeypatch):
    """Snakemake touches the shards after the shard step, so that step's note of
    them is stale; the traceback step, which reads and checks the shards holding
    hits, notes them again, and the next start-of-run check does not read them.
    An edit in place afterwards (a new time) is still caught."""
    import os

    from swgpu_tools import health
    from swgpu_tools.io import shardfile
    from swgpu_tools.steps.shard_db import shard_database
    from swgpu_tools.steps.traceback import load_subjects

    db = tmp_path / "db.fasta"
    db.write_text("".join(f">s{i}\nACDEFGHIKLMNPQ{'W' * i}\n" for i in range(40)))
    results = tmp_path / "results"
    shard_database(db, results / "shards", 2)
    (results / "shards" / "source.json").write_text("{}")  # the workflow's receipt of db
    paths = [results / "shards" / f"shard-{k:04d}.swdb" for k in range(2)]
    for p in paths:  # what Snakemake does to a job's outputs
        os.utime(p, ns=(1, 1))
    reads = []
    real = shardfile.read_shard
    monkeypatch.setattr(shardfile, "read_shard", lambda p, **kw: reads.append(p) or real(p, **kw))
    # the shard step's note is stale: without the traceback's note, both are read
    before = (results / "shards" / "verified.json").read_text()
    assert health.check_shards(str(results), 2) == [] and len(reads) == 2
    (results / "shards" / "verified.json").write_text(before)
    reads.clear()
    got = load_subjects(paths, {f"s{i}" for i in range(40)})
    assert len(got) == 40
    assert health.check_shards(str(results), 2) == [] and reads == []
    path = paths[1]
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01
    with open(path, "r+b") as fh:  # in place: same size, a new time
        fh.write(bytes(data))
    done = health.check_shards(str(results), 2)
    assert [os.path.basename(p) for p in reads] == ["shard-0001.swdb"]
    assert any("shard-0001.swdb is damaged" in d for d in done), done


def test_a_note_of_this_boot_spares_the_traceback_the_digest_and_one_of_another_does_not(
    tmp_path, monkeypatch
):
    """Shards are written without fsync; the scoring job notes each shard it read and
    checked, and the traceback then reads only the wanted records, unhashed.  A note
    holds for one boot of the machine (a crash may lose unsynced pages): written in
    another boot, or for another size or time, the traceback checks the digest."""
    import os

    import pytest

    from swgpu_tools.errors import InputError
    from swgpu_tools.io import shardfile
    from swgpu_tools.steps.shard_db import shard_database
    from swgpu_tools.steps.traceback import load_subjects

    db = tmp_path / "db.fasta"
    db.write_text("".join(f">s{i}\nACDEFGHIKLMNPQ{'W' * i}\n" for i in range(40)))
    shards = tmp_path / "shards"
    shard_database(db, shards, 1)
    path = shards / "shard-0000.swdb"
    os.utime(path, ns=(5, 5))  # Snakemake touches the shard step's outputs
    st = os.stat(path)
    shardfile.note_verified({path: st})  # what the scoring job does after its read
    # the same bytes' size and time, but one residue changed in place (a page the
    # crash lost would look like this); the time is set back
    data = bytearray(path.read_bytes())
    at = data.index(b"ACDEFGHIKLMNPQWWW")
    data[at] = ord("W")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(5, 5))
    wanted = {"s3"}
    # noted in this boot: trusted, so the change goes unseen (by design: same boot)
    stats = {}
    got = load_subjects([path], wanted, stats)
    assert got.ids == ["s3"]
    assert stats == {"subject_shards": 1, "subject_shards_hashed": 0}
    # noted in another boot: checked, and found corrupt
    monkeypatch.setattr(shardfile, "boot_id", lambda: "another-boot")
    assert shardfile.read_verified(shards) == {}
    with pytest.raises(InputError, match="checksum mismatch"):
        load_subjects([path], wanted, stats)
    assert stats == {"subject_shards": 1, "subject_shards_hashed": 1}
    monkeypatch.undo()
    # noted for another time: checked too
    shardfile.note_verified({path: st})
    os.utime(path, ns=(6, 6))
    with pytest.raises(InputError, match="checksum mismatch"):
        load_subjects([path], wanted)


@pytest.mark.parametrize("byte", [ord("W"), 0x01], ids=["letter", "not-a-letter"])
def test_score_shard_checks_each_shards_digest_before_it_writes(tmp_path, byte):
    """The scoring step checks a shard's digest while it encodes and scores it
    (off the way to the first scores): a shard damaged in place fails naming it
    as corrupt, not as a bad letter, and nothing is written."""
    from swgpu_tools.errors import InputError
    from swgpu_tools.io.shardfile import write_shard
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.steps.score_shard import score_shard

    path = tmp_path / "shard-0000.swdb"
    seqs = [b"MKVLAAGIVGLLLAHHKKWW", b"ACDEFGHIKLMNPQRSTVWYACDEF", b"MSTNPKPQRKTKRNTNRRPQ"]
    write_shard(path, ["a", "b", "c"], seqs)
    (tmp_path / "q.fa").write_text(">q\nACDEFGHIKLMNPQRSTVWY\n")
    out, stats = tmp_path / "hits.npz", tmp_path / "stats.json"
    kw = dict(scheme=ScoringScheme(), top_k=3, backend="cpu", threads=1, stats_path=stats)
    score_shard(path, tmp_path / "q.fa", out, **kw)  # whole: it scores
    out.unlink()
    stats.unlink()
    data = bytearray(path.read_bytes())
    data[data.index(b"ACDEFGHIKLMNPQRSTVWYACDEF") + 3] = byte
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="shard-0000.swdb: shard checksum mismatch"):
        score_shard(path, tmp_path / "q.fa", out, **kw)
    assert not out.exists() and not stats.exists()


def test_hit_tables_the_merge_read_are_not_read_again_by_the_health_check(tmp_path, monkeypatch):
    """The merge reads every scoring job's hit table in full and notes it; the next
    start-of-run check then does not read it (it did, at every re-scan's start).  A
    table changed afterwards (a new stamp) is read again, and removed if damaged."""
    import json
    import os

    from swgpu_tools import health
    from swgpu_tools.io import hitsfile
    from swgpu_tools.io.shardfile import write_shard
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.steps.merge_hits import merge_hits

    results = tmp_path / "results"
    (results / "shards").mkdir(parents=True)
    info = results / "shards" / "database.json"
    info.write_text(json.dumps({"sequences": 2, "residues": 2000}))
    (results / "shards" / "source.json").write_text("{}")
    (results / "shards" / "shard-0000.json").write_text("{}")
    write_shard(results / "shards" / "shard-0000.swdb", ["s1", "s2"], [b"ACDEFG", b"KLMN"])
    (results / "stats" / "score_shard").mkdir(parents=True)
    table = results / "hits" / "shard-0000.npz"
    write_shard_hits(table, _hits(["qa"], [(0, 0, 50), (0, 1, 20)], ["s1", "s2"]))
    (results / "stats" / "score_shard" / "shard-0000.json").write_text("{}")
    os.utime(table, ns=(7, 7))  # what Snakemake may do to a job's output
    queries = tmp_path / "q.fasta"
    queries.write_text(">qa\nACDEFGHIKLMNPQRSTVWY\n")
    reads = []
    real = hitsfile.read_shard_hits
    monkeypatch.setattr(hitsfile, "read_shard_hits", lambda p: reads.append(p) or real(p))
    # without the merge's note the check reads the table
    assert health.check_shards(str(results), 1) == [] and len(reads) == 1
    (results / "shards" / "verified.json").unlink()
    reads.clear()
    merge_hits([table], queries, info, results / "hits.tsv", ScoringScheme(), top_k=5)
    assert health.check_shards(str(results), 1) == [] and reads == []
    # changed afterwards and damaged: read again, and removed
    data = bytearray(table.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\0" * 64
    table.write_bytes(bytes(data))
    done = health.check_shards(str(results), 1)
    assert [os.path.basename(p) for p in reads] == ["shard-0000.npz"]
    assert any("shard-0000.npz, damaged" in d for d in done), done
