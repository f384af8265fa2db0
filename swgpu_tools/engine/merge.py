"""Merging: the hits of every database part -> the final top-k per query, with
BLAST's bit scores and E-values over the whole database.

The parts' hits are arrays (:class:`~swgpu_tools.io.hitsfile.ShardHits`); they
are ordered with one integer sort (query, score, subject accession as a rank),
cut to ``top_k`` per query and filtered by E-value before any text is made.
The parts are taken a batch at a time, each batch cut with the running top-k,
so the merge holds one batch and the final top-k, whatever the number of parts.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import stats
from ..errors import InputError
from ..io.hitsfile import ShardHits, used_and_index
from ..io.lines import Lines
from ..io.tables import HITS_COLUMNS
from ..scoring import ScoringScheme
from ..sequences import SequenceSet

#: Shard hits gathered before they are cut to the running top-k: the merge holds
#: at most about this many rows besides the running top-k (queries x top_k).
BATCH_ROWS = 4_000_000

#: Rows per thread below which a cut runs on one thread (the threads' start and
#: the split cost more than they save).
ROWS_PER_THREAD = 250_000


def merge(
    parts: Iterable[ShardHits],
    queries: SequenceSet,
    db_residues: int,
    scheme: ScoringScheme,
    top_k: int = 500,
    max_evalue: float | None = 10.0,
    batch_rows: int | None = None,
    threads: int = 1,
):
    """Merge per-part hits into the final hits (:data:`~swgpu_tools.io.tables.HITS_COLUMNS`).

    Order: queries in input order; per query by descending score, then
    ascending subject accession (the same order whatever the sharding).
    E-values use ``db_residues`` (the whole database, or BLAST's ``-dbsize``)
    as BLAST+ blastp does by default (Karlin-Altschul with Spouge's
    finite-size correction, which also depends on the subject length); where
    BLAST publishes no statistics for the scheme, bitscore and evalue are NaN
    (written as NA) and no E-value filter applies.

    ``parts`` may be a generator: they are taken a batch at a time (about
    ``batch_rows`` hits, default :data:`BATCH_ROWS`, and the next part read ahead)
    and each batch is cut, with the running result, to the top ``top_k`` per
    query; the last cut leaves out the hits whose E-value floor is above
    ``max_evalue`` (after they took their places in the top k), so that only the
    few that can pass are ordered by accession.  The order above is a
    total order, so the top-k of the union equals the top-k of the union of
    top-k's: the result does not depend on the batches, and memory holds one
    batch and the queries' top-k, whatever the number of parts.

    ``threads``: each cut chooses the queries' top k on up to this many threads,
    each over a range of queries (the same rows whatever the number).
    """
    budget = BATCH_ROWS if batch_rows is None else max(1, int(batch_rows))
    order_of_query = {q: i for i, q in enumerate(queries.ids)}
    params = stats.lookup(scheme.matrix_name, scheme.gap_open, scheme.gap_extend)
    passes = None
    if params is not None and max_evalue is not None:
        passes = _EvalueFloor(queries.lengths, db_residues, params, max_evalue)

    top = None
    batch: list[ShardHits] = []
    rows = 0
    ahead = iter(parts)
    following = next(ahead, None)
    while following is not None:  # one part looked ahead: the last one is cut below
        part, following = following, next(ahead, None)
        batch.append(_in_query_order(part, queries, order_of_query))
        rows += len(part)
        if rows >= budget and following is not None:
            top = _cut(([top] if top is not None else []) + batch, queries, top_k, None, threads)
            batch, rows = [], 0
    # the last cut keeps only the top hits that can pass the E-value cut
    top = _cut(([top] if top is not None else []) + batch, queries, top_k, passes, threads)
    q = top.q.astype(np.int64)
    score = top.score.astype(np.int64)
    s = top.s.astype(np.int64)
    qlen = queries.lengths[q].astype(np.int64)
    sl = top.slen[s].astype(np.int64)
    if params is None:
        bits = np.full(len(q), np.nan)
        evalue = np.full(len(q), np.nan)
    else:
        raw = score.astype(np.float64)
        bits = np.asarray(stats.bit_score(raw, params), dtype=np.float64).reshape(-1)
        evalue = np.asarray(
            stats.spouge_evalue(raw, qlen, sl, db_residues, params), dtype=np.float64
        ).reshape(-1)
        if max_evalue is not None:
            ok = evalue <= max_evalue
            q, score, s, qlen, sl, bits, evalue = (
                x[ok] for x in (q, score, s, qlen, sl, bits, evalue)
            )
    import pandas as pd  # here, not first: merge_hits imports it on a thread meanwhile

    # the subjects still hit: their ids and titles from their header lines
    used, s = used_and_index(s, len(top.subjects))
    ids, titles = top.sseqids_titles(used)
    sseqid = np.asarray(ids, dtype=object)
    stitle = np.asarray(titles, dtype=object)
    sacc = np.asarray(top.subjects, dtype=object)[used] if len(used) else np.zeros(0, object)
    qseqids = np.asarray(queries.seqids, dtype=object)
    qaccs = np.asarray(queries.ids, dtype=object)

    def text(values):  # object columns: no conversion to pandas' string dtype (~1 s per 1 M rows)
        return pd.Series(values if len(s) else [], dtype=object)

    return pd.DataFrame(
        {
            "qseqid": text(qseqids[q]),
            "sseqid": text(sseqid[s] if len(s) else []),
            "qacc": text(qaccs[q]),
            "sacc": text(sacc[s] if len(s) else []),
            "score": score,
            "bitscore": bits,
            "evalue": evalue,
            "qlen": qlen,
            "slen": sl,
            "stitle": text(stitle[s] if len(s) else []),
        },
        columns=HITS_COLUMNS,
    )


class _EvalueFloor:
    """The merge's E-value screen: ``self(q, score, slen)`` is a mask of the hits whose
    E-value floor (:func:`~swgpu_tools.stats.spouge_evalue_floor`) may pass
    ``max_evalue`` (a hit above it can never pass); :meth:`may` is its cheap screen
    alone, so that the rows it leaves out need not be looked at again."""

    def __init__(self, query_lengths, db_residues: int, params, max_evalue: float):
        self.qlens = np.asarray(query_lengths, dtype=np.int64)
        self.db_residues, self.params = db_residues, params
        self.cut = max_evalue * (1 + 1e-6)
        self.table = None  # the screen's table, made at the first call (stats.LeastPassing)

    def may(self, q, score, slen) -> np.ndarray:
        """The cheap screen alone: a mask of the hits that may pass (a few integer
        operations a hit; every hit :meth:`__call__` keeps is in it).  Its table is
        made once for the first call's scores and kept for calls within them."""
        if len(score) and (self.table is None or not self.table.spans(score.min(), score.max())):
            self.table = stats.LeastPassing(
                self.qlens, int(score.min()), int(score.max()), self.db_residues, self.params,
                self.cut,
            )  # fmt: skip
        return stats.spouge_floor_may_pass(
            self.qlens, q, score, slen, self.db_residues, self.params, self.cut, self.table
        )

    def __call__(self, q, score, slen) -> np.ndarray:
        ok = self.may(q, score, slen)
        rows = np.flatnonzero(ok)  # the floor itself only where the cheap screen allows
        low = stats.spouge_evalue_floor(
            score[rows].astype(np.float64), self.qlens[q[rows]], slen[rows],
            self.db_residues, self.params,
        ).reshape(-1)  # fmt: skip
        ok[rows] = ~(low > self.cut)
        return ok


def top_k_of(parts: list[ShardHits], queries: SequenceSet, top_k: int, threads: int = 1):
    """The top ``top_k`` hits per query of several parts' hits (a scoring job's shards),
    as one :class:`~swgpu_tools.io.hitsfile.ShardHits` in :func:`merge`'s order, with no
    E-value cut.  :func:`merge` of it gives what :func:`merge` of the parts gives (the
    top-k of a union is the top-k of the union of top-k's; the E-value cut comes after
    the places are taken), from a table of queries x ``top_k`` rows at most instead of
    the parts' sum."""
    order_of_query = {q: i for i, q in enumerate(queries.ids)}
    top = _cut(
        [_in_query_order(p, queries, order_of_query) for p in parts], queries, top_k, None, threads
    )
    return ShardHits(
        top.queries,
        top.q.astype(np.int32),
        top.s.astype(np.int32),
        top.score.astype(np.int32),
        top.subjects,
        top.headers,
        top.slen.astype(np.int64),
    )


def candidates(parts: list[ShardHits], top_k: int) -> list[ShardHits]:
    """Each part with only its rows that score at least their query's ``top_k``-th best
    score over all ``parts`` (a scoring job's shards, each per query best first, of
    one query list); the parts as they are where that cannot be found cheaply (one
    part, other query lists, rows not in a few sorted runs).

    :func:`merge` of them gives what :func:`merge` of the parts gives: a query's k-th
    best score over every job's rows is at least its k-th best over these parts, so
    every row that can take a place (ties at the cut included) is kept.  Unlike
    :func:`top_k_of` no tie is decided and the subjects stay as they are, so this
    costs a fraction of the merge's own cut; it leaves the merge about queries x
    ``top_k`` rows of the job instead of the shards' sum (a quarter for four)."""
    if len(parts) < 2 or any(p.queries != parts[0].queries for p in parts[1:]):
        return parts
    n_queries = len(parts[0].queries)
    if not sum(len(p) for p in parts):
        return parts
    runs = _Runs.of_parts([p.q for p in parts], [p.score for p in parts], n_queries)
    if runs is None:
        return parts
    over = runs.counts(n_queries) > top_k
    if not over.any():
        return parts
    kth = np.full(n_queries, np.iinfo(np.int64).min, dtype=np.int64)
    kth[over] = runs.kth(np.flatnonzero(over), top_k)
    rows = runs.at_or_above(kth)  # ascending: each part's rows in turn
    sizes = np.array([len(p) for p in parts])
    starts = np.cumsum(sizes) - sizes
    cuts = np.searchsorted(rows, [*starts.tolist(), int(sizes.sum())])
    out = []
    for k, p in enumerate(parts):
        r = rows[cuts[k] : cuts[k + 1]] - starts[k]
        out.append(ShardHits(p.queries, p.q[r], p.s[r], p.score[r], p.subjects, p.headers, p.slen))
    return out


def _in_query_order(part: ShardHits, queries: SequenceSet, order_of_query: dict) -> ShardHits:
    """The part with its query indices into the query file's order."""
    qmap = np.array([order_of_query.get(a, -1) for a in part.queries], dtype=np.int64)
    if (qmap < 0).any():
        unknown = sorted(a for a, m in zip(part.queries, qmap) if m < 0)
        raise InputError(f"hits name queries that are not in the query file: {unknown[:5]}")
    return ShardHits(
        queries.ids,
        qmap[part.q] if len(part.q) else np.zeros(0, np.int64),
        part.s,
        part.score,
        part.subjects,
        part.headers,
        part.slen,
    )


def _sort_order(q: np.ndarray, score: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Indices sorting rows by query, descending score, ascending accession rank: one
    stable sort of a packed int64 key where the three fit in 63 bits (the parts come
    as sorted runs, which the stable sort merges), else a three-key lexsort."""
    if not len(q):
        return np.zeros(0, np.int64)
    smin, smax = int(score.min()), int(score.max())
    bq, bs, br = (
        int(q.max()).bit_length(),
        (smax - smin).bit_length(),
        int(rank.max()).bit_length(),
    )
    if min(int(q.min()), int(rank.min())) < 0 or bq + bs + br > 63:
        return np.lexsort((rank, -score, q))
    key = (q << (bs + br)) | ((smax - score) << br) | rank
    return np.argsort(key, kind="stable")


def _accession_ranks(acc) -> np.ndarray:
    """Each accession's place among the distinct accessions, in string order (equal
    accessions share one)."""
    if not len(acc):
        return np.zeros(0, np.int64)
    text = np.asarray(acc, dtype=object).astype(str)
    order = np.argsort(text, kind="stable")
    ordered = text[order]
    rank = np.empty(len(text), np.int64)
    rank[order] = np.concatenate([[0], np.cumsum(ordered[1:] != ordered[:-1])])
    return rank


def _top_members(
    q,
    score,
    n_queries: int,
    top_k: int,
    ranks_of,
    passes=None,
    runs: _Runs | None = None,
    may: np.ndarray | None = None,
) -> np.ndarray:
    """The rows among each query's ``top_k`` best by (score desc, accession asc), as a
    mask; with ``passes`` (``passes(rows)``: a mask of which of those rows may pass a
    later filter; asked only about rows that can be in the top k) only those of
    them that pass.

    Each query's k-th best score S decides: rows above S are in, rows below out.
    Rows equal to S compete for the places left by accession (``ranks_of(rows)``:
    each row's place among those rows' accessions in string order, equal accessions
    equal places), looked up only where such a tie straddles the cut and one of
    its rows passes: a tie at the cut is usually far below the E-value cut, so few
    accessions are ever compared.

    The rows usually come as a few runs sorted by (query, descending score): a
    part's hits as written, or a job's shards one after the other.  Given those
    ``runs`` (:class:`_Runs` of these rows), S is found by a binary search over score
    values, and only each run's rows at or above S (a prefix of each query's rows in
    it) are looked at again.  Otherwise (``runs`` None) one integer sort by (query,
    score) gives S.

    ``may`` (with ``passes`` and ``runs``): a mask of the rows that may pass, every
    row ``passes`` keeps among them (a cheap screen): only those are looked at again,
    with the ties at the cut of the queries where one of them is in it
    (:func:`_screened_members`)."""
    n = len(q)
    if runs is not None and passes is not None and may is not None:
        return _screened_members(q, score, n_queries, top_k, ranks_of, passes, runs, may)
    counts = np.bincount(q, minlength=n_queries)
    over = counts > top_k
    if not over.any():
        return np.ones(n, dtype=bool) if passes is None else passes(np.arange(n))
    kth = np.full(n_queries, np.iinfo(np.int64).min, dtype=np.int64)
    if runs is None:
        smin, smax = int(score.min()), int(score.max())
        order = np.argsort(q * (smax - smin + 1) + (smax - score), kind="stable")
        starts = np.cumsum(counts) - counts
        kth[over] = score[order[starts[over] + top_k - 1]]
        return _choose(q, score, kth, over, top_k, ranks_of, passes)
    kth[over] = runs.kth(np.flatnonzero(over), top_k)
    rows = runs.at_or_above(kth)
    mine = _choose(
        q[rows],
        score[rows],
        kth,
        over,
        top_k,
        lambda r: ranks_of(rows[r]),
        None if passes is None else (lambda r: passes(rows[r])),
    )
    member = np.zeros(n, dtype=bool)
    member[rows[mine]] = True
    return member


def _screened_members(q, score, n_queries: int, top_k: int, ranks_of, passes, runs, may):
    """:func:`_top_members` of rows in ``runs``, where ``may`` is a mask of the rows
    that may pass (a superset of those ``passes`` keeps): the merge's last cut, where
    the k-th best score of a query is usually far below the E-value cut, so that
    nearly every row is at or above it but only a few may pass.

    Only the rows that may pass at or above their query's k-th score S are asked
    about (``passes``).  A row above S is in; so is every row of a query with no
    more than ``top_k`` rows.  A row at S is in where all the query's rows at S fit
    the places left above S; else they compete by accession: only in queries where
    one of them may pass, all the query's rows at S taken from the runs (their
    counts above and at S too), none of the other rows looked at."""
    n = len(q)
    member = np.zeros(n, dtype=bool)
    over = runs.counts(n_queries) > top_k
    kth = np.full(n_queries, np.iinfo(np.int64).min, dtype=np.int64)
    if over.any():
        kth[over] = runs.kth(np.flatnonzero(over), top_k)
    look = np.flatnonzero(may & (score >= kth[q]))
    if not len(look):
        return member
    ok = passes(look)
    lq = q[look]
    tie = (score[look] == kth[lq]) & over[lq]
    member[look[ok & ~tie]] = True
    tied_q = np.unique(lq[tie & ok])  # queries where a row at the cut passes
    if not len(tied_q):
        return member
    cut = kth[tied_q]
    above = runs.count_at_least(tied_q, cut + 1)
    places = top_k - above
    straddles = runs.count_at_least(tied_q, cut) - above > places
    fits = np.zeros(n_queries, dtype=bool)
    fits[tied_q[~straddles]] = True  # every row at the cut is in (where it passes)
    at_cut = look[ok & tie]
    member[at_cut[fits[q[at_cut]]]] = True
    contested = tied_q[straddles]
    if len(contested):
        contest = runs.rows_scoring(contested, kth[contested])
        cq = q[contest]
        rank = ranks_of(contest)
        o = np.lexsort((contest, rank, cq))  # by query, accession, then position
        contest, cq = contest[o], cq[o]
        left = np.zeros(n_queries, dtype=np.int64)
        left[contested] = places[straddles]
        c = np.bincount(cq, minlength=n_queries)
        first = np.cumsum(c) - c
        chosen = contest[np.arange(len(contest)) - first[cq] < left[cq]]
        member[chosen[passes(chosen)]] = True
    return member


def _choose(q, score, kth, over, top_k: int, ranks_of, passes) -> np.ndarray:
    """:func:`_top_members`' choice, given each query's k-th score ``kth`` (the
    smallest int64 where the query has no more than ``top_k`` rows: ``over`` False)
    among rows that hold every row of each query at or above it."""
    n_queries = len(kth)
    cut = kth[q]
    ok = np.ones(len(q), dtype=bool)
    if passes is not None:  # asked about the rows at or above their query's cut only
        ok[:] = False
        ask = np.flatnonzero(score >= cut)
        ok[ask] = passes(ask)
    above = score > cut
    tie = (score == cut) & over[q]
    member = (above | ~over[q]) & ok
    places = top_k - np.bincount(q[above], minlength=n_queries)  # left for the ties
    tied = np.bincount(q[tie], minlength=n_queries)
    straddles = tied > places  # else every tied row is in
    member |= tie & ~straddles[q] & ok
    contest = np.flatnonzero(tie & straddles[q])
    if len(contest):  # only queries where a tied row passes need the accessions
        wanted = np.zeros(n_queries, dtype=bool)
        wanted[q[contest[ok[contest]]]] = True
        contest = contest[wanted[q[contest]]]
    if len(contest):
        rank = ranks_of(contest)
        cq = q[contest]
        o = np.lexsort((contest, rank, cq))  # by query, accession, then position
        contest, cq = contest[o], cq[o]
        c = np.bincount(cq, minlength=n_queries)
        first = np.cumsum(c) - c
        within = np.arange(len(contest)) - first[cq]
        member[contest[(within < places[cq]) & ok[contest]]] = True
    return member


#: Sorted runs of rows above which :func:`_top_members` sorts all the rows instead.
MAX_RUNS = 64


class _Runs:
    """Rows as a few runs, each sorted by (query, descending score): the key
    ``q * span + (max - score)`` ascends within each run.  Each query's rows at or above
    a score are a prefix of its rows in each run, found with ``searchsorted``."""

    def __init__(self, runs: list[np.ndarray], bounds: list, span: int, smin: int, smax: int):
        """``runs``: each run's keys; ``bounds``: where each run starts among the rows,
        and their count."""
        self.runs, self.bounds, self.span, self.smin, self.smax = runs, bounds, span, smin, smax

    @classmethod
    def of(cls, q, score) -> _Runs | None:
        """The runs of these rows, or None where there are more than :data:`MAX_RUNS`."""
        return cls.of_parts([q], [score])

    @classmethod
    def of_parts(cls, qs: list, scores: list, n_queries: int | None = None) -> _Runs | None:
        """The runs of several arrays of rows one after the other (queries ``qs``,
        scores ``scores``), each array cut where its key drops: none where each is one
        run, as a job's shards are (their rows are not joined); None where there are
        more than :data:`MAX_RUNS`.  With ``n_queries`` (the queries the searches may
        name) the keys are int32 where every key and searched value fits (half the
        memory), else int64."""
        filled = [(q, x) for q, x in zip(qs, scores) if len(x)]
        smin = min(int(x.min()) for _, x in filled)
        smax = max(int(x.max()) for _, x in filled)
        span = smax - smin + 1
        top = n_queries if n_queries is not None else max(int(q.max()) for q, _ in filled)
        if (top + 1) * span >= 2**62:
            return None
        small = n_queries is not None and (n_queries + 1) * span < 2**31
        kind = np.int32 if small else np.int64
        runs, bounds = [], [0]
        for q, x in filled:
            key = q.astype(kind, copy=False) * kind(span)
            key += kind(smax) - x.astype(kind, copy=False)
            cuts = [0, *(np.flatnonzero(key[1:] < key[:-1]) + 1).tolist(), len(key)]
            runs += [key[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
            base = bounds[-1]
            bounds += [base + b for b in cuts[1:]]
            if len(runs) > MAX_RUNS:
                return None
        return cls(runs, bounds, span, smin, smax)

    @staticmethod
    def _find(run: np.ndarray, values: np.ndarray, side: str) -> np.ndarray:
        """``searchsorted`` with the values in the run's own type (else numpy would
        convert the whole run at each search); every value fits it (see of_parts)."""
        return np.searchsorted(run, values.astype(run.dtype, copy=False), side=side)

    def counts(self, n_queries: int) -> np.ndarray:
        """Each query's rows, over the runs."""
        edges = np.arange(n_queries + 1, dtype=np.int64) * self.span
        return sum(np.diff(self._find(r, edges, "left")) for r in self.runs)

    def _ends(self, queries: np.ndarray, score: np.ndarray) -> list[np.ndarray]:
        """Per run: the end (exclusive, within the run) of each query's rows scoring at
        least ``score`` (one per query; above the highest score: none; below the lowest:
        all)."""
        score = np.clip(score, self.smin, self.smax + 1)
        bound = queries * self.span + (self.smax - score)
        return [self._find(r, bound, "right") for r in self.runs]

    def _starts(self, queries: np.ndarray) -> list[np.ndarray]:
        """Per run: the start (within the run) of each query's rows."""
        return [self._find(r, queries * self.span, "left") for r in self.runs]

    def _rows(self, lows: list[np.ndarray], highs: list[np.ndarray]) -> np.ndarray:
        """The rows of the ranges ``[lows[r][i], highs[r][i])`` within each run ``r``,
        run by run, each run's ranges in turn."""
        pieces = []
        for a, lo, hi in zip(self.bounds[:-1], lows, highs):
            lengths = hi - lo
            total = int(lengths.sum())
            if total:
                shift = np.repeat(lo + a - (np.cumsum(lengths) - lengths), lengths)
                pieces.append(shift + np.arange(total))
        return np.concatenate(pieces) if pieces else np.zeros(0, np.int64)

    def count_at_least(self, queries: np.ndarray, score: np.ndarray) -> np.ndarray:
        """Each of ``queries``' rows scoring at least its ``score``, over the runs."""
        return sum(e - s for s, e in zip(self._starts(queries), self._ends(queries, score)))

    def rows_scoring(self, queries: np.ndarray, score: np.ndarray) -> np.ndarray:
        """The rows (by run, then query) of each of ``queries`` that score exactly its
        ``score``."""
        return self._rows(self._ends(queries, score + 1), self._ends(queries, score))

    def kth(self, wanted: np.ndarray, top_k: int) -> np.ndarray:
        """The ``top_k``-th best score of each query in ``wanted`` (each has more than
        ``top_k`` rows): a binary search over score values, all queries at once."""
        base = wanted * self.span
        first = [self._find(r, base, "left") for r in self.runs]
        # per query: at least top_k rows score >= lo, fewer than top_k score >= hi
        lo = np.full(len(wanted), self.smin, np.int64)
        hi = np.full(len(wanted), self.smax + 1, np.int64)
        while True:
            open_ = np.flatnonzero(hi - lo > 1)
            if not len(open_):
                return lo
            mid = (lo[open_] + hi[open_]) // 2
            c = np.zeros(len(open_), np.int64)  # rows scoring >= mid, over the runs
            for r, f in zip(self.runs, first):
                c += self._find(r, base[open_] + (self.smax - mid), "right") - f[open_]
            enough = c >= top_k
            lo[open_[enough]] = mid[enough]
            hi[open_[~enough]] = mid[~enough]

    def at_or_above(self, kth: np.ndarray) -> np.ndarray:
        """The rows (ascending) that score at least their query's ``kth`` (every row of
        a query whose ``kth`` is below the lowest score)."""
        queries = np.arange(len(kth))
        return self._rows(self._starts(queries), self._ends(queries, kth))


def _top_members_by_ranges(
    q, score, n_queries: int, top_k: int, ranks_of, passes=None, may_of=None, threads=1
) -> np.ndarray:
    """:func:`_top_members` on up to ``threads`` threads, each over a range of
    queries holding about as many rows as the others (numpy's sorts, sums and
    comparisons leave the interpreter's lock), where the rows are not a few sorted
    runs (those take one thread: their choice looks only at the rows near the top).
    Each query's rows are chosen among themselves only, and the rows of a range keep
    their order, so the mask is the one of a single call.  ``may_of()``: a mask of the
    rows that may pass (:func:`_screened_members`), asked where the rows are runs."""
    n = len(q)
    parts = min(int(threads), n // ROWS_PER_THREAD)
    runs = _Runs.of(q, score) if len(q) else None
    if parts < 2 or runs is not None:
        may = may_of() if runs is not None and passes is not None and may_of else None
        return _top_members(q, score, n_queries, top_k, ranks_of, passes, runs, may)
    ends = np.cumsum(np.bincount(q, minlength=n_queries))
    cuts = np.searchsorted(ends, np.arange(1, parts) * (n / parts), side="left") + 1
    bounds = [0, *sorted(set(np.minimum(cuts, n_queries).tolist()) - {0, n_queries}), n_queries]

    def one(a: int, b: int) -> np.ndarray:  # the chosen rows of queries [a, b)
        rows = np.flatnonzero((q >= a) & (q < b))
        if not len(rows):
            return rows
        mine = _top_members(
            q[rows],
            score[rows],
            n_queries,
            top_k,
            lambda r: ranks_of(rows[r]),
            None if passes is None else (lambda r: passes(rows[r])),
        )
        return rows[mine]

    with ThreadPoolExecutor(max_workers=len(bounds) - 1) as pool:
        chosen = list(pool.map(one, bounds[:-1], bounds[1:]))
    member = np.zeros(n, dtype=bool)
    for rows in chosen:
        member[rows] = True
    return member


def _cut(
    parts: list[ShardHits], queries: SequenceSet, top_k: int, passes=None, threads: int = 1
) -> ShardHits:
    """The top ``top_k`` hits per query of ``parts`` (query indices in the query file's
    order), sorted by query, descending score, ascending subject accession; only
    the subjects still hit are kept.  ``passes(q, score, slen)``: a mask of the rows
    that may pass a later filter (the E-value cut); the others are left out (after
    they took their places in the top ``top_k``)."""
    if not parts:
        parts = [ShardHits(queries.ids, np.zeros(0, np.int64), np.zeros(0, np.int64),
                           np.zeros(0, np.int64), [], [], np.zeros(0, np.int64))]  # fmt: skip
    q = np.concatenate([p.q.astype(np.int64) for p in parts])
    score = np.concatenate([p.score.astype(np.int64) for p in parts])
    sub_off = np.cumsum([0] + [len(p.subjects) for p in parts])
    s = np.concatenate([p.s.astype(np.int64) + o for p, o in zip(parts, sub_off)])
    slen = np.concatenate([p.slen.astype(np.int64) for p in parts])

    def accessions(subjects: np.ndarray) -> list[str]:  # of subjects by index, ascending
        bounds = np.searchsorted(subjects, sub_off).tolist()
        return [
            a
            for k, p in enumerate(parts)
            for a in p.accessions(subjects[bounds[k] : bounds[k + 1]] - sub_off[k])
        ]

    def ranks_of(rows: np.ndarray) -> np.ndarray:  # each distinct subject ranked once
        used, at = used_and_index(s[rows], int(sub_off[-1]))
        return _accession_ranks(accessions(used))[at]

    def ok(rows: np.ndarray) -> np.ndarray:
        return passes(q[rows], score[rows], slen[s[rows]])

    def may() -> np.ndarray:  # the rows that may pass (the screen's cheap part)
        return passes.may(q, score, slen[s])

    screen = (ok, may) if passes else (None, None)
    member = (
        _top_members_by_ranges(q, score, len(queries), top_k, ranks_of, *screen, threads)
        if len(q)
        else q > 0
    )
    idx = np.flatnonzero(member)
    used, s_new = used_and_index(s[idx], int(sub_off[-1]))
    names = accessions(used)
    order = _sort_order(q[idx], score[idx], _accession_ranks(names)[s_new])
    idx, s_new = idx[order], s_new[order]
    return ShardHits(
        queries.ids,
        q[idx],
        s_new.reshape(-1).astype(np.int64),
        score[idx],
        names,
        Lines.concat([p.headers for p in parts]).take(used),
        slen[used],
    )
