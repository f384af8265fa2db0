#!/bin/bash
# Issue 14 prototype (benchmarks/qp2_proto.py): two queries per packed register against the
# s16 kernels, same databases, one call.  Carry .whl-smk and gpu_bench_data.
#   QP2_VARIANTS="32x2:256 32x4:256 16x2:128" DBS="bench peak_1024 peak_256" bash benchmarks/qp2_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SWGPU_CACHE_DIR=/tmp/swgpu-cache
SITE=/tmp/site
if [ ! -f $SITE/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE .whl-smk/*.whl || exit 1
  touch $SITE/.done
fi
mkdir -p /tmp/sc; cp benchmarks/device_sitecustomize.py /tmp/sc/sitecustomize.py
export PYTHONPATH=/tmp/sc:$SITE:$PWD
D=$PWD/gpu_bench_data; BD=/tmp/bench; mkdir -p $BD
LOG="$OUT/log.txt"
echo "commit ${SWGPU_COMMIT:-unknown}; $(date -u +%FT%TZ)" | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
[ -f $BD/bench_db.fasta ] || ( cd $BD && python3 $D/synth_db.py --template $D/uniprot20k.fasta.gz --residues 2e8 \
    --db bench_db.fasta --queries bench_queries.fasta > synth.log 2>&1 )
python3 - <<'PY'
from itertools import islice
recs, cur = [], None
for line in open("/tmp/bench/bench_queries.fasta"):
    if line.startswith(">"):
        cur = [line, ""]; recs.append(cur)
    else:
        cur[1] += line
with open("/tmp/bench/q10.fasta", "w") as f:
    for h, s in recs[:10]:
        f.write(h + s)
PY
grep -c '>' $BD/q10.fasta | tee -a "$LOG"
python3 benchmarks/peak_db.py --lengths 256 1024 --residues 1e8 --out-dir /tmp/peak > /dev/null
for db in ${DBS:-bench peak_1024 peak_256}; do
  f=/tmp/peak/$db.fasta; [ $db = bench ] && f=$BD/bench_db.fasta
  echo "== $db: qp2" | tee -a "$LOG"
  for v in ${QP2_VARIANTS:-32x2:256 32x4:256 16x2:128}; do
    timeout ${QP2_TIMEOUT:-200} python3 benchmarks/qp2_proto.py --db $f --queries $BD/q10.fasta --R ${v%%:*} \
      --block ${v##*:} --repeat 3 ${CHECK:---check} 2>&1 | grep -v Warning | tee -a "$LOG"
  done
  [ "${SKIP_S16:-0}" = 1 ] && continue
  echo "== $db: s16 (gpu_bench, the same 10 queries)" | tee -a "$LOG"
  timeout ${S16_TIMEOUT:-240} python3 benchmarks/gpu_bench.py --db $f --queries $BD/q10.fasta --repeat 2 --skip-start \
    --json "$OUT/gpu_bench_$db.json" > "$OUT/gpu_bench_$db.log" 2>&1
  echo "rc=$?" | tee -a "$LOG"
  grep -E "^BQ|overall|GCUPS" "$OUT/gpu_bench_$db.log" | tail -14 | tee -a "$LOG"
done
