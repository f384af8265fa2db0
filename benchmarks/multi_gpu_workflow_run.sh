#!/bin/bash
# Snakemake itself on a multi-GPU machine: a plain `snakemake --cores 32` runs
# one scoring job per GPU, each on its own GPU.
#
# Usage (repo root, on a machine with 2+ GPUs; carry .whl, .whl-smk and
# gpu_bench_data):
#   bash benchmarks/multi_gpu_workflow_run.sh
# .whl holds numpy/numba-cuda/biopython wheels, .whl-smk snakemake 9.27 and the
# dependencies the device image lacks (no pulp: Snakemake falls back to its
# greedy scheduler).  Both are installed into /tmp/site.
# Rehearsal without GPUs (what the script was checked with): a Python 3.12
# first on PATH, and a fake nvidia-smi listing two GPUs, e.g.
#   PATH=/tmp/fakesmi:/tmp/py312/bin:$PATH bash benchmarks/multi_gpu_workflow_run.sh
# (the jobs are then planned as GPU jobs and score on the CPU).
#
# 1. installs the wheels, makes a `swgpu` command, prints nvidia-smi;
# 2. fills the GPU kernel cache once (gpu.precompile), as on a used machine;
# 3. run A: the workflow on uniprot20k (20,000 UniProt entries) in 8 shards x
#    the 7 oracle queries, backend auto, `snakemake --cores 32` and nothing
#    else; nvidia-smi's compute apps are sampled every 0.5 s meanwhile;
# 4. run B: the same in a new folder with `--resources gpu=1`;
# 5. report: per scoring job its GPU (UUID from its log), start and end (from
#    its log's mtime and its benchmark's wall seconds), the largest number of
#    jobs running at once and on how many distinct GPUs, for A and B; whether
#    A's and B's hits.tsv and alignments.tsv are identical; every hit's score
#    against SSEARCH's (gpu_bench_data/oracle_ssearch36_uniprot20k.tsv.gz).
# Everything goes to $OUT (summary.txt is the result).
set -u
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
REPO=$PWD
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=${SWGPU_CACHE_DIR:-/tmp/swgpu-cache}
export SWGPU_LOCK_DIR=/tmp/swgpu-locks-$$
WF=${WF:-/tmp/swgpu-wf}; rm -rf "$WF"; mkdir -p "$WF"
SITE=${SITE:-/tmp/site}
if [ -d .whl-smk ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl .whl-smk/*.whl || exit 1
  # as a plain `pip install` would: byte-compile (the image sets PYTHONDONTWRITEBYTECODE=1,
  # so without this every process compiles numba-cuda's sources again, ~1.7 s)
  python3 -m compileall -q -j 0 "$SITE" swgpu_tools > /dev/null
  export PYTHONPATH=$SITE:$PWD PATH=$SITE/bin:$PATH
fi
if ! command -v swgpu > /dev/null; then  # the rules call `swgpu`
  mkdir -p "$SITE/bin"
  # the console script as pip writes it (swgpu_tools.console:entry): 'python3 -m
  # swgpu_tools.cli' would import the command-line package first, which a job's
  # client, handing its command to the warm process, does not need; and only such a
  # script lets the warm process put its job command first (warm.launch.plain_console_script)
  printf '#!%s\nimport sys\nfrom swgpu_tools.console import entry\nif __name__ == "__main__":\n    sys.exit(entry())\n' "$(command -v python3)" > "$SITE/bin/swgpu"
  chmod +x "$SITE/bin/swgpu"
  export PATH=$SITE/bin:$PATH PYTHONPATH=${PYTHONPATH:-$PWD}
fi
{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  python3 --version; snakemake --version | sed 's/^/snakemake /'; command -v snakemake swgpu
  nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv
  nvidia-smi -L
  echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}  nproc=$(nproc)"
} 2>&1 | tee "$OUT/device.txt"

t0=$(date +%s.%N)
python3 -c "
from swgpu_tools.kernels import gpu
ok, why = gpu.available(); print('GPU backend:', ok, why)
print('precompile', gpu.precompile(jobs=8) if ok else 'skipped')" 2>&1 | tail -3 | tee "$OUT/precompile.txt"
echo "precompile step $(awk "BEGIN{print $(date +%s.%N) - $t0}") s" | tee -a "$OUT/precompile.txt"

write_config() {  # folder
  mkdir -p "$1"
  cat > "$1/config.yaml" <<YAML
database: $REPO/gpu_bench_data/uniprot20k.fasta.gz
queries: $REPO/gpu_bench_data/oracle_queries.fasta
matrix: BLOSUM62
gap_open: 11
gap_extend: 1
top_k: 500
max_evalue: 10.0
shards: 8
backend: auto
threads: 4
YAML
}

sample_gpus() {  # file: nvidia-smi compute apps every 0.5 s until killed
  while true; do
    nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader 2>/dev/null \
      | sed "s/^/$(date +%s.%N), /"
    sleep 0.5
  done > "$1"
}

run_workflow() {  # name, extra snakemake args...
  local name=$1; shift
  local dir=$WF/$name
  write_config "$dir"
  sample_gpus "$OUT/apps_$name.csv" & local sampler=$!
  local s=$(date +%s.%N)
  ( set -x; snakemake -s "$REPO/Snakefile" --directory "$dir" --configfile "$dir/config.yaml" \
      --cores 32 "$@" ) > "$OUT/snakemake_$name.log" 2>&1
  local rc=$?
  local e=$(date +%s.%N)
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
  echo "run $name: snakemake --cores 32 $*: rc=$rc, wall $(awk "BEGIN{print $e - $s}") s"
  grep -h "^swgpu: \|Falling back\|Provided resources" "$OUT/snakemake_$name.log"
  mkdir -p "$OUT/$name"
  cp -r "$dir/results/logs" "$dir/results/benchmarks" "$OUT/$name/" 2>/dev/null
  cp "$dir/results/hits.tsv" "$dir/results/alignments.tsv" "$OUT/$name/" 2>/dev/null
  [ $rc -eq 0 ] || tail -40 "$OUT/snakemake_$name.log"
}

{
  run_workflow A
  run_workflow B --resources gpu=1
} 2>&1 | tee "$OUT/runs.txt"

python3 - "$WF" "$REPO/gpu_bench_data/oracle_ssearch36_uniprot20k.tsv.gz" <<'PY' 2>&1 | tee "$OUT/summary.txt"
import csv, gzip, os, re, sys
from pathlib import Path

wf, oracle_path = Path(sys.argv[1]), sys.argv[2]


def jobs(run):
    out = []
    for log in sorted((wf / run / "results/logs/score_shard").glob("shard-*.log")):
        bench = wf / run / "results/benchmarks/score_shard" / (log.stem + ".tsv")
        text = log.read_text(errors="replace")
        m = re.search(r"using GPU (\d+)(?: \(([^)]+)\))?", text)
        b = re.search(r"\] backend: (\w+)", text)
        with open(bench) as fh:
            wall = float(next(csv.DictReader(fh, delimiter="\t"))["s"])
        end = log.stat().st_mtime
        out.append(dict(shard=log.stem, gpu=m.group(2) or m.group(1) if m else "-",
                        backend=b.group(1) if b else "?", start=end - wall, end=end, wall=wall))
    return out


def most_at_once(js):
    """Most jobs running at one job's midpoint (robust to the sub-second error of
    the start and end times), and which."""
    best = []
    for j in js:
        mid = (j["start"] + j["end"]) / 2
        now = sorted(k["shard"] for k in js if k["start"] < mid < k["end"])
        if len(now) > len(best):
            best = now
    return len(best), best


result = {}
for run in ("A", "B"):
    js = jobs(run)
    if not js:
        print(f"run {run}: no scoring logs"); continue
    t0 = min(j["start"] for j in js)
    print(f"run {run}: score_shard jobs (seconds from the first job's start)")
    for j in js:
        print(f"  {j['shard']}  {j['backend']:3}  {j['gpu']:42}  {j['start'] - t0:7.2f} -> "
              f"{j['end'] - t0:7.2f}  ({j['wall']:.2f} s)")
    n, which = most_at_once(js)
    by_shard = {j["shard"]: j for j in js}
    gpus = {by_shard[s]["gpu"] for s in which}
    uuids = sorted({j["gpu"] for j in js})
    span = max(j["end"] for j in js) - t0
    print(f"  most scoring jobs at once: {n} ({', '.join(which)}) on {len(gpus)} distinct GPU(s);"
          f" GPUs used over the run: {len(uuids)}; scoring span {span:.1f} s")
    result[run] = (n, len(gpus), len(uuids))
    apps = Path(os.environ.get("OUT", "/tmp/out")) / f"apps_{run}.csv"
    if apps.exists():
        per_t = {}
        for line in apps.read_text().splitlines():
            fields = [x.strip() for x in line.split(",")]
            if len(fields) >= 3 and fields[1].startswith("GPU-"):
                per_t.setdefault(fields[0], set()).add(fields[1])
        most = max((len(v) for v in per_t.values()), default=0)
        print(f"  nvidia-smi samples: {len(per_t)} with compute apps; most GPUs busy in one sample: {most}")

same = all((wf / "A/results" / f).read_bytes() == (wf / "B/results" / f).read_bytes()
           for f in ("hits.tsv", "alignments.tsv"))
print(f"A (one job per GPU) vs B (--resources gpu=1): hits.tsv and alignments.tsv "
      f"{'IDENTICAL' if same else 'DIFFER'}")

oracle = {}
with gzip.open(oracle_path, "rt") as fh:
    next(fh)
    for line in fh:  # query target slen sw_score ...; a few rows are malformed: skipped
        f = line.rstrip("\n").split("\t")
        if len(f) == 10 and f[3].isdigit() and f[0].count("|") == 2 and f[1].count("|") == 2:
            oracle[(f[0].split("|")[1], f[1].split("|")[1])] = int(f[3])
hits = list(csv.DictReader(open(wf / "A/results/hits.tsv"), delimiter="\t"))
known = [h for h in hits if (h["qseqid"], h["sseqid"]) in oracle]
bad = [h for h in known if oracle[(h["qseqid"], h["sseqid"])] != int(h["score"])]
print(f"hits of A vs SSEARCH (oracle): {len(hits)} hits, {len(known)} in the oracle,"
      f" {len(known) - len(bad)} equal, {len(bad)} differ")
for h in bad[:5]:
    print("  differs:", h["qseqid"], h["sseqid"], h["score"], oracle.get((h["qseqid"], h["sseqid"])))
a, b = result.get("A"), result.get("B")
ok = bool(a and b and same and known and not bad and a[0] >= 2 and a[1] >= 2 and b[0] == 1)
print("RESULT:", "PASS" if ok else "FAIL",
      "(A: >= 2 scoring jobs at once on distinct GPUs; B: one at a time; tables identical;"
      " scores equal SSEARCH's)")
PY
