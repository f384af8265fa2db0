"""Local alignments of database hits: query lanes, then bands or short regions.

The traceback step of a database search aligns the hits of each query (many
subjects per query).  Per group of up to 16 subjects of one query
(:func:`hits_chunk`, one Numba function per work chunk):

1. the forward pass in query lanes (:func:`.query_lanes.lanes_pass`, int16
   lanes): best score, end cell and the grid of DP samples;
2. hits scoring at least :data:`BAND_MIN_SCORE` (long alignments): the start
   and the traceback on the bands of :mod:`.band` (a tiny part of the region);
3. weaker hits (short regions): the start from the reverse pass in lanes;
   their regions are traced back afterwards in pair lanes
   (:func:`.batch.traceback_regions`).

Rare cases leave the chunk function with a status and are finished by
separate functions, compiled only when a run needs them (so a first run
compiles less): a group whose int16 lanes may overflow is rerun in int32
lanes, 8 subjects at a time (the same chunk function, typed for int32); a
band that outgrows ``cell_limit`` falls back to the scalar passes
(:func:`finish_scalar`).  Groups go to the threads longest first, each to
the least loaded of 4 chunks per thread (by the cells of its forward pass),
heaviest chunks first.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .band import backward_band, forward_band_traceback
from .pool import private_buffer, run_chunks
from .query_lanes import GRID_BYTES, fits_int16, grid_shape, grid_view, lanes_pass
from .scalar import reverse_start
from .traceback import traceback

#: Database hits scoring at least BAND_MIN_SCORE get their start and
#: traceback on the bands of :mod:`.band` (long alignments: a tiny part of
#: their region); weaker ones (short regions) the reverse pass in lanes and
#: the traceback of their whole region.
BAND_MIN_SCORE = 200

# status of a pair after hits_chunk
DONE = 0
WIDE = 1  # the group's int16 lanes may overflow: rerun in int32 lanes
SCALAR = 2  # a band outgrew cell_limit: the scalar passes finish the pair
TRACE = 3  # a weak hit, located: its region is traced back in pair lanes


@njit(cache=True, nogil=True, boundscheck=False)
def hits_chunk(
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
    perm,
    item_start,
    item_chunk,
    probe,
    do_trace,
    cell_limit,
    band_min,
    info,
    ops,
    room,
    status,
    known,
    gridbuf,
):
    """Chunk c's groups (item t, pairs perm[item_start[t]:item_start[t + 1]], belongs to
    chunk item_chunk[t]; at most 32 // probe.itemsize pairs, all of one query).

    info[k] = (best, qs, qe, ss, se, number of ops); pair k's operations end
    at ops[room[k + 1]]; status[k]: DONE, WIDE, SCALAR or TRACE (see the
    module doc).  ``gridbuf``: int32 working memory of this chunk's thread for the
    grids of its passes (:data:`.query_lanes.GRID_BYTES` hold any; one too small is
    replaced).  ``known``: each pair's best score where a search gave it (empty:
    none), for the forward pass (:func:`.query_lanes.lanes_pass`).
    """
    L = 32 // probe.itemsize
    best = np.zeros(L, dtype=np.int64)
    qe = np.zeros(L, dtype=np.int64)
    se = np.zeros(L, dtype=np.int64)
    wk = np.zeros(L, dtype=np.int64)  # the weak hits of a group
    wsub = np.zeros(L, dtype=np.int64)
    wbest = np.zeros(L, dtype=np.int64)
    wqe = np.zeros(L, dtype=np.int64)
    wse = np.zeros(L, dtype=np.int64)
    found = np.zeros(L, dtype=np.int64)
    spa = np.zeros(L, dtype=np.int64)
    spb = np.zeros(L, dtype=np.int64)
    nogrid = np.zeros((0, 0, 0), dtype=np.int32)
    kn = np.full(L, -1, dtype=np.int64)
    nokn = kn[:0]
    for t in range(item_start.shape[0] - 1):
        if item_chunk[t] != c:
            continue
        ks = perm[item_start[t] : item_start[t + 1]]
        n = ks.shape[0]
        qi = qidx[ks[0]]
        q = qcodes[qoff[qi] : qoff[qi + 1]]
        m = q.shape[0]
        subjects = np.empty(n, dtype=np.int64)
        for l in range(n):
            subjects[l] = sidx[ks[l]]
            kn[l] = known[ks[l]] if known.shape[0] > 0 else -1
        nc, nr, step, ncols = grid_shape(m, soff, subjects, L)
        if nc * nr * L > gridbuf.shape[0]:
            gridbuf = np.empty(nc * nr * L, dtype=np.int32)
        grid = grid_view(gridbuf, nc, nr, L)
        lo = np.empty(m + 1, dtype=np.int64)
        hi = np.empty(m + 1, dtype=np.int64)
        hoff = np.empty(m + 1, dtype=np.int64)
        nweak = 0
        # phase 0: the forward pass of the group; phase 1: the reverse pass of its
        # weak hits.  (One call site of lanes_pass, with a bool and an int that are
        # not literals: one specialization to compile.)
        for phase in range(2):
            reverse = phase == 1
            if reverse:
                if nweak == 0:
                    break
                ok = lanes_pass(
                    q,
                    scodes,
                    soff,
                    wsub[:nweak],
                    matrix,
                    gap_open,
                    gap_extend,
                    reverse,
                    wqe[:nweak],
                    wse[:nweak],
                    wbest[:nweak],
                    found,
                    spa,
                    spb,
                    probe,
                    nogrid,
                    phase,
                    nokn,
                )
            else:
                ok = lanes_pass(
                    q,
                    scodes,
                    soff,
                    subjects,
                    matrix,
                    gap_open,
                    gap_extend,
                    reverse,
                    qe,
                    se,
                    best,
                    best,
                    qe,
                    se,
                    probe,
                    grid,
                    step,
                    kn[:n],
                )
            if not ok:
                for x in range(nweak if reverse else n):
                    status[wk[x] if reverse else ks[x]] = WIDE
                break
            if reverse:
                for x in range(nweak):
                    k = wk[x]
                    info[k, 2] = wqe[x]
                    info[k, 4] = wse[x]
                    if found[x] != wbest[x] + 1:  # cannot happen; the scalar passes then
                        status[k] = SCALAR
                        continue
                    info[k, 1] = wqe[x] - spa[x]
                    info[k, 3] = wse[x] - spb[x]
                    status[k] = TRACE
                continue
            for l in range(n):
                k = ks[l]
                info[k, 0] = best[l]
                info[k, 5] = 0
                status[k] = DONE
                if best[l] <= 0:
                    continue
                if best[l] < band_min:  # weak: the reverse pass in lanes (phase 1)
                    wk[nweak] = k
                    wsub[nweak] = subjects[l]
                    wbest[nweak] = best[l]
                    wqe[nweak] = qe[l]
                    wse[nweak] = se[l]
                    nweak += 1
                    continue
                s = scodes[soff[subjects[l]] : soff[subjects[l] + 1]]
                a, b, _, hvals = backward_band(
                    q,
                    s,
                    qe[l],
                    se[l],
                    best[l],
                    matrix,
                    gap_open,
                    gap_extend,
                    grid[:, :, l],
                    step,
                    step,
                    m,
                    ncols,
                    lo,
                    hi,
                    hoff,
                    cell_limit,
                )
                info[k, 2] = qe[l]
                info[k, 4] = se[l]
                if a < 0:
                    status[k] = SCALAR
                    continue
                info[k, 1] = qe[l] - a
                info[k, 3] = se[l] - b
                if do_trace:
                    score, count = forward_band_traceback(
                        q[qe[l] - a : qe[l]],
                        s[se[l] - b : se[l]],
                        matrix,
                        gap_open,
                        gap_extend,
                        best[l],
                        lo,
                        hi,
                        hoff,
                        hvals,
                        ops,
                        room[k + 1],
                        cell_limit,
                    )
                    if count < 0 or score != best[l]:
                        status[k] = SCALAR
                    else:
                        info[k, 5] = count


@njit(cache=True, nogil=True, boundscheck=False)
def finish_scalar(
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
    do_trace,
    ks,
    info,
    ops,
    room,
):
    """The scalar passes for pairs ks whose best and end are in info: the start
    (:func:`.scalar.reverse_start`) and, with ``do_trace``, the checkpointed traceback."""
    for k in ks:
        q = qcodes[qoff[qidx[k]] : qoff[qidx[k] + 1]]
        s = scodes[soff[sidx[k]] : soff[sidx[k] + 1]]
        best, qe, se = info[k, 0], info[k, 2], info[k, 4]
        semi = k < 0  # False, but a bool rather than a literal: one reverse_start to compile
        a, b = reverse_start(q, s, qe, se, best, matrix, gap_open, gap_extend, semi)
        info[k, 1] = qe - a
        info[k, 3] = se - b
        if do_trace:
            score, count = traceback(
                q[qe - a : qe],
                s[se - b : se],
                matrix,
                gap_open,
                gap_extend,
                cell_limit,
                ops[: room[k + 1]],
            )
            info[k, 5] = count if score == best else -1


def _grid_scratch() -> np.ndarray:
    """A thread's memory for the grids of its forward passes (GRID_BYTES, which
    :func:`.query_lanes.grid_shape` keeps every grid within; only the pages that a
    call's grids touch are ever made)."""
    return private_buffer(GRID_BYTES)


def lpt_chunks(cost, nchunks):
    """Chunk of each work item: longest first, each to the least loaded chunk so far;
    chunks numbered by load, heaviest first (the thread pool starts them in that order)."""
    chunk = np.zeros(len(cost), dtype=np.int64)
    load = [0.0] * nchunks
    for t in np.argsort(-np.asarray(cost, dtype=np.float64), kind="stable"):
        c = min(range(nchunks), key=load.__getitem__)
        chunk[t] = c
        load[c] += float(cost[t])
    rank = np.empty(nchunks, dtype=np.int64)
    rank[np.argsort(-np.asarray(load), kind="stable")] = np.arange(nchunks)
    return rank[chunk]


def _groups(pairs, qidx, slen, size):
    """(perm, item_start): ``pairs`` grouped by query, longest subjects first, ``size`` a group."""
    perm = pairs[np.lexsort((-slen[pairs], qidx[pairs]))].astype(np.int64)
    new_query = np.flatnonzero(np.diff(qidx[perm])) + 1
    bounds = [0]
    for lo, hi in zip(np.r_[0, new_query], np.r_[new_query, len(perm)]):
        bounds.extend(range(int(lo) + size, int(hi), size))
        bounds.append(int(hi))
    return perm, np.asarray(bounds, dtype=np.int64)


def hits_in_lanes(
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
    do_trace,
    cell_limit,
    info,
    ops,
    room,
    band_min=None,
    known=None,
):
    """Locate (and with ``do_trace`` trace back) database hits; see the module doc.

    ``known``: each pair's best local score where a search gave it (a wrong one
    costs time, never the results; a writable int64 array, as
    :func:`.api.align_arrays` makes it), else None.

    Returns (status, fallbacks): status[k] is TRACE for the weak hits whose
    regions are still to be traced back (DONE for the others); fallbacks[k] =
    1 where the scalar passes finished the pair.
    """
    n = len(qidx)
    if band_min is None:
        band_min = BAND_MIN_SCORE
    slen = soff[sidx + 1] - soff[sidx]
    qlen = qoff[qidx + 1] - qoff[qidx]
    status = np.zeros(n, dtype=np.int64)
    narrow = fits_int16(matrix, gap_open, gap_extend)
    if known is None:
        known = np.zeros(0, np.int64)
    todo = np.arange(n, dtype=np.int64)
    for probe in (np.zeros(1, np.int16), np.zeros(1, np.int32)):
        if probe.itemsize == 2 and not narrow:
            status[:] = WIDE
            continue
        perm, item_start = _groups(todo, qidx, slen, 32 // probe.itemsize)
        first = perm[item_start[:-1]]  # the longest subject of each group comes first
        cost = qlen[first] * slen[first]
        nchunks = min(4 * nthreads, len(cost))  # more chunks than threads: the pool balances
        run_chunks(
            hits_chunk,
            nchunks,
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
            perm,
            item_start,
            lpt_chunks(cost, nchunks),
            probe,
            do_trace,
            cell_limit,
            band_min,
            info,
            ops,
            room,
            status,
            known,
            scratch=_grid_scratch,
        )
        todo = np.flatnonzero(status == WIDE).astype(np.int64)
        if len(todo) == 0:
            break
    fallbacks = (status == SCALAR).astype(np.int64)
    ks = np.flatnonzero(fallbacks).astype(np.int64)
    if len(ks):
        finish_scalar(
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
            do_trace,
            ks,
            info,
            ops,
            room,
        )
        status[ks] = DONE
    return status, fallbacks
