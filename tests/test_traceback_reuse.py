"""The traceback's reuse of stored alignments: which stored row each hit takes
(:func:`swgpu_tools.engine.traceback._reuse_rows`) is what the pandas join it
replaced gave, with duplicate keys, ties and keys found on one side only."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swgpu_tools.engine.traceback import _reuse_rows


def _reuse_rows_by_join(hits, scores, qhash, shash, previous):
    """The former implementation (a pandas inner join on the five keys), the reference."""
    keys = ["qacc", "sacc", "score", "qhash", "shash"]
    cur = pd.DataFrame(
        {
            "qacc": hits["qacc"].to_numpy(),
            "sacc": hits["sacc"].to_numpy(),
            "score": scores,
            "qhash": qhash,
            "shash": shash,
            "_k": np.arange(len(scores)),
        }
    )
    prev = previous[keys].copy()
    prev["score"] = prev["score"].astype(np.int64)
    prev["_i"] = np.arange(len(prev))
    both = cur.merge(prev.drop_duplicates(keys, keep="last"), on=keys, how="inner")
    return both["_k"].to_numpy(np.int64).tolist(), both["_i"].to_numpy(np.int64)


# few values per column: many rows share keys, some keys only on one side
TEXT = st.sampled_from(["a", "b", "NA", "", "nan", "a\u00e9", "0"])
HASH = st.sampled_from(["0123456789abcdef", "fedcba9876543210", "0000000000000000", "x"])


@st.composite
def tables(draw):
    def rows(n):
        return [
            (draw(TEXT), draw(TEXT), draw(st.integers(-3, 3)), draw(HASH), draw(HASH))
            for _ in range(n)
        ]

    prev_rows = rows(draw(st.integers(1, 25)))
    hit_rows = rows(draw(st.integers(1, 25)))
    # some hits copy stored rows (and some stored rows are repeated: the last one counts)
    for _ in range(draw(st.integers(0, 10))):
        hit_rows.insert(
            draw(st.integers(0, len(hit_rows))), prev_rows[draw(st.integers(0, len(prev_rows) - 1))]
        )
    for _ in range(draw(st.integers(0, 5))):
        prev_rows.append(prev_rows[draw(st.integers(0, len(prev_rows) - 1))])
    big = draw(st.booleans())  # scores over a range wider than the rows: coded apart
    return prev_rows, hit_rows, big


def _frames(prev_rows, hit_rows, big):
    shift = 10**12 if big else 0
    q, s, sc, qh, sh = (list(c) for c in zip(*prev_rows))
    previous = pd.DataFrame(
        {
            "qacc": pd.array(q, dtype=str),
            "sacc": pd.array(s, dtype=str),
            "score": np.asarray(sc, np.int64) * (1 + shift),
            "qhash": pd.array(qh, dtype=str),
            "shash": pd.array(sh, dtype=str),
            "cigar": pd.array(["1="] * len(q), dtype=str),
        }
    )
    hq, hs, hsc, hqh, hsh = (list(c) for c in zip(*hit_rows))
    hits = pd.DataFrame({"qacc": pd.array(hq, dtype=str), "sacc": pd.array(hs, dtype=str)})
    scores = np.asarray(hsc, np.int64) * (1 + shift)
    return hits, scores, hqh, hsh, previous


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=tables())
def test_reuse_rows_match_the_join_they_replaced(case):
    hits, scores, qh, sh, previous = _frames(*case)
    want_k, want_i = _reuse_rows_by_join(hits, scores, qh, sh, previous)
    got_k, got_i = _reuse_rows(hits, scores, qh, sh, previous)
    assert got_k == want_k  # hit rows ascending, as the join gives them
    assert got_i.tolist() == want_i.tolist()
    assert got_k == sorted(got_k)


def test_reuse_rows_take_the_last_of_repeated_stored_rows_and_skip_missing_keys():
    row = ("q", "s", 5, "0123456789abcdef", "fedcba9876543210")
    other = ("q", "s", 6, "0123456789abcdef", "fedcba9876543210")
    missing = ("q", "t", 5, "0123456789abcdef", "fedcba9876543210")
    hits, scores, qh, sh, previous = _frames([row, other, row], [other, row, row, missing], False)
    ks, rows = _reuse_rows(hits, scores, qh, sh, previous)
    assert ks == [0, 1, 2] and rows.tolist() == [1, 2, 2]


def test_after_align_hooks_run_before_small_alignments_and_after_large(monkeypatch):
    """The hooks of ``after_align`` (run-steps: the early pictures' gate) run before the
    alignments where the hits left to align hold fewer than SMALL_ALIGN_CELLS cells
    (nothing worth keeping the CPUs free for), after them otherwise."""
    import swgpu_tools.alignment as alignment
    from swgpu_tools.engine import traceback as tb
    from swgpu_tools.kernels import cpu
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    scheme = ScoringScheme()
    queries = SequenceSet.from_pairs([("q1", "MKVLAAGIVGLLLAWQPSAHA"), ("q2", "WWHHKKRRDDEE")])
    subjects = SequenceSet.from_pairs([("s1", "MKVLAAGIVGALLAWQPSAHA"), ("s2", "WWHHKRRDDEE")])
    sc = cpu.score_all(
        scheme.encode(queries), scheme.encode(subjects), scheme.matrix, scheme.gap_open,
        scheme.gap_extend,
    )  # fmt: skip
    hits = pd.DataFrame(
        {
            "qacc": ["q1", "q2"], "sacc": ["s1", "s2"], "score": [sc[0, 0], sc[1, 1]],
            "qseqid": ["q1", "q2"], "sseqid": ["s1", "s2"], "stitle": ["", ""],
            "evalue": [1e-5, 1e-3], "bitscore": [40.0, 30.0],
        }
    )  # fmt: skip
    events = []
    real = alignment.align_many

    def align_many(*args, **kw):
        events.append("align")
        return real(*args, **kw)

    monkeypatch.setattr(alignment, "align_many", align_many)
    monkeypatch.setattr(tb, "after_align", [lambda: events.append("hook")])
    tb.traceback_columns(hits, queries, subjects, scheme, threads=1)
    assert events == ["hook", "align"]
    events.clear()
    monkeypatch.setattr(tb, "SMALL_ALIGN_CELLS", 0)
    tb.traceback_columns(hits, queries, subjects, scheme, threads=1)
    assert events == ["align", "hook"]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 6))
def test_aligning_a_few_hits_encodes_only_their_sequences_and_gives_the_same_table(seed, n_hits):
    """Where the hits to align use fewer than half of the subjects (a re-scan's new hits
    among many reused ones), only their sequences are encoded (``_only_used``): every
    column equals the table made with all of them encoded."""
    from swgpu_tools.engine import traceback as tb
    from swgpu_tools.kernels import cpu
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.sequences import SequenceSet

    rng = np.random.default_rng(seed)
    letters = np.array(list("ACDEFGHIKLMNPQRSTVWY"))
    scheme = ScoringScheme()

    def seqs(prefix, n):
        return SequenceSet.from_pairs(
            [
                (f"{prefix}{i}", "".join(rng.choice(letters, int(rng.integers(5, 60)))))
                for i in range(n)
            ]
        )

    queries, subjects = seqs("q", 4), seqs("s", 30)
    sc = cpu.score_all(
        scheme.encode(queries), scheme.encode(subjects), scheme.matrix, scheme.gap_open,
        scheme.gap_extend,
    )  # fmt: skip
    qi = rng.integers(0, 4, n_hits)
    si = rng.choice(30, n_hits, replace=False)
    hits = pd.DataFrame(
        {
            "qacc": [f"q{i}" for i in qi], "sacc": [f"s{j}" for j in si],
            "score": [int(sc[i, j]) for i, j in zip(qi, si)],
            "qseqid": [f"q{i}" for i in qi], "sseqid": [f"s{j}" for j in si],
            "stitle": ["t"] * n_hits, "evalue": [1e-3] * n_hits, "bitscore": [30.0] * n_hits,
        }
    )  # fmt: skip
    got = tb.traceback_columns(hits, queries, subjects, scheme, threads=1)
    original = tb._only_used
    try:
        tb._only_used = lambda s, index: (s, index)  # every sequence encoded
        want = tb.traceback_columns(hits, queries, subjects, scheme, threads=1)
    finally:
        tb._only_used = original
    assert set(got) == set(want)
    for name in want:
        assert list(np.asarray(got[name])) == list(np.asarray(want[name])), name
    assert len(np.unique(si)) * 2 < len(subjects)  # (the branch under test)
