#!/bin/bash
# Device call (issue 14): why the h16 (binary16, no-DPX) multi-pass kernels fall behind s16 on
# 2,048-aa subjects while the single-pass ones keep up.  Per-partition kernel times
# (gpu_profile.py) of s16 and h16 on equal-length databases of 1,024 and 2,048 aa
# (benchmarks/peak_db.py), then ncu of the first kernels of one query in each mode.
#   bash benchmarks/gpu_h16_profile_run.sh   (repo root; carry .whl-smk for biopython)
# At 2,048 aa also the multi-pass shapes one at a time (gpu_profile.py --variant).
# Knobs: LENGTHS="1024 2048" RESIDUES=5e7 PICK=0,12 MODES="s16 h16" NCU_LENGTH=2048
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache
source benchmarks/device_wheels.sh
use_image_python || exit 1
LENGTHS=${LENGTHS:-1024 2048}
MODES=${MODES:-s16 h16}
PICK=${PICK:-0,12}
NCU_LENGTH=${NCU_LENGTH:-2048}
Q=/tmp/cudasw_queries.fasta  # random queries of the 20 benchmark lengths
# shellcheck disable=SC2086
python3 benchmarks/peak_db.py --lengths $LENGTHS --residues "${RESIDUES:-5e7}" --out-dir /tmp/peak \
  --queries $Q | tail -2
python3 -c "
from swgpu_tools.kernels import gpu
print(gpu.precompile(modes=tuple('$MODES'.split()) + ('s32',), jobs=8))" 2>&1 | tail -1
for L in $LENGTHS; do
  for m in $MODES; do
    var=()
    [ "$L" = 2048 ] && var=(--variant default= --variant m8="8x32;8x32" --variant m16="16x32;16x32"
      --variant m32="32x32;32x32")
    timeout 150 python3 benchmarks/gpu_profile.py --db /tmp/peak/peak_$L.fasta --queries $Q --pick "$PICK" \
      --mode "$m" "${var[@]}" 2>&1 | grep -v Warning | grep -v "warn(" > "$OUT/profile_${L}_$m.log"
    echo "== length $L, $m"; grep -E "^ +$m|^query|^== variant|^[a-z0-9]+ +Q" "$OUT/profile_${L}_$m.log" | head -60
  done
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for m in $MODES; do
  timeout 150 "$NCU" --profile-from-start off --clock-control none -k regex:kernel_py -c 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
    --section SchedulerStats --section WarpStateStats --section Occupancy \
    python3 benchmarks/gpu_profile.py --db /tmp/peak/peak_$NCU_LENGTH.fasta --queries $Q \
    --pick "${PICK##*,}" --mode "$m" --ncu > "$OUT/ncu_${NCU_LENGTH}_$m.txt" 2>&1
  echo "== ncu $m (length $NCU_LENGTH) rc=$?"
  grep -E "kernel_py|Block Size|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc A|Issued Warp|No Eligible|Warp Cycles Per Issued|Compute \(SM\) Throughput|Duration|One or More Eligible" \
    "$OUT/ncu_${NCU_LENGTH}_$m.txt" | head -40
  grep -E -A3 "Pipe|pipe" "$OUT/ncu_${NCU_LENGTH}_$m.txt" | head -30
done
