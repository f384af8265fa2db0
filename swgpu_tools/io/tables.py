"""Tab-separated tables: one writer and one reader for every table swgpu makes.

Writing (:func:`write_table`): one header line (unless ``header=False``, BLAST's
headerless ``-outfmt 6``), ``\\n`` line ends, no quoting, written atomically
(:func:`~swgpu_tools.io.atomic.atomic_write`).  Cells are formatted by the
field's kind (:data:`swgpu_tools.io.fields.FIELDS`): E-values and bit scores as
BLAST+ prints them, ``pident`` ``%.3f``, ``ppos`` ``%.2f``, integers plainly,
text as is (a tab or line break inside text is an error).  Missing statistics
are ``NA``.

Reading (:func:`read_table`): no quoting and no NA interpretation, so every id
(``"s1``, ``NA``, ``nan``, ``#x``) comes back as written; columns are text
unless listed as integers.

Tables:

* ``hits.tsv`` (:data:`HITS_COLUMNS`): every merged hit;
* ``alignments.tsv``: the columns the user chose (:func:`swgpu_tools.io.fields.parse_columns`).
"""

from __future__ import annotations

import csv
import math
import os
from contextlib import contextmanager
from itertools import islice
from numbers import Integral

import numpy as np

from ..errors import InputError
from ..stats import NA, format_bitscore, format_evalue
from .atomic import atomic_write
from .fieldnames import FIELDS

#: ``hits.tsv``: ids as BLAST prints them, accessions, scores, statistics, lengths, title.
HITS_COLUMNS = [
    "qseqid",
    "sseqid",
    "qacc",
    "sacc",
    "score",
    "bitscore",
    "evalue",
    "qlen",
    "slen",
    "stitle",
]
#: Integer columns of the tables above.
INT_COLUMNS = {n for n, f in FIELDS.items() if f.kind == "int"} | {"previous_score"}


def format_pident(p) -> str:
    """Percent identity as BLAST+ prints it: ``%.3f`` (``87.500``)."""
    return NA if _missing(p) else ("%.3f" % float(p))


def _missing(x) -> bool:
    if x is None:
        return True
    if isinstance(x, str):
        return False
    try:
        return bool(math.isnan(x))
    except (TypeError, ValueError):
        try:
            import pandas as pd

            return x is pd.NA or x is pd.NaT
        except ImportError:  # pragma: no cover
            return False


def _number(fmt, values) -> list[str]:
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":  # no text cells
        return _formatted_once(fmt, values.astype(np.float64))
    fast = _text_cells(values)  # all text (a table read back): as it is
    if fast is not None:
        return fast
    out = []
    for v in values:
        if isinstance(v, str):
            out.append(_text_cell(v, "number"))
        else:
            out.append(fmt(None if _missing(v) else float(v)))
    return out


def _formatted_once(fmt, values: np.ndarray) -> list[str]:
    """``fmt`` of each value (None for NaN), each distinct value formatted once: values
    are grouped by their bits (so -0.0 and 0.0, or two NaNs, are not taken for one
    another), and a column of few values (bit scores: one per raw score) costs a
    few hundred calls instead of one a row."""

    def each(vs: np.ndarray) -> list[str]:
        return [fmt(None if v != v else v) for v in vs.tolist()]

    if len(values) < 64:
        return each(values)
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    distinct, first, inverse = np.unique(bits, return_index=True, return_inverse=True)
    if len(distinct) * 2 > len(values):  # mostly distinct (E-values): one call a row
        return each(values)
    cells = each(values[first])
    return [cells[i] for i in inverse.reshape(-1).tolist()]


def _text_cell(x, column: str) -> str:
    if not isinstance(x, str):
        raise ValueError(f"column {column!r}: expected text, got {x!r}")
    if "\t" in x or "\n" in x or "\r" in x:
        raise ValueError(f"column {column!r}: value {x!r} contains a tab or line break")
    return x


def _kind(name: str) -> str:
    return FIELDS[name].kind if name in FIELDS else ("int" if name in INT_COLUMNS else "str")


def format_column(name: str, values) -> list[str]:
    """The cells of one column as text, by the field's kind."""
    kind = _kind(name)
    if kind == "evalue":
        return _number(format_evalue, values)
    if kind == "bitscore":
        return _number(format_bitscore, values)
    if kind == "pct3":
        return _number(lambda v: NA if v is None else "%.3f" % v, values)
    if kind == "pct2":
        return _number(lambda v: NA if v is None else "%.2f" % v, values)
    if kind == "int":
        fast = _int_cells(values)
        if fast is not None:
            return fast
        out = []
        for v in values:
            if isinstance(v, (Integral, np.integer)):
                out.append(str(int(v)))
            elif isinstance(v, str) and (v.lstrip("-").isdigit() or v == NA):
                out.append(v)
            elif isinstance(v, (float, np.floating)) and float(v).is_integer():
                out.append(str(int(v)))
            elif _missing(v):
                out.append(NA)
            else:
                raise ValueError(f"column {name!r}: expected an integer, got {v!r}")
        return out
    fast = _text_cells(values)
    return fast if fast is not None else [_text_cell(v, name) for v in values]


def _int_cells(values) -> list[str] | None:
    """The cells of a column of plain ints at once, or None to take the checked path."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "iu":
            return [str(v) for v in values.tolist()]
        return None
    if all(type(v) is int for v in values):  # noqa: E721 (bool is not a cell)
        return [str(v) for v in values]
    return None


def _text_cells(values) -> list[str] | None:
    """A column of str without tabs or line breaks as it is, or None to take the
    checked path (which names the bad value)."""
    values = values if isinstance(values, list) else list(values)
    try:  # join takes only text; a cell of a subclass of str is text too, written as it is
        joined = "\x00".join(values)
    except TypeError:
        return None
    if "\t" in joined or "\n" in joined or "\r" in joined:
        return None
    return values


def _column_values(rows, name: str):
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        pd = None
    if pd is not None and isinstance(rows, pd.DataFrame):
        col = rows[name]
        if col.dtype.kind in "iuf":  # numbers: formatted from the array (no per-cell checks)
            return col.to_numpy()
        return col.tolist()
    vals = rows[name]
    if isinstance(vals, np.ndarray):
        # numbers: formatted from the array, as a DataFrame's (the same cells)
        return vals if vals.dtype.kind in "iuf" else vals.tolist()
    return list(vals)


def _has_column(rows, name: str) -> bool:
    try:
        return name in rows.columns  # DataFrame
    except AttributeError:
        return name in rows


def _n_rows(rows) -> int:
    if hasattr(rows, "columns"):
        return len(rows)
    for v in rows.values():
        return len(v)
    return 0


def write_table(rows, path, columns: list[str], header: bool = True) -> None:
    """Write ``rows`` (a DataFrame or a dict of columns) atomically as TSV with ``columns``."""
    n = _n_rows(rows)
    missing = [c for c in columns if not _has_column(rows, c)]
    if missing and n:
        raise ValueError(f"table is missing columns {missing}")
    cols = [column_cells(rows, c) for c in columns] if n else []
    with atomic_write(path) as fh:
        if header:
            fh.write("\t".join(columns) + "\n")
        write_rows(fh, cols)
    if _kept and n and header and os.path.realpath(path) in _kept:
        _keep(path, rows, columns, cols)


def column_cells(rows, name: str) -> list[str]:
    """The cells of column ``name`` of ``rows`` (a DataFrame or a dict of columns) as
    :func:`write_table` writes them."""
    return format_column(name, _column_values(rows, name))


def write_rows(fh, cols: list[list[str]]) -> None:
    """The rows of the columns of cells ``cols``, tab-separated, a line each."""
    rows = map("\t".join, zip(*cols))
    while True:
        lines = list(islice(rows, 65536))
        if not lines:
            return
        fh.write("\n".join(lines) + "\n")


#: While :func:`keep_for_reading` is on: the tables :func:`write_table` writes to be
#: read again by this process, by real path: None until written, then (the file's
#: stat, the DataFrame :func:`read_table` would read from it).
_kept: dict[str, tuple | None] = {}


@contextmanager
def keep_for_reading(paths):
    """Within it, a table :func:`write_table` writes (with a header) at one of ``paths``
    is kept in memory as :func:`read_table` would read it, and the first
    :func:`read_table` of that file (unchanged since, with the header and integer
    columns) takes it instead of reading the file: ``swgpu run-steps``' traceback takes
    the hits table that the merge before it wrote."""
    names = {os.path.realpath(p) for p in paths}
    saved = {k: _kept[k] for k in names if k in _kept}
    _kept.update(dict.fromkeys(names))
    try:
        yield
    finally:
        for k in names:
            _kept.pop(k, None)
        _kept.update(saved)


def _text_dtype():
    """The dtype :func:`read_table`'s reader gives text columns (``str``)."""
    import pandas as pd

    return pd.Series(["x"], dtype=str).dtype


def _keep(path, rows, columns: list[str], cells: list[list[str]]) -> None:
    """Keep the table just written at ``path`` (``cells``: its columns' text, from
    ``rows``) as :func:`read_table` would read it.  Text columns that the writer
    took as they were (already of the reader's text dtype) and integer columns of
    integers are taken from ``rows``, without a conversion of every cell; the
    others are made from their text, as the reader makes them."""
    import pandas as pd

    # the reader renames repeated columns, and skips the empty lines of a one-column table
    if len(set(columns)) != len(columns) or len(columns) < 2:
        return
    text = _text_dtype()
    frame = isinstance(rows, pd.DataFrame)
    out = {}
    for name, col in zip(columns, cells):
        src = rows[name] if frame else None
        kind = _kind(name)
        if kind == "int" and src is not None and src.dtype.kind == "i":
            out[name] = pd.Series(src.to_numpy(np.int64))  # no NA: the reader's int64
            continue
        if "\x00" in "".join(col):  # the reader's handling of NUL is its own
            return
        if kind == "str" and src is not None and src.dtype == text:
            out[name] = pd.Series(src.array)  # written as they are
        else:
            out[name] = pd.Series(pd.array(col, dtype=str))
    df = _as_read(pd.DataFrame(out), os.fspath(path), text=False)
    _kept[os.path.realpath(path)] = (_stat_key(path), df)


def _stat_key(path):
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def _taken(name: str, header: bool, text: bool):
    """The DataFrame kept for the table at ``name`` (:func:`keep_for_reading`), taken
    once, if the file is unchanged since it was written and read as written; else None."""
    real = os.path.realpath(name)
    entry = _kept.get(real)
    if entry is None or not header or text:
        return None
    try:
        if _stat_key(name) != entry[0]:
            return None
    except OSError:
        return None
    _kept[real] = None
    return entry[1]


def read_table(
    path,
    columns: list[str] | None = None,
    header: bool = True,
    what: str = "table",
    text: bool = False,
):
    """Read a TSV written by :func:`write_table` into a DataFrame of text and integer columns.

    No quoting and no NA interpretation: ids come back exactly as written.
    ``columns``: the columns it must have (in this order when ``header`` is
    False).  Integer columns (:data:`INT_COLUMNS`) are converted unless they
    hold ``NA``; with ``text`` every column stays text.  InputError names the file
    when it is missing or not such a table.
    """
    import pandas as pd

    name = os.fspath(path)
    kept = _taken(name, header, text) if _kept else None
    if kept is not None:
        df = kept
    else:
        try:
            df = pd.read_csv(
                name,
                sep="\t",
                quoting=csv.QUOTE_NONE,
                keep_default_na=False,
                na_filter=False,
                dtype=str,
                header=0 if header else None,
                names=None if header else columns,
                comment=None,
                lineterminator="\n",
                engine="c",
            )
        except FileNotFoundError:
            raise InputError(f"{name}: file not found") from None
        except pd.errors.EmptyDataError:
            df = pd.DataFrame({c: pd.Series(dtype=str) for c in (columns or [])})
        except (ValueError, pd.errors.ParserError) as exc:
            raise InputError(f"{name}: not a {what} ({exc})") from None
    if columns is not None:
        lacking = [c for c in columns if c not in df.columns]
        if lacking:
            raise InputError(
                f"{name}: not a {what}: columns {lacking} are missing (it has {list(df.columns)})"
            )
    return df if kept is not None else _as_read(df, name, text)


def _as_read(df, name: str, text: bool):
    """``df`` (text columns) with its integer columns (:data:`INT_COLUMNS`) as int64
    where none holds ``NA``, as :func:`read_table` gives it; all text with ``text``."""
    for c in [] if text else df.columns:
        if c in INT_COLUMNS and len(df) and not (df[c] == NA).any():
            try:
                df[c] = df[c].astype(np.int64)
            except ValueError:
                raise InputError(
                    f"{name}: column {c} holds a value that is not an integer"
                ) from None
    return df
