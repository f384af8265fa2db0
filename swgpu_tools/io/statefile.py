"""A scoring job's memory of its shard (``results/state/shard-NNNN.npz``).

After scoring a shard, the job keeps what the next release's job needs to
score only what changed (:mod:`swgpu_tools.engine.increment`):

* the shard's records: accession and a 64-bit content hash of each sequence;
* per query (accession and content hash): its best ``top_k + margin`` hits in
  the shard (subject accession, score), best first, ties by accession, and
  whether that list is *complete* (it holds every subject of the shard) or
  cut at its last entry;
* what they were computed with: the scoring scheme's digest, ``top_k``,
  ``margin``.

One ``.npz`` file (numpy, no pickles), written atomically, so a job killed
at any point leaves the previous state or the new one, never a mix.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

from ..sequences import SequenceSet
from .atomic import atomic_write

#: 2: content hashes of :mod:`swgpu_tools.kernels.seqhash` (1: blake2b; such a
#: state is not read, so the first re-scan after the change scores every shard whole)
FORMAT = 2


def sequence_hashes(seqs: SequenceSet, threads: int | None = None) -> np.ndarray:
    """uint64 content hash of every sequence of ``seqs``
    (:mod:`swgpu_tools.kernels.seqhash`; ``threads``: default, the CPUs this
    process may use)."""
    from ..cpus import usable_cpus
    from ..kernels.seqhash import hash_ranges

    return hash_ranges(seqs.residues, seqs.offsets, threads or usable_cpus())


def _pack(strings: list[str]) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode("utf-8"), dtype=np.uint8).copy()


def _unpack(blob: np.ndarray | bytes, n: int) -> list[str]:
    if n == 0:
        return []
    return (blob if isinstance(blob, bytes) else blob.tobytes()).decode("utf-8").split("\n")


@dataclass
class ShardState:
    """What a scoring job remembers of its shard (see the module doc)."""

    scheme: str  # ScoringScheme.digest
    top_k: int
    margin: int
    subjects: list[str]  # the shard's accessions, in shard order
    subject_hashes: np.ndarray  # uint64, per subject
    queries: list[str]  # query accessions
    query_hashes: np.ndarray  # uint64, per query
    hit_offsets: np.ndarray  # int64 (n_queries + 1): query q's hits are [off[q], off[q+1])
    hit_subjects: np.ndarray  # int32: index into ``subjects``
    hit_scores: np.ndarray  # int32
    complete: np.ndarray  # bool, per query: the list holds every subject
    #: ``subjects`` as stored (UTF-8, joined by newlines), where read from a file: the
    #: re-scan matches the shard's accessions against these bytes (no dict of strings)
    subjects_blob: bytes | None = field(default=None, repr=False, compare=False)

    def hits_of(self, q: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.hit_offsets[q], self.hit_offsets[q + 1]
        return self.hit_subjects[a:b], self.hit_scores[a:b]


def write_state(path, state: ShardState) -> None:
    """Write ``state`` atomically (one .npz file)."""
    meta = {
        "format": FORMAT,
        "scheme": state.scheme,
        "top_k": int(state.top_k),
        "margin": int(state.margin),
        "n_subjects": len(state.subjects),
        "n_queries": len(state.queries),
    }
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    with atomic_write(path, "wb") as fh:
        np.savez(
            fh,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            subjects=_pack(state.subjects),
            subject_hashes=state.subject_hashes,
            queries=_pack(state.queries),
            query_hashes=state.query_hashes,
            hit_offsets=state.hit_offsets,
            hit_subjects=state.hit_subjects,
            hit_scores=state.hit_scores,
            complete=state.complete,
        )


def read_state(path) -> ShardState | None:
    """The state at ``path``, or None when there is none or it cannot be read
    (then the job scores the whole shard, as on a first scan)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes())
            if meta.get("format") != FORMAT:
                return None
            blob = z["subjects"].tobytes()
            state = ShardState(
                scheme=meta["scheme"],
                top_k=int(meta["top_k"]),
                margin=int(meta["margin"]),
                subjects=_unpack(blob, meta["n_subjects"]),
                subject_hashes=z["subject_hashes"].astype(np.uint64, copy=False),
                queries=_unpack(z["queries"], meta["n_queries"]),
                query_hashes=z["query_hashes"].astype(np.uint64, copy=False),
                hit_offsets=z["hit_offsets"].astype(np.int64, copy=False),
                hit_subjects=z["hit_subjects"].astype(np.int32, copy=False),
                hit_scores=z["hit_scores"].astype(np.int32, copy=False),
                complete=z["complete"].astype(bool, copy=False),
                subjects_blob=blob,
            )
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if (
        len(state.subject_hashes) != len(state.subjects)
        or len(state.query_hashes) != len(state.queries)
        or len(state.hit_offsets) != len(state.queries) + 1
    ):
        return None
    return state
