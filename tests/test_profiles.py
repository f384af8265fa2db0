"""How many scoring jobs `snakemake --cores N` runs at once: one per GPU.

The workflow counts GPUs with `nvidia-smi -L` and CUDA_VISIBLE_DEVICES
(swgpu_tools.backend.nvidia_smi_gpus, no CUDA) and offers that many as
Snakemake's `gpu` resource unless `--resources gpu=K` is given; each GPU
scoring job takes gpu=1.  Without a GPU, scoring jobs are CPU jobs (gpu=0)
that only --cores limits.

The scheduling tests run Snakemake for real (targets: the shards' hit tables) with a
fake `nvidia-smi` listing GPUs and a stand-in `swgpu score-shard` that is a
barrier: each job marks its start and waits until as many jobs as the test
expects run at the same time (or no job is left to start), records how many
it saw, and fails after 20 s.  So a scheduler that runs fewer jobs at once
than expected fails the run; one that runs more shows in the scheduler's
batches ("Execute N jobs...") and in the records.
Every other `swgpu` command is the real one (shard_db makes real shards).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from test_workflow import BIN, SNAKEMAKE, _make_inputs, _snakemake, _write_config

from swgpu_tools.backend import WorkflowGpus, nvidia_smi_gpus, workflow_gpus, workflow_gpus_line

SMI_3 = """GPU 0: NVIDIA H200 (UUID: GPU-aaaa0000-0000-0000-0000-000000000000)
GPU 1: NVIDIA H200 (UUID: GPU-bbbb1111-0000-0000-0000-000000000000)
GPU 2: NVIDIA H200 (UUID: GPU-cccc2222-0000-0000-0000-000000000000)
  MIG 1g.18gb     Device  0: (UUID: MIG-dddd3333-0000-0000-0000-000000000000)
"""
UUIDS = [line.split("UUID: ")[1].rstrip(")") for line in SMI_3.splitlines()[:3]]


def _fake_smi(folder: Path, listing: str | None, rc: int = 0) -> Path:
    """A folder holding an `nvidia-smi` that prints ``listing`` and exits ``rc``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "#!/bin/sh\n"
    if listing is not None:
        text += f"cat <<'EOF'\n{listing}EOF\n"
    else:
        text += "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\n"
    text += f"exit {rc}\n"
    (folder / "nvidia-smi").write_text(text)
    (folder / "nvidia-smi").chmod(0o755)
    return folder


# ---------------------------------------------------------------------------
# counting GPUs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mask, expected",
    [
        (None, UUIDS),
        ("0,2", [UUIDS[0], UUIDS[2]]),
        ("2,0", [UUIDS[2], UUIDS[0]]),
        (" 1 ", [UUIDS[1]]),
        ("GPU-bbbb1111", [UUIDS[1]]),  # a unique UUID prefix
        ("GPU-cccc2222-0000-0000-0000-000000000000,0", [UUIDS[2], UUIDS[0]]),
        ("MIG-dddd3333", ["MIG-dddd3333-0000-0000-0000-000000000000"]),
        ("0,7,1", [UUIDS[0]]),  # CUDA stops at the first bad entry
        ("0,0,1", [UUIDS[0]]),  # ... and at a repeated one
        ("GPU-", []),  # ambiguous prefix
        ("", []),
        ("-1", []),
        ("NoDevFiles", []),
    ],
)
def test_nvidia_smi_gpus_applies_cuda_visible_devices(tmp_path, mask, expected):
    env = {"PATH": f"{_fake_smi(tmp_path / 'bin', SMI_3)}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    if mask is not None:
        env["CUDA_VISIBLE_DEVICES"] = mask
    assert nvidia_smi_gpus(env) == expected


def test_nvidia_smi_gpus_without_driver_or_tool(tmp_path):
    system = f"{os.pathsep}/usr/bin{os.pathsep}/bin"
    assert nvidia_smi_gpus({"PATH": f"{_fake_smi(tmp_path / 'x', None, rc=9)}{system}"}) == []
    no_gpu = _fake_smi(tmp_path / "y", "No devices found.\n")
    assert nvidia_smi_gpus({"PATH": f"{no_gpu}{system}"}) == []
    assert nvidia_smi_gpus({"PATH": str(tmp_path / "empty")}) == []


def test_workflow_gpus_plan():
    assert workflow_gpus("cpu", UUIDS) == WorkflowGpus(0, None, workflow_gpus("cpu").reason)
    assert (workflow_gpus("auto", UUIDS).per_job, workflow_gpus("auto", UUIDS).machine) == (1, 3)
    assert (workflow_gpus("gpu", UUIDS[:1]).per_job, workflow_gpus("gpu", UUIDS[:1]).machine) == (
        1,
        1,
    )
    assert (workflow_gpus("auto", []).per_job, workflow_gpus("auto", []).machine) == (0, None)
    assert (workflow_gpus("gpu", []).per_job, workflow_gpus("gpu", []).machine) == (1, 1)
    line = workflow_gpus_line(workflow_gpus("auto", UUIDS), 3, given=False)
    assert "3 GPUs visible" in line and "up to 3 scoring jobs at once (gpu=3" in line
    assert "up to 1 scoring job at once (gpu=1, --resources)" in workflow_gpus_line(
        workflow_gpus("auto", UUIDS), 1, given=True
    )


# ---------------------------------------------------------------------------
# the scheduler: concurrent scoring jobs in a real run
# ---------------------------------------------------------------------------

BARRIER = r"""#!{python}
import os, sys, time
args = sys.argv[1:]
if args[:1] != ["score-shard"]:
    os.execv({real!r}, [{real!r}] + args)
d, want, total = os.environ["BARRIER_DIR"], int(os.environ["BARRIER_WANT"]), int(os.environ["BARRIER_TOTAL"])
name = os.path.basename(args[1])
open(os.path.join(d, "start-" + name), "w").close()
deadline = time.monotonic() + 20
seen = 0
while True:
    files = os.listdir(d)
    starts = sum(f.startswith("start-") for f in files)
    active = starts - sum(f.startswith("end-") for f in files)
    seen = max(seen, active)
    if active >= want or starts >= total:
        break
    if time.monotonic() > deadline:
        print(f"barrier: only {{active}} job(s) at once, expected {{want}}", file=sys.stderr)
        sys.exit(3)
    time.sleep(0.05)
import numpy as np
from swgpu_tools.io.hitsfile import ShardHits, write_shard_hits
z32, z64 = np.zeros(0, np.int32), np.zeros(0, np.int64)
write_shard_hits(args[args.index("--out") + 1], ShardHits([], z32, z32, z32, [], [], z64))
with open(args[args.index("--stats") + 1], "w") as fh:
    fh.write('{{"step": "score_shard"}}\n')
with open(os.path.join(d, "seen-" + name), "w") as fh:
    fh.write(str(seen))
open(os.path.join(d, "end-" + name), "w").close()
"""

SHARDS = 6


@pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")
@pytest.mark.parametrize(
    "case, smi, mask, args, backend, want, line",
    [
        # a plain `snakemake --cores N`: one scoring job per listed GPU
        ("3 GPUs", SMI_3, None, [], "auto", 3, "up to 3 scoring jobs at once (gpu=3"),
        # the user's --resources wins
        (
            "--resources gpu=1",
            SMI_3,
            None,
            ["--resources", "gpu=1"],
            "auto",
            1,
            "up to 1 scoring job at once (gpu=1, --resources)",
        ),
        # (three of the six cases with the slow tests: a workflow run each, 6-9 s on
        # the 2-core VM; .ci/run runs them)
        pytest.param(
            "--resources gpu=2",
            SMI_3,
            None,
            ["--resources", "gpu=2"],
            "gpu",
            2,
            "up to 2 scoring jobs at once (gpu=2, --resources)",
            marks=pytest.mark.slow,
        ),
        # CUDA_VISIBLE_DEVICES hides one of the three
        pytest.param(
            "CUDA_VISIBLE_DEVICES=0,2",
            SMI_3,
            "0,2",
            [],
            "auto",
            2,
            "2 GPUs visible",
            marks=pytest.mark.slow,
        ),
        # no driver: CPU jobs, limited by --cores 4 and threads 1 only
        ("no GPU", None, None, [], "auto", 4, "scoring jobs are CPU jobs"),
        # a GPU, but backend cpu: CPU jobs too, not one per GPU
        pytest.param(
            "backend cpu",
            SMI_3,
            None,
            [],
            "cpu",
            4,
            "backend cpu: scoring jobs are CPU jobs",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_scoring_jobs_run_one_per_gpu(tmp_path, case, smi, mask, args, backend, want, line):
    work = tmp_path / "work"
    work.mkdir()
    _make_inputs(work)
    _write_config(work, shards=SHARDS, backend=backend, threads=1)
    fake = _fake_smi(tmp_path / "fakebin", smi, rc=0 if smi else 9)
    (fake / "swgpu").write_text(BARRIER.format(python=sys.executable, real=str(BIN / "swgpu")))
    (fake / "swgpu").chmod(0o755)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {
        "PATH": f"{fake}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "CUDA_VISIBLE_DEVICES": mask,
        "BARRIER_DIR": str(barrier),
        "BARRIER_WANT": str(want),
        "BARRIER_TOTAL": str(SHARDS),
    }
    targets = [f"results/hits/shard-{i:04d}.npz" for i in range(SHARDS)]
    proc = _snakemake(work, *targets, "--cores", "4", *args, extra_env=env)
    out = proc.stdout + proc.stderr
    assert line in out, out[:2000]
    seen = [int(p.read_text()) for p in sorted(barrier.glob("seen-*"))]
    assert len(seen) == SHARDS, out[-3000:]
    assert max(seen) == want, (case, seen)
    # the scheduler's own batches: never more than `want` jobs selected at once
    batches = [int(n) for n in re.findall(r"^Execute (\d+) jobs\.\.\.$", out, re.MULTILINE)]
    assert max(batches) == want, (case, batches)
