"""Where a scoring job's GPU start goes (issue 11: the start is on the critical path of
short runs).  In a fresh process, times ``swgpu_tools.backend.start_backend("gpu")`` (driver,
lock, context, helper and scoring kernels from a warm cache) with its own step times, and
prints cProfile's heaviest functions.

    python benchmarks/gpu_start_profile.py [--variant plain|typing-thread] [--profile]

``typing-thread``: a thread initialises Numba's CUDA typing and target contexts (pure
Python) while the main thread waits for the driver (ctypes calls release the GIL).  Run 31
measured it worth 0.15-0.35 s; since then ``start_backend`` does it itself (with
``kernels.gpu.cache.init_target``), so ``plain`` measures the default.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import threading
import time

T0 = time.perf_counter()


def _typing_contexts() -> None:
    from numba.cuda.descriptor import cuda_target

    cuda_target.typing_context.refresh()
    cuda_target.target_context  # noqa: B018 (built on first access)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", default="plain", choices=["plain", "typing-thread"])
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    from swgpu_tools.backend import start_backend
    from swgpu_tools.scoring import ScoringScheme

    scheme = ScoringScheme()
    t_imports = time.perf_counter() - T0
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    t = time.perf_counter()
    helper = None
    if args.variant == "typing-thread":
        helper = threading.Thread(target=_typing_contexts)
        helper.start()
    started = start_backend("gpu", "auto", scheme)
    if helper is not None:
        helper.join()
    wall = time.perf_counter() - t
    if prof:
        prof.disable()
    steps = ", ".join(f"{k} {v:.3f}" for k, v in started.steps.items())
    print(
        f"variant {args.variant}: imports {t_imports:.2f} s, start_backend {wall:.3f} s "
        f"({steps}); backend {started.choice.name}"
    )
    if prof:
        st = pstats.Stats(prof)
        st.sort_stats("cumulative").print_stats(35)
        st.sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
