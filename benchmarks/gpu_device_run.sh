#!/bin/bash
# One device-machine session: install carried wheels, build bench200M, run the GPU
# tests and the benchmark.  Usage (repo root, on the GPU machine):
#   bash benchmarks/gpu_device_run.sh [tests|bench|all] [extra bench args...]
# Needs the carried folders .whl (numpy 2.4, biopython, numba-cuda 0.30.4 wheels)
# and gpu_bench_data (synth_db.py, uniprot20k.fasta.gz, oracle files).
set -u
what=${1:-all}; shift || true
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export SWGPU_CACHE_DIR=/tmp/swgpu-cache
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/device.txt"
python3 -c "import numba, numba_cuda, numpy, llvmlite; print('numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__, 'llvmlite', llvmlite.__version__)" | tee -a "$OUT/device.txt"
BD=/tmp/bench; mkdir -p $BD
if [ ! -s $BD/bench_db.fasta ]; then
  ( cd $BD && python3 $OLDPWD/gpu_bench_data/synth_db.py --template $OLDPWD/gpu_bench_data/uniprot20k.fasta.gz \
      --residues 2e8 --db bench_db.fasta --queries bench_queries.fasta ) | tail -1
fi
export SWGPU_TEST_DATA=$PWD/gpu_bench_data SWGPU_BENCH_DB=$BD/bench_db.fasta SWGPU_BENCH_QUERIES=$BD/bench_queries.fasta
if [ "$what" = tests ] || [ "$what" = all ]; then
  python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_kernels_gpu.py 2>&1 | tee "$OUT/tests.log" | tail -25
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  python3 benchmarks/gpu_bench.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta \
     --start-db gpu_bench_data/uniprot20k.fasta.gz --json "$OUT/bench${BENCH_TAG:-}.json" "$@" 2>&1 | tee "$OUT/bench${BENCH_TAG:-}.log"
fi
