# Does the GPU machine's image hold bytecode for the packages the workflow imports, and
# how long does each import take there, before and after compileall (run 133)?
#     bash benchmarks/pyc_check.sh        (on the GPU machine, through the device tool)
set -u
mkdir -p /tmp/sc; cp benchmarks/device_sitecustomize.py /tmp/sc/sitecustomize.py
export PYTHONPATH=/tmp/sc
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}"
python3 -V
for m in numba numba_cuda llvmlite cuda pandas matplotlib numpy yaml scipy; do
  d=$(python3 -c "import importlib.util,os,sys; s=importlib.util.find_spec('$m'); print(os.path.dirname(s.origin) if s and s.origin else (list(s.submodule_search_locations)[0] if s else ''))" 2>/dev/null)
  [ -z "$d" ] && { echo "$m: not found"; continue; }
  py=$(find "$d" -name '*.py' | wc -l); pyc=$(find "$d" -name '*.pyc' | wc -l)
  echo "$m: $d py=$py pyc=$pyc"
done
t() { python3 -c "import time; t=time.perf_counter(); import $1; print('$1', round(time.perf_counter()-t,3))"; }
echo "-- before"; for i in 1 2; do t numba; t numba.cuda; t pandas; t matplotlib.pyplot; done
for m in numba numba_cuda llvmlite cuda pandas matplotlib; do
  d=$(python3 -c "import importlib.util,os; s=importlib.util.find_spec('$m'); print(os.path.dirname(s.origin) if s.origin else list(s.submodule_search_locations)[0])" 2>/dev/null)
  [ -n "$d" ] && python3 -m compileall -q -j 0 "$d" >/dev/null 2>&1
done
echo "-- after compileall"; for i in 1 2; do t numba; t numba.cuda; t pandas; t matplotlib.pyplot; done
