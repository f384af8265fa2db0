#!/bin/bash
# Device call (issue 11): where a scoring job's GPU start goes.
#   bash benchmarks/gpu_start_profile_run.sh   (repo root; carry .whl-smk for biopython)
# Precompiles (kernel cache), then benchmarks/gpu_start_profile.py in fresh processes:
# 3 x plain and 3 x typing-thread alternated, then one plain run under cProfile.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache SWGPU_LOCK_DIR=/tmp/swgpu-locks
source benchmarks/device_wheels.sh
use_image_python || exit 1
nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader
t0=$(date +%s)
python3 -m swgpu_tools.cli backend --precompile 2>&1 | tail -2
echo "precompile $(( $(date +%s) - t0 )) s"
for i in ${REPEATS:-1 2 3}; do
  for v in ${VARIANTS:-plain typing-thread}; do python3 benchmarks/gpu_start_profile.py --variant $v; done
done
python3 benchmarks/gpu_start_profile.py --profile > "$OUT/start_profile.txt" 2>&1
head -75 "$OUT/start_profile.txt" | cut -c1-170
