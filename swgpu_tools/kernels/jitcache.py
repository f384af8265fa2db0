"""Numba's disk cache of the CPU kernels: is it warm, and saying so when it is not.

The CPU kernels are Numba functions compiled on first use and cached on disk
(``cache=True``) in :func:`swgpu_tools.cache.numba_cache_dir`, keyed by the
source file, the CPU model and the function's bytecode.  A cold cache costs
seconds of compilation once per machine kind and swgpu version; a warm one
loads in a fraction of a second.

:func:`cache_warm` answers "would these functions load from the cache?"
cheaply (it reads the small index files Numba keeps next to the cached code,
compiles nothing); :func:`notice_compiling` logs, once per process and kind
of kernel, that a compilation is about to happen and where its result goes.
"""

from __future__ import annotations

import threading

from ..logs import get_logger

_log = get_logger(__name__)
_noticed: set = set()
_lock = threading.Lock()


def cached_overloads(dispatcher) -> int:
    """How many compiled versions of ``dispatcher`` the disk cache holds for this machine
    and this code (0 when its cache is off, missing, stale or unreadable)."""
    try:
        from numba.core.caching import NullCache

        cache = getattr(dispatcher, "_cache", None)
        if cache is None or isinstance(cache, NullCache):
            return 0
        index = cache._cache_file._load_index()  # {} when missing or for other sources
        if not index:
            return 0
        _, magic, code = cache._index_key(None, dispatcher.targetctx.codegen())
        return sum(1 for key in index if key[1] == magic and key[2] == code)
    except Exception:  # pragma: no cover - a Numba without these internals
        return 0


def cache_warm(dispatchers) -> bool:
    """Whether every one of ``dispatchers`` has a compiled version in the disk cache."""
    return all(cached_overloads(d) > 0 for d in dispatchers)


def cache_folder() -> str:
    """Where Numba keeps the CPU kernels (``NUMBA_CACHE_DIR``, set by swgpu_tools.cache)."""
    from ..cache import numba_cache_dir

    return numba_cache_dir()


def notice_compiling(what: str, dispatchers) -> bool:
    """Log (INFO, once per process and ``what``) that ``what`` is being compiled when the
    disk cache is cold for ``dispatchers``; returns whether it was cold."""
    with _lock:
        if what in _noticed:
            return False
        _noticed.add(what)
    if cache_warm(dispatchers):
        return False
    _log.info(
        f"compiling the {what} (once per machine and swgpu version; cached in "
        f"{cache_folder()}, which a cluster's nodes may share: SWGPU_CACHE_DIR)"
    )
    return True
