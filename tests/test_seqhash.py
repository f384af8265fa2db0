"""Content hashes of sequences (kernels/seqhash.py), against a plain-Python reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.io.statefile import sequence_hashes
from swgpu_tools.kernels import seqhash
from swgpu_tools.sequences import SequenceSet

letters = st.text(alphabet="ACDEFGHIKLMNPQRSTVWYXBZU*", min_size=0, max_size=60)


def _set(texts):
    return SequenceSet.from_pairs([(f"s{i}", t) for i, t in enumerate(texts)])


@settings(max_examples=60, deadline=None)
@given(st.lists(letters, min_size=0, max_size=30), st.integers(1, 5))
def test_hashes_equal_the_reference_whatever_the_chunks(texts, threads):
    seqs = _set(texts)
    want = np.array([seqhash.reference_hash(t.encode()) for t in texts], dtype=np.uint64)
    old = seqhash.CHUNK_RESIDUES
    try:
        seqhash.CHUNK_RESIDUES = 7  # many chunks, some of them empty
        got = seqhash.hash_ranges(seqs.residues, seqs.offsets, threads)
    finally:
        seqhash.CHUNK_RESIDUES = old
    assert got.dtype == np.uint64
    assert np.array_equal(got, want)
    assert np.array_equal(sequence_hashes(seqs), want)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="ACDEFGHIKLMNPQRSTVWY", min_size=1, max_size=200), st.data())
def test_one_changed_residue_always_changes_the_hash(text, data):
    p = data.draw(st.integers(0, len(text) - 1))
    new = data.draw(st.sampled_from([c for c in "ACDEFGHIKLMNPQRSTVWY" if c != text[p]]))
    other = text[:p] + new + text[p + 1 :]
    h = sequence_hashes(_set([text, other, text + "A", text[:-1]]))
    assert h[0] != h[1]
    assert len(set(h.tolist())) == 4  # a residue added or taken away changes it too
    assert h[0] == sequence_hashes(_set([text]))[0]  # and it depends on nothing else


def test_known_values_do_not_change_between_releases():
    # a state file written by one release of swgpu is read by the next: the values
    # are part of the format (statefile.FORMAT)
    h = sequence_hashes(_set(["", "A", "MKV"]))
    assert [int(x) for x in h] == [
        seqhash.reference_hash(b""),
        seqhash.reference_hash(b"A"),
        seqhash.reference_hash(b"MKV"),
    ]
    assert int(h[2]) == KNOWN_MKV


KNOWN_MKV = 4651391989132590780


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.binary(min_size=0, max_size=50), min_size=0, max_size=25),
    st.integers(1, 4),
    st.sampled_from(["BLOSUM62", "PAM30", "NUC.4.4"]),
)
def test_hashes_and_codes_in_one_pass_equal_the_two_passes(blobs, threads, matrix):
    """The scoring job's fused pass (hashes and matrix codes at once): the same
    hashes as hash_ranges, the same codes as the bytes.translate of
    ScoringScheme.encode, and the first position of a byte without a code."""
    from swgpu_tools.scoring import ScoringScheme

    scheme = ScoringScheme(matrix)
    table = scheme.code_table()
    residues = np.frombuffer(b"".join(blobs), dtype=np.uint8).copy()
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64)
    old = seqhash.CHUNK_RESIDUES
    try:
        seqhash.CHUNK_RESIDUES = 5  # many chunks, some of them empty
        hashes, codes, bad = seqhash.hash_and_translate(residues, offsets, table, threads)
    finally:
        seqhash.CHUNK_RESIDUES = old
    assert np.array_equal(hashes, seqhash.hash_ranges(residues, offsets, 1))
    want = bytearray(residues.tobytes()).translate(table.tobytes())
    assert codes.tobytes() == bytes(want)
    assert bad == want.find(b"\xff")
    own = scheme.codes_of_letters
    assert table.tolist() == [int(c) if c >= 0 else 255 for c in own]


accessions = st.text(
    alphabet=st.sampled_from(list("ABCOPQXYZ0123456789_.-é")), min_size=0, max_size=8
)


@settings(max_examples=150, deadline=None)
@given(st.lists(accessions, max_size=40), st.lists(accessions, max_size=40), st.booleans())
def test_matching_sorted_accessions_equals_a_dict_lookup(new, old, sort):
    """match_sorted against a brute-force lookup: on lists that ascend strictly (in
    byte order, as a shard's do) the same indices; otherwise None, never a wrong one."""
    if sort:
        new = sorted(set(new), key=lambda a: a.encode())
        old = sorted(set(old), key=lambda a: a.encode())
    got = seqhash.match_sorted("\n".join(new).encode(), len(new), "\n".join(old).encode(), len(old))
    want = [max((j for j, a in enumerate(old) if a == x), default=-1) for x in new]

    def ascending(xs):
        return all(a.encode() < b.encode() for a, b in zip(xs, xs[1:]))

    if new and old and not (ascending(new) and ascending(old)):
        assert got is None
    elif sort or (ascending(new) and ascending(old)) or not new or not old:
        assert got is not None and got.tolist() == want
