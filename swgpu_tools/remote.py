"""A re-scan's GPU searches in the GPU standby, the rest of its job in a warm child.

A re-scan's scoring job reads its shards and their states and finds the new and
changed sequences (about 0.6 s of Python and numpy on a GPU host) before it
scores them on the GPU (about 1 s for bench200M's 1 % release x 2,000 queries).
Run whole in the warm process's GPU standby (:mod:`swgpu_tools.warm.standby`), that
CPU work waited for the standby's own start (numba-cuda's import and the CUDA
driver, under one interpreter lock: 1.2-1.6 s after its fork), and only then began.

Split, the job runs in a child of the warm process that has the scoring job's CPU
imports, and the standby serves its searches over a socket: the reading overlaps
the GPU's start, and the GPU is ready when the delta is (:mod:`swgpu_tools.warm.server`
offers the standby a job's searches where every shard of the job has a state).

* :class:`RemoteStart`: the job's side, a stand-in for
  :class:`~swgpu_tools.backend.BackendStart` (``result``, ``seconds_left``) whose
  backend's ``search`` sends the encoded sequences and gets the hits back;
  where the standby is gone it starts a backend in the job's process instead.
* :func:`serve`: the standby's side; one job, then it ends (and frees its GPU).

Messages are :mod:`swgpu_tools.warm.protocol`'s JSON, each followed by the raw bytes of
the arrays it lists (dtype and shape).
"""

from __future__ import annotations

import dataclasses
import os
import select
import socket
import time
from dataclasses import dataclass

import numpy as np

from .backend import BackendChoice, BackendStart, StartedBackend, prestart_age, start_backend
from .kernels import TopHits
from .logs import get_logger
from .scoring import ScoringScheme
from .sequences import EncodedSequences
from .warm.protocol import receive, send

log = get_logger(__name__)

#: The job's end of the socket to the GPU standby (a file descriptor number), set in
#: the job's environment by the warm process that runs it.
ENV_FD = "SWGPU_GPU_SERVER_FD"


class RemoteError(RuntimeError):
    """The GPU standby answered with an error (its text)."""


# -- messages with arrays ------------------------------------------------------------
def send_message(sock: socket.socket, message: dict, arrays=()) -> None:
    """Send ``message`` and the bytes of ``arrays`` after it."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    send(sock, {**message, "arrays": [[a.dtype.str, list(a.shape)] for a in arrays]})
    for a in arrays:
        if a.nbytes:
            sock.sendall(memoryview(a.reshape(-1)).cast("B"))


def receive_message(sock: socket.socket) -> tuple[dict, list[np.ndarray]]:
    """One message of :func:`send_message` and its arrays; EOFError if the peer closed
    the connection first."""
    message, _ = receive(sock)
    arrays = []
    for dtype, shape in message.pop("arrays", []):
        a = np.empty(shape, dtype=np.dtype(dtype))
        if a.nbytes:
            view = memoryview(a.reshape(-1)).cast("B")
            got = 0
            while got < len(view):
                n = sock.recv_into(view[got:], min(len(view) - got, 1 << 24))
                if not n:
                    raise EOFError("connection closed")
                got += n
        arrays.append(a)
    return message, arrays


def _per_query(query_index: np.ndarray, n_queries: int) -> int | None:
    """The hits' count a query where every query has the same (their query column,
    sorted as a search gives it, is then implied), else None.  A re-scan's delta
    search returns the same count for every query (~8 M hits for 2,000 queries and
    four shards): its query column is 32 MB that need not cross the socket."""
    n = len(query_index)
    if n_queries <= 0 or n % n_queries:
        return None
    per = n // n_queries
    if per == 0:
        return 0
    blocks = np.asarray(query_index).reshape(n_queries, per)
    if bool((blocks == np.arange(n_queries, dtype=blocks.dtype)[:, None]).all()):
        return per
    return None


def _scheme_fields(scheme: ScoringScheme) -> dict:
    return {f.name: getattr(scheme, f.name) for f in dataclasses.fields(scheme) if f.init}


# -- the standby's side ----------------------------------------------------------------
def serve(sock: socket.socket, ready=None) -> int:
    """Serve one job's ``start`` and ``search`` requests on ``sock`` until it closes it
    (the GPU standby, after the warm process offered it a job's searches); the
    backend is started as the job would start it (taking the standby's start made
    ahead).  ``ready``: called before ``start`` is answered (the standby's CPU preload,
    which the searches' host step needs: its wait is the start's, not the search's).
    An error is sent back as ``{"error": text}``."""
    run = searcher = None
    while True:
        try:
            message, arrays = receive_message(sock)
        except (EOFError, OSError, ValueError):
            return 0
        try:
            op = message.get("op")
            if op == "start":
                # at once: when the start made ahead began (the job's cost model; the
                # epoch, as both processes run on one host)
                age = prestart_age()
                send_message(sock, {"began": None if age is None else time.time() - age})
                if run is None:
                    scheme = ScoringScheme(**message["scheme"])
                    run = start_backend(
                        str(message.get("backend") or "auto"),
                        "auto",
                        scheme=scheme,
                        batched=bool(message.get("batched")),
                    )
                    searcher = run.searcher()
                    if ready is not None:
                        t = time.perf_counter()
                        ready()
                        run.steps["preload wait"] = time.perf_counter() - t
                reply = {
                    "name": run.name,
                    "reason": run.choice.reason,
                    "gpu_id": run.gpu_id,
                    "uuid": run.device_uuid,
                    "steps": {k: float(v) for k, v in run.steps.items()},
                }
                send_message(sock, reply)
            elif op == "search" and searcher is not None:
                qc, qo, dc, do, *segments = arrays
                hits = searcher.search(
                    EncodedSequences(qc, qo),
                    EncodedSequences(dc, do),
                    ScoringScheme(**message["scheme"]),
                    int(message["top_k"]),
                    segments=segments[0] if segments else None,
                )
                times = getattr(searcher, "last_times", None) or {}
                reply = {"times": {k: float(v) for k, v in times.items()}}
                per = _per_query(hits.query_index, len(qo) - 1)
                if per is not None:  # the same count for every query: no query column
                    reply["per_query"] = per
                    send_message(sock, reply, [hits.subject_index, hits.score])
                else:
                    send_message(sock, reply, [hits.query_index, hits.subject_index, hits.score])
            else:
                raise ValueError(f"unknown request {op!r}")
        except Exception as exc:  # the job gets the error and fails with it
            try:
                send_message(sock, {"error": f"{type(exc).__name__}: {exc}"})
            except OSError:
                return 1


# -- the job's side ----------------------------------------------------------------
@dataclass
class RemoteStarted(StartedBackend):
    """A backend started in the GPU standby: its searches run there."""

    uuid: str | None = None
    sock: socket.socket | None = None

    @property
    def device_uuid(self) -> str | None:  # (this process starts no CUDA to find it)
        return self.uuid

    def searcher(self):
        return RemoteSearcher(self.sock)


class RemoteSearcher:
    """A :class:`~swgpu_tools.kernels.SearchBackend` whose searches run in the standby."""

    name = "gpu"

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.last_times: dict = {}

    def search(self, queries, database, scheme, top_k, progress=None, segments=None) -> TopHits:
        arrays = [queries.codes, queries.offsets, database.codes, database.offsets]
        if segments is not None:
            arrays.append(np.asarray(segments, dtype=np.int64))
        message = {"op": "search", "scheme": _scheme_fields(scheme), "top_k": int(top_k)}
        send_message(self.sock, message, arrays)
        reply, got = receive_message(self.sock)
        if "error" in reply:
            raise RemoteError(f"the GPU standby's search failed: {reply['error']}")
        self.last_times = reply.get("times") or {}
        if progress is not None:
            progress(len(queries), len(queries))
        if "per_query" in reply:  # (the query column left out: so many hits a query)
            n = len(queries.offsets) - 1
            got = [np.repeat(np.arange(n, dtype=np.int32), int(reply["per_query"])), *got]
        return TopHits(*got)


class RemoteStart:
    """:class:`~swgpu_tools.backend.BackendStart` for a job whose searches the GPU standby
    serves on ``sock``: asks it to start at once (``batched``: load the kernels that
    score many queries per launch, a re-scan's); where the standby cannot answer, a
    backend started here (``backend``, ``device``) instead."""

    def __init__(self, sock: socket.socket, scheme: ScoringScheme, batched: bool = True,
                 backend: str = "auto", device="auto"):  # fmt: skip
        self.sock = sock
        self._args = (backend, device, scheme, batched)
        self.began = time.perf_counter()
        self._result: StartedBackend | None = None
        self._fallback: BackendStart | None = None
        self._ack: tuple | None = None
        try:
            send_message(
                sock,
                {"op": "start", "scheme": _scheme_fields(scheme), "batched": batched,
                 "backend": backend},
            )  # fmt: skip
        except OSError as exc:
            self._fall_back(exc)

    def _fall_back(self, why) -> None:
        log.warning(f"the GPU standby is gone ({why}); starting the backend here")
        backend, device, scheme, batched = self._args
        self._fallback = BackendStart(backend, device, background=True, scheme=scheme,
                                      batched=batched)  # fmt: skip

    def _read_ack(self, wait: bool) -> None:
        """The standby's first answer to "start": when its start began (an epoch; None:
        it had none made ahead)."""
        if self._ack is None and (wait or select.select([self.sock], [], [], 0)[0]):
            message, _ = receive_message(self.sock)
            self._ack = (message.get("began"),)

    def seconds_left(self, expected: float) -> float:
        """As :meth:`BackendStart.seconds_left`, from when the standby's start began
        (where it said so already; else from when this job asked)."""
        if self._fallback is not None:
            return self._fallback.seconds_left(expected)
        if self._result is not None:
            return 0.0
        try:
            self._read_ack(False)
        except (EOFError, OSError, ValueError):
            return 0.0  # gone: :meth:`result` starts a backend here
        if self._ack is not None and self._ack[0] is not None:
            return max(0.0, expected - (time.time() - float(self._ack[0])))
        return max(0.0, expected - (time.perf_counter() - self.began))

    def result(self) -> StartedBackend:
        if self._fallback is not None:
            return self._fallback.result()
        if self._result is None:
            t = time.perf_counter()
            try:
                self._read_ack(True)
                reply, _ = receive_message(self.sock)
            except (EOFError, OSError, ValueError) as exc:
                self._fall_back(exc)
                return self._fallback.result()
            if "error" in reply:
                raise RemoteError(f"the GPU standby's start failed: {reply['error']}")
            steps = {f"standby {k}": v for k, v in (reply.get("steps") or {}).items()}
            steps["standby wait"] = time.perf_counter() - t
            self._result = RemoteStarted(
                BackendChoice(reply["name"], reply["reason"]),
                reply.get("gpu_id"),
                steps,
                origin="remote",
                uuid=reply.get("uuid"),
                sock=self.sock,
            )
        return self._result


def remote_start(scheme: ScoringScheme, backend: str = "auto", device="auto"):
    """The :class:`RemoteStart` of this job where the warm process gave it a socket to
    the GPU standby (:data:`ENV_FD`; taken once), else None."""
    fd = os.environ.pop(ENV_FD, None)
    if not fd:
        return None
    try:
        sock = socket.socket(fileno=int(fd))
    except (ValueError, OSError):
        return None
    return RemoteStart(sock, scheme, True, backend, device)
