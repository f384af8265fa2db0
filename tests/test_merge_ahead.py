"""The merge made ahead by the only scoring job (swgpu_tools/steps/merge_ahead.py): the
merge step takes its table only where the inputs and options are those it was made
with, and the table is then the bytes the merge step makes itself."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.io.fasta import read_fasta
from swgpu_tools.io.hitsfile import ShardHits, write_shard_hits
from swgpu_tools.scoring import ScoringScheme
from swgpu_tools.steps import merge_ahead
from swgpu_tools.steps.merge_hits import merge_hits

SCHEME = ScoringScheme()


def _inputs(root, seed: int, n_queries: int = 6, n_subjects: int = 40, per: int = 12):
    """results/ with database.json, one job's hit table (each query's rows best first,
    ties included) and a query file; (table path, queries path, info path, ShardHits)."""
    rng = np.random.default_rng(seed)
    results = root / "results"
    (results / "shards").mkdir(parents=True)
    (results / "hits").mkdir()
    info = results / "shards" / "database.json"
    info.write_text(
        json.dumps({"sequences": n_subjects, "residues": 50_000, "shards": [{"file": "x.swdb"}]})
    )
    queries = root / "q.fasta"
    queries.write_text(
        "".join(f">q{i}\n{'ACDEFGHIKLMNPQRSTVWY' * (2 + i)}\n" for i in range(n_queries))
    )
    q, s, score = [], [], []
    for i in range(n_queries):
        subj = rng.choice(n_subjects, per, replace=False)
        sc = rng.integers(15, 60, per)  # narrow: many ties and E-values near the cut
        o = np.lexsort((subj, -sc))
        q += [i] * per
        s += subj[o].tolist()
        score += sc[o].tolist()
    accs = [f"S{rng.integers(0, 10**6):06d}{k}" for k in range(n_subjects)]
    hits = ShardHits(
        [f"q{i}" for i in range(n_queries)],
        np.array(q, np.int32),
        np.array(s, np.int32),
        np.array(score, np.int32),
        accs,
        [f"sp|{a}|X protein {k}" for k, a in enumerate(accs)],
        rng.integers(30, 900, n_subjects).astype(np.int64),
    )
    table = results / "hits" / "shard-0000.npz"
    write_shard_hits(table, hits)
    return table, queries, info, hits


def _ahead(table, queries, info, hits, top_k, max_evalue, dbsize=None):
    merge_ahead.note_filters(str(table.parent.parent), max_evalue, dbsize)
    filters = merge_ahead.filters_for(table)
    assert filters == {"max_evalue": max_evalue, "dbsize": dbsize}
    merge_ahead.make_ahead(
        table, hits, queries, read_fasta(queries), info, SCHEME, top_k, filters, 1
    )
    return table.parent.parent / "internal"


def _merge(table, queries, info, out, top_k, max_evalue, dbsize=None):
    return merge_hits([table], queries, info, out, SCHEME, top_k, max_evalue, dbsize)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    top_k=st.integers(1, 14),
    max_evalue=st.sampled_from([10.0, 1e-3, 1e3]),
    dbsize=st.sampled_from([None, 10**9]),
)
def test_the_table_made_ahead_is_the_merge_steps(tmp_path_factory, seed, top_k, max_evalue, dbsize):
    root = tmp_path_factory.mktemp("ahead")
    table, queries, info, hits = _inputs(root, seed)
    want = _merge(table, queries, info, root / "want.tsv", top_k, max_evalue, dbsize)
    assert want is not None  # nothing made ahead yet: merged
    internal = _ahead(table, queries, info, hits, top_k, max_evalue, dbsize)
    assert (internal / merge_ahead.AHEAD).exists()
    assert _merge(table, queries, info, root / "got.tsv", top_k, max_evalue, dbsize) is None
    assert (root / "got.tsv").read_bytes() == (root / "want.tsv").read_bytes()
    assert not (internal / merge_ahead.AHEAD).exists()  # taken once
    stats = root / "s.json"
    merge_hits([table], queries, info, root / "again.tsv", SCHEME, top_k, max_evalue, dbsize,
               stats_path=stats)  # fmt: skip
    assert "made_ahead_s" not in json.loads(stats.read_text())


@pytest.mark.parametrize(
    "change",
    ["max_evalue", "top_k", "dbsize", "queries", "database_info", "table", "off", "two tables"],
)
def test_the_merge_step_merges_itself_where_anything_differs(tmp_path, monkeypatch, change):
    table, queries, info, hits = _inputs(tmp_path, 7)
    internal = _ahead(table, queries, info, hits, 5, 10.0)
    top_k, max_evalue, dbsize, paths = 5, 10.0, None, [table]
    if change == "max_evalue":
        max_evalue = 1e-3
    elif change == "top_k":
        top_k = 4
    elif change == "dbsize":
        dbsize = 10**9
    elif change == "queries":
        queries.write_text(queries.read_text() + ">extra\nACDE\n")
    elif change == "database_info":
        info.write_text(info.read_text() + "\n")
    elif change == "table":  # written again (as a scoring job would, after its discard)
        write_shard_hits(table, hits)
    elif change == "off":
        monkeypatch.setenv("SWGPU_MERGE_AHEAD", "0")
    else:
        other = table.parent / "shard-0001.npz"
        write_shard_hits(other, hits)
        paths = [table, other]
    out = tmp_path / "hits.tsv"
    got = merge_hits(paths, queries, info, out, SCHEME, top_k, max_evalue, dbsize)
    assert got is not None  # merged here
    if change not in ("off", "two tables"):  # a key of other inputs is removed
        assert not (internal / merge_ahead.KEY).exists()


def test_a_touched_table_is_still_the_one_made_ahead(tmp_path):
    """Snakemake touches a job's outputs when the job ends: the table's times are not
    in the key (the job removes the key before it writes the table)."""
    table, queries, info, hits = _inputs(tmp_path, 3)
    _ahead(table, queries, info, hits, 5, 10.0)
    os.utime(table, ns=(7, 7))
    assert _merge(table, queries, info, tmp_path / "hits.tsv", 5, 10.0) is None
    merge_ahead.discard(table)
    assert not (table.parent.parent / "internal" / merge_ahead.KEY).exists()


def test_without_a_note_of_the_filters_nothing_is_made_ahead(tmp_path, monkeypatch):
    table, *_ = _inputs(tmp_path, 1)
    assert merge_ahead.filters_for(table) is None
    merge_ahead.note_filters(str(tmp_path / "results"), 10.0, None)
    assert merge_ahead.filters_for(table) == {"max_evalue": 10.0, "dbsize": None}
    monkeypatch.setenv("SWGPU_MERGE_AHEAD", "0")
    assert merge_ahead.filters_for(table) is None
