#!/bin/bash
# The package's qp2 path (swgpu_tools/kernels/gpu/qp2.py) on the GPU machine: its GPU tests
# and the s16 ones beside (-m "gpu and not slow"), then gpu_bench.py on bench200M with the
# 20 benchmark queries, qp2 on (SWGPU_QP2=1) and off (s16), same machine.
#   bash benchmarks/qp2_search_run.sh      (carry .whl-smk .whl-test gpu_bench_data)
# Knobs: TESTS (pytest paths; "" skips), MARK (pytest -m, "gpu and not slow"), TEST_LIMIT
# (s), REPEAT (gpu_bench --repeat, 2), QP2 ("1 0").
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache
source benchmarks/device_wheels.sh
use_image_python || exit 1
if ! python3 -c "import hypothesis" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-test/*.whl || exit 1
  export PYTHONPATH=/tmp/sc:/tmp/site:$PWD
fi
LOG=$OUT/log.txt
echo "commit ${SWGPU_COMMIT:-unknown}; $(date -u +%FT%TZ)" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
D=$PWD/gpu_bench_data; BD=/tmp/bench; mkdir -p $BD
GEN=''
if [ ! -f $BD/bench_db.fasta ]; then
  ( cd $BD && python3 $D/synth_db.py --template $D/uniprot20k.fasta.gz --residues 2e8 \
      --db bench_db.fasta --queries bench_queries.fasta > synth.log 2>&1 ) &
  GEN=$!
fi
TESTS=${TESTS-tests/test_gpu_qp2.py tests/test_kernels_gpu.py}
[ -n "$GEN" ] && wait "$GEN"
GEN=''
export SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta  # planted hits
if [ -n "$TESTS" ]; then
  # shellcheck disable=SC2086
  timeout ${TEST_LIMIT:-420} python3 -m pytest -m "${MARK:-gpu and not slow}" -q -p no:cacheprovider $TESTS > "$OUT/tests.log" 2>&1
  echo "tests rc=$?" | tee -a "$LOG"
  grep -E "passed|failed|error|Error" "$OUT/tests.log" | tail -12 | tee -a "$LOG"
fi
[ -n "$GEN" ] && wait "$GEN"
for q in ${QP2:-1 0}; do
  echo "== gpu_bench bench200M, 20 queries, SWGPU_QP2=$q" | tee -a "$LOG"
  SWGPU_QP2=$q timeout 240 python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta \
    --repeat "${REPEAT:-2}" --skip-start --json "$OUT/gpu_bench_qp2_$q.json" > "$OUT/gpu_bench_qp2_$q.log" 2>&1
  echo "rc=$?" | tee -a "$LOG"
  grep -E "^BQ|TOTAL|units|Error|error" "$OUT/gpu_bench_qp2_$q.log" | tail -24 | tee -a "$LOG"
done
