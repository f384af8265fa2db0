"""A table kept in memory as it was written (``io.tables.keep_for_reading``, how
``swgpu run-steps`` hands the merge's hits table to the traceback) is the
DataFrame that reading the file gives: same values, dtypes and index; the file is
not read then, and is read where it changed since or is read otherwise."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swgpu_tools.io import tables
from swgpu_tools.io.tables import HITS_COLUMNS, keep_for_reading, read_table, write_table

# ids and titles a reader could take for something else
TEXT = st.sampled_from(["s1", '"s1', "NA", "nan", "", "#x", " a ", "1e5", "007", "é", "a b"])


@st.composite
def hit_tables(draw):
    n = draw(st.integers(1, 12))
    texts = lambda: [draw(TEXT) for _ in range(n)]  # noqa: E731
    floats = st.floats(0, 1e6) | st.just(float("nan"))
    df = pd.DataFrame(
        {
            "qseqid": texts(),
            "sseqid": texts(),
            "qacc": texts(),
            "sacc": texts(),
            "score": draw(st.lists(st.integers(-5, 10**6), min_size=n, max_size=n)),
            "bitscore": draw(st.lists(floats, min_size=n, max_size=n)),
            "evalue": draw(st.lists(floats, min_size=n, max_size=n)),
            "qlen": np.arange(n, dtype=np.int32),
            "slen": [draw(st.sampled_from([1, 2, "NA", "3"])) for _ in range(n)],
            "stitle": texts(),
        }
    )
    kind = draw(st.sampled_from(["object", "str", "dict"]))
    if kind == "str":  # text columns already of the reader's dtype
        for c in ("qseqid", "sseqid", "qacc", "sacc", "stitle"):
            df[c] = pd.array(df[c].tolist(), dtype=str)
    return df.to_dict("list") if kind == "dict" else df


def _no_read(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"read the file: {args[:1]}")

    monkeypatch.setattr(pd, "read_csv", refuse)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=hit_tables())
def test_a_kept_table_is_what_reading_it_gives(tmp_path, rows):
    path = tmp_path / "hits.tsv"
    with keep_for_reading([str(path)]):
        write_table(rows, path, HITS_COLUMNS)
        with pytest.MonkeyPatch.context() as mp:
            _no_read(mp)
            kept = read_table(path, HITS_COLUMNS, what="hits table")
        again = read_table(path, HITS_COLUMNS)  # taken once: the file this time
    read = read_table(path, HITS_COLUMNS)
    for got in (kept, again):
        pd.testing.assert_frame_equal(got, read, check_exact=True)
        assert got.dtypes.tolist() == read.dtypes.tolist()
        assert type(got.index) is type(read.index) and got.index.equals(read.index)


def test_a_table_changed_since_or_read_as_text_is_read_from_the_file(tmp_path, monkeypatch):
    rows = pd.DataFrame({c: ["1", "2"] for c in HITS_COLUMNS})
    path = tmp_path / "hits.tsv"
    link = tmp_path / "link.tsv"
    with keep_for_reading([str(link)]):  # the same file by its real path
        os.symlink(path, link)
        write_table(rows, path, HITS_COLUMNS)
        assert read_table(path, text=True)["score"].tolist() == ["1", "2"]  # not taken
        path.write_text(path.read_text().replace("2", "23"))  # its size changes
        assert read_table(link)["score"].tolist() == [1, 23]
    assert tables._kept == {}
    with keep_for_reading([str(path)]):
        write_table(rows, path, HITS_COLUMNS)
        _no_read(monkeypatch)
        assert read_table(link)["score"].tolist() == [1, 2]
