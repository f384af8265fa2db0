#!/bin/bash
# The whole workflow on an H100 (device tool): issues 11, 12, 13.
#   bash benchmarks/device_workflow_run.sh          (repo root; carry .whl-smk and gpu_bench_data)
# PHASE=A: install; bench200M; kernels precompiled (GPU and CPU); GPU tests; the 20-query
#          kernel benchmark (gpu_bench.py); the workflow on bench200M with 20 and 500 queries
#          (benchmarks/workflow_scale.py, warm caches).
# PHASE=B: a release of bench200M re-scanned (benchmarks/workflow_rescan.py, GPU); the
#          20-query workflow with empty kernel caches; 5,000 queries.
# PHASE=COLD: the 20-query workflow with empty kernel caches, then again on the filled ones.
# PHASE=T3: issue 11's one table at one commit: the workflow with 20, 500 and 5,000 queries
#          (one shard, warm caches: precompiles first unless GT/GK/T ran).
# PHASE=MG: several GPUs (a multi-GPU kind): 2,000 queries, 4 shards, the workflow with
#          --resources gpu=1, 2 and 4 (as many as the machine has), tables compared.
# PHASE=C: a 2e9-residue database made by synth_db.py --residues 2e9 through the workflow
#          (20 of its queries; C_SHARDS="8 2" shards), each step's time and peak memory;
#          shard_db's speed and memory on it.
# PHASE=F1: the final validation in one call: precompile, GPU tests, kernel benchmark,
#          20/500 queries with one shard, the release re-scan.
# PHASE=F2: 5,000 queries (the 500 UniProt queries ten times over).
# PHASE=F3: a 2e9-residue database (bench200M ten times over with renamed ids:
#          synth_db.py --residues 2e9 takes minutes) with 8 shards and with 2; shard_db's
#          speed and memory on bench200M and on it.
# (F4: RESCAN_SYNC=1 syncs before each run; RESCAN_FSYNC_AB=1 repeats it with SWGPU_FSYNC=0;
#  RESCAN_AB_VAR=NAME repeats it with NAME=0.)
# PHASE=F4: issue 12's release re-scan with 5,000 queries (the GPU scan dominates);
#          RESCAN_STANDBY_AB=1: first with the GPU standby off, then on (same machine).
# PHASE=G: precompile, GPU tests, the kernel benchmark, and many queries per launch
#          against one at a time (benchmarks/gpu_batch_bench.py) on a re-scan-sized
#          delta and on uniprot20k.
# PHASE=BB: gpu_batch_bench.py on a re-scan-sized delta and on uniprot20k (run 20 also
#          compared blocks by plan bucket, SWGPU_BATCH_CHUNKS=bucket at c01ec21, since removed).
# PHASE=T: precompile, the GPU tests and gpu_batch_bench.py on the delta.
# PHASE=P: after F4 (same call): Snakemake's main process under cProfile while it reruns the
#          steps after scoring (--forcerun finish) in the re-scan's folder.
# PHASE=S: precompile, then the workflow with 20 and 500 queries, one shard (issue 11).
# PHASE=H: the no-DPX path (issue 14): precompile the s16, h16 and s32 kernels, the GPU tests
#          (h16 among their modes), gpu_bench.py on bench200M in s16, h16 and s32 (one process),
#          and in s16 and h16 on a database of 2,048-aa subjects (multi-pass kernels).
# PHASE=GT: precompile and the GPU tests only.
# PHASE=SB: a re-scan's joint delta search (6,589 subjects in 4 segments x 2,000 queries), each
#          row's choice on the host and on the GPU (benchmarks/gpu_segment_topk_bench.py).
# WARM_START=false: config warm_start false in S and F4; WARM_AB=1: S with false, then true.
# STANDBY_AB=N: after S, N pairs of 20-query runs with the GPU standby off, then on.
# AB_VAR=NAME AB_PAIRS=N: after S, N pairs of 20-query runs with NAME=0, then NAME unset.
# PLUGIN_AB=1: S, then S again without snakemake-executor-plugin-slurm; S_REPEAT=N: N more
# 20-query runs after each.  NO_SLURM_PLUGIN=1: remove the plugin before any phase.
# PHASE="S D": D, after S, times process starts on the host (python3, swgpu, nvidia-smi -L,
# Snakemake's import and a dry run of the 20-query folder).
# PHASE=GK: GT, then the 20-query kernel benchmark (gpu_bench.py).
# PHASE=NCU: ncu of the s16 kernels (NCU_VARIANTS), shared-memory wavefronts and pipes.
# PHASE=AT: after S: the 20 queries' alignments alone with 16, 8 and 4 threads.
# PHASE=DIAG: after S: micro-timings of this host (pandas import, 200 MB written, hashed, read)
#          and the 20-query run again under cProfile (Snakemake and every swgpu process).
# PHASE=MENU: gpu_bench.py with the shape menus MENU_CONFIGS (SWGPU_CONFIGS values, "-" = default).
# PHASE=MB: the merge step on a synthetic re-scan-sized table (merge_bench.py; CPU only):
#          MB_THREADS (1,4,16), k-th scores by sorted runs and by sorting all rows;
#          MB_CUT=N: only a job's joint cut and its candidates, N queries x 4 shards (--cut).
# PHASE=FL: a re-scan's first batched search after its kernels' preload (gpu_batch_bench.py
#          --preload, FL_SUBJECTS 6589 x 2,000 queries), with CUDA_MODULE_LOADING as the
#          image has it, then EAGER.
# PHASE=QB: qp2 / batched / s16 by subject-set size (QB_SUBJECTS, 0 = all; QB_QN, QB_SMALL_QN,
#          QB_PATHS (of batched, qp2b, qp2, s16), QB_QUERIES, QB_PRECOMPILE=0, QB_SEGMENTS=4:
#          each of 4 segments' top k, as a re-scan; QB_TEST=1 qp2's GPU test first, QB_BENCH=1
#          the 20-query kernel benchmark).
# PHASE=KV: scoring-kernel variants (KV_MODES, e.g. "s16,s16@nolob+u1+b0") in one gpu_bench.py;
#          KV_DBS: other databases (peak_db.py's 256, 1,024 and 2,048-aa ones are made).
# GPU_TEST_FILES="tests/test_warm.py": those files' GPU tests first (GPU_TEST_LIMIT s, 200),
# after the kernels' precompile (carry .whl-test for the tests' hypothesis).
# PHASE="T S" runs T, then S (phases run in the order of this file).
# SWGPU_COMMIT=<commit> names the commit in the log (the device gets a copy of the
# working tree without its history).
# Everything that must come back is written under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PHASE=${PHASE:-A}
has_phase() { [[ " $PHASE " == *" $1 "* ]]; }  # PHASE may name several: PHASE="T S"
export PYTHONUNBUFFERED=1 SWGPU_LOCK_DIR=/tmp/swgpu-locks
# PROFILE=1: every swgpu process of the workflow phases runs under cProfile (SWGPU_PROFILE)
# and Snakemake's own process in workflow_rescan.py's runs too (SMK_PROFILE)
[ "${PROFILE:-0}" = 1 ] && export SWGPU_PROFILE=/tmp/prof SMK_PROFILE=/tmp/smkprof
export SWGPU_CACHE_DIR=${SWGPU_CACHE_DIR:-/tmp/swgpu-cache}
SITE=/tmp/site
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE \
    .whl-smk/*.whl || exit 1
  touch /tmp/site/.done
fi
# a GPU install ('.[cuda13]') has no SLURM executor plugin: remove the carried one
remove_slurm_plugin() {
  rm -rf $SITE/snakemake_executor_plugin_slurm $SITE/snakemake_executor_plugin_slurm_jobstep \
    $SITE/snakemake_executor_plugin_slurm-*.dist-info $SITE/snakemake_executor_plugin_slurm_jobstep-*.dist-info
}
[ "${NO_SLURM_PLUGIN:-0}" = 1 ] && remove_slurm_plugin
# numba-cuda 0.30 uses numpy.row_stack, gone in numpy 2.5 (the image has 2.5.2): alias it
# when Numba is first imported, not in every Python process (the workflow's job processes
# import nothing heavy before they hand their command to the warm-start process)
mkdir -p /tmp/sc
cp benchmarks/device_sitecustomize.py /tmp/sc/sitecustomize.py
export PYTHONPATH=/tmp/sc:$SITE:$PWD
python3 -m compileall -q -j 0 $SITE swgpu_tools > /dev/null 2>&1
# The image's numpy has no bytecode (0 of 407 modules, run 3 of 2026-11-24) and the image
# sets PYTHONDONTWRITEBYTECODE, so every process that imported numpy compiled it from
# source (~0.35 s; pandas' import 0.8 s against 0.46 s).  pip writes bytecode on install,
# so a user's numpy has it: compile it once here as well.
NUMPY_DIR=$(python3 -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('numpy').origin))" 2>/dev/null)
[ -n "$NUMPY_DIR" ] && python3 -m compileall -q -j 0 "$NUMPY_DIR" > /dev/null 2>&1
mkdir -p /tmp/bin
# the console script as pip writes it (swgpu_tools.console:entry): 'python3 -m
# swgpu_tools.cli' would import the command-line package first, which a job's
# client, handing its command to the warm process, does not need; and only such a
# script lets the warm process put its job command first (warm.launch.plain_console_script)
printf '#!%s\nimport sys\nfrom swgpu_tools.console import entry\nif __name__ == "__main__":\n    sys.exit(entry())\n' "$(command -v python3)" > /tmp/bin/swgpu
printf '#!/bin/sh\nexec python3 -m snakemake "$@"\n' > /tmp/bin/snakemake
chmod +x /tmp/bin/*
export PATH=/tmp/bin:$PATH:$SITE/bin SNAKEMAKE=/tmp/bin/snakemake
ts() { date +%s.%N; }
el() { awk "BEGIN{printf \"%.1f\", $2 - $1}"; }
BD=/tmp/bench; mkdir -p $BD
D=$PWD/gpu_bench_data
echo "commit ${SWGPU_COMMIT:-unknown}; $(date -u +%FT%TZ); phase $PHASE" | tee -a "$OUT/log.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/log.txt"
if [ ! -f $BD/bench_db.fasta ]; then
  ( cd $BD && python3 $D/synth_db.py --template $D/uniprot20k.fasta.gz --residues 2e8 \
      --db bench_db.fasta --queries bench_queries.fasta > synth.log 2>&1 )
fi
# shared by the phases below
precompile_all() {
  t0=$(ts); swgpu backend --precompile 2>&1 | tail -4 | tee -a "$OUT/log.txt"; echo "precompile $(el $t0 $(ts)) s" | tee -a "$OUT/log.txt"
}
gpu_tests() {  # $1: seconds allowed
  python3 -c "import hypothesis" 2>/dev/null || python3 -m pip install -q --no-index --no-deps \
    --no-compile --target $SITE .whl-test/*.whl > /dev/null 2>&1  # (carry .whl-test)
  echo "== GPU tests" | tee -a "$OUT/log.txt"
  SWGPU_TEST_DATA=$D SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta \
    timeout "$1" python3 -m pytest -m gpu -q -p no:cacheprovider --durations=6 tests 2>&1 \
    | tee "$OUT/gpu_tests.txt" | tail -12 | tee -a "$OUT/log.txt"  # (all of it comes back)
}
kernel_bench() {
  echo "== gpu_bench 20 queries" | tee -a "$OUT/log.txt"
  timeout 100 python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta --repeat 2 \
    --skip-start --json "$OUT/gpu_bench.json" 2>&1 | grep -iv "^BQ" | tail -4 | tee -a "$OUT/log.txt"
}
# GPU_TEST_FILES="tests/test_warm.py …": those files' GPU tests first, whatever the phase
# (here the swgpu command is on PATH, which the warm process's tests need)
if [ -n "${GPU_TEST_FILES:-}" ]; then
  # the kernels first (16 compiles at once): a test that compiles them one by one may
  # pass the time limit before pytest prints anything (run 233)
  precompile_all
  python3 -c "import hypothesis" 2>/dev/null || python3 -m pip install -q --no-index --no-deps \
    --no-compile --target $SITE .whl-test/*.whl > /dev/null 2>&1
  echo "== GPU tests of $GPU_TEST_FILES" | tee -a "$OUT/log.txt"
  # shellcheck disable=SC2086
  SWGPU_TEST_DATA=$D SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta \
    timeout "${GPU_TEST_LIMIT:-200}" python3 -m pytest -m gpu -q -p no:cacheprovider $GPU_TEST_FILES 2>&1 \
    | tee "$OUT/gpu_test_files.txt" | tail -8 | tee -a "$OUT/log.txt"
fi
if has_phase SB; then
  [ -n "${GPU_TEST_FILES:-}" ] || precompile_all
  echo "== a re-scan's joint search, each row's choice on the host and on the GPU" | tee -a "$OUT/log.txt"
  timeout 150 python3 benchmarks/gpu_segment_topk_bench.py --db $BD/bench_db.fasta \
    --queries $D/uniprot_queries500.fasta.gz --json "$OUT/segment_topk.json" 2>&1 | tail -5 | tee -a "$OUT/log.txt"
fi
if has_phase A; then
  t0=$(ts); swgpu backend --precompile 2>&1 | tee -a "$OUT/log.txt"; echo "precompile $(el $t0 $(ts)) s" | tee -a "$OUT/log.txt"
  echo "== GPU tests" | tee -a "$OUT/log.txt"
  SWGPU_TEST_DATA=$D SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta \
    timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -x tests/test_kernels_gpu.py tests/test_pairs_gpu.py 2>&1 \
    | tail -4 | tee -a "$OUT/log.txt"
  echo "== gpu_bench 20 queries" | tee -a "$OUT/log.txt"
  timeout 150 python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta --repeat 2 \
    --skip-start --json "$OUT/gpu_bench.json" 2>&1 | grep -iv "^BQ" | tail -6 | tee -a "$OUT/log.txt"
  echo "== workflow, warm caches" | tee -a "$OUT/log.txt"
  timeout 300 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
    --queries 20=$BD/bench_queries.fasta --queries 500=$D/uniprot_queries500.fasta.gz \
    --cores 16 --threads 16 --shards 4 --workdir /tmp/scale --json "$OUT/scale_A.json" 2>&1 | tee -a "$OUT/log.txt"
  cp /tmp/scale/q500/results/plots/steps.png "$OUT/steps_q500.png" 2>/dev/null
fi
if has_phase B; then
  swgpu backend --precompile > /dev/null 2>&1
  echo "== workflow, one shard (one GPU), warm caches" | tee -a "$OUT/log.txt"
  timeout 240 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
    --queries 20=$BD/bench_queries.fasta --queries 500=$D/uniprot_queries500.fasta.gz \
    --cores 16 --threads 16 --shards 1 --workdir /tmp/scale1 --json "$OUT/scale_B1.json" 2>&1 | tee -a "$OUT/log.txt"
  tar czf "$OUT/stats_B1.tgz" -C /tmp/scale1 q20/results/stats q500/results/stats q500/snakemake.log \
    q20/snakemake.log q500/results/logs 2>/dev/null
  echo "== re-scan of a release (1% changed, 0.5% added, 0.5% removed)" | tee -a "$OUT/log.txt"
  timeout 300 python3 benchmarks/workflow_rescan.py --database $BD/bench_db.fasta \
    --queries $BD/bench_queries.fasta --shards 4 --cores 16 --threads 16 --backend gpu \
    --workdir /tmp/rescan --json "$OUT/rescan.json" 2>&1 | tee -a "$OUT/log.txt"
  echo "== 20 queries, empty kernel caches" | tee -a "$OUT/log.txt"
  SWGPU_CACHE_DIR=/tmp/cold-cache NUMBA_CACHE_DIR=/tmp/cold-cache/numba timeout 200 \
    python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta --queries 20=$BD/bench_queries.fasta \
    --cores 16 --threads 16 --shards 1 --workdir /tmp/cold --json "$OUT/scale_cold.json" 2>&1 | tee -a "$OUT/log.txt"
fi
if has_phase COLD; then
  # issue 11's cold start: 20 queries with empty kernel caches (nothing precompiled), then
  # the same again on the caches that run filled (a second run on a new machine);
  # COLD_AB="8": then empty caches again with SWGPU_COMPILE_JOBS=8 (the cap before 2026-11-27)
  for n in cold again ${COLD_AB:+ab}; do
    cache=/tmp/cold-cache; [ "$n" = ab ] && cache=/tmp/cold-cache-ab
    echo "== 20 queries, one shard, kernel caches: $n${COLD_AB:+ (ab: SWGPU_COMPILE_JOBS=$COLD_AB)}" | tee -a "$OUT/log.txt"
    ( [ "$n" = ab ] && export SWGPU_COMPILE_JOBS=$COLD_AB
      SWGPU_CACHE_DIR=$cache NUMBA_CACHE_DIR=$cache/numba timeout 200 \
      python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta --queries 20=$BD/bench_queries.fasta \
      --cores 16 --threads 16 --shards 1 --workdir /tmp/cold_$n --json "$OUT/scale_cold_$n.json" 2>&1 \
      | tee -a "$OUT/log.txt" )
    tar czf "$OUT/logs_cold_$n.tgz" -C /tmp/cold_$n q20/results/logs q20/results/stats q20/snakemake.log 2>/dev/null
    cp $cache/numba/.compiling-hits.log "$OUT/compiling-hits_$n.log" 2>/dev/null
    # PROFILE=1: each swgpu process's cProfile statistics of this run
    [ -d /tmp/prof ] && { tar czf "$OUT/prof_cold_$n.tgz" -C /tmp prof; rm -rf /tmp/prof; }
  done
fi
if has_phase T3; then
  has_phase GT || has_phase GK || has_phase T || precompile_all
  echo "== T3: 20, 500 and 5,000 queries, one shard, warm caches" | tee -a "$OUT/log.txt"
  timeout 420 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
    --queries 20=$BD/bench_queries.fasta --queries 500=$D/uniprot_queries500.fasta.gz \
    --queries 5000=$D/uniprot_queries500.fasta.gz --cores 16 --threads 16 --shards 1 \
    --workdir /tmp/scaleT3 --json "$OUT/scale_T3.json" 2>&1 | tee -a "$OUT/log.txt"
  tar czf "$OUT/stats_T3.tgz" -C /tmp/scaleT3 q20/results/stats q500/results/stats \
    q5000/results/stats q20/snakemake.log q500/snakemake.log q5000/snakemake.log 2>/dev/null
fi
if has_phase MG; then
  precompile_all
  NG=$(nvidia-smi -L | grep -c '^GPU')
  echo "== MG: $NG GPUs; 2,000 queries, 4 shards, --resources gpu=K" | tee -a "$OUT/log.txt"
  for k in 1 2 4; do
    [ "$k" -le "$NG" ] || continue
    timeout 200 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
      --queries 2000=$D/uniprot_queries500.fasta.gz --cores $(nproc) --threads 16 --shards 4 \
      --snakemake-arg=--resources --snakemake-arg=gpu=$k \
      --workdir /tmp/mg$k --json "$OUT/scale_MG_gpu$k.json" 2>&1 | tee -a "$OUT/log.txt"
    tar czf "$OUT/stats_MG_gpu$k.tgz" -C /tmp/mg$k q2000/results/stats q2000/snakemake.log 2>/dev/null
  done
  for k in 2 4; do
    [ -d /tmp/mg$k/q2000/results ] || continue
    for t in hits.tsv alignments.tsv; do
      cmp -s /tmp/mg1/q2000/results/$t /tmp/mg$k/q2000/results/$t \
        && echo "gpu=1 against gpu=$k: $t identical" || echo "gpu=1 against gpu=$k: $t DIFFERS"
    done
  done | tee -a "$OUT/log.txt"
fi
if has_phase C; then
  # issue 11's "UniRef scale": synth_db.py --residues 2e9 itself (not bench200M copied),
  # the whole workflow with 20 of its queries in C_SHARDS (default "8 2") shards, every
  # step's time and peak memory (workflow_scale.py), then shard_db's speed and memory
  swgpu backend --precompile > /dev/null 2>&1
  BIG=/tmp/big; mkdir -p $BIG
  if [ ! -f $BIG/big_db.fasta ]; then
    t0=$(ts)
    ( cd $BIG && python3 -c "
import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:], stdout=open('synth.log', 'w'), stderr=subprocess.STDOUT)
print('peak RSS %.0f MiB' % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
sys.exit(rc)" python3 $D/synth_db.py --template $D/uniprot20k.fasta.gz \
        --residues 2e9 --seed 9 --db big_db.fasta --queries big_queries.fasta > synth.rss )
    echo "synth_db.py --residues 2e9: $(el $t0 $(ts)) s; $(ls -la $BIG/big_db.fasta | awk '{print $5}') bytes;" \
      "$(grep -c '>' $BIG/big_db.fasta) sequences; $(cat $BIG/synth.rss)" | tee -a "$OUT/log.txt"
  fi
  for n in ${C_SHARDS:-8 2}; do
    echo "== 2e9, 20 queries, $n shards" | tee -a "$OUT/log.txt"
    timeout 300 python3 benchmarks/workflow_scale.py --database $BIG/big_db.fasta \
      --queries 20=$BIG/big_queries.fasta --cores 16 --threads 16 --shards $n --workdir /tmp/bigrun$n \
      --json "$OUT/scale_2e9_$n.json" 2>&1 | tee -a "$OUT/log.txt"
    tar czf "$OUT/stats_2e9_$n.tgz" -C /tmp/bigrun$n q20/results/stats q20/snakemake.log 2>/dev/null
    rm -rf /tmp/bigrun$n/q20/results/shards
  done
  echo "== shard_db speed and memory, 2e9" | tee -a "$OUT/log.txt"
  timeout 150 python3 benchmarks/shard_db_speed.py --db $BIG/big_db.fasta --shards 8 --repeat 1 \
    2>&1 | tail -4 | tee -a "$OUT/log.txt"
fi
if has_phase F1; then
  precompile_all; gpu_tests 220; kernel_bench
  echo "== workflow, one shard, warm caches" | tee -a "$OUT/log.txt"
  timeout 200 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
    --queries 20=$BD/bench_queries.fasta --queries 500=$D/uniprot_queries500.fasta.gz \
    --cores 16 --threads 16 --shards 1 --workdir /tmp/scaleF --json "$OUT/scale_F1.json" 2>&1 | tee -a "$OUT/log.txt"
  tar czf "$OUT/stats_F1.tgz" -C /tmp/scaleF q20/results/stats q500/results/stats q500/snakemake.log \
    q20/snakemake.log q20/results/logs q500/results/logs 2>/dev/null
  echo "== re-scan of a release (1% changed, 0.5% added, 0.5% removed)" | tee -a "$OUT/log.txt"
  timeout 240 python3 benchmarks/workflow_rescan.py --database $BD/bench_db.fasta \
    --queries $BD/bench_queries.fasta --shards 4 --cores 16 --threads 16 --backend gpu \
    --workdir /tmp/rescan --json "$OUT/rescan.json" 2>&1 | tee -a "$OUT/log.txt"
  tar czf "$OUT/rescan_F1.tgz" -C /tmp/rescan --exclude='*.swdb' --exclude='*.fasta' --exclude='state' . 2>/dev/null
fi
if has_phase F2; then
  swgpu backend --precompile > /dev/null 2>&1
  echo "== 5,000 queries" | tee -a "$OUT/log.txt"
  timeout 330 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
    --queries 5000=$D/uniprot_queries500.fasta.gz --cores 16 --threads 16 --shards 1 \
    --workdir /tmp/scale5k --json "$OUT/scale_5000.json" 2>&1 | tee -a "$OUT/log.txt"
  tar czf "$OUT/stats_5000.tgz" -C /tmp/scale5k q5000/results/stats q5000/snakemake.log 2>/dev/null
fi
if has_phase F3; then
  swgpu backend --precompile > /dev/null 2>&1
  BIG=/tmp/big; mkdir -p $BIG
  t0=$(ts)
  python3 -c "
src = open('$BD/bench_db.fasta', 'rb').read()
with open('$BIG/big_db.fasta', 'wb') as f:
    for k in range(10):
        f.write(src.replace(b'>', b'>c%d_' % k))
"
  echo "2e9 database: $(el $t0 $(ts)) s; $(ls -la $BIG/big_db.fasta | awk '{print $5}') bytes" | tee -a "$OUT/log.txt"
  timeout 240 python3 benchmarks/workflow_scale.py --database $BIG/big_db.fasta \
    --queries 20=$BD/bench_queries.fasta --cores 16 --threads 16 --shards 8 --workdir /tmp/bigrun \
    --json "$OUT/scale_2e9.json" 2>&1 | tee -a "$OUT/log.txt"
  tar czf "$OUT/stats_2e9.tgz" -C /tmp/bigrun q20/results/stats q20/snakemake.log 2>/dev/null
  echo "== the same with 2 shards of 1e9 residues" | tee -a "$OUT/log.txt"
  timeout 200 python3 benchmarks/workflow_scale.py --database $BIG/big_db.fasta \
    --queries 20=$BD/bench_queries.fasta --cores 16 --threads 16 --shards 2 --workdir /tmp/bigrun2 \
    --json "$OUT/scale_2e9_2shards.json" 2>&1 | tee -a "$OUT/log.txt"
  echo "== shard_db speed and memory, 2e9" | tee -a "$OUT/log.txt"
  timeout 100 python3 benchmarks/shard_db_speed.py --db $BIG/big_db.fasta --shards 8 --repeat 1 \
    2>&1 | tail -4 | tee -a "$OUT/log.txt"
  echo "== shard_db speed, bench200M" | tee -a "$OUT/log.txt"
  timeout 150 python3 benchmarks/shard_db_speed.py --db $BD/bench_db.fasta --shards 1 4 8 --repeat 3 \
    2>&1 | tail -8 | tee -a "$OUT/log.txt"
fi
if has_phase F4; then
  swgpu backend --precompile > /dev/null 2>&1
  # F4_GPU_TESTS="tests/…": those GPU tests after this precompile (F4_GPU_TEST_LIMIT s, 60)
  if [ -n "${F4_GPU_TESTS:-}" ]; then
    echo "== GPU tests of $F4_GPU_TESTS" | tee -a "$OUT/log.txt"
    # shellcheck disable=SC2086
    SWGPU_TEST_DATA=$D timeout "${F4_GPU_TEST_LIMIT:-60}" python3 -m pytest -m gpu -q -p no:cacheprovider \
      $F4_GPU_TESTS 2>&1 | tee "$OUT/f4_gpu_tests.txt" | tail -4 | tee -a "$OUT/log.txt"
  fi
  if [ -n "${SHARD_MEMORY:-}" ]; then
    echo "== shard_db memory, 2e9 (anonymous and with the mapped files' page cache)" | tee -a "$OUT/log.txt"
    mkdir -p /tmp/big
    python3 -c "
src = open('$BD/bench_db.fasta', 'rb').read()
with open('/tmp/big/big_db.fasta', 'wb') as f:
    for k in range(10):
        f.write(src.replace(b'>', b'>c%d_' % k))
"
    timeout 100 python3 benchmarks/shard_db_speed.py --db /tmp/big/big_db.fasta --shards 8 --repeat 1 \
      2>&1 | tail -2 | tee -a "$OUT/log.txt"
    rm -f /tmp/big/big_db.fasta
  fi
  echo "== re-scan of a release, ${RESCAN_QUERIES:=5000} queries" | tee -a "$OUT/log.txt"
  python3 -c "
import sys; sys.path.insert(0, 'benchmarks')
from pathlib import Path
from workflow_scale import query_file
query_file($RESCAN_QUERIES, '$D/uniprot_queries500.fasta.gz', '$BD/bench_db.fasta', Path('/tmp/q$RESCAN_QUERIES.fasta'))
"
  # RESCAN_STANDBY_AB=1: first with the warm process's GPU standby off (SWGPU_GPU_STANDBY=0)
  if [ "${RESCAN_STANDBY_AB:-0}" = 1 ]; then
    echo "== the same, GPU standby off" | tee -a "$OUT/log.txt"
    SWGPU_GPU_STANDBY=0 timeout 280 python3 benchmarks/workflow_rescan.py --database $BD/bench_db.fasta \
      --queries /tmp/q$RESCAN_QUERIES.fasta --shards 4 --cores 16 --threads 16 --backend gpu \
      --warm-start true --workdir /tmp/rescan_nosb$RESCAN_QUERIES 2>&1 | tee -a "$OUT/log.txt"
    echo "== the same, GPU standby on" | tee -a "$OUT/log.txt"
  fi
  # RESCAN_SYNC=1: os.sync() before each run (workflow_rescan.py --sync)
  SYNC=""; [ "${RESCAN_SYNC:-0}" = 1 ] && SYNC=--sync
  # RESCAN_AGAIN=N: N more incremental runs (each in a copy of the folder as v1 left it);
  # RESCAN_PYSPY=1: the last of them sampled by py-spy (carried in .whl-smk), which comes back
  AGAIN=""; [ -n "${RESCAN_AGAIN:-}" ] && AGAIN="--again $RESCAN_AGAIN"
  # RESCAN_AGAIN_ENV=NAME=VALUE: each repeat a pair, with it set then without
  [ -n "${RESCAN_AGAIN_ENV:-}" ] && AGAIN="$AGAIN --again-env $RESCAN_AGAIN_ENV"
  # RESCAN_AGAIN_TREE=DIR (carried): each repeat a pair, that checkout then this one
  if [ -n "${RESCAN_AGAIN_TREE:-}" ]; then
    AGAIN="$AGAIN --again-tree $RESCAN_AGAIN_TREE"
    # its bytecode too, as this checkout's above (the image sets PYTHONDONTWRITEBYTECODE:
    # else its every process compiles the modules it imports)
    python3 -m compileall -q -j 0 "$RESCAN_AGAIN_TREE/swgpu_tools" > /dev/null 2>&1
    # (from /tmp: `python3 -m` puts the working folder, this checkout, first on sys.path)
    t0=$(ts); ( cd /tmp && PYTHONPATH=$OLDPWD/$RESCAN_AGAIN_TREE:$PYTHONPATH swgpu backend --precompile > /dev/null 2>&1 )
    echo "precompile of $RESCAN_AGAIN_TREE: $(el $t0 $(ts)) s" | tee -a "$OUT/log.txt"
  fi
  # RESCAN_AGAIN_FIRST=this: each pair with this checkout first (default: the other first)
  [ -n "${RESCAN_AGAIN_FIRST:-}" ] && AGAIN="$AGAIN --again-first $RESCAN_AGAIN_FIRST"
  [ "${RESCAN_PYSPY:-0}" = 1 ] && AGAIN="$AGAIN --pyspy /tmp/rescan_pyspy.txt"
  timeout ${RESCAN_TIMEOUT:-560} python3 benchmarks/workflow_rescan.py --database $BD/bench_db.fasta \
    --queries /tmp/q$RESCAN_QUERIES.fasta --shards 4 --cores 16 --threads 16 --backend gpu $SYNC $AGAIN \
    --warm-start ${WARM_START:-true} --workdir /tmp/rescan$RESCAN_QUERIES --json "$OUT/rescan_$RESCAN_QUERIES.json" 2>&1 | tee -a "$OUT/log.txt"
  [ -f /tmp/rescan_pyspy.txt ] && gzip -c /tmp/rescan_pyspy.txt > "$OUT/rescan_pyspy.txt.gz"
  # RESCAN_FSYNC_AB=1: the same again with no fsync at all (SWGPU_FSYNC=0), another folder
  if [ "${RESCAN_FSYNC_AB:-0}" = 1 ]; then
    echo "== the same, SWGPU_FSYNC=0" | tee -a "$OUT/log.txt"
    SWGPU_FSYNC=0 timeout ${RESCAN_TIMEOUT:-560} python3 benchmarks/workflow_rescan.py --database $BD/bench_db.fasta \
      --queries /tmp/q$RESCAN_QUERIES.fasta --shards 4 --cores 16 --threads 16 --backend gpu $SYNC \
      --warm-start ${WARM_START:-true} --workdir /tmp/rescan_nofsync$RESCAN_QUERIES \
      --json "$OUT/rescan_nofsync_$RESCAN_QUERIES.json" 2>&1 | tee -a "$OUT/log.txt"
  fi
  # RESCAN_AB_VAR=NAME: the same again with NAME=0, another folder
  if [ -n "${RESCAN_AB_VAR:-}" ]; then
    echo "== the same, ${RESCAN_AB_VAR}=0" | tee -a "$OUT/log.txt"
    env "$RESCAN_AB_VAR=0" timeout ${RESCAN_TIMEOUT:-560} python3 benchmarks/workflow_rescan.py --database $BD/bench_db.fasta \
      --queries /tmp/q$RESCAN_QUERIES.fasta --shards 4 --cores 16 --threads 16 --backend gpu $SYNC \
      --warm-start ${WARM_START:-true} --workdir /tmp/rescan_ab$RESCAN_QUERIES \
      --json "$OUT/rescan_ab_$RESCAN_QUERIES.json" 2>&1 | tee -a "$OUT/log.txt"
  fi
  tar czf "$OUT/rescan_$RESCAN_QUERIES.tgz" -C /tmp/rescan$RESCAN_QUERIES --exclude='*.swdb' --exclude='*.fasta' \
    --exclude='state' --exclude='*.tsv' --exclude='*.npz' --exclude='history' . 2>/dev/null
  # RESCAN_KEEP=1 (needs RESCAN_AGAIN): what the finish job of the incremental run reads,
  # bar the shards (remade where bench200M is: synth_db.py and workflow_rescan.py's v2 are
  # seeded), to replay it elsewhere: v1's folder (history, reuse table, states' none) and
  # v2's scoring table, in pieces of 15 MiB (keep.tgz.part-aa, ...; cat them back)
  if [ "${RESCAN_KEEP:-0}" = 1 ] && [ -d /tmp/rescan$RESCAN_QUERIES/inc-v1 ]; then
    R=/tmp/rescan$RESCAN_QUERIES
    tar czf /tmp/keep.tgz -C $R --exclude='*.swdb' --exclude='state' --exclude='plots' \
      --exclude='inc-v1/results/hits' --exclude='inc-v1/results/alignments.*' \
      --exclude='inc-v1/results/history/*/alignments.tsv' inc-v1/results inc-v1/config.yaml inc-v1/.snakemake/swgpu \
      inc/results/hits inc/results/shards inc/results/stats inc/results/logs 2>/dev/null
    ls -la /tmp/keep.tgz | tee -a "$OUT/log.txt"
    # (what comes back: 64 MiB in all, 8 files)
    [ $(stat -c %s /tmp/keep.tgz) -lt 58000000 ] && split -b 15M /tmp/keep.tgz "$OUT/keep.tgz.part-"
    cp /tmp/q$RESCAN_QUERIES.fasta "$OUT/"
  fi
  if [ -n "${SWGPU_PROFILE:-}" ]; then  # PROFILE=1: the incremental run's scoring job, profiled
    python3 -c "
import glob, pstats
for f in glob.glob('$SWGPU_PROFILE/inc-v2/score-shard-*.prof'):
    st = pstats.Stats(f); st.sort_stats('cumulative').print_stats('swgpu_tools', 45)
    st.sort_stats('tottime').print_stats(25)
" 2>&1 | cut -c1-160 | tee "$OUT/profile_inc_score.txt" | head -120
    tar czf "$OUT/profiles.tgz" -C "$SWGPU_PROFILE" . 2>/dev/null
  fi
  if [ -n "${SMK_PROFILE:-}" ]; then  # Snakemake's own process in the incremental run
    python3 -c "
import glob, pstats
for f in sorted(glob.glob('$SMK_PROFILE/*.prof')):
    print('=====', f)
    st = pstats.Stats(f); st.sort_stats('cumulative').print_stats('snakemake/(dag|persistence|jobs|io|rules)|swgpu_tools|smk|Snakefile', 45)
    st.sort_stats('tottime').print_stats(25)
" 2>&1 | cut -c1-170 | tee "$OUT/profile_inc_snakemake.txt" | grep -A60 "inc-v2" | head -90
    tar czf "$OUT/smk_profiles.tgz" -C "$SMK_PROFILE" . 2>/dev/null
  fi
  # what the workflow's parse runs on this host: nvidia-smi -L (workflow_gpus)
  TIMEFORMAT=%R
  echo "nvidia-smi -L: $( { time (nvidia-smi -L > /dev/null 2>&1) ; } 2>&1 ) s, again $( { time (nvidia-smi -L > /dev/null 2>&1) ; } 2>&1 ) s" | tee -a "$OUT/log.txt"
fi
if has_phase P; then
  # after F4: Snakemake's own time, profiled, on a forced rerun of the steps after scoring
  W=/tmp/rescan${RESCAN_QUERIES:-5000}/inc
  echo "== profile: snakemake --forcerun finish in $W" | tee -a "$OUT/log.txt"
  t0=$(ts)
  timeout 120 python3 -m cProfile -o "$OUT/smk_forcerun.prof" -m snakemake -s $PWD/Snakefile \
    --directory $W --configfile $W/config.yaml --cores 16 --forcerun finish > "$OUT/smk_forcerun.log" 2>&1
  echo "forced rerun (rule finish), under cProfile: $(el $t0 $(ts)) s" | tee -a "$OUT/log.txt"
  for f in $W/results/benchmarks/*.tsv; do echo "$(basename $f) $(tail -1 $f | cut -f1)"; done | tee -a "$OUT/log.txt"
fi
if has_phase G; then
  precompile_all; gpu_tests 220; kernel_bench
  echo "== many queries per launch: a re-scan's delta (1,663 bench200M entries x 2,000 queries)" | tee -a "$OUT/log.txt"
  python3 -c "
import gzip
recs = gzip.open('$D/uniprot_queries500.fasta.gz', 'rt').read()
open('/tmp/q500.fasta', 'w').write(recs)
"
  timeout 120 python3 benchmarks/gpu_batch_bench.py --db $BD/bench_db.fasta --queries /tmp/q500.fasta \
    --subjects 1663 --queries-n 2000 --top-k 510 --json "$OUT/batch_delta.json" 2>&1 | tee -a "$OUT/log.txt"
  echo "== many queries per launch: uniprot20k x 500 queries" | tee -a "$OUT/log.txt"
  timeout 120 python3 benchmarks/gpu_batch_bench.py --db $D/uniprot20k.fasta.gz --queries /tmp/q500.fasta \
    --subjects 0 --queries-n 500 --top-k 500 --json "$OUT/batch_u20k.json" 2>&1 | tee -a "$OUT/log.txt"
fi
if has_phase H; then
  t0=$(ts)
  python3 -c "
from swgpu_tools.kernels import gpu
print(gpu.precompile(modes=('s16', 'h16', 's32'), jobs=8))
" 2>&1 | tail -2 | tee -a "$OUT/log.txt"
  echo "precompile s16 h16 s32 $(el $t0 $(ts)) s" | tee -a "$OUT/log.txt"
  gpu_tests 240
  echo "== gpu_bench 20 queries, modes s16, h16, s32" | tee -a "$OUT/log.txt"
  timeout 200 python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta \
    --repeat 2 --mode s16,h16,s32 --skip-start --json "$OUT/gpu_bench_modes.json" 2>&1 \
    | grep -v "^BQ" | tee -a "$OUT/log.txt"
  echo "== gpu_bench, 2,048-aa subjects (peak_db.py, 5e7 residues), modes s16, h16" | tee -a "$OUT/log.txt"
  python3 benchmarks/peak_db.py --lengths 2048 --residues 5e7 --out-dir /tmp/peak > /dev/null
  timeout 120 python3 benchmarks/gpu_bench.py --db /tmp/peak/peak_2048.fasta --queries $BD/bench_queries.fasta \
    --repeat 2 --mode s16,h16 --skip-start --json "$OUT/gpu_bench_peak2048.json" 2>&1 \
    | grep -E "^TOTAL|^ +all|!!" | tee -a "$OUT/log.txt"
fi
if has_phase BB || has_phase T; then
  if has_phase T; then
    precompile_all; gpu_tests 220  # run 21 ran them cold, without the precompile, and ran out of time
  fi
  echo "== many queries per launch (gpu_batch_bench.py)" | tee -a "$OUT/log.txt"
  python3 -c "
import gzip
open('/tmp/q500.fasta', 'w').write(gzip.open('$D/uniprot_queries500.fasta.gz', 'rt').read())
"
  timeout 120 python3 benchmarks/gpu_batch_bench.py --db $BD/bench_db.fasta \
    --queries /tmp/q500.fasta --subjects 1663 --queries-n 2000 --top-k 510 \
    --json "$OUT/batch_delta.json" 2>&1 | tee -a "$OUT/log.txt"
  has_phase BB && timeout 120 python3 benchmarks/gpu_batch_bench.py --db $D/uniprot20k.fasta.gz \
    --queries /tmp/q500.fasta --subjects 0 --queries-n 500 --top-k 500 --json "$OUT/batch_u20k.json" \
    2>&1 | tee -a "$OUT/log.txt"
fi
# PHASE=BS: the batched search on a re-scan-sized delta (BS_SUBJECTS, 6,589 x 2,000 queries,
# top k BS_TOPK) cut into BS_BLOCKS query blocks (kernels/gpu/batched.BLOCKS), one process
if has_phase BS; then
  echo "== batched search by query blocks (gpu_batch_bench.py --blocks)" | tee -a "$OUT/log.txt"
  timeout ${BS_TIMEOUT:-300} python3 benchmarks/gpu_batch_bench.py --db $BD/bench_db.fasta \
    --queries $D/uniprot_queries500.fasta.gz --subjects "${BS_SUBJECTS:-6589}" --queries-n 2000 \
    --top-k "${BS_TOPK:-1000}" --paths batched --repeat 3 --blocks "${BS_BLOCKS:-4,2,1,8,4}" \
    --json "$OUT/batch_blocks.json" 2>&1 | tee -a "$OUT/log.txt"
fi
if has_phase MB && [ -n "${MB_CUT:-}" ]; then
  # MB_CUT=N: only a scoring job's joint cut against its candidates, N queries x 4 shards
  MB_THREADS=${MB_THREADS:-16}  # (not in the echo: a pipeline's part runs in a subshell)
  echo "== merge_bench.py --cut, $MB_CUT queries (threads $MB_THREADS)" | tee -a "$OUT/log.txt"
  timeout 200 python3 benchmarks/merge_bench.py --queries "$MB_CUT" --repeat 2 --threads "$MB_THREADS" \
    --kth runs --cut 2>&1 | grep -v "^run " | tail -8 | tee -a "$OUT/log.txt"
elif has_phase MB; then
  for table in "" --candidates; do
    echo "== merge_bench.py $table (threads ${MB_THREADS:=1,4,16})" | tee -a "$OUT/log.txt"
    timeout 200 python3 benchmarks/merge_bench.py --repeat 3 --threads "$MB_THREADS" --kth runs,sort $table \
      > "$OUT/merge_bench$table.txt" 2>&1
    echo "rc=$?" | tee -a "$OUT/log.txt"
    grep -v "^run " "$OUT/merge_bench$table.txt" | tail -12 | tee -a "$OUT/log.txt"
  done
fi
if has_phase FL; then
  swgpu backend --precompile > /dev/null 2>&1
  for ml in default EAGER; do
    echo "== first batched search after the preload, CUDA_MODULE_LOADING=$ml" | tee -a "$OUT/log.txt"
    ( [ "$ml" = default ] || export CUDA_MODULE_LOADING=$ml
      timeout 120 python3 benchmarks/gpu_batch_bench.py --db $BD/bench_db.fasta \
        --queries $D/uniprot_queries500.fasta.gz --subjects "${FL_SUBJECTS:-6589}" --queries-n 2000 \
        --paths batched --repeat 2 --preload --json "$OUT/first_launch_$ml.json" 2>&1 | tail -6 | tee -a "$OUT/log.txt" )
  done
fi
if has_phase QB; then
  # qp2 against many queries per launch (batched) and s16 by the size of the subject set
  # (QB_SUBJECTS entries of bench200M; 109820 is a quarter: a 50 M-residue shard),
  # QB_QN queries (the 500 UniProt queries repeated); QB_SMALL_QN: more query counts on
  # the largest set
  # QB_PRECOMPILE=0: kernels compiled on first use (the benchmark needs only the GPU ones)
  [ "${QB_PRECOMPILE:-1}" = 1 ] && ! { has_phase GT || has_phase GK || has_phase T || has_phase S || has_phase F4; } \
    && precompile_all
  # QB_TEST=1: qp2's GPU test first; QB_BENCH=1: the 20-query kernel benchmark (bench200M)
  if [ "${QB_TEST:-0}" = 1 ]; then
    SWGPU_TEST_DATA=$D timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_qp2.py \
      2>&1 | tail -3 | tee -a "$OUT/log.txt"
  fi
  [ "${QB_BENCH:-0}" = 1 ] && kernel_bench
  python3 -c "
import gzip
open('/tmp/q500.fasta', 'w').write(gzip.open('$D/uniprot_queries500.fasta.gz', 'rt').read())
"
  QB_SUBJECTS=${QB_SUBJECTS:-1663 6589 27000 55000 109820}
  big=${QB_SUBJECTS##* }
  for n in $QB_SUBJECTS; do
    for qn in ${QB_QN:-2000} $([ "$n" = "$big" ] && echo "${QB_SMALL_QN:-}"); do
      echo "== qp2 / batched / s16: $n subjects x $qn queries" | tee -a "$OUT/log.txt"
      timeout ${QB_TIMEOUT:-200} python3 benchmarks/gpu_batch_bench.py --db $BD/bench_db.fasta \
        --queries ${QB_QUERIES:-/tmp/q500.fasta} --subjects $n --queries-n $qn --top-k ${QB_TOPK:-500} \
        --repeat ${QB_REPEAT:-1} --paths ${QB_PATHS:-batched,qp2,s16} ${QB_SEGMENTS:+--segments $QB_SEGMENTS} \
        --json "$OUT/qb_${n}_$qn.json" 2>&1 \
        | grep -v "^  {" | tee -a "$OUT/log.txt"
    done
  done
fi
if has_phase KV; then
  # kernel variants of issue 14 in one process (gpu_bench.py MODE@VARIANT), each compiled on
  # first use; top hits checked equal across them ("!!" lines otherwise)
  KV_MODES=${KV_MODES:-s16,s16@nolob+u1+b0,s16}
  echo "== gpu_bench 20 queries, variants $KV_MODES" | tee -a "$OUT/log.txt"
  [ -n "${KV_DBS:-}" ] && python3 benchmarks/peak_db.py --lengths 256 1024 2048 --residues 1e8 --out-dir /tmp/peak > /dev/null
  for db in ${KV_DBS:-$BD/bench_db.fasta}; do
    name=$(basename $db .fasta)
    echo "-- $db" | tee -a "$OUT/log.txt"
    timeout ${KV_TIMEOUT:-480} python3 benchmarks/gpu_bench.py --db $db --queries $BD/bench_queries.fasta \
      --repeat 2 --mode "$KV_MODES" --skip-start --json "$OUT/gpu_bench_kv_$name.json" > "$OUT/gpu_bench_kv_$name.log" 2>&1
    echo "rc=$?" | tee -a "$OUT/log.txt"
    grep -E "^!!" "$OUT/gpu_bench_kv_$name.log" | tee -a "$OUT/log.txt"
    sed -n '/^summary/,$p' "$OUT/gpu_bench_kv_$name.log" | tee -a "$OUT/log.txt"
  done
fi
if has_phase NCU; then
  # ncu on the first 4 s16 kernels of query 19 (5,478 aa) of bench200M, per variant in
  # NCU_VARIANTS ("-" = the default): shared-memory wavefronts against the SM's one per clock
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  for v in ${NCU_VARIANTS:-- nolob,u1,b0}; do
    [ "$v" = - ] && v=""
    SWGPU_KERNEL_VARIANT=$v timeout 240 $NCU --profile-from-start off --clock-control none -k regex:kernel_py -c 4 \
      --section Occupancy --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed_op_shared_ld.sum,sm__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio,smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio,smsp__average_warp_latency_issue_stalled_selected.ratio,smsp__average_warp_latency_issue_stalled_not_selected.ratio \
      python3 benchmarks/gpu_profile.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta --pick 19 --mode s16 --ncu \
      > "$OUT/ncu_s16_${v:-default}.txt" 2>&1
    echo "== ncu s16 ${v:-default} rc=$?" | tee -a "$OUT/log.txt"
    grep -E "kernel_py|Registers Per|Achieved Occupancy|Theoretical Occupancy|wavefronts|bank_conflicts|op_shared_ld|inst_executed|cycles_elapsed|issue_active|pipe_|stalled" \
      "$OUT/ncu_s16_${v:-default}.txt" | head -80 | tee -a "$OUT/log.txt"
  done
fi
if has_phase MENU; then
  # shape menus (SWGPU_CONFIGS "single;multi", "-" = the default) on bench200M, one process each,
  # in the order given; top hits compared between them
  k=0
  for cfg in ${MENU_CONFIGS:--}; do
    k=$((k + 1)); [ "$cfg" = - ] && cfg=""
    echo "== gpu_bench 20 queries, menu $k: ${cfg:-default}" | tee -a "$OUT/log.txt"
    SWGPU_CONFIGS=$cfg timeout ${MENU_TIMEOUT:-150} python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta \
      --queries $BD/bench_queries.fasta --repeat 2 --skip-start --json "$OUT/gpu_bench_menu$k.json" \
      > "$OUT/gpu_bench_menu$k.log" 2>&1
    echo "rc=$?" | tee -a "$OUT/log.txt"
    grep -E "warm-up|^TOTAL" "$OUT/gpu_bench_menu$k.log" | tee -a "$OUT/log.txt"
  done
  python3 -c "
import json, sys
runs = [json.load(open(f'$OUT/gpu_bench_menu{i}.json')) for i in range(1, $k + 1)]
hits = [r['variants'][0]['top_hits'] for r in runs]
print('top hits equal across menus:', all(h == hits[0] for h in hits))
" 2>&1 | tee -a "$OUT/log.txt"
fi
if has_phase GT || has_phase GK; then
  precompile_all; gpu_tests 430  # (the suite took 298-331 s in runs 226 and 229b)
  has_phase GK && kernel_bench
fi
if has_phase S; then
  has_phase T || has_phase GT || has_phase GK || precompile_all  # they precompiled already
  # WARM_AB=1: config warm_start false, then true, on this machine, and the tables compared
  for warm in $([ "${WARM_AB:-0}" = 1 ] && echo "false true" || echo "${WARM_START:-true}"); do
    echo "== workflow, one shard, warm caches, warm_start $warm" | tee -a "$OUT/log.txt"
    timeout 240 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
      --queries 20=$BD/bench_queries.fasta --queries 500=$D/uniprot_queries500.fasta.gz \
      --cores 16 --threads 16 --shards 1 --workdir /tmp/scaleS_$warm --warm-start $warm \
      --json "$OUT/scale_S_$warm.json" 2>&1 | tee -a "$OUT/log.txt"
    tar czf "$OUT/stats_S_$warm.tgz" -C /tmp/scaleS_$warm q20/results/stats q500/results/stats \
      q500/snakemake.log q20/snakemake.log q20/results/logs q500/results/logs 2>/dev/null
  done
  # PLUGIN_AB=1: then the same again with snakemake-executor-plugin-slurm removed from
  # the carried site (a GPU install, '.[cuda13]', has no SLURM plugin; with it, Snakemake
  # imports the plugin, and pandas with it, at every start); S_REPEAT=N: N more 20-query
  # runs after each
  for plug in $([ "${PLUGIN_AB:-0}" = 1 ] && echo "with without" || echo "as-carried"); do
    if [ "$plug" = without ]; then
      remove_slurm_plugin
      echo "== SLURM plugin removed from $SITE" | tee -a "$OUT/log.txt"
      timeout 240 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
        --queries 20=$BD/bench_queries.fasta --queries 500=$D/uniprot_queries500.fasta.gz \
        --cores 16 --threads 16 --shards 1 --workdir /tmp/scaleS_noplugin \
        --json "$OUT/scale_S_noplugin.json" 2>&1 | tee -a "$OUT/log.txt"
    fi
    for n in $(seq 1 "${S_REPEAT:-0}"); do
      echo "== 20 queries again ($plug SLURM plugin), run $n" | tee -a "$OUT/log.txt"
      timeout 60 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
        --queries 20=$BD/bench_queries.fasta --cores 16 --threads 16 --shards 1 \
        --workdir /tmp/scaleR_${plug}_$n --json /tmp/scaleR_${plug}_$n.json 2>&1 \
        | grep -A12 "== q20" | tee -a "$OUT/log.txt"
      python3 -c "
import json; d = json.load(open('/tmp/scaleR_${plug}_$n/q20/results/stats/traceback.json'))
print('   traceback align_s', round(d['align_s'], 3))" 2>&1 | tee -a "$OUT/log.txt"
    done
  done
  # AB_VAR=NAME AB_PAIRS=N: N pairs of 20-query runs with NAME=0, then unset (the default)
  for n in $(seq 1 "${AB_PAIRS:-0}"); do
    for v in 0 default; do
      echo "== 20 queries, ${AB_VAR}=$v, pair $n" | tee -a "$OUT/log.txt"
      ( [ "$v" = default ] && unset "$AB_VAR" || export "$AB_VAR=$v"
        timeout 60 python3 benchmarks/workflow_scale.py --database $BD/bench_db.fasta \
          --queries 20=$BD/bench_queries.fasta --cores 16 --threads 16 --shards 1 \
          --workdir /tmp/scaleAB_${v}_$n --json /tmp/scaleAB_${v}_$n.json > /tmp/scaleAB_${v}_$n.out 2>&1
        grep -A12 "== q20" /tmp/scaleAB_${v}_$n.out | tee -a "$OUT/log.txt" )
      # a run that failed: its output's end and its logs come back
      [ -f /tmp/scaleAB_${v}_$n/q20/results/stats/traceback.json ] || {
        tail -40 /tmp/scaleAB_${v}_$n.out | tee -a "$OUT/log.txt"
        tar czf "$OUT/failed_AB_${v}_$n.tgz" -C /tmp/scaleAB_${v}_$n q20/results/logs q20/snakemake.log \
          q20/.snakemake/log 2>/dev/null; }
      python3 -c "
import json; d = json.load(open('/tmp/scaleAB_${v}_$n/q20/results/stats/traceback.json'))
print('   traceback align_s', round(d['align_s'], 3), 'phases', d['phases_s'])" | tee -a "$OUT/log.txt"
    done
  done
  if [ "${AB_PAIRS:-0}" -gt 0 ]; then  # the last pair's tables, compared
    for t in hits.tsv alignments.tsv; do
      cmp -s /tmp/scaleAB_0_$AB_PAIRS/q20/results/$t /tmp/scaleAB_default_$AB_PAIRS/q20/results/$t \
        && echo "$AB_VAR A/B: $t identical" || echo "$AB_VAR A/B: $t DIFFERS"
    done | tee -a "$OUT/log.txt"
  fi
  # STANDBY_AB=N: N pairs of 20-query runs, the warm process's GPU standby off, then on
  # (SWGPU_GPU_STANDBY), on this machine; the tables of the last pair compared
  for n in $(seq 1 "${STANDBY_AB:-0}"); do
    for sb in 0 1; do
      echo "== 20 queries, GPU standby $sb, pair $n" | tee -a "$OUT/log.txt"
      SWGPU_GPU_STANDBY=$sb timeout 60 python3 benchmarks/workflow_scale.py \
        --database $BD/bench_db.fasta --queries 20=$BD/bench_queries.fasta --cores 16 \
        --threads 16 --shards 1 --workdir /tmp/scaleSB_${sb}_$n \
        --json /tmp/scaleSB_${sb}_$n.json 2>&1 | grep -A12 "== q20" | tee -a "$OUT/log.txt"
      python3 -c "
import glob, json
for f in glob.glob('/tmp/scaleSB_${sb}_$n/q20/results/stats/score_shard/*.json'):
    r = json.load(open(f))
    print('score_shard', r.get('wall_s'), 'phases', r.get('phases_s'), 'startup',
          r.get('startup_s'), 'wait', r.get('startup_wait_s'), 'read', r.get('read_s'))
" 2>&1 | tee -a "$OUT/log.txt"
    done
  done
  if [ "${STANDBY_AB:-0}" -gt 0 ]; then
    n=$STANDBY_AB
    for t in hits.tsv alignments.tsv; do
      cmp -s /tmp/scaleSB_0_$n/q20/results/$t /tmp/scaleSB_1_$n/q20/results/$t \
        && echo "standby A/B: $t identical" || echo "standby A/B: $t DIFFERS"
    done | tee -a "$OUT/log.txt"
    tar czf "$OUT/stats_SB.tgz" -C /tmp scaleSB_0_$n/q20/results/stats \
      scaleSB_1_$n/q20/results/stats scaleSB_1_$n/q20/results/logs 2>/dev/null
  fi
  if [ "${WARM_AB:-0}" = 1 ]; then
    for q in q20 q500; do for t in hits.tsv alignments.tsv changes.tsv; do
      cmp -s /tmp/scaleS_false/$q/results/$t /tmp/scaleS_true/$q/results/$t \
        && echo "$q $t identical" || echo "$q $t DIFFERS"
    done; done | tee -a "$OUT/log.txt"
  fi
fi
if has_phase D; then
  # after S: what a process start costs on this host (each job's shell and swgpu, the
  # Snakefile's GPU listing, Snakemake's own start and DAG)
  TIMEFORMAT=%R
  for c in "python3 -c pass" "python3 -S -c pass" "python3 -m swgpu_tools.cli --version" \
      "nvidia-smi -L" "python3 -c 'import snakemake.cli'" \
      "python3 -m snakemake -s $PWD/Snakefile --directory /tmp/scaleS_true/q20 --configfile /tmp/scaleS_true/q20/config.yaml --cores 16 -n --forceall --quiet"; do
    t=$( { time (eval "$c" > /dev/null 2>&1) ; } 2>&1 | tr '\n' ' ')
    t2=$( { time (eval "$c" > /dev/null 2>&1) ; } 2>&1 | tr '\n' ' ')
    echo "startup: $t$t2 s: $c" | tee -a "$OUT/log.txt"
  done
fi
if has_phase AT; then
  # after S: the 20 queries' alignments alone (align_first_call.py on S's results) with
  # 16, 8 and 4 threads: does the traceback's align phase scale with threads, or does a
  # long query's few alignments bound it?
  # (AT_THREADS, "16 8 4"; AT_SCORES=1: each also with the hits' scores given)
  for th in ${AT_THREADS:-16 8 4}; do
    for sc in "" $([ "${AT_SCORES:-0}" = 1 ] && echo --scores); do
      echo "== align_first_call.py, $th threads $sc" | tee -a "$OUT/log.txt"
      timeout 120 python3 benchmarks/align_first_call.py /tmp/scaleS_true/q20/results \
        $BD/bench_queries.fasta --threads $th $sc 2>&1 | tee -a "$OUT/log.txt"
    done
  done
fi
if has_phase DIAG; then
  # after S: where a small run's time outside the GPU goes on this host.  Micro-timings
  # (pandas' import, which Snakemake's main process does when it first records a job's
  # params; writing, hashing and re-reading 200 MB), then the 20-query run again with
  # Snakemake's main process under cProfile and every swgpu process too (SWGPU_PROFILE)
  TIMEFORMAT=%R
  for c in "python3 -c 'import pandas'" "python3 -c 'import matplotlib.pyplot'" \
      "dd if=/dev/zero of=/tmp/dd.bin bs=1M count=200 status=none" \
      "python3 -c 'import hashlib; hashlib.sha256(open(\"/tmp/dd.bin\",\"rb\").read())'" \
      "python3 -c 'import hashlib; hashlib.blake2b(open(\"/tmp/dd.bin\",\"rb\").read())'" \
      "python3 -c 'open(\"/tmp/dd.bin\",\"rb\").read()'" \
      "python3 -c 'import os; d=os.urandom(1<<20)*200; f=open(\"/tmp/dd2.bin\",\"wb\"); f.write(d); f.close()'"; do
    t=$( { time (eval "$c" > /dev/null 2>&1) ; } 2>&1 | tr '\n' ' ')
    t2=$( { time (eval "$c" > /dev/null 2>&1) ; } 2>&1 | tr '\n' ' ')
    echo "diag: $t$t2 s: $c" | tee -a "$OUT/log.txt"
  done
  rm -f /tmp/dd.bin /tmp/dd2.bin
  # bytecode: which packages' modules have none for this Python (PYTHONDONTWRITEBYTECODE is
  # set on this image, so those are compiled from source in every process that imports them)
  echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}" | tee -a "$OUT/log.txt"
  python3 - <<'PYEOF' 2>&1 | tee -a "$OUT/log.txt"
import importlib.util, os, sys
tag = sys.implementation.cache_tag
for name in ("snakemake", "pandas", "matplotlib", "numba", "numpy", "scipy", "Bio", "swgpu_tools", "pulp", "sqlalchemy"):
    spec = importlib.util.find_spec(name)
    root = os.path.dirname(spec.origin)
    py = pyc = 0
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                py += 1
                pyc += os.path.exists(os.path.join(d, "__pycache__", f[:-3] + f".{tag}.pyc"))
    print(f"bytecode: {name:12s} {pyc:5d} of {py:5d} modules ({root})")
PYEOF
  for c in "python3 -c 'import pandas'" "python3 -c 'import matplotlib.pyplot'" "python3 -c 'import snakemake.cli'"; do
    t=$( { time (eval "env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pycache-diag $c" > /dev/null 2>&1) ; } 2>&1 | tr '\n' ' ')
    t2=$( { time (eval "env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pycache-diag $c" > /dev/null 2>&1) ; } 2>&1 | tr '\n' ' ')
    echo "diag, bytecode in a prefix (first, second): $t$t2 s: $c" | tee -a "$OUT/log.txt"
  done
  W=/tmp/diag20; rm -rf $W; mkdir -p $W
  cp /tmp/scaleS_true/q20/config.yaml $W/config.yaml
  rm -rf /tmp/prof20; mkdir -p /tmp/prof20
  t0=$(ts)
  SWGPU_PROFILE=/tmp/prof20 timeout 120 python3 -m cProfile -o "$OUT/smk_q20.prof" -m snakemake \
    -s $PWD/Snakefile --directory $W --configfile $W/config.yaml --cores 16 > "$OUT/smk_q20.log" 2>&1
  echo "20 queries, Snakemake and every swgpu process under cProfile: $(el $t0 $(ts)) s" | tee -a "$OUT/log.txt"
  python3 benchmarks/step_timeline.py $W 2>/dev/null | tee -a "$OUT/log.txt"
  tar czf "$OUT/prof20.tgz" -C /tmp prof20
  tar czf "$OUT/diag20_stats.tgz" -C $W results/stats results/logs 2>/dev/null
fi
echo "phase $PHASE done" | tee -a "$OUT/log.txt"
