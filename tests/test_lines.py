"""Header lines held as one blob (swgpu_tools/io/lines.py) and the hit tables that
keep them (io/hitsfile.py, format 2; format 1's ids and titles still read)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.ids import seqid_of, title_of
from swgpu_tools.io.hitsfile import ShardHits, read_shard_hits, write_shard_hits
from swgpu_tools.io.lines import Lines

TEXT = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=8), st.lists(TEXT, max_size=5), st.data())
def test_lines_take_concat_and_pack_like_lists(a, b, data):
    la, lb = Lines.from_strings(a), Lines.from_strings(b)
    assert la.tolist() == a and [la[i] for i in range(len(a))] == a
    both = Lines.concat([la, lb])
    assert both.tolist() == a + b
    idx = data.draw(st.lists(st.integers(0, max(len(a) + len(b) - 1, 0)), max_size=6))
    idx = idx if a + b else []
    assert both.take(idx).tolist() == [(a + b)[i] for i in idx]
    assert Lines.from_blob(both.packed(), len(a + b)).tolist() == a + b


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=4), st.sampled_from([b"\n", b"|", b""])), max_size=10),
       st.data())  # fmt: skip
def test_packed_equals_the_lines_joined_one_by_one(pieces, data):
    """Lines.packed copies lines that follow each other in the blob, one newline apart,
    as one slice: the same bytes as joining every line, whatever separates the lines
    of the blob (a newline, another byte, nothing) and whichever lines are taken, in
    any order, repeated or not (the bytes of a line hold no newline)."""
    pieces = [(p.replace(b"\n", b"."), sep) for p, sep in pieces]
    blob, starts, ends = b"", [], []
    for p, sep in pieces:
        starts.append(len(blob))
        blob += p
        ends.append(len(blob))
        blob += sep
    lines = Lines(blob, np.array(starts, np.int64), np.array(ends, np.int64))
    n = len(pieces)
    idx = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=12)) if n else []
    if data.draw(st.booleans()):
        idx = sorted(set(idx))  # a job's case: ascending, each once
    taken = lines.take(idx)
    assert taken.packed() == b"\n".join(blob[starts[i] : ends[i]] for i in idx)


def test_lines_of_a_blob_with_a_newline_after_each_line():
    """A shard's header blob ends each line with a newline: its lines are taken
    without them."""
    blob = b"sp|P1|A_HUMAN one\ntr|Q2|B two words\n\nlast\n"
    ends = np.array([17, 35, 36, 41])
    starts = np.array([0, 18, 36, 37])
    lines = Lines(blob, starts, ends)
    assert lines.take([3, 0, 2]).tolist() == ["last", "sp|P1|A_HUMAN one", ""]
    assert lines.tolist() == ["sp|P1|A_HUMAN one", "tr|Q2|B two words", "", "last"]
    with pytest.raises(ValueError):
        Lines.from_strings(["a\nb"])


def test_hit_table_keeps_header_lines_and_reads_format_1(tmp_path):
    heads = ["sp|P1|A_HUMAN Protein A OS=x", "P2", "", "sp|P3|C  two spaces"]
    accs = ["P1", "P2", "P3x", "P3"]
    z32 = np.zeros(0, np.int32)
    hits = ShardHits(["q"], z32, z32, z32, accs, heads, np.arange(4, dtype=np.int64))
    want = ([seqid_of(h) or a for h, a in zip(heads, accs)], [title_of(h) for h in heads])
    assert hits.sseqids_titles() == want
    write_shard_hits(tmp_path / "h.npz", hits)
    back = read_shard_hits(tmp_path / "h.npz")
    assert back.headers.tolist() == heads and back.sseqids_titles() == want
    lazy = read_shard_hits(tmp_path / "h.npz", lazy=True)  # the merge's: accessions as Lines
    assert isinstance(lazy.subjects, Lines) and lazy.subjects.tolist() == accs == back.subjects
    assert lazy.sseqids_titles() == want
    # format 1 (up to 2026-11-24): sequence ids and titles instead of header lines
    meta = {"format": 1, "queries": 1, "subjects": 4}

    def pack(xs):
        return np.frombuffer("\n".join(xs).encode(), dtype=np.uint8)

    with open(tmp_path / "old.npz", "wb") as fh:
        np.savez(
            fh,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            queries=pack(["q"]),
            q=z32,
            s=z32,
            score=z32,
            subjects=pack(accs),
            sseqid=pack(want[0]),
            stitle=pack(want[1]),
            slen=np.arange(4, dtype=np.int64),
        )
    assert read_shard_hits(tmp_path / "old.npz").sseqids_titles() == want
