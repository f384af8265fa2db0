"""How long a process that used the GPU takes to end after its last line: the CUDA
context's teardown, which a workflow job's end waits for.

    python benchmarks/cuda_exit_time.py [--gib 1] [--repeat 3]

Each try runs a child that starts CUDA, allocates ``--gib`` GiB on the device, runs a
kernel, prints the time, and ends with ``os._exit(0)`` (as ``swgpu`` ends a workflow
step); the parent prints the time from that line to the child's exit as seen by
``waitpid``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time
from numba import cuda
import numpy as np
a = cuda.device_array(int(float(sys.argv[1]) * (1 << 30)) // 4, dtype=np.int32)
@cuda.jit
def fill(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = i
fill[(a.size + 255) // 256, 256](a)
cuda.synchronize()
print(repr(time.time()), flush=True)
os._exit(0)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for _ in range(args.repeat):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(args.gib)], stdout=subprocess.PIPE, text=True
        )
        line = proc.stdout.readline()
        proc.wait()
        end = time.time()
        print(
            f"{args.gib:g} GiB on the device: {end - float(line):.3f} s from the last line to the exit"
        )


if __name__ == "__main__":
    main()
