"""A scoring job's hits of its shards (``results/hits/shard-NNNN[-MMMM].npz``).

Binary and compact, so that the merge of many queries' hits reads fast and
holds little: per hit the query's index, the subject's index and the score
(int32 each); each hit subject's accession, FASTA header line and length once
(the header lines as one blob: :class:`~swgpu_tools.io.lines.Lines`; the merge
decodes only those of the subjects it keeps).  One ``.npz`` file (numpy, no
pickles), written atomically.  Format 1 held each subject's sequence id and
title instead of its header line; it is still read.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .atomic import atomic_write
from .lines import Lines

FORMAT = 2


@dataclass
class ShardHits:
    """Hits of a query set in one database part, per query best first."""

    queries: list[str]  # query accessions, in query-file order
    q: np.ndarray  # int32 per hit: index into ``queries``
    s: np.ndarray  # int32 per hit: index into ``subjects``
    score: np.ndarray  # int32 per hit
    subjects: list[str] | Lines  # accessions of the subjects hit (Lines: decoded when read)
    headers: Lines  # their FASTA header lines, without '>' (a list of str is converted)
    slen: np.ndarray  # int64, their lengths

    def __post_init__(self) -> None:
        if not isinstance(self.headers, Lines):
            self.headers = Lines.from_strings(self.headers)

    def __len__(self) -> int:
        return len(self.score)

    def accessions(self, indices) -> list[str]:
        """The accessions of the subjects at ``indices``; of a table read lazily
        (:class:`~swgpu_tools.io.lines.Lines`), only those are decoded."""
        if isinstance(self.subjects, Lines):
            return self.subjects.take(indices).tolist()
        return [self.subjects[i] for i in np.asarray(indices, dtype=np.int64).tolist()]

    def sseqids_titles(self, indices=None) -> tuple[list[str], list[str]]:
        """BLAST's sequence id (``sseqid``; the accession where the header has no
        first word) and title (``stitle``) of the subjects at ``indices`` (all)."""
        from ..ids import seqid_of, title_of

        idx = range(len(self.subjects)) if indices is None else np.asarray(indices).tolist()
        heads = self.headers.take(list(idx)).tolist()
        accs = self.accessions(list(idx))
        return [seqid_of(h) or a for h, a in zip(heads, accs)], [title_of(h) for h in heads]

    @classmethod
    def from_lists(cls, queries, database, offsets, subjects, scores) -> ShardHits:
        """From per-query lists in CSR form: query i's hits are ``subjects[offsets[i]:
        offsets[i + 1]]`` (indices into ``database``) with their ``scores``, best first."""
        offsets = np.asarray(offsets, dtype=np.int64)
        q = np.repeat(np.arange(len(offsets) - 1, dtype=np.int32), np.diff(offsets))
        sub = np.asarray(subjects).astype(np.int64, copy=False)
        score = np.asarray(scores).astype(np.int32)
        used, s = used_and_index(sub, len(database))
        ul = used.tolist()
        ids = database.ids
        raw = getattr(database.headers, "raw", None)  # a shard's header lines, undecoded
        if raw is not None:
            headers = Lines(raw.blob, raw.starts, raw.ends).take(used)
        elif database.headers is None:
            headers = Lines.from_strings(ids[i] for i in ul)
        else:
            headers = Lines.from_strings(database.headers[i] for i in ul)
        return cls(
            list(queries.ids),
            q,
            s.astype(np.int32),
            score,
            [ids[i] for i in ul],
            headers,
            database.lengths[used].astype(np.int64),
        )


def used_and_index(indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(indices, return_inverse=True)`` for indices in ``[0, n)``, in linear
    time (a mark per possible index instead of a sort)."""
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    seen = np.zeros(n, dtype=bool)
    seen[idx] = True
    used = np.flatnonzero(seen)
    place = np.cumsum(seen, dtype=np.int64) - 1
    return used, place[idx]


def concat_shard_hits(parts: list[ShardHits]) -> ShardHits:
    """The hits of several database parts (of one query set) as one table: the
    parts one after another (each per query, best first), each part's subjects
    once.  The merge orders all hits itself (:mod:`swgpu_tools.engine.merge`)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        raise ValueError("no hit tables to join")
    queries = parts[0].queries
    for p in parts[1:]:
        if p.queries != queries:
            raise ValueError("hit tables of different query sets cannot be joined")
    offsets = np.cumsum([0] + [len(p.subjects) for p in parts[:-1]])
    return ShardHits(
        list(queries),
        np.concatenate([p.q for p in parts]).astype(np.int32),
        np.concatenate([p.s.astype(np.int64) + o for p, o in zip(parts, offsets)]).astype(np.int32),
        np.concatenate([p.score for p in parts]).astype(np.int32),
        [x for p in parts for x in p.subjects],
        Lines.concat([p.headers for p in parts]),
        np.concatenate([p.slen for p in parts]).astype(np.int64),
    )


def _pack(strings: list[str]) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode("utf-8"), dtype=np.uint8).copy()


def _unpack(blob: np.ndarray, n: int) -> list[str]:
    return blob.tobytes().decode("utf-8").split("\n") if n else []


def write_shard_hits(path, hits: ShardHits) -> None:
    meta = {"format": FORMAT, "queries": len(hits.queries), "subjects": len(hits.subjects)}
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    with atomic_write(path, "wb") as fh:
        np.savez(
            fh,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            queries=_pack(hits.queries),
            q=hits.q.astype(np.int32),
            s=hits.s.astype(np.int32),
            score=hits.score.astype(np.int32),
            subjects=_pack(hits.subjects),
            headers=np.frombuffer(hits.headers.packed(), dtype=np.uint8),
            slen=hits.slen.astype(np.int64),
        )


def read_shard_hits(path, lazy: bool = False) -> ShardHits:
    """Read a file of :func:`write_shard_hits`; InputError naming it if it is not one.

    ``lazy``: the subjects' accessions as :class:`~swgpu_tools.io.lines.Lines`, decoded
    when read (the merge reads those of the few subjects it keeps: decoding every
    one took 0.04 s of a re-scan's merge of 439,226 subjects)."""
    name = os.fspath(path)
    try:
        with np.load(name, allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes())
            if meta.get("format") not in (1, FORMAT):
                raise ValueError(f"format {meta.get('format')}")
            subjects = (
                Lines.from_blob(z["subjects"].tobytes(), meta["subjects"])
                if lazy
                else _unpack(z["subjects"], meta["subjects"])
            )
            if meta["format"] == 1:  # sequence ids and titles: header lines again
                seqids = _unpack(z["sseqid"], meta["subjects"])
                titles = _unpack(z["stitle"], meta["subjects"])
                headers = Lines.from_strings(
                    i if t == "N/A" else f"{i} {t}" for i, t in zip(seqids, titles)
                )
            else:
                headers = Lines.from_blob(z["headers"].tobytes(), meta["subjects"])
            hits = ShardHits(
                _unpack(z["queries"], meta["queries"]),
                z["q"],
                z["s"],
                z["score"],
                subjects,
                headers,
                z["slen"],
            )
    except FileNotFoundError:
        raise InputError(f"{name}: file not found") from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{name}: not a shard hits file ({exc}); re-run its scoring") from None
    n = len(hits.score)
    if not (
        len(hits.q) == len(hits.s) == n
        and len(hits.headers) == len(hits.subjects) == len(hits.slen)
    ):
        raise InputError(f"{name}: not a shard hits file (inconsistent lengths)")
    if n and (
        hits.q.max() >= len(hits.queries)
        or hits.s.max() >= len(hits.subjects)
        or hits.q.min() < 0
        or hits.s.min() < 0
    ):
        raise InputError(f"{name}: not a shard hits file (indices out of range)")
    return hits
