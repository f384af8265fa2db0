"""Karlin-Altschul statistics as NCBI BLAST (blastp) computes them.

Everything here is a port of NCBI BLAST+ C code; the comments name the
function each piece follows.  Sources read (public domain, NCBI):

* parameter tables, ``BLAST_ComputeLengthAdjustment``, ``BLAST_KarlinStoE_simple``,
  ``BLAST_SpougeStoE``, ``Blast_GumbelBlkLoadFromTables``:
  ``src/algo/blast/core/blast_stat.c`` in github.com/ncbi/ncbi-cxx-toolkit-public
  (stored commits 0088c685 and the copy with ``OLD_FSC``);
* ``BLAST_CalcEffLengths`` and the Gumbel ``db_length`` set-up:
  ``c++/src/algo/blast/core/blast_setup.c`` in github.com/deepin-community/ncbi-blastplus
  (a BLAST+ 2.16 source tree);
* ``Blast_HSPListGetEvalues`` / ``Blast_HSPListGetBitScores``:
  ``c++/src/algo/blast/core/blast_hits.c`` in the same tree;
* tabular number formatting, ``CAlignFormatUtil::GetScoreString`` and
  ``CBlastTabularInfo::SetScores``: ``c++/src/objtools/align_format/align_format_util.cpp``
  and ``tabular.cpp`` in the same tree.

Gap convention: BLAST's tables are indexed by (gap existence, gap extension) with a
gap of length k costing ``existence + k * extension`` -- the same convention as
:class:`swgpu_tools.scoring.ScoringScheme` (``gap_open``, ``gap_extend``).

Two E-value formulas
--------------------
:func:`evalue` is the classic Karlin-Altschul E-value over the effective search
space ``(m - L) * (n - N*L)`` with BLAST's length adjustment ``L``
(``BLAST_KarlinStoE_simple`` with ``eff_searchsp`` from ``BLAST_CalcEffLengths``).

**Current BLAST+ does not use it for blastp by default.**  ``BlastScoreBlkNew``
allocates a Gumbel block unless the environment variable ``OLD_FSC`` is set, and
``Blast_HSPListGetEvalues`` then calls ``BLAST_SpougeStoE`` (Spouge's finite-size
correction), which depends on the *subject* length too; this happens whether or
not composition-based statistics are on.  :func:`spouge_evalue` ports that path.
So:

* ``blastp -comp_based_stats 0`` (default environment) -> :func:`spouge_evalue`;
* ``OLD_FSC=1 blastp -comp_based_stats 0`` -> :func:`evalue`.

A real BLAST+ 2.2.26 blastp report (Biopython's ``Tests/Blast/xml_2226_blastp_001.xml``)
already follows the Spouge path: its E-values are within 16% of
:func:`spouge_evalue` (the residue is composition-based statistics, on in that
run) and up to 10^13 times smaller than :func:`evalue`; see tests/test_stats.py.

Composition-based statistics (the blastp default, ``-comp_based_stats 2``) change
scores and E-values per subject and are not reproduced here.

Scoring schemes BLAST has no table row for: :func:`lookup` returns ``None``;
callers must then write ``NA`` for E-values and bit scores (E-values are off for
that scoring scheme), never a number computed from the wrong parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "KarlinAltschul",
    "lookup",
    "supported",
    "bit_score",
    "length_adjustment",
    "effective_search_space",
    "evalue",
    "spouge_evalue",
    "format_evalue",
    "format_bitscore",
    "NA",
]

#: What the tables say when there is no number (no statistics for the scheme).
NA = "NA"

_INF = 32767.0  # INT2_MAX: BLAST's marker for "infinite" gap costs (the ungapped row)

# ---------------------------------------------------------------------------
# Parameter tables, copied from blast_stat.c (ncbi/ncbi-cxx-toolkit-public,
# src/algo/blast/core/blast_stat.c, arrays blosum45_values ... pam70_values).
# Columns, as documented there:
#   gap existence, gap extension, (decline-to-align, ignored), Lambda, K, H,
#   alpha, beta, C, alpha_v, sigma
# The first row of each table (INT2_MAX gap costs) is the ungapped row; it is
# never matched by a gapped lookup but supplies alpha_un / alpha_v_un for
# Spouge's correction (Blast_GumbelBlkLoadFromTables uses values[0][6], [0][9]).
# ---------------------------------------------------------------------------
_TABLES: dict[str, tuple[tuple[float, ...], ...]] = {
    "BLOSUM45": (
        (_INF, _INF, _INF, 0.2291, 0.0924, 0.2514, 0.9113, -5.7, 0.641318, 9.611060, 9.611060),
        (13, 3, _INF, 0.207, 0.049, 0.14, 1.5, -22, 0.671128, 35.855900, 35.963900),
        (12, 3, _INF, 0.199, 0.039, 0.11, 1.8, -34, 0.691530, 45.693600, 45.851700),
        (11, 3, _INF, 0.190, 0.031, 0.095, 2.0, -38, 0.691181, 62.874100, 63.103700),
        (10, 3, _INF, 0.179, 0.023, 0.075, 2.4, -51, 0.710529, 88.286800, 88.639100),
        (16, 2, _INF, 0.210, 0.051, 0.14, 1.5, -24, 0.666680, 36.279800, 36.452400),
        (15, 2, _INF, 0.203, 0.041, 0.12, 1.7, -31, 0.673871, 44.825700, 45.060400),
        (14, 2, _INF, 0.195, 0.032, 0.10, 1.9, -36, 0.685753, 60.736200, 61.102300),
        (13, 2, _INF, 0.185, 0.024, 0.084, 2.2, -45, 0.698480, 85.148100, 85.689400),
        (12, 2, _INF, 0.171, 0.016, 0.061, 2.8, -65, 0.713429, 127.758000, 128.582000),
        (19, 1, _INF, 0.205, 0.040, 0.11, 1.9, -43, 0.672302, 53.071400, 53.828200),
        (18, 1, _INF, 0.198, 0.032, 0.10, 2.0, -43, 0.682580, 72.342400, 73.403900),
        (17, 1, _INF, 0.189, 0.024, 0.079, 2.4, -57, 0.695035, 103.055000, 104.721000),
        (16, 1, _INF, 0.176, 0.016, 0.063, 2.8, -67, 0.712966, 170.100000, 173.003000),
    ),
    "BLOSUM50": (
        (_INF, _INF, _INF, 0.2318, 0.112, 0.3362, 0.6895, -4.0, 0.609639, 5.388310, 5.388310),
        (13, 3, _INF, 0.212, 0.063, 0.19, 1.1, -16, 0.639287, 18.113800, 18.202800),
        (12, 3, _INF, 0.206, 0.055, 0.17, 1.2, -18, 0.644715, 22.654600, 22.777700),
        (11, 3, _INF, 0.197, 0.042, 0.14, 1.4, -25, 0.656327, 29.861100, 30.045700),
        (10, 3, _INF, 0.186, 0.031, 0.11, 1.7, -34, 0.671150, 42.393800, 42.674000),
        (9, 3, _INF, 0.172, 0.022, 0.082, 2.1, -48, 0.694326, 66.069600, 66.516400),
        (16, 2, _INF, 0.215, 0.066, 0.20, 1.05, -15, 0.633899, 17.951800, 18.092100),
        (15, 2, _INF, 0.210, 0.058, 0.17, 1.2, -20, 0.641985, 21.940100, 22.141800),
        (14, 2, _INF, 0.202, 0.045, 0.14, 1.4, -27, 0.650682, 28.681200, 28.961900),
        (13, 2, _INF, 0.193, 0.035, 0.12, 1.6, -32, 0.660984, 42.059500, 42.471600),
        (12, 2, _INF, 0.181, 0.025, 0.095, 1.9, -41, 0.678090, 63.747600, 64.397300),
        (19, 1, _INF, 0.212, 0.057, 0.18, 1.2, -21, 0.635714, 26.311200, 26.923300),
        (18, 1, _INF, 0.207, 0.050, 0.15, 1.4, -28, 0.643523, 34.903700, 35.734800),
        (17, 1, _INF, 0.198, 0.037, 0.12, 1.6, -33, 0.654504, 48.895800, 50.148600),
        (16, 1, _INF, 0.186, 0.025, 0.10, 1.9, -42, 0.667750, 76.469100, 78.443000),
        (15, 1, _INF, 0.171, 0.015, 0.063, 2.7, -76, 0.694575, 140.053000, 144.160000),
    ),
    "BLOSUM62": (
        (_INF, _INF, _INF, 0.3176, 0.134, 0.4012, 0.7916, -3.2, 0.623757, 4.964660, 4.964660),
        (11, 2, _INF, 0.297, 0.082, 0.27, 1.1, -10, 0.641766, 12.673800, 12.757600),
        (10, 2, _INF, 0.291, 0.075, 0.23, 1.3, -15, 0.649362, 16.474000, 16.602600),
        (9, 2, _INF, 0.279, 0.058, 0.19, 1.5, -19, 0.659245, 22.751900, 22.950000),
        (8, 2, _INF, 0.264, 0.045, 0.15, 1.8, -26, 0.672692, 35.483800, 35.821300),
        (7, 2, _INF, 0.239, 0.027, 0.10, 2.5, -46, 0.702056, 61.238300, 61.886000),
        (6, 2, _INF, 0.201, 0.012, 0.061, 3.3, -58, 0.740802, 140.417000, 141.882000),
        (13, 1, _INF, 0.292, 0.071, 0.23, 1.2, -11, 0.647715, 19.506300, 19.893100),
        (12, 1, _INF, 0.283, 0.059, 0.19, 1.5, -19, 0.656391, 27.856200, 28.469900),
        (11, 1, _INF, 0.267, 0.041, 0.14, 1.9, -30, 0.669720, 42.602800, 43.636200),
        (10, 1, _INF, 0.243, 0.024, 0.10, 2.5, -44, 0.693267, 83.178700, 85.065600),
        (9, 1, _INF, 0.206, 0.010, 0.052, 4.0, -87, 0.731887, 210.333000, 214.842000),
    ),
    "BLOSUM80": (
        (_INF, _INF, _INF, 0.3430, 0.177, 0.6568, 0.5222, -1.6, 0.564057, 1.918130, 1.918130),
        (25, 2, _INF, 0.342, 0.17, 0.66, 0.52, -1.6, 0.563956, 1.731000, 1.731300),
        (13, 2, _INF, 0.336, 0.15, 0.57, 0.59, -3, 0.570979, 2.673470, 2.692300),
        (9, 2, _INF, 0.319, 0.11, 0.42, 0.76, -6, 0.587837, 5.576090, 5.667860),
        (8, 2, _INF, 0.308, 0.090, 0.35, 0.89, -9, 0.597556, 7.536950, 7.686230),
        (7, 2, _INF, 0.293, 0.070, 0.27, 1.1, -14, 0.615254, 11.586600, 11.840400),
        (6, 2, _INF, 0.268, 0.045, 0.19, 1.4, -19, 0.644054, 19.958100, 20.441200),
        (11, 1, _INF, 0.314, 0.095, 0.35, 0.90, -9, 0.590702, 8.808610, 9.223320),
        (10, 1, _INF, 0.299, 0.071, 0.27, 1.1, -14, 0.609620, 13.833800, 14.533400),
        (9, 1, _INF, 0.279, 0.048, 0.20, 1.4, -19, 0.623800, 24.252000, 25.490400),
    ),
    "BLOSUM90": (
        (_INF, _INF, _INF, 0.3346, 0.190, 0.7547, 0.4434, -1.4, 0.544178, 1.377760, 1.377760),
        (9, 2, _INF, 0.310, 0.12, 0.46, 0.67, -6, 0.570267, 4.232290, 4.334170),
        (8, 2, _INF, 0.300, 0.099, 0.39, 0.76, -7, 0.581580, 5.797020, 5.961420),
        (7, 2, _INF, 0.283, 0.072, 0.30, 0.93, -11, 0.600024, 9.040880, 9.321600),
        (6, 2, _INF, 0.259, 0.048, 0.22, 1.2, -16, 0.629344, 16.024400, 16.531600),
        (11, 1, _INF, 0.302, 0.093, 0.39, 0.78, -8, 0.576919, 7.143250, 7.619190),
        (10, 1, _INF, 0.290, 0.075, 0.28, 1.04, -15, 0.591366, 11.483900, 12.269800),
        (9, 1, _INF, 0.265, 0.044, 0.20, 1.3, -19, 0.613013, 21.408300, 22.840900),
    ),
    "PAM250": (
        (_INF, _INF, _INF, 0.2252, 0.0868, 0.2223, 0.98, -5.0, 0.660059, 11.754300, 11.754300),
        (15, 3, _INF, 0.205, 0.049, 0.13, 1.6, -23, 0.687656, 34.578400, 34.928000),
        (14, 3, _INF, 0.200, 0.043, 0.12, 1.7, -26, 0.689768, 43.353000, 43.443800),
        (13, 3, _INF, 0.194, 0.036, 0.10, 1.9, -31, 0.697431, 50.948500, 51.081700),
        (12, 3, _INF, 0.186, 0.029, 0.085, 2.2, -41, 0.704565, 69.606500, 69.793600),
        (11, 3, _INF, 0.174, 0.020, 0.070, 2.5, -48, 0.722438, 98.653500, 98.927100),
        (17, 2, _INF, 0.204, 0.047, 0.12, 1.7, -28, 0.684799, 41.583800, 41.735800),
        (16, 2, _INF, 0.198, 0.038, 0.11, 1.8, -29, 0.691098, 51.635200, 51.843900),
        (15, 2, _INF, 0.191, 0.031, 0.087, 2.2, -44, 0.699051, 67.256700, 67.558500),
        (14, 2, _INF, 0.182, 0.024, 0.073, 2.5, -53, 0.714103, 96.315100, 96.756800),
        (13, 2, _INF, 0.171, 0.017, 0.059, 2.9, -64, 0.728738, 135.653000, 136.339000),
        (21, 1, _INF, 0.205, 0.045, 0.11, 1.8, -34, 0.683265, 48.728200, 49.218800),
        (20, 1, _INF, 0.199, 0.037, 0.10, 1.9, -35, 0.689380, 60.832000, 61.514100),
        (19, 1, _INF, 0.192, 0.029, 0.083, 2.3, -52, 0.696344, 84.019700, 84.985600),
        (18, 1, _INF, 0.183, 0.021, 0.070, 2.6, -60, 0.710525, 113.829000, 115.184000),
        (17, 1, _INF, 0.171, 0.014, 0.052, 3.3, -86, 0.727000, 175.071000, 177.196000),
    ),
    "PAM30": (
        (_INF, _INF, _INF, 0.3400, 0.283, 1.754, 0.1938, -0.3, 0.436164, 0.161818, 0.161818),
        (7, 2, _INF, 0.305, 0.15, 0.87, 0.35, -3, 0.479087, 1.014010, 1.162730),
        (6, 2, _INF, 0.287, 0.11, 0.68, 0.42, -4, 0.499980, 1.688060, 1.951430),
        (5, 2, _INF, 0.264, 0.079, 0.45, 0.59, -7, 0.533009, 3.377010, 3.871950),
        (10, 1, _INF, 0.309, 0.15, 0.88, 0.35, -3, 0.474741, 1.372050, 1.788770),
        (9, 1, _INF, 0.294, 0.11, 0.61, 0.48, -6, 0.492716, 2.463920, 3.186150),
        (8, 1, _INF, 0.270, 0.072, 0.40, 0.68, -10, 0.521286, 5.368130, 6.763480),
    ),
    "PAM70": (
        (_INF, _INF, _INF, 0.3345, 0.229, 1.029, 0.3250, -0.7, 0.511296, 0.633439, 0.633439),
        (8, 2, _INF, 0.301, 0.12, 0.54, 0.56, -5, 0.549019, 2.881650, 3.025710),
        (7, 2, _INF, 0.286, 0.093, 0.43, 0.67, -7, 0.565659, 4.534540, 4.785780),
        (6, 2, _INF, 0.264, 0.064, 0.29, 0.90, -12, 0.596330, 7.942630, 8.402720),
        (11, 1, _INF, 0.305, 0.12, 0.52, 0.59, -6, 0.543514, 3.681400, 4.108020),
        (10, 1, _INF, 0.291, 0.091, 0.41, 0.71, -9, 0.560723, 6.002970, 6.716570),
        (9, 1, _INF, 0.270, 0.060, 0.28, 0.97, -14, 0.585186, 11.360800, 12.636700),
    ),
}


@dataclass(frozen=True)
class KarlinAltschul:
    """BLAST's gapped statistical parameters for one matrix and gap-cost pair.

    ``lambda_``, ``K``, ``H``, ``alpha``, ``beta`` are the Karlin-Altschul values
    (Altschul et al. 2001); ``C``, ``alpha_v``, ``sigma`` and the ungapped-row
    ``alpha_un``, ``alpha_v_un`` feed Spouge's finite-size correction.
    """

    matrix: str
    gap_open: int
    gap_extend: int
    lambda_: float
    K: float
    H: float
    alpha: float
    beta: float
    C: float
    alpha_v: float
    sigma: float
    alpha_un: float
    alpha_v_un: float

    @property
    def logK(self) -> float:
        """``log(K)``, computed as BLAST does (``kbp->logK = log(kbp->K)``)."""
        return math.log(self.K)

    def bit_score(self, raw):
        return bit_score(raw, self)

    def evalue(self, raw, query_length, db_residues: int, db_sequences: int):
        return evalue(raw, query_length, db_residues, db_sequences, self)

    def spouge_evalue(self, raw, query_length, subject_length, db_residues: int):
        return spouge_evalue(raw, query_length, subject_length, db_residues, self)


def _row_params(name: str, row: tuple[float, ...], ungapped: tuple[float, ...]) -> KarlinAltschul:
    return KarlinAltschul(
        matrix=name,
        gap_open=int(row[0]),
        gap_extend=int(row[1]),
        lambda_=row[3],
        K=row[4],
        H=row[5],
        alpha=row[6],
        beta=row[7],
        C=row[8],
        alpha_v=row[9],
        sigma=row[10],
        alpha_un=ungapped[6],
        alpha_v_un=ungapped[9],
    )


_PARAMS: dict[tuple[str, int, int], KarlinAltschul] = {
    (name, int(row[0]), int(row[1])): _row_params(name, row, rows[0])
    for name, rows in _TABLES.items()
    for row in rows[1:]
}


def lookup(matrix_name: str, gap_open: int, gap_extend: int) -> KarlinAltschul | None:
    """BLAST's gapped parameters for this scheme, or ``None`` if BLAST has no row.

    The matrix name is matched case-insensitively (BLAST uses ``strcasecmp``).
    ``None`` means: write E-values and bit scores as ``NA``.
    """
    key = (str(matrix_name).upper(), int(gap_open), int(gap_extend))
    return _PARAMS.get(key)


#: BLAST+ blastp's default gap costs per matrix (what ``blastp -matrix M`` prints
#: as "Gap Penalties", read off blastp 2.12).
BLAST_DEFAULT_GAPS: dict[str, tuple[int, int]] = {
    "BLOSUM45": (14, 2),
    "BLOSUM50": (13, 2),
    "BLOSUM62": (11, 1),
    "BLOSUM80": (10, 1),
    "BLOSUM90": (10, 1),
    "PAM30": (9, 1),
    "PAM70": (10, 1),
    "PAM250": (14, 2),
}


def gap_pairs(matrix_name: str) -> list[tuple[int, int]]:
    """The (gap_open, gap_extend) pairs BLAST has statistics for with this matrix."""
    name = str(matrix_name).upper()
    return sorted((go, ge) for (m, go, ge) in _PARAMS if m == name)


def no_statistics_message(matrix_name: str, gap_open: int, gap_extend: int) -> str:
    """One line saying E-values are off for this scheme and what BLAST would use."""
    name = str(matrix_name).upper()
    pairs = gap_pairs(name)
    if not pairs:
        return (
            f"BLAST has no statistics for matrix {matrix_name}: bit scores and E-values "
            f"are NA and no E-value cut-off applies (every query keeps its top_k hits)"
        )
    default = BLAST_DEFAULT_GAPS.get(name)
    hint = (
        f"BLAST's default gaps for {name} are {default[0]}/{default[1]}"
        if default
        else f"BLAST has statistics for {name} with gaps " + ", ".join(f"{a}/{b}" for a, b in pairs)
    )
    return (
        f"BLAST has no statistics for {name} with gaps {gap_open}/{gap_extend} ({hint}; "
        f"any of {', '.join(f'{a}/{b}' for a, b in pairs)} has them): bit scores and "
        f"E-values are NA and no E-value cut-off applies (every query keeps its top_k hits)"
    )


def supported() -> list[tuple[str, int, int]]:
    """All (matrix, gap_open, gap_extend) triples with BLAST statistics, sorted."""
    return sorted(_PARAMS)


def _out(x):
    """A 0-d result as a Python float, an array as an array."""
    x = np.asarray(x, dtype=np.float64)
    return float(x) if x.ndim == 0 else x


def bit_score(raw, params: KarlinAltschul):
    """``(lambda*S - ln K) / ln 2`` (``Blast_HSPListGetBitScores``).

    ``raw`` may be a number or an array of raw scores.
    """
    return _out((np.asarray(raw, dtype=np.float64) * params.lambda_ - params.logK) / math.log(2.0))


def length_adjustment(
    query_length: int, db_residues: int, db_sequences: int, params: KarlinAltschul
) -> tuple[int, bool]:
    """BLAST's length adjustment ``L`` and whether its iteration converged.

    Port of ``BLAST_ComputeLengthAdjustment`` (blast_stat.c), called as
    ``BLAST_CalcEffLengths`` calls it for gapped protein searches: with
    ``alpha/Lambda`` and ``beta`` from the table.  ``L`` is (usually) the largest
    integer below the fixed point of
    ``f(l) = beta + (alpha/lambda) * (log K + log((m - l)(n - N l)))``
    and small enough that ``K (m - L)(n - N L) > max(m, n)``.
    """
    K = params.K
    logK = params.logK
    alpha_d_lambda = params.alpha / params.lambda_
    beta = params.beta
    max_iterations = 20
    m = float(query_length)
    n = float(db_residues)
    N = float(db_sequences)

    # ell_max: the largest non-negative value with K (m - ell)(n - N ell) > max(m, n),
    # by the quadratic formula 2c / (-b + sqrt(b*b - 4ac)) (mb is -b).
    a = N
    mb = m * N + n
    c = n * m - max(m, n) / K
    if c < 0:
        return 0, False
    ell_max = 2 * c / (mb + math.sqrt(mb * mb - 4 * a * c))

    ell_min = 0.0
    ell_next = 0.0
    converged = False
    for i in range(1, max_iterations + 1):
        ell = ell_next
        ss = (m - ell) * (n - N * ell)
        ell_bar = alpha_d_lambda * (logK + math.log(ss)) + beta
        if ell_bar >= ell:  # ell is no bigger than the true fixed point
            ell_min = ell
            if ell_bar - ell_min <= 1.0:
                converged = True
                break
            if ell_min == ell_max:  # no more points to check
                break
        else:  # ell is greater than the true fixed point
            ell_max = ell
        if ell_min <= ell_bar <= ell_max:  # ell_bar is in range: accept it
            ell_next = ell_bar
        else:
            ell_next = ell_max if i == 1 else (ell_min + ell_max) / 2

    if converged:
        # floor(ell_min) is assumed to be floor(fixed point); check ceil(ell_min) too.
        result = int(ell_min)  # (Int4) cast: truncation; ell_min >= 0
        ell = math.ceil(ell_min)
        if ell <= ell_max:
            ss = (m - ell) * (n - N * ell)
            if alpha_d_lambda * (logK + math.log(ss)) + beta >= ell:
                result = int(ell)
        return result, True
    return int(ell_min), False  # did not converge: best value seen so far


def effective_search_space(
    query_length: int, db_residues: int, db_sequences: int, params: KarlinAltschul
) -> int:
    """``(m - L) * max(n - N*L, 1)`` as ``BLAST_CalcEffLengths`` computes it (Int8)."""
    L, _ = length_adjustment(query_length, db_residues, db_sequences, params)
    effective_db_length = int(db_residues) - int(db_sequences) * L
    if effective_db_length <= 0:
        effective_db_length = 1
    return effective_db_length * (int(query_length) - L)


def evalue(raw, query_length, db_residues: int, db_sequences: int, params: KarlinAltschul):
    """Classic Karlin-Altschul E-value over BLAST's effective search space.

    ``BLAST_KarlinStoE_simple``: ``searchsp * exp(-lambda*S + log K)``.  This is
    what BLAST+ reports for blastp with ``-comp_based_stats 0`` when the
    environment variable ``OLD_FSC`` is set; see :func:`spouge_evalue` for the
    default path.  ``raw`` and ``query_length`` may be numbers or arrays
    (broadcast together); the database size is that of the whole database.
    """
    raw_a = np.asarray(raw, dtype=np.float64)
    m = np.asarray(query_length, dtype=np.int64)
    unique, inverse = np.unique(m, return_inverse=True)
    space = np.array(
        [effective_search_space(int(u), db_residues, db_sequences, params) for u in unique],
        dtype=np.float64,
    )
    searchsp = space[inverse].reshape(m.shape) if m.ndim else space[0]
    return _out(searchsp * np.exp(-params.lambda_ * raw_a + params.logK))


def spouge_evalue(raw, query_length, subject_length, db_residues: int, params: KarlinAltschul):
    """E-value with Spouge's finite-size correction (``BLAST_SpougeStoE``).

    This is BLAST+'s default for gapped blastp (no ``OLD_FSC``): a pairwise
    E-value for query length ``m`` and subject length ``n`` scaled to the
    database by ``db_residues / n`` (``gbp->db_length`` is the database's total
    length, ``BLAST_GapAlignSetUp``).  Gumbel parameters as set by
    ``Blast_GumbelBlkLoadFromTables``: ``a = alpha``, ``b = 2G(alpha_un - alpha)``,
    ``Alpha = alpha_v``, ``Beta = 2G(alpha_v_un - alpha_v)``,
    ``Tau = 2G(alpha_v_un - sigma)``, ``G = gap_open + gap_extend``.
    ``P(x)`` is the normal CDF, ``erfc(-x / sqrt 2) / 2``, as BLAST+ 2.12 and later
    compute it (``P_m_F = ErfC(-m_F / sqrt(2.0)) / 2.0`` in ``BLAST_SpougeStoE``;
    some older copies of blast_stat.c had ``0.5 + 0.5 * BLAST_Erf(m_F)``, which
    disagrees with the blastp 2.12 binary: tests/data/blast/ holds the fixture).
    ``math.erfc`` stands in for NCBI's ``ErfC`` (both double-precision erfc).
    ``raw``, ``query_length`` and ``subject_length`` may be numbers or arrays.
    """
    lambda_ = params.lambda_
    G = params.gap_open + params.gap_extend
    a = params.alpha
    b = 2.0 * G * (params.alpha_un - params.alpha)
    alpha_v = params.alpha_v
    beta_v = 2.0 * G * (params.alpha_v_un - params.alpha_v)
    sigma = params.sigma
    tau = 2.0 * G * (params.alpha_v_un - params.sigma)
    const_val = 0.39894228040143267793994605993438  # 1/sqrt(2 pi)
    y = np.asarray(raw, dtype=np.float64)
    m = np.asarray(query_length, dtype=np.float64)
    n = np.asarray(subject_length, dtype=np.float64)
    # scale_factor = kbp->Lambda / gbp->Lambda is 1 here (unscaled scores).
    db_scale_factor = float(db_residues) / n if db_residues else 1.0

    m_li_y = m - (a * y + b)
    vi_y = np.maximum(2.0 * alpha_v / lambda_, alpha_v * y + beta_v)
    sqrt_vi_y = np.sqrt(vi_y)
    m_F = m_li_y / sqrt_vi_y
    P_m_F = 0.5 * _erfc(-m_F / _SQRT2)
    p1 = m_li_y * P_m_F + sqrt_vi_y * const_val * np.exp(-0.5 * m_F * m_F)

    n_lj_y = n - (a * y + b)
    vj_y = np.maximum(2.0 * alpha_v / lambda_, alpha_v * y + beta_v)
    sqrt_vj_y = np.sqrt(vj_y)
    n_F = n_lj_y / sqrt_vj_y
    P_n_F = 0.5 * _erfc(-n_F / _SQRT2)
    p2 = n_lj_y * P_n_F + sqrt_vj_y * const_val * np.exp(-0.5 * n_F * n_F)

    c_y = np.maximum(2.0 * sigma / lambda_, sigma * y + tau)
    area = p1 * p2 + c_y * P_m_F * P_n_F
    return _out(area * params.K * np.exp(-lambda_ * y) * db_scale_factor)


def spouge_evalue_floor(raw, query_length, subject_length, db_residues: int, params):
    """A value never above :func:`spouge_evalue`, cheap to compute: to drop hits far
    above an E-value cut-off before their E-values are computed.

    Spouge's ``p1 = mu P(mu / s) + s phi(mu / s)`` is E[X+] for X normal with mean
    ``mu = m - (a y + b)``, so ``p1 >= max(mu, 0)`` (Jensen); so is ``p2`` with ``n``;
    and the gap term ``c_y P P`` is not negative."""
    a = params.alpha
    b = 2.0 * (params.gap_open + params.gap_extend) * (params.alpha_un - params.alpha)
    y = np.asarray(raw, dtype=np.float64)
    n = np.asarray(subject_length, dtype=np.float64)
    lead = a * y + b
    area = np.maximum(np.asarray(query_length, dtype=np.float64) - lead, 0.0) * np.maximum(
        n - lead, 0.0
    )
    scale = float(db_residues) / n if db_residues else 1.0
    return area * params.K * np.exp(-params.lambda_ * y) * scale


def spouge_floor_may_pass(
    query_lengths, q, raw, subject_length, db_residues: int, params, cutoff, table=None
):
    """A mask of the hits whose :func:`spouge_evalue_floor` may be at most ``cutoff``
    (every such hit is in it; few others): hit ``i`` of query ``q[i]`` (length
    ``query_lengths[q[i]]``), score ``raw[i]``, subject length ``subject_length[i]``.
    Cheaper than the floor of every hit: a few integer operations per hit, the floor
    itself only for the hits it keeps.

    For a query length m and subjects at least e long, the floor is at least
    ``h(y) = max(m - lead, 0) * f * K exp(-lambda y) * D``, ``lead = a y + b``: with
    a database size (``D`` = ``db_residues``) ``f = max(e - lead, 0) / e`` where
    ``lead > 0`` ((n - lead)/n grows with n) and 1 otherwise ((n - lead)/n >= 1);
    without one (``D`` = 1) ``f = max(e - lead, 0)``.  ``h`` does not grow with the
    score (``a >= 0``, ``lambda > 0``), so per query length and class of subject
    lengths (half octaves: e = 1, 2, 3, 4, 6, 8, 12, ...) a binary search gives the
    least score whose ``h`` is at most ``cutoff``; a hit below it has a floor above
    ``cutoff``.  (Where ``a < 0`` or ``lambda <= 0`` every hit is kept.)

    ``table``: a :class:`LeastPassing` of these query lengths, database size,
    parameters and cut-off whose scores span these hits' (made here where None)."""
    q = np.asarray(q, dtype=np.int64)
    y = np.asarray(raw, dtype=np.int64)
    n = np.asarray(subject_length, dtype=np.int64)
    if not len(y):
        return np.ones(0, dtype=bool)
    lo, hi = int(y.min()), int(y.max())
    if table is None or not table.spans(lo, hi):
        table = LeastPassing(query_lengths, lo, hi, db_residues, params, cutoff)
    if table.low is None:
        return np.ones(len(y), dtype=bool)
    low, which = table.low, table.which
    least = low.reshape(-1)[which[q] * low.shape[1] + _length_class(n)]
    return (y >= least) | (n < 1)


def _length_class(n: np.ndarray) -> np.ndarray:
    """Each subject length's class in :func:`_least_passing`'s table: the largest j
    with e_j <= n (half octaves), from the float32 exponent and first mantissa bit
    of n (exact below 2**24; longer: as 2**24 - 1; below 1: as 1)."""
    f32 = np.minimum(np.maximum(n, 1), (1 << 24) - 1).astype(np.float32)
    return (f32.view(np.int32) >> 22) - 254


class LeastPassing:
    """:func:`spouge_floor_may_pass`'s table for scores in ``[lo, hi]``
    (:func:`_least_passing`; ``low`` None where the bound does not apply), kept to screen
    several sets of hits whose scores lie in that range."""

    def __init__(self, query_lengths, lo: int, hi: int, db_residues: int, params, cutoff):
        self.lo, self.hi = int(lo), int(hi)
        table = _least_passing(query_lengths, self.lo, self.hi, db_residues, params, cutoff)
        self.low, self.which = table if table is not None else (None, None)

    def spans(self, lo: int, hi: int) -> bool:
        """Whether its scores span ``[lo, hi]`` (a least score of ``self.hi + 1``, none
        in its range, stays none for any score up to ``self.hi``)."""
        return self.lo <= lo and hi <= self.hi


def _least_passing(query_lengths, lo: int, hi: int, db_residues: int, params, cutoff):
    """:func:`spouge_floor_may_pass`'s table: per distinct query length (``which``:
    each query's row) and half-octave class of subject lengths (48 columns), the least
    score in ``[lo, hi]`` whose bound is at most ``cutoff`` (``hi + 1`` where none is);
    None where the bound does not apply (``a < 0`` or ``lambda <= 0``)."""
    a = float(params.alpha)
    if not (a >= 0 and params.lambda_ > 0):
        return None
    b = 2.0 * (params.gap_open + params.gap_extend) * (params.alpha_un - params.alpha)
    lengths, which = np.unique(np.asarray(query_lengths, dtype=np.int64), return_inverse=True)
    m = lengths.astype(np.float64)[:, None]
    j = np.arange(48)
    e = (2.0 ** (j // 2) * np.where(j % 2 == 1, 1.5, 1.0))[None, :]
    strict = float(cutoff) * (1 + 1e-9)  # beyond the floor's own rounding

    def h(score):  # (lengths, classes) -> the bound
        lead = a * score + b
        if db_residues:
            f = np.where(lead > 0, np.maximum(e - lead, 0.0) / e, 1.0) * float(db_residues)
        else:
            f = np.maximum(e - lead, 0.0)
        return np.maximum(m - lead, 0.0) * f * params.K * np.exp(-params.lambda_ * score)

    # the least score in [lo, hi + 1] with h <= cutoff (hi + 1: none)
    low = np.full((len(lengths), len(j)), int(lo), dtype=np.int64)
    high = np.full_like(low, int(hi) + 1)
    while True:
        open_ = low < high
        if not open_.any():
            break
        mid = (low + high) // 2
        fits = h(mid.astype(np.float64)) <= strict
        high = np.where(open_ & fits, mid, high)
        low = np.where(open_ & ~fits, mid + 1, low)
    return low, which.reshape(-1)


_erfc_each = np.vectorize(math.erfc, otypes=[np.float64])
_SQRT2 = math.sqrt(2.0)
#: Below this, erfc(x) is 2 - erfc(-x) with erfc(-x) < 1.2e-29, far under half an
#: ulp of 2 (2.2e-16): every correctly rounded erfc returns 2.0 there.
_ERFC_TWO_BELOW = -8.0


def _erfc(x) -> np.ndarray:
    """``math.erfc`` element by element (as BLAST+'s ``ErfC``), skipping the Python
    call where the result is exactly 2.0 (most of a database's hits: long
    sequences put the Spouge arguments far below zero)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, 2.0)
    some = ~(x < _ERFC_TWO_BELOW)  # NaN goes through math.erfc too
    if some.any():
        out[some] = _erfc_each(x[some])
    return out[()] if out.ndim == 0 else out


def _missing(x) -> bool:
    if x is None:
        return True
    try:
        return math.isnan(x)
    except TypeError:
        return False


def format_evalue(e: float | None) -> str:
    """An E-value as BLAST+ writes it in tabular output (``-outfmt 6``/``7``).

    ``CAlignFormatUtil::GetScoreString`` and the override in
    ``CBlastTabularInfo::SetScores`` (BLAST+ 2.16 source): below 1e-180 ``0.0``;
    below 0.0009 ``%.2e`` (``2.00e-45``); below 0.1 ``%4.3f``; below 1 ``%3.2f``;
    below 10 ``%2.1f``; else ``%2.0f``.  ``None``/NaN -> ``NA``.  (Older releases
    wrote ``%3.0le`` -- ``2e-45`` -- in tabular output too, e.g. BLAST+ 2.2.26.)
    """
    if _missing(e):
        return NA
    e = float(e)
    if e < 1.0e-180:
        return "0.0"
    if e < 0.0009:
        return "%.2e" % e
    if e < 0.1:
        return "%4.3f" % e
    if e < 1.0:
        return "%3.2f" % e
    if e < 10.0:
        return "%2.1f" % e
    return "%2.0f" % e


def format_bitscore(bits: float | None) -> str:
    """A bit score as BLAST+ writes it (``CAlignFormatUtil::GetScoreString``).

    Above 99999 ``%5.3e``; above 99.9 the truncated integer ``%3.0ld``; else
    ``%4.1f`` -- which pads values below 10 with a leading space (`` 9.5``),
    exactly as BLAST does.  ``None``/NaN -> ``NA``.  (BLAST+ 2.2.26 used
    ``%4.0ld`` above 99.9, printing `` 199`` with a space.)
    """
    if _missing(bits):
        return NA
    bits = float(bits)
    if bits > 99999:
        return "%5.3e" % bits
    if bits > 99.9:
        return "%3d" % int(bits)  # (long) cast truncates toward zero
    return "%4.1f" % bits
