#!/bin/bash
# CUDASW++ 4.0 and swgpu side by side, in one device-machine session (issue 14).
#
# Builds CUDASW++ 4.0 (its aligner `align` and `makedb`) from the exported source tree
# carried in .carry-cudasw/CUDASW4, then runs both tools on the same databases and the
# same queries and prints markdown tables (benchmarks/cudasw_compare_table.py):
#   bench200m  the project's benchmark database (gpu_bench_data/synth_db.py, 2e8 residues,
#              its 20 queries of 144..5478 residues);
#   peak       CUDASW++'s peak setting (its runpeakbenchmark.sh): databases of equal-length
#              sequences, one per length (benchmarks/peak_db.py writes them as FASTA; both
#              tools read the same file; CUDASW++'s own --pseudodb runs beside for reference),
#              searched with CUDASW++'s query set (its allqueries.fasta: 20 queries, same
#              lengths as bench200M's).
# Usage (repo root, on the GPU machine; carry .whl (or .whl-smk: the image's numba-cuda is
# used then, and biopython comes from there), gpu_bench_data and .carry-cudasw):
#   bash benchmarks/cudasw_compare_run.sh
# Knobs (environment):
#   WHAT="bench200m peak"       what to run ("build" only builds CUDASW++; works without a GPU)
#   CUDASW_MODES="dpx half2"    dpx: DPXs16 kernels, DPXs32 for long sequences and overflows;
#                               half2: CUDASW++'s default (Half2, Float for long / overflows)
#   PEAK_LENGTHS="128 256 512 768 1024 2048" (CUDASW++'s list)   PEAK_RESIDUES=1e8 per length
#                               (or PEAK_COUNT=N sequences per length; CUDASW++'s script: 1000000)
#   PEAK_QUERIES=cudasw|bench   query file for the peak setting (default: CUDASW++'s own)
#   CUDASW_PSEUDO_MODES="dpx"   modes also run on CUDASW++'s built-in --pseudodb ("" = none)
#   CUDASW_PASSES=2             the query file is given this many times; the tables report
#                               the passes after the first (the first pays CUDASW++'s warm-up)
#   SWGPU_REPEAT=2              gpu_bench.py --repeat (after its own warm-up pass)
#   SWGPU_MODES="auto"          swgpu kernel modes to run ("auto h16": also the binary16
#                               no-DPX path, SWGPU_GPU_MODE=h16, written as swgpu_h16.json)
#   TOP=10                      hits kept per query by both tools
#   CUDASW_GOP=-12 CUDASW_GEX=-1   CUDASW++'s gap scores; see GAPS below
#   CUDASW_ARCH=sm_90a BUILD_JOBS=16 PRECOMPILE_JOBS=6 NVCC=path DEADLINE_S=560
#   CUDASW_ZLIB=carried         build against the carried zlib even where the system has one
#   REUSE_BUILD=1               keep an earlier build in /tmp/cudasw4-src (local tests)
#   SWGPU_PRECOMPILE=0 BENCH_RESIDUES=2e8   (local tests: no kernel precompile, a smaller bench db)
#
# GAPS: swgpu scores BLOSUM62 with BLAST's gap open 11, extend 1 (a gap of k residues costs
# 11 + k).  CUDASW++'s kernels compute E = max(E + gex, H + gop) (e.g. src/dpx_s16_kernels.cuh,
# src/half2_kernels.cuh), so a gap of k costs -(gop + (k-1) gex): BLAST 11/1 is gop -12, gex -1.
# Its default (gop -11, gex -1, the CudaSW4 members in src/cudasw4.cuh) is BLAST 10/1.  Its
# `align` parses --gop/--gex (src/options.cpp) but src/main.cu never hands them to the CudaSW4
# object (CudaSW4::setGapOpenScore / setGapExtendScore have no caller), so the options have no
# effect: this script inserts those two calls into the build copy of main.cu (CUDASW_PATCH_GAPS=0
# builds it untouched, which then scores BLAST 10/1).  The tables print both tools' top score
# per query to check.
set -u
ROOT=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$SECONDS
WHAT=${WHAT:-bench200m peak}
CUDASW_MODES=${CUDASW_MODES:-dpx half2}
PEAK_LENGTHS=${PEAK_LENGTHS:-128 256 512 768 1024 2048}
PEAK_RESIDUES=${PEAK_RESIDUES:-1e8}
PEAK_COUNT=${PEAK_COUNT:-}
PEAK_QUERIES=${PEAK_QUERIES:-cudasw}
CUDASW_PSEUDO_MODES=${CUDASW_PSEUDO_MODES-dpx}
CUDASW_PASSES=${CUDASW_PASSES:-2}
SWGPU_REPEAT=${SWGPU_REPEAT:-2}
SWGPU_MODES=${SWGPU_MODES:-auto}
TOP=${TOP:-10}
CUDASW_GOP=${CUDASW_GOP:--12}
CUDASW_GEX=${CUDASW_GEX:--1}
CUDASW_PATCH_GAPS=${CUDASW_PATCH_GAPS:-1}
CUDASW_ARCH=${CUDASW_ARCH:-sm_90a}
BUILD_JOBS=${BUILD_JOBS:-16}
PRECOMPILE_JOBS=${PRECOMPILE_JOBS:-6}
DEADLINE_S=${DEADLINE_S:-560}
CARRY=$ROOT/.carry-cudasw
CSW_SRC=/tmp/cudasw4-src           # patched build copy of the carried tree
CSW_DB=/tmp/cudasw4-db             # makedb output
BD=/tmp/bench                      # bench200M FASTA (as benchmarks/gpu_device_run.sh)
PD=/tmp/peak                       # peak FASTA files
INFO=$OUT/run_info.txt             # key: value lines, read by cudasw_compare_table.py
: >"$INFO"

has() { case " $WHAT " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
el() { echo $((SECONDS - T0)); }
say() { echo "[$(printf '%4d' "$(el)") s] $*"; }
info() { echo "$1: $2" >>"$INFO"; }
left() { echo $((DEADLINE_S - (SECONDS - T0))); }
# limit <wanted seconds>: a timeout that ends before the deadline (at least 1: timeout 0 never ends)
limit() {
  local l
  l=$(($(left) - 10))
  [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"
}

info started "$(date -u +%FT%TZ)"
info what "$WHAT"
info modes "$CUDASW_MODES"
info cudasw_passes "$CUDASW_PASSES"
info swgpu_repeat "$SWGPU_REPEAT"
info top "$TOP"
info cudasw_gap "gop $CUDASW_GOP gex $CUDASW_GEX, patch $CUDASW_PATCH_GAPS"
[ -f "$CARRY/CUDASW4.commit" ] && info cudasw_commit "$(cat "$CARRY/CUDASW4.commit")"
info swgpu_tree "${SWGPU_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
if [ ! -f "$CARRY/CUDASW4/Makefile" ]; then
  say "no $CARRY/CUDASW4/Makefile: carry .carry-cudasw (see the report of issue 14)"
  exit 1
fi

# ---- device, swgpu set-up (as benchmarks/gpu_device_run.sh) ----
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,temperature.gpu,power.draw \
    --format=csv | tee "$OUT/device.txt"
  info device "$(nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | head -1)"
fi
if [ "$WHAT" != build ]; then
  if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$ROOT
  else
    source benchmarks/device_wheels.sh
    use_image_python || exit 1  # the image's numba-cuda; biopython from .whl-smk
  fi
  export SWGPU_CACHE_DIR=/tmp/swgpu-cache
  say "python set-up done (PYTHONPATH=$PYTHONPATH)"
fi

# ---- background: swgpu kernel precompile, database generation ----
PRE_PID='' GEN_PID='' PEAK_PID=''
if [ "$WHAT" != build ] && [ "${SWGPU_PRECOMPILE:-1}" = 1 ]; then
  python3 -c "
import json, time
t = time.perf_counter()
from swgpu_tools.kernels import gpu
modes = {m for m in '$SWGPU_MODES'.split() if m != 'auto'} | set(gpu.cache.device_modes())
r = gpu.precompile(modes=sorted(modes), jobs=$PRECOMPILE_JOBS)
print('precompile', round(time.perf_counter() - t, 1), 's', json.dumps(r, default=str)[:2000])
" >"$OUT/swgpu_precompile.log" 2>&1 &
  PRE_PID=$!
fi
if has bench200m || { has peak && [ "$PEAK_QUERIES" = bench ]; }; then
  mkdir -p $BD
  if [ ! -s $BD/bench_db.fasta ]; then
    (cd $BD && python3 "$ROOT/gpu_bench_data/synth_db.py" --template "$ROOT/gpu_bench_data/uniprot20k.fasta.gz" \
      --residues "${BENCH_RESIDUES:-2e8}" --db bench_db.fasta --queries bench_queries.fasta) >"$OUT/synth_db.log" 2>&1 &
    GEN_PID=$!
  fi
fi
if has peak; then
  if [ -n "$PEAK_COUNT" ]; then size=(--count "$PEAK_COUNT"); else size=(--residues "$PEAK_RESIDUES"); fi
  # shellcheck disable=SC2086
  python3 benchmarks/peak_db.py --lengths $PEAK_LENGTHS "${size[@]}" --out-dir $PD >"$OUT/peak_db.log" 2>&1 &
  PEAK_PID=$!
  info peak_size "${size[*]}"
fi

# ---- build CUDASW++ ----
NVCC=${NVCC:-$(command -v nvcc || printf '%s\n' /usr/local/cuda*/bin/nvcc | sort -V | tail -1)}
if [ -z "$NVCC" ] || [ ! -x "$NVCC" ]; then
  say "no nvcc found (PATH, /usr/local/cuda*/bin); set NVCC=/path/to/nvcc"
  exit 1
fi
PATH=$(dirname "$NVCC"):$PATH
export PATH
say "nvcc: $NVCC ($("$NVCC" --version | tail -2 | head -1))"
info nvcc "$("$NVCC" --version | grep -o 'release [0-9.]*, V[0-9.]*' | head -1)"
info host_compiler "$(g++ --version 2>/dev/null | head -1)"
# zlib: the system's if it compiles and links, else the carried Debian headers and libz.a
ZINC='' ZLINK=-lz
if [ "${CUDASW_ZLIB:-}" = carried ] || ! printf '#include <zlib.h>\nint main(){return zlibVersion()[0]==0;}\n' |
  g++ -x c++ - -lz -o /tmp/ztest >/dev/null 2>&1; then
  ZINC="-I$CARRY/zlib/include"
  ZLINK="$CARRY/zlib/lib/libz.a"
  say "zlib: using the carried headers and libz.a (the system's are missing, or CUDASW_ZLIB=carried)"
fi
info zlib "${ZINC:-system} $ZLINK"
if [ "${REUSE_BUILD:-0}" = 1 ] && [ -x $CSW_SRC/align ] && [ -x $CSW_SRC/makedb ]; then
  say "REUSE_BUILD=1: using the build in $CSW_SRC"
elif ! rm -rf $CSW_SRC || ! cp -r "$CARRY/CUDASW4" $CSW_SRC; then
  say "cannot copy $CARRY/CUDASW4 to $CSW_SRC"
  exit 1
elif [ "$CUDASW_PATCH_GAPS" = 1 ]; then
  # forward the parsed --gop/--gex to the CudaSW4 object (upstream never does)
  sed -i '0,/if(!options.usePseudoDB){/s//cudaSW4.setGapOpenScore(options.gop); cudaSW4.setGapExtendScore(options.gex);\n    &/' \
    $CSW_SRC/src/main.cu
  if [ "$(grep -c 'cudaSW4.setGapOpenScore(options.gop)' $CSW_SRC/src/main.cu)" != 1 ]; then
    say "gap patch did not apply to src/main.cu; stopping"
    exit 1
  fi
  diff -u "$CARRY/CUDASW4/src/main.cu" $CSW_SRC/src/main.cu >"$OUT/cudasw_patch.diff"
fi
say "building CUDASW++ (make -j$BUILD_JOBS align makedb, -arch=$CUDASW_ARCH)"
tb=$SECONDS
make -C $CSW_SRC -j"$BUILD_JOBS" align makedb \
  COMPILER="$NVCC" DIALECT="-std=c++17 -x cu" \
  NVCC_FLAGS="-arch=$CUDASW_ARCH -lineinfo --expt-relaxed-constexpr -rdc=true --extended-lambda -Xcompiler=-fopenmp $ZINC" \
  LDFLAGS="-Xcompiler=-pthread \$(NVCC_FLAGS) $ZLINK" >"$OUT/cudasw_build.log" 2>&1
brc=$?
info build_s $((SECONDS - tb))
info build_rc $brc
if [ $brc != 0 ] || [ ! -x $CSW_SRC/align ] || [ ! -x $CSW_SRC/makedb ]; then
  say "CUDASW++ build FAILED (rc $brc) after $((SECONDS - tb)) s; tail of $OUT/cudasw_build.log:"
  grep -m5 -i 'error' "$OUT/cudasw_build.log"
  tail -15 "$OUT/cudasw_build.log"
  exit 1
fi
say "CUDASW++ built in $((SECONDS - tb)) s"
[ "$WHAT" = build ] && exit 0

for pid in $GEN_PID $PEAK_PID; do
  wait "$pid" || say "a database generator failed (see $OUT/synth_db.log, $OUT/peak_db.log)"
done
[ -n "$GEN_PID" ] && tail -1 "$OUT/synth_db.log"
[ -n "$PEAK_PID" ] && cat "$OUT/peak_db.log"
say "databases ready; waiting for swgpu's precompile"
if [ -n "$PRE_PID" ]; then
  wait "$PRE_PID" || say "swgpu precompile failed (see $OUT/swgpu_precompile.log)"
  say "$(cut -c1-200 "$OUT/swgpu_precompile.log" | tail -1)"
fi

# ---- runners ----
kernel_args() {
  case $1 in
    dpx) echo "--singlePassType DPXs16 --manyPassType_small DPXs16 --manyPassType_large DPXs32 --overflowType DPXs32" ;;
    half2) echo "--singlePassType Half2 --manyPassType_small Half2 --manyPassType_large Float --overflowType Float" ;;
    *) return 1 ;;
  esac
}

# makedb <fasta> <prefix> <dir for log>
makedb() {
  local t=$SECONDS
  mkdir -p "$(dirname "$2")"
  timeout "$(limit 120)" $CSW_SRC/makedb "$1" "$2" >"$3/cudasw_makedb.log" 2>&1
  local rc=$?
  echo "makedb_s: $((SECONDS - t))" >>"$3/meta.txt"
  say "makedb $(basename "$1"): rc $rc, $((SECONDS - t)) s"
  return $rc
}

# cudasw <dir> <tag> <mode> <queries> <db args...>
cudasw() {
  local dir=$1 tag=$2 mode=$3 q=$4
  shift 4
  local ka qa=() t=$SECONDS tl
  ka=$(kernel_args "$mode") || {
    say "unknown CUDASW++ mode $mode"
    return 1
  }
  for _ in $(seq "$CUDASW_PASSES"); do qa+=(--query "$q"); done
  tl=$(limit 150)
  if [ "$tl" -lt 15 ]; then
    say "SKIP $tag (deadline)"
    return 1
  fi
  # shellcheck disable=SC2086
  timeout "$tl" $CSW_SRC/align "${qa[@]}" "$@" --top "$TOP" --verbose --uploadFull --prefetchDBFile \
    --mat blosum62 --gop "$CUDASW_GOP" --gex "$CUDASW_GEX" $ka --tsv --of "$dir/$tag.tsv" \
    >"$dir/$tag.log" 2>&1
  local rc=$?
  echo "${tag}_wall_s: $((SECONDS - t))" >>"$dir/meta.txt"
  echo "${tag}_rc: $rc" >>"$dir/meta.txt"
  say "$tag $(basename "$dir"): rc $rc, $((SECONDS - t)) s wall; $(grep 'Total time' "$dir/$tag.log" | tr '\n' ' ')"
}

# swgpu <dir> <fasta> <queries>: once per mode of SWGPU_MODES (auto: swgpu.json, else
# swgpu_<mode>.json with SWGPU_GPU_MODE=<mode>)
swgpu() {
  local dir=$1 t tl m tag
  for m in $SWGPU_MODES; do
    t=$SECONDS
    tag=swgpu
    [ "$m" != auto ] && tag=swgpu_$m
    tl=$(limit 240)
    if [ "$tl" -lt 30 ]; then
      say "SKIP $tag $(basename "$dir") (deadline)"
      return 1
    fi
    SWGPU_GPU_MODE=$m timeout "$tl" python3 benchmarks/gpu_bench.py --db "$2" --queries "$3" \
      --repeat "$SWGPU_REPEAT" --top-k "$TOP" --skip-start --json "$dir/$tag.json" >"$dir/$tag.log" 2>&1
    local rc=$?
    echo "${tag}_wall_s: $((SECONDS - t))" >>"$dir/meta.txt"
    echo "${tag}_rc: $rc" >>"$dir/meta.txt"
    say "$tag $(basename "$dir"): rc $rc, $((SECONDS - t)) s wall; $(grep '^TOTAL' "$dir/$tag.log" | cut -c1-120)"
  done
}

# ---- bench200M ----
if has bench200m; then
  d=$OUT/bench200m
  mkdir -p "$d"
  echo "database: bench200M (synth_db.py --residues ${BENCH_RESIDUES:-2e8})" >"$d/meta.txt"
  if makedb $BD/bench_db.fasta $CSW_DB/bench200m/db "$d"; then
    for m in $CUDASW_MODES; do
      cudasw "$d" "cudasw_$m" "$m" $BD/bench_queries.fasta --db $CSW_DB/bench200m/db
    done
  fi
  swgpu "$d" $BD/bench_db.fasta $BD/bench_queries.fasta
  rm -rf $CSW_DB/bench200m
fi

# ---- peak: equal-length databases ----
if has peak; then
  if [ "$PEAK_QUERIES" = bench ]; then PQ=$BD/bench_queries.fasta; else PQ=$CSW_SRC/allqueries.fasta; fi
  info peak_queries "$PQ"
  for L in $PEAK_LENGTHS; do
    d=$OUT/peak_$L
    mkdir -p "$d"
    f=$PD/peak_$L.fasta
    echo "database: peak_db.py length $L" >"$d/meta.txt"
    echo "length: $L" >>"$d/meta.txt"
    if [ "$(left)" -lt 40 ]; then
      say "SKIP peak $L and after (deadline)"
      break
    fi
    if [ ! -s "$f" ]; then
      say "SKIP peak $L: no $f (see $OUT/peak_db.log)"
      continue
    fi
    if makedb "$f" "$CSW_DB/peak_$L/db" "$d"; then
      for m in $CUDASW_MODES; do
        cudasw "$d" "cudasw_$m" "$m" "$PQ" --db "$CSW_DB/peak_$L/db"
      done
    fi
    n=$(grep -c '^>' "$f")
    echo "sequences: $n" >>"$d/meta.txt"
    for m in $CUDASW_PSEUDO_MODES; do
      cudasw "$d" "cudasw_pseudo_$m" "$m" "$PQ" --pseudodb "$n" "$L"
    done
    swgpu "$d" "$f" "$PQ"
    rm -rf "$CSW_DB/peak_$L"
  done
fi

# ---- tables ----
info finished_s "$(el)"
say "tables"
python3 benchmarks/cudasw_compare_table.py "$OUT" --json "$OUT/summary.json" --md "$OUT/tables.md"
say "done"
# the per-run logs as one archive (the device tool returns a limited number of files)
( cd "$OUT" && dirs=$(ls -d bench200m peak_* 2>/dev/null) && [ -n "$dirs" ] \
    && tar czf runs.tgz $dirs && rm -rf $dirs )
