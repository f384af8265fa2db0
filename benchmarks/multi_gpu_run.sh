#!/bin/bash
# Several GPUs: the real score_shard step on bench200M, one job per GPU.
# Usage (repo root, on a GPU machine; carry .whl and gpu_bench_data as in gpu_device_run.sh):
#   bash benchmarks/multi_gpu_run.sh
# 1. shards bench200M in 2 shards and in 1 shard (`swgpu shard`);
# 2. fills the kernel cache once (gpu.precompile);
# 3. runs the 20 bench queries through `swgpu score-shard --device auto`:
#    the 1-shard database on one GPU, then the 2 shards as two concurrent jobs
#    (each locks its own GPU by UUID), wall clock of each;
# 4. merges both runs with `swgpu merge` and checks the tables are identical.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache SWGPU_LOCK_DIR=/tmp/swgpu-locks
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
sw="python3 -m swgpu_tools.cli"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv | tee "$OUT/device.txt"
BD=/tmp/bench; mkdir -p $BD
( cd $BD && python3 $OLDPWD/gpu_bench_data/synth_db.py --template $OLDPWD/gpu_bench_data/uniprot20k.fasta.gz \
    --residues 2e8 --db bench_db.fasta --queries bench_queries.fasta ) | tail -1
Q=$BD/bench_queries.fasta
$sw shard $BD/bench_db.fasta --shards 1 --out-dir $BD/s1 2>&1 | tail -1
$sw shard $BD/bench_db.fasta --shards 2 --out-dir $BD/s2 2>&1 | tail -1
python3 -c "from swgpu_tools.kernels import gpu; print('precompile', gpu.precompile(jobs=8))"
opts="--queries $Q --top-k 500 --backend gpu --device auto"
t0=$(date +%s.%N)
$sw score-shard $BD/s1/shard-0000.swdb $opts --out $BD/h1-0000.tsv 2> "$OUT/one_gpu.log"
t1=$(date +%s.%N)
echo "ONE GPU, 1 shard (bench200M): score_shard wall clock $(awk "BEGIN{print $t1 - $t0}") s"
t0=$(date +%s.%N)
for k in 0000 0001; do
  ( s=$(date +%s.%N); $sw score-shard $BD/s2/shard-$k.swdb $opts --out $BD/h2-$k.tsv 2> "$OUT/two_gpu_$k.log";
    echo "  job shard-$k: rc=$? wall $(awk "BEGIN{print $(date +%s.%N) - $s}") s" ) &
done
sleep 8; nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv | tee "$OUT/apps.txt"
wait
t1=$(date +%s.%N)
echo "TWO GPUS, 2 shards as 2 concurrent jobs: wall clock $(awk "BEGIN{print $t1 - $t0}") s"
grep -h "using GPU\|backend:\|GCUPS\b" "$OUT"/one_gpu.log "$OUT"/two_gpu_*.log | grep -v "queries [0-9]*/" 
m="--queries $Q --top-k 500 --max-evalue 10"
$sw merge $BD/h1-0000.tsv --database-info $BD/s1/database.json --out $BD/hits1.tsv $m 2>&1 | tail -1
$sw merge $BD/h2-0000.tsv $BD/h2-0001.tsv --database-info $BD/s2/database.json --out $BD/hits2.tsv $m 2>&1 | tail -1
cmp $BD/hits1.tsv $BD/hits2.tsv && echo "merged hits: 1 GPU x 1 shard == 2 GPUs x 2 shards (identical, $(wc -l < $BD/hits1.tsv) lines)"
head -3 $BD/hits2.tsv
