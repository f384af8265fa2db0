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


ALIGN_DESCRIPTION = """\
Align given pairs of sequences (protein or DNA) with full traceback and write
one TSV row per pair.

Pairs input: either two FASTA files aligned record by record (record k of
QUERIES with record k of SUBJECTS; both files must have the same number of
records), or one interleaved FASTA file (records 1+2 are pair 1, 3+4 pair 2,
...; the first of each two is the query).  Plain or gzip; ids may repeat.

Modes (--mode):
  local       Smith-Waterman: the best-scoring pair of segments (score >= 0).
  global      Needleman-Wunsch: both sequences aligned end to end.
  semiglobal  the whole query against any part of the subject: gaps at the
              ends of the subject are free, as in SSEARCH's glsearch.

Scoring: a substitution matrix (--matrix, any name Biopython ships: BLOSUM62,
PAM30, NUC.4.4, BLASTN, ...), or --match/--mismatch scores (Biopython
PairwiseAligner's match_score/mismatch_score) over all letters, with an
optional --wildcard letter (e.g. N) that scores 0: identical letters score
--match, as in Biopython (so U against T is a mismatch there; nucleotide
matrices score U as T).  DNA letters: A C G T U and the IUPAC ambiguity codes
(R Y S W K M B D H V N).
Gap costs follow BLAST: a gap of k residues costs GAP_OPEN + k * GAP_EXTEND;
linear gaps are --gap-open 0.  Examples: BLASTN's +2/-3 with 5/2 is
  --match 2 --mismatch -3 --gap-open 5 --gap-extend 2
and +1/-1 with a cost of 2 per gap residue is
  --match 1 --mismatch -1 --gap-open 0 --gap-extend 2
(Biopython's open_gap_score is -(GAP_OPEN + GAP_EXTEND), its extend_gap_score
-GAP_EXTEND.)

Ties between optimal alignments: local: the smallest subject end, then the
smallest query end; then the shortest subject span, then the shortest query
span; semiglobal: the smallest subject end, then the shortest subject span;
inside that region (and in global mode) the traceback from the end prefers a
diagonal step to a subject-residue gap (D) to a query-residue gap (I), and
ends a gap as soon as that is optimal.

Output columns: qseqid sseqid score qstart qend sstart send (1-based,
inclusive; 0 0 for an empty range) qlen slen length identities pident cigar
(=, X, I, D; * if empty), and with --aligned-strings qaln saln.  The file is
written atomically (complete or not at all).  Traceback keeps at most
--max-traceback-bytes of direction bits per alignment (default 200 MB divided
among the threads) and recomputes rows from checkpoints beyond that, so any
length runs in bounded memory.

GPU (--backend): in local and semiglobal modes the score-only passes of the
batch (each pair's best score, end and start cell) run on the GPU when one is
usable and expected to be faster for the batch (auto: small batches and a few
long pairs stay on the CPU, as one GPU thread aligns one pair) or when asked
(gpu: an error if none is usable); the traceback runs on the CPU threads.
Global mode runs on the CPU.  The output is the same whichever backend runs;
the log says which one did and why.
"""


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
    p.add_argument("--stats", default=None, metavar="JSON",
                   help="write the step's statistics (timings, GCUPS, backend, device) here")
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

    p = sub.add_parser("align", help="align given pairs (local, global or semi-global) with traceback",
                       description=ALIGN_DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("queries", metavar="QUERIES",
                   help="FASTA of the queries, or an interleaved pairs FASTA when SUBJECTS is not given")
    p.add_argument("subjects", metavar="SUBJECTS", nargs="?", default=None,
                   help="FASTA of the subjects, record by record with QUERIES")
    p.add_argument("--out", required=True, help="output TSV")
    p.add_argument("--mode", choices=["local", "global", "semiglobal"], default="local",
                   help="alignment mode (default: %(default)s)")
    p.add_argument("--aligned-strings", action="store_true",
                   help="add the aligned rows (qaln, saln) to the output")
    g = p.add_argument_group("scoring")
    g.add_argument("--matrix", default=None,
                   help="substitution matrix, any name Bio.Align.substitution_matrices.load "
                        "accepts (default: BLOSUM62 unless --match/--mismatch are given)")
    g.add_argument("--match", "--match-score", dest="match", type=int, default=None, metavar="N",
                   help="score of two identical letters (with --mismatch, instead of a matrix; "
                        "Biopython's match_score)")
    g.add_argument("--mismatch", "--mismatch-score", dest="mismatch", type=int, default=None,
                   metavar="N", help="score of two different letters, e.g. -1 (Biopython's "
                                     "mismatch_score)")
    g.add_argument("--wildcard", default=None, metavar="LETTER",
                   help="with --match/--mismatch: a letter that scores 0 against anything (e.g. N)")
    g.add_argument("--gap-open", type=int, default=11, metavar="N",
                   help="gap open cost; a gap of length k costs N + k*gap_extend (default: %(default)s)")
    g.add_argument("--gap-extend", type=int, default=1, metavar="N",
                   help="gap extension cost per residue (default: %(default)s)")
    g = p.add_argument_group("compute")
    g.add_argument("--backend", choices=["auto", "gpu", "cpu"], default="auto",
                   help="where the score-only passes (best score, end and start cell of each "
                        "pair) run: the GPU if usable and expected to be faster for the batch "
                        "(auto), or force one; the traceback runs on the CPU, and global mode "
                        "runs wholly on the CPU (default: %(default)s)")
    g.add_argument("--threads", type=int, default=None, metavar="N",
                   help="CPU threads (default: all cores)")
    g.add_argument("--max-traceback-bytes", type=int, default=None, metavar="N",
                   help="direction bytes kept per alignment before checkpointing "
                        "(default: 200000000 divided among the threads)")

    p = sub.add_parser("traceback-incremental",
                       help="align the merged hits, reusing a previous table where exact (workflow step traceback)",
                       description="Like 'swgpu traceback', but rows of a previous alignments table are "
                                   "reused for hits with the same query, subject and score whose query and "
                                   "subject sequences, scoring scheme and alignment code are unchanged "
                                   "(recorded in OUT's .fingerprints.json side file).  Same output, byte for byte.")
    p.add_argument("shards", nargs="+", help="the shard files holding the subjects")
    p.add_argument("--hits", required=True, help="hits.tsv written by 'swgpu merge'")
    p.add_argument("--queries", required=True, help="query FASTA")
    p.add_argument("--out", required=True, help="output alignments.tsv (and its .fingerprints.json)")
    p.add_argument("--previous", default=None, help="a previous alignments.tsv (with its .fingerprints.json)")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="CPU threads (default: all)")
    _add_scoring(p)

    p = sub.add_parser("check-shards", help="verify shard files; move corrupt ones aside (workflow)",
                       description="Verify shard files (format, sizes, blake2b digest).  Exit status 2 "
                                   "and a message naming each corrupt or truncated shard; with "
                                   "--quarantine DIR, move those into DIR so that the workflow's "
                                   "shard_db step rebuilds them on the next run.")
    p.add_argument("shards", nargs="+", help="shard files written by 'swgpu shard'")
    p.add_argument("--quarantine", default=None, metavar="DIR",
                   help="move corrupt shards into DIR (default: only report them)")

    p = sub.add_parser("keep-previous", help="copy the last scan's tables aside (workflow step keep_previous)",
                       description="Before a re-scan replaces them, copy hits.tsv and alignments.tsv to "
                                   "OUT_DIR when they form a complete scan, and write a marker JSON.")
    p.add_argument("--hits", required=True, help="current hits.tsv")
    p.add_argument("--alignments", required=True, help="current alignments.tsv")
    p.add_argument("--out-dir", required=True, help="folder for the previous scan's tables")
    p.add_argument("--marker", required=True, help="marker JSON to write")

    p = sub.add_parser("changes", help="hits new, gone or changed since the previous scan (workflow step changes)",
                       description="Compare hits.tsv with the previous scan kept by 'swgpu keep-previous' "
                                   "and write changes.tsv: qseqid sseqid change previous_score score "
                                   "previous_evalue evalue slen; change is new, gone or score.")
    p.add_argument("--hits", required=True, help="current hits.tsv")
    p.add_argument("--previous", required=True, help="marker JSON written by 'swgpu keep-previous'")
    p.add_argument("--queries", default=None, help="query FASTA (for the query order)")
    p.add_argument("--out", required=True, help="output changes.tsv")

    p = sub.add_parser("plots", help="plots for the workflow report (workflow step plots)",
                       description="Score and E-value distributions per query, hits per query, per-shard "
                                   "time and GCUPS, changes since the previous scan, as PNG files.")
    p.add_argument("benchmarks", nargs="*", help="score_shard benchmark files (results/benchmarks/score_shard/*.tsv)")
    p.add_argument("--hits", required=True, help="hits.tsv")
    p.add_argument("--changes", required=True, help="changes.tsv")
    p.add_argument("--log-dir", required=True, help="folder of the score_shard logs")
    p.add_argument("--out-dir", required=True, help="folder for the PNG files")

    p = sub.add_parser("backend", help="say which scoring backend would be used, and why",
                       description="Report whether a GPU is usable and which backend 'auto' picks; "
                                   "with --precompile, fill the GPU kernel cache.")
    p.add_argument("--precompile", action="store_true",
                   help="compile every GPU scoring kernel into the disk cache now, in parallel "
                        "processes (a first scoring job otherwise compiles the kernels it needs "
                        "one by one); the cache is ~/.cache/swgpu or $SWGPU_CACHE_DIR")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="compiler processes for --precompile (default: CPUs, at most 8)")
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
                             args.backend, args.threads, args.device, log, args.stats)
    elif args.command == "merge":
        pipeline.merge_hits(args.hits, args.queries, args.database_info, args.out, _scheme(args),
                            args.top_k, args.max_evalue, log)
    elif args.command == "traceback":
        pipeline.traceback_hits(args.hits, args.queries, args.shards, args.out, _scheme(args),
                                args.threads, log)
    elif args.command == "align":
        from .pairs import align_pair_files
        from .scoring import ScoringScheme

        if args.match is not None or args.mismatch is not None:
            if args.matrix is not None:
                raise InputError("give either --matrix or --match/--mismatch, not both")
            scheme = ScoringScheme(gap_open=args.gap_open, gap_extend=args.gap_extend,
                                   match=args.match, mismatch=args.mismatch,
                                   wildcard=args.wildcard)
        else:
            if args.wildcard is not None:
                raise InputError("--wildcard goes with --match/--mismatch")
            scheme = ScoringScheme(args.matrix or "BLOSUM62", args.gap_open, args.gap_extend)
        if args.threads is not None and args.threads < 1:
            raise InputError(f"--threads must be at least 1, got {args.threads}")
        if args.max_traceback_bytes is not None and args.max_traceback_bytes < 1:
            raise InputError(f"--max-traceback-bytes must be positive, got {args.max_traceback_bytes}")
        align_pair_files(args.queries, args.subjects, args.out, scheme, args.mode, args.threads,
                         args.aligned_strings, args.max_traceback_bytes, log, args.backend)
    elif args.command == "traceback-incremental":
        pipeline.traceback_hits_reusing(args.hits, args.queries, args.shards, args.out, _scheme(args),
                                        args.threads, args.previous, log)
    elif args.command == "check-shards":
        pipeline.check_shards(args.shards, args.quarantine, log)
    elif args.command == "keep-previous":
        pipeline.keep_previous(args.hits, args.alignments, args.out_dir, args.marker, log)
    elif args.command == "changes":
        pipeline.changes(args.hits, args.previous, args.out, args.queries, log)
    elif args.command == "plots":
        pipeline.plots(args.hits, args.changes, args.benchmarks, args.log_dir, args.out_dir, log)
    elif args.command == "backend":
        from .backend import choose_backend, gpu_status

        ok, why = gpu_status()
        print(f"GPU usable: {'yes' if ok else 'no'} ({why})")
        print(f"backend 'auto' uses: {choose_backend('auto').name}")
        if args.precompile:
            if not ok:
                raise InputError(f"--precompile needs a usable GPU: {why}")
            from .kernels import gpu

            done = gpu.precompile(jobs=args.jobs)
            print(f"compiled {done['kernels']} GPU kernels in {done['seconds']:.1f} s with "
                  f"{done['jobs']} processes ({done['failed_children']} failed)")
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
