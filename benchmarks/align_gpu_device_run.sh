#!/bin/bash
# One single-GPU device session for the GPU forward pass of pair batches
# (`swgpu align --backend gpu`, swgpu_tools.kernels.gpu.pair_ends):
#   bash benchmarks/align_gpu_device_run.sh      (repo root; carry .whl and gpu_bench_data)
# 1. compiles the pair kernels (R = 8, 16, 32, 64; forward and reverse kinds) in
#    parallel processes;
# 2. GPU tests of the pair kernels (pytest -m gpu tests/test_pairs_gpu.py);
# 3. benchmark (unless SKIP_BENCH=1): 1,000 DNA pairs x 512 bp (local) and $PAIRS
#    protein pairs of 200-1,000 residues (local, semi-global): GPU passes, CPU
#    traceback, end to end, and the CPU backend on the same pairs, alignments compared;
# 4. swgpu align (FASTA in, TSV out) on the same workloads with --backend auto / gpu /
#    cpu: wall clock, the backend log lines, tables compared byte for byte.
# Logs and JSON under $OUT.  SWGPU_COMMIT names the commit (no .git on the device).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PAIRS=${PAIRS:-100000}
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  # as a plain `pip install` would: byte-compile (the image sets PYTHONDONTWRITEBYTECODE=1,
  # so without this every process compiles numba-cuda's sources again, ~1.7 s)
  python3 -m compileall -q -j 0 /tmp/site swgpu_tools > /dev/null
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/device.txt"
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core)" | tee -a "$OUT/device.txt"
for R in 8 16 32 ${R64-64}; do
  for K in local semi local_rev global_rev; do
    [ $R = 64 ] && [ ${K%_rev} != $K ] && continue
    ( python3 -c "from swgpu_tools.kernels import gpu; import time; t=time.time(); gpu.get_pair_kernel($R, '$K'); print('pair kernel $K R=$R compiled in %.1f s' % (time.time()-t))" >> "$OUT/compile.log" 2>&1 ) &
  done
done
wait
cat "$OUT/compile.log"
echo "== tests"
[ -n "${SKIP_TESTS:-}" ] || timeout ${TEST_TIMEOUT:-240} python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_pairs_gpu.py 2>&1 | tee "$OUT/tests.log" | tail -15
if [ -z "${SKIP_BENCH:-}" ]; then
echo "== bench"
timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/align_pairs_gpu_bench.py --protein-pairs $PAIRS \
  --r-values ${R_VALUES:-16,32,64} --out "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
fi
echo "== swgpu align (CLI): 1,000 DNA pairs; $PAIRS protein pairs (FASTA in, TSV out)"
python3 - $PAIRS <<'PY'
import sys; sys.path.insert(0, "benchmarks")
from align_pairs_bench import dna_pairs, uniprot_templates
from align_pairs_gpu_bench import protein_pairs_fast
with open("/tmp/dna_pairs.fa", "w") as fh:
    for k, (a, b) in enumerate(dna_pairs(1000)):
        fh.write(f">q{k}\n{a}\n>s{k}\n{b}\n")
with open("/tmp/protein_pairs.fa", "w") as fh:
    pairs = protein_pairs_fast(int(sys.argv[1]), uniprot_templates("gpu_bench_data/uniprot20k.fasta.gz"))
    for k, (a, b) in enumerate(pairs):
        fh.write(f">q{k}\n{a}\n>s{k}\n{b}\n")
PY
for b in auto gpu cpu; do
  python3 -m swgpu_tools.cli align /tmp/dna_pairs.fa --mode local --match 1 --mismatch -1 \
    --gap-open 0 --gap-extend 2 --backend $b --out /tmp/dna_$b.tsv 2>&1 | tee -a "$OUT/cli.log"
done
cmp /tmp/dna_gpu.tsv /tmp/dna_cpu.tsv && cmp /tmp/dna_auto.tsv /tmp/dna_cpu.tsv && \
  echo "DNA tables identical (auto == gpu == cpu)" | tee -a "$OUT/cli.log"
for mode in local semiglobal; do
  for b in auto gpu cpu; do
    t0=$(date +%s.%N)
    python3 -m swgpu_tools.cli align /tmp/protein_pairs.fa \
      --mode $mode --backend $b --out /tmp/prot_${mode}_$b.tsv 2>&1 | tee -a "$OUT/cli.log"
    echo "protein $mode --backend $b: wall $(awk "BEGIN{printf \"%.2f\", $(date +%s.%N) - $t0}") s" | tee -a "$OUT/cli.log"
  done
  cmp /tmp/prot_${mode}_auto.tsv /tmp/prot_${mode}_cpu.tsv && cmp /tmp/prot_${mode}_gpu.tsv /tmp/prot_${mode}_cpu.tsv && \
    echo "protein $mode tables identical (auto == gpu == cpu)" | tee -a "$OUT/cli.log"
done
