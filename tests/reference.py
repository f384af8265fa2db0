"""Obviously-correct Smith-Waterman (Gotoh) in plain Python, for tests only.

Written from the textbook recurrences, independently of the kernels.  A gap of
length k costs ``gap_open + k * gap_extend`` (BLAST / SSEARCH convention).

    M[i][j] = best local alignment of a[:i], b[:j] ending with a[i-1]~b[j-1]
    X[i][j] = ... ending with a[i-1] against a gap (gap in b)
    Y[i][j] = ... ending with b[j-1] against a gap (gap in a)

    M[i][j] = s(a[i-1], b[j-1]) + max(0, M[i-1][j-1], X[i-1][j-1], Y[i-1][j-1])
    X[i][j] = max(M[i-1][j] - open - ext, X[i-1][j] - ext, Y[i-1][j] - open - ext)
    Y[i][j] = max(M[i][j-1] - open - ext, Y[i][j-1] - ext, X[i][j-1] - open - ext)

The score is the maximum of M over all cells, or 0.  (Gaps are allowed to
follow each other directly; that can never beat one longer gap, so it does
not change the maximum.)
"""

from __future__ import annotations

NEG = float("-inf")


def sw_score(a, b, matrix, gap_open, gap_extend) -> int:
    """Best local alignment score of code sequences ``a`` and ``b``.

    ``matrix[x][y]`` scores code x against code y (any indexable of ints).
    """
    a = [int(x) for x in a]
    b = [int(y) for y in b]
    n, m = len(a), len(b)
    go = gap_open + gap_extend
    ge = gap_extend
    prev_m = [NEG] * (m + 1)
    prev_x = [NEG] * (m + 1)
    prev_y = [NEG] * (m + 1)
    best = 0
    for i in range(1, n + 1):
        cur_m = [NEG] * (m + 1)
        cur_x = [NEG] * (m + 1)
        cur_y = [NEG] * (m + 1)
        row = matrix[a[i - 1]]
        for j in range(1, m + 1):
            start = max(0, prev_m[j - 1], prev_x[j - 1], prev_y[j - 1])
            cur_m[j] = int(row[b[j - 1]]) + start
            cur_x[j] = max(prev_m[j] - go, prev_x[j] - ge, prev_y[j] - go)
            cur_y[j] = max(cur_m[j - 1] - go, cur_y[j - 1] - ge, cur_x[j - 1] - go)
            if cur_m[j] > best:
                best = cur_m[j]
        prev_m, prev_x, prev_y = cur_m, cur_x, cur_y
    return int(best)


def alignment_score(
    a, b, query_start, subject_start, operations, matrix, gap_open, gap_extend
) -> int:
    """Score of an explicit alignment (ops ``M``/``I``/``D`` from the given starts)."""
    i, j = query_start, subject_start
    score = 0
    prev = None
    for op in operations:
        op = chr(op) if isinstance(op, int) else op
        if op == "M":
            score += int(matrix[int(a[i])][int(b[j])])
            i += 1
            j += 1
        elif op == "I":
            score -= gap_extend + (gap_open if prev != "I" else 0)
            i += 1
        elif op == "D":
            score -= gap_extend + (gap_open if prev != "D" else 0)
            j += 1
        else:
            raise ValueError(f"unknown operation {op!r}")
        prev = op
    return score
