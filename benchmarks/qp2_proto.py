#!/usr/bin/env python3
"""Prototype for issue 14: two *queries* per packed register, the query in registers.

Not part of the package; a measurement.  The design (GPU-NOTES.md, "Two queries per
register"):

* A group of G = 32 lanes (one warp) holds the query rows in registers: lane t keeps
  rows t*R .. t*R + R - 1 of *both* queries of a pair, query A in the low s16 half and
  query B in the high half.  A tile holds W = G*R rows; longer queries take several
  tiles, one launch each, the last row's H and F handed to the next tile through a
  global buffer (lane 0 reads it a step ahead, lane 31 writes it in place), the scores
  the best over the tiles.  With --chains (variant 'chain') short queries are chained
  down a tile, each member on whole lanes: a per-lane mask resets a half's row above and
  the best coming down where a member starts, and a member's last lane writes its row.
* The subjects stream by one column per step (lane t on column s - t), one stream per
  warp: a range of whole subjects one after another, so the pipeline fills once per
  range and not once per subject.  At a subject's first column a lane resets its H
  and E registers (a branch, taken by one lane of the warp at a time) and passes its
  best down the lanes; the last lane writes the subject's two scores.
* Scores come from the pair's query profile in shared memory: for each letter c and
  row i the packed word (s(A_i, c), s(B_i, c)), laid out so that lane t's rows
  4k..4k+3 are one 16-byte granule at (k*G + t)*16 bytes into the letter's row: one
  ``ld.shared.v4`` serves four packed cells (eight cells) and a quarter-warp never
  reads one bank twice.  Nothing to combine: the profile word is the packed score.
* Arithmetic as the s16 kernels' ``lob``: the low half of H, E and F biased by
  open + extend, H - open - extend one 32-bit IMAD.

    NUMBA_ENABLE_CUDASIM=1 python benchmarks/qp2_proto.py --check --R 4x2[@fmax+pre] \
        [--sim-queries 300,170] [--chains --sim-queries 60,45,5,9,13,30,37,64,200,150]
    python benchmarks/qp2_proto.py --db bench_db.fasta --queries q.fasta --R 32x2@fmax+pre \
        --block 384 [--chains] --check
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
import tempfile
import time
import types

import numpy as np
from numba import cuda
from qp2_kernel import FLAG, SIM, kernel_source

PADS = 40  # pad columns before and after each range: no bounds checks in the step


_MODS: dict = {}


def load_kernel(R: int, U: int = 2, variant: str = "", block: int = 256):
    """The compiled kernel for R (cached per process)."""
    key = (R, U, SIM, variant, block)
    if key in _MODS:
        return _MODS[key]
    src = kernel_source(R, U, variant=variant)
    d = os.path.join(tempfile.gettempdir(), "qp2_proto")
    os.makedirs(d, exist_ok=True)
    if d not in sys.path:
        sys.path.insert(0, d)
    name = "qp2_k_" + hashlib.sha1(src.encode()).hexdigest()[:12]
    path = os.path.join(d, name + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    minb = [int(v[2:]) for v in variant.split("+") if v.startswith("lb")]  # launch bounds
    kw = {"launch_bounds": (block, minb[0])} if minb and not SIM else {}
    k = cuda.jit(mod.kernel_py, **kw)
    _MODS[key] = k
    return k


def pack(lo, hi):
    return (
        ((np.asarray(hi, np.int64) & 0xFFFF) << 16 | (np.asarray(lo, np.int64) & 0xFFFF))
        .astype(np.uint32)
        .view(np.int32)
    )


def build_profile(qa: np.ndarray, qb: np.ndarray, matrix: np.ndarray, R: int, G: int = 32):
    """int32 [D * W]: the pair's profile in the kernel's granule layout (D = K + 1: the
    matrix's letters and the padding letter), with D and K."""
    W = G * R
    K = matrix.shape[0]
    return profile_rows(_padded(qa, W), _padded(qb, W), matrix, R, G), K + 1, K


def _padded(q: np.ndarray, W: int) -> np.ndarray:
    """A query's W row letters (-1: padding)."""
    rows = np.full(W, -1, np.int64)
    rows[: len(q)] = q
    return rows


def make_ranges(lengths: np.ndarray, n_ranges: int):
    """Split subjects 0..n-1 (in order) into n_ranges contiguous ranges of ~equal residues."""
    cum = np.concatenate([[0], np.cumsum(lengths)])
    total = cum[-1]
    cuts = np.searchsorted(cum, np.linspace(0, total, n_ranges + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], cuts, [len(lengths)]]))
    return bounds


def build_stream(
    codes: np.ndarray, offsets: np.ndarray, bounds: np.ndarray, pad: int, first: bool = False
):
    """uint8 stream: each range's subjects back to back (first column of each but the
    range's first flagged), then a flagged pad sentinel; and per-range start, length,
    first subject."""
    nr = len(bounds) - 1
    rlen = np.empty(nr, np.int32)
    rstart = np.empty(nr, np.int64)
    pos = 0
    parts = []
    for g in range(nr):
        lo, hi = bounds[g], bounds[g + 1]
        seg = codes[offsets[lo] : offsets[hi]].copy()
        firsts = offsets[lo + (0 if first else 1) : hi] - offsets[lo]
        seg[firsts] |= FLAG
        lead = np.full(PADS, pad, np.uint8)
        seg = np.concatenate([lead, seg, np.array([pad | FLAG], np.uint8), lead])
        rstart[g] = pos + PADS
        rlen[g] = len(seg) - 2 * PADS
        pos += len(seg)
        parts.append(seg)
    return np.concatenate(parts), rstart, rlen, bounds[:-1].astype(np.int64)


class Scan:
    """What every launch over one subject stream shares (one --R spec): the stream and
    its ranges on the GPU, the tiles' boundary buffer, the kernel's shape and launch."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def with_variant(self, variant: str) -> Scan:
        return Scan(**{**self.__dict__, "variant": variant})

    def launch(self, prof, scores_d, tin, tout, accum, linfo_d):
        """One tile: profile ``prof``, score rows ``scores_d`` (n subjects each)."""
        k = load_kernel(self.R, self.U, self.variant, self.block)
        shm = prof.size * 4
        args = (
            self.codes_d,
            self.rstart_d,
            self.rlen_d,
            self.rsub0_d,
            self.nr,
            cuda.to_device(prof),
            prof.size,
            self.W * 4,
            self.pad,
            self.noe,
            self.nxt,
            scores_d,
            65536 - (self.noe & 65535),
            self.noe - 65536,
            1,
            self.bnd_d,
            tin,
            tout,
            accum,
            linfo_d,
            self.n,
        )
        if not SIM:
            from numba import typeof

            from swgpu_tools.kernels.gpu.device import ensure_shared

            if not k.overloads:
                k.compile(tuple(typeof(a) for a in args))
            ensure_shared(k, shm)
        k[self.blocks, self.block, 0, shm](*args)

    def timed(self, repeat: int, launches, scores_d) -> list[float]:
        """Seconds of each pass over ``launches`` [(profile, lane info, tin, tout,
        accum)], in order: the last row of one tile the first of the next."""
        times = []
        for _rep in range(1 if SIM else repeat + 1):
            cuda.synchronize()
            t0 = time.perf_counter()
            for prof, info, tin, tout, accum in launches:
                self.launch(prof, scores_d, tin, tout, accum, info)
            cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return times


def unit_launches(profs, info) -> list:
    """A unit's tiles (one lane info for all): the first reads no tile above, the last
    writes none below, a later one keeps the best over the tiles."""
    K = len(profs)
    return [(profs[k], info, int(k > 0), int(k < K - 1), int(k > 0)) for k in range(K)]


def best_time(times: list[float]) -> float:
    """The best pass after the first (compile, first launch); the only one otherwise."""
    return min(times[1:]) if len(times) > 1 else times[0]


def check_scores(q, row, rand, db, offsets, matrix, go, ge, scheme):
    """(pick, got, want): ``row`` (query q's scores, one per subject) at the subjects
    ``rand`` and the 50 it scores highest (the hits), against the plain reference
    under the simulator, else the CPU kernels."""
    top = np.argsort(-row, kind="stable")[:50]
    pick = np.unique(np.concatenate([rand, top]))
    if SIM:
        want = reference_scores(q, db.codes, offsets, matrix, go, ge)[pick]
    else:
        from swgpu_tools.kernels import cpu
        from swgpu_tools.sequences import EncodedSequences

        sub = [np.asarray(db.codes[offsets[j] : offsets[j + 1]]) for j in pick]
        want = cpu.score_all(
            EncodedSequences.from_codes([q]), EncodedSequences.from_codes(sub), scheme
        )[0]
    return pick, row[pick], want


def lane_info(members_a, members_b, G: int = 32, fresh=(False, False)) -> np.ndarray:
    """int32 [3 * G]: per lane the reset mask of the halves whose member starts on it
    (lane 0 only where ``fresh`` says that half's member starts there in a tile below
    another: otherwise its row above comes from the tile above or is the border), and
    the score row its low and high half write (-1: none).  members_*: (row, first lane,
    lanes) of each member of the low and high half; none: one query a half, rows 0 and
    1, written by the last lane."""
    info = np.zeros(3 * G, np.int64)
    info[G:] = -1
    if not members_a and not members_b:
        info[G + G - 1], info[2 * G + G - 1] = 0, 1
        return _i32(info)
    halves = ((members_a, 0xFFFF, G, fresh[0]), (members_b, 0xFFFF0000, 2 * G, fresh[1]))
    for members, mask, off, fresh0 in halves:
        for row, l0, nl, *_ in members:
            if l0 > 0 or fresh0:
                info[l0] |= mask
            info[off + l0 + nl - 1] = row
    return _i32(info)


def _i32(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def plan_units(lengths, R: int, G: int = 32):
    """The queries as units of two halves: queries of at most W = G*R rows packed into
    bins of G lanes (first fit, longest first; a member takes ceil(len / R) lanes), the
    bins paired; longer queries sorted by length and paired (tiles of W rows).  Returns
    [(K tiles, members of the low half, members of the high half)], a member (query,
    first lane, lanes); an odd bin or long query is paired with nothing."""
    W = G * R
    order = sorted(range(len(lengths)), key=lambda q: -lengths[q])
    short = [q for q in order if lengths[q] <= W]
    long_ = [q for q in order if lengths[q] > W]
    bins: list[list] = []
    for q in short:
        nl = -(-lengths[q] // R)
        for b in bins:
            used = sum(m[2] for m in b)
            if used + nl <= G:
                b.append((q, used, nl))
                break
        else:
            bins.append([(q, 0, nl)])
    units = []
    for k in range(0, len(long_), 2):
        pair = long_[k : k + 2]
        K = -(-max(lengths[q] for q in pair) // W)
        units.append((K, [(pair[0], 0, G)], [(pair[1], 0, G)] if len(pair) > 1 else []))
    for k in range(0, len(bins), 2):
        units.append((1, bins[k], bins[k + 1] if k + 1 < len(bins) else []))
    return units


def plan_stream(lengths, R: int, G: int = 32):
    """The queries as two streams of lanes (the halves), cut into tiles of G lanes: each
    query takes ceil(len / R) whole lanes of one half, longest first into the half with
    fewer lanes, back to back, across tile edges where it falls there.  Returns the
    tiles [(members of the low half, of the high half, (fresh low, fresh high))], a
    member (query, first lane, lanes, the query's lanes in tiles above) in the tile;
    fresh: that half's lane 0 starts a query in a tile below another (its row above is
    reset, not taken from the tile)."""
    halves: list[list] = [[], []]
    used = [0, 0]
    for q in sorted(range(len(lengths)), key=lambda q: -lengths[q]):
        h = 0 if used[0] <= used[1] else 1
        halves[h].append((q, used[h], -(-lengths[q] // R)))
        used[h] += -(-lengths[q] // R)
    T = -(-max(used) // G)
    tiles = []
    for k in range(T):
        lo, hi = k * G, (k + 1) * G
        ms, fresh = [], []
        for half in halves:
            m = [
                (q, max(p0, lo) - lo, min(p0 + nl, hi) - max(p0, lo), max(p0, lo) - p0)
                for q, p0, nl in half
                if p0 < hi and p0 + nl > lo
            ]
            ms.append(m)
            fresh.append(k > 0 and any(p0 == lo for _q, p0, _nl in half))
        tiles.append((ms[0], ms[1], tuple(fresh)))
    return tiles


def stream_rows(qlist, members, W: int, R: int) -> np.ndarray:
    """A tile's W row letters of one half in the stream layout (-1: padding)."""
    rows = np.full(W, -1, np.int64)
    for q, l0, nl, first in members:
        part = np.asarray(qlist[q][first * R : (first + nl) * R], np.int64)
        rows[l0 * R : l0 * R + len(part)] = part
    return rows


def half_rows(qlist, members, k: int, W: int, R: int) -> np.ndarray:
    """Tile k's W row letters of one half (-1: padding)."""
    rows = np.full(W, -1, np.int64)
    for q, l0, _nl in members:
        part = np.asarray(qlist[q][k * W : (k + 1) * W], np.int64)
        rows[l0 * R : l0 * R + len(part)] = part
    return rows


def profile_rows(ra: np.ndarray, rb: np.ndarray, matrix: np.ndarray, R: int, G: int = 32):
    """int32 [D * W]: the profile of the row letters of each half (-1: padding): for each
    letter c and row i the packed (s(A_i, c), s(B_i, c)), lane t's rows 4k..4k+3 one
    16-byte granule at (k*G + t)*16 bytes into the letter's row."""
    W = G * R
    K = matrix.shape[0]
    low = int(matrix.min()) - 1
    D = K + 1
    sa = np.full((D, W), low, np.int64)
    sb = np.full((D, W), low, np.int64)
    for s_, r_ in ((sa, ra), (sb, rb)):
        real = r_ >= 0
        s_[:K, real] = matrix[:, r_[real]]
    words = pack(sa, sb)
    i = np.arange(W)
    t, r = i // R, i % R
    out = np.empty((D, W), np.int32)
    out[:, ((r // 4) * G + t) * 4 + (r % 4)] = words
    return out.ravel()


def run_units(args, scan: Scan, qlist, db, offsets, matrix, go, ge, scheme):
    """--chains: every query, short ones chained down a tile, in units of two halves
    (--stream: in two streams of lanes cut into tiles, plan_stream); one score row per
    query; GCUPS of the whole set; --check as for pairs."""
    R, W, n = scan.R, scan.W, scan.n
    if "chain" not in scan.variant.split("+"):  # members start inside a tile: lane resets
        scan = scan.with_variant("+".join(v for v in (scan.variant, "chain") if v))
    lengths = [len(q) for q in qlist]
    if args.stream:
        tiles = plan_stream(lengths, R)
        T = len(tiles)
        # every tile keeps the best over the tiles: the rows start at 0 (a score's floor)
        scores_d = cuda.to_device(np.zeros(len(qlist) * n, np.int32))
        launches = [
            (
                profile_rows(stream_rows(qlist, ma, W, R), stream_rows(qlist, mb, W, R), matrix, R),
                cuda.to_device(lane_info(ma, mb, fresh=fresh)),
                int(k > 0),
                int(k < T - 1),
                1,
            )
            for k, (ma, mb, fresh) in enumerate(tiles)
        ]
        what = f"stream: {len(qlist)} queries in {T} tiles"
    else:
        units = plan_units(lengths, R)
        T = sum(K for K, *_ in units)
        scores_d = cuda.device_array(len(qlist) * n, np.int32)
        launches = []
        for K, ma, mb in units:
            profs = [
                profile_rows(
                    half_rows(qlist, ma, k, W, R), half_rows(qlist, mb, k, W, R), matrix, R
                )
                for k in range(K)
            ]
            launches += unit_launches(profs, cuda.to_device(lane_info(ma, mb)))
        what = f"chains: {len(qlist)} queries in {len(units)} units ({T} tiles)"
    t = best_time(scan.timed(args.repeat, launches, scores_d))
    real = sum(lengths) * int(offsets[-1])
    padded = 2 * T * W * int(offsets[-1])
    print(
        f"{what}: {t * 1e3:.2f} ms, {real / t / 1e9:.0f} GCUPS, padded {padded / t / 1e9:.0f}",
        flush=True,
    )
    for ma, mb, fresh in tiles if args.stream else []:
        print(f"  tile: low {[m[:3] for m in ma]}, high {[m[:3] for m in mb]}, fresh {fresh}")
    for K, ma, mb in [] if args.stream else units:
        print(
            f"  unit: {K} tile(s), low {[(q, lengths[q], l0, nl) for q, l0, nl in ma]}, "
            f"high {[(q, lengths[q], l0, nl) for q, l0, nl in mb]}"
        )
    if args.check:
        res = scores_d.copy_to_host().reshape(len(qlist), n)
        rng = np.random.default_rng(args.seed)
        rand = np.arange(n) if SIM else rng.choice(n, min(n, 300), replace=False)
        bad_total = 0
        for qi, q in enumerate(qlist):
            pick, got, want = check_scores(q, res[qi], rand, db, offsets, matrix, go, ge, scheme)
            bad = np.nonzero(got != want)[0]
            bad_total += len(bad)
            if len(bad):
                print(
                    f"  query {qi} ({len(q)} aa): {len(bad)} of {len(pick)} differ, e.g. "
                    f"{list(zip(pick[bad[:3]], got[bad[:3]], want[bad[:3]]))}"
                )
        print(f"  check: {len(qlist)} queries, {bad_total} scores differ", flush=True)


def reference_scores(qcodes, codes, offsets, matrix, go, ge):
    """Plain SW scores (int64 numpy, column by column) for a check."""
    out = np.zeros(len(offsets) - 1, np.int64)
    m = len(qcodes)
    for j in range(len(offsets) - 1):
        sub = codes[offsets[j] : offsets[j + 1]]
        H = np.zeros(m + 1, np.int64)
        E = np.full(m + 1, -(10**9), np.int64)
        best = 0
        for c in sub:
            sc = matrix[qcodes, c]
            Hn = np.zeros(m + 1, np.int64)
            E = np.maximum(E - ge, H - go - ge)
            F = -(10**9)
            for i in range(1, m + 1):
                F = max(F - ge, Hn[i - 1] - go - ge)
                h = max(0, H[i - 1] + sc[i - 1], E[i], F)
                Hn[i] = h
            H = Hn
            best = max(best, int(H.max()))
        out[j] = best
    return out


def main(argv=None) -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from swgpu_tools.io.fasta import read_fasta
    from swgpu_tools.scoring import ScoringScheme

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db")
    ap.add_argument("--queries", help="FASTA; consecutive pairs are packed (each <= 32*R)")
    ap.add_argument(
        "--R", default="16", help="comma-separated register counts, R or RxU (U: steps unrolled)"
    )
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--blocks-per-sm", type=int, default=0, help="0: from occupancy guess")
    ap.add_argument("--ranges-per-warp", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check", action="store_true", help="compare with the CPU kernels")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--chains",
        action="store_true",
        help="all queries at once: short ones chained down a tile, long ones in tiles",
    )
    ap.add_argument(
        "--stream",
        action="store_true",
        help="with --chains: the queries back to back in two streams of lanes (plan_stream)",
    )
    ap.add_argument(
        "--sim-queries",
        type=lambda t: [int(x) for x in t.split(",")],
        default=[37, 50],
        help="without --db: the two random queries' lengths (longer than 32*R: tiles)",
    )
    args = ap.parse_args(argv)
    scheme = ScoringScheme()
    matrix = np.asarray(scheme.matrix, np.int64)
    go, ge = scheme.gap_open, scheme.gap_extend
    oe = go + ge
    noe = int(pack(-oe, -oe))
    nxt = int(pack(-ge, -ge))
    rng = np.random.default_rng(args.seed)
    if args.db:
        db = scheme.encode(read_fasta(args.db), "database")
        qs = scheme.encode(read_fasta(args.queries), "queries")
        qlist = [qs.codes[qs.offsets[i] : qs.offsets[i + 1]] for i in range(len(qs))]
    else:  # a small random case for the simulator
        K = matrix.shape[0] - 4
        qlist = [rng.integers(0, K, n).astype(np.uint8) for n in args.sim_queries]
        parts = [rng.integers(0, K, n).astype(np.uint8) for n in rng.integers(1, 70, 24)]
        parts[:4] = [parts[0][:1], parts[1][:2], parts[2][:1], parts[3][:3]]
        # homologs with gaps in both directions: of query 0 and of query 1
        q0, q1 = qlist[:2]
        parts[6] = np.concatenate([parts[6][:5], q0[:15], q0[19:], parts[6][5:9]])
        parts[11] = np.concatenate([q1[:20], rng.integers(0, K, 6).astype(np.uint8), q1[20:]])
        parts[12] = np.concatenate([q0[:30], q1[10:40]])
        offs = np.concatenate([[0], np.cumsum([len(x) for x in parts])]).astype(np.int64)
        sub = np.concatenate(parts)

        db = types.SimpleNamespace(codes=sub, offsets=offs)
    offsets = np.asarray(db.offsets, np.int64)
    lens = np.diff(offsets)
    n = len(lens)
    K = matrix.shape[0]
    pad = K
    dev = cuda.get_current_device()
    nsm = 1 if SIM else dev.MULTIPROCESSOR_COUNT
    for spec in args.R.split(","):
        spec, _, variant = spec.partition("@")
        R, U = (int(x) for x in (spec.split("x") + ["2"])[:2])
        W = 32 * R
        block = 32 if SIM else args.block
        bps = args.blocks_per_sm or 1
        prof0, D, _ = build_profile(qlist[0][:W], qlist[1 % len(qlist)][:W], matrix, R)
        shm = prof0.size * 4
        if not SIM and not args.blocks_per_sm:
            bps = max(1, min(228 * 1024 // (shm + 1024), 16 * 32 // block))
        blocks = nsm * bps
        nwarps = blocks * block // 32
        bounds = make_ranges(lens, min(n, nwarps * args.ranges_per_warp))
        stream, rstart, rlen, rsub0 = build_stream(
            np.asarray(db.codes, np.uint8), offsets, bounds, pad, first="pre" in variant
        )
        scan = Scan(
            codes_d=cuda.to_device(stream),
            rstart_d=cuda.to_device(rstart),
            rlen_d=cuda.to_device(rlen),
            rsub0_d=cuda.to_device(rsub0),
            nr=len(rlen),
            bnd_d=cuda.to_device(np.zeros(len(stream), np.int64)),  # tiles' boundary rows
            n=n,
            pad=pad,
            noe=noe,
            nxt=nxt,
            R=R,
            U=U,
            W=W,
            blocks=blocks,
            block=block,
            variant=variant,
        )
        if args.chains:
            run_units(args, scan, qlist, db, offsets, matrix, go, ge, scheme)
            continue
        scores_d = cuda.device_array(2 * n, np.int32)
        linfo_pair = cuda.to_device(lane_info([], []))  # one query a half: rows 0 and 1
        print(
            f"R={R} U={U} {variant or 'exact'} W={W} D={D} shared {shm} B, "
            f"{bps} blocks/SM of {block}, {len(rlen)} ranges, "
            f"stream {len(stream)}",
            flush=True,
        )
        for p in range(0, len(qlist) - 1, 2):
            qa, qb = qlist[p], qlist[p + 1]
            # tiles of W rows: one launch each, the last row of one the first of the next
            K = -(-max(len(qa), len(qb)) // W)
            profs = [
                build_profile(qa[k * W : (k + 1) * W], qb[k * W : (k + 1) * W], matrix, R)[0]
                for k in range(K)
            ]
            times = scan.timed(args.repeat, unit_launches(profs, linfo_pair), scores_d)
            t = best_time(times)
            res = scores_d.copy_to_host()
            real = (len(qa) + len(qb)) * int(offsets[-1])
            padded = 2 * K * W * int(offsets[-1])
            print(
                f"pair {p}: {len(qa)}+{len(qb)} aa, {K} tile(s): {t * 1e3:.2f} ms "
                f"(first {times[0] * 1e3:.0f}), "
                f"{real / t / 1e9:.0f} GCUPS, padded {padded / t / 1e9:.0f}",
                flush=True,
            )
            if args.check:
                rand = np.arange(n) if SIM else rng.choice(n, min(n, 300), replace=False)
                for qi, q, col in ((p, qa, 0), (p + 1, qb, 1)):
                    row = res[col * n : (col + 1) * n]
                    pick, got, want = check_scores(
                        q, row, rand, db, offsets, matrix, go, ge, scheme
                    )
                    bad = np.nonzero(got != want)[0]
                    print(
                        f"  check query {qi}: {len(pick)} subjects (top score {got.max()}), "
                        f"{len(bad)} differ"
                        + (
                            f" e.g. {list(zip(pick[bad[:5]], got[bad[:5]], want[bad[:5]]))}"
                            if len(bad)
                            else ""
                        ),
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
