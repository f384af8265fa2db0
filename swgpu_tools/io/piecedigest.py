"""``sha256-16MiB``: a sha256 over fixed pieces, hashed on several threads.

The digest of ``n`` bytes is the sha256 of ``b"sha256-16MiB <n>\\n"`` followed by
the sha256 of each 16 MiB piece, in order.  It is as strong as one sha256 of the
bytes (a tree of two levels), and its pieces are hashed side by side: one
sha256 runs at 0.5-1 GB/s, so a 200 MB shard's took 0.17-0.41 s on one thread
(benchmarks/RESULTS-workflow.md, run 119), on the way to the first result.

Used for the database's content digest (:mod:`swgpu_tools.steps.receipt`) and
shard files of format 4 (:mod:`swgpu_tools.io.shardfile`).  Standard library
only (the receipt runs when the workflow is parsed).
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor

#: Bytes per piece.
PIECE_BYTES = 16 << 20
#: The digest's name, part of the values that carry it.
NAME = "sha256-16MiB"


def _hash_piece(parts: list) -> bytes:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)  # lets go of the interpreter for large parts
    return h.digest()


def combine(size: int, piece_digests) -> str:
    """The hex digest of ``size`` bytes whose pieces' sha256 digests are ``piece_digests``."""
    total = hashlib.sha256(f"{NAME} {size}\n".encode())
    for d in piece_digests:
        total.update(d)
    return total.hexdigest()


class PieceDigest:
    """The digest of a stream of bytes-like parts (:meth:`update`, as hashlib's).

    Each complete piece goes to a pool of ``threads`` threads.  The parts are
    kept (not copied) until their piece is hashed, so a caller must not change a
    part's memory after passing it; at most two pieces per thread wait, beyond
    which :meth:`update` waits for the oldest.
    """

    def __init__(self, threads: int = 1):
        self.threads = max(1, int(threads))
        self.size = 0
        self._parts: list = []  # the current piece's parts
        self._filled = 0  # bytes in the current piece
        self._done: list[Future | bytes] = []
        self._pool: ThreadPoolExecutor | None = None
        self._slots = threading.BoundedSemaphore(2 * self.threads)

    def _submit(self) -> None:
        parts, self._parts, self._filled = self._parts, [], 0
        if self.threads == 1:
            self._done.append(_hash_piece(parts))
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="swgpu-digest")
        self._slots.acquire()
        future = self._pool.submit(_hash_piece, parts)
        future.add_done_callback(lambda _: self._slots.release())
        self._done.append(future)

    def update(self, data) -> None:
        view = memoryview(data).cast("B")
        self.size += len(view)
        at = 0
        while at < len(view):
            take = min(PIECE_BYTES - self._filled, len(view) - at)
            self._parts.append(view[at : at + take])
            self._filled += take
            at += take
            if self._filled == PIECE_BYTES:
                self._submit()

    def hexdigest(self) -> str:
        """The digest of everything passed (ends the stream)."""
        if self._filled:
            self._submit()
        digests = [d if isinstance(d, bytes) else d.result() for d in self._done]
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        return combine(self.size, digests)


def digest_of(data, threads: int = 1) -> str:
    """The hex digest of one bytes-like object."""
    d = PieceDigest(threads)
    d.update(data)
    return d.hexdigest()
