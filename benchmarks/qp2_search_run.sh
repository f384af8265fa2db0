#!/bin/bash
# The package's qp2 path (swgpu_tools/kernels/gpu/qp2.py) on the GPU machine: its GPU tests
# and the s16 ones beside (-m "gpu and not slow"), then gpu_bench.py on bench200M with the
# 20 benchmark queries, qp2 on (SWGPU_QP2=1) and off (s16), same machine.
#   bash benchmarks/qp2_search_run.sh      (carry .whl-smk .whl-test gpu_bench_data)
# Knobs: TESTS (pytest paths; "" skips), MARK (pytest -m, "gpu and not slow"), TEST_LIMIT
# (s), REPEAT (gpu_bench --repeat, 2), QP2 ("1 0"), NCU=1 (NCU_SKIP): ncu of one qp2 launch.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache
source benchmarks/device_wheels.sh
use_image_python || exit 1
if ! python3 -c "import hypothesis" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-test/*.whl || exit 1
  export PYTHONPATH=/tmp/sc:/tmp/site:$PWD
fi
# the swgpu command (tests/test_warm.py starts the warm process through it)
mkdir -p /tmp/bin
printf '#!/bin/sh\nexec python3 -m swgpu_tools.cli "$@"\n' > /tmp/bin/swgpu
chmod +x /tmp/bin/swgpu
export PATH=/tmp/bin:$PATH
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
# NCU=1: ncu on one launch of the package's qp2 kernel (a tile of the 20 benchmark queries
# on bench200M, after the first NCU_SKIP launches; numba's mangled names carry no module
# name; check the profiled launch's grid (SMs x 384) and 16 arguments): pipes, stalls
if [ "${NCU:-0}" = 1 ]; then
  NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  M=smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg,sm__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.avg.per_cycle_active
  for s in short_scoreboard long_scoreboard wait math_pipe_throttle not_selected selected dispatch_stall no_instruction barrier mio_throttle lg_throttle branch_resolving; do
    M=$M,smsp__average_warp_latency_issue_stalled_$s.ratio
  done
  M=$M,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
  SWGPU_QP2=1 timeout 300 $NCUB --clock-control none -k regex:kernel_py --launch-skip "${NCU_SKIP:-10}" -c 1 \
    --section Occupancy --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
    --print-details all --metrics "$M" \
    python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta --repeat 1 --skip-start \
    > "$OUT/ncu_qp2_package.txt" 2>&1
  echo "== ncu qp2 (package) rc=$?" | tee -a "$LOG"
  grep -vE '^\s*$|^BQ' "$OUT/ncu_qp2_package.txt" | grep -E 'qp2|%|ratio|cycles|inst|Inst|Pipe|pipe|Registers|Occupancy|Error|ERR|IPC|Issue|No kernels' | head -90 | tee -a "$LOG"
fi
