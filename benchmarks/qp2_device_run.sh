#!/bin/bash
# Issue 14 prototype (benchmarks/qp2_proto.py): two queries per packed register against the
# s16 kernels, same databases, one call.  Carry .whl-smk and gpu_bench_data.
#   QP2_VARIANTS="32x2:256 32x4:256 16x2:128" DBS="bench peak_1024 peak_256" bash benchmarks/qp2_device_run.sh
# A variant is RxU[@v+v]:block (qp2_proto.py --R, --block).  Sections, each optional:
#   DBS (default "bench peak_1024 peak_256"; " " for none): qp2 BQ01-BQ10 in pairs, --check,
#     then s16 (gpu_bench) on the same queries unless SKIP_S16=1;
#   PROBES: timing variants on BQ09 + BQ10;  NCU=1 (NCU_R): ncu of one launch;
#   SAME=1 (SAME_DB, SAME_VARIANTS): s16 and qp2 on one database;
#   TILES=1 (TILE_VARIANTS, TILE_CHECK, TILE_S16): BQ11-BQ20 in tiles against s16;
#   CHAINS=1 (CHAIN_VARIANTS, CHAIN_CHECK, CHAIN_LAYOUTS): all 20 queries (--chains, and
#     --chains --stream for the layout "stream") against s16.
# NO_PEAK=1 skips making the peak databases.
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
# s16 (gpu_bench.py) on one database: $1 database, $2 queries, $3 repeats, $4 log name
# under $OUT, $5 the lines shown (grep -E), $6 at most that many of them, $7 time limit;
# the rest: more gpu_bench.py options
s16_bench() {
  local db=$1 q=$2 rep=$3 name=$4 show=$5 most=$6 lim=$7
  shift 7
  timeout "$lim" python3 benchmarks/gpu_bench.py --db "$db" --queries "$q" --repeat "$rep" --skip-start "$@" \
    > "$OUT/$name.log" 2>&1
  echo "rc=$?" | tee -a "$LOG"
  grep -E "$show" "$OUT/$name.log" | tail -n "$most" | tee -a "$LOG"
}
[ "${NO_PEAK:-0}" = 1 ] || python3 benchmarks/peak_db.py --lengths 256 1024 --residues 1e8 --out-dir /tmp/peak > /dev/null
for db in ${DBS:-bench peak_1024 peak_256}; do
  f=/tmp/peak/$db.fasta; [ $db = bench ] && f=$BD/bench_db.fasta
  echo "== $db: qp2" | tee -a "$LOG"
  for v in ${QP2_VARIANTS:-32x2:256 32x4:256 16x2:128}; do
    timeout ${QP2_TIMEOUT:-200} python3 benchmarks/qp2_proto.py --db $f --queries $BD/q10.fasta --R ${v%%:*} \
      --block ${v##*:} --repeat 3 ${CHECK:---check} 2>&1 | grep -v Warning | tee -a "$LOG"
  done
  [ "${SKIP_S16:-0}" = 1 ] && continue
  echo "== $db: s16 (gpu_bench, the same 10 queries)" | tee -a "$LOG"
  s16_bench $f $BD/q10.fasta 2 gpu_bench_$db "^BQ|overall|GCUPS" 14 ${S16_TIMEOUT:-240} \
    --json "$OUT/gpu_bench_$db.json"
done
# PROBES="32x4@nobest:256 ...": timing probes on bench200M with BQ09 + BQ10 only
awk '/^>/{n++} n>=9 && n<=10' $BD/q10.fasta > $BD/q2.fasta
if [ -n "${PROBES:-}" ]; then
  echo "== probes on bench200M, BQ09 + BQ10" | tee -a "$LOG"
  for v in $PROBES; do
    timeout 200 python3 benchmarks/qp2_proto.py --db $BD/bench_db.fasta --queries $BD/q2.fasta --R ${v%%:*} \
      --block ${v##*:} --repeat 3 2>&1 | grep -E '^R=|^pair' | tee -a "$LOG"
  done
fi
# NCU=1: ncu on one qp2 launch (32x4, BQ09 + BQ10 on bench200M): pipes and stalls
if [ "${NCU:-0}" = 1 ]; then
  NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  M=smsp__issue_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg,sm__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.avg.per_cycle_active
  for s in short_scoreboard long_scoreboard wait math_pipe_throttle not_selected selected dispatch_stall no_instruction barrier mio_throttle lg_throttle branch_resolving drain; do
    M=$M,smsp__average_warp_latency_issue_stalled_$s.ratio
  done
  M=$M,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
  for q in ${NCU_R:-32x4}; do
    blk=${q##*:}; [ "$blk" = "$q" ] && blk=256; q=${q%%:*}
    timeout 240 $NCUB --clock-control none -k regex:kernel_py --launch-skip 1 -c 1 --section Occupancy \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats --print-details all \
      --metrics "$M" \
      python3 benchmarks/qp2_proto.py --db $BD/bench_db.fasta --queries $BD/q2.fasta --R $q --block $blk --repeat 1 \
      > "$OUT/ncu_qp2_$(echo $q | tr '@+' '__').txt" 2>&1
    echo "== ncu qp2 $q rc=$?" | tee -a "$LOG"
    grep -vE '^\s*$|==PROF==|^pair|^R=' "$OUT/ncu_qp2_$(echo $q | tr '@+' '__').txt" | grep -E '%|ratio|cycles|inst|Inst|Pipe|pipe|Registers|Occupancy|Error|ERR|IPC|Issue' | head -120 | tee -a "$LOG"
  done
fi
# SAME=1: s16 and qp2 on one machine, one database (peak 1,024 aa): s16 with BQ20 alone
# (5,478 aa: its padded rate, the 32x32 single-pass kernels, ~99 % of rows real) and with
# BQ09 + BQ10; qp2 with BQ09 + BQ10 (SAME_VARIANTS)
if [ "${SAME:-0}" = 1 ]; then
  SDB=${SAME_DB:-/tmp/peak/peak_1024.fasta}
  awk '/^>/{n++} n==20' $BD/bench_queries.fasta > $BD/q20only.fasta
  for qf in q20only q2; do
    echo "== s16 gpu_bench $SDB $qf" | tee -a "$LOG"
    s16_bench $SDB $BD/$qf.fasta 3 same_s16_$qf "^BQ|TOTAL" 1000 200
  done
  for v in ${SAME_VARIANTS:-32x4:256 32x2@fmax+pre:384}; do
    timeout 200 python3 benchmarks/qp2_proto.py --db $SDB --queries $BD/q2.fasta --R ${v%%:*} \
      --block ${v##*:} --repeat 3 2>&1 | grep -E '^R=|^pair' | tee -a "$LOG"
  done
fi
# TILES=1: queries over 32*R rows in tiles (one launch each): BQ11-BQ20 in pairs on bench200M
# against s16 (gpu_bench) on the same queries, and all 20; TILE_VARIANTS
if [ "${TILES:-0}" = 1 ]; then
  awk '/^>/{n++} n>=11' $BD/bench_queries.fasta > $BD/q_long.fasta
  for v in ${TILE_VARIANTS:-32x4@fmax+pre:384}; do
    echo "== qp2 tiles $v, BQ11-BQ20" | tee -a "$LOG"
    timeout 300 python3 benchmarks/qp2_proto.py --db $BD/bench_db.fasta --queries $BD/q_long.fasta --R ${v%%:*} \
      --block ${v##*:} --repeat 2 ${TILE_CHECK:---check} 2>&1 | grep -E '^R=|^pair|check|Error|error' | tee -a "$LOG"
  done
  for qf in ${TILE_S16:-q_long bench_queries}; do
    echo "== s16 gpu_bench bench200M $qf" | tee -a "$LOG"
    s16_bench $BD/bench_db.fasta $BD/$qf.fasta 2 tiles_s16_$qf "^BQ|TOTAL" 1000 200
  done
fi
# CHAINS=1: all 20 benchmark queries at once (--chains: short queries chained down a tile,
# long ones paired in tiles) on bench200M against s16 (gpu_bench) on the same 20
if [ "${CHAINS:-0}" = 1 ]; then
  for lay in ${CHAIN_LAYOUTS:-units}; do
    for v in ${CHAIN_VARIANTS:-32x2@fmax+pre:384}; do
      echo "== qp2 --chains ($lay) $v, the 20 queries" | tee -a "$LOG"
      timeout 300 python3 benchmarks/qp2_proto.py --db $BD/bench_db.fasta --queries $BD/bench_queries.fasta \
        --chains $([ $lay = stream ] && echo --stream) --R ${v%%:*} --block ${v##*:} --repeat 2 \
        ${CHAIN_CHECK:---check} 2>&1 | grep -E '^chains|^stream|unit|tile:|check|differ|rror' | tee -a "$LOG"
    done
  done
  echo "== s16 gpu_bench bench200M, the 20 queries" | tee -a "$LOG"
  s16_bench $BD/bench_db.fasta $BD/bench_queries.fasta 2 chains_s16 "TOTAL" 1000 200
fi
