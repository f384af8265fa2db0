#!/bin/bash
# Device call (issue 14): per-partition kernel times of two modes (default s16, s32) (gpu_profile.py,
# queries 0 and 19 of bench200M) and ncu of the first 4 kernels of query 19 in each mode.
# Run 16 of RESULTS-gpu.md ran it at commit 4b0bcaa (mode p16 removed since: MODES="s16 s32"
# now).
#   bash benchmarks/gpu_kernel_profile_run.sh   (carry .whl, gpu_bench_data)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m compileall -q -j 0 /tmp/site swgpu_tools > /dev/null
export PYTHONPATH=/tmp/site:$PWD
BD=/tmp/bench; mkdir -p $BD
( cd $BD && python3 $OLDPWD/gpu_bench_data/synth_db.py --template $OLDPWD/gpu_bench_data/uniprot20k.fasta.gz --residues 2e8 --db bench_db.fasta --queries bench_queries.fasta ) | tail -1
for m in ${MODES:-s16 s32}; do
  timeout 150 python3 benchmarks/gpu_profile.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta --pick 0,19 --mode $m 2>&1 | grep -v Warning | grep -v "warn(" > "$OUT/profile_$m.log"
  echo "== $m"; tail -45 "$OUT/profile_$m.log"
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for m in ${MODES:-s16 s32}; do
timeout 200 $NCU --profile-from-start off --clock-control none -k regex:kernel_py -c 4 \
   --section SpeedOfLight --section InstructionStats --section SchedulerStats --section WarpStateStats --section Occupancy \
   --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_shared_ld.sum,sm__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio,smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio,smsp__average_warp_latency_issue_stalled_not_selected.ratio,smsp__average_warp_latency_issue_stalled_selected.ratio,smsp__average_warp_latency_issue_stalled_dispatch_stall.ratio,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active \
   python3 benchmarks/gpu_profile.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta --pick 19 --mode $m --ncu > "$OUT/ncu_$m.txt" 2>&1
echo "== ncu $m rc=$?"
grep -E "kernel_py|Block Size|Grid Size|bank_conflicts|wavefronts_mem_shared|op_shared_ld|inst_executed.sum|cycles_elapsed.avg|issue_active|stalled|pipe_alu|pipe_fma|pipe_lsu|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc A|Registers Per|Dynamic Shared" "$OUT/ncu_$m.txt" | head -60
done
