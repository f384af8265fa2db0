"""When a workflow job's process started, and when it asked the warm process to run
its command: what a step's statistics record of its job (``job_epochs``,
:mod:`swgpu_tools.io.stepstats`).  Standard library only, and light: a job's
``swgpu`` imports it before handing its command over (:mod:`swgpu_tools.warm.client`)."""

from __future__ import annotations

import os

#: The job's process start and its first request to the warm process, as epoch
#: seconds "START,ASKED" (:func:`swgpu_tools.warm.client.forward` sets it), then
#: ",TAKEN" when a warm child or the GPU standby took it
#: (:func:`swgpu_tools.warm.standby.run_job`): recorded as ``job_epochs``.
JOB_EPOCHS = "SWGPU_JOB_EPOCHS"


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = float(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None
