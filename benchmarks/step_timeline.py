"""The steps of finished workflow runs on one time line, from their statistics files.

    python benchmarks/step_timeline.py WORKDIR [WORKDIR ...]

For each run folder: each step's process start (``before_step_s`` before the step's
own start), the step's start and end, in seconds from the first step's process, the
gap since the previous step ended, and the step's phases.
"""

from __future__ import annotations

import glob
import json
import sys


def timeline(run: str) -> list[str]:
    rows = []
    for f in sorted(glob.glob(f"{run}/results/stats/**/*.json", recursive=True)):
        with open(f) as fh:
            d = json.load(fh)
        if "start_epoch" not in d:
            continue
        st = d["start_epoch"]
        rows.append(
            (
                st - (d.get("before_step_s") or 0.0),
                st,
                st + d["wall_s"],
                d["step"],
                d.get("phases_s"),
            )
        )
    if not rows:
        return []
    t0 = min(r[0] for r in rows)
    out, prev = [run], None
    for proc, start, end, step, phases in sorted(rows):
        gap = "" if prev is None else f"gap {proc - prev:5.2f}"
        out.append(
            f"  {step:12s} proc {proc - t0:6.2f} step {start - t0:6.2f}-{end - t0:6.2f} {gap:9s} {phases}"
        )
        prev = end
    return out


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        print("\n".join(timeline(folder)))
