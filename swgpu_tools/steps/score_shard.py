"""Step ``score_shard``: every query against one or more shards -> their top-k hits.

One job may score several shards (:mod:`swgpu_tools.shardjobs`): the process,
the GPU's start-up and the queries are then shared, and the next shard is read
while the current one is scored.  Its hit table holds the hits of all its
shards (each query's top k of each shard); the merge takes the top k across
tables, so the final tables do not depend on how shards are grouped into jobs.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from ..backend import BackendStart, driver_installed
from ..cpus import usable_cpus
from ..engine.increment import GPU_START_S, group_cells, plan_shard, rescan_on_cpu
from ..engine.merge import candidates, top_k_of
from ..engine.scan import ShardInput, scan_shards
from ..errors import OutputError
from ..io.fasta import read_fasta
from ..io.hitsfile import ShardHits, concat_shard_hits, write_shard_hits
from ..io.shardfile import note_verified, read_shard_unverified
from ..io.statefile import read_state, sequence_hashes, write_state
from ..io.stepstats import StepTimer
from ..later import deferred, later
from ..logs import get_logger
from ..remote import remote_start
from ..scoring import ScoringScheme
from ..sequences import EncodedSequences

log = get_logger(__name__)


#: Candidate rows of a job's several shards (those :func:`swgpu_tools.engine.merge.candidates`
#: keeps: each query's rows at or above its k-th best over them, ties included) above
#: which the job cuts them to their joint top-k (the merge then holds at most queries x
#: top_k rows of the job).
CUT_ROWS = 8_000_000


def _joint_cut(rows: int) -> bool:
    """Whether a job of several shards writes their joint top-k per query, given its
    ``rows`` candidate rows (else those rows, which the merge cuts).  The candidates
    are already about queries x top_k rows a job (the ties at each query's cut are
    the difference), at a fraction of the cut's cost (5,000 queries x 4 shards x 500 on
    the VM: 0.07 s against 0.79 s for the cut of the candidates; 2.0 s for the cut of
    every row on an H200 host, run 264), so a job cuts only where ties make them pass
    :data:`CUT_ROWS`, whether it is the only job of the database or one of several.
    ``SWGPU_JOB_TOPK`` = ``1`` (always) or ``0`` (never) overrides this, for measuring;
    the tables are the same either way."""
    mode = os.environ.get("SWGPU_JOB_TOPK", "auto")
    if mode in ("0", "1"):
        return mode == "1"
    return rows > CUT_ROWS


#: Per-shard statistics summed into a job's record when it scores several shards.
_SUMMED = (
    "sequences",
    "residues",
    "cells",
    "full_scan_cells",
    "kernel_s",
    "scan_s",
    "passes",
    "delta_sequences",
    "full_queries",
    "margin_ran_out",
)


def gpu_likely(backend: str) -> bool:
    """Whether a GPU start is worth beginning before the work is known: the GPU
    backend was asked for, or an NVIDIA driver is installed (its control device
    exists) and the choice is automatic."""
    if backend == "gpu":
        return True
    if backend != "auto":
        return False
    return driver_installed() or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


class _Prefetch:
    """Reads shard files ahead (``ahead`` at a time, one on each thread), with each sequence's content hash
    (:func:`~swgpu_tools.io.statefile.sequence_hashes`, for the re-scan state), the
    residues encoded for ``scheme`` (for a shard scored whole), and the shard's
    stored state (None where there is none): the first shard's while the GPU
    starts, the next one's while a shard is scored (reading, the digest and the
    encoding release the GIL, and so does the GPU wait).

    Each shard's digest is checked on a thread of its own while the rest goes on
    (:func:`~swgpu_tools.io.shardfile.read_shard_unverified`); :meth:`verify`
    waits for every digest so far, and must pass before anything is written.
    """

    def __init__(self, paths, states, scheme: ScoringScheme, ahead: int = 1):
        self.paths = list(paths)
        self.states = list(states)
        self.scheme = scheme
        self._checks: list = []  # (path, os.stat before the read, digest check)
        self.ahead = max(1, int(ahead))
        self._pool = ThreadPoolExecutor(
            max_workers=self.ahead, thread_name_prefix="swgpu-shard-read"
        )
        self._futures = {}
        self._submit_from(0)

    def _submit_from(self, i: int) -> None:
        for j in range(i, min(i + self.ahead, len(self.paths))):
            if j not in self._futures:
                self._futures[j] = self._pool.submit(self._load, j)

    def _load(self, i: int):
        t0 = time.perf_counter()
        before = os.stat(self.paths[i])
        # a re-scan maps the file (it encodes only the delta); a shard scored whole is
        # read into memory (all of it is encoded)
        shard, check = read_shard_unverified(self.paths[i], mapped=bool(self.states[i]))
        self._checks.append((self.paths[i], before, check))
        t1 = time.perf_counter()
        state = read_state(self.states[i]) if self.states[i] else None
        t2 = time.perf_counter()
        encoded = None
        if state is not None:  # a re-scan encodes only its delta
            hashes = sequence_hashes(shard)
        else:
            from ..kernels.seqhash import hash_and_translate

            # a shard without a state is scored whole: its residues as the kernels
            # take them, coded in the hashes' pass (all cores, without the GIL)
            hashes, codes, bad = hash_and_translate(
                shard.residues, shard.offsets, self.scheme.code_table(), usable_cpus()
            )
            if bad >= 0:
                self.scheme.encode(shard, "database")  # raises, naming the record
            encoded = EncodedSequences(codes, shard.offsets.copy())
        t3 = time.perf_counter()
        seconds = {"shard": t1 - t0, "state": t2 - t1, "hashes_encode": t3 - t2}
        return shard, encoded, hashes, state, {k: round(v, 4) for k, v in seconds.items()}

    def get(self, i: int):
        """(shard ``i``, its encoded residues or None, its hashes, its state, the
        reading thread's seconds: shard, state, hashes_encode), waiting for
        them; starts on shard ``i + 1``."""
        current = self._futures.pop(i, None) or self._pool.submit(self._load, i)
        self._submit_from(i + 1)
        if i + 1 >= len(self.paths):
            self._pool.shutdown(wait=False)
        return current.result()  # re-raises the reading thread's error

    def verify(self) -> None:
        """Wait for the digests of the shards read so far; InputError names a
        corrupt one.  Then note them (best effort), so the traceback need not
        check them again."""
        checks = list(self._checks)  # the reading thread may append the next one
        for _, _, check in checks:
            check()
        try:
            note_verified({path: before for path, before, _ in checks})
        except (OSError, OutputError):
            pass


#: Consecutive shards of a job that have states are scored together (their new and
#: changed sequences in one search) while their files hold at most this many bytes.
GROUP_BYTES = 2 << 30


def _groups(shards: list, has_state: list) -> list[list[int]]:
    """The job's shards in the groups that :func:`score_shard` scores together: runs
    of shards with a state, at most :data:`GROUP_BYTES` of shard files each; a
    shard without one alone (it is scored whole)."""
    groups: list[list[int]] = []
    size = 0
    for i, path in enumerate(shards):
        try:
            nbytes = os.path.getsize(path)
        except OSError:
            nbytes = 0  # the reader names the missing file
        if has_state[i] and groups and has_state[groups[-1][-1]] and size + nbytes <= GROUP_BYTES:
            groups[-1].append(i)
            size += nbytes
        else:
            groups.append([i])
            size = nbytes
    return groups


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, (str, os.PathLike)):
        return [x]
    return list(x)


def score_shard(
    shard_path,
    queries_path,
    out_path,
    scheme: ScoringScheme,
    top_k: int = 500,
    backend: str = "auto",
    threads: int | None = None,
    device="auto",
    stats_path=None,
    state_path=None,
    margin: int | None = None,
):
    """Score every query of ``queries_path`` against one shard, or each of a list of
    shards; write their top-k hits (each query's top k of each shard) to one table.

    ``state_path``: the job's memory of each shard (one path per shard, in the
    same order; :mod:`swgpu_tools.io.statefile`): read first (when present and
    usable, only new and changed sequences are scored,
    :mod:`swgpu_tools.engine.increment`) and written beside the table, with
    ``margin`` (default ``top_k``) more hits per query than the table.
    """
    shards = _as_list(shard_path)
    states = _as_list(state_path) or [None] * len(shards)
    if len(states) != len(shards):
        raise ValueError(f"{len(shards)} shards but {len(states)} state files")
    margin = top_k if margin is None else int(margin)
    timer = StepTimer("score_shard")
    has_state = [bool(s) and os.path.exists(s) for s in states]
    cpus = threads or usable_cpus()
    # a re-scan run by the warm process with the GPU standby serving its searches
    # (swgpu_tools.remote): the standby's start is under way
    early = remote_start(scheme, backend, device) if all(has_state) and backend != "cpu" else None
    if early is None and (backend == "cpu" or not all(has_state) or gpu_likely(backend)):
        # the GPU's start-up (lock, CUDA context, helper kernels) runs while the inputs
        # are read; a re-scan whose delta is small may still score on the CPU instead
        # (a re-scan's delta is scored several queries per launch: those kernels too)
        early = BackendStart(
            backend, device, background=backend != "cpu", scheme=scheme, batched=all(has_state)
        )
    with timer.phase("read"):
        # a re-scan holds a group of shards at once (their deltas are scored together):
        # read several at a time; a scan from scratch reads one ahead of the scoring
        reader = _Prefetch(
            shards,
            [s if has else None for s, has in zip(states, has_state)],
            scheme,
            ahead=4 if all(has_state) else 1,
        )
        queries = read_fasta(queries_path)
        qhashes = sequence_hashes(queries)  # once for all shards
    # a failure on a shard's content names a corrupt shard as such first
    try:
        cpu_start = None
        parts, new_states, records = [], [], []
        for group in _groups(shards, has_state):
            loaded, infos = [], []
            for i in group:
                with timer.phase("read"):
                    database, encoded, hashes, previous, read_s = reader.get(i)
                log.info(
                    f"{os.fspath(shards[i])}: {len(database):,} sequences, "
                    f"{database.total_residues:,} residues; {len(queries)} queries"
                )
                infos.append({"shard": os.path.basename(os.fspath(shards[i])), "read_s": read_s})
                if has_state[i] and previous is None:
                    log.warning(f"{states[i]}: unreadable; scoring the whole shard")
                loaded.append(ShardInput(database, previous, hashes, encoded))
            started = early
            if any(has_state[i] for i in group) and backend != "cpu":
                # a re-scan: the GPU is used only where the delta is worth it
                with timer.phase("match"):
                    match_s = timer.fields.setdefault("match_s", {})
                    for sh in loaded:
                        sh.plan = plan_shard(
                            queries,
                            sh.database,
                            scheme.digest,
                            sh.previous,
                            sh.hashes,
                            qhashes,
                            seconds=match_s,
                        )
                    cells, passes = group_cells(queries, [sh.plan for sh in loaded])
                use = backend
                gpu_left = GPU_START_S if early is None else early.seconds_left(GPU_START_S)
                if rescan_on_cpu(cells, passes, cpus, gpu_start_s=gpu_left):
                    use = "cpu"
                    log.info(
                        f"re-scan of {cells:.3g} cells in {passes} query passes: scored on the "
                        f"CPU ({cpus} threads), sooner than "
                        + ("starting the GPU" if early is None else "waiting for the GPU")
                    )
                for info in infos:
                    info["rescan_estimate"] = {"cells": cells, "passes": passes, "backend": use}
                if use == "cpu":
                    cpu_start = cpu_start or BackendStart("cpu", device, scheme=scheme)
                    started = cpu_start
                elif early is None:
                    early = started = BackendStart(use, device, scheme=scheme, batched=True)
            with timer.phase("score"):
                results = scan_shards(
                    queries,
                    loaded,
                    scheme,
                    top_k,
                    margin,
                    threads=threads,
                    started=started,
                    stats=infos,
                    qhashes=qhashes,
                )
            for (hits, state), info in zip(results, infos):
                info["hits"] = len(hits)
                parts.append(hits)
                new_states.append(state)
                records.append(info)
            del loaded, results
    except Exception:
        reader.verify()
        raise
    with timer.phase("write"):
        reader.verify()  # every shard's digest, before anything is written
        # the table now; the states, which only the next release's re-scan reads (no
        # declared output), after the job's status where a command runs this and the
        # status comes before the process's end (a warm child: swgpu_tools.later; a
        # re-scan's four states were most of its write phase); else all at once.
        # Each is written whole or not at all, and a state always holds the exact
        # lists of its shard as it is now, so a kill between them costs at most a
        # re-scan of the shard's delta (an old state) or nothing (a new one).  The
        # table of several shards holds only their candidate rows (about queries x
        # top_k a job), cut to their joint top-k only where ties make too many
        # (_joint_cut), while the states are written
        table: list[ShardHits] = []

        def write_table(path, parts) -> None:
            t = time.perf_counter()
            # first only the rows that may take a place (engine.merge.candidates: each
            # query's rows at or above its k-th best over the parts, ties kept; a
            # fraction of the joint cut's cost, run 264: 2.0 s for 5,000 queries x 4
            # shards x 500; SWGPU_JOB_CANDIDATES=0 keeps every row, for measuring: the
            # same tables); then their joint top-k where _joint_cut says so
            if len(parts) > 1 and os.environ.get("SWGPU_JOB_CANDIDATES") != "0":
                parts = candidates(parts, top_k)
            cut = len(parts) > 1 and _joint_cut(sum(len(p) for p in parts))
            # (concat_shard_hits of one part is that part)
            table.append(
                top_k_of(parts, queries, top_k, threads=cpus) if cut else concat_shard_hits(parts)
            )
            timer.fields["joint_cut"] = cut
            timer.fields["joint_cut_s"] = round(time.perf_counter() - t, 4)
            write_shard_hits(path, table[0])

        state_writes = [partial(write_state, p, s) for p, s in zip(states, new_states) if p]
        if deferred():  # the table now, the states after the status
            write_table(out_path, parts)
            later(_at_once, state_writes)
        else:  # (the process ends when all are written: all at once)
            _at_once([partial(write_table, out_path, parts), *state_writes])
        hits = table[0]
    timer.fields.update(_job_record(records, shards))
    timer.fields["hits"] = len(hits)
    timer.write(stats_path)
    log.info(f"wrote {len(hits):,} hits of {len(shards)} shard(s) to {os.fspath(out_path)}")
    return hits


def _at_once(writes: list) -> None:
    """Run the writes on threads, several at once (their checksums and writes leave the
    GIL); the first error raised again."""
    if writes:
        with ThreadPoolExecutor(max_workers=min(8, len(writes))) as pool:
            list(pool.map(lambda write: write(), writes))


def _job_record(records: list[dict], shards: list) -> dict:
    """The job's statistics: one shard's record as it is; for several, the sums of
    :data:`_SUMMED`, the GCUPS over them, and each shard's record under ``shards``."""
    if len(records) == 1:
        return dict(records[0])
    out = dict(records[-1])
    for key in _SUMMED:
        out[key] = sum(r.get(key, 0) or 0 for r in records)
    out["gcups"] = out["cells"] / max(out["kernel_s"], 1e-9) / 1e9
    out["backend"] = "+".join(dict.fromkeys(str(r.get("backend")) for r in records))
    out["reason"] = "; ".join(dict.fromkeys(str(r.get("reason")) for r in records))
    modes = {r.get("mode") for r in records}
    out["mode"] = "incremental" if "incremental" in modes else out.get("mode")
    first = os.path.basename(os.fspath(shards[0])).removesuffix(".swdb")
    last = os.path.basename(os.fspath(shards[-1])).removesuffix(".swdb")
    out["shard"] = f"{first}-{last.removeprefix('shard-')}"
    out["shards"] = records
    return out
