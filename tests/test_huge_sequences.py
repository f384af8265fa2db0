"""Huge sequences on the CPU search kernel: queries in strips of rows, subjects in
overlapping pieces, progress inside one query (tiny strips and pieces forced, so
small random inputs take those paths; checked against the reference)."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import sw_score

from swgpu_tools.alignment import align
from swgpu_tools.alignment.pool import private_buffer, run_chunks
from swgpu_tools.alignment.scalar import forward_end
from swgpu_tools.kernels import cpu, huge
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

LETTERS = "ARNDCQEGHILKMFPSTWYV"
HYP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_SCHEMES: dict = {}


def scheme(gap_open, gap_extend, name="BLOSUM62"):
    key = (name, gap_open, gap_extend)
    if key not in _SCHEMES:
        _SCHEMES[key] = ScoringScheme(name, gap_open=gap_open, gap_extend=gap_extend)
    return _SCHEMES[key]


def encode(s, seqs, prefix="s"):
    return s.encode(SequenceSet.from_pairs([(f"{prefix}{i}", x) for i, x in enumerate(seqs)]))


def codes(enc, i):
    return enc.codes[enc.offsets[i] : enc.offsets[i + 1]]


def scores(prep, q, n):
    row = np.zeros(n, np.int32)
    prep.score_query(q, row, np.zeros(n, np.uint8))
    return row


@pytest.fixture
def short_pieces(monkeypatch):
    """Pieces twice their overlap (the default is 8x): many pieces on small inputs."""
    monkeypatch.setattr(huge, "PIECE_FACTOR", 2)


# subjects with runs of one letter reach the int8 limit (and the int16 ladder)
subject = st.one_of(
    st.text(alphabet=LETTERS, min_size=0, max_size=250),
    st.tuples(st.text(alphabet=LETTERS, max_size=60), st.integers(5, 40)).map(
        lambda t: t[0] + "W" * t[1] + t[0][::-1]
    ),
)


@HYP
@given(
    query=st.text(alphabet=LETTERS + "W" * 10, min_size=1, max_size=80),
    subjects=st.lists(subject, min_size=1, max_size=8),
    gap=st.tuples(st.integers(0, 12), st.integers(1, 6)),
    strip=st.sampled_from([1, 2, 3, 5, 8, 13, 1000]),
    piece=st.sampled_from([1, 4, 16, 1000]),
    factor=st.sampled_from([2, 3, 8]),
    threads=st.sampled_from([None, 64]),
)
def test_strips_and_pieces_equal_reference(query, subjects, gap, strip, piece, factor, threads):
    s = scheme(*gap)
    q, d = encode(s, [query], "q"), encode(s, subjects)
    old = huge.PIECE_FACTOR
    huge.PIECE_FACTOR = factor
    try:
        prep = cpu._Prepared(d, s.matrix, *gap, strip_rows=strip, piece_cols=piece)
        prep.split_threads = threads  # 64: the query's rows cut into items where it can
        got = scores(prep, codes(q, 0), len(subjects))
    finally:
        huge.PIECE_FACTOR = old
    want = [sw_score(codes(q, 0), codes(d, i), s.matrix, *gap) for i in range(len(subjects))]
    np.testing.assert_array_equal(got, want)


def test_pieces_are_made_and_strips_carry_through_the_lane_ladder(short_pieces):
    """int8 -> int16 -> int32 on pieces and strips: a W run scoring 11 a residue."""
    rng = np.random.default_rng(5)
    rand = lambda n: "".join(rng.choice(list(LETTERS), n))  # noqa: E731
    s = scheme(11, 11)  # overlap 2 x query length: pieces on moderate subjects
    queries = ["W" * 3000, rand(40) + "W" * 20 + rand(40), rand(700)]
    subjects = [
        rand(9000) + "W" * 3100 + rand(30000),  # int32 rescore of a piece (33,000)
        rand(20000) + "W" * 15 + rand(5000),  # int8 -> int16 inside one piece
        rand(12000) + queries[2][100:600] + rand(3000),
        rand(50),
        rand(300),
    ]
    q, d = encode(s, queries, "q"), encode(s, subjects)
    prep = cpu._Prepared(d, s.matrix, 11, 11, strip_rows=64, piece_cols=4096)
    for i in range(len(queries)):
        ustart, uend, owner, _ = prep._layout(len(queries[i]))
        assert owner is not None and len(ustart) > len(subjects) + 5  # pieces were made
        got = scores(prep, codes(q, i), len(subjects))
        want = [forward_end(codes(q, i), codes(d, k), s.matrix, 11, 11)[0] for k in range(5)]
        np.testing.assert_array_equal(got, want, err_msg=f"query {i}")
    assert scores(prep, codes(q, 0), 5)[0] == 33000


def test_environment_forces_strips_and_pieces(monkeypatch, short_pieces):
    monkeypatch.setenv("SWGPU_CPU_STRIP_ROWS", "3")
    monkeypatch.setenv("SWGPU_CPU_PIECE_COLS", "5")
    assert huge.huge_limits() == (3, 5)
    rng = np.random.default_rng(9)
    s = scheme(3, 5)
    queries = ["".join(rng.choice(list(LETTERS), n)) for n in (4, 11)]
    subjects = ["".join(rng.choice(list(LETTERS), n)) for n in (30, 200, 7)]
    q, d = encode(s, queries, "q"), encode(s, subjects)
    prep = cpu._Prepared(d, s.matrix, 3, 5)
    assert (prep.strip_rows, prep.piece_cols) == (3, 5)
    assert prep._layout(4)[2] is not None
    got = cpu.score_all(q, d, s.matrix, 3, 5)
    want = [[sw_score(codes(q, i), codes(d, k), s.matrix, 3, 5) for k in range(3)] for i in (0, 1)]
    np.testing.assert_array_equal(got, want)
    monkeypatch.delenv("SWGPU_CPU_STRIP_ROWS")
    monkeypatch.delenv("SWGPU_CPU_PIECE_COLS")
    assert huge.huge_limits() == (huge.STRIP_ROWS, huge.PIECE_COLS)


@settings(max_examples=300, deadline=None)
@given(length=st.integers(1, 300), overlap=st.integers(1, 40), extra=st.integers(1, 40))
def test_split_pieces_hold_every_short_stretch(length, overlap, extra):
    piece = overlap + extra
    starts, ends = huge.split_pieces(length, piece, overlap)
    assert starts[0] == 0 and ends[-1] == length
    assert np.all(ends - starts <= piece)
    if len(starts) > 1:
        assert np.all(starts[1:] < ends[:-1])  # consecutive pieces overlap
        assert ends[-2] < length  # no piece is redundant
    for a in range(length):
        b = min(length, a + overlap)
        assert np.any((starts <= a) & (ends >= b)), (a, b)


@settings(max_examples=150, deadline=None)
@given(
    query=st.text(alphabet=LETTERS, min_size=1, max_size=25),
    subject=st.text(alphabet=LETTERS, min_size=1, max_size=120),
    gap=st.tuples(st.integers(0, 12), st.integers(1, 6)),
    name=st.sampled_from(["BLOSUM62", "PAM30", "BLOSUM45"]),
)
def test_positive_alignments_span_less_than_the_piece_overlap(query, subject, gap, name):
    """The bound the pieces rely on, against the traceback's best alignment (whose
    subject span it must exceed), with subjects made to align with long gaps."""
    s = scheme(*gap, name)
    q = codes(encode(s, [query]), 0)
    for text in (subject, query[: len(query) // 2] + subject + query[len(query) // 2 :]):
        t = codes(encode(s, [text]), 0)
        aln = align(q, t, s.matrix, *gap)
        if aln.score > 0:
            bound = huge.piece_overlap(len(q), int(s.matrix.max()), gap[1])
            assert aln.subject_end - aln.subject_start < bound


def test_piece_overlap_edge_cases():
    assert huge.piece_overlap(10, 0, 1) == 1  # no positive score: any pieces
    assert huge.piece_overlap(10, 5, 0) is None  # free gap extension: no bound
    assert huge.piece_overlap(10, 11, 1) == 10 + 110
    assert huge.piece_overlap(3, 5, 2) == 3 + 8


def test_renumber_is_unique_inverse():
    rng = np.random.default_rng(2)
    q = rng.integers(0, 24, 5000).astype(np.uint8)
    q[q == 7] = 3
    letters, qc = huge.renumber(q, block=333)
    want_letters, want = np.unique(q, return_inverse=True)
    np.testing.assert_array_equal(letters, want_letters)
    np.testing.assert_array_equal(qc, want)
    assert qc.dtype == np.uint8


def test_progress_inside_one_query(caplog):
    """A long pass reports its cells as it goes; the last report has them all."""
    rng = np.random.default_rng(4)
    s = scheme(11, 1)
    subjects = ["".join(rng.choice(list(LETTERS), n)) for n in rng.integers(50, 400, 70)]
    d = encode(s, subjects)
    q = codes(encode(s, ["".join(rng.choice(list(LETTERS), 20000))]), 0)
    prep = cpu._Prepared(d, s.matrix, 11, 1, strip_rows=1000)
    prep.poll_every = 0.001
    seen = []
    row = np.zeros(len(subjects), np.int32)
    prep.score_query(q, row, np.zeros(len(subjects), np.uint8), lambda *a: seen.append(a))
    assert {a[0] for a in seen} <= {"int8", "int16"}
    done = [a[1] for a in seen if a[0] == "int8"]  # polled while running, then the last
    assert done == sorted(done) and done[0] >= 0
    longest = sorted((len(x) for x in subjects), reverse=True)[::32]  # of each group of 32
    total = len(q) * sum((n + 3) // 4 * 4 for n in longest)  # rows x group columns
    # every cell counted, and the query's rows cut for the threads (3 groups): overlaps
    assert done[-1] == seen[0][2] > total
    want = [forward_end(q, codes(d, k), s.matrix, 11, 1)[0] for k in range(len(subjects))]
    np.testing.assert_array_equal(row, want)
    report = huge.QueryReport(0, 1, len(q))
    report.every_s = 0.0
    with caplog.at_level(logging.INFO, logger="swgpu"):
        report("int8", 10, 40.0)
    assert "query 1/1 (20,000 residues): 25.0% of its int8 lane pass" in caplog.text


def test_run_chunks_polls_and_raises():
    calls = []

    def chunk(c, n, out):
        if c == 3:
            raise ValueError("chunk 3")
        out[c] = 1

    out = np.zeros(5)
    with pytest.raises(ValueError, match="chunk 3"):
        run_chunks(chunk, 5, 1, out, poll=lambda: calls.append(1), every=0.001)
    out[:] = 0

    def slow(c, n, o):
        time.sleep(0.05)
        o[c] = 1

    calls.clear()
    run_chunks(slow, 5, 2, out, poll=lambda: calls.append(out.sum()), every=0.01)
    assert out.sum() == 5 and len(calls) >= 3 and calls == sorted(calls)


@pytest.mark.parametrize("nthreads", [1, 3])
def test_run_chunks_gives_each_thread_its_own_scratch(nthreads):
    """``scratch`` is made once per thread of the call and passed to that thread's
    chunks only: a chunk finds its thread's buffer as the previous chunk of that
    thread left it.  private_buffer: new zeroed, writable memory."""
    made = []
    lock = threading.Lock()

    def scratch():
        buf = private_buffer(64)
        with lock:
            made.append(buf)
        return buf

    seen = {}

    def chunk(c, n, out, buf):
        time.sleep(0.01)
        with lock:
            seen[c] = (threading.get_ident(), id(buf), int(buf[0]))
        buf[0] += 1  # the chunks of one thread count up in its buffer
        out[c] = 1

    out = np.zeros(12)
    run_chunks(chunk, 12, nthreads, out, scratch=scratch)
    assert out.sum() == 12
    assert 1 <= len(made) <= nthreads
    assert all(b.dtype == np.int32 and b.shape == (16,) and b.flags.writeable for b in made)
    by_thread = {}
    for c in sorted(seen):
        tid, buf, count = seen[c]
        by_thread.setdefault(tid, []).append((buf, count))
    assert len({buf for _, buf, _ in seen.values()}) == len(by_thread) == len(made)
    for items in by_thread.values():
        assert len({buf for buf, _ in items}) == 1  # one buffer per thread
        assert [count for _, count in items] == list(range(len(items)))
    assert sum(int(b[0]) for b in made) == 12
    assert not private_buffer(1 << 20).any()


@pytest.mark.parametrize("strip", [1, 3, 7, 16])
def test_gaps_cross_strips_and_pieces(strip, short_pieces):
    """Alignments whose long gaps cross strip boundaries (a gap in the subject with a
    gap opening cost: F carried from strip to strip) and pieces' edges at every
    offset (a gap in the query spanning nearly the pieces' overlap, which must
    hold it)."""
    rng = np.random.default_rng(11)
    rand = lambda n: "".join(rng.choice(list(LETTERS[:17]), n))  # noqa: E731 (no W)
    subjects = ["W" * 40, "W" * 20 + rand(5) + "W" * 20]
    offsets = list(range(0, 700, 37)) + list(range(240, 262))  # all around 256
    subjects += [rand(p) + "W" * 20 + rand(219) + "W" * 20 + rand(100) for p in offsets]
    cases = (("W" * 20 + rand(30) + "W" * 20, 5, 0, 440 - 35), ("W" * 40, 0, 2, 440 - 219))
    for query, gap_open, k, best in cases:
        s = scheme(gap_open, 1)
        q, d = codes(encode(s, [query], "q"), 0), encode(s, subjects)
        prep = cpu._Prepared(d, s.matrix, gap_open, 1, strip_rows=strip, piece_cols=16)
        got = scores(prep, q, len(subjects))
        want = [forward_end(q, codes(d, j), s.matrix, gap_open, 1)[0] for j in range(len(d))]
        np.testing.assert_array_equal(got, want, err_msg=query)
        assert got[k] == best


@pytest.mark.parametrize("gap", [(40000, 1), (5, 0), (0, 3)])
@pytest.mark.parametrize("shuffle", [True, False])
def test_strips_and_pieces_other_lane_types_and_profiles(gap, shuffle, short_pieces):
    """int32 lanes (extreme gap costs), no piece bound (gap_extend 0), and the
    column profile of CPUs without AVX2, on strips and pieces."""
    rng = np.random.default_rng(13)
    s = scheme(*gap)
    queries = ["".join(rng.choice(list(LETTERS), n)) for n in (9, 33)] + ["W" * 25]
    subjects = ["".join(rng.choice(list(LETTERS), n)) for n in (300, 41, 1, 120)]
    subjects.append(subjects[0][:100] + "W" * 30 + subjects[0][100:])
    q, d = encode(s, queries, "q"), encode(s, subjects)
    prep = cpu._Prepared(d, s.matrix, *gap, strip_rows=4, piece_cols=8)
    prep.use_shuffle = prep.use_shuffle and shuffle
    for i in range(len(queries)):
        got = scores(prep, codes(q, i), len(subjects))
        want = [sw_score(codes(q, i), codes(d, k), s.matrix, *gap) for k in range(len(d))]
        np.testing.assert_array_equal(got, want, err_msg=f"query {i}")
    assert (prep._layout(9)[2] is None) == (gap[1] == 0)


def test_query_rows_cut_for_threads(short_pieces):
    """A long query against too few groups for the threads: its rows are cut into
    overlapping items (row_items), which must hold every alignment: a gap in the
    query nearly as long as the overlap allows, at every offset around the
    items' edges, and the lane ladder on items."""
    rng = np.random.default_rng(17)
    rand = lambda n: "".join(rng.choice(list(LETTERS[:17]), n))  # noqa: E731 (no W)
    s = scheme(0, 1)
    subjects = ["W" * 40, rand(12), "W" * 20 + rand(3) + "W" * 20, rand(33)]
    d = encode(s, subjects)
    prep = cpu._Prepared(d, s.matrix, 0, 1, strip_rows=5, piece_cols=16)
    prep.split_threads = 64
    for p in list(range(0, 1000, 29)) + list(range(470, 500)) + list(range(950, 970)):
        query = rand(p) + "W" * 20 + rand(219) + "W" * 20 + rand(1600)
        q = codes(encode(s, [query], "q"), 0)
        items = huge.row_items(np.array([40]), len(q), 11, 1, 64, 5)
        assert len(items) > 1
        got = scores(prep, q, len(subjects))
        want = [forward_end(q, codes(d, j), s.matrix, 0, 1)[0] for j in range(len(d))]
        np.testing.assert_array_equal(got, want, err_msg=f"offset {p}")
        assert got[0] == 440 - 219
    # int8 -> int16 -> int32 on items: W runs of 3000 (33,000) and 20 (220)
    s = scheme(11, 11)
    subjects = ["W" * 3000, rand(50) + "W" * 20, rand(7)]
    d = encode(s, subjects)
    prep = cpu._Prepared(d, s.matrix, 11, 11, strip_rows=300, piece_cols=1 << 20)
    prep.split_threads = 64
    q = codes(encode(s, [rand(5000) + "W" * 3200 + rand(9000)], "q"), 0)
    got = scores(prep, q, len(subjects))
    want = [forward_end(q, codes(d, j), s.matrix, 11, 11)[0] for j in range(len(d))]
    np.testing.assert_array_equal(got, want)
    assert got[0] == 33000


@settings(max_examples=200, deadline=None)
@given(
    gncols=st.lists(st.integers(4, 200), min_size=1, max_size=6),
    m=st.integers(1, 5000),
    threads=st.integers(1, 64),
    min_rows=st.integers(1, 300),
    ext=st.integers(0, 5),
)
def test_row_items_cover_every_row_stretch(gncols, m, threads, min_rows, ext):
    items = huge.row_items(np.array(gncols), m, 11, ext, threads, min_rows)
    for g, n in enumerate(gncols):
        mine = items[items[:, 0] == g]
        assert mine[0, 1] == 0 and mine[-1, 2] == m
        if len(mine) > 1:
            ov = huge.piece_overlap(n, 11, ext)
            assert np.all(mine[1:, 1] + ov <= mine[:-1, 2])  # consecutive items share ov rows
            assert np.all(mine[:-1, 2] - mine[:-1, 1] >= min_rows)
