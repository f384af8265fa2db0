"""The digest over pieces (swgpu_tools.io.piecedigest) against its definition."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from swgpu_tools.io import piecedigest
from swgpu_tools.steps import receipt


def _definition(data: bytes, piece: int) -> str:
    total = hashlib.sha256(f"sha256-16MiB {len(data)}\n".encode())
    for at in range(0, len(data), piece):
        total.update(hashlib.sha256(data[at : at + piece]).digest())
    return total.hexdigest()


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=6),
    piece=st.integers(1, 40),
    threads=st.integers(1, 4),
)
def test_streamed_in_any_parts_it_equals_its_definition(data, cuts, piece, threads):
    old = piecedigest.PIECE_BYTES
    piecedigest.PIECE_BYTES = piece
    try:
        d = piecedigest.PieceDigest(threads)
        bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
        for a, b in zip(bounds, bounds[1:]):
            d.update(bytearray(data[a:b]))
        assert d.hexdigest() == _definition(data, piece)
    finally:
        piecedigest.PIECE_BYTES = old


def test_it_is_the_database_receipts_digest(tmp_path):
    data = bytes(range(256)) * 300_001  # 76.8 MB: five pieces, the last one short
    path = tmp_path / "db"
    path.write_bytes(data)
    want = _definition(data, 16 << 20)
    assert receipt.content_digest(path) == f"sha256-16MiB:{want}"
    assert piecedigest.digest_of(memoryview(data), threads=3) == want
