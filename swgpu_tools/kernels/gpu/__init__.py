"""Smith-Waterman database search and pair score passes on NVIDIA GPUs (Numba CUDA).

Same contract as :mod:`swgpu_tools.kernels` describes (exact int32 scores,
BLAST-convention affine gaps, top-k per query with ties to the lower subject
index); :class:`GpuBackend` is the contract's object.

Modules, one job each (no module imports one listed after it, except this file):

==============  ===========================================================
``codegen``     kernel sources: ``templates/*.py.in`` rendered per shape
``device``      is a GPU usable, :func:`bind` (the one place a device is
                selected), compute capability, free memory, streams
``planner``     which kernel shape scores which subjects (plain numpy)
``cache``       the kernel cache folder, loading and compiling kernels,
                :func:`precompile`, PTX for checks
``chains``      short queries chained: which queries share one set of
                launches, and their rows' layout
``slots``       device buffers of one unit (a query or a chain) in flight:
                scores, histograms, candidates, temp, its stream
``inflight``    a unit in a slot: its start, re-scoring and top k
``streaming``   databases larger than the GPU memory budget, in batches
``batched``     many queries per launch against a small subject set
``searcher``    :class:`GpuSearcher`: upload, launches, units pipelined;
                :func:`search`
``pairs``       pair batches for ``swgpu align``: :func:`pair_ends`,
                :func:`pair_regions`
``backend``     :class:`GpuBackend` (the contract), :func:`warm_up`
==============  ===========================================================

The generated kernels import :mod:`swgpu_tools.kernels.gpu_intrinsics` (the
packed 16-bit and int32 device helpers), which stays beside this package.
"""

from __future__ import annotations

from ..gpu_intrinsics import SIM
from .backend import GpuBackend, load_scoring_kernels, warm_up
from .cache import aux, get_kernel, get_pair_kernel, kernel_ptx, kernels_dir, precompile
from .codegen import (
    HIST_BINS,
    PADQ,
    PAIR_KINDS,
    WARP,
    aux_kernel_source,
    kernel_source,
    pair_kernel_source,
)
from .device import available, bind, compute_capability
from .pairs import (
    PAIR_BOUNDARY_ENTRIES,
    PAIR_R,
    PairBatch,
    pair_ends,
    pair_kernel_ptx,
    pair_regions,
)
from .planner import CONFIGS, MULTI_SHAPES, SHAPES
from .searcher import GpuSearcher, search
from .slots import PIPELINE_DEPTH, TEMP_LIMIT_BYTES
from .streaming import BYTES_PER_SUBJECT, GPU_RESERVE_BYTES

__all__ = [
    "SIM",
    "GpuBackend",
    "warm_up",
    "load_scoring_kernels",
    "aux",
    "get_kernel",
    "get_pair_kernel",
    "kernel_ptx",
    "kernels_dir",
    "precompile",
    "HIST_BINS",
    "PADQ",
    "PAIR_KINDS",
    "WARP",
    "aux_kernel_source",
    "kernel_source",
    "pair_kernel_source",
    "available",
    "bind",
    "compute_capability",
    "PAIR_BOUNDARY_ENTRIES",
    "PAIR_R",
    "PairBatch",
    "pair_ends",
    "pair_kernel_ptx",
    "pair_regions",
    "CONFIGS",
    "MULTI_SHAPES",
    "SHAPES",
    "GpuSearcher",
    "search",
    "BYTES_PER_SUBJECT",
    "GPU_RESERVE_BYTES",
    "TEMP_LIMIT_BYTES",
    "PIPELINE_DEPTH",
]
