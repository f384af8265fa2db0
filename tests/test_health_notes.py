"""The start-up check's notes of tables found whole (swgpu_tools.health): the tables
the manifest lists and the kept releases are digested only when they changed since
they were last found whole, and damage is still found."""

from __future__ import annotations

import json
import os

import pytest

from swgpu_tools import health
from swgpu_tools.io import outputset
from swgpu_tools.io.outputset import NOTES, write_manifest
from swgpu_tools.steps.history import FILES, MANIFEST, record_release


@pytest.fixture
def digests(monkeypatch):
    """The paths digested (the checks import ``_digest`` from its module when run)."""
    seen: list[str] = []
    real = outputset._digest

    def counting(path):
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(outputset, "_digest", counting)
    return seen


def _touch_later(path, seconds=5):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 10**9))


def _results(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    names = ["hits.tsv", "alignments.tsv", "changes.tsv"]
    for i, name in enumerate(names):
        (results / name).write_text(f"table {i}\n" * (100 + i))
    write_manifest(results / "swgpu-run.json", [results / n for n in names])
    return results, names


@pytest.fixture
def made(tmp_path, digests):
    """A results folder with its manifest; the digests of writing it not counted."""
    out = _results(tmp_path)
    digests.clear()
    return out


def test_tables_touched_by_snakemake_are_not_digested_once_noted(made, digests):
    results, names = made
    for n in names:  # Snakemake touches a finished job's outputs
        _touch_later(results / n)
    health.note_outputs(str(results))  # onsuccess
    assert health.check_outputs(str(results)) == []
    assert digests == []
    # without the note, each table is digested once, then noted
    os.unlink(results / NOTES)
    assert health.check_outputs(str(results)) == []
    assert sorted(digests) == sorted(names)
    digests.clear()
    assert health.check_outputs(str(results)) == []
    assert digests == []


def test_a_table_changed_in_place_after_the_note_is_still_found(made, digests):
    results, names = made
    for n in names:
        _touch_later(results / n)
    health.note_outputs(str(results))
    p = results / "alignments.tsv"
    data = bytearray(p.read_bytes())
    data[3] ^= 0x20  # same size, same inode, another time
    with open(p, "r+b") as fh:
        fh.write(bytes(data))
    _touch_later(p, 9)
    done = health.check_outputs(str(results))
    assert digests == ["alignments.tsv"]
    assert not p.exists() and not (results / "swgpu-run.json").exists()
    assert any("alignments.tsv: it differs from" in line for line in done)


def test_a_table_replaced_before_the_note_is_not_vouched_for(made, digests):
    results, names = made
    p = results / "hits.tsv"
    size = p.stat().st_size
    tmp = results / "other"
    tmp.write_bytes(b"x" * size)  # another file of the same size, renamed over it
    os.replace(tmp, p)
    _touch_later(p)
    health.note_outputs(str(results))
    assert "hits.tsv" not in json.loads((results / NOTES).read_text())
    done = health.check_outputs(str(results))
    assert "hits.tsv" in digests and not p.exists() and done


def _database_info(path):
    path.write_text(
        json.dumps({"sequences": 3, "residues": 30, "content_sha256": "ab" * 32, "path": "db"})
    )
    return path


def test_kept_releases_are_digested_only_when_changed(tmp_path, digests):
    results, _ = _results(tmp_path)
    internal = results / "alignments.reuse.tsv"
    internal.write_text("reuse\n" * 50)
    history = results / "history"
    m = record_release(
        results / "hits.tsv",
        results / "alignments.tsv",
        internal,
        _database_info(tmp_path / "database.json"),
        history,
        history / "current.json",
        release="2026_05",
    )
    folder = history / "2026_05"
    # the digests taken while copying are those of the kept files
    assert m["files"] == {f: outputset._digest(str(folder / f)) for f in FILES.values()}
    assert json.loads((folder / MANIFEST).read_text())["files"] == m["files"]
    digests.clear()
    assert health.check_history(str(results)) == []
    assert digests == []
    # changed in place, same size: found, moved aside, and its notes go
    p = folder / "alignments.tsv"
    data = bytearray(p.read_bytes())
    data[0] ^= 0x01
    with open(p, "r+b") as fh:
        fh.write(bytes(data))
    _touch_later(p)
    done = health.check_history(str(results))
    assert any("alignments.tsv differs from its manifest" in line for line in done)
    assert not folder.exists() and not (history / "current.json").exists()
    notes = json.loads((history / NOTES).read_text())
    assert not any(k.startswith("2026_05/") for k in notes)


def test_a_note_that_cannot_be_written_costs_only_a_digest(made, digests):
    """The notes are best effort: where one cannot be written (here its name is a
    folder), the check still works, and digests again next time."""
    results, names = made
    (results / NOTES).mkdir()
    for n in names:
        _touch_later(results / n)
    health.note_outputs(str(results))  # onsuccess: no exception
    assert health.check_outputs(str(results)) == []
    assert sorted(digests) == sorted(names)
    assert health.check_outputs(str(results)) == [] and len(digests) == 2 * len(names)


def test_the_database_note_that_cannot_be_written_costs_only_a_digest(tmp_path):
    from swgpu_tools.steps import receipt

    db = tmp_path / "db.fasta"
    db.write_bytes(b">a\nACDE\n")
    note = tmp_path / "note.json"
    note.mkdir()
    assert receipt.database_content(db, note) == receipt.content_digest(db)
