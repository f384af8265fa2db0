"""User commands: ``swgpu search``, ``swgpu align``, ``swgpu backend``."""

from __future__ import annotations

import argparse
import os

from ..errors import InputError
from ..io.fieldnames import DEFAULT_COLUMNS, FIELDS, STD
from ..logs import get_logger
from .options import (
    SCORING_NOTE,
    add_compute,
    add_scoring,
    add_selection,
    check_common,
    check_input_file,
    check_output_file,
    scheme_from,
)

log = get_logger(__name__)

_FIELD_LIST = "\n".join(f"  {f.name:<11} {f.description}" for f in FIELDS.values())

SEARCH_EPILOG = f"""\
{SCORING_NOTE}
Outputs: OUT_DIR/hits.tsv (every hit: qseqid sseqid qacc sacc score bitscore
evalue qlen slen stitle) and OUT_DIR/alignments.tsv (one alignment per hit, the
--columns you choose), plus alignments.sam / .parquet / .txt for each extra
--format; OUT_DIR/swgpu-run.json is written last and lists the files of the
run.  With -o FILE only the alignment table is written, to FILE, in the one
--format given.

Examples:
  swgpu search queries.fasta uniprot_sprot.fasta.gz --out-dir results
  swgpu search q.fa db.fa -o hits.tsv --columns "std stitle" --no-header   # BLAST -outfmt 6
  cat q.fa | swgpu search - db.fa -o out.sam --format sam
  swgpu search q.fa db.fa --format tsv,parquet,pairwise --max-evalue 1e-5 --top-k 100
  swgpu search q.fa db.fa --matrix BLOSUM45 --gap-open 14 --gap-extend 2

Columns (--columns, space- or comma-separated; 'std' is BLAST's
{" ".join(STD)}; default: {DEFAULT_COLUMNS}):
{_FIELD_LIST}
"""


def add_search(sub) -> None:
    p = sub.add_parser(
        "search",
        help="search queries against a database; write hits and alignments",
        description="Search a query FASTA ('-' for standard input) against a database FASTA "
        "(plain or .gz) with exact Smith-Waterman scores, BLAST statistics and one "
        "alignment per hit.",
        epilog=SEARCH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("queries", help="query FASTA, or - for standard input")
    p.add_argument("database", help="database FASTA (plain or .gz)")
    g = p.add_argument_group("output")
    g.add_argument(
        "--out-dir", default="results", metavar="DIR", help="output folder (default: %(default)s)"
    )
    g.add_argument(
        "-o",
        "--out",
        default=None,
        metavar="FILE",
        help="write only the alignment table, to FILE (instead of --out-dir)",
    )
    g.add_argument(
        "--columns",
        default=DEFAULT_COLUMNS,
        metavar="FIELDS",
        help="fields of the alignment table, BLAST outfmt 6 names (see below)",
    )
    g.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="no header line in TSV tables (BLAST's -outfmt 6)",
    )
    g.add_argument(
        "--format",
        default="tsv",
        metavar="FMT[,FMT]",
        help="alignment formats: tsv, sam, parquet, pairwise (default: %(default)s; "
        "with -o, the file name's suffix picks it)",
    )
    g.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="stop with a message, instead of waiting, when another swgpu run is "
        "writing into --out-dir",
    )
    add_selection(p)
    add_scoring(p)
    add_compute(p)
    p.set_defaults(run=run_search)


def _formats(text: str) -> list[str]:
    from ..io.formats import FORMATS

    formats = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise InputError(
            f"--format: unknown format {', '.join(bad) or repr(text)}; "
            f"choose from {', '.join(FORMATS)}"
        )
    return list(dict.fromkeys(formats))


def run_search(args) -> int:
    from ..io.fieldnames import parse_columns
    from ..io.outputset import OutputSet

    # every option first
    check_common(args)
    scheme = scheme_from(args)
    columns = parse_columns(args.columns)
    formats = _formats(args.format)
    if args.out is not None and args.format == "tsv":  # no --format: the file name says
        from ..io.formats import FORMATS

        formats = [next((f for f, suf in FORMATS.items() if args.out.endswith(suf)), "tsv")]
    if args.out is not None:
        if len(formats) != 1:
            raise InputError("-o FILE writes one table: give one --format")
        check_output_file(args.out)
    elif os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        raise InputError(f"{args.out_dir}: --out-dir is an existing file")
    check_input_file(args.queries, "query file")
    check_input_file(args.database, "database file")
    if args.out is None:
        with OutputSet(args.out_dir, wait=args.wait) as out:
            return _search_into(args, scheme, columns, formats, out)
    return _search_into(args, scheme, columns, formats, None)


def _search_into(args, scheme, columns, formats, out) -> int:
    from ..api import search
    from ..io.fasta import read_fasta
    from ..io.tables import HITS_COLUMNS, write_table
    from ..steps.traceback import output_paths, write_alignments

    queries = read_fasta(args.queries)
    scheme.check_letters(queries, "queries" if args.queries == "-" else args.queries)
    database = read_fasta(args.database)
    scheme.check_letters(database, args.database)
    log.info(
        f"{args.database}: {len(database):,} sequences, {database.total_residues:,} "
        f"residues; {len(queries)} queries"
    )
    result = search(
        queries,
        database,
        scheme,
        top_k=args.top_k,
        max_evalue=args.max_evalue,
        dbsize=args.dbsize,
        backend=args.backend,
        threads=args.threads,
        device=args.device,
    )
    if args.out is not None:
        write_alignments(
            result.alignments,
            queries,
            database,
            scheme,
            {formats[0]: args.out},
            columns,
            args.header,
        )
        log.info(f"wrote {len(result.alignments):,} alignments to {args.out}")
        return 0
    write_table(result.hits, out.path("hits.tsv"), HITS_COLUMNS)
    names = output_paths("alignments.tsv", formats)
    write_alignments(
        result.alignments,
        queries,
        database,
        scheme,
        {fmt: out.path(name) for fmt, name in names.items()},
        columns,
        args.header,
    )
    out.commit()
    log.info(
        f"wrote {len(result.hits):,} hits and their alignments to {args.out_dir}/ "
        f"({', '.join(['hits.tsv'] + list(names.values()))})"
    )
    return 0


def add_backend(sub) -> None:
    p = sub.add_parser(
        "backend",
        help="say which scoring backend would be used, and why; precompile kernels",
        description="Report whether a GPU is usable and which backend 'auto' picks; with "
        "--precompile, compile the kernels into the disk cache now.",
    )
    p.add_argument(
        "--precompile",
        action="store_true",
        help="compile every scoring kernel (CPU, and GPU when one is usable) into "
        "the disk cache now (a first run otherwise compiles what it needs); "
        "the cache is $SWGPU_CACHE_DIR or the user cache folder",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="compiler processes for the GPU kernels (default: CPUs, at most 8)",
    )
    p.set_defaults(run=run_backend)


def run_backend(args) -> int:
    from ..backend import choose_backend, gpu_status
    from ..cache import cache_dir

    ok, why = gpu_status()
    print(f"GPU usable: {'yes' if ok else 'no'} ({why})")
    print(f"backend 'auto' uses: {choose_backend('auto').name}")
    print(f"kernel cache: {cache_dir()}")
    if args.precompile:
        from .. import precompile

        done = precompile.precompile_all(gpu=ok, jobs=args.jobs)
        for line in done:
            print(line)
    return 0


#: ``swgpu align --help`` (here, not in :mod:`swgpu_tools.pairs`: building the
#: command line must not import numpy, which every job's ``swgpu`` would pay)
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


def add_align(sub) -> None:
    p = sub.add_parser(
        "align",
        help="align given pairs (local, global or semi-global)",
        description=ALIGN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "queries",
        metavar="QUERIES",
        help="FASTA of the queries, or an interleaved pairs FASTA when SUBJECTS is not given",
    )
    p.add_argument(
        "subjects",
        metavar="SUBJECTS",
        nargs="?",
        default=None,
        help="FASTA of the subjects, record by record with QUERIES",
    )
    p.add_argument("-o", "--out", required=True, help="output TSV")
    p.add_argument(
        "--mode",
        choices=["local", "global", "semiglobal"],
        default="local",
        help="alignment mode (default: %(default)s)",
    )
    p.add_argument(
        "--aligned-strings",
        action="store_true",
        help="add the aligned rows (qaln, saln) to the output",
    )
    g = p.add_argument_group("scoring")
    g.add_argument(
        "--matrix",
        default=None,
        help="substitution matrix, any name Bio.Align.substitution_matrices.load "
        "accepts, any case (default: BLOSUM62 unless --match/--mismatch)",
    )
    g.add_argument(
        "--match",
        "--match-score",
        dest="match",
        type=int,
        default=None,
        metavar="N",
        help="score of two identical letters (with --mismatch, instead "
        "of a matrix; Biopython's match_score)",
    )
    g.add_argument(
        "--mismatch",
        "--mismatch-score",
        dest="mismatch",
        type=int,
        default=None,
        metavar="N",
        help="score of two different letters, e.g. -1 (Biopython's mismatch_score)",
    )
    g.add_argument(
        "--wildcard",
        default=None,
        metavar="LETTER",
        help="with --match/--mismatch: a letter that scores 0 against anything",
    )
    g.add_argument(
        "--gap-open",
        type=int,
        default=11,
        metavar="N",
        help="gap open cost; a gap of length k costs N + k*gap_extend (default: %(default)s)",
    )
    g.add_argument(
        "--gap-extend",
        type=int,
        default=1,
        metavar="N",
        help="gap extension cost per residue (default: %(default)s)",
    )
    g = p.add_argument_group("compute")
    g.add_argument(
        "--backend",
        choices=["auto", "gpu", "cpu"],
        default="auto",
        help="where the score-only passes run: the GPU if usable and expected to be "
        "faster for the batch (auto), or force one; the traceback runs on the "
        "CPU, and global mode wholly on the CPU (default: %(default)s)",
    )
    g.add_argument(
        "--threads", type=int, default=None, metavar="N", help="CPU threads (default: all cores)"
    )
    g.add_argument(
        "--max-traceback-bytes",
        type=int,
        default=None,
        metavar="N",
        help="direction bytes kept per alignment before checkpointing "
        "(default: 200000000 divided among the threads)",
    )
    p.set_defaults(run=run_align)


def run_align(args) -> int:
    from ..pairs import align_pair_files
    from ..scoring import ScoringScheme

    check_common(args)
    if args.max_traceback_bytes is not None and args.max_traceback_bytes < 1:
        raise InputError(f"--max-traceback-bytes must be positive, got {args.max_traceback_bytes}")
    if args.match is not None or args.mismatch is not None:
        if args.matrix is not None:
            raise InputError("give either --matrix or --match/--mismatch, not both")
        scheme = ScoringScheme(
            gap_open=args.gap_open,
            gap_extend=args.gap_extend,
            match=args.match,
            mismatch=args.mismatch,
            wildcard=args.wildcard,
        )
    else:
        if args.wildcard is not None:
            raise InputError("--wildcard goes with --match/--mismatch")
        scheme = ScoringScheme(args.matrix or "BLOSUM62", args.gap_open, args.gap_extend)
    check_output_file(args.out)
    check_input_file(args.queries, "query file")
    if args.subjects is not None:
        check_input_file(args.subjects, "subject file")
    align_pair_files(
        args.queries,
        args.subjects,
        args.out,
        scheme,
        args.mode,
        args.threads,
        args.aligned_strings,
        args.max_traceback_bytes,
        args.backend,
    )
    return 0


def add_changes(sub) -> None:
    p = sub.add_parser(
        "changes",
        help="hits new, gone or changed between two releases",
        description="Compare two database releases kept in the history folder (the workflow "
        "keeps every scanned release in results/history/): the changes from release "
        "A to release B.  Rows: qseqid "
        "sseqid qacc sacc change previous_score score previous_evalue evalue "
        "slen; change is new, gone or score.",
        epilog="Examples:\n  swgpu changes --list\n  swgpu changes 2026_04 2026_05 -o "
        "changes.tsv\n  swgpu changes --prune 3      # keep the 3 newest releases",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("releases", nargs="*", metavar="RELEASE", help="two kept releases: A B")
    p.add_argument(
        "--history", default="results/history", help="the history folder (default: %(default)s)"
    )
    p.add_argument("-o", "--out", default=None, help="output TSV (default: standard output)")
    p.add_argument("--list", action="store_true", help="list the kept releases")
    p.add_argument(
        "--prune",
        type=int,
        default=None,
        metavar="N",
        help="remove all but the N newest kept releases",
    )
    p.set_defaults(run=run_changes)


def run_changes(args) -> int:
    import sys

    from ..io.tables import write_table
    from ..steps import history
    from ..steps.changes import CHANGES_COLUMNS

    if args.list:
        for m in history.releases(args.history):
            db = m.get("database", {})
            print(
                f"{m['release']}\t{m.get('scanned')}\t{db.get('sequences')} sequences\t"
                f"{db.get('residues')} residues\t{m['_dir']}"
            )
        return 0
    if args.prune is not None:
        gone = history.prune(args.history, args.prune)
        print(f"removed {len(gone)} release(s): {', '.join(gone) or 'none'}")
        return 0
    if len(args.releases) != 2:
        raise InputError("give two kept releases (A B), or --list (see swgpu changes --help)")
    table = history.compare_releases(args.history, *args.releases)
    if args.out:
        check_output_file(args.out)
        write_table(table, args.out, CHANGES_COLUMNS)
    else:
        import io

        buf = io.StringIO()
        buf.write("\t".join(CHANGES_COLUMNS) + "\n")
        for row in table[CHANGES_COLUMNS].itertuples(index=False):
            buf.write("\t".join(str(x) for x in row) + "\n")
        sys.stdout.write(buf.getvalue())
    return 0
