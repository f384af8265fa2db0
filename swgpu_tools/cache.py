"""Where compiled kernels are cached on disk.

One folder holds every compiled kernel of swgpu: the generated GPU kernel
modules with Numba's CUDA cache, and Numba's cache of the CPU kernels.  It is
``$SWGPU_CACHE_DIR`` when set, else the user's cache folder as
:mod:`platformdirs` gives it (``$XDG_CACHE_HOME/swgpu``, by default
``~/.cache/swgpu`` on Linux).  On a cluster, point ``SWGPU_CACHE_DIR`` (or
``XDG_CACHE_HOME``) at a folder every node sees, so kernels compile once per
machine kind, not once per node.  Numba keys each cached kernel by CPU kind
and GPU kind, so mixed nodes share one folder safely.

``NUMBA_CACHE_DIR``, when the user sets it, wins for Numba's own files.
"""
from __future__ import annotations

import os

_configured: list[str] = []


def cache_dir() -> str:
    """The swgpu cache folder (not created here)."""
    base = os.environ.get("SWGPU_CACHE_DIR")
    if not base:
        try:
            from platformdirs import user_cache_dir

            base = user_cache_dir("swgpu", appauthor=False)
        except ImportError:  # pragma: no cover - platformdirs is a dependency
            base = os.path.join(os.environ.get("XDG_CACHE_HOME")
                                or os.path.join(os.path.expanduser("~"), ".cache"), "swgpu")
    return base


def numba_cache_dir() -> str:
    """Numba's cache folder for swgpu's CPU kernels."""
    return os.environ.get("NUMBA_CACHE_DIR") or os.path.join(cache_dir(), "numba")


def configure_numba() -> str:
    """Point Numba's disk cache at :func:`numba_cache_dir` (before kernels are defined).

    Called when :mod:`swgpu_tools` is imported.  Sets ``NUMBA_CACHE_DIR`` for this
    process and its children unless the user set it, and Numba's config when
    Numba is already imported.
    """
    path = numba_cache_dir()
    if _configured and _configured[0] == path:
        return path
    os.environ.setdefault("NUMBA_CACHE_DIR", path)
    import sys

    if "numba" in sys.modules:
        try:
            sys.modules["numba"].config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]
        except AttributeError:  # pragma: no cover
            pass
    _configured[:] = [path]
    return path
