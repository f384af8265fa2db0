"""Base vs new align_many on the stand-in hit lists, each version in its own processes.

Made for a quiet many-core machine (the device host): every timing runs in a
fresh process with PYTHONPATH pointing at one version's copy of
swgpu_tools, the Numba cache of that version in /tmp/nbcache-<version>;
alignments are checked against the dumps of 129d1ee.  Prepare a folder::

    mkdir -p DIR/base DIR/new
    git archive 129d1ee swgpu_tools | tar -x -C DIR/base
    git archive HEAD swgpu_tools | tar -x -C DIR/new
    cp benchmarks/align_hits_compare.py DIR/run.py
    .venv/bin/python benchmarks/align_hits_compare.py make-data DIR   # data.npz

(make-data needs bench_data/ as benchmarks/align_evalue_hits.py leaves it,
with --dump bench_data/base_u500.npz / base_b20.npz from a 129d1ee run.)
Then on the machine: ``python3 DIR/run.py all OUTDIR`` (versions: every
sub-folder of DIR holding swgpu_tools).  JSON lines: per version, list
(u500: 6,232 hits of the 500 UniProt queries, b20: 1,012 hits of the 20 bench
queries, both against bench20M at E <= 10), threads: best wall, CPU times,
whether the alignments equal 129d1ee's.  Other subcommands (run with
PYTHONPATH=DIR/<version>): ``child VERSION LIST THREADS REPEATS`` (one timing),
``gcups VERSION THREADS`` (the CPU search, 7 oracle queries against
uniprot20k; needs oracle_queries.fasta and uniprot20k.fasta.gz in DIR and
Biopython), ``cold VERSION`` (first calls with an empty cache).
"""

import hashlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    import numpy as np

    from swgpu_tools.sequences import EncodedSequences

    z = np.load(os.path.join(HERE, "data.npz"))
    return z, EncodedSequences, np


def child(which, lst, threads, repeats):
    import numba

    import swgpu_tools

    numba.set_num_threads(threads)
    try:
        from swgpu_tools.alignment import align_many
    except ImportError:
        from swgpu_tools.alignment import align_many
    z, Enc, np = load()
    p = "u" if lst == "u500" else "b"
    q = Enc(z[p + "_codes"], z[p + "_off"])
    d = Enc(z["d_codes"], z["d_off"])
    qi, si, m = z[p + "_qi"].astype(np.int64), z[p + "_si"].astype(np.int64), z["matrix"]
    t = time.perf_counter()
    align_many(q, d, qi[:64], si[:64], m, 11, 1, threads, backend="cpu")
    first = time.perf_counter() - t
    walls, cpus = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        alns = align_many(q, d, qi, si, m, 11, 1, threads, backend="cpu")
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    info = np.array(
        [(a.score, a.query_start, a.query_end, a.subject_start, a.subject_end) for a in alns],
        dtype=np.int64,
    )
    ops = np.frombuffer(b"".join(a.operations for a in alns), dtype=np.uint8)
    same = np.array_equal(info, z[p + "_info"]) and np.array_equal(ops, z[p + "_ops"])
    print(
        json.dumps(
            {
                "which": which,
                "list": lst,
                "threads": threads,
                "n": len(alns),
                "first_call_s": first,
                "wall_s": walls,
                "cpu_s": cpus,
                "best_wall_s": min(walls),
                "identical_to_base_dump": bool(same),
                "swgpu_tools": swgpu_tools.__file__,
                "numba": numba.__version__,
                "numpy": np.__version__,
            }
        ),
        flush=True,
    )


def make_data(folder):
    import numpy as np

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    from swgpu_tools.fasta import read_fasta
    from swgpu_tools.scoring import ScoringScheme

    s = ScoringScheme("BLOSUM62", 11, 1)
    bd = os.path.join(root, "bench_data")
    u = s.encode(read_fasta(os.path.join(bd, "uniprot_queries500.fasta")))
    b = s.encode(read_fasta(os.path.join(bd, "bench_queries.fasta")))
    d = s.encode(read_fasta(os.path.join(bd, "bench20M.fasta")))
    zu = np.load(os.path.join(bd, "base_u500.npz"))
    zb = np.load(os.path.join(bd, "base_b20.npz"))
    arrays = dict(
        matrix=s.matrix,
        u_codes=u.codes,
        u_off=u.offsets,
        b_codes=b.codes,
        b_off=b.offsets,
        d_codes=d.codes,
        d_off=d.offsets,
    )
    for p, z in (("u", zu), ("b", zb)):
        for key in ("qi", "si", "info", "ops_off", "ops"):
            arrays[f"{p}_{key}"] = z[key]
    np.savez_compressed(os.path.join(folder, "data.npz"), **arrays)


def cold(which):
    import numba

    z, Enc, np = load()
    t0 = time.perf_counter()
    try:
        from swgpu_tools.alignment import align_many
    except ImportError:
        from swgpu_tools.alignment import align_many
    from swgpu_tools.kernels import cpu

    imp = time.perf_counter() - t0
    q = Enc(z["u_codes"], z["u_off"])
    d = Enc(z["d_codes"][: z["d_off"][2000]], z["d_off"][:2001])
    three = Enc(q.codes[: q.offsets[3]], q.offsets[:4])
    t = time.perf_counter()
    hits = cpu.search(three, d, z["matrix"], 11, 1, 60)
    search_s = time.perf_counter() - t
    t = time.perf_counter()
    align_many(
        three, d, hits.query_index, hits.subject_index, z["matrix"], 11, 1, 16, backend="cpu"
    )
    align_s = time.perf_counter() - t
    res = {
        "which": which,
        "cold": True,
        "import_s": imp,
        "search_first_call_s": search_s,
        "align_many_hits_first_call_s": align_s,
        "numba": numba.__version__,
    }
    if which == "new":
        import swgpu_tools.alignment as A

        res["is_compiled_after"] = {"search": cpu.is_compiled(), "hits": A.is_compiled("hits")}
        t = time.perf_counter()
        res["precompile_search"] = cpu.precompile()
        res["precompile_align"] = A.precompile()
        res["precompile_rest_s"] = time.perf_counter() - t
    print(json.dumps(res), flush=True)


def gcups(which, threads):
    import numba

    import swgpu_tools
    from swgpu_tools.fasta import read_fasta
    from swgpu_tools.kernels import cpu
    from swgpu_tools.scoring import ScoringScheme

    numba.set_num_threads(threads)
    s = ScoringScheme("BLOSUM62", 11, 1)
    q = s.encode(read_fasta(os.path.join(HERE, "oracle_queries.fasta")))
    d = s.encode(read_fasta(os.path.join(HERE, "uniprot20k.fasta.gz")))
    one = type(q)(q.codes[: q.offsets[1]], q.offsets[:2].copy())
    cpu.search(one, d, s.matrix, 11, 1, 500)
    cells = int(q.offsets[-1]) * int(d.offsets[-1])
    times = []
    for _ in range(3):
        t = time.perf_counter()
        hits = cpu.search(q, d, s.matrix, 11, 1, 500)
        times.append(time.perf_counter() - t)
    digest = hashlib.sha1(hits.subject_index.tobytes() + hits.score.tobytes()).hexdigest()
    print(
        json.dumps(
            {
                "which": which,
                "gcups_threads": threads,
                "seconds": times,
                "gcups": cells / min(times) / 1e9,
                "hits_digest": digest,
                "swgpu_tools": swgpu_tools.__file__,
            }
        ),
        flush=True,
    )


def run_all(out):
    os.makedirs(out, exist_ok=True)
    py = sys.executable
    lines = []

    def go(args, which):
        env = dict(
            os.environ,
            PYTHONPATH=os.path.join(HERE, which) + ":" + os.environ.get("SITE", ""),
            NUMBA_CACHE_DIR=f"/tmp/nbcache-{which}",
            PYTHONDONTWRITEBYTECODE="1",
        )
        r = subprocess.run([py, __file__] + args, env=env, capture_output=True, text=True)
        text = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        if r.returncode != 0:
            text = json.dumps({"error": r.stderr[-2000:], "args": args})
        print(text, flush=True)
        lines.append(text)

    versions = sorted(
        v for v in os.listdir(HERE) if os.path.isdir(os.path.join(HERE, v, "swgpu_tools"))
    )
    for lst in ("b20", "u500"):
        for threads in (2, 16):
            for w in versions:
                go(["child", w, lst, str(threads), "2" if w == "base" else "3"], w)
    with open(os.path.join(out, "results.jsonl"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "all":
        run_all(sys.argv[2])
    elif sys.argv[1] == "make-data":
        make_data(sys.argv[2])
    elif sys.argv[1] == "gcups":
        gcups(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        cold(sys.argv[2])
