"""The workflow's step commands (``swgpu shard``, ``score-shard``, ``merge``,
``traceback``, ``check-shards``, ``release``, ``plots``): each one calls one
function of :mod:`swgpu_tools.steps` with the paths the Snakemake rule gives.
``swgpu run-steps`` (:mod:`swgpu_tools.cli`) runs several of them in one process."""

from __future__ import annotations

import argparse
import os

from .options import (
    SCORING_NOTE,
    add_compute,
    add_scoring,
    add_selection,
    check_common,
    scheme_from,
)

#: (name, help) of the step commands, in workflow order, for ``swgpu --help``.
STEPS = [
    ("shard", "split a database into stable shards (rule shard_db)"),
    ("score-shard", "score all queries against one or more shards (rule score_shard)"),
    ("merge", "merge shard hits into hits.tsv (rule finish)"),
    ("traceback", "align the merged hits (rule finish)"),
    ("check-shards", "verify shard files; move corrupt ones aside"),
    ("receipt", "a database file's receipt: its path, size and content digest"),
    ("release", "keep this release, compare with the previous one, list the tables (rule finish)"),
    ("plots", "plots and tables for the report (rule finish)"),
    ("warm-serve", "the warm-start process of a local run (the Snakefile's onstart hook)"),
]
_HELP = dict(STEPS)


def _parser(sub, name: str, description: str, **kw) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=argparse.SUPPRESS, description=description, **kw)


def add_steps(sub) -> None:
    p = _parser(
        sub,
        "shard",
        "Split a database FASTA into N shard files and database.json. A "
        "sequence's shard depends only on its accession, so a new release "
        "changes only the shards that hold changed entries.",
    )
    p.add_argument("database", help="database FASTA (plain or .gz)")
    p.add_argument("--shards", type=int, required=True, metavar="N", help="number of shards")
    p.add_argument("--out-dir", required=True, help="folder for shard-NNNN.swdb and database.json")
    p.add_argument("--stats", default=None, metavar="JSON", help="write the step's statistics here")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="worker processes (default: every CPU this process may use)",
    )
    p.add_argument(
        "--receipt",
        default=None,
        metavar="JSON",
        help="also write the database file's receipt here, last (as 'swgpu receipt')",
    )
    p.add_argument(
        "--content",
        default=None,
        metavar="DIGEST",
        help="with --receipt: the file's content digest, as the workflow computed it "
        "(default: compute it here)",
    )
    p.set_defaults(run=run_shard)

    p = _parser(
        sub,
        "score-shard",
        "Score every query against one shard, or each of several (one process: "
        "the GPU starts once and the next shard is read while one is scored), and "
        "write each query's top-k hits of each shard to one table (.npz).",
        epilog=SCORING_NOTE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shard", nargs="+", help="shard files written by 'swgpu shard'")
    p.add_argument("--queries", required=True, help="query FASTA")
    p.add_argument("--out", required=True, help="the hit table to write (.npz)")
    p.add_argument(
        "--stats",
        default=None,
        metavar="JSON",
        help="write the step's statistics (timings, GCUPS, backend, device) here",
    )
    p.add_argument(
        "--state",
        nargs="+",
        default=None,
        metavar="NPZ",
        help="the job's memory of each shard (one file per shard, in the same order): "
        "read first, so that only new and changed sequences are scored, and written "
        "beside the table",
    )
    p.add_argument(
        "--margin",
        type=int,
        default=None,
        metavar="M",
        help="hits kept per query in --state beyond --top-k (default: top-k)",
    )
    add_selection(p, evalue=False)
    add_scoring(p)
    add_compute(p)
    p.set_defaults(run=run_score_shard)

    p = _parser(
        sub,
        "merge",
        "Merge the hits of all shards: top-k per query, with bit scores "
        "and E-values over the whole database.",
    )
    p.add_argument("hits", nargs="+", help="shard hit tables written by 'swgpu score-shard'")
    p.add_argument("--queries", required=True, help="query FASTA")
    p.add_argument("--database-info", required=True, help="database.json written by 'swgpu shard'")
    p.add_argument("--out", required=True, help="output hits.tsv")
    p.add_argument("--stats", default=None, metavar="JSON", help="write the step's statistics here")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads (default: every CPU this process may use)",
    )
    add_selection(p)
    add_scoring(p)
    p.set_defaults(run=run_merge)

    p = _parser(
        sub,
        "traceback",
        "Align every row of hits.tsv on the CPU and write the "
        "alignment table (and the other chosen formats beside it).",
    )
    p.add_argument("shards", nargs="+", help="the shard files holding the subjects")
    p.add_argument("--hits", required=True, help="hits.tsv written by 'swgpu merge'")
    p.add_argument("--queries", required=True, help="query FASTA")
    p.add_argument("--out", required=True, help="output alignments.tsv")
    p.add_argument("--columns", default=None, help="output fields (BLAST names; default: ours)")
    p.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="no header line (BLAST's -outfmt 6)",
    )
    p.add_argument("--format", default="tsv", help="formats: tsv, sam, parquet, pairwise")
    p.add_argument(
        "--internal",
        default=None,
        help="keep what each alignment was made from here (a TSV), for reuse by the next run",
    )
    p.add_argument(
        "--previous",
        default=None,
        help="a previous run's full alignment table (--internal) to reuse from, or "
        "a history folder (the newest kept release's)",
    )
    p.add_argument("--stats", default=None, metavar="JSON", help="write the step's statistics here")
    p.add_argument(
        "--threads", type=int, default=None, metavar="N", help="CPU threads (default: all)"
    )
    p.add_argument(
        "--quarantine",
        default=None,
        metavar="DIR",
        help="when the step fails, verify the shards and move corrupt ones into DIR "
        "(as 'swgpu check-shards --quarantine'), so that the next run rebuilds them",
    )
    add_scoring(p)
    p.set_defaults(run=run_traceback)

    p = _parser(
        sub,
        "check-shards",
        "Verify shard files (format, sizes, digest).  Exit "
        "status 2 and a message naming each corrupt or truncated "
        "shard; with --quarantine DIR, move those into DIR so that "
        "the workflow's shard_db step rebuilds them on the next run.",
    )
    p.add_argument("shards", nargs="+", help="shard files written by 'swgpu shard'")
    p.add_argument(
        "--quarantine",
        default=None,
        metavar="DIR",
        help="move corrupt shards into DIR (default: only report them)",
    )
    p.set_defaults(run=run_check_shards)

    p = _parser(
        sub,
        "receipt",
        "Write the receipt of a database file: its path, size and content digest "
        "(the same content, the same receipt).  The workflow's shard step writes it "
        "beside the shards ('swgpu shard --receipt'); the workflow passes the digest "
        "as a parameter, so that Snakemake never checksums the database.",
    )
    p.add_argument("database", help="the database file")
    p.add_argument(
        "--content",
        help="the file's content digest, as the workflow computed it (default: compute it here)",
    )
    p.add_argument("--out", required=True, help="the receipt to write (JSON)")
    p.set_defaults(run=run_receipt)

    p = _parser(
        sub,
        "warm-serve",
        "The warm-start process of a local workflow run: it loads the step "
        "commands' imports (numpy, Numba, numba-cuda's typing, pandas, "
        "matplotlib) once, listens on SOCKET, and runs each 'swgpu' command "
        "of the run's jobs (those with $SWGPU_WARM set to SOCKET) in a child "
        "forked for it.  It never starts CUDA itself.  It ends when process "
        "PARENT ends, on SIGTERM, or after an hour without a command.  The "
        "Snakefile starts and stops it (config key warm_start).",
    )
    p.add_argument("--socket", required=True, help="the Unix socket to listen on")
    p.add_argument("--parent", type=int, default=None, help="end when this process ends")
    p.add_argument(
        "--job-command",
        metavar="PATH",
        default=None,
        help="write an executable 'swgpu' there for the jobs (Python without its site "
        "module: it only hands the command to this process, or runs a full swgpu)",
    )
    p.add_argument(
        "--gpu", action="store_true", help="also load numba-cuda's typing (scoring on a GPU)"
    )
    p.add_argument(
        "--gpu-standby",
        metavar="MATRIX:OPEN:EXTEND",
        default=None,
        help="with --gpu: also fork a GPU standby, a process that starts the GPU at once "
        "(with this scoring's kernels) and runs the first scoring job that may use it "
        "(no --backend cpu, --device auto); it ends after two minutes without one. "
        "SWGPU_GPU_STANDBY=0 turns it off",
    )
    p.add_argument(
        "--no-cuda",
        action="store_true",
        help="the scoring jobs run on the CPU (--backend cpu): numba-cuda is not loaded "
        "(its generation is empty: a scoring job is served once Numba's CPU side is)",
    )
    p.add_argument(
        "--rescan",
        action="store_true",
        help="with --gpu-standby: a re-scan is expected (every shard has its re-scan state): "
        "the standby loads the batched kernels first and, of the CPU's side, only what "
        "serving a re-scan's searches needs (SWGPU_STANDBY_RESCAN=0 ignores it)",
    )
    p.set_defaults(run=run_warm_serve)

    p = _parser(
        sub,
        "release",
        "The scan as a database release: keep hits.tsv, alignments.tsv and "
        "the reuse table in HISTORY/<release>/ with a manifest and name it "
        "in MARKER; write CHANGES (this release against the previous "
        "release); write MANIFEST (the tables, their sizes and digests) "
        "last.",
    )
    p.add_argument("extra", nargs="*", help="the other alignment files (SAM, Parquet, text)")
    p.add_argument("--hits", required=True, help="hits.tsv")
    p.add_argument("--alignments", required=True, help="alignments.tsv")
    p.add_argument("--internal", required=True, help="the alignment reuse table (a TSV)")
    p.add_argument("--database-info", required=True, help="database.json")
    p.add_argument("--queries", default=None, help="query FASTA (for the query order)")
    p.add_argument("--history", required=True, help="the history folder")
    p.add_argument("--marker", required=True, help="marker JSON naming the current release")
    p.add_argument("--changes", required=True, help="output changes.tsv")
    p.add_argument("--manifest", required=True, help="output manifest JSON, written last")
    p.add_argument(
        "--release", default=None, help="release name (default: from the database's content digest)"
    )
    p.add_argument("--config-json", default=None, help="the workflow configuration, as JSON")
    p.set_defaults(run=run_release)

    from ..report import add_arguments as add_plots_arguments

    p = _parser(
        sub,
        "plots",
        "Pictures and tables for the workflow report (snakemake --report): "
        "score and E-value distributions, hits per query, the top queries, "
        "per-shard and per-step time, changes since the previous release, "
        "and per-query and per-step tables; fixed sizes whatever the number "
        "of queries.",
    )
    add_plots_arguments(p)
    p.set_defaults(run=run_plots)


def run_shard(args) -> int:
    from ..steps.shard_db import shard_database

    shard_database(
        args.database,
        args.out_dir,
        args.shards,
        stats_path=args.stats,
        threads=args.threads,
        receipt_path=args.receipt,
        file_digest=args.content,
    )
    return 0


def run_score_shard(args) -> int:
    from ..steps.score_shard import score_shard

    check_common(args, gpu_now=False)  # the job starts the GPU beside reading its shards
    if args.margin is not None and args.margin < 0:
        from ..errors import InputError

        raise InputError(f"--margin must be 0 or more, got {args.margin}")
    if args.state is not None and len(args.state) != len(args.shard):
        from ..errors import InputError

        raise InputError(
            f"--state names {len(args.state)} files for {len(args.shard)} shards; give one per shard"
        )
    score_shard(
        args.shard,
        args.queries,
        args.out,
        scheme_from(args),
        args.top_k,
        args.backend,
        args.threads,
        args.device,
        stats_path=args.stats,
        state_path=args.state,
        margin=args.margin,
    )
    return 0


def run_merge(args) -> int:
    from ..steps.merge_hits import merge_hits

    check_common(args)
    merge_hits(
        args.hits,
        args.queries,
        args.database_info,
        args.out,
        scheme_from(args),
        args.top_k,
        args.max_evalue,
        args.dbsize,
        stats_path=args.stats,
        threads=args.threads,
    )
    return 0


def run_traceback(args) -> int:
    from ..steps.traceback import traceback_hits
    from .user import _formats

    check_common(args)
    previous = args.previous
    if previous and os.path.isdir(previous):
        from ..steps.history import newest_internal

        previous = newest_internal(previous)
    try:
        traceback_hits(
            args.hits,
            args.queries,
            args.shards,
            args.out,
            scheme_from(args),
            args.threads,
            args.columns,
            args.header,
            _formats(args.format),
            args.internal,
            previous,
            stats_path=args.stats,
        )
    except Exception:
        if args.quarantine is not None:
            from ..steps.shard_db import check_shards

            try:
                check_shards(args.shards, args.quarantine)
            except Exception:  # the corrupt shards are named in the log; the first error stands
                pass
        raise
    return 0


def run_receipt(args) -> int:
    from ..steps.receipt import write_source_receipt

    write_source_receipt(args.database, args.out, args.content)
    return 0


def run_warm_serve(args) -> int:
    from ..warm.server import serve

    standby = args.gpu_standby if os.environ.get("SWGPU_GPU_STANDBY", "1") != "0" else None
    rescan = args.rescan and os.environ.get("SWGPU_STANDBY_RESCAN", "1") != "0"
    # the children run commands as `swgpu` does (cli.run_command, set by cli.build_parser)
    return serve(
        args.socket,
        args.command_runner,
        parent=args.parent,
        gpu=args.gpu,
        standby=standby,
        rescan=rescan,
        cuda=not args.no_cuda,
        job_command=args.job_command,
    )


def run_check_shards(args) -> int:
    from ..steps.shard_db import check_shards

    check_shards(args.shards, args.quarantine)
    return 0


def run_release(args) -> int:
    import json

    from ..io.outputset import write_manifest
    from ..steps.history import record_release, write_changes

    config = json.loads(args.config_json) if args.config_json else None
    record_release(
        args.hits,
        args.alignments,
        args.internal,
        args.database_info,
        args.history,
        args.marker,
        args.release,
        config,
    )
    write_changes(args.hits, args.marker, args.history, args.changes, args.queries)
    write_manifest(args.manifest, [args.hits, args.alignments, *args.extra, args.changes])
    return 0


def run_plots(args) -> int:
    from ..report import run

    run(args)
    return 0
