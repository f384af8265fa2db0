"""Where compiled kernels are cached on disk.

One folder holds every compiled kernel of swgpu: the generated GPU kernel
modules with Numba's CUDA cache, and Numba's cache of the CPU kernels.  It is
``$SWGPU_CACHE_DIR`` when set, else the user's cache folder as
:mod:`platformdirs` gives it (``$XDG_CACHE_HOME/swgpu``, by default
``~/.cache/swgpu`` on Linux).  On a cluster, point ``SWGPU_CACHE_DIR`` (or
``XDG_CACHE_HOME``) at a folder every node sees, so kernels compile once per
machine kind, not once per node.  Numba keys each cached kernel by CPU kind
and GPU kind, so mixed nodes share one folder safely.

Numba's files go to ``numba/<digest>/`` in it, the digest of the package's
source files: Numba checks a cached function against its own file only, so a
kernel that inlines functions of other files (the alignment lanes call
:mod:`swgpu_tools.kernels.simd`) would otherwise load stale code after those
files change (an upgrade, or a checkout being worked on).
``NUMBA_CACHE_DIR``, when the user sets it, wins for Numba's own files.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

_configured: list[str] = []


def cache_dir() -> str:
    """The swgpu cache folder (not created here)."""
    base = os.environ.get("SWGPU_CACHE_DIR")
    if not base:
        try:
            from platformdirs import user_cache_dir

            base = user_cache_dir("swgpu", appauthor=False)
        except ImportError:  # pragma: no cover - platformdirs is a dependency
            base = os.path.join(
                os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                "swgpu",
            )
    return base


def source_digest() -> str:
    """12 hex digits of a digest of swgpu_tools' Python sources and kernel templates (and
    ``$SWGPU_ALN_COLS``, where set)."""
    if not _digest:
        import hashlib

        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.blake2b(digest_size=6)
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".py.in")):
                    path = os.path.join(dirpath, name)
                    h.update(os.path.relpath(path, root).encode())
                    with open(path, "rb") as fh:
                        h.update(fh.read())
        # a forced column count (alignment.query_lanes.ALN_COLS: a constant compiled into
        # the alignment kernels, which Numba's cache index does not see): its own folder
        h.update(os.environ.get("SWGPU_ALN_COLS", "").encode())
        _digest.append(h.hexdigest())
    return _digest[0]


_digest: list[str] = []


def numba_cache_dir() -> str:
    """Numba's cache folder for swgpu's kernels (per source digest, see the module doc)."""
    return os.environ.get("NUMBA_CACHE_DIR") or os.path.join(cache_dir(), "numba", source_digest())


@contextmanager
def scipy_linalg_hidden():
    """Within it, an import of ``scipy.linalg`` raises ImportError, unless it was
    imported before (then nothing changes); afterwards it imports as usual.

    Numba's ``np.arraymath`` (and numba-cuda's), loaded by a target's registries,
    probes for a BLAS by importing ``scipy.linalg``: 0.29 s of the warm process's
    Numba stage on an H200 host with SciPy installed (run 249's py-spy profile),
    0.5 s on an H100 host.  swgpu's kernels use no BLAS (``np.dot`` and friends then
    fall back to Numba's own loops, ``np.linalg`` is unavailable in them)."""
    import sys

    hide = "scipy.linalg" not in sys.modules
    if hide:
        sys.modules["scipy.linalg"] = None  # an import of it raises ImportError
    try:
        yield
    finally:
        if hide and "scipy.linalg" in sys.modules and sys.modules["scipy.linalg"] is None:
            del sys.modules["scipy.linalg"]


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
