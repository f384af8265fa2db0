"""The ``swgpu`` command: search without Snakemake, and the workflow's steps."""
from __future__ import annotations

import argparse
import sys
import time

from . import __version__
from .errors import InputError

EPILOG = """\
Scoring: Smith-Waterman local alignment, exact 32-bit scores.  Gap costs follow
BLAST: a gap of length k costs GAP_OPEN + k * GAP_EXTEND (default 11 + k, the
same as SSEARCH -f 11 -g 1 and as parasail/opal "open 12, extend 1").
"""


def _add_scoring(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scoring")
    g.add_argument("--matrix", default="BLOSUM62",
                   help="substitution matrix, any name Bio.Align.substitution_matrices.load "
                        "accepts (default: %(default)s)")
    g.add_argument("--gap-open", type=int, default=11, metavar="N",
                   help="gap open cost; a gap of length k costs N + k*gap_extend (default: %(default)s)")
    g.add_argument("--gap-extend", type=int, default=1, metavar="N",
                   help="gap extension cost per residue (default: %(default)s)")


def _add_compute(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("compute")
    g.add_argument("--backend", choices=["auto", "gpu", "cpu"], default="auto",
                   help="where to score: the GPU if usable (auto), or force one (default: %(default)s)")
    g.add_argument("--threads", type=int, default=None, metavar="N",
                   help="CPU threads for CPU scoring and traceback (default: all cores)")
    g.add_argument("--device", default="auto", metavar="ID",
                   help="GPU number, or 'auto' to lock a free GPU (default: %(default)s)")


def _add_selection(p: argparse.ArgumentParser, evalue: bool = True) -> None:
    p.add_argument("--top-k", type=int, default=500, metavar="K",
                   help="hits kept per query (default: %(default)s)")
    if evalue:
        p.add_argument("--max-evalue", type=float, default=10.0, metavar="E",
                       help="keep hits with E-value <= E (default: %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swgpu",
        description="Exact Smith-Waterman protein database search on GPUs and CPUs.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"swgpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("search", help="search queries against a database; write hits.tsv and alignments.tsv",
                       description="Search a query FASTA against a database FASTA (plain or .gz) "
                                   "without Snakemake and write OUT_DIR/hits.tsv and OUT_DIR/alignments.tsv.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("queries", help="query FASTA")
    p.add_argument("database", help="database FASTA (plain or .gz)")
    p.add_argument("--out-dir", default="results", help="output folder (default: %(default)s)")
    _add_selection(p)
    _add_scoring(p)
    _add_compute(p)

    p = sub.add_parser("shard", help="split a database into stable shards (workflow step shard_db)",
                       description="Split a database FASTA into N shard files and database.json. A "
                                   "sequence's shard depends only on its id, so a new release changes "
                                   "only the shards that hold changed entries.")
    p.add_argument("database", help="database FASTA (plain or .gz)")
    p.add_argument("--shards", type=int, required=True, metavar="N", help="number of shards")
    p.add_argument("--out-dir", required=True, help="folder for shard-NNNN.swdb and database.json")

    p = sub.add_parser("score-shard", help="score all queries against one shard (workflow step score_shard)",
                       description="Score every query against one shard and write its top-k hits "
                                   "(qseqid, sseqid, score, slen) as TSV.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shard", help="a shard file written by 'swgpu shard'")
    p.add_argument("--queries", required=True, help="query FASTA")
    p.add_argument("--out", required=True, help="output TSV")
    _add_selection(p, evalue=False)
    _add_scoring(p)
    _add_compute(p)

    p = sub.add_parser("merge", help="merge shard hits into hits.tsv (workflow step merge_hits)",
                       description="Merge the hits of all shards: top-k per query, with bit scores and "
                                   "E-values over the whole database.")
    p.add_argument("hits", nargs="+", help="shard hit tables written by 'swgpu score-shard'")
    p.add_argument("--queries", required=True, help="query FASTA")
    p.add_argument("--database-info", required=True, help="database.json written by 'swgpu shard'")
    p.add_argument("--out", required=True, help="output hits.tsv")
    _add_selection(p)
    _add_scoring(p)

    p = sub.add_parser("traceback", help="align the merged hits (workflow step traceback)",
                       description="Compute an optimal alignment for every row of hits.tsv on the CPU "
                                   "and write alignments.tsv (BLAST's 12 columns, then ours).")
    p.add_argument("shards", nargs="+", help="the shard files holding the subjects")
    p.add_argument("--hits", required=True, help="hits.tsv written by 'swgpu merge'")
    p.add_argument("--queries", required=True, help="query FASTA")
    p.add_argument("--out", required=True, help="output alignments.tsv")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="CPU threads (default: all)")
    _add_scoring(p)

    sub.add_parser("backend", help="say which scoring backend would be used, and why",
                   description="Report whether a GPU is usable and which backend 'auto' picks.")
    return parser


def _scheme(args):
    from .scoring import ScoringScheme

    return ScoringScheme(args.matrix, args.gap_open, args.gap_extend)


def run(args) -> int:
    from . import pipeline
    from .shard import shard_database

    log = pipeline.stderr_log
    if args.command == "search":
        pipeline.search(args.queries, args.database, args.out_dir, _scheme(args), args.top_k,
                        args.max_evalue, args.backend, args.threads, args.device, log)
    elif args.command == "shard":
        start = time.perf_counter()
        info = shard_database(args.database, args.out_dir, args.shards, log)
        log(f"{info['sequences']:,} sequences, {info['residues']:,} residues in "
            f"{args.shards} shards, {time.perf_counter() - start:.1f} s")
    elif args.command == "score-shard":
        pipeline.score_shard(args.shard, args.queries, args.out, _scheme(args), args.top_k,
                             args.backend, args.threads, args.device, log)
    elif args.command == "merge":
        pipeline.merge_hits(args.hits, args.queries, args.database_info, args.out, _scheme(args),
                            args.top_k, args.max_evalue, log)
    elif args.command == "traceback":
        pipeline.traceback_hits(args.hits, args.queries, args.shards, args.out, _scheme(args),
                                args.threads, log)
    elif args.command == "backend":
        from .backend import choose_backend, gpu_status

        ok, why = gpu_status()
        print(f"GPU usable: {'yes' if ok else 'no'} ({why})")
        print(f"backend 'auto' uses: {choose_backend('auto').name}")
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return run(args)
    except InputError as exc:
        print(f"swgpu: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("swgpu: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
