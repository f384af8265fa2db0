#!/bin/bash
# Chains of short queries (kernels/gpu/chains.py) against the code before them, one call
# of the device tool (repo root; carry .whl-smk, gpu_bench_data and .oldpkg):
#   OLD=.oldpkg bash benchmarks/gpu_chain_ab_run.sh
# .oldpkg/swgpu_tools: the package before the change; make it, and the other carried
# folders, with `OLD_COMMIT=75cba82 bash benchmarks/device_prep.sh` here first.  Each
# side gets its own kernel cache, compiled
# ahead by gpu_bench.py's search; both run the same benchmark script (this tree's).
# AB_DBS: gpu_bench.py --shard values (default "all,0/4": bench200M and a 50 M-residue
# shard); AB_COPIES: --copies (each query searched as that many copies of itself);
# AB_QUERIES: extra query files (the 500 UniProt queries by default).
# PHASE=GT (alone or with AB): this tree's GPU tests after the A/B.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PHASE=${PHASE:-AB}
has_phase() { [[ " $PHASE " == *" $1 "* ]]; }
export PYTHONUNBUFFERED=1 SWGPU_LOCK_DIR=/tmp/swgpu-locks
SITE=/tmp/site
# (the marker device_workflow_run.sh looks for, so that neither script installs twice)
if [ ! -f $SITE/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE \
    .whl-smk/*.whl || exit 1
  touch $SITE/.done
fi
mkdir -p /tmp/sc
cp benchmarks/device_sitecustomize.py /tmp/sc/sitecustomize.py
python3 -m compileall -q -j 0 $SITE swgpu_tools ${OLD:+$OLD} > /dev/null 2>&1
D=$PWD/gpu_bench_data
BD=/tmp/bench; mkdir -p $BD
log() { echo "$@" | tee -a "$OUT/log.txt"; }
log "commit ${SWGPU_COMMIT:-unknown}; $(date -u +%FT%TZ); phase $PHASE"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$OUT/log.txt"
( cd $BD && python3 $D/synth_db.py --template $D/uniprot20k.fasta.gz --residues 2e8 \
    --db bench_db.fasta --queries bench_queries.fasta > synth.log 2>&1 )
zcat $D/uniprot_queries500.fasta.gz > $BD/q500.fasta
bench() {  # $1: label, $2: package folder (PYTHONPATH), rest: gpu_bench.py arguments
  local label=$1 pkg=$2; shift 2
  log "== $label: gpu_bench.py $*"
  SWGPU_CACHE_DIR=/tmp/cache-$label PYTHONPATH=/tmp/sc:$SITE:$pkg \
    timeout 280 python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --skip-start \
    --json "$OUT/bench-$label-$(date +%s%N | tail -c 6).json" "$@" 2>&1 \
    | grep -v "^BQ\|^  BQ\|^sp|\|^tr|" | tail -${TAILN:-14} | tee -a "$OUT/log.txt"
}
if has_phase AB; then
  DBS=${AB_DBS:-all,0/4}
  for side in new old; do
    pkg=$PWD; [ $side = old ] && pkg=$PWD/${OLD:-.oldpkg}
    bench $side $pkg --queries $BD/bench_queries.fasta --repeat 2 --shard "$DBS" \
      --copies ${AB_COPIES:-4}
  done
  for side in new old; do
    pkg=$PWD; [ $side = old ] && pkg=$PWD/${OLD:-.oldpkg}
    TAILN=6 bench $side $pkg --queries ${AB_QUERIES:-$BD/q500.fasta} --repeat 2 --shard 0/4
  done
fi
if has_phase GT; then
  log "== GPU tests (this tree)"
  # tests/test_warm.py starts the `swgpu` command: a shim, as the package is not installed
  mkdir -p /tmp/bin
  printf '#!/bin/sh\nexec python3 -m swgpu_tools.cli "$@"\n' > /tmp/bin/swgpu
  chmod +x /tmp/bin/swgpu
  export PATH=/tmp/bin:$PATH
  SWGPU_CACHE_DIR=/tmp/cache-new PYTHONPATH=/tmp/sc:$SITE:$PWD SWGPU_TEST_DATA=$D \
    SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta \
    timeout ${GT_TIMEOUT:-400} python3 -m pytest -m gpu -q -p no:cacheprovider --durations=8 \
    tests 2>&1 | tail -16 | tee -a "$OUT/log.txt"
fi
