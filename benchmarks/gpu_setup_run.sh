#!/bin/bash
# One single-GPU device session for set-up cost, streamed batches and the real step:
#   bash benchmarks/gpu_setup_run.sh            (repo root; carry .whl and gpu_bench_data)
# 1. fills the kernel cache (gpu.precompile) while bench200M is generated;
# 2. GPU tests (pytest -m gpu);
# 3. benchmark (resident database, gpu_bench.py --skip-start);
# 4. resident vs batched (forced budget $BUDGET bytes) on bench200M: GCUPS, identical top-k;
# 5. score-shard on all of bench200M (1 shard, 20 queries), twice, wall clock + log;
# 6. warm start on uniprot20k (gpu_bench.py --child-start) and import times.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BUDGET=${BUDGET:-100e6}
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache SWGPU_LOCK_DIR=/tmp/swgpu-locks SWGPU_GPU_TIMINGS=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
ts() { date +%s.%N; }
el() { awk "BEGIN{printf \"%.2f\", $2 - $1}"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/device.txt"
BD=/tmp/bench; mkdir -p $BD
( python3 -c "from swgpu_tools.kernels import gpu; print('precompile', gpu.precompile(jobs=8))" > $OUT/precompile.log 2>&1 ) &
( cd $BD && python3 $OLDPWD/gpu_bench_data/synth_db.py --template $OLDPWD/gpu_bench_data/uniprot20k.fasta.gz \
    --residues 2e8 --db bench_db.fasta --queries bench_queries.fasta ) | tail -1
wait; tail -1 $OUT/precompile.log
export SWGPU_TEST_DATA=$PWD/gpu_bench_data SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta
Q=$BD/bench_queries.fasta
echo "== tests"; python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_kernels_gpu.py 2>&1 | tee "$OUT/tests.log" | tail -8
echo "== bench (resident)"
python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $Q --repeat 2 --skip-start \
  --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" | grep -iv "^BQ" | tail -12
echo "== resident vs batched (budget $BUDGET)"
python3 benchmarks/gpu_batched_bench.py --db $BD/bench_db.fasta --queries $Q --budget $BUDGET \
  --json "$OUT/batched.json" 2>&1 | tee "$OUT/batched.log" | tail -6
echo "== score-shard"
python3 -m swgpu_tools.cli shard $BD/bench_db.fasta --shards 1 --out-dir $BD/s1 2>&1 | tail -1
# runs 1, 2: resident; run 3: streamed in batches (SWGPU_GPU_MEMORY_BYTES=$BUDGET), table compared
for run in 1 2 3; do
  t0=$(ts)
  [ $run = 3 ] && export SWGPU_GPU_MEMORY_BYTES=$BUDGET
  python3 -m swgpu_tools.cli score-shard $BD/s1/shard-0000.swdb --queries $Q --top-k 500 --backend gpu \
    --device auto --out $BD/h1_$run.tsv 2> "$OUT/score_shard_$run.log"
  rc=$?; t1=$(ts); echo "score-shard run $run: rc=$rc wall $(el $t0 $t1) s"
  sed -e 's/^/   /' "$OUT/score_shard_$run.log" | grep -v "queries \(1[0-9]\|[2-9]\)/20 " | tail -8
done
unset SWGPU_GPU_MEMORY_BYTES
cmp $BD/h1_1.tsv $BD/h1_3.tsv && echo "score-shard hits: resident == batched ($(wc -l < $BD/h1_1.tsv) lines)"
echo "== warm start (uniprot20k, first query)"
for run in 1 2; do
  python3 benchmarks/gpu_bench.py --child-start --db gpu_bench_data/uniprot20k.fasta.gz --queries $Q --top-k 10 2>&1 | tail -1
done
python3 -X importtime -c "import swgpu_tools.pipeline, swgpu_tools.kernels.gpu" 2> $OUT/importtime.txt
sort -t'|' -k2 -n $OUT/importtime.txt | tail -6
