"""The disk-cache check of the CPU kernels (kernels/jitcache.py) and the compile notices."""

from __future__ import annotations

import importlib
import logging
import sys

import numba
import pytest

from swgpu_tools.kernels import jitcache

MODULE = """
from numba import njit


@njit(cache=True)
def twice(x):
    return 2 * x
"""


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    """A module with one cached Numba function, its cache in an empty folder."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "jc_probe.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    sys.modules.pop("jc_probe", None)
    mod = importlib.import_module("jc_probe")
    yield mod
    sys.modules.pop("jc_probe", None)


def test_cache_warm_after_first_compile(fresh_module, caplog):
    f = fresh_module.twice
    assert jitcache.cached_overloads(f) == 0 and not jitcache.cache_warm([f])
    with caplog.at_level(logging.INFO, logger="swgpu"):
        assert jitcache.notice_compiling("probe kernels", [f])
        assert not jitcache.notice_compiling("probe kernels", [f])  # once per process
    assert [r.getMessage() for r in caplog.records if "probe kernels" in r.getMessage()]
    assert f(21) == 42
    assert jitcache.cached_overloads(f) == 1 and jitcache.cache_warm([f])
    f(1.5)  # a second signature
    assert jitcache.cached_overloads(f) == 2


def test_uncached_function_is_never_warm():
    @numba.njit
    def plain(x):
        return x

    plain(1)
    assert jitcache.cached_overloads(plain) == 0 and not jitcache.cache_warm([plain])
