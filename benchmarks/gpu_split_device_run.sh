#!/bin/bash
# One single-GPU device session after the kernels/gpu package split (issue 13) and the
# query pipelining (issue 11.3).  Run from the repo root of the carried tree:
#   WHL=../../.whl bash benchmarks/gpu_split_device_run.sh
# Needs: $WHL with numba-cuda 0.30.4, numpy 2.4, biopython (and, where the image lacks
# them, cuda-bindings/cuda-core/cuda-pathfinder/nvidia-cuda-runtime, pytest) wheels;
# gpu_bench_data/ with synth_db.py, uniprot20k.fasta.gz, oracle_queries.fasta and
# oracle_ssearch36_uniprot20k.tsv.gz.
# 1. installs the wheels the image lacks (byte-compiled, as pip would);
# 2. fills the kernel cache (precompile, 8 processes) while bench200M is generated;
# 3. the generated-source manifest check (no GPU needed; the same test as CI);
# 4. GPU tests: pytest -m gpu tests/test_kernels_gpu.py tests/test_pairs_gpu.py;
# 5. gpu_bench.py on bench200M x 20 queries: whole database and shard 0/4 (~50 M residues),
#    one and two queries in flight (SWGPU_PIPELINE 1 = the schedule before pipelining);
# 6. with EXTRA=1: again with SWGPU_CRITICAL_SHARE=$SHARE (1.0) and depths $EXTRA_PIPE (2,3).
# MARK, TESTS: the pytest marker expression and files; PIPE: depths of step 5 (1,2);
# COPIES: also time each query as that many copies of itself (per-query throughput).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WHL=${WHL:-.whl}
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache SWGPU_LOCK_DIR=/tmp/swgpu-locks
ts() { date +%s.%N; }
el() { awk "BEGIN{printf \"%.1f\", $2 - $1}"; }
T0=$(ts)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/device.txt"
python3 -m pip list 2>/dev/null | grep -i -E "^(numba|numpy|cuda|nvidia|pytest|biopython)" > "$OUT/image_packages.txt"
source benchmarks/device_wheels.sh
install_wheels "$WHL" || exit 1
echo "installed: $need"
if ! python3 -c "from numba.cuda.cudadrv import nvvm; nvvm.NVVM()" 2>/dev/null; then
  for d in /usr/local/cuda /usr/local/cuda-13* /usr/local/cuda-12*; do
    [ -d "$d/nvvm" ] && export CUDA_HOME=$d && break
  done
  echo "NVVM not found by default; CUDA_HOME=${CUDA_HOME:-unset}"
fi
python3 -c "import numba, numba_cuda, numpy; from swgpu_tools.kernels import gpu; print('numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__); print('available', gpu.available())" 2>&1 | tee -a "$OUT/device.txt"
echo "set-up $(el $T0 $(ts)) s"

BD=/tmp/bench; mkdir -p $BD
( cd $BD && python3 $OLDPWD/gpu_bench_data/synth_db.py --template $OLDPWD/gpu_bench_data/uniprot20k.fasta.gz \
    --residues 2e8 --db bench_db.fasta --queries bench_queries.fasta > synth.log 2>&1 ) &
SYNTH=$!
t0=$(ts)
python3 -c "from swgpu_tools.kernels import gpu; print('precompile', gpu.precompile(jobs=8))" 2>&1 | tail -1
echo "precompile $(el $t0 $(ts)) s"
python3 -m pytest -q -p no:cacheprovider tests/test_gpu_codegen.py 2>&1 | tail -1
wait $SYNTH; tail -1 $BD/synth.log
export SWGPU_TEST_DATA=$PWD/gpu_bench_data SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta
echo "== GPU tests ($(el $T0 $(ts)) s)"
t0=$(ts)
timeout ${TEST_TIMEOUT:-300} python3 -m pytest -m "${MARK:-gpu}" -q -p no:cacheprovider -rA \
  ${TESTS:-tests/test_kernels_gpu.py tests/test_pairs_gpu.py} > "$OUT/tests.log" 2>&1
echo "tests rc=$? in $(el $t0 $(ts)) s"; grep -E "passed|failed|PASSED|FAILED|SKIPPED|Error" "$OUT/tests.log" | tail -16
echo "== bench200M, 20 queries ($(el $T0 $(ts)) s)"
timeout ${BENCH_TIMEOUT:-240} python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta \
  --repeat 2 --skip-start --pipeline ${PIPE:-1,2} --shard all,0/4 --copies ${COPIES:-0} --json "$OUT/bench.json" \
  > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -A8 "^summary" "$OUT/bench.log"
if [ "${EXTRA:-0}" = 1 ]; then
  echo "== critical share ${SHARE:-1.0}, depths ${EXTRA_PIPE:-2,3} ($(el $T0 $(ts)) s)"
  SWGPU_CRITICAL_SHARE=${SHARE:-1.0} timeout ${EXTRA_TIMEOUT:-150} python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta \
    --queries $BD/bench_queries.fasta --repeat 2 --skip-start --pipeline ${EXTRA_PIPE:-2,3} --shard all,0/4 \
    --json "$OUT/bench_extra.json" > "$OUT/bench_extra.log" 2>&1
  echo "extra rc=$?"; grep -A8 "^summary" "$OUT/bench_extra.log"
fi
echo "total $(el $T0 $(ts)) s"
