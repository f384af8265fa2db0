"""Re-scans that score only what changed (swgpu_tools.engine.increment): after
any history of releases, a shard's top-k per query equals a scan from scratch.

The search is brute force over an independent score table (a plain
O(mn) Smith-Waterman of every pair, tests/reference.py), so these tests check
the increment logic alone; test_rescan.py runs it through the workflow.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swgpu_tools.engine.increment import (
    Lists,
    plan_cells,
    plan_shard,
    rescan_on_cpu,
    scan_shard,
)
from swgpu_tools.io.statefile import read_state, write_state
from swgpu_tools.sequences import SequenceSet

LETTERS = "ACDEFGHIKLMNPQRSTVWY"


def _score(a: str, b: str) -> int:
    """A cheap stand-in score with many ties: shared letters (a pure function of the pair)."""
    return len(set(a) & set(b)) + (5 if a == b else 0)


class BruteSearch:
    def __init__(self, queries: SequenceSet, shard: SequenceSet):
        self.q = [queries.sequence(i) for i in range(len(queries))]
        self.s = [shard.sequence(i) for i in range(len(shard))]
        self.ids = shard.ids
        self.cells = 0
        self.residue_cells = 0.0
        self.passes = 0

    def __call__(self, qi, si, k):
        si = np.arange(len(self.s)) if si is None else np.asarray(si)
        out = []
        for q in qi:
            scores = np.array([_score(self.q[q], self.s[j]) for j in si], dtype=np.int64)
            self.cells += len(si)
            self.residue_cells += len(self.q[q]) * sum(len(self.s[j]) for j in si)
            self.passes += 1
            # the kernels' order: score descending, then shard index (accession order)
            order = np.lexsort((si, -scores))[:k]
            out.append((si[order].astype(np.int64), scores[order]))
        return Lists.from_pairs(out)


def _shard(records: dict[str, str]) -> SequenceSet:
    ids = sorted(records)
    return SequenceSet.from_sequences(ids, [records[i] for i in ids])


def _scratch(queries, shard, top_k):
    res = scan_shard(queries, shard, "s", top_k, 0, None, BruteSearch(queries, shard))
    return [(list(a), list(b)) for a, b in res.top]


seqs = st.text(alphabet=LETTERS, min_size=3, max_size=8)


@st.composite
def histories(draw):
    n = draw(st.integers(3, 25))
    first = {f"s{i:03d}": draw(seqs) for i in range(n)}
    releases = [first]
    for _ in range(draw(st.integers(1, 4))):
        cur = dict(releases[-1])
        for key in list(cur):
            r = draw(st.integers(0, 9))
            if r == 0:
                del cur[key]  # removed
            elif r == 1:
                cur[key] = draw(seqs)  # changed
        for j in range(draw(st.integers(0, 4))):
            cur[f"n{len(releases)}_{j}"] = draw(seqs)  # added
        if not cur:
            cur["s999"] = draw(seqs)
        releases.append(cur)
    queries = {f"q{i}": draw(seqs) for i in range(draw(st.integers(1, 4)))}
    top_ks = [draw(st.integers(1, 6)) for _ in releases]
    margin = draw(st.integers(0, 3))
    return releases, queries, top_ks, margin


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories())
def test_any_release_history_gives_the_scratch_top_k(history, tmp_path_factory):
    releases, queries, top_ks, margin = history
    qset = SequenceSet.from_sequences(list(queries), list(queries.values()))
    state = None
    path = tmp_path_factory.mktemp("state") / "shard.npz"
    for release, top_k in zip(releases, top_ks):
        shard = _shard(release)
        search = BruteSearch(qset, shard)
        predicted, passes = plan_cells(qset, plan_shard(qset, shard, "s", state))
        res = scan_shard(qset, shard, "s", top_k, margin, state, search)
        got = [(list(a), list(b)) for a, b in res.top]
        assert got == _scratch(qset, shard, top_k)
        # the re-scan's cost estimate: exact unless a margin ran out (then a lower bound)
        assert predicted == search.residue_cells or (
            res.stats["margin_ran_out"] and predicted < search.residue_cells
        )
        assert passes == search.passes or (res.stats["margin_ran_out"] and passes < search.passes)
        write_state(path, res.state)
        state = read_state(path)
        assert state is not None and state.subjects == shard.ids


def test_only_new_and_changed_sequences_are_scored():
    rng = np.random.default_rng(3)
    release = {f"s{i:04d}": "".join(rng.choice(list(LETTERS), 12)) for i in range(400)}
    queries = SequenceSet.from_sequences(["q0", "q1"], ["ACDEFGHIKL", "MNPQRSTVWY"])
    first = scan_shard(
        queries, _shard(release), "s", 5, 5, None, BruteSearch(queries, _shard(release))
    )
    second = dict(release)
    for key in list(second)[:4]:
        second[key] = "WWWWW"  # 4 changed
    second["new1"] = "ACDEFGHIKLMN"  # 1 added
    del second["s0100"]  # 1 removed
    shard = _shard(second)
    search = BruteSearch(queries, shard)
    res = scan_shard(queries, shard, "s", 5, 5, first.state, search)
    assert res.stats["mode"] == "incremental" and res.stats["delta_sequences"] == 5
    assert search.cells == 2 * 5  # each query against the 5 new or changed only
    assert [(list(a), list(b)) for a, b in res.top] == _scratch(queries, shard, 5)


def test_margin_running_out_rescans_only_that_query():
    # q0's stored hits are all removed: it is scored against the whole shard again
    release = {f"s{i:03d}": "AAAAA" for i in range(10)}
    release.update({f"t{i:03d}": "CCCCC" for i in range(10)})
    queries = SequenceSet.from_sequences(["q0", "q1"], ["AAAAA", "CCCCC"])
    first = scan_shard(
        queries, _shard(release), "s", 2, 1, None, BruteSearch(queries, _shard(release))
    )
    second = {k: v for k, v in release.items() if k not in ("s000", "s001", "s002")}
    shard = _shard(second)
    search = BruteSearch(queries, shard)
    res = scan_shard(queries, shard, "s", 2, 1, first.state, search)
    assert res.stats["margin_ran_out"] == 1 and res.stats["full_queries"] == 1
    assert [(list(a), list(b)) for a, b in res.top] == _scratch(queries, shard, 2)


@pytest.mark.parametrize("change", ["scheme", "query", "none"])
def test_what_forces_a_full_scan(change):
    release = {f"s{i:03d}": "ACDEFG"[: 3 + i % 3] for i in range(20)}
    shard = _shard(release)
    queries = SequenceSet.from_sequences(["q0"], ["ACDE"])
    first = scan_shard(queries, shard, "s", 3, 3, None, BruteSearch(queries, shard))
    scheme = "other" if change == "scheme" else "s"
    q2 = SequenceSet.from_sequences(["q0"], ["WWWW" if change == "query" else "ACDE"])
    search = BruteSearch(q2, shard)
    res = scan_shard(q2, shard, scheme, 3, 3, first.state, search)
    assert res.stats["full_queries"] == (0 if change == "none" else 1)
    assert search.cells == (0 if change == "none" else 20)


def test_small_rescans_go_to_the_cpu_large_ones_to_the_gpu():
    # a 20-query delta of bench200M's release (about 3e10 cells a shard): CPU
    assert rescan_on_cpu(3e10, 20, 16)
    # 2,000 queries against a 740 k-residue delta (6.8e11 cells): the GPU took 0.56 s
    # after its start with many queries per launch, 16 CPU threads 15.3 s
    assert not rescan_on_cpu(6.8e11, 2000, 16)
    # 100 queries against it (3.4e10 cells): CPU (about 0.9 s, less than the GPU's start)
    assert rescan_on_cpu(3.4e10, 100, 16)
    # a full scan of a 50 M-residue shard by 20 queries (2e12 cells): GPU
    assert not rescan_on_cpu(2e12, 20, 16)
    # fewer threads, less the CPU takes on
    assert not rescan_on_cpu(6.8e10, 200, 1)


def test_a_small_rescan_never_starts_the_gpu(tmp_path):
    """The scoring step reads the state first; a small delta is scored on the CPU
    even with backend gpu (here no GPU exists: starting one would fail)."""
    import json

    from swgpu_tools.io.shardfile import write_shard
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.steps.score_shard import score_shard

    rng = np.random.default_rng(5)
    release = {f"s{i:04d}": "".join(rng.choice(list(LETTERS), 40)) for i in range(300)}
    (tmp_path / "q.fa").write_text(">q0\nACDEFGHIKLMNPQRSTVWY\n>q1\nMKVLAAGIVGLLLAHHKKWW\n")
    scheme = ScoringScheme()
    kw = dict(scheme=scheme, top_k=5, threads=1, state_path=tmp_path / "state.npz")

    def run(records, backend, name):
        ids = sorted(records)
        write_shard(tmp_path / "shard.swdb", ids, [records[i].encode() for i in ids])
        stats = tmp_path / f"{name}.json"
        score_shard(
            tmp_path / "shard.swdb",
            tmp_path / "q.fa",
            tmp_path / f"{name}.npz",
            backend=backend,
            stats_path=stats,
            **kw,
        )
        return json.loads(stats.read_text())

    first = run(release, "cpu", "v1")
    assert first["mode"] == "full" and "rescan_estimate" not in first
    release["s0007"] = "WWWWWWWWWWACDEF"
    second = run(release, "gpu", "v2")
    assert second["backend"] == "cpu" and second["mode"] == "incremental"
    assert second["rescan_estimate"] == {"cells": 2 * 20 * 15.0, "passes": 2, "backend": "cpu"}
    assert second["cells"] == 2 * 20 * 15.0


def test_a_commands_states_are_written_after_its_status(tmp_path):
    """Within a warm child's command (swgpu_tools.later's deferring, as run_job runs one)
    the scoring step writes its table and statistics, and leaves its re-scan state for
    after the status: the same state, written whole, as elsewhere (all at once)."""
    import json

    from swgpu_tools.io.shardfile import write_shard
    from swgpu_tools.io.statefile import read_state
    from swgpu_tools.later import deferring, run_pending
    from swgpu_tools.scoring import ScoringScheme
    from swgpu_tools.steps.score_shard import score_shard

    rng = np.random.default_rng(6)
    ids = [f"s{i:04d}" for i in range(200)]
    write_shard(
        tmp_path / "shard.swdb", ids, ["".join(rng.choice(list(LETTERS), 30)).encode() for _ in ids]
    )
    (tmp_path / "q.fa").write_text(">q0\nACDEFGHIKLMNPQRSTVWY\n>q1\nMKVLAAGIVGLLLAHHKKWW\n")

    def run(name):
        kw = dict(scheme=ScoringScheme(), top_k=5, threads=1, backend="cpu")
        score_shard(
            tmp_path / "shard.swdb", tmp_path / "q.fa", tmp_path / f"{name}.npz",
            stats_path=tmp_path / f"{name}.json", state_path=tmp_path / f"{name}-state.npz", **kw,
        )  # fmt: skip

    run("alone")
    with deferring():
        run("command")
    assert (tmp_path / "command.npz").is_file() and (tmp_path / "command.json").is_file()
    assert not (tmp_path / "command-state.npz").exists()
    run_pending()
    a, b = (read_state(tmp_path / f"{n}-state.npz") for n in ("alone", "command"))
    assert a.subjects == b.subjects and a.queries == b.queries
    for field in ("subject_hashes", "hit_offsets", "hit_subjects", "hit_scores", "complete"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert json.loads((tmp_path / "command.json").read_text())["mode"] == "full"


def test_accession_ranks_of_unsorted_and_sorted_shards():
    """Hits sort and compare by accession through integer ranks (engine/increment._Ranks)."""
    from swgpu_tools.engine.increment import _Ranks

    r = _Ranks(["b", "a", "c"])
    assert r.rank.tolist() == [1, 0, 2]
    assert [r.below(a) for a in ("a", "aa", "b", "bb", "c", "d")] == [0, 1, 1, 2, 2, 3]
    s = _Ranks(["a", "b", "c"])
    assert s.rank.tolist() == [0, 1, 2] and s.below("b") == 1
    for ranks in (r, s):  # several at once, bisected (sorted) or searched (unsorted)
        assert ranks.below(["a", "aa", "bb", "d"]).tolist() == [0, 1, 2, 3]
    assert _Ranks([]).below("x") == 0


@given(
    st.lists(st.sampled_from([f"a{i}" for i in range(12)]), unique=True, max_size=12),
    st.lists(st.sampled_from([f"a{i}" for i in range(12)]), unique=True, max_size=12),
    st.lists(st.integers(0, 2), min_size=12, max_size=12),
    st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_matched_subjects_against_a_dictionary(old, new, hash_of, shuffle_new):
    """Each previous subject's index in the new shard where it is there unchanged
    (same accession, same hash), else -1: the vectorised match against a plain loop,
    for sorted and unsorted subject lists."""
    from swgpu_tools.engine.increment import _matched_subjects
    from swgpu_tools.io.statefile import ShardState
    from swgpu_tools.sequences import SequenceSet

    if shuffle_new:
        new = list(reversed(new))
    h_old = np.array([hash_of[int(a[1:])] for a in old], dtype=np.uint64)
    h_new = np.array([(hash_of[int(a[1:])] + (int(a[1:]) % 3 == 0)) for a in new], dtype=np.uint64)
    prev = ShardState(
        "x",
        1,
        0,
        list(old),
        h_old,
        [],
        np.zeros(0, np.uint64),
        np.zeros(1, np.int64),
        np.zeros(0, np.int32),
        np.zeros(0, np.int32),
        np.zeros(0, bool),
    )
    shard = SequenceSet.from_sequences(list(new), ["A"] * len(new))
    got = _matched_subjects(shard, h_new, prev).tolist()
    where = {a: j for j, a in enumerate(new)}
    want = [
        where[a] if a in where and h_new[where[a]] == h_old[i] else -1 for i, a in enumerate(old)
    ]
    assert got == want


_CIGAR_OPS = st.lists(st.tuples(st.integers(1, 1200), st.sampled_from("=XID")), max_size=12)


@given(
    st.lists(
        st.one_of(
            _CIGAR_OPS.map(lambda ops: "".join(f"{n}{op}" for n, op in ops) or "*"),
            st.sampled_from(
                [
                    "*",
                    "",
                    "5M",
                    "=3",
                    "3=X",
                    "12",
                    "4=2Q",
                    "3\u0663=",
                    "01=0X",
                    "99999999999=",
                    "9999999999=1X",
                ]
            ),
        ),
        max_size=20,
    )
)
@settings(max_examples=200, deadline=None)
def test_cigars_read_at_once_equal_one_at_a_time(cigars):
    """The traceback's reuse reads stored CIGARs all at once (io/fields.ops_from_cigars,
    a compiled kernel); each gives the columns of the one-at-a-time reader and its
    query and subject spans, and a malformed one gives spans of -1 (aligned again)."""
    import re

    from swgpu_tools.io.fields import ops_from_cigars as _ops_from_cigars

    def _ops_from_cigar(cigar: str) -> bytes:  # one at a time, with a regular expression
        if cigar == "*":
            return b""
        runs = re.findall(r"([0-9]+)([=XID])", cigar)
        return b"".join((b"M" if op in "=X" else op.encode()) * int(n) for n, op in runs)

    blob, off, qspan, sspan = _ops_from_cigars(cigars)
    assert len(off) == len(cigars) + 1 and off[-1] == len(blob)
    ops = [blob[a:b].tobytes() for a, b in zip(off[:-1].tolist(), off[1:].tolist())]
    for c, o, q, s in zip(cigars, ops, qspan.tolist(), sspan.tolist()):
        runs = [int(n) for n in re.findall(r"([0-9]+)[=XID]", c)]
        if (c == "*" or re.fullmatch(r"(?:[0-9]+[=XID])*", c)) and sum(runs) <= 1 << 32:
            want = _ops_from_cigar(c)
            assert o == want
            assert q == want.count(b"M") + want.count(b"I")
            assert s == want.count(b"M") + want.count(b"D")
        else:
            assert (o, q, s) == (b"", -1, -1)


def test_traceback_reuse_gives_the_scratch_table_and_realigns_damaged_rows():
    """Alignments reused from an earlier table give the table of a traceback from
    scratch; a stored row whose CIGAR does not fit its coordinates is aligned again."""
    import pandas as pd

    from swgpu_tools.alignment import align_many
    from swgpu_tools.engine.traceback import REUSE_COLUMNS, code_digest, traceback
    from swgpu_tools.scoring import ScoringScheme

    rng = np.random.default_rng(11)
    qs = ["".join(rng.choice(list(LETTERS), int(rng.integers(20, 60)))) for _ in range(3)]
    ss = [q[5:] + "".join(rng.choice(list(LETTERS), 10)) for q in qs] + [
        "".join(rng.choice(list(LETTERS), 50)) for _ in range(3)
    ]
    queries = SequenceSet.from_sequences([f"q{i}" for i in range(3)], qs)
    subjects = SequenceSet.from_sequences([f"s{i}" for i in range(6)], ss)
    scheme = ScoringScheme()
    qi = np.repeat(np.arange(3), 6)
    si = np.tile(np.arange(6), 3)
    alns = align_many(
        scheme.encode(queries, "queries"), scheme.encode(subjects, "database"), qi, si, scheme
    )
    hits = pd.DataFrame(
        {
            "qacc": [f"q{i}" for i in qi],
            "sacc": [f"s{i}" for i in si],
            "score": [a.score for a in alns],
        }
    )
    for c in ("qseqid", "sseqid"):
        hits[c] = hits["qacc" if c == "qseqid" else "sacc"]
    hits["stitle"], hits["evalue"], hits["bitscore"] = "t", 1.0, 2.0
    stats = {}
    scratch = traceback(hits, queries, subjects, scheme, 1, stats=stats)
    assert stats["aligned"] == 18
    previous = scratch[REUSE_COLUMNS].copy()
    again = traceback(hits, queries, subjects, scheme, 1, previous, code_digest(scheme), stats)
    assert stats["reused"] == 18 and again.equals(scratch)
    k = int(np.flatnonzero(previous["cigar"].str.len() > 3)[0])
    cigar = previous.at[k, "cigar"]
    previous.at[k, "cigar"] = "1=" + cigar  # one column more than its coordinates
    again = traceback(hits, queries, subjects, scheme, 1, previous, code_digest(scheme), stats)
    assert stats["reused"] == 17 and stats["aligned"] == 1 and again.equals(scratch)


@st.composite
def merge_cases(draw):
    """A shard of n subjects (ranks: a permutation, or the identity as in shard
    files), a previous state's lists and the delta's lists of some kept queries."""
    n = draw(st.integers(1, 30))
    sorted_shard = draw(st.booleans())
    rank = np.arange(n) if sorted_shard else np.array(draw(st.permutations(range(n))))
    subjects = list(range(n))
    delta = sorted(draw(st.sets(st.sampled_from(subjects), max_size=n)))
    kept = [j for j in subjects if j not in delta]
    keep = draw(st.integers(1, 6))
    top_k = draw(st.integers(1, keep))
    nq = draw(st.integers(1, 5))
    prev_lists, delta_lists, complete = [], [], []

    def ordered(pairs):  # best first: score descending, then rank ascending
        return sorted(pairs, key=lambda p: (-p[1], rank[p[0]]))

    for _ in range(nq):
        subs = (
            draw(st.lists(st.sampled_from(kept + [-1]), unique=True, max_size=keep)) if kept else []
        )
        prev_lists.append(ordered([(s, draw(st.integers(0, 4))) for s in subs]))
        complete.append(draw(st.booleans()))
        dsubs = draw(st.lists(st.sampled_from(delta), unique=True, max_size=keep)) if delta else []
        dl = sorted([(s, draw(st.integers(0, 4))) for s in dsubs], key=lambda p: (-p[1], p[0]))
        delta_lists.append(dl)  # the kernels' order: score, then shard index
    return n, rank, delta, keep, top_k, prev_lists, delta_lists, complete


@settings(max_examples=300, deadline=None)
@given(case=merge_cases())
def test_merged_lists_equal_a_query_at_a_time(case):
    """engine/rescan_lists.merge_lists against the rules written out per query in
    plain Python: merge, sort by (score, accession), cut at the stricter cut-off."""
    from swgpu_tools.engine.rescan_lists import Cutoffs, merge_lists

    n, rank, delta, keep, top_k, prev_lists, delta_lists, complete = case
    # the previous state: its own subject numbering (-1 stands for a removed subject)
    prev_subjects = list(range(n)) + [n]  # subject n of the previous release: removed
    prev_to_new = np.array(list(range(n)) + [-1], dtype=np.int64)
    offs, psub, pscore = [0], [], []
    for lst in prev_lists:
        for s, sc in lst:
            psub.append(n if s == -1 else s)
            pscore.append(sc)
        offs.append(len(psub))

    class Prev:
        hit_offsets = np.array(offs, dtype=np.int64)
        hit_subjects = np.array(psub, dtype=np.int64)
        hit_scores = np.array(pscore, dtype=np.int64)

    acc_rank = {s: int(rank[s]) for s in range(n)}
    acc_rank[n] = n  # the removed subject sorts after every subject of the shard
    nq = len(prev_lists)
    delta_complete = len(delta) <= keep
    has_prev = np.array([not complete[i] and len(prev_lists[i]) > 0 for i in range(nq)])
    prev_cut = [
        (prev_lists[i][-1][1], acc_rank[n if prev_lists[i][-1][0] == -1 else prev_lists[i][-1][0]])
        if has_prev[i]
        else (0, 0)
        for i in range(nq)
    ]
    has_delta = np.array([not delta_complete and len(d) >= keep for d in delta_lists])
    delta_cut = [
        (delta_lists[i][-1][1], int(rank[delta_lists[i][-1][0]])) if has_delta[i] else (0, 0)
        for i in range(nq)
    ]
    d_off = np.cumsum([0] + [len(d) for d in delta_lists])
    d_sub = np.array([s for d in delta_lists for s, _ in d], dtype=np.int64)
    d_score = np.array([sc for d in delta_lists for _, sc in d], dtype=np.int64)
    cuts = Cutoffs(
        has_prev,
        np.array([c[0] for c in prev_cut], np.int64),
        np.array([c[1] for c in prev_cut], np.int64),
        has_delta,
        np.array([c[0] for c in delta_cut], np.int64),
        np.array([c[1] for c in delta_cut], np.int64),
    )
    starts, lens, out_sub, out_score, kind = merge_lists(
        np.arange(nq), Prev, prev_to_new, rank, d_off, d_sub, d_score, cuts, keep, top_k
    )
    assert len(prev_subjects) == n + 1
    for i in range(nq):
        merged = [(s, sc) for s, sc in prev_lists[i] if s != -1] + delta_lists[i]
        merged.sort(key=lambda p: (-p[1], rank[p[0]]))
        bounds = [c for c, h in ((prev_cut[i], has_prev[i]), (delta_cut[i], has_delta[i])) if h]
        bound = min(bounds, key=lambda b: (-b[0], b[1])) if bounds else None
        exact = len(merged)
        if bound is not None:
            ahead = [sc > bound[0] or (sc == bound[0] and rank[s] < bound[1]) for s, sc in merged]
            exact = ahead.index(False) if False in ahead else len(ahead)
        is_complete = bound is None and len(merged) <= keep
        take = merged[: min(exact, keep)]
        if is_complete or len(take) >= top_k:
            assert kind[i] == (2 if is_complete else 1)
            a = starts[i]
            got = list(zip(out_sub[a : a + lens[i]].tolist(), out_score[a : a + lens[i]].tolist()))
            assert got == take
        else:
            assert kind[i] == 0


def test_shards_rescanned_together_equal_a_scan_from_scratch():
    """scan_shards: the new and changed sequences of several shards scored in one
    search (each shard's best hits chosen on its own) give each shard's scratch table
    and state; real CPU kernels."""
    from swgpu_tools.engine.scan import ShardInput, scan_shards
    from swgpu_tools.scoring import ScoringScheme

    rng = np.random.default_rng(11)
    scheme = ScoringScheme("BLOSUM62", 11, 1)

    def rs(n):
        return "".join(rng.choice(list(LETTERS), int(n)))

    queries = SequenceSet.from_sequences([f"q{i}" for i in range(6)], [rs(12) for _ in range(6)])
    v1 = [{f"s{g}_{i:02d}": rs(rng.integers(5, 30)) for i in range(25)} for g in range(3)]
    first = scan_shards(queries, [ShardInput(_shard(r)) for r in v1], scheme, 4, 4, backend="cpu")
    v2 = []
    for g, recs in enumerate(v1):
        recs = dict(recs)
        for i in range(g, 25, 6):  # changed, removed and added in every shard
            recs[f"s{g}_{i:02d}"] = rs(rng.integers(5, 30))
        del recs[f"s{g}_{(g + 3):02d}"]
        recs[f"s{g}_new"] = rs(20)
        v2.append(recs)
    stats = [{} for _ in v2]
    inc = scan_shards(
        queries,
        [ShardInput(_shard(r), state) for r, (_, state) in zip(v2, first)],
        scheme,
        4,
        4,
        backend="cpu",
        stats=stats,
    )
    scratch = scan_shards(queries, [ShardInput(_shard(r)) for r in v2], scheme, 4, 4, backend="cpu")
    for (a, sa), (b, sb), info in zip(inc, scratch, stats):
        assert (a.q.tolist(), a.score.tolist()) == (b.q.tolist(), b.score.tolist())
        assert [a.subjects[i] for i in a.s] == [b.subjects[i] for i in b.s]
        for q in range(len(queries)):  # a re-scan's kept list: exact as far as it goes
            (ia, xa), (ib, xb) = sa.hits_of(q), sb.hits_of(q)
            assert len(ia) >= 4
            assert (ia.tolist(), xa.tolist()) == (ib[: len(ia)].tolist(), xb[: len(ia)].tolist())
        assert info["mode"] == "incremental" and info["joint_delta_shards"] == 3
        assert info["full_queries"] == 0


def test_split_segments_by_reshape_equals_by_masks():
    """engine/scan._split_segments: a joint search's hits per shard, by one reshape
    where every query has its full count in each segment, by masks otherwise."""
    from swgpu_tools.engine.scan import _split_segments
    from swgpu_tools.kernels import TopHits

    rng = np.random.default_rng(2)
    segs = np.array([0, 3, 3, 10, 12])
    k, nq = 4, 5
    rows = []
    for q in range(nq):
        for a, b in zip(segs[:-1], segs[1:]):
            cols = np.sort(rng.choice(np.arange(a, b), min(k, b - a), replace=False))
            rows += [(q, int(c), int(rng.integers(0, 50))) for c in cols]
    q, s, v = (np.array(x, dtype=np.int32) for x in zip(*rows))
    full = TopHits(q, s, v)
    fast = _split_segments(full, segs, k, nq)
    # the same hits with one more query row that has fewer hits: the mask path
    short = TopHits(np.append(q, 5).astype(np.int32), np.append(s, 11), np.append(v, 7))
    slow = _split_segments(short, segs, k, nq + 1)
    for (o1, l1, x1), (o2, l2, x2) in zip(fast, slow):
        assert o1.tolist() == o2[:-1].tolist()
        assert l1.tolist() == l2[: len(l1)].tolist() and x1.tolist() == x2[: len(x1)].tolist()
    assert slow[3][1].tolist()[-1] == 11 - 10 and slow[3][0][-1] - slow[3][0][-2] == 1
    assert [len(x[1]) for x in fast] == [3 * nq, 0, 4 * nq, 2 * nq]


def test_the_alignment_code_digest_covers_what_computes_alignments():
    """Stored alignments are reused while the alignment code is unchanged: every module
    of the alignment package counts (and the lanes' vector helpers), but the ones that
    only decide when the kernels compile (a new release of those keeps the reuse)."""
    import os

    from swgpu_tools.engine.traceback import COMPILE_ONLY, _align_sources

    names = {os.path.basename(p) for p in _align_sources()}
    assert {"hits.py", "band.py", "batch.py", "traceback.py", "query_lanes.py"} <= names
    assert "simd.py" in names
    assert not names & COMPILE_ONLY
    assert COMPILE_ONLY <= set(os.listdir(os.path.dirname(_align_sources()[0])))
