"""Options shared by several ``swgpu`` commands, and their checks.

Every check here runs before any input file is opened (:func:`check_common`),
so a mistake costs nothing.
"""

from __future__ import annotations

import argparse
import os

from ..errors import InputError
from ..logs import get_logger

log = get_logger(__name__)

SCORING_NOTE = """\
Scoring: Smith-Waterman local alignment, exact 32-bit scores.  Gap costs follow
BLAST: a gap of length k costs GAP_OPEN + k * GAP_EXTEND (default 11 + k, the
same as blastp -gapopen 11 -gapextend 1, SSEARCH -f 11 -g 1, and parasail/opal
"open 12, extend 1").
"""


def add_verbosity(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("messages")
    g.add_argument(
        "-v", "--verbose", action="count", default=0, help="more messages (debug details)"
    )
    g.add_argument("-q", "--quiet", action="count", default=0, help="only warnings and errors")


def add_scoring(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scoring")
    g.add_argument(
        "--matrix",
        default="BLOSUM62",
        help="substitution matrix, any name Bio.Align.substitution_matrices.load "
        "knows, any case (default: %(default)s)",
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


def add_compute(p: argparse.ArgumentParser, device: bool = True) -> None:
    g = p.add_argument_group("compute")
    g.add_argument(
        "--backend",
        choices=["auto", "gpu", "cpu"],
        default="auto",
        help="where to score: the GPU if usable (auto), or force one (default: %(default)s)",
    )
    g.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads for CPU scoring and traceback (default: all cores)",
    )
    if device:
        g.add_argument(
            "--device",
            default="auto",
            metavar="ID",
            help="GPU number, or 'auto' to lock a free GPU (default: %(default)s)",
        )


def add_selection(p: argparse.ArgumentParser, evalue: bool = True) -> None:
    g = p.add_argument_group("hit selection")
    g.add_argument(
        "--top-k",
        type=int,
        default=500,
        metavar="K",
        help="hits kept per query (BLAST's -max_target_seqs; default: %(default)s)",
    )
    if evalue:
        g.add_argument(
            "--max-evalue",
            type=float,
            default=10.0,
            metavar="E",
            help="keep hits with E-value <= E (BLAST's -evalue; default: %(default)s)",
        )
        g.add_argument(
            "--dbsize",
            type=int,
            default=None,
            metavar="N",
            help="database size in residues for E-values (BLAST's -dbsize, "
            "SSEARCH's -Z; default: the database's own size)",
        )


def scheme_from(args):
    """The ScoringScheme of --matrix/--gap-open/--gap-extend (InputError if unknown),
    with one warning when BLAST has no statistics for it."""
    from .. import stats
    from ..scoring import ScoringScheme

    scheme = ScoringScheme(args.matrix, args.gap_open, args.gap_extend)
    if stats.lookup(scheme.matrix_name, scheme.gap_open, scheme.gap_extend) is None:
        log.warning(
            stats.no_statistics_message(scheme.matrix_name, scheme.gap_open, scheme.gap_extend)
        )
    return scheme


def check_common(args, gpu_now: bool = True) -> None:
    """Check the numbers and choices of the options given, before any file is read.

    ``gpu_now=False``: leave ``--backend gpu`` to the step, which starts the GPU on a
    thread while it reads its inputs (the CUDA driver's start takes seconds) and
    fails there, naming why."""
    threads = getattr(args, "threads", None)
    if threads is not None and threads < 1:
        raise InputError(f"--threads must be at least 1, got {threads}")
    top_k = getattr(args, "top_k", None)
    if top_k is not None and top_k < 1:
        raise InputError(f"--top-k must be at least 1, got {top_k}")
    max_evalue = getattr(args, "max_evalue", None)
    if max_evalue is not None and not max_evalue > 0:
        raise InputError(f"--max-evalue must be positive, got {max_evalue:g}")
    dbsize = getattr(args, "dbsize", None)
    if dbsize is not None and dbsize < 1:
        raise InputError(f"--dbsize must be a positive number of residues, got {dbsize}")
    device = getattr(args, "device", None)
    if device not in (None, "auto"):
        try:
            if int(device) < 0:
                raise ValueError
        except ValueError:
            raise InputError(f"--device must be 'auto' or a GPU number, got '{device}'") from None
    if gpu_now and getattr(args, "backend", None) == "gpu":
        from ..backend import gpu_status

        ok, why = gpu_status()
        if not ok:
            raise InputError(f"--backend gpu: no GPU is usable here: {why}")


def check_input_file(path, what: str) -> None:
    """An input path that must exist (``-`` is standard input)."""
    if path == "-":
        return
    if not os.path.exists(path):
        raise InputError(f"{path}: {what} not found")
    if os.path.isdir(path):
        raise InputError(f"{path}: {what} is a directory, not a file")


def check_output_file(path, what: str = "output file") -> None:
    """An output path whose folder exists and which is not a folder itself."""
    if os.path.isdir(path):
        raise InputError(f"{path}: {what} is an existing folder")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise InputError(f"{path}: the folder {parent} does not exist")
