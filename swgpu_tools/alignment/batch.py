"""Batches of pairs: locating the aligned regions and tracing them back, on all threads.

:func:`align_batch` runs steps 1-2 (:func:`locate_regions`) and step 3
(:func:`traceback_regions`) of :mod:`swgpu_tools.alignment` for many pairs.  Work
items (a lane group or one pair) are dealt round-robin to chunks, 4 per
thread, and the chunks run on a thread pool (:func:`.pool.run_chunks`) of Numba
functions that release the GIL.

Arrays: ``qcodes``/``qoff`` and ``scodes``/``soff`` are the concatenated codes
(uint8) and offsets (int64) of the queries and subjects; pair k is
(qidx[k], sidx[k]).  ``info`` (n, 6) int64 gets per pair (score, query start,
query end, subject start, subject end, number of operations); pair k's
operations are ``ops[room[k + 1] - count:room[k + 1]]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .hits import TRACE, hits_in_lanes
from .modes import MODE_GLOBAL, MODE_LOCAL, mode_code
from .pair_lanes import PAIR_LANES, locate_chunk_pairs, pair_matrix, traceback_group
from .pool import run_chunks
from .scalar import locate, start_from_end
from .traceback import TRACEBACK_CELL_LIMIT, traceback


@njit(cache=True, nogil=True, boundscheck=False)
def locate_chunk_scalar(
    c,
    nchunks,
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    mode,
    ends,
    perm,
    info,
):
    """Locate the regions of chunk c's pairs one by one, scalar passes (from ``ends`` if given)."""
    given = ends.shape[0] == qidx.shape[0]
    for t in range(c, perm.shape[0], nchunks):
        k = perm[t]
        q = qcodes[qoff[qidx[k]] : qoff[qidx[k] + 1]]
        s = scodes[soff[sidx[k]] : soff[sidx[k] + 1]]
        if given:
            r = start_from_end(
                q, s, ends[k, 0], ends[k, 1], ends[k, 2], matrix, gap_open, gap_extend, mode
            )
        else:
            r = locate(q, s, matrix, gap_open, gap_extend, mode)
        for col in range(5):
            info[k, col] = r[col]


@njit(cache=True, nogil=True, boundscheck=False)
def traceback_chunk(
    c,
    nchunks,
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    mode,
    perm,
    item_start,
    mf,
    w,
    ident,
    info,
    ops,
    room,
):
    """Traceback of chunk c's groups of regions, in pair lanes."""
    for t in range(c, item_start.shape[0] - 1, nchunks):
        ks = perm[item_start[t] : item_start[t + 1]]
        scores, counts = traceback_group(
            qcodes,
            qoff,
            scodes,
            soff,
            qidx,
            sidx,
            ks,
            mf,
            w,
            ident,
            matrix.shape[0],
            gap_open,
            gap_extend,
            info,
            ops,
            room,
        )
        _record(ks, scores, counts, mode, info)


@njit(cache=True, nogil=True, boundscheck=False)
def traceback_singles(
    c,
    nchunks,
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    cell_limit,
    mode,
    ks,
    info,
    ops,
    room,
):
    """Traceback of chunk c's regions one at a time, with checkpoints (large regions)."""
    for t in range(c, ks.shape[0], nchunks):
        k = ks[t]
        q = qcodes[qoff[qidx[k]] + info[k, 1] : qoff[qidx[k]] + info[k, 2]]
        s = scodes[soff[sidx[k]] + info[k, 3] : soff[sidx[k]] + info[k, 4]]
        score, count = traceback(
            q, s, matrix, gap_open, gap_extend, cell_limit, ops[room[k] : room[k + 1]]
        )
        _record(ks[t : t + 1], np.full(1, score, np.int64), np.full(1, count, np.int64), mode, info)


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _record(ks, scores, counts, mode, info):
    for l in range(ks.shape[0]):
        k = ks[l]
        info[k, 5] = counts[l]
        if mode == MODE_GLOBAL:
            info[k, 0] = scores[l]
        elif scores[l] != info[k, 0]:
            info[k, 5] = -1  # must not happen; reported by the caller


def shape_order(alen, blen, eligible):
    """Eligible pair indices ordered so that PAIR_LANES consecutive ones have similar shapes.

    Key: the first length in buckets of 32, then the second length.
    """
    idx = np.flatnonzero(eligible)
    return idx[np.lexsort((blen[idx], alen[idx] // 32))].astype(np.int64)


def items(order, size):
    """item_start over ``order`` in items of ``size``."""
    return np.r_[np.arange(0, len(order), size), len(order)].astype(np.int64)


def locate_regions(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    nthreads,
    mode,
    ends,
    query_lanes,
    pair_lanes,
    info,
):
    """Steps 1-2: info[:, :5] = (best, qs, qe, ss, se) of every pair, by the tie rules.

    * ``ends`` given ((n, 3) int64: best, query end, subject end per pair from
      an external forward pass; else shape (0, 3)): the reverse pass only,
      PAIR_LANES pairs of similar end cells at once with ``pair_lanes``, else
      pair by pair; (n, 5) (whole regions, e.g. from
      :func:`swgpu_tools.kernels.gpu.pair_regions`): nothing to locate;
    * global mode: nothing to locate (the whole rectangle);
    * local mode with ``query_lanes`` (many pairs per query, e.g. database
      hits): :func:`.hits.hits_in_lanes`;
    * otherwise, with ``pair_lanes``: PAIR_LANES pairs of similar shapes at
      once (:func:`.pair_lanes.locate_group`); without: scalar passes, pair
      by pair.
    """
    n = len(qidx)
    nchunks = 4 * nthreads
    qlen = qoff[qidx + 1] - qoff[qidx]
    slen = soff[sidx + 1] - soff[sidx]
    given = ends.shape[0] == n
    if mode == MODE_GLOBAL:
        info[:, 1] = 0
        info[:, 2] = qlen
        info[:, 3] = 0
        info[:, 4] = slen
        return
    if given and ends.shape[1] == 5:  # whole regions given (GPU forward + reverse passes)
        info[:, :5] = ends
        return
    mf, w, ident = pair_matrix(matrix)
    mft = pair_matrix(matrix, transpose=True)[0]
    if given and pair_lanes:
        # reverse passes only: groups of similar end cells (the reversed prefixes)
        perm = shape_order(ends[:, 2], ends[:, 1], np.ones(n, dtype=bool))
    elif given or not (pair_lanes or (query_lanes and mode == MODE_LOCAL)):
        run_chunks(
            locate_chunk_scalar,
            min(nchunks, n),
            nthreads,
            qcodes,
            qoff,
            scodes,
            soff,
            qidx,
            sidx,
            matrix,
            gap_open,
            gap_extend,
            mode,
            ends,
            np.argsort(-(qlen * slen), kind="stable"),
            info,
        )
        return
    elif mode == MODE_LOCAL and query_lanes:
        hits_in_lanes(
            qcodes,
            qoff,
            scodes,
            soff,
            qidx,
            sidx,
            matrix,
            gap_open,
            gap_extend,
            nthreads,
            False,
            TRACEBACK_CELL_LIMIT,
            info,
            np.zeros(0, np.uint8),
            np.zeros(n + 1, np.int64),
        )
        return
    else:
        perm = shape_order(qlen, slen, np.ones(n, dtype=bool))
    # pair lanes: the forward and reverse passes, or the reverse passes alone
    item_start = items(perm, PAIR_LANES)
    run_chunks(
        locate_chunk_pairs,
        min(nchunks, len(item_start) - 1),
        nthreads,
        qcodes,
        qoff,
        scodes,
        soff,
        qidx,
        sidx,
        matrix,
        gap_open,
        gap_extend,
        mode,
        perm,
        item_start,
        mf,
        mft,
        w,
        ident,
        info,
        ends,
    )


def traceback_regions(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    cell_limit,
    nthreads,
    mode,
    pair_lanes,
    info,
    subset=None,
):
    """Step 3: the traceback of every located region (or of the pairs in the mask ``subset``);
    returns (ops, room) and fills info[:, 5].

    Regions of similar shapes PAIR_LANES at a time (:func:`.pair_lanes.traceback_group`)
    where the group's direction bytes fit ``cell_limit``; larger regions one at
    a time with checkpoints (:func:`.traceback.traceback`).
    """
    n = len(qidx)
    nchunks = 4 * nthreads
    mf, w, ident = pair_matrix(matrix)
    rq = info[:, 2] - info[:, 1]
    rs = info[:, 4] - info[:, 3]
    todo = (info[:, 0] > 0) | (mode != MODE_LOCAL)
    if subset is not None:
        todo &= subset
    room = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.where(todo, rq + rs, 0), out=room[1:])
    ops = np.zeros(int(room[n]), dtype=np.uint8)
    lanes_ok = np.zeros(n, dtype=bool)
    if pair_lanes:
        lanes_ok = todo & (rq > 0) & (rs > 0) & (rq * (rs + 1) * PAIR_LANES <= cell_limit)
    order = shape_order(rq, rs, lanes_ok)
    # groups of up to PAIR_LANES regions whose padded shape fits cell_limit
    bounds = [0]
    g = 0
    oq, os_ = rq[order].tolist(), rs[order].tolist()
    while g < len(order):
        h, mq, ms = g + 1, oq[g], os_[g]
        while h < len(order) and h - g < PAIR_LANES:
            mq2, ms2 = max(mq, oq[h]), max(ms, os_[h])
            if mq2 * (ms2 + 1) * PAIR_LANES > cell_limit:
                break
            mq, ms, h = mq2, ms2, h + 1
        bounds.append(h)
        g = h
    item_start = np.asarray(bounds, dtype=np.int64)
    run_chunks(
        traceback_chunk,
        min(nchunks, len(item_start) - 1),
        nthreads,
        qcodes,
        qoff,
        scodes,
        soff,
        qidx,
        sidx,
        matrix,
        gap_open,
        gap_extend,
        mode,
        order,
        item_start,
        mf,
        w,
        ident,
        info,
        ops,
        room,
    )
    singles = np.flatnonzero(todo & ~lanes_ok).astype(np.int64)
    if len(singles):  # compiled only when a run has large regions (or no pair lanes)
        singles = singles[np.argsort(-(rq[singles] * rs[singles]), kind="stable")]
        run_chunks(
            traceback_singles,
            min(nchunks, len(singles)),
            nthreads,
            qcodes,
            qoff,
            scodes,
            soff,
            qidx,
            sidx,
            matrix,
            gap_open,
            gap_extend,
            cell_limit,
            mode,
            singles,
            info,
            ops,
            room,
        )
    return ops, room


def align_batch(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    cell_limit,
    nthreads,
    mode,
    ends,
    query_lanes,
    pair_lanes,
    known=None,
):
    """Align pairs (qidx[k], sidx[k]) in ``mode``; see the module doc.

    ``known``: each pair's best local score, from a search (database hits in
    query lanes use it; a wrong one costs time, never the results), or None.

    Returns (info, parts, fallbacks): pair k's operations are
    ``ops[room[k + 1] - info[k, 5]:room[k + 1]]`` for the (ops, room, mask)
    of ``parts`` whose mask holds k; fallbacks[k] = 1 where a database hit's
    band was too large and scalar passes ran.
    """
    n = len(qidx)
    info = np.zeros((n, 6), dtype=np.int64)
    fallbacks = np.zeros(n, dtype=np.int64)
    if mode == MODE_LOCAL and query_lanes and ends.shape[0] != n:
        # database hits (:mod:`.hits`): strong ones traced back on bands, weak ones
        # located there and traced back here in pair lanes
        qlen = qoff[qidx + 1] - qoff[qidx]
        slen = soff[sidx + 1] - soff[sidx]
        room = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(qlen + slen, out=room[1:])
        ops = np.zeros(int(room[n]), dtype=np.uint8)
        status, fallbacks = hits_in_lanes(
            qcodes,
            qoff,
            scodes,
            soff,
            qidx,
            sidx,
            matrix,
            gap_open,
            gap_extend,
            nthreads,
            True,
            cell_limit,
            info,
            ops,
            room,
            known=known,
        )
        rest = status == TRACE
        parts = [(ops, room, ~rest)]
        if rest.any():
            ops2, room2 = traceback_regions(
                qcodes,
                qoff,
                scodes,
                soff,
                qidx,
                sidx,
                matrix,
                gap_open,
                gap_extend,
                cell_limit,
                nthreads,
                mode,
                pair_lanes,
                info,
                rest,
            )
            parts.append((ops2, room2, rest))
        return info, parts, fallbacks
    locate_regions(
        qcodes,
        qoff,
        scodes,
        soff,
        qidx,
        sidx,
        matrix,
        gap_open,
        gap_extend,
        nthreads,
        mode,
        ends,
        query_lanes,
        pair_lanes,
        info,
    )
    ops, room = traceback_regions(
        qcodes,
        qoff,
        scodes,
        soff,
        qidx,
        sidx,
        matrix,
        gap_open,
        gap_extend,
        cell_limit,
        nthreads,
        mode,
        pair_lanes,
        info,
    )
    return info, [(ops, room, np.ones(n, dtype=bool))], fallbacks


def pair_regions(
    qcodes,
    qoff,
    scodes,
    soff,
    qidx,
    sidx,
    matrix,
    gap_open,
    gap_extend,
    mode: str,
    threads: int | None = None,
) -> np.ndarray:
    """Steps 1-2 on the CPU: (best, qs, qe, ss, se) per pair, int64 (n, 5).

    The PairBackend contract of :mod:`swgpu_tools.kernels` (matrix and gap
    costs trusted: a scheme's); ``mode`` "local" or "semiglobal".
    """
    import numba

    code = mode_code(mode)
    if code == MODE_GLOBAL:
        raise ValueError("pair regions are for local and semi-global modes")
    qidx = np.ascontiguousarray(qidx, dtype=np.int64)
    sidx = np.ascontiguousarray(sidx, dtype=np.int64)
    info = np.zeros((len(qidx), 6), dtype=np.int64)
    if len(qidx):
        nthreads = numba.get_num_threads() if threads is None else max(1, int(threads))
        query_lanes = len(qidx) >= 4 * len(np.unique(qidx))
        locate_regions(
            np.ascontiguousarray(qcodes, dtype=np.uint8),
            np.ascontiguousarray(qoff, dtype=np.int64),
            np.ascontiguousarray(scodes, dtype=np.uint8),
            np.ascontiguousarray(soff, dtype=np.int64),
            qidx,
            sidx,
            matrix,
            gap_open,
            gap_extend,
            nthreads,
            code,
            np.zeros((0, 3), dtype=np.int64),
            query_lanes,
            True,
            info,
        )
    return np.ascontiguousarray(info[:, :5])
