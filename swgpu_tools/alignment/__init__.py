"""Pairwise alignment with traceback (CPU): local, global and semi-global.

:class:`Alignment` is what every traceback returns and what the output tables
are written from.  Coordinates are 0-based, end-exclusive; the tables convert
them to BLAST's 1-based inclusive form.

Scoring is the one of the kernels (:mod:`swgpu_tools.kernels`): substitution
matrix plus BLAST-style affine gaps, a gap of k residues costing
``gap_open + k * gap_extend`` (linear gaps: ``gap_open = 0``); the entry
points take a :class:`~swgpu_tools.scoring.ScoringScheme` or the matrix and
gap costs.  The score of a local alignment returned here equals the kernel
score of the pair.  Modes: :mod:`.modes`.

Every mode has the same three steps; only the region differs.

How an alignment is found (:func:`align`)
-----------------------------------------
1. Locate the end.  Local: forward score-only pass over the whole matrix
   (linear memory): the best score and its end cell.  **Tie rule for the
   end:** the first maximum in column-major order, i.e. the smallest subject
   end, then the smallest query end.  (:func:`align_many` runs this pass for
   ALN_LANES subjects of one query at once in SIMD lanes,
   :mod:`.query_lanes`; :func:`align` runs the scalar passes of
   :mod:`.scalar`; both follow the same tie rules.)  Semi-global: a scalar
   forward pass whose row 0 is 0 (free subject prefix); the end is the best
   cell of the last row, **the smallest subject end** on ties.  Global: the
   end is the corner, nothing to locate.
2. Locate the start.  Reverse score-only pass from that end cell (linear
   memory, stops early): alignments of the reversed prefixes anchored at the
   end cell; the first cell, in column-major order of (subject span, query
   span), whose score equals the best gives the start.  **Tie rule for the
   start:** among the optimal alignments ending at that end cell, the
   shortest subject span, then the shortest query span (largest
   subject_start, then largest query_start).  (:func:`align_many` runs this
   pass in SIMD lanes too: a local alignment of the reversed prefixes with a
   bonus of 1 on the anchor cell, see :func:`.query_lanes.lanes_pass`.)
   Semi-global: only cells spanning the whole query count; **the shortest
   subject span**.  Global: the start is (0, 0).
3. Traceback on that sub-rectangle only (:mod:`.traceback`): a global affine
   (Gotoh) alignment of the two segments, whose optimum is the best score of
   the mode (local: every optimal alignment of the rectangle starts and ends
   with an ``M`` column, a gap at either end could be dropped to score
   higher; semi-global: it does not start or end with a ``D``).  So the
   traceback costs what the aligned region costs, not what the whole pair
   costs.  Traceback keeps 1 byte per cell (direction bits of the three
   matrices), in bounded memory at any length (checkpoints).  **Tie rule in
   the traceback** (all modes): from the end cell backwards, at a cell a
   diagonal (``M``) step is preferred to ending a ``D`` gap, which is
   preferred to ending an ``I`` gap; inside a gap, opening (coming from the
   cell's H) is preferred to extending, i.e. a gap is ended as soon as that
   is optimal.

A local pair whose best score is 0 (nothing aligns positively) gives score
0, empty operations and all coordinates 0.

:func:`align_many` and :func:`align_pairs` align many pairs in parallel
(:mod:`.batch`: threads running Numba functions that release the GIL, as
many as ``threads``, default Numba's thread count).  Batches run in SIMD
lanes: where many pairs share a query (database hits), steps 1 and 2 run
ALN_LANES subjects of one query at once (:mod:`.query_lanes`); otherwise
PAIR_LANES (8) independent pairs of similar lengths share one register of
int32 lanes (:mod:`.pair_lanes`), for steps 1 and 2 and for the
direction-bit fill of step 3 (then each lane is traced back on its own).
The lanes compute the very same cells as the scalar code, so the alignments
are identical (``pair_lanes=False`` runs the scalar code).

GPU (``backend=``, :func:`pair_backend`, :mod:`.cost`): in local and
semi-global modes, steps 1 and 2 of a batch can run on the GPU
(:func:`swgpu_tools.kernels.gpu.pair_regions`, the same cells and tie rules)
when one is usable and, with ``"auto"``, when an estimate expects it to be
faster than the CPU, its start-up included; step 3 then runs on the CPU.
The ``ends`` argument is the hook for a forward pass run elsewhere: each
pair's (best, query end, subject end); the CPU then runs steps 2 and 3.

Modules: :mod:`.modes` (names, :class:`Alignment`), :mod:`.cells` (cell
encoding), :mod:`.params` (scoring as the kernels take it), :mod:`.scalar`
(scalar passes), :mod:`.query_lanes` and :mod:`.pair_lanes` (the SIMD lane
engines), :mod:`.traceback`, :mod:`.batch` (batches, threads), :mod:`.cost`
(GPU or CPU for ``backend="auto"``), :mod:`.hits` (database hits: query lanes
then :mod:`.band`), :mod:`.pool` (threads), :mod:`.warm` and :mod:`.warmup` (compiling once per
machine: :func:`is_compiled`, :func:`precompile`), :mod:`.api` (the entry
points).
"""

from __future__ import annotations

from .api import align, align_local, align_many, align_pairs
from .cost import BACKENDS, pair_backend
from .modes import MODE_GLOBAL, MODE_LOCAL, MODE_SEMIGLOBAL, MODES, Alignment
from .pair_lanes import PAIR_LANES, PAIR_LANES_DEFAULT
from .query_lanes import ALN_LANES
from .traceback import TRACEBACK_CELL_LIMIT
from .warm import is_compiled
from .warmup import precompile

__all__ = [
    "ALN_LANES",
    "Alignment",
    "BACKENDS",
    "MODES",
    "MODE_GLOBAL",
    "MODE_LOCAL",
    "MODE_SEMIGLOBAL",
    "PAIR_LANES",
    "PAIR_LANES_DEFAULT",
    "TRACEBACK_CELL_LIMIT",
    "align",
    "align_local",
    "align_many",
    "align_pairs",
    "is_compiled",
    "pair_backend",
    "precompile",
]
