#!/bin/bash
# One device call comparing scoring-kernel variants (issue 14).  From the repo root of the
# carried tree (carry .whl and gpu_bench_data):
#   bash benchmarks/gpu_kernel_variants_run.sh
# 1. installs the wheels the image lacks (byte-compiled, as pip would), generates bench200M;
# 2. GPU tests (MARK, default "gpu and not slow");
# 3. gpu_bench.py on bench200M x 20 queries, one process, the modes in MODES compared
#    (default "s16,s32"); top hits checked equal across modes.
# Runs 15-16 of RESULTS-gpu.md used it at commits f2f48ea / 4b0bcaa, where the experimental
# modes p16, w16 and the ':echain' / ':minbN' variants existed (removed afterwards: slower).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WHL=${WHL:-.whl}
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache SWGPU_LOCK_DIR=/tmp/swgpu-locks
ts() { date +%s.%N; }
el() { awk "BEGIN{printf \"%.1f\", $2 - $1}"; }
T0=$(ts)
echo "commit ${SWGPU_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/device.txt"
source benchmarks/device_wheels.sh
install_wheels "$WHL" || exit 1
python3 -c "import numba, numba_cuda, numpy; print('numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__)" | tee -a "$OUT/device.txt"
BD=/tmp/bench; mkdir -p $BD
( cd $BD && python3 $OLDPWD/gpu_bench_data/synth_db.py --template $OLDPWD/gpu_bench_data/uniprot20k.fasta.gz \
    --residues 2e8 --db bench_db.fasta --queries bench_queries.fasta > synth.log 2>&1 ) &
SYNTH=$!
echo "set-up $(el $T0 $(ts)) s"
if [ "${TESTS:-1}" = 1 ]; then
  wait $SYNTH
  export SWGPU_TEST_DATA=$PWD/gpu_bench_data SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta
  t0=$(ts)
  timeout ${TEST_TIMEOUT:-300} python3 -m pytest -m "${MARK:-gpu and not slow}" -q -p no:cacheprovider -rA \
    tests/test_kernels_gpu.py > "$OUT/tests.log" 2>&1
  echo "tests rc=$? in $(el $t0 $(ts)) s"; grep -E "passed|failed|PASSED|FAILED|SKIPPED|Error|assert" "$OUT/tests.log" | tail -20
fi
wait $SYNTH 2>/dev/null; tail -1 $BD/synth.log
echo "== bench200M, 20 queries, modes ${MODES:-s16,s32} ($(el $T0 $(ts)) s)"
timeout ${BENCH_TIMEOUT:-400} python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta \
  --repeat ${REPEAT:-2} --skip-start --mode ${MODES:-s16,s32} --json "$OUT/bench.json" \
  > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -E "^=== |^TOTAL|^!!" "$OUT/bench.log"; grep -A12 "^summary" "$OUT/bench.log"
echo "total $(el $T0 $(ts)) s"
