"""How the GPU start's first step splits: the CUDA driver's cuInit (ctypes, no Python
work), the numba-cuda import, and the device listing, each in a fresh process.

    python benchmarks/gpu_driver_start.py        (on a GPU machine)
"""

from __future__ import annotations

import subprocess
import sys

CASES = {
    "cuInit alone (ctypes)": "import ctypes; ctypes.CDLL('libcuda.so.1').cuInit(0)",
    "numba.cuda import": "from numba import cuda",
    "numba.cuda import + list_devices": "from numba import cuda; list(cuda.list_devices())",
    "cuInit on a thread, then import + list_devices": (
        "import threading, ctypes; t = threading.Thread(target=lambda: "
        "ctypes.CDLL('libcuda.so.1').cuInit(0)); t.start(); "
        "from numba import cuda; list(cuda.list_devices()); t.join()"
    ),
}

for name, code in CASES.items():
    times = []
    for _ in range(3):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import time; t = time.perf_counter(); {code}; print(time.perf_counter() - t)",
            ],
            capture_output=True,
            text=True,
        )
        times.append(float(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else -1)
    print(f"{name:50s} " + " ".join(f"{t:.3f}" for t in times))
