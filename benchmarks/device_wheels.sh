# Sourced by the device scripts.  install_wheels DIR installs, into /tmp/site, the carried
# wheels of DIR that the device image lacks (numba-cuda, numpy, biopython always; CUDA
# Python bindings and pytest where missing), byte-compiles them as pip would, and puts
# /tmp/site and the working tree on PYTHONPATH.  The names installed are in $need.
install_wheels() {
  local whl=$1 m
  need="numba_cuda-*.whl numpy-*.whl biopython-*.whl"
  for m in cuda.bindings:cuda_bindings cuda.core:cuda_core cuda.pathfinder:cuda_pathfinder \
           nvidia.cuda_runtime:nvidia_cuda_runtime pytest:pytest; do
    python3 -c "import ${m%%:*}" 2>/dev/null || need="$need ${m#*:}-*.whl"
  done
  python3 -c "import pytest" 2>/dev/null || need="$need pluggy-*.whl iniconfig-*.whl"
  ( cd "$whl" && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site $need ) || return 1
  python3 -m compileall -q -j 0 /tmp/site swgpu_tools > /dev/null
  export PYTHONPATH=/tmp/site:$PWD
}

# use_image_python: the image's own numba-cuda and numpy, without carried .whl wheels.
# numba-cuda 0.30 needs numpy.row_stack (gone in numpy 2.5, which the image has): a
# sitecustomize.py on PYTHONPATH puts it back.  Biopython, which the image lacks, comes
# from the carried .whl-smk.  Puts /tmp/sc, /tmp/site (when used) and the working tree on
# PYTHONPATH.
use_image_python() {
  mkdir -p /tmp/sc
  printf 'import numpy\nif not hasattr(numpy, "row_stack"):\n    numpy.row_stack = numpy.vstack\n' \
    > /tmp/sc/sitecustomize.py
  export PYTHONPATH=/tmp/sc:$PWD
  if ! python3 -c "import Bio" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
      .whl-smk/biopython-*.whl || return 1
    export PYTHONPATH=/tmp/sc:/tmp/site:$PWD
  fi
}
