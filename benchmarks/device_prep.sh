#!/bin/bash
# Prepares, in this checkout, the folders the device scripts carry (run here, not on the
# device; each is ignored through .git/info/exclude):
#   .whl-smk/        Snakemake 9.27.1 and what it needs that the device image lacks, as
#                    wheels for CPython 3.12 on x86-64 Linux (plus biopython, platformdirs)
#   gpu_bench_data/  ../shared/data and ../shared/tools/synth_db.py (bench200M is made there)
#   .oldpkg/         with OLD_COMMIT=<commit>: that commit's swgpu_tools, for the A/B
#                    scripts' "old" side (benchmarks/gpu_chain_ab_run.sh)
#   bash benchmarks/device_prep.sh [OLD_COMMIT=75cba82]
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
mkdir -p .git/info
for d in /.whl-smk/ /gpu_bench_data/ /.oldpkg/; do
  grep -qxF "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude
done
PY=${PYTHON:-python3}
if [ ! -d .whl-smk ]; then
  tmp=$(mktemp -d)
  "$PY" -m venv "$tmp/venv"
  "$tmp/venv/bin/pip" install -q "snakemake==9.27.1" biopython platformdirs
  # on the image already (KINDS.md's package list): not carried
  image="attrs certifi charset-normalizer idna jinja2 markupsafe numpy packaging psutil pyyaml requests tabulate typing-extensions urllib3 wrapt"
  "$tmp/venv/bin/pip" freeze | grep -v "^pip=\|^setuptools=" | while read -r line; do
    name=$(echo "${line%%==*}" | tr 'A-Z_' 'a-z-')
    case " $image " in *" $name "*) continue ;; esac
    echo "$line"
  done > "$tmp/need.txt"
  mkdir -p .whl-smk
  # connection_pool has no wheel on PyPI: built here (pure Python)
  grep -v "^connection_pool==" "$tmp/need.txt" | xargs "$tmp/venv/bin/pip" download -q --no-deps \
    --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl-smk
  grep "^connection_pool==" "$tmp/need.txt" | xargs -r "$tmp/venv/bin/pip" wheel -q --no-deps -w .whl-smk
  rm -rf "$tmp"
fi
if [ ! -d gpu_bench_data ]; then
  mkdir -p gpu_bench_data
  cp "$SHARED"/data/* "$SHARED"/tools/synth_db.py gpu_bench_data/
fi
if [ -n "${OLD_COMMIT:-}" ]; then
  rm -rf .oldpkg && mkdir -p .oldpkg
  git archive "$OLD_COMMIT" swgpu_tools | tar -x -C .oldpkg
fi
du -sh .whl-smk gpu_bench_data ${OLD_COMMIT:+.oldpkg}
