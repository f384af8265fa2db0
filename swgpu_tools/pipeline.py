"""The workflow's steps, one function each; the Snakemake rules and the
``swgpu`` command call these.

    shard_database  (swgpu_tools.shard)  database FASTA -> shard files + database.json
    score_shard     queries x one shard -> top-k hits of that shard (TSV)
    merge_hits      all shards' hits -> results/hits.tsv (top-k per query, E-values
                    over the whole database)
    traceback_hits  results/hits.tsv -> results/alignments.tsv (CPU alignments)
    search          all of the above in one process, without shard files

In-memory forms (:func:`score`, :func:`merge`, :func:`traceback`) make up the
Python API; the ``*_hits``/``*_shard`` functions read and write files.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from .backend import acquire_gpu, choose_backend, visible_gpus
from .errors import InputError
from .fasta import read_fasta
from .scoring import ScoringScheme
from .sequences import SequenceSet
from .shard import read_database_info, read_shard

SHARD_HITS_COLUMNS = ["qseqid", "sseqid", "score", "slen"]


def stderr_log(message: str) -> None:
    print(f"[swgpu {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _quiet(message: str) -> None:
    pass


# ----------------------------------------------------------------------------
# in-memory steps (the Python API)
# ----------------------------------------------------------------------------

def process_age() -> float | None:
    """Seconds since this process started (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = float(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None


class BackendStart:
    """The scoring backend made ready: GPU chosen and locked, backend checked, and
    for the GPU its CUDA context opened and helper kernels loaded.

    With ``background=True`` this runs on a thread, so that the CUDA driver's
    start-up (seconds on a large GPU) overlaps reading the inputs;
    :meth:`result` waits for it and re-raises its errors.
    """

    def __init__(self, backend: str = "auto", device="auto", log=_quiet,
                 background: bool = False):
        self._args = (backend, device, log)
        self._result = self._error = None
        self._thread = None
        if background:
            import threading

            self._thread = threading.Thread(target=self._run, name="swgpu-backend-start",
                                            daemon=True)
            self._thread.start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            self._result = _start_backend(*self._args)
        except BaseException as exc:  # re-raised in the caller's thread
            self._error = exc

    def result(self):
        """(BackendChoice, GPU number or None, seconds per start-up step)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
        return self._result


def _start_backend(backend, device, log):
    steps = {}
    t = time.perf_counter()
    gpu_id = None
    if backend != "cpu":
        gpu_id = acquire_gpu(device, log=log)
        steps["lock"] = time.perf_counter() - t
        if visible_gpus():
            from .kernels import gpu as gpu_kernels

            gpu_kernels.bind(gpu_id)  # before any CUDA context exists
    t = time.perf_counter()
    choice = choose_backend(backend)
    steps["check"] = time.perf_counter() - t
    if choice.name == "gpu":
        from .kernels import gpu as gpu_kernels

        steps.update(gpu_kernels.warm_up())
    return choice, gpu_id, steps


def score(queries: SequenceSet, database: SequenceSet, scheme: ScoringScheme,
          top_k: int = 500, backend: str = "auto", threads: int | None = None,
          device="auto", log=_quiet, started: BackendStart | None = None,
          stats: dict | None = None) -> pd.DataFrame:
    """Top-k Smith-Waterman hits of each query in ``database``.

    Returns a DataFrame with columns qseqid, sseqid, score, slen, per query (in
    query order) by descending score, ties by ascending database index.
    ``started``: a :class:`BackendStart` begun earlier (its backend and device
    replace ``backend`` and ``device``).  ``stats``: a dict that gets backend,
    reason, device, queries, sequences, residues, cells, kernel_s, gcups.
    """
    if top_k < 1:
        raise InputError(f"top_k must be at least 1, got {top_k}")
    q_enc = scheme.encode(queries, "queries")
    d_enc = scheme.encode(database, "database")
    if started is None:
        started = BackendStart(backend, device, log)
    choice, gpu_id, steps = started.result()
    log(f"backend: {choice.name} ({choice.reason})")
    if threads:
        import numba

        numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
    cells_per_query = queries.lengths.astype(np.float64) * float(database.total_residues)
    start = time.perf_counter()

    def progress(done: int, total: int) -> None:
        elapsed = time.perf_counter() - start
        gcups = cells_per_query[:done].sum() / max(elapsed, 1e-9) / 1e9
        age = process_age() if done == 1 else None
        since = f" (process start to first hits: {age:.2f} s)" if age is not None else ""
        log(f"queries {done}/{total} done, {elapsed:.1f} s, {gcups:.2f} GCUPS so far{since}")

    kwargs = dict(progress=progress)
    if choice.name == "gpu":
        from .kernels import gpu as kernels

        kwargs["device"] = gpu_id
        uuids = visible_gpus()  # which physical GPU: its UUID names its lock file too
        uuid = f" ({uuids[gpu_id]})" if gpu_id < len(uuids) else ""
        log(f"using GPU {gpu_id}{uuid}; start-up "
            + ", ".join(f"{k} {v:.2f} s" for k, v in steps.items()))
    else:
        from .kernels import cpu as kernels
    hits = kernels.search(q_enc, d_enc, scheme.matrix, scheme.gap_open, scheme.gap_extend,
                          top_k, **kwargs)
    elapsed = time.perf_counter() - start
    if stats is not None:
        cells = float(cells_per_query.sum())
        stats.update(backend=choice.name, reason=choice.reason,
                     device=(kwargs.get("device") if choice.name == "gpu" else None),
                     device_uuid=(visible_gpus()[gpu_id] if choice.name == "gpu"
                                  and gpu_id < len(visible_gpus()) else None),
                     queries=len(queries), query_residues=queries.total_residues,
                     sequences=len(database), residues=database.total_residues,
                     cells=cells, kernel_s=elapsed, gcups=cells / max(elapsed, 1e-9) / 1e9,
                     startup_s=steps)
    log(f"scored {len(queries)} queries x {len(database):,} sequences "
        f"({database.total_residues:,} residues) in {elapsed:.2f} s: "
        f"{cells_per_query.sum() / max(elapsed, 1e-9) / 1e9:.2f} GCUPS")
    import pandas as pd

    ids = np.asarray(database.ids, dtype=object)
    qids = np.asarray(queries.ids, dtype=object)
    return pd.DataFrame({
        "qseqid": qids[hits.query_index],
        "sseqid": ids[hits.subject_index],
        "score": hits.score.astype(np.int64),
        "slen": database.lengths[hits.subject_index].astype(np.int64),
    })


def merge(hit_tables: list[pd.DataFrame], queries: SequenceSet, db_sequences: int,
          db_residues: int, scheme: ScoringScheme, top_k: int = 500,
          max_evalue: float | None = 10.0) -> pd.DataFrame:
    """Merge per-shard hits into the final top-k per query with bit scores and E-values.

    Order: queries in input order; per query by descending score, then
    ascending subject id (the same order whatever the sharding).  E-values use
    the size of the whole database, computed as BLAST+ blastp does by default
    (Karlin-Altschul with Spouge's finite-size correction, which also depends on
    the subject length); where BLAST publishes no statistics for
    the scoring scheme, bitscore and evalue are NaN (written as NA) and no
    E-value filter applies.
    """
    import pandas as pd
    from . import stats

    frames = [t for t in hit_tables if len(t)]
    if frames:
        hits = pd.concat(frames, ignore_index=True)
    else:
        hits = pd.DataFrame({c: pd.Series(dtype=object if c.endswith("id") else np.int64)
                             for c in SHARD_HITS_COLUMNS})
    order_of_query = {q: i for i, q in enumerate(queries.ids)}
    unknown = set(hits["qseqid"]) - set(order_of_query)
    if unknown:
        raise InputError(f"hits name queries that are not in the query file: {sorted(unknown)[:5]}")
    hits["_qorder"] = hits["qseqid"].map(order_of_query).astype(np.int64)
    hits = hits.sort_values(["_qorder", "score", "sseqid"], ascending=[True, False, True],
                            kind="mergesort")
    hits = hits.groupby("_qorder", sort=False).head(top_k)
    qlen = pd.Series(queries.lengths, index=range(len(queries)))
    hits["qlen"] = hits["_qorder"].map(qlen).astype(np.int64)
    params = stats.lookup(scheme.matrix_name, scheme.gap_open, scheme.gap_extend)
    if params is None:
        hits["bitscore"] = np.nan
        hits["evalue"] = np.nan
    else:
        raw = hits["score"].to_numpy(np.float64)
        hits["bitscore"] = stats.bit_score(raw, params)
        # BLAST+'s default E-value for blastp: Spouge's finite-size correction
        hits["evalue"] = stats.spouge_evalue(raw, hits["qlen"].to_numpy(np.int64),
                                             hits["slen"].to_numpy(np.int64), db_residues, params)
        if max_evalue is not None:
            hits = hits[hits["evalue"] <= max_evalue]
    return hits[["qseqid", "sseqid", "score", "bitscore", "evalue", "qlen", "slen"]].reset_index(drop=True)


def traceback(hits: pd.DataFrame, queries: SequenceSet, subjects: SequenceSet,
              scheme: ScoringScheme, threads: int | None = None, log=_quiet) -> pd.DataFrame:
    """Alignments (BLAST tabular columns, then ours) for every row of ``hits``."""
    import pandas as pd
    from .alignment import align_many
    from .tables import alignment_columns

    q_index = {q: i for i, q in enumerate(queries.ids)}
    s_index = {s: i for i, s in enumerate(subjects.ids)}
    missing = [s for s in hits["sseqid"].unique() if s not in s_index]
    if missing:
        raise InputError(f"hits name subjects that are not in the database shards: {missing[:5]}")
    qi = hits["qseqid"].map(q_index).to_numpy(np.int64)
    si = hits["sseqid"].map(s_index).to_numpy(np.int64)
    q_enc = scheme.encode(queries, "queries")
    s_enc = scheme.encode(subjects, "database")
    start = time.perf_counter()
    # the CPU: the traceback step of the workflow is a CPU job (no GPU lock); the
    # hits share queries, which the CPU's query lanes exploit
    alignments = align_many(q_enc, s_enc, qi, si, scheme.matrix, scheme.gap_open,
                            scheme.gap_extend, threads=threads, backend="cpu")
    log(f"aligned {len(alignments):,} hits in {time.perf_counter() - start:.2f} s")
    rows = []
    for row, aln, a, b in zip(hits.itertuples(index=False), alignments, qi, si):
        if aln.score != row.score:
            raise RuntimeError(
                f"internal error: traceback score {aln.score} != scan score {row.score} "
                f"for {row.qseqid} vs {row.sseqid}"
            )
        cols = alignment_columns(queries.sequence(a), subjects.sequence(b), aln)
        cols.update(qseqid=row.qseqid, sseqid=row.sseqid, evalue=row.evalue,
                    bitscore=row.bitscore, score=row.score, qlen=row.qlen, slen=row.slen)
        rows.append(cols)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------
# file-level steps (what the workflow rules call)
# ----------------------------------------------------------------------------

def read_queries(path) -> SequenceSet:
    return read_fasta(path)


def write_shard_hits(df: pd.DataFrame, path) -> None:
    from .tables import atomic_write

    with atomic_write(path) as fh:
        df[SHARD_HITS_COLUMNS].to_csv(fh, sep="\t", index=False, lineterminator="\n")


def read_shard_hits(path) -> pd.DataFrame:
    import pandas as pd
    try:
        df = pd.read_csv(path, sep="\t", dtype={"qseqid": str, "sseqid": str,
                                                "score": np.int64, "slen": np.int64},
                         keep_default_na=False)
    except FileNotFoundError:
        raise InputError(f"{os.fspath(path)}: file not found") from None
    except (ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"{os.fspath(path)}: not a shard hits table ({exc})") from None
    if list(df.columns) != SHARD_HITS_COLUMNS:
        raise InputError(f"{os.fspath(path)}: not a shard hits table (columns {list(df.columns)})")
    return df


def score_shard(shard_path, queries_path, out_path, scheme: ScoringScheme, top_k: int = 500,
                backend: str = "auto", threads: int | None = None, device="auto",
                log=stderr_log, stats_path=None) -> pd.DataFrame:
    from .io.stepstats import StepTimer

    timer = StepTimer("score_shard")
    # the GPU's start-up (lock, CUDA context, helper kernels) runs while the inputs are read
    started = BackendStart(backend, device, log, background=backend != "cpu")
    with timer.phase("read"):
        queries = read_queries(queries_path)
        database = read_shard(shard_path)
    log(f"{os.fspath(shard_path)}: {len(database):,} sequences, {database.total_residues:,} residues; "
        f"{len(queries)} queries")
    timer.fields["shard"] = os.path.basename(os.fspath(shard_path))
    with timer.phase("score"):
        hits = score(queries, database, scheme, top_k, threads=threads, log=log, started=started,
                     stats=timer.fields)
    with timer.phase("write"):
        write_shard_hits(hits, out_path)
    timer.fields["hits"] = len(hits)
    timer.write(stats_path)
    log(f"wrote {len(hits):,} hits to {os.fspath(out_path)}")
    return hits


def merge_hits(hit_paths, queries_path, database_info_path, out_path, scheme: ScoringScheme,
               top_k: int = 500, max_evalue: float | None = 10.0, log=stderr_log) -> pd.DataFrame:
    from .tables import write_hits_table

    queries = read_queries(queries_path)
    info = read_database_info(database_info_path)
    tables = [read_shard_hits(p) for p in hit_paths]
    hits = merge(tables, queries, int(info["sequences"]), int(info["residues"]), scheme,
                 top_k, max_evalue)
    write_hits_table(hits, out_path)
    log(f"merged {sum(len(t) for t in tables):,} shard hits from {len(tables)} shards into "
        f"{len(hits):,} hits: {os.fspath(out_path)}")
    return hits


def read_hits(path) -> pd.DataFrame:
    import pandas as pd
    try:
        # bitscore and evalue stay strings: they are written back exactly as merged
        return pd.read_csv(path, sep="\t", dtype={"qseqid": str, "sseqid": str,
                                                 "bitscore": str, "evalue": str},
                           keep_default_na=False)
    except FileNotFoundError:
        raise InputError(f"{os.fspath(path)}: file not found") from None


def load_subjects(shard_paths, wanted: set) -> SequenceSet:
    """The sequences with ids in ``wanted`` from the given shard files."""
    parts = []
    for path in shard_paths:
        shard = read_shard(path)
        keep = [i for i, s in enumerate(shard.ids) if s in wanted]
        if keep:
            parts.append(shard.subset(keep))
    return _concat(parts)


def traceback_hits(hits_path, queries_path, shard_paths, out_path, scheme: ScoringScheme,
                   threads: int | None = None, log=stderr_log) -> pd.DataFrame:
    from .tables import write_alignments_table

    hits = read_hits(hits_path)
    queries = read_queries(queries_path)
    wanted = set(hits["sseqid"])
    subjects = load_subjects(shard_paths, wanted)
    table = traceback(hits, queries, subjects, scheme, threads, log)
    write_alignments_table(table, out_path)
    log(f"wrote {len(table):,} alignments to {os.fspath(out_path)}")
    return table


def _concat(parts: list[SequenceSet]) -> SequenceSet:
    if not parts:
        return SequenceSet([], np.zeros(0, np.uint8), np.zeros(1, np.int64))
    ids = [i for p in parts for i in p.ids]
    residues = np.concatenate([p.residues for p in parts])
    lengths = np.concatenate([p.lengths for p in parts])
    offsets = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return SequenceSet(ids, residues, offsets)


def search(queries_path, database_path, out_dir, scheme: ScoringScheme, top_k: int = 500,
           max_evalue: float | None = 10.0, backend: str = "auto", threads: int | None = None,
           device="auto", log=stderr_log) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Search a query FASTA against a database FASTA; write hits.tsv and alignments.tsv."""
    from .tables import write_alignments_table, write_hits_table

    started = BackendStart(backend, device, log, background=backend != "cpu")
    queries = read_queries(queries_path)
    database = read_fasta(database_path)
    log(f"{os.fspath(database_path)}: {len(database):,} sequences, {database.total_residues:,} residues")
    # sorted by id, as in a shard, so that ties at the top-k boundary fall the same way
    database = database.subset(sorted(range(len(database)), key=database.ids.__getitem__))
    raw = score(queries, database, scheme, top_k, threads=threads, log=log, started=started)
    hits = merge([raw], queries, len(database), database.total_residues, scheme, top_k, max_evalue)
    table = traceback(hits, queries, database, scheme, threads, log)
    os.makedirs(out_dir, exist_ok=True)
    write_hits_table(hits, os.path.join(out_dir, "hits.tsv"))
    write_alignments_table(table, os.path.join(out_dir, "alignments.tsv"))
    log(f"wrote {os.path.join(out_dir, 'hits.tsv')} and {os.path.join(out_dir, 'alignments.tsv')}")
    return hits, table


# ----------------------------------------------------------------------------
# steps added for re-scans, fault handling and the report (workflow rules
# check_shards, keep_previous, changes, plots)
# ----------------------------------------------------------------------------

def check_shards(shard_paths, quarantine_dir=None, log=stderr_log) -> list[str]:
    """Verify shard files (magic, sizes, blake2b); move corrupt ones aside.

    Returns the corrupt paths.  With ``quarantine_dir``, each corrupt or
    truncated shard is moved there (``<name>.<unix time>``) so that the
    workflow's ``shard_db`` checkpoint, whose output is then missing, rebuilds
    it on the next run; without, it is only reported.  Raises InputError naming
    every bad shard when there is one.
    """
    from .shard import read_shard

    bad = []
    for path in shard_paths:
        try:
            read_shard(path)
        except InputError as exc:
            bad.append(os.fspath(path))
            log(f"CORRUPT {exc}")
            if quarantine_dir is not None and os.path.exists(path):
                os.makedirs(quarantine_dir, exist_ok=True)
                dest = os.path.join(quarantine_dir, f"{os.path.basename(os.fspath(path))}.{int(time.time())}")
                os.replace(path, dest)
                log(f"moved {os.fspath(path)} to {dest}; the next workflow run rebuilds it "
                    f"(snakemake reruns shard_db because the shard is missing)")
        else:
            log(f"ok {os.fspath(path)}")
    if bad:
        raise InputError(f"{len(bad)} corrupt or truncated shard file(s): {', '.join(bad)}"
                         + ("; moved aside, run the workflow again to rebuild them"
                            if quarantine_dir is not None else "; re-run the shard step"))
    return bad


def keep_previous(hits_path, alignments_path, out_dir, marker_path, log=stderr_log) -> dict:
    """Snapshot the last scan's tables before the merge replaces them (see swgpu_tools.changes)."""
    from .changes import keep_previous as _keep

    return _keep(hits_path, alignments_path, out_dir, marker_path, log)


def changes(hits_path, marker_path, out_path, queries_path=None, log=stderr_log) -> pd.DataFrame:
    """Write changes.tsv: new, gone and changed-score hits since the previous scan."""
    from .changes import write_changes

    return write_changes(hits_path, marker_path, out_path, queries_path, log)


def plots(hits_path, changes_path, benchmark_paths, log_dir, out_dir, log=stderr_log) -> list[str]:
    """The report's PNG plots (see swgpu_tools.report)."""
    from .report import make_plots

    return make_plots(hits_path, changes_path, benchmark_paths, log_dir, out_dir, log)


def _seq_digest(seqs: SequenceSet, i: int) -> str:
    import hashlib

    return hashlib.blake2b(seqs.residues[seqs.offsets[i]:seqs.offsets[i + 1]].tobytes(),
                           digest_size=16).hexdigest()


def _alignment_code_digest(scheme: ScoringScheme) -> str:
    """What an alignment depends on besides the two sequences: the scheme and the code."""
    import hashlib

    from . import alignment, tables

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{scheme.matrix_name} {scheme.gap_open} {scheme.gap_extend}".encode())
    h.update(np.ascontiguousarray(scheme.matrix).tobytes())
    for mod in (alignment, tables):
        with open(mod.__file__, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def fingerprints_path(alignments_path) -> str:
    """The side file that records what each row of an alignments table was computed from."""
    base = os.fspath(alignments_path)
    if base.endswith(".tsv"):
        base = base[:-4]
    return base + ".fingerprints.json"


def traceback_hits_reusing(hits_path, queries_path, shard_paths, out_path, scheme: ScoringScheme,
                           threads: int | None = None, previous_alignments=None,
                           log=stderr_log) -> pd.DataFrame:
    """:func:`traceback_hits`, reusing rows of a previous alignments table where exact.

    A previous row is reused for a hit when it has the same (qseqid, sseqid,
    score) and its side file (:func:`fingerprints_path`, written next to every
    table this function writes) shows the same query sequence, the same
    subject sequence (blake2b of the residues), the same scoring scheme and
    the same alignment code: then the alignment is the one the traceback
    would compute again.  ``evalue``/``bitscore`` come from the new hits.  The
    output is byte-identical to :func:`traceback_hits`'s.
    """
    import pandas as pd
    import json

    from .tables import ALIGNMENTS_COLUMNS, _INT_COLUMNS, atomic_write, write_alignments_table

    hits = read_hits(hits_path)
    queries = read_queries(queries_path)
    wanted = set(hits["sseqid"])
    subjects = load_subjects(shard_paths, wanted)
    q_index = {q: i for i, q in enumerate(queries.ids)}
    s_index = {s: i for i, s in enumerate(subjects.ids)}
    missing = [s for s in wanted if s not in s_index]
    if missing:
        raise InputError(f"hits name subjects that are not in the database shards: {missing[:5]}")
    code = _alignment_code_digest(scheme)
    fp = {"code": code,
          "queries": {q: _seq_digest(queries, q_index[q]) for q in hits["qseqid"].unique()},
          "subjects": {s: _seq_digest(subjects, s_index[s]) for s in wanted}}

    reuse = {}
    prev_fp_path = fingerprints_path(previous_alignments) if previous_alignments else None
    if prev_fp_path and os.path.exists(previous_alignments) and os.path.exists(prev_fp_path):
        try:
            with open(prev_fp_path) as fh:
                prev_fp = json.load(fh)
            prev = pd.read_csv(previous_alignments, sep="\t", dtype=str, keep_default_na=False)
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            log(f"previous alignments not used ({exc})")
            prev_fp, prev = None, None
        if prev_fp is not None and prev_fp.get("code") == code and list(prev.columns) == ALIGNMENTS_COLUMNS:
            pq, ps = prev_fp.get("queries", {}), prev_fp.get("subjects", {})
            for rec in prev.to_dict("records"):
                q, s = rec["qseqid"], rec["sseqid"]
                if fp["queries"].get(q) is not None and pq.get(q) == fp["queries"][q] \
                        and s in fp["subjects"] and ps.get(s) == fp["subjects"][s]:
                    reuse[(q, s, rec["score"])] = rec
        elif prev_fp is not None:
            log("previous alignments not used: scoring scheme or alignment code changed")
    keys = list(zip(hits["qseqid"], hits["sseqid"], hits["score"].astype(str)))
    todo = [i for i, k in enumerate(keys) if k not in reuse]
    log(f"{len(hits):,} hits: {len(hits) - len(todo):,} alignments reused from "
        f"{previous_alignments if reuse else 'no previous table'}, {len(todo):,} to compute")
    computed = traceback(hits.iloc[todo].reset_index(drop=True), queries, subjects, scheme,
                         threads, log) if todo else pd.DataFrame()
    computed_rows = computed.to_dict("records") if len(computed) else []
    rows, j = [], 0
    for i, hit in enumerate(hits.itertuples(index=False)):
        rec = reuse.get(keys[i])
        if rec is None:
            rows.append(computed_rows[j])
            j += 1
            continue
        row = {c: (int(rec[c]) if c in _INT_COLUMNS else rec[c]) for c in ALIGNMENTS_COLUMNS}
        row.update(evalue=hit.evalue, bitscore=hit.bitscore)
        rows.append(row)
    # the side file first: a table on disk never lacks its fingerprints
    with atomic_write(fingerprints_path(out_path)) as fh:
        json.dump(fp, fh, sort_keys=True)
        fh.write("\n")
    write_alignments_table(rows if rows else pd.DataFrame(), out_path)
    log(f"wrote {len(rows):,} alignments to {os.fspath(out_path)}")
    return pd.DataFrame(rows)
