#!/bin/bash
# Start-up of the real score_shard step on a GPU (issue 3, point 7):
#   bash benchmarks/gpu_startup_run.sh        (repo root; carry .whl and gpu_bench_data)
# 1. raw costs, one child each: python + imports, CUDA context alone;
# 2. cold: empty kernel cache, `swgpu score-shard` (uniprot20k, 1 shard, 7 oracle queries);
# 3. warm: the same command 4 more times, wall clock from the shell and the step's own
#    "process start to first hits" line (it reads /proc/self/stat) and start-up steps;
# 4. GPU tests (pytest -m gpu tests/test_kernels_gpu.py tests/test_pairs_gpu.py);
# 5. with BENCH=1: bench200M made by synth_db.py meanwhile (the planted-hits test needs it), and
#    the 20-query benchmark (gpu_bench.py).  COLD=precompile: fill the cache with
#    `precompile(jobs=8)` instead of timing a cold step; SKIP_TESTS=1: stop after the start-up runs.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache SWGPU_LOCK_DIR=/tmp/swgpu-locks
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
  # a plain `pip install` byte-compiles what it installs; the carried wheels were installed
  # with --no-compile, and this image does not write .pyc files on import
  # (PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}): compile them once, as pip would
  [ "${SKIP_COMPILEALL:-0}" = 1 ] || python3 -m compileall -q -j 0 /tmp/site swgpu_tools > /dev/null
else
  export PYTHONPATH=$PWD
fi
ts() { date +%s.%N; }
el() { awk "BEGIN{printf \"%.2f\", $2 - $1}"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,persistence_mode --format=csv | tee "$OUT/device.txt"
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}"
echo "== raw costs"
for i in 1 2; do
  python3 - <<'EOF'
import time
t0 = time.perf_counter()
import numpy  # noqa: F401
t1 = time.perf_counter()
import numba  # noqa: F401
t2 = time.perf_counter()
from numba import cuda
t3 = time.perf_counter()
cuda.current_context()
t4 = time.perf_counter()
import pandas  # noqa: F401
t5 = time.perf_counter()
print(f"import numpy {t1-t0:.2f} s, numba {t2-t1:.2f} s, numba.cuda {t3-t2:.2f} s; "
      f"CUDA context {t4-t3:.2f} s; import pandas {t5-t4:.2f} s")
EOF
done
D=/tmp/startup; mkdir -p $D
python3 -m swgpu_tools.cli shard gpu_bench_data/uniprot20k.fasta.gz --shards 1 --out-dir $D/s1 2>&1 | tail -1
Q=gpu_bench_data/oracle_queries.fasta
rm -rf "$SWGPU_CACHE_DIR"
RUNS="cold warm1 warm2 warm3 warm4"
if [ "${COLD:-step}" = precompile ]; then  # fill the cache with all kernels, 8 processes
  t0=$(ts); python3 -c "from swgpu_tools.kernels import gpu; gpu.precompile(jobs=8)" > /dev/null 2>&1
  echo "precompile(jobs=8): $(el $t0 $(ts)) s"; RUNS="warm1 warm2 warm3 warm4 warm5"
fi
for run in $RUNS; do
  [ $run = warm1 ] && [ "${SKIP_COMPILEALL:-0}" != 1 ] && python3 -m compileall -q "$SWGPU_CACHE_DIR" > /dev/null
  t0=$(ts)
  python3 -m swgpu_tools.cli score-shard $D/s1/shard-0000.swdb --queries $Q --top-k 500 --backend gpu \
    --out $D/h_$run.tsv 2> "$OUT/score_shard_$run.log"
  rc=$?; t1=$(ts)
  echo "$run: rc=$rc wall $(el $t0 $t1) s"
  grep -E "using GPU|first hits|scored" "$OUT/score_shard_$run.log" | sed -e 's/^/   /'
done
set -- $RUNS; first=$1
for run in $RUNS; do cmp -s $D/h_$first.tsv $D/h_$run.tsv || echo "DIFFERENT: $run"; done
echo "hits compared across runs: $(wc -l < $D/h_$first.tsv) lines"
[ "${SKIP_TESTS:-0}" = 1 ] && exit 0
BD=/tmp/bench
if [ "${BENCH:-0}" = 1 ]; then  # bench200M for the GPU tests' planted hits and the benchmark
  mkdir -p $BD
  ( cd $BD && python3 $OLDPWD/gpu_bench_data/synth_db.py --template $OLDPWD/gpu_bench_data/uniprot20k.fasta.gz \
      --residues 2e8 --db bench_db.fasta --queries bench_queries.fasta > synth.log 2>&1 ) &
  SYNTH=$!
fi
echo "== GPU tests"
export SWGPU_TEST_DATA=$PWD/gpu_bench_data
if [ "${BENCH:-0}" = 1 ]; then
  wait $SYNTH; tail -1 $BD/synth.log
  export SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta
fi
python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_kernels_gpu.py tests/test_pairs_gpu.py 2>&1 \
  | tee "$OUT/tests.log" | tail -6
if [ "${BENCH:-0}" = 1 ]; then
  echo "== bench200M, 20 queries (gpu_bench.py --repeat 2 --skip-start)"
  python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta --repeat 2 \
    --skip-start --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -iv "^BQ" | tail -12
fi
