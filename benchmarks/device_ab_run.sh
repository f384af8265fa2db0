#!/bin/bash
# A/B of two commits in one device call, in ABBA order (old, new, new, old), so that the
# first run's cold machine (file cache, driver) does not count against one side only.
#   cd REPO && git worktree add .carry-old OLD_COMMIT   (then symlink .whl-smk and
#   gpu_bench_data into it), and from the repo root, carrying .whl-smk, gpu_bench_data
#   and .carry-old:
#   OLD_COMMIT=abc1234 NEW_COMMIT=def5678 PHASE=S bash benchmarks/device_ab_run.sh
# Each side runs `PHASE=$PHASE bash benchmarks/device_workflow_run.sh` from its own tree
# with its own kernel cache; results go to $OUT/{old1,new1,new2,old2}; the summary prints
# the workflow runs' wall seconds (scale_S_*.json of PHASE=S) per side.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PHASE=${PHASE:-S}
NEW=$PWD
OLD=$PWD/.carry-old
[ -f "$OLD/benchmarks/device_workflow_run.sh" ] || { echo "no $OLD (git worktree of the old commit)"; exit 2; }
# numpy's bytecode, which the image lacks, once for both sides (device_workflow_run.sh
# compiles it since a65d65a; an older side's script does not)
NUMPY_DIR=$(python3 -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('numpy').origin))" 2>/dev/null)
[ -n "$NUMPY_DIR" ] && python3 -m compileall -q -j 0 "$NUMPY_DIR" > /dev/null 2>&1
# OLD_COMMIT, NEW_COMMIT: the sides' commits for the log (the device's copy of the tree
# may not know them: git there names the copy's own HEAD)
side() {  # label, tree, cache, commit
  mkdir -p "$OUT/$1"
  echo "== $1 ($2, ${4:-$(git -C "$2" rev-parse --short HEAD 2>/dev/null || echo '?')})"
  ( cd "$2" && OUT="$OUT/$1" SWGPU_CACHE_DIR="$3" PHASE="$PHASE" SWGPU_COMMIT="$1 ${4:-}" \
      bash benchmarks/device_workflow_run.sh 2>&1 | grep -E "^== |precompile|GCUPS|whole run" )
}
side old1 "$OLD" /tmp/swgpu-cache-old "${OLD_COMMIT:-}"
side new1 "$NEW" /tmp/swgpu-cache-new "${NEW_COMMIT:-}"
side new2 "$NEW" /tmp/swgpu-cache-new "${NEW_COMMIT:-}"
side old2 "$OLD" /tmp/swgpu-cache-old "${OLD_COMMIT:-}"
python3 - "$OUT" <<'PYEOF'
import glob, json, os, sys
out = sys.argv[1]
rows = {}
for label in ("old1", "new1", "new2", "old2"):
    for f in sorted(glob.glob(os.path.join(out, label, "scale_*.json"))):
        for run in json.load(open(f)):
            rows.setdefault(run.get("queries"), {})[label] = run.get("wall_s")
for q, walls in sorted(rows.items(), key=lambda kv: str(kv[0])):
    old = [walls[k] for k in ("old1", "old2") if k in walls]
    new = [walls[k] for k in ("new1", "new2") if k in walls]
    fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)
    print(f"{q} queries: old {fmt(old)} s, new {fmt(new)} s"
          + (f"; means {sum(old) / len(old):.2f} against {sum(new) / len(new):.2f}" if old and new else ""))
PYEOF
