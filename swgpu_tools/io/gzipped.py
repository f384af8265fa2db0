"""Whether a file is gzip-compressed: its first two bytes (the one test every reader uses)."""

from __future__ import annotations

import os

#: The first two bytes of every gzip member (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path) -> bool:
    """Whether the file at ``path`` starts with the gzip magic bytes (OSError as open's)."""
    with open(os.fspath(path), "rb") as fh:
        return fh.read(2) == GZIP_MAGIC
