"""Alignment modes (local, global, semi-global), nucleotide scoring, batched pairs,
bounded-memory traceback and the ``swgpu align`` command.

Scores are compared exactly with Biopython's PairwiseAligner; alignments are
compared by re-scoring (another optimal alignment is equally valid).
Biopython's gap scores: a gap of k residues scores open + (k - 1) * extend, so
BLAST's (gap_open, gap_extend) is open_gap_score = -(gap_open + gap_extend),
extend_gap_score = -gap_extend.  Our query is Biopython's query, our subject
its target (``aligner.score(subject, query)``); semi-global is a global aligner
with free end deletions (subject residues hanging over the query's ends).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from Bio.Align import PairwiseAligner, substitution_matrices
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import alignment_score

from swgpu_tools.alignment import Alignment, align, align_many, align_pairs
from swgpu_tools.alignment.pair_lanes import pair_matrix
from swgpu_tools.alignment.traceback import checkpoint_plan
from swgpu_tools.cli import main
from swgpu_tools.errors import InputError
from swgpu_tools.io.fields import alignment_fields
from swgpu_tools.scoring import ScoringScheme

PROTEIN = "ARNDCQEGHILKMFPSTWYVBZX"
DNA = "ACGT"
IUPAC = "ACGTACGTACGTNRYSWKMBDHV"
_SCHEMES: dict = {}
_ALIGNERS: dict = {}


def scheme(*args, **kw):
    key = (args, tuple(sorted(kw.items())))
    if key not in _SCHEMES:
        _SCHEMES[key] = ScoringScheme(*args, **kw)
    return _SCHEMES[key]


def codes(s, text):
    return s.codes_of_letters[np.frombuffer(text.encode(), dtype=np.uint8)].astype(np.uint8)


def biopython(s: ScoringScheme, mode: str) -> PairwiseAligner:
    key = (s.matrix_name, s.gap_open, s.gap_extend, mode)
    if key in _ALIGNERS:
        return _ALIGNERS[key]
    a = PairwiseAligner()
    a.mode = "local" if mode == "local" else "global"
    if s.match is not None:
        a.match_score = s.match
        a.mismatch_score = s.mismatch
    else:
        a.substitution_matrix = substitution_matrices.load(s.matrix_name)
    a.open_gap_score = -(s.gap_open + s.gap_extend)
    a.extend_gap_score = -s.gap_extend
    if mode == "semiglobal":
        with warnings.catch_warnings():  # older Biopython: query_end_gap_score
            warnings.simplefilter("ignore")
            a.end_deletion_score = 0  # deletions = target (subject) residues vs gaps
    _ALIGNERS[key] = a
    return a


def cigar_score(qseq, sseq, qstart, sstart, cigar, s: ScoringScheme) -> int:
    """Re-score a CIGAR (=, X, I, D) from 1-based starts; checks = and X."""
    i, j = qstart - 1, sstart - 1
    score = 0
    for n, op in re.findall(r"(\d+)([=XID])", cigar):
        n = int(n)
        if op in "=X":
            for _ in range(n):
                assert (qseq[i] == sseq[j]) == (op == "="), (cigar, i, j)
                score += s.score_pair(qseq[i], sseq[j])
                i += 1
                j += 1
        else:
            score -= s.gap_open + n * s.gap_extend
            if op == "I":
                i += n
            else:
                j += n
    return score


def check(aln: Alignment, qt: str, st_: str, s: ScoringScheme, mode: str, want: int):
    """Score equals Biopython's; the alignment is well formed and re-scores to it."""
    q, d = codes(s, qt), codes(s, st_)
    assert aln.score == want, (mode, qt, st_, aln)
    ops = aln.operations
    assert ops.count(b"M") + ops.count(b"I") == aln.query_end - aln.query_start
    assert ops.count(b"M") + ops.count(b"D") == aln.subject_end - aln.subject_start
    assert (
        alignment_score(
            q, d, aln.query_start, aln.subject_start, ops, s.matrix, s.gap_open, s.gap_extend
        )
        == want
    )
    if mode == "global":
        assert (aln.query_start, aln.query_end, aln.subject_start, aln.subject_end) == (
            0,
            len(qt),
            0,
            len(st_),
        )
    elif mode == "semiglobal":
        assert (aln.query_start, aln.query_end) == (0, len(qt))
        assert ops[:1] != b"D" and ops[-1:] != b"D"
    elif want > 0:
        assert ops[:1] == b"M" and ops[-1:] == b"M"
    cols = _fields(qt, st_, aln, s)
    if ops:
        assert cigar_score(qt, st_, cols["qstart"], cols["sstart"], cols["cigar"], s) == want


def _fields(query: str, subject: str, aln, s) -> dict:
    from swgpu_tools.sequences import SequenceSet

    f = alignment_fields(
        SequenceSet.from_sequences(["q"], [query]),
        SequenceSet.from_sequences(["s"], [subject]),
        [0],
        [0],
        [aln],
        s,
    )
    return {k: (v[0].item() if isinstance(v, np.ndarray) else v[0]) for k, v in f.items()}


MODES = st.sampled_from(("local", "global", "semiglobal"))


def related(letters, max_size=50):
    seq = st.text(alphabet=letters, min_size=1, max_size=max_size)
    return st.one_of(
        st.tuples(seq, seq),
        st.builds(
            lambda a, cut, ins, pre: (a, pre + a[:cut] + ins + a[cut + len(ins) // 2 :]),
            seq,
            st.integers(0, max_size),
            st.text(alphabet=letters, max_size=6),
            st.text(alphabet=letters, max_size=10),
        ),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p=related(PROTEIN),
    mode=MODES,
    gap=st.one_of(
        st.tuples(st.integers(1, 12), st.integers(1, 3)),  # affine
        st.tuples(st.just(0), st.integers(1, 6)),
    ),  # linear
    matrix=st.sampled_from(("BLOSUM62", "PAM30")),
    cell_limit=st.sampled_from((1, 40, 200_000_000)),
)
def test_protein_vs_biopython(p, mode, gap, matrix, cell_limit):
    s = scheme(matrix, *gap)
    qt, st_ = p
    want = int(biopython(s, mode).score(st_, qt))
    aln = align(
        codes(s, qt),
        codes(s, st_),
        s.matrix,
        s.gap_open,
        s.gap_extend,
        mode=mode,
        cell_limit=cell_limit,
    )
    check(aln, qt, st_, s, mode, want)


DNA_SCHEMES = [
    dict(match=1, mismatch=-1, gap_open=0, gap_extend=2),  # linear, 2 per residue
    dict(match=2, mismatch=-3, gap_open=5, gap_extend=2),  # BLASTN
    dict(match=5, mismatch=-4, gap_open=10, gap_extend=1),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=related(DNA, 60), mode=MODES, k=st.integers(0, len(DNA_SCHEMES) - 1))
def test_dna_match_mismatch_vs_biopython(p, mode, k):
    s = scheme(**DNA_SCHEMES[k])
    qt, st_ = p
    want = int(biopython(s, mode).score(st_, qt))
    aln = align(codes(s, qt), codes(s, st_), s.matrix, s.gap_open, s.gap_extend, mode=mode)
    check(aln, qt, st_, s, mode, want)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    p=related(IUPAC, 40),
    mode=MODES,
    gap=st.sampled_from(((5, 2), (0, 3), (10, 1))),
    matrix=st.sampled_from(("NUC.4.4", "BLASTN")),
)
def test_dna_matrices_with_ambiguity_codes(p, mode, gap, matrix):
    s = scheme(matrix, *gap)
    qt, st_ = p
    want = int(biopython(s, mode).score(st_, qt))
    aln = align(codes(s, qt), codes(s, st_), s.matrix, s.gap_open, s.gap_extend, mode=mode)
    check(aln, qt, st_, s, mode, want)


def test_match_mismatch_scheme():
    s = ScoringScheme(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    assert (s.score_pair("A", "A"), s.score_pair("A", "C"), s.score_pair("N", "N")) == (2, -3, 2)
    assert s.matrix_name == "match=2,mismatch=-3"
    w = ScoringScheme(match=1, mismatch=-1, wildcard="n", gap_open=0, gap_extend=2)
    assert (w.score_pair("N", "A"), w.score_pair("N", "N"), w.score_pair("G", "G")) == (0, 0, 1)
    # the wildcard as Biopython's
    a = PairwiseAligner(
        match_score=1,
        mismatch_score=-1,
        open_gap_score=-2,
        extend_gap_score=-2,
        wildcard="N",
        mode="global",
    )
    x, y = "ACGNNTTAGC", "ACGTCTNAC"
    assert align(codes(w, x), codes(w, y), w.matrix, 0, 2, mode="global").score == a.score(y, x)
    for bad in (
        dict(match=1),
        dict(match=0, mismatch=-1),
        dict(match=1.5, mismatch=-1),
        dict(match=1, mismatch=-1, wildcard="NN"),
        dict(matrix_name="BLOSUM62", wildcard="X"),
    ):
        with pytest.raises(InputError):
            ScoringScheme(**bad)


def test_tie_rules():
    s = scheme("BLOSUM62", 11, 1)
    # semi-global: the query W matches two W's; the smallest subject end wins
    aln = align(codes(s, "W"), codes(s, "AWAW"), s.matrix, 11, 1, mode="semiglobal")
    assert (aln.score, aln.subject_start, aln.subject_end, aln.operations) == (11, 1, 2, b"M")
    # global: a one-residue gap can go at either W of the subject WW: the traceback
    # from the end prefers the diagonal, so the gap comes first
    aln = align(codes(s, "W"), codes(s, "WW"), s.matrix, 11, 1, mode="global")
    assert (aln.score, aln.operations) == (11 - 12, b"DM")
    # a query letter against gaps only
    aln = align(codes(s, "W"), codes(s, "P"), s.matrix, 11, 1, mode="semiglobal")
    assert aln.score == max(s.score_pair("W", "P"), -12)


def test_empty_sequences():
    s = scheme("BLOSUM62", 11, 1)
    e = np.zeros(0, np.uint8)
    w = codes(s, "WWW")
    assert align(e, w, s.matrix, 11, 1, mode="global") == Alignment(-14, 0, 0, 0, 3, b"DDD")
    assert align(w, e, s.matrix, 11, 1, mode="global") == Alignment(-14, 0, 3, 0, 0, b"III")
    assert align(e, w, s.matrix, 11, 1, mode="semiglobal") == Alignment(0, 0, 0, 0, 0, b"")
    assert align(e, e, s.matrix, 11, 1, mode="global") == Alignment(0, 0, 0, 0, 0, b"")
    assert align(w, e, s.matrix, 11, 1, mode="local") == Alignment(0, 0, 0, 0, 0, b"")
    with pytest.raises(ValueError, match="mode"):
        align(w, w, s.matrix, 11, 1, mode="glocal")


def test_linear_memory_path_equals_full_matrix_path():
    """A small cell limit forces checkpoint levels; the alignment is the very same."""
    s = scheme("BLOSUM62", 11, 1)
    rng = np.random.default_rng(7)
    a = "".join(rng.choice(list(PROTEIN[:20]), 700))
    b = list(a[50:650])
    for k in rng.integers(0, len(b), 80):  # substitutions and indels
        b[k] = rng.choice(list(PROTEIN[:20])) if rng.random() < 0.6 else ""
    b = "MKV" + "".join(b) + a[:40]
    q, d = codes(s, a), codes(s, b)
    for limit in (20_000, 3_000, 700):
        rb, depth, K = checkpoint_plan(len(a), len(b), limit)
        assert rb * (len(b) + 1) <= max(limit, len(b) + 1) and depth >= 1
        if limit == 700:
            assert depth >= 3  # several levels of checkpoints
        for mode in ("global", "semiglobal", "local"):
            full = align(q, d, s.matrix, 11, 1, mode=mode)
            assert align(q, d, s.matrix, 11, 1, mode=mode, cell_limit=limit) == full
    assert checkpoint_plan(len(a), len(b), 200_000_000)[1] == 0  # one block


def test_align_pairs_modes_and_ends_hook():
    s = scheme("BLOSUM62", 10, 1)
    rng = np.random.default_rng(3)
    texts = ["".join(rng.choice(list(PROTEIN[:20]), n)) for n in rng.integers(1, 150, 40)]
    pairs = [(texts[i], texts[i + 1][::2] + texts[i][5:]) for i in range(len(texts) - 1)]
    enc = [(codes(s, x), codes(s, y)) for x, y in pairs]
    for mode in ("local", "global", "semiglobal"):
        got = align_pairs(enc, s.matrix, 10, 1, threads=2, mode=mode)
        for (x, y), (qc, sc), aln in zip(pairs, enc, got):
            assert aln == align(qc, sc, s.matrix, 10, 1, mode=mode)
            check(aln, x, y, s, mode, int(biopython(s, mode).score(y, x)))
        assert align_pairs(enc, s.matrix, 10, 1, threads=1, mode=mode, cell_limit=500) == got
        if mode != "global":
            # GPU hook: a forward pass done elsewhere gives best score and end cell
            ends = np.array([(a.score, a.query_end, a.subject_end) for a in got])
            assert align_pairs(enc, s.matrix, 10, 1, mode=mode, ends=ends) == got
    with pytest.raises(ValueError):
        align_pairs(enc, s.matrix, 10, 1, mode="global", ends=np.zeros((len(enc), 3)))


def test_pair_lanes_equal_scalar_passes():
    """SIMD pair lanes (8 pairs per register, padded groups) give the scalar alignments."""
    s = scheme("BLOSUM62", 11, 1)
    rng = np.random.default_rng(17)
    pairs = []
    for t in range(90):
        a = rng.integers(0, 23, int(rng.integers(1, 260))).astype(np.uint8)
        if t % 3 == 0:  # unrelated, very different lengths
            b = rng.integers(0, 23, int(rng.integers(1, 400))).astype(np.uint8)
        else:  # related: mutated, with a prefix and a cut
            b = a.copy()
            b[rng.random(len(b)) < 0.25] = rng.integers(0, 23)
            b = np.concatenate([rng.integers(0, 23, int(rng.integers(0, 12))), b[t % 7 :]])
            b = b.astype(np.uint8) if len(b) else a[:1].copy()
        pairs.append((a, b))
    # BLOSUM62 (gathered scores), match/mismatch (letters compared), with a wildcard (gathered)
    dna = scheme(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    wild = scheme(match=1, mismatch=-1, wildcard="N", gap_open=0, gap_extend=2)
    for matrix in (s.matrix, dna.matrix, wild.matrix):
        assert pair_matrix(matrix)[2] == (matrix is dna.matrix)
        dna_pairs = [(a % 5, b % 5) for a, b in pairs]  # codes of A, B, C, D, E
        for mode in ("local", "global", "semiglobal"):
            for go, ge in ((11, 1), (0, 2)):
                ps = pairs if matrix is s.matrix else dna_pairs
                scalar = align_pairs(ps, matrix, go, ge, threads=1, mode=mode, pair_lanes=False)
                lanes = align_pairs(ps, matrix, go, ge, threads=2, mode=mode, pair_lanes=True)
                assert lanes == scalar, mode
                # a small cell limit splits the lane groups and sends large regions to
                # the checkpointed scalar traceback
                assert (
                    align_pairs(ps, matrix, go, ge, threads=2, mode=mode, cell_limit=30_000)
                    == scalar
                )


# ---------------------------------------------------------------------------
# the swgpu align command
# ---------------------------------------------------------------------------
def write(path, records):
    path.write_text("".join(f">{i}\n{s}\n" for i, s in records))
    return str(path)


def read_tsv(path):
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    return header, [dict(zip(header, line.split("\t"))) for line in lines[1:]]


DNA_PAIRS = [
    ("q1", "ACGTACGTTTGACCA", "s1", "ACGTTCGTATGACA"),
    ("q2", "GGGGAAAA", "s2", "TTTGGGGAAAACC"),
    ("q1", "ACGTNRYACGT", "s3", "ACGTAGCACGTT"),  # ids may repeat; IUPAC letters
    ("q4", "TTTT", "s4", "GGGG"),
]


def test_pair_rows_match_the_aligned_rows():
    """swgpu align's identities, pident and CIGAR, recomputed from its aligned rows."""
    from swgpu_tools.pairs import pair_rows
    from swgpu_tools.sequences import SequenceSet

    s = scheme("BLOSUM62", 5, 1)
    rng = np.random.default_rng(9)
    texts = ["".join(rng.choice(list(PROTEIN), int(n))) for n in rng.integers(1, 90, 40)]
    qs = SequenceSet.from_pairs([(f"q{i}", t) for i, t in enumerate(texts)])
    ss = SequenceSet.from_pairs([(f"s{i}", t[::-1][:20] + t[3:]) for i, t in enumerate(texts)])
    q, d = s.encode(qs), s.encode(ss)
    idx = np.arange(len(texts))
    for mode in ("local", "global"):
        alns = align_many(q, d, idx, idx, s.matrix, 5, 1, mode=mode)
        for k, row in enumerate(pair_rows(qs, ss, alns, s, aligned_strings=True)):
            qaln, saln = row[13], row[14]
            assert qaln.replace("-", "") == qs.sequence(k)[alns[k].query_start : alns[k].query_end]
            assert (
                saln.replace("-", "") == ss.sequence(k)[alns[k].subject_start : alns[k].subject_end]
            )
            ident = sum(a == b for a, b in zip(qaln, saln))
            length = len(qaln)
            classes = "".join(
                "I" if b == "-" else "D" if a == "-" else "=" if a == b else "X"
                for a, b in zip(qaln, saln)
            )
            cigar = (
                "".join(
                    f"{len(m.group(0))}{m.group(0)[0]}" for m in re.finditer(r"(.)\1*", classes)
                )
                or "*"
            )
            pident = "%.3f" % (100.0 * ident / length if length else 0.0)
            assert row[9:13] == (length, ident, pident, cigar)


@pytest.mark.parametrize("mode", ["local", "global", "semiglobal"])
def test_align_command_two_files_and_interleaved(tmp_path, mode, capsys):
    qf = write(tmp_path / "q.fa", [(a, b) for a, b, _, _ in DNA_PAIRS])
    sf = write(tmp_path / "s.fa", [(c, d) for _, _, c, d in DNA_PAIRS])
    inter = write(tmp_path / "pairs.fa", [r for a, b, c, d in DNA_PAIRS for r in ((a, b), (c, d))])
    opts = [
        "--mode",
        mode,
        "--match",
        "2",
        "--mismatch",
        "-3",
        "--gap-open",
        "5",
        "--gap-extend",
        "2",
    ]
    out1, out2 = tmp_path / "o1.tsv", tmp_path / "o2.tsv"
    assert main(["align", qf, sf, "--out", str(out1), "--threads", "2"] + opts) == 0
    assert main(["align", inter, "--out", str(out2), "--aligned-strings"] + opts) == 0
    h1, rows1 = read_tsv(out1)
    h2, rows2 = read_tsv(out2)
    assert h1 == [
        "qseqid",
        "sseqid",
        "score",
        "qstart",
        "qend",
        "sstart",
        "send",
        "qlen",
        "slen",
        "length",
        "identities",
        "pident",
        "cigar",
    ]
    assert h2 == h1 + ["qaln", "saln"]
    assert len(rows1) == len(DNA_PAIRS)
    s = scheme(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    for (qid, qt, sid, st_), r1, r2 in zip(DNA_PAIRS, rows1, rows2):
        assert {k: r2[k] for k in h1} == r1
        assert (r1["qseqid"], r1["sseqid"]) == (qid, sid)
        score = int(r1["score"])
        assert score == int(biopython(s, mode).score(st_, qt))
        if r1["cigar"] != "*":
            assert (
                cigar_score(qt, st_, int(r1["qstart"]), int(r1["sstart"]), r1["cigar"], s) == score
            )
            assert r2["qaln"].replace("-", "") == qt[int(r1["qstart"]) - 1 : int(r1["qend"])]
            assert r2["saln"].replace("-", "") == st_[int(r1["sstart"]) - 1 : int(r1["send"])]
            ident = sum(a == b for a, b in zip(r2["qaln"], r2["saln"]) if a != "-")
            assert int(r1["identities"]) == ident and int(r1["length"]) == len(r2["qaln"])
        else:
            assert score == 0 and mode == "local" and r1["qstart"] == r1["send"] == "0"
        if mode == "global":
            assert (r1["qstart"], r1["qend"]) == ("1", str(len(qt)))
            assert (r1["sstart"], r1["send"]) == ("1", str(len(st_)))


def test_align_command_protein_default_matrix(tmp_path):
    inter = write(tmp_path / "p.fa", [("a", "MKVLAAGIWWHEAGK"), ("b", "MKVLGIWWHEGK")])
    out = tmp_path / "o.tsv"
    assert main(["align", inter, "--out", str(out), "--mode", "global"]) == 0
    _, rows = read_tsv(out)
    s = scheme("BLOSUM62", 11, 1)
    assert int(rows[0]["score"]) == int(
        biopython(s, "global").score("MKVLGIWWHEGK", "MKVLAAGIWWHEAGK")
    )


def test_align_command_bad_input(tmp_path, capsys):
    q = write(tmp_path / "q.fa", [("a", "ACGT"), ("b", "ACGA"), ("c", "TTT")])
    s = write(tmp_path / "s.fa", [("x", "ACGT"), ("y", "ACGT")])
    out = tmp_path / "o.tsv"
    cases = [
        (["align", q, s], "different numbers of records"),
        (["align", q], "even number of records"),
        (
            ["align", s, s, "--matrix", "BLOSUM62", "--match", "1", "--mismatch", "-1"],
            "either --matrix or --match",
        ),
        (["align", s, s, "--match", "1"], "give both"),
        (["align", s, s, "--matrix", "NOSUCH"], "unknown substitution matrix"),
        (["align", s, s, "--wildcard", "N"], "--wildcard goes with"),
        (["align", s, str(tmp_path / "missing.fa")], "file not found"),
        (["align", s, s, "--threads", "0"], "--threads"),
        (["align", s, s, "--gap-open", "-1"], "gap_open"),
    ]
    for argv, message in cases:
        assert main(argv + ["--out", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    assert not out.exists()  # nothing written on error
    bad = tmp_path / "bad.fa"
    bad.write_text(">a\nAC1GT\n>b\nACGT\n")
    assert main(["align", str(bad), "--out", str(out)]) == 2
    assert "line 2" in capsys.readouterr().err


def test_align_help_explains(capsys):
    with pytest.raises(SystemExit):
        main(["align", "--help"])
    text = capsys.readouterr().out
    for word in (
        "semiglobal",
        "Needleman-Wunsch",
        "GAP_OPEN + k * GAP_EXTEND",
        "interleaved",
        "--aligned-strings",
        "--match",
    ):
        assert word in text
