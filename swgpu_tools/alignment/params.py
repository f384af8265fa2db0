"""Scoring parameters as the kernels take them: (int32 matrix, gap_open, gap_extend).

A :class:`~swgpu_tools.scoring.ScoringScheme` is validated when it is made;
its arrays are taken as they are.  Raw values (a matrix and two gap costs,
as tests and older callers pass them) are checked once here, where they
enter; nothing below checks them again.
"""

from __future__ import annotations

import numpy as np

from ..scoring import ScoringScheme, longest_alignable_pair


def kernel_scoring(matrix, gap_open=None, gap_extend=None) -> tuple[np.ndarray, int, int]:
    """(matrix, gap_open, gap_extend) for the kernels from a scheme or from raw values.

    ``matrix`` is a ScoringScheme (then the gap costs may be left out, or must
    equal the scheme's) or a square integer array (then both gap costs are
    needed; ValueError for a bad matrix or negative / all-zero gap costs).
    """
    if isinstance(matrix, ScoringScheme):
        for name, given in (("gap_open", gap_open), ("gap_extend", gap_extend)):
            if given is not None and int(given) != getattr(matrix, name):
                raise ValueError(
                    f"{name}={given} differs from the scheme's {getattr(matrix, name)}"
                )
        return matrix.matrix, matrix.gap_open, matrix.gap_extend
    if gap_open is None or gap_extend is None:
        raise TypeError("gap_open and gap_extend are needed with a raw matrix")
    matrix = np.ascontiguousarray(matrix, dtype=np.int32)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError("matrix must be a non-empty square array")
    gap_open, gap_extend = int(gap_open), int(gap_extend)
    if gap_open < 0 or gap_extend < 0 or gap_open + gap_extend <= 0:
        raise ValueError("gap costs must be >= 0 and not both 0")
    return matrix, gap_open, gap_extend


def check_range(longest_pair: int, matrix: np.ndarray, gap_open: int, gap_extend: int) -> None:
    """ValueError unless int32 DP values of pairs this long stay far from NEG and int32's limits."""
    if longest_pair > longest_alignable_pair(matrix, gap_open, gap_extend):
        raise ValueError(
            f"scores of a pair of {longest_pair:,} residues in all could exceed the 32-bit "
            f"range with these costs"
        )
