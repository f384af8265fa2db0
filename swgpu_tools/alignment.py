"""Compatibility shim: the alignment code now lives in :mod:`swgpu_tools.align` (issue 13).

Callers should import from :mod:`swgpu_tools.align`; this module re-exports
the names older code used and goes away once they are switched.
"""
from __future__ import annotations

from .align import (ALN_LANES, BACKENDS, MODE_GLOBAL, MODE_LOCAL, MODE_SEMIGLOBAL, MODES,  # noqa: F401
                    PAIR_LANES, PAIR_LANES_DEFAULT, TRACEBACK_CELL_LIMIT, Alignment, align,
                    align_local, align_many, align_pairs, pair_backend)
from .align.cost import batch_backend as _batch_backend  # noqa: F401
from .align.cost import gpu_pays as _gpu_pays  # noqa: F401
from .align.scalar import forward_end as _forward_end  # noqa: F401
from .align.scalar import forward_end_semi as _forward_end_semi  # noqa: F401
from .align.scalar import locate as _locate  # noqa: F401
from .align.scalar import reverse_start as _reverse_start  # noqa: F401
from .align.traceback import checkpoint_plan as _checkpoint_plan  # noqa: F401
