#!/bin/bash
# Device session for tuning: per-partition times of shape variants + ncu of one query's kernels.
#   bash benchmarks/gpu_device_profile.sh "--variant a=... --variant b=..." [ncu]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
BD=/tmp/bench; mkdir -p $BD
[ -s $BD/bench_db.fasta ] || ( cd $BD && python3 $OLDPWD/gpu_bench_data/synth_db.py --template $OLDPWD/gpu_bench_data/uniprot20k.fasta.gz --residues 2e8 --db bench_db.fasta --queries bench_queries.fasta ) | tail -1
python3 benchmarks/gpu_profile.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta $1 2>&1 | grep -v Warning | grep -v "warn(" | tee "$OUT/profile.log"
if [ "${2:-}" = ncu ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
  $NCU --profile-from-start off --clock-control none -k regex:kernel_py \
     --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
     --section SchedulerStats --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis_Tables \
     --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_shared_ld.sum,sm__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active \
     python3 benchmarks/gpu_profile.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta --pick 19 --ncu > "$OUT/ncu.txt" 2>&1
  grep -E "kernel_py|bank_conflicts|wavefronts_mem_shared|op_shared_ld|inst_executed.sum|cycles_elapsed.avg|issue_active|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Executed Ipc A|Block Limit" "$OUT/ncu.txt" | head -120
fi
