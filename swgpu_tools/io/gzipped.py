"""Gzip: whether a file is compressed (its first two bytes, the one test every reader
uses), and its decompression, by Intel ISA-L (``isal``, about twice zlib's speed:
RESULTS-shard_db.md) where it is installed, else by the standard library."""

from __future__ import annotations

import gzip
import os
import zlib

try:  # the isal wheels cover x86-64 and ARM64 (pyproject's dependency marker)
    from isal import igzip as _igzip
    from isal import isal_zlib as _isal_zlib
except ImportError:  # pragma: no cover - other machines: the standard library
    _igzip = _isal_zlib = None

#: The first two bytes of every gzip member (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"
#: Whether decompression uses ISA-L.
FAST = _igzip is not None
#: What a damaged or cut-short gzip stream raises (either library).
DECOMPRESS_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error) + (
    (_isal_zlib.error,) if _isal_zlib is not None else ()
)


def is_gzip(path) -> bool:
    """Whether the file at ``path`` starts with the gzip magic bytes (OSError as open's)."""
    with open(os.fspath(path), "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def gzip_open(source, fast: bool = FAST):
    """A binary reader of gzip file ``source`` (a path or a binary file object), as
    ``gzip.open(source, "rb")``; by ISA-L where ``fast``."""
    return (_igzip if fast and _igzip is not None else gzip).open(source, "rb")


def decompressobj(fast: bool = FAST):
    """A streaming decompressor of one gzip member (header and trailer checked), as
    ``zlib.decompressobj(16 + zlib.MAX_WBITS)``; by ISA-L where ``fast``."""
    if fast and _isal_zlib is not None:
        return _isal_zlib.decompressobj(16 + _isal_zlib.MAX_WBITS)
    return zlib.decompressobj(16 + zlib.MAX_WBITS)
