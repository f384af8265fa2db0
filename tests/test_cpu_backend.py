"""CpuBackend: the typed contract of swgpu_tools.kernels (search and pair passes)."""

from __future__ import annotations

import numpy as np
import pytest
from reference import sw_score

from swgpu_tools.alignment import align_many
from swgpu_tools.kernels import PairBackend, SearchBackend, top_k_from_scores
from swgpu_tools.kernels.cpu import CpuBackend
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

LETTERS = "ARNDCQEGHILKMFPSTWYV"


def encoded(s, texts, prefix):
    return s.encode(SequenceSet.from_pairs([(f"{prefix}{i}", t) for i, t in enumerate(texts)]))


def test_cpu_backend_protocols_search_and_pair_regions():
    s = ScoringScheme("BLOSUM62", 10, 1)
    rng = np.random.default_rng(12)
    qt = ["".join(rng.choice(list(LETTERS), n)) for n in (30, 70)]
    st = ["".join(rng.choice(list(LETTERS), n)) for n in rng.integers(5, 90, 25)]
    st += [qt[0][3:] + "WW", qt[1][::2] + qt[1]]
    q, d = encoded(s, qt, "q"), encoded(s, st, "s")
    backend = CpuBackend(threads=2)
    assert backend.name == "cpu"
    assert isinstance(backend, SearchBackend) and isinstance(backend, PairBackend)
    hits = backend.search(q, d, s, top_k=7)
    pieces = lambda e: [e.codes[e.offsets[i] : e.offsets[i + 1]] for i in range(len(e))]  # noqa: E731
    want = np.array([[sw_score(a, b, s.matrix, 10, 1) for b in pieces(d)] for a in pieces(q)])
    expected = top_k_from_scores(want, 7)
    np.testing.assert_array_equal(hits.subject_index, expected.subject_index)
    np.testing.assert_array_equal(hits.score, expected.score)
    qi = np.repeat(np.arange(2), len(st))
    si = np.tile(np.arange(len(st)), 2)
    for mode in ("local", "semiglobal"):
        regions = backend.pair_regions(q, d, qi, si, s, mode)
        assert regions.shape == (len(qi), 5) and regions.dtype == np.int64
        alns = align_many(q, d, qi, si, s, threads=2, mode=mode, backend="cpu")
        got = [(a.score, a.query_start, a.query_end, a.subject_start, a.subject_end) for a in alns]
        assert [tuple(r) for r in regions.tolist()] == got
        if mode == "local":
            assert list(regions[:, 0]) == [int(want[a, b]) for a, b in zip(qi, si)]
    with pytest.raises(ValueError):
        backend.pair_regions(q, d, qi, si, s, "global")


def test_scheme_and_raw_forms_agree():
    s = ScoringScheme("PAM30", 9, 2)
    rng = np.random.default_rng(3)
    q = encoded(s, ["".join(rng.choice(list(LETTERS), 40))], "q")
    d = encoded(s, ["".join(rng.choice(list(LETTERS), n)) for n in (20, 50, 45)], "s")
    qi, si = np.zeros(3, np.int64), np.arange(3)
    assert align_many(q, d, qi, si, s, threads=1) == align_many(
        q, d, qi, si, s.matrix, 9, 2, threads=1
    )
    with pytest.raises(ValueError, match="gap_open"):
        align_many(q, d, qi, si, s, 11, 2)
    with pytest.raises(ValueError, match="square"):
        align_many(q, d, qi, si, s.matrix[:3], 9, 2)
