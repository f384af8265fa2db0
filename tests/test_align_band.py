"""Database hits aligned on bands (align.band): the very alignments of the scalar passes.

The band code computes only the cells near the optimal paths of a database
hit; these tests compare every alignment with the scalar reference path of
:func:`swgpu_tools.alignment.align` (forward pass, reverse pass and traceback over
whole matrices), and re-score it independently.
"""

from __future__ import annotations

import numpy as np
import pytest
from reference import alignment_score

from swgpu_tools.alignment import align, align_many, hits
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import EncodedSequences

SCHEMES = [
    ScoringScheme("BLOSUM62", 11, 1),
    ScoringScheme("PAM30", 0, 3),
    ScoringScheme("BLOSUM45", 5, 0),
    ScoringScheme(match=2, mismatch=-3, gap_open=5, gap_extend=2),
]


def mutate(rng, a, identity, alphabet):
    b = a.copy()
    b[rng.random(len(b)) > identity] = rng.integers(0, alphabet)
    parts, last = [], 0
    for c in np.sort(rng.integers(0, len(b) + 1, rng.poisson(0.02 * len(b) + 0.5))):
        parts.append(b[last:c])
        if rng.random() < 0.5:
            parts.append(rng.integers(0, alphabet, int(rng.integers(1, 6))))
            last = c
        else:
            last = min(len(b), c + int(rng.integers(1, 6)))
    parts.append(b[last:])
    pre = rng.integers(0, alphabet, int(rng.integers(0, 30)))
    post = rng.integers(0, alphabet, int(rng.integers(0, 30)))
    return np.concatenate([pre] + parts + [post]).astype(np.uint8)


def make_hits(rng, nq, per_query, alphabet, max_len):
    queries = [
        rng.integers(0, alphabet, int(rng.integers(5, max_len))).astype(np.uint8) for _ in range(nq)
    ]
    subjects, qi = [], []
    for k, q in enumerate(queries):
        for t in range(per_query):
            if t % 3 == 0:  # unrelated
                s = rng.integers(0, alphabet, int(rng.integers(1, max_len))).astype(np.uint8)
            else:  # homologs from 30% to 100% identity
                s = mutate(rng, q, 0.3 + 0.7 * rng.random(), alphabet)
            subjects.append(s if len(s) else q[:1].copy())
            qi.append(k)
    return queries, subjects, np.array(qi), np.arange(len(subjects))


def pack(parts):
    off = np.r_[0, np.cumsum([len(p) for p in parts])].astype(np.int64)
    return EncodedSequences(np.concatenate(parts).astype(np.uint8), off)


def check(alns, queries, subjects, qi, s):
    for k, aln in enumerate(alns):
        q, d = queries[qi[k]], subjects[k]
        want = align(q, d, s, mode="local")
        assert aln == want, (k, aln, want)
        if aln.score:
            assert (
                alignment_score(
                    q,
                    d,
                    aln.query_start,
                    aln.subject_start,
                    aln.operations,
                    s.matrix,
                    s.gap_open,
                    s.gap_extend,
                )
                == aln.score
            )


@pytest.mark.parametrize("scheme", range(len(SCHEMES)))
def test_band_equals_scalar_passes(monkeypatch, scheme):
    s = SCHEMES[scheme]
    alphabet = 4 if s.match is not None else 20
    rng = np.random.default_rng(100 + scheme)
    queries, subjects, qi, si = make_hits(rng, 4, 12, alphabet, 260)
    q, d = pack(queries), pack(subjects)
    monkeypatch.setattr(hits, "BAND_MIN_SCORE", 1)  # every hit on the band
    stats = {}
    alns = align_many(q, d, qi, si, s, threads=2, backend="cpu", stats=stats)
    assert stats["band_fallbacks"] == 0
    check(alns, queries, subjects, qi, s)
    # the usual split (strong hits on bands, weak ones in whole regions) agrees too
    monkeypatch.setattr(hits, "BAND_MIN_SCORE", 60)
    assert align_many(q, d, qi, si, s, threads=1, backend="cpu") == alns


def test_band_fallbacks_give_the_same_alignments(monkeypatch):
    """A cell limit too small for the bands sends the hits to the scalar passes."""
    s = SCHEMES[0]
    rng = np.random.default_rng(7)
    queries, subjects, qi, si = make_hits(rng, 2, 8, 20, 300)
    q, d = pack(queries), pack(subjects)
    monkeypatch.setattr(hits, "BAND_MIN_SCORE", 1)
    stats = {}
    small = align_many(q, d, qi, si, s, threads=1, backend="cpu", cell_limit=50, stats=stats)
    assert stats["band_fallbacks"] > 0
    check(small, queries, subjects, qi, s)


def test_band_with_int32_lanes():
    """Hits scoring above the int16 lanes' range (forward pass in int32 lanes) on bands."""
    s = SCHEMES[0]
    rng = np.random.default_rng(9)
    base = rng.integers(0, 20, 4200).astype(np.uint8)
    base[:3000] = 17  # W: 11 a residue, a self-score far above 32767
    queries = [base]
    subjects = [
        base.copy(),
        mutate(rng, base, 0.97, 20),
        base[2000:],
        base[::-1].copy(),
        mutate(rng, base[:2500], 0.8, 20),
    ]
    qi = np.zeros(len(subjects), dtype=np.int64)
    alns = align_many(
        pack(queries), pack(subjects), qi, np.arange(len(subjects)), s, threads=2, backend="cpu"
    )
    assert alns[0].score > 32767
    check(alns, queries, subjects, qi, s)
