#!/usr/bin/env python3
"""GPU scan benchmark: per-query and overall GCUPS of swgpu_tools.kernels.gpu.

    python benchmarks/gpu_bench.py --db bench_db.fasta --queries bench_queries.fasta \
        [--top-k 10] [--mode auto|s16|h16|s32] [--repeat 3] [--json out.json]

GCUPS = query length x database residues / scan seconds / 1e9 (database already
resident on the GPU; median of --repeat runs).  Overall: all queries' cells over
the wall clock of the whole search.  Per query: the time from the previous
query's top hits being back on the host to this query's (with queries
pipelined, --pipeline 2 or 3, the next queries' kernels already run meanwhile, so
this is an attribution; with qp2 the queries share tiles, and a query's time is its
share of its tiles' GPU time by real rows; ``--copies K`` measures each query's own throughput, and
``--copies-rows 4096`` each query in a screen of its copies, at least 4,096 residues).
``--shard 0/4`` scores a quarter of the database picked as the workflow's shards
are (crc32 of the id), ``--pipeline 1,2`` compares one and two queries in flight.

It also measures:
* cold compile: every kernel this database needs, compiled into an empty
  kernel cache (a fresh SWGPU_CACHE_DIR in a temp folder), in a child process;
* warm start: a new process with that cache warm, from interpreter start to
  the first query's hits (import + upload of a small database + first kernels).

Subcommand ``--child-start`` is internal (used for those two measurements).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

T_START = time.perf_counter()

import numpy as np  # noqa: E402


def _load(db_path, q_path, matrix="BLOSUM62", gap_open=11, gap_extend=1):
    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.scoring import ScoringScheme

    scheme = ScoringScheme(matrix, gap_open, gap_extend)
    db = read_fasta(db_path)
    qs = read_fasta(q_path)
    return scheme, db, qs, scheme.encode(db, db_path), scheme.encode(qs, q_path)


def child_start(args) -> None:
    """Import, upload ``--db``, score the first query of ``--queries``; print timings as JSON."""
    t_imp0 = time.perf_counter()
    from swgpu_tools.kernels import gpu

    t_imp = time.perf_counter()
    scheme, db, qs, edb, eqs = _load(args.db, args.queries)
    t_read = time.perf_counter()
    s = gpu.GpuSearcher.from_scheme(edb, scheme, mode=args.mode)
    pre = gpu.precompile(jobs=args.jobs) if args.precompile else None
    t_up = time.perf_counter()
    # every partition shape of this query's plan compiles (or loads) here
    s.search(eqs.__class__(eqs.codes[: eqs.offsets[1]], eqs.offsets[:2].copy()), args.top_k)
    t_first = time.perf_counter()
    print(
        json.dumps(
            {
                "precompile_all": pre,
                "import_s": t_imp - t_imp0,
                "process_to_import_s": t_imp - T_START,
                "read_s": t_read - t_imp,
                "upload_s": t_up - t_read,
                "first_query_s": t_first - t_up,
                "process_to_first_hits_s": t_first - T_START,
                "mode": s.mode,
            }
        )
    )


def _device_info():
    info = {}
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
        info["nvidia_smi"] = out.stdout.strip()
    except Exception as exc:  # pragma: no cover - no nvidia-smi
        info["nvidia_smi"] = f"unavailable: {exc}"
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "swgpu_tools", "benchmarks"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        )
        here = rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
        # the device tool's copy has a stale .git: the caller's SWGPU_COMMIT wins
        info["commit"] = os.environ.get("SWGPU_COMMIT") or here or "unknown"
    except Exception:
        info["commit"] = "unknown"
    return info


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument(
        "--mode",
        default="auto",
        help="kernel mode(s), comma-separated to compare in one process: auto, s16, h16, s32 "
        "(the p16/w16 profile modes and the ':echain'/':minbN' experiments of issue 14 are "
        "at commit 4b0bcaa, see RESULTS-gpu.md); MODE@V+V: a kernel variant of "
        "$SWGPU_KERNEL_VARIANT (e.g. s16@nolob+u1+b0, the s16 kernel before run 56)",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--pipeline",
        default="3",
        help="queries in flight, comma-separated values to compare (default 3, "
        "the searcher's default)",
    )
    ap.add_argument(
        "--copies",
        type=int,
        default=0,
        help="also time each query as this many copies of itself in one search",
    )
    ap.add_argument(
        "--copies-rows",
        type=int,
        default=0,
        help="with --copies 0: as many copies of each query as make at least this many "
        "residues (a screen of that query; 4096 = one chain of short queries)",
    )
    ap.add_argument(
        "--shard",
        default="all",
        help="databases: 'all' and/or shards 'K/N' (crc32(id) %% N == K), comma-separated",
    )
    ap.add_argument("--json", default=None, help="write all numbers here")
    ap.add_argument(
        "--start-db",
        default=None,
        help="small database for the cold-compile / warm-start child runs (default: --db)",
    )
    ap.add_argument("--skip-start", action="store_true", help="skip cold/warm start measurements")
    ap.add_argument("--child-start", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--precompile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="processes for compiling the whole kernel menu in the cold-start run",
    )
    args = ap.parse_args()
    if args.child_start:
        child_start(args)
        return 0

    result = {"args": vars(args), "python": platform.python_version(), **_device_info()}
    starts = {}
    if not args.skip_start:
        cache = tempfile.mkdtemp(prefix="swgpu-cold-")
        env = dict(os.environ, SWGPU_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child-start",
            "--db",
            args.start_db or args.db,
            "--queries",
            args.queries,
            "--mode",
            args.mode,
            "--top-k",
            str(args.top_k),
        ]
        for label in ("cold", "warm", "cold-parallel"):
            t0 = time.perf_counter()
            if label == "cold-parallel":  # empty cache again: the whole menu, in parallel
                cache = tempfile.mkdtemp(prefix="swgpu-cold2-")
                env = dict(
                    os.environ, SWGPU_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba")
                )
                run = cmd + ["--precompile"] + (["--jobs", str(args.jobs)] if args.jobs else [])
            else:
                run = cmd
            out = subprocess.run(run, capture_output=True, text=True, env=env)
            wall = time.perf_counter() - t0
            if out.returncode != 0:
                print(
                    f"{label} start child failed:\n{out.stderr[-3000:]}",
                    file=sys.stderr,
                    flush=True,
                )
                starts[label] = {"failed": out.stderr[-500:], "wall_s": wall}
                continue
            starts[label] = json.loads(out.stdout.strip().splitlines()[-1])
            starts[label]["wall_s"] = wall
            print(f"{label} start: {json.dumps(starts[label])}", flush=True)
        result["start"] = starts

    from numba import cuda

    from swgpu_tools.kernels import gpu

    scheme, db_all, qs, edb_all, eqs = _load(args.db, args.queries)
    result["variants"] = []
    for shard in args.shard.split(","):
        db, edb = _shard(db_all, edb_all, shard)
        for mode in args.mode.split(","):
            mode, _, variant = mode.partition("@")  # s16@nolob+u1: a kernel variant
            if variant or "@" in args.mode:
                from swgpu_tools.kernels.gpu import cache, codegen

                codegen.set_variant(variant.replace("+", ","))
                cache.forget_kernels()
            t0 = time.perf_counter()
            s = gpu.GpuSearcher.from_scheme(edb, scheme, mode=mode)
            cuda.synchronize()
            upload = time.perf_counter() - t0
            residues = edb.total_residues
            print(
                f"\n=== database {shard}: {len(edb)} sequences, {residues} residues; "
                f"upload {upload:.2f} s; mode {s.mode}",
                flush=True,
            )
            for depth in [int(d) for d in args.pipeline.split(",")]:
                s.pipeline_depth = depth
                row = _bench(s, db, qs, edb, eqs, args)
                row.update(
                    {
                        "database": shard,
                        "residues": residues,
                        "sequences": len(edb),
                        "upload_s": upload,
                        "mode": s.mode + (f"@{variant}" if variant else ""),
                        "pipeline_depth": depth,
                    }
                )
                result["variants"].append(row)
            del s
    _same_hits(result["variants"])
    print("\nsummary (overall = all queries' cells / wall clock of the whole search):")
    for r in result["variants"]:
        print(
            f"  {r['database']:<6} {r['mode']:<10} depth {r['pipeline_depth']}: "
            f"overall {r['overall_gcups']:.1f} GCUPS "
            f"(sum of per-query times: {r['overall_sum_gcups']:.1f}), min per-query "
            f"{r['min_query_gcups']:.1f}, max {r['max_query_gcups']:.1f}"
            + (
                f"; {args.copies or 'screen'} copies per query: "
                f"min {min(c['gcups'] for c in r['copies']):.1f}, "
                f"max {max(c['gcups'] for c in r['copies']):.1f}"
                if r.get("copies")
                else ""
            )
        )
    first = result["variants"][0]
    result.update(
        {
            k: first[k]
            for k in (
                "residues",
                "sequences",
                "upload_s",
                "mode",
                "queries",
                "total_scan_s",
                "overall_gcups",
            )
        }
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


def _same_hits(rows) -> None:
    """Every variant of one database must report the same top hits (printed, not raised)."""
    first = {}
    for r in rows:
        ref = first.setdefault(r["database"], r)
        same = r["top_hits"] == ref["top_hits"]
        r["hits_equal_first"] = same
        if not same:
            print(f"!! {r['database']} {r['mode']}: top hits differ from {ref['mode']}", flush=True)


def _shard(db, edb, spec):
    """The whole database ("all") or shard K of N ("K/N": ids with crc32(id) % N == K, as
    the workflow's shards)."""
    if spec == "all":
        return db, edb
    from types import SimpleNamespace

    from swgpu_tools.io.shardfile import shard_of

    k, n = (int(v) for v in spec.split("/"))
    idx = np.array([i for i, x in enumerate(db.ids) if shard_of(x, n) == k], dtype=np.int64)
    sub = SimpleNamespace(ids=[db.ids[i] for i in idx])  # only the ids are shown
    codes = np.concatenate([edb.codes[edb.offsets[i] : edb.offsets[i + 1]] for i in idx])
    offsets = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(np.diff(edb.offsets)[idx], out=offsets[1:])
    return sub, edb.__class__(codes, offsets)


def _bench(s, db, qs, edb, eqs, args) -> dict:
    """Warm-up pass, then ``--repeat`` timed searches; prints the per-query table."""
    t0 = time.perf_counter()
    s.search(eqs, args.top_k)
    print(
        f"[depth {s.pipeline_depth}] warm-up pass over all queries: {time.perf_counter() - t0:.2f} s "
        f"(plans {s.plan_seconds:.2f} s)",
        flush=True,
    )
    chained = [len(u) for u in getattr(s, "units", []) if len(u) > 1]
    if getattr(s, "tile_seconds", None):  # qp2: units are groups of queries, not chains
        print(f"qp2: {len(s.units)} groups of {', '.join(str(len(u)) for u in s.units)} queries")
    elif chained:  # a chain's time is shared among its members by length (kernels/gpu/chains.py)
        print(
            f"units: {len(s.units)} ({len(chained)} chains of {', '.join(map(str, chained))} "
            f"queries; {len(s.units) - len(chained)} alone)",
            flush=True,
        )
    residues = edb.total_residues
    nq = len(eqs)
    times = np.zeros((args.repeat, nq))
    walls = []
    rescored = np.zeros(nq, dtype=np.int64)
    hits = None
    for rep in range(args.repeat):
        th = s.search(eqs, args.top_k)
        walls.append(s.scan_seconds)
        for qi, _L, sec in s.timings:
            times[rep, qi] = sec
        if hits is None:
            hits = th
    if getattr(s, "tile_seconds", None):  # the last search's qp2 tiles
        ts = np.asarray(s.tile_seconds) * 1e3
        print(
            f"qp2 tiles: {len(ts)}, GPU {ts.sum() / 1e3:.3f} s, min / median / max "
            f"{ts.min():.1f} / {np.median(ts):.1f} / {max(ts):.1f} ms; a query's time below is "
            "its share of its tiles' GPU time (by real rows) of the search's wall clock",
            flush=True,
        )
    # count 16-bit overflow re-scores per query (one extra pass, not timed)
    tables = {
        "letters": sorted(set(np.flatnonzero(np.bincount(eqs.codes, minlength=256)).tolist()))
    }
    tables[s.mode] = s._table(s.mode, tables["letters"])
    for qi in range(nq):
        rescored[qi] = s.score_query(eqs.codes[eqs.offsets[qi] : eqs.offsets[qi + 1]], tables)

    med = np.median(times, axis=0)
    qlens = np.diff(eqs.offsets)
    rows = []
    print(
        f"\n{'query':<16}{'len':>6}{'scan_s':>10}{'GCUPS':>10}{'spread%':>9}{'rescored':>9}  top hit"
    )
    for qi in range(nq):
        gc = qlens[qi] * residues / med[qi] / 1e9
        spread = (times[:, qi].max() - times[:, qi].min()) / med[qi] * 100
        sel = np.flatnonzero(hits.query_index == qi)
        top = f"{db.ids[hits.subject_index[sel[0]]]}={hits.score[sel[0]]}" if len(sel) else "-"
        rows.append(
            {
                "query": qs.ids[qi],
                "length": int(qlens[qi]),
                "scan_s": float(med[qi]),
                "gcups": float(gc),
                "times": times[:, qi].tolist(),
                "rescored": int(rescored[qi]),
                "top": top,
            }
        )
        print(
            f"{qs.ids[qi]:<16}{qlens[qi]:>6}{med[qi]:>10.4f}{gc:>10.1f}{spread:>9.1f}"
            f"{rescored[qi]:>9}  {top}"
        )
    total = float(med.sum())
    wall = float(np.median(walls))
    cells = float(qlens.sum()) * residues
    overall = cells / wall / 1e9
    print(
        f"\nTOTAL scan {wall:.3f} s (wall clock, median of {args.repeat}), overall {overall:.1f} GCUPS; "
        f"sum of per-query medians {total:.3f} s ({cells / total / 1e9:.1f} GCUPS); "
        f"min per-query {min(r['gcups'] for r in rows):.1f} GCUPS",
        flush=True,
    )
    out = {
        "queries": rows,
        "top_hits": [hits.query_index.tolist(), hits.subject_index.tolist(), hits.score.tolist()],
        "total_scan_s": wall,
        "sum_query_s": total,
        "walls": walls,
        "overall_gcups": overall,
        "overall_sum_gcups": cells / total / 1e9,
        "min_query_gcups": min(r["gcups"] for r in rows),
        "max_query_gcups": max(r["gcups"] for r in rows),
    }
    if args.copies or args.copies_rows:
        out["copies"] = _copies(s, eqs, qs, residues, args)
    return out


def _copies(s, eqs, qs, residues, args) -> list:
    """Per-query throughput with queries in flight: each query searched as ``--copies``
    copies of itself (one search, median wall clock of ``--repeat``)."""
    rows = []
    for qi in range(len(eqs)):
        q = eqs.codes[eqs.offsets[qi] : eqs.offsets[qi + 1]]
        L = len(q)
        k = args.copies or max(1, -(-args.copies_rows // max(L, 1)))
        batch = eqs.__class__(np.tile(q, k), np.arange(k + 1, dtype=np.int64) * L)
        s.search(batch, args.top_k)  # warm (plans are cached per length bucket anyway)
        walls = []
        for _ in range(args.repeat):
            s.search(batch, args.top_k)
            walls.append(s.scan_seconds)
        wall = float(np.median(walls))
        rows.append(
            {
                "query": qs.ids[qi],
                "length": L,
                "copies": k,
                "wall_s": wall,
                "gcups": k * L * residues / wall / 1e9,
            }
        )
    best = max(r["gcups"] for r in rows)
    what = args.copies or f"at least {args.copies_rows} residues of"
    print(f"\n[depth {s.pipeline_depth}] per query, {what} copies in one search:")
    for r in rows:
        print(
            f"  {r['query']:<10}{r['length']:>6} x{r['copies']:<4}{r['gcups']:>10.1f} GCUPS "
            f"({r['gcups'] / best * 100:.0f}% of the best)"
        )
    print(f"  min {min(r['gcups'] for r in rows):.1f}, max {best:.1f} GCUPS", flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
