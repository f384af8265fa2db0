#!/bin/bash
# Device call (issue 14): gpu_bench.py with and without extra launch bounds
# ($SWGPU_LAUNCH_BOUNDS, see kernels/gpu/codegen.py) on equal-length databases.
#   bash benchmarks/gpu_bounds_ab_run.sh   (repo root; carry .whl-smk for biopython)
# Knobs: VARIANTS="none s16=128x4" (none: the defaults) MODE=s16 LENGTHS="256 1024" RESIDUES=5e7
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache
source benchmarks/device_wheels.sh
use_image_python || exit 1
LENGTHS=${LENGTHS:-256 1024}
# shellcheck disable=SC2086
python3 benchmarks/peak_db.py --lengths $LENGTHS --residues "${RESIDUES:-5e7}" --out-dir /tmp/peak \
  --queries /tmp/q20.fasta | tail -1  # and random queries of the 20 benchmark lengths
for L in $LENGTHS; do
  for v in ${VARIANTS:-none s16=128x4}; do
    b=$v; [ "$v" = none ] && b=
    SWGPU_LAUNCH_BOUNDS=$b timeout 150 python3 benchmarks/gpu_bench.py --db /tmp/peak/peak_$L.fasta \
      --queries /tmp/q20.fasta --repeat 2 --mode "${MODE:-s16}" --skip-start \
      --json "$OUT/ab_${L}_${v//[=x]/_}.json" > "$OUT/ab_${L}_${v//[=x]/_}.log" 2>&1
    echo "length $L, bounds '$v': rc $? $(grep '^TOTAL' "$OUT/ab_${L}_${v//[=x]/_}.log" | cut -c1-110)"
  done
done
