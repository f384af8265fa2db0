"""Huge sequences in the CPU search (:mod:`.cpu`): limits, subject pieces, progress.

* Queries longer than :data:`STRIP_ROWS` are scored in strips of rows
  (``cpu._score_strips``): lane scratch does not grow with the query.
* Subjects longer than :data:`PIECE_COLS` are cut into overlapping pieces
  (:func:`split_pieces`) where :func:`piece_overlap` bounds the subject
  columns a positive-scoring alignment of the query spans: a piece's
  alignments are the subject's, and every positive one lies whole in some
  piece, so the subject's score is the maximum over its pieces.
* A huge query against too few groups of subjects to keep the threads busy
  is cut into overlapping pieces of rows the same way (:func:`row_items`).
* :class:`QueryReport` logs the progress of a long query's lane passes.

``SWGPU_CPU_STRIP_ROWS`` and ``SWGPU_CPU_PIECE_COLS`` override the limits
(tests force tiny ones, so that small inputs take these paths).
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..logs import get_logger

_log = get_logger(__name__)

#: Queries longer than this go in strips of this many rows (lane scratch per
#: thread: 2 x STRIP_ROWS x LANES lane values, 4 MiB in int8 lanes).
STRIP_ROWS = 1 << 16
#: Subjects longer than this are split into overlapping pieces where the query
#: allows it (see ``cpu._Prepared._layout``); pieces are at least PIECE_FACTOR x
#: their overlap long (the overlap costs at most 1 / (PIECE_FACTOR - 1) more cells).
PIECE_COLS = 1 << 16
PIECE_FACTOR = 8


def huge_limits():
    """(strip rows, piece columns): STRIP_ROWS and PIECE_COLS, or the environment's
    SWGPU_CPU_STRIP_ROWS and SWGPU_CPU_PIECE_COLS (tests force tiny ones)."""
    out = []
    for name, default in (
        ("SWGPU_CPU_STRIP_ROWS", STRIP_ROWS),
        ("SWGPU_CPU_PIECE_COLS", PIECE_COLS),
    ):
        text = os.environ.get(name, "").strip()
        out.append(max(1, int(text)) if text else default)
    return tuple(out)


def piece_overlap(m, max_score, gap_extend):
    """Subject columns that every positive-scoring local alignment of a query of length m
    spans fewer of (None when there is no such bound: gap_extend 0).

    An alignment of a columns (matched pairs, each scoring at most max_score)
    and g subject residues in gaps (each costing at least gap_extend, the
    gap openings are >= 0 on top) scores at most a*max_score - g*gap_extend;
    positive means g < a*max_score/gap_extend <= m*max_score/gap_extend, so it
    spans a + g < m + m*max_score/gap_extend columns.
    """
    if max_score <= 0:
        return 1  # every score is 0: any pieces will do
    if gap_extend <= 0:
        return None
    return m + (m * max_score + gap_extend - 1) // gap_extend


def split_pieces(length, piece, overlap):
    """(starts, ends) of the pieces of a subject of ``length`` residues: ``piece``
    residues each (the last one shorter), consecutive pieces sharing ``overlap``
    residues (piece > overlap), so that every stretch of at most ``overlap``
    residues lies whole in one piece."""
    step = piece - overlap
    count = max(1, -(-(length - overlap) // step))  # ceil, until a piece reaches the end
    starts = np.arange(count, dtype=np.int64) * step
    ends = np.minimum(starts + piece, length)
    return starts, ends


# ---------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------
def row_items(gncols, m, max_score, gap_extend, threads, min_rows):
    """Work items (group, first row, end row), int64 (n, 3), of a query of m rows
    against groups of ``gncols`` columns.

    A group's rows are one item, unless there are too few groups to keep
    ``threads`` threads busy (a huge query against a few subjects): then they
    are cut into overlapping pieces of rows, as subjects are
    (:func:`split_pieces`), overlapping by :func:`piece_overlap` of the
    group's columns (an alignment with a positive score spans fewer query rows
    than that), each at least PIECE_FACTOR x the overlap and ``min_rows`` long.
    The group's lanes score the maximum over their items.
    """
    ngroups = len(gncols)
    want = 4 * max(1, int(threads))
    parts = []
    for g in range(ngroups):
        ov = piece_overlap(int(gncols[g]), max_score, gap_extend) if ngroups < want else None
        rows = m
        if ov is not None:
            per = -(-want // ngroups)
            rows = max(-(-m // per) + ov, PIECE_FACTOR * ov, int(min_rows))
        if rows >= m:
            parts.append(np.array([[g, 0, m]], dtype=np.int64))
            continue
        starts, ends = split_pieces(m, rows, ov)
        part = np.empty((len(starts), 3), dtype=np.int64)
        part[:, 0], part[:, 1], part[:, 2] = g, starts, ends
        parts.append(part)
    return np.concatenate(parts) if parts else np.zeros((0, 3), dtype=np.int64)


def renumber(q, block=1 << 20):
    """(letters, qc): the distinct codes of ``q`` (sorted) and q renumbered 0.. by them
    (uint8; worked in blocks, so no temporary copy of a long query is wider)."""
    present = np.zeros(256, dtype=np.int64)
    for a in range(0, q.shape[0], block):
        present += np.bincount(q[a : a + block], minlength=256)
    letters = np.flatnonzero(present)
    renumber = np.zeros(256, dtype=np.uint8)
    renumber[letters] = np.arange(len(letters), dtype=np.uint8)
    qc = np.empty_like(q)
    for a in range(0, q.shape[0], block):
        qc[a : a + block] = renumber[q[a : a + block]]
    return letters, qc


class QueryReport:
    """Logs the progress of one query's lane passes (every ``every_s`` seconds, from
    ``every_s`` after the query's start): long queries or huge databases."""

    every_s = 10.0

    def __init__(self, qi, nq, m):
        self.what = f"query {qi + 1}/{nq} ({m:,} residues)"
        self.t0 = self.last = time.perf_counter()
        self.pass_key = None
        self.pass_t0 = self.t0

    def __call__(self, lanes, done, cells):
        now = time.perf_counter()
        if self.pass_key != (lanes, cells):
            self.pass_key, self.pass_t0 = (lanes, cells), now
        if now - self.last < self.every_s:
            return
        self.last = now
        frac = min(float(done) / max(cells, 1.0), 1.0)
        left = ""
        if frac > 0:
            left = f", about {(now - self.pass_t0) * (1 - frac) / frac:.0f} s left in it"
        _log.info(
            f"{self.what}: {frac:.1%} of its {lanes} lane pass{left}; {now - self.t0:.0f} s so far"
        )
