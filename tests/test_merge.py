"""The merge of shard hits: top-k per query by (score desc, accession asc), whatever
the number of parts and however they are batched, equal to a brute-force sort."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.engine import merge as merge_module
from swgpu_tools.engine.merge import merge
from swgpu_tools.io.hitsfile import ShardHits
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.sequences import SequenceSet

SCHEME = ScoringScheme()


@contextmanager
def threads_from_one_row():
    """Cuts of any size split over threads (by query ranges), so that small random
    cases go through the threaded path too."""
    old = merge_module.ROWS_PER_THREAD
    merge_module.ROWS_PER_THREAD = 1
    try:
        yield
    finally:
        merge_module.ROWS_PER_THREAD = old


#: (batch_rows, threads) of every merge the tests compare
WAYS = [(1, 1), (3, 1), (10**9, 1), (1, 3), (10**9, 2), (10**9, 5)]


def make_parts(data, n_queries, n_parts):
    """Random parts; each subject accession in one part only (as with shards)."""
    qids = [f"Q{i}" for i in range(n_queries)]
    parts, rows, serial = [], [], 0
    for _ in range(n_parts):
        n_sub = data.draw(st.integers(0, 6))
        subjects = []
        for _ in range(n_sub):
            # short accessions from a small alphabet: many near-ties in order
            subjects.append(data.draw(st.text("ABab1", min_size=1, max_size=3)) + f"_{serial}")
            serial += 1
        q, s, score = [], [], []
        for qi in range(n_queries):
            for si in range(n_sub):
                if data.draw(st.booleans()):
                    q.append(qi)
                    s.append(si)
                    score.append(data.draw(st.integers(20, 24)))  # many equal scores
        # the part's own query order differs from the file's: the merge maps it
        perm = data.draw(st.permutations(range(n_queries)))
        part_queries = [qids[i] for i in perm]
        inv = {qi: k for k, qi in enumerate(perm)}
        parts.append(
            ShardHits(
                part_queries,
                np.array([inv[x] for x in q], dtype=np.int32),
                np.array(s, dtype=np.int32),
                np.array(score, dtype=np.int32),
                subjects,
                [f"sp|{a}|X title {a}" for a in subjects],
                np.array([30 + len(a) for a in subjects], dtype=np.int64),
            )
        )
        rows += [(qids[qi], sc, subjects[si]) for qi, si, sc in zip(q, s, score)]
    return qids, parts, rows


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(0, 5), st.integers(1, 6))
def test_merge_equals_brute_force_for_any_batching(data, n_queries, n_parts, top_k):
    qids, parts, rows = make_parts(data, n_queries, n_parts)
    queries = SequenceSet.from_sequences(qids, ["MKVLA" * 8] * n_queries)
    want = []
    for qi in qids:
        mine = sorted((r for r in rows if r[0] == qi), key=lambda r: (-r[1], r[2]))
        want += mine[:top_k]
    with threads_from_one_row():
        tables = [
            merge(iter(parts), queries, 10**6, SCHEME, top_k, None, batch_rows=b, threads=t)
            for b, t in WAYS
        ]
    for got in tables:
        assert list(zip(got["qacc"], got["score"], got["sacc"])) == want
        assert list(got["sseqid"]) == [f"sp|{a}|X" for a in got["sacc"]]
        assert list(got["slen"]) == [30 + len(a) for a in got["sacc"]]
    for got in tables[:-1]:
        pd.testing.assert_frame_equal(got, tables[-1])


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(0, 5), st.integers(1, 6))
def test_merge_with_an_evalue_cut_equals_brute_force(data, n_queries, n_parts, top_k):
    """The last cut leaves out hits that cannot pass the E-value cut only after every
    hit took its place in the top k (a tie at the cut is decided by accession):
    the table equals sorting every hit, keeping the top k, then filtering by
    E-value, on sizes where E-values straddle the cut-off."""
    from swgpu_tools import stats

    qids, parts, rows = make_parts(data, n_queries, n_parts)
    queries = SequenceSet.from_sequences(qids, ["MKVLA" * 8] * n_queries)
    db = data.draw(st.sampled_from([30, 60, 120, 400]))
    max_e = data.draw(st.sampled_from([0.5, 2.0, 10.0]))
    params = stats.lookup("BLOSUM62", 11, 1)
    want = []
    for qi in qids:
        mine = sorted((r for r in rows if r[0] == qi), key=lambda r: (-r[1], r[2]))[:top_k]
        for r in mine:
            e = float(
                np.asarray(
                    stats.spouge_evalue(float(r[1]), 40, 30 + len(r[2]), db, params)
                ).reshape(-1)[0]
            )
            if e <= max_e:
                want.append(r)
    for b, t in WAYS:
        with threads_from_one_row():
            got = merge(iter(parts), queries, db, SCHEME, top_k, max_e, batch_rows=b, threads=t)
        assert list(zip(got["qacc"], got["score"], got["sacc"])) == want


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 60),
    qmax=st.sampled_from([3, 2**20, 2**40]),
    smax=st.sampled_from([5, 2**31 - 1]),
    seed=st.integers(0, 2**32 - 1),
)
def test_sort_order_equals_a_three_key_lexsort(n, qmax, smax, seed):
    """merge._sort_order (one packed int64 key where it fits, else lexsort) orders rows
    by query, descending score, ascending rank: the same as a three-key lexsort."""
    from swgpu_tools.engine.merge import _sort_order

    rng = np.random.default_rng(seed)
    q = rng.integers(0, qmax, n).astype(np.int64)
    score = rng.integers(-smax, smax, n).astype(np.int64)
    rank = rng.permutation(n).astype(np.int64)  # distinct, as subject ranks are
    assert _sort_order(q, score, rank).tolist() == np.lexsort((rank, -score, q)).tolist()


def _queries_of_lengths(lengths) -> SequenceSet:
    """Queries Q0, Q1, ... of these lengths (their letters do not matter here)."""
    return SequenceSet.from_sequences(
        [f"Q{i}" for i in range(len(lengths))], ["A" * int(x) for x in lengths]
    )


def test_evalue_cut_equals_filtering_every_evalue():
    """The merge drops hits whose E-value floor is above max_evalue before it computes
    E-values (stats.spouge_evalue_floor): the table equals the uncut table filtered
    by E-value, on lengths where the floor drops most hits."""
    rng = np.random.default_rng(3)
    nq, ns, n = 30, 400, 6000
    qlens = rng.integers(200, 700, nq)
    queries = _queries_of_lengths(qlens)
    subjects = [f"S{j:04d}" for j in range(ns)]
    q = rng.integers(0, nq, n).astype(np.int32)
    s = rng.integers(0, ns, n).astype(np.int32)
    score = np.where(rng.random(n) < 0.1, rng.integers(60, 400, n), rng.integers(15, 60, n))
    part = ShardHits(
        [f"Q{i}" for i in range(nq)],
        q,
        s,
        score.astype(np.int32),
        subjects,
        [f"{a} t" for a in subjects],
        rng.integers(100, 900, ns).astype(np.int64),
    )
    db = 200_000_000
    cut = merge([part], queries, db, SCHEME, top_k=10_000, max_evalue=10.0)
    every = merge([part], queries, db, SCHEME, top_k=10_000, max_evalue=None)
    want = every[every["evalue"] <= 10.0].reset_index(drop=True)
    pd.testing.assert_frame_equal(cut.reset_index(drop=True), want)
    assert 0 < len(want) < 0.5 * len(every)


def test_evalue_cut_of_sorted_runs_looks_only_at_rows_that_may_pass(monkeypatch):
    """A table as a scoring job writes it (its shards' rows one after the other, each
    by query and descending score, many ties): the merge asks the E-value screen's
    exact part only about the rows its cheap part lets through (far fewer than all),
    and the table equals the top k of every row sorted, then filtered by E-value."""
    rng = np.random.default_rng(5)
    nq, ns, per = 40, 3000, 300
    qlens = rng.integers(150, 900, nq)
    queries = _queries_of_lengths(qlens)
    subjects = [f"S{j:05d}" for j in range(ns)]
    slen = rng.integers(60, 1500, ns).astype(np.int64)
    parts, rows = [], []
    for shard in range(3):  # subjects of one shard each: a third of them
        mine = np.arange(shard, ns, 3)
        q, s, sc = [], [], []
        for qi in range(nq):
            hit = rng.choice(mine, per, replace=False)
            score = np.where(rng.random(per) < 0.05, rng.integers(50, 300, per), 30 + hit % 9)
            o = np.argsort(-score, kind="stable")
            q += [qi] * per
            s += hit[o].tolist()
            sc += score[o].tolist()
        local = {j: k for k, j in enumerate(mine.tolist())}
        parts.append(
            ShardHits(
                [f"Q{i}" for i in range(nq)],
                np.array(q, np.int32),
                np.array([local[j] for j in s], np.int32),
                np.array(sc, np.int32),
                [subjects[j] for j in mine],
                [f"{subjects[j]} t" for j in mine],
                slen[mine],
            )
        )
        rows += list(zip(q, sc, s))
    looked = []  # the rows the E-value screen's exact part is asked about
    floor = merge_module._EvalueFloor.__call__
    monkeypatch.setattr(
        merge_module._EvalueFloor,
        "__call__",
        lambda self, q, *a: looked.append(len(q)) or floor(self, q, *a),
    )
    db, top_k = 200_000_000, 600  # of 900 rows a query
    from swgpu_tools.io.hitsfile import concat_shard_hits

    job = concat_shard_hits(parts)  # as the only job writes it: one table, three runs
    got = merge([job], queries, db, SCHEME, top_k=top_k, max_evalue=10.0)
    assert looked and max(looked) < 0.5 * top_k * nq  # not every row of the top k
    from swgpu_tools import stats

    params = stats.lookup("BLOSUM62", 11, 1)
    want = []
    for qi in range(nq):
        mine = sorted((r for r in rows if r[0] == qi), key=lambda r: (-r[1], subjects[r[2]]))
        for _, sc, j in mine[:top_k]:
            e = float(np.asarray(stats.spouge_evalue(float(sc), qlens[qi], slen[j], db, params)))
            if e <= 10.0:
                want.append((f"Q{qi}", sc, subjects[j]))
    assert 0 < len(want) < 0.2 * len(rows)
    assert list(zip(got["qacc"], got["score"], got["sacc"])) == want


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(1, 5), st.integers(1, 6), st.integers(1, 4))
def test_a_jobs_joint_top_k_merges_to_the_same_table(data, n_queries, n_parts, top_k, jobs):
    """A scoring job writes its shards' joint top-k (engine.merge.top_k_of): the merge
    of those tables, one per job, equals the merge of every shard's own top-k, with
    and without an E-value cut (ties at the cut decided by accession)."""
    from swgpu_tools.engine.merge import top_k_of

    qids, parts, _ = make_parts(data, n_queries, n_parts)
    queries = SequenceSet.from_sequences(qids, ["MKVLA" * 8] * n_queries)
    between = st.integers(1, max(1, n_parts - 1))
    cut = sorted({c for c in data.draw(st.lists(between, max_size=jobs)) if c < n_parts})
    groups = [parts[a:b] for a, b in zip([0, *cut], [*cut, n_parts])]
    max_e = data.draw(st.sampled_from([None, 2.0, 10.0]))
    with threads_from_one_row():
        tables = [top_k_of(g, queries, top_k, threads=data.draw(st.integers(1, 3))) for g in groups]
        for t in tables:  # at most top_k rows per query
            assert (np.bincount(t.q, minlength=n_queries) <= top_k).all()
        want = merge(iter(parts), queries, 60, SCHEME, top_k, max_e)
        got = merge(iter(tables), queries, 60, SCHEME, top_k, max_e)
    pd.testing.assert_frame_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(1, 5), st.integers(1, 6), st.integers(1, 7), st.booleans())
def test_top_members_of_sorted_runs_equal_brute_force(data, n_queries, n_runs, top_k, filtered):
    """The k-th scores found by a binary search over a few sorted runs (as a job's shards
    come), and the choice among only the rows at or above them, give the mask of a
    brute-force sort by (score desc, accession asc), and so does sorting every row
    (no runs given); with ``passes``, only the chosen rows that pass."""
    from swgpu_tools.engine.merge import _top_members

    q, score, acc = [], [], []
    for r in range(n_runs):
        rows = []
        for qi in range(n_queries):
            for _ in range(data.draw(st.integers(0, 8))):
                rows.append(
                    (
                        qi,
                        data.draw(st.integers(-3, 3)),
                        f"{data.draw(st.text('ab', max_size=3))}_{r}_{len(acc) + len(rows)}",
                    )
                )
        rows.sort(key=lambda x: (x[0], -x[1]))  # a run: by query, descending score
        q += [x[0] for x in rows]
        score += [x[1] for x in rows]
        acc += [x[2] for x in rows]
    if not q:
        return
    q, score = np.array(q, np.int64), np.array(score, np.int64)
    passing = np.array([data.draw(st.booleans()) for _ in range(len(q))]) if filtered else None

    def ranks_of(rows):  # (their places among those rows' accessions, string order)
        return merge_module._accession_ranks([acc[i] for i in rows.tolist()])

    # with a filter, the rows that may pass as the merge's cheap screen gives them (a
    # superset of those that pass): only those, and the ties at the cut, are looked at
    may = None
    if passing is not None:
        may = passing | np.array([data.draw(st.booleans()) for _ in range(len(q))])
    asked = []
    passes = None if passing is None else (lambda rows: asked.append(rows) or passing[rows])
    want = np.zeros(len(q), bool)
    for qi in range(n_queries):
        mine = sorted(np.flatnonzero(q == qi).tolist(), key=lambda i: (-score[i], acc[i]))
        want[mine[:top_k]] = True
    if passing is not None:
        want &= passing
    runs = merge_module._Runs.of(q, score)
    assert runs is not None  # at most n_runs sorted runs
    got = _top_members(q, score, n_queries, top_k, ranks_of, passes, runs)
    sorted_all = _top_members(q, score, n_queries, top_k, ranks_of, passes, None)
    assert got.tolist() == want.tolist()
    assert sorted_all.tolist() == want.tolist()
    if may is not None:
        asked.clear()
        screened = _top_members(q, score, n_queries, top_k, ranks_of, passes, runs, may)
        assert screened.tolist() == want.tolist()
        # asked about rows that may pass, and about ties at the cut only
        kth = {}
        for qi in range(n_queries):
            mine = sorted(score[q == qi].tolist(), reverse=True)
            kth[qi] = mine[top_k - 1] if len(mine) > top_k else None
        for rows in asked:
            for r in rows.tolist():
                assert may[r] or score[r] == kth[int(q[r])], (r, kth)


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(1, 5), st.integers(1, 6))
def test_a_jobs_candidate_rows_merge_to_the_same_table(data, n_queries, n_parts, top_k):
    """A scoring job keeps of its shards' hits only the rows at or above each query's
    k-th best score over them (engine.merge.candidates): the merge of those parts
    equals the merge of all the rows, with and without an E-value cut, and with
    other jobs' tables beside; each query keeps at least min(top_k, its rows)."""
    from swgpu_tools.engine.merge import candidates

    qids, parts, _ = make_parts(data, n_queries, n_parts)
    queries = SequenceSet.from_sequences(qids, ["MKVLA" * 8] * n_queries)
    job = []  # as a job writes them: the query file's order, per query best first
    for p in parts:
        q = np.array([qids.index(p.queries[i]) for i in p.q.tolist()], dtype=np.int32)
        o = np.lexsort((p.s, -p.score.astype(np.int64), q))  # subjects in accession order
        job.append(ShardHits(qids, q[o], p.s[o], p.score[o], p.subjects, p.headers, p.slen))
    if data.draw(st.booleans()):  # a part not in one sorted run: its rows found joined
        p = job[0]
        job[0] = ShardHits(qids, p.q[::-1], p.s[::-1], p.score[::-1], p.subjects, p.headers, p.slen)
    split = data.draw(st.integers(0, n_parts))
    mine, others = job[:split] or job, job[split:] if split else []
    kept = candidates(mine, top_k)
    assert [p.subjects for p in kept] == [p.subjects for p in mine]
    for qi in range(n_queries):
        before = sum(int((p.q == qi).sum()) for p in mine)
        after = sum(int((p.q == qi).sum()) for p in kept)
        assert min(top_k, before) <= after <= before
    max_e = data.draw(st.sampled_from([None, 2.0, 10.0]))
    want = merge(iter(mine + others), queries, 60, SCHEME, top_k, max_e)
    got = merge(iter(kept + others), queries, 60, SCHEME, top_k, max_e)
    pd.testing.assert_frame_equal(got, want)
    # a job that cuts its shards to their joint top-k cuts these candidates
    # (steps/score_shard): the same table as the cut of every row, ties included
    from swgpu_tools.engine.merge import top_k_of

    with threads_from_one_row():
        a = top_k_of(mine, queries, top_k, threads=data.draw(st.integers(1, 3)))
        b = top_k_of(kept, queries, top_k, threads=data.draw(st.integers(1, 3)))
    assert (a.q.tolist(), a.score.tolist()) == (b.q.tolist(), b.score.tolist())
    rows = [(a.subjects[i], a.headers[i], int(a.slen[i])) for i in a.s.tolist()]
    assert rows == [(b.subjects[i], b.headers[i], int(b.slen[i])) for i in b.s.tolist()]
