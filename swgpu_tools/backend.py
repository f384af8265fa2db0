"""The one place that decides the backend (GPU or CPU), binds the GPU, and says why.

* :func:`choose_backend` / :func:`gpu_status`: which backend, and why;
* :func:`acquire_gpu` / :func:`bind_gpu`: which GPU a job runs on (a lock per
  GPU UUID), made current before any CUDA context exists;
* :class:`BackendStart`: all of that on a thread while the inputs are read;
  its result hands out a :class:`~swgpu_tools.kernels.SearchBackend`;
* :func:`workflow_gpus`: what the workflow's scoring jobs ask of Snakemake.

``choose_backend("auto")`` uses the GPU when one is usable and the CPU
otherwise, and always says why.  ``"gpu"`` fails with the reason when no GPU
is usable; ``"cpu"`` never touches CUDA.

GPU binding: Snakemake does not set ``CUDA_VISIBLE_DEVICES``.  With
``device="auto"`` a job takes an exclusive lock on one GPU id (a lock file per
visible GPU, under ``$SWGPU_LOCK_DIR`` or the temp dir) and holds it until
the process exits, so concurrent scoring jobs on one node each get their own
GPU; when all are taken it waits for one to come free.  The GPU is chosen
(and made current) before the backend check, so that no CUDA context is ever
opened on another GPU.

How many scoring jobs Snakemake runs at once on one machine:
``workflow_gpus`` counts the GPUs with ``nvidia-smi -L`` and
``CUDA_VISIBLE_DEVICES`` (no CUDA in Snakemake's process) and says what each
scoring job asks for and how many GPUs the machine offers; the workflow
(``workflow/rules/common.smk``) registers that as Snakemake's ``gpu``
resource unless ``--resources gpu=K`` was given.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .errors import InputError
from .logs import get_logger

log = get_logger(__name__)

BACKENDS = ("auto", "gpu", "cpu")


@dataclass
class BackendChoice:
    name: str  # "gpu" or "cpu"
    reason: str


_GPU_STATUS: list = []


def gpu_status() -> tuple[bool, str]:
    """(usable, explanation) for the GPU backend; never raises.

    Checked once per process (the check loads numba-cuda and the CUDA driver);
    later calls return the first answer.
    """
    if not _GPU_STATUS:
        _GPU_STATUS.append(_check_gpu())
    return _GPU_STATUS[0]


def _check_gpu() -> tuple[bool, str]:
    try:
        from .kernels import gpu
    except Exception as exc:  # numba-cuda missing or broken
        return False, f"the GPU backend cannot be imported ({type(exc).__name__}: {exc})"
    try:
        return gpu.available()
    except Exception as exc:
        return False, f"GPU check failed ({type(exc).__name__}: {exc})"


def choose_backend(requested: str = "auto") -> BackendChoice:
    if requested not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got '{requested}'")
    if requested == "cpu":
        return BackendChoice("cpu", "CPU backend requested")
    ok, why = gpu_status()
    if ok:
        return BackendChoice("gpu", why)
    if requested == "gpu":
        raise InputError(f"backend 'gpu' requested but no GPU is usable: {why}")
    return BackendChoice("cpu", f"no usable GPU, using the CPU: {why}")


# ---------------------------------------------------------------------------
# GPUs as the workflow's scheduler sees them (no CUDA here)
# ---------------------------------------------------------------------------

_SMI_GPU = re.compile(r"^GPU (\d+): .*?(?:\(UUID: ([^)\s]+)\))?\s*$")
_SMI_MIG = re.compile(r"^\s+MIG .*\(UUID: (MIG-[^)\s]+)\)\s*$")


def nvidia_smi_gpus(env: dict | None = None, timeout: float = 20.0) -> list[str]:
    """UUIDs of the GPUs that a new process started with ``env`` will see, in order.

    Reads ``nvidia-smi -L`` (found on env's PATH) and applies
    ``CUDA_VISIBLE_DEVICES`` as CUDA does: a comma-separated list of GPU
    numbers, ``GPU-``/``MIG-`` UUIDs or unique UUID prefixes, read up to the
    first entry that names no device (so ``""`` and ``-1`` hide every GPU).
    Never initialises CUDA, so it is safe in Snakemake's own process.  Returns
    [] when nvidia-smi is missing, fails (no driver) or lists no GPU.
    """
    env = os.environ if env is None else env
    exe = shutil.which("nvidia-smi", path=env.get("PATH"))
    if exe is None:
        return []
    try:
        listing = subprocess.run(
            [exe, "-L"], capture_output=True, text=True, timeout=timeout, env=dict(env)
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if listing.returncode != 0:
        return []
    gpus, migs = [], []
    for line in listing.stdout.splitlines():
        m = _SMI_GPU.match(line)
        if m:
            gpus.append(m.group(2) or f"index{len(gpus)}")
            continue
        m = _SMI_MIG.match(line)
        if m:
            migs.append(m.group(1))
    mask = env.get("CUDA_VISIBLE_DEVICES")
    if mask is None:
        return gpus
    visible: list[str] = []
    for entry in mask.split(","):
        entry = entry.strip()
        if re.fullmatch(r"\d+", entry) and int(entry) < len(gpus):
            found = [gpus[int(entry)]]
        elif entry.startswith(("GPU-", "MIG-")):
            found = [u for u in gpus + migs if u.startswith(entry)]
        else:
            found = []
        if len(found) != 1 or found[0] in visible:
            break  # CUDA stops at the first entry that names no (new) device
        visible.append(found[0])
    return visible


@dataclass
class WorkflowGpus:
    """What the workflow's scoring jobs ask of Snakemake's ``gpu`` resource.

    ``per_job``: GPUs each score_shard job declares (1 or 0).  ``machine``:
    the ``gpu`` resource to offer on this machine when the user gave none
    (``--resources gpu=K``), or None to leave it unset.  ``reason``: one line
    for the user.
    """

    per_job: int
    machine: int | None
    reason: str


def workflow_gpus(backend: str, gpus: list[str] | None = None) -> WorkflowGpus:
    """Plan the scoring jobs' GPU use from the configured ``backend`` and the visible GPUs.

    * ``cpu``, or ``auto`` with no GPU listed: scoring jobs are CPU jobs
      (``gpu=0``), limited only by ``--cores`` and their ``threads``.
    * ``gpu``/``auto`` with N GPUs listed: ``gpu=1`` per job and N on the
      machine, so Snakemake runs one scoring job per GPU (each then locks its
      own GPU, see ``acquire_gpu``).
    * ``gpu`` with none listed (no nvidia-smi here, e.g. a cluster's login
      node): ``gpu=1`` per job and 1 on the machine.  A cluster executor does
      not count this local resource; a local run then scores one shard at a
      time, as the GPU count is unknown (``--resources gpu=K`` to change).

    ``gpus`` defaults to :func:`nvidia_smi_gpus` (not called for ``cpu``).
    """
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got '{backend}'")
    if backend == "cpu":
        return WorkflowGpus(0, None, "backend cpu: scoring jobs are CPU jobs")
    if gpus is None:
        gpus = nvidia_smi_gpus()
    if gpus:
        n = len(gpus)
        return WorkflowGpus(
            1, n, f"{n} GPU{'s' if n > 1 else ''} visible (nvidia-smi -L and CUDA_VISIBLE_DEVICES)"
        )
    if backend == "auto":
        return WorkflowGpus(
            0, None, "backend auto and no GPU listed by nvidia-smi -L: scoring jobs are CPU jobs"
        )
    return WorkflowGpus(1, 1, "backend gpu but no GPU listed by nvidia-smi -L here")


def workflow_gpus_line(plan: WorkflowGpus, gpu_resource: int | None, given: bool) -> str:
    """One line for the user: what the scoring jobs will use.

    ``gpu_resource``: Snakemake's ``gpu`` resource in force; ``given``: whether
    the user set it (``--resources gpu=K``) rather than the workflow.
    """
    if not plan.per_job:
        return f"swgpu: {plan.reason}"
    if gpu_resource is None:
        return f"swgpu: {plan.reason}; no gpu resource: scoring jobs are not capped by GPUs"
    source = "--resources" if given else "--resources gpu=K to change"
    jobs = f"{gpu_resource} scoring job{'s' if gpu_resource != 1 else ''}"
    return f"swgpu: {plan.reason}; up to {jobs} at once (gpu={gpu_resource}, {source})"


_held_locks: list = []


_VISIBLE: list = []


def driver_installed() -> bool:
    """Whether an NVIDIA driver is installed here (its control device exists): a cheap
    hint, before any CUDA call, that a GPU start may be worth beginning."""
    return os.path.exists("/dev/nvidiactl")


def visible_gpus() -> list[str]:
    """Stable names (UUIDs) of the GPUs this process sees, in CUDA order; [] without a driver.

    Listed once per process (CUDA_VISIBLE_DEVICES cannot change for it).
    """
    if not _VISIBLE:
        _VISIBLE.append(_list_gpus())
    return list(_VISIBLE[0])


def _list_gpus() -> list[str]:
    try:
        from numba import cuda

        devices = list(cuda.list_devices())
    except Exception:  # no driver, no GPU, or numba-cuda missing
        return []
    names = []
    for i, dev in enumerate(devices):
        try:
            names.append(str(dev.uuid))
        except Exception:
            names.append(f"index{i}")
    return names


def acquire_gpu(device="auto", wait_seconds: float = 7 * 24 * 3600) -> int:
    """Return the GPU number this process should use; with "auto", lock a free one.

    Locks are keyed by the GPU's UUID, not its number, so jobs that see
    different subsets of a node's GPUs (SLURM sets CUDA_VISIBLE_DEVICES per
    job) never collide, and jobs that see the same GPU take turns.  Without
    a visible GPU this returns 0 and the backend check reports why.
    """
    if device != "auto":
        try:
            return int(device)
        except ValueError:
            raise InputError(f"device must be 'auto' or a GPU number, got '{device}'") from None
    gpus = visible_gpus()
    if not gpus:
        return 0
    lock_dir = os.environ.get(
        "SWGPU_LOCK_DIR", os.path.join(tempfile.gettempdir(), "swgpu-gpu-locks")
    )
    os.makedirs(lock_dir, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    announced = False
    while True:
        for i, name in enumerate(gpus):
            fh = open(os.path.join(lock_dir, f"{name}.lock"), "w")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            _held_locks.append(fh)  # held until the process exits
            return i
        if time.monotonic() > deadline:
            raise InputError(f"no free GPU among {len(gpus)} after waiting {wait_seconds:.0f} s")
        if not announced:
            log.warning(
                f"all {len(gpus)} visible GPUs are in use by other swgpu jobs; waiting for one"
            )
            announced = True
        time.sleep(1.0)


# ---------------------------------------------------------------------------
# starting a backend for a scoring job
# ---------------------------------------------------------------------------


@dataclass
class StartedBackend:
    """A backend ready to search: which one, why, on which GPU, and start-up seconds."""

    choice: BackendChoice
    gpu_id: int | None = None
    steps: dict = field(default_factory=dict)
    #: who started it: "own" (this job), "standby" (the warm process's GPU standby,
    #: whose process runs this job), "remote" (the standby, serving this job's searches)
    origin: str = "own"

    @property
    def name(self) -> str:
        return self.choice.name

    @property
    def device_uuid(self) -> str | None:
        if self.gpu_id is None:
            return None
        uuids = visible_gpus()
        return uuids[self.gpu_id] if self.gpu_id < len(uuids) else None

    def describe(self) -> str:
        """One line for the log: backend, reason, and the GPU with its UUID."""
        text = f"backend: {self.choice.name} ({self.choice.reason})"
        if self.choice.name == "gpu":
            uuid = self.device_uuid
            text += f"; GPU {self.gpu_id}" + (f" ({uuid})" if uuid else "")
        return text

    def searcher(self):
        """The :class:`~swgpu_tools.kernels.SearchBackend` to search with."""
        if self.choice.name == "gpu":
            from .kernels.gpu import GpuBackend

            return GpuBackend(self.gpu_id)
        from .kernels.cpu import CpuBackend

        return CpuBackend()


def bind_gpu(gpu_id: int) -> None:
    """Make GPU ``gpu_id`` current for this thread, before any CUDA context exists."""
    if visible_gpus():
        from .kernels import gpu as gpu_kernels

        gpu_kernels.bind(gpu_id)


def _start_driver_beside() -> None:
    """The CUDA driver's own start (``cuInit`` through ctypes: no Python work, so it
    leaves the interpreter's lock) on a thread, while this process imports numba-cuda
    (0.5-1 s on an H100 host): numba-cuda's own ``cuInit`` then finds it done.
    Nothing under the simulator, without an NVIDIA driver here, or with
    ``SWGPU_CUINIT_BESIDE=0`` (for measuring what it saves)."""

    def run():
        try:
            ctypes.CDLL("libcuda.so.1").cuInit(0)
        except (OSError, AttributeError):  # no libcuda: the backend check says why
            pass

    if (
        os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
        or os.environ.get("SWGPU_CUINIT_BESIDE") == "0"
        or not driver_installed()
    ):
        return
    threading.Thread(target=run, name="swgpu-cuinit", daemon=True).start()


def _init_gpu_typing_beside():
    """Start numba-cuda's typing set-up (:func:`.kernels.gpu.cache.init_target`) on a
    thread, or None under the simulator or without an NVIDIA driver here."""

    def run():
        try:
            from .kernels.gpu import cache

            cache.init_target()
        except Exception:  # numba-cuda missing or broken: the backend check says why
            pass

    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or not driver_installed():
        return None  # simulated, or no NVIDIA driver here (the check says why)
    thread = threading.Thread(target=run, name="swgpu-gpu-typing", daemon=True)
    thread.start()
    return thread


#: A start made ahead by :func:`prestart` (the warm process's GPU standby), with its scheme.
_PRESTARTED: list = []


def prestart(scheme=None, batched: bool = False) -> BackendStart:
    """Start the backend now, on a thread (``auto``: the GPU where one is usable, with
    ``scheme``'s cached scoring kernels), for a command this process runs later:
    that command's :func:`start_backend` with ``device="auto"`` and a backend other
    than ``cpu`` takes it (once) instead of starting again.  ``batched``: a re-scan
    is expected: the batched kernels are loaded first."""
    stop = threading.Event()  # set by a re-scan's job: the kernels it needs are others
    start = BackendStart("auto", "auto", background=True, scheme=scheme, batched=batched, stop=stop)
    _PRESTARTED[:] = [(start, scheme, stop, batched)]
    return start


def prestart_age() -> float | None:
    """Seconds since the start made ahead (:func:`prestart`) began, or None if there is
    none (left to take)."""
    if not _PRESTARTED:
        return None
    return time.perf_counter() - _PRESTARTED[-1][0].began


def _take_prestarted(backend: str, device, scheme, batched: bool = False) -> StartedBackend | None:
    if not _PRESTARTED or backend == "cpu" or device != "auto":
        return None
    start, pre_scheme, stop, pre_batched = _PRESTARTED.pop()
    if batched:  # a re-scan: its delta is scored by the batched kernels, loaded below
        stop.set()  # (the single-query ones the start may still be loading: no more)
    t = time.perf_counter()
    started = start.result()  # its error, if any, is the one this start would have met
    steps = {"prestarted wait": time.perf_counter() - t}
    # the start made ahead: how long before it was taken it began, and its own steps
    steps["prestarted before"] = t - start.began
    steps.update({f"prestarted {k}": v for k, v in started.steps.items()})
    if started.name != "gpu":
        choose_backend(backend)  # "gpu" asked for: the same error as a fresh start
        return StartedBackend(started.choice, None, steps, origin="standby")
    bind_gpu(started.gpu_id)  # current on this thread too
    if scheme is not None and scheme != pre_scheme:  # (a scheme never equals None)
        from .kernels.gpu.backend import preload_kernels

        t = time.perf_counter()
        preload_kernels(scheme)
        steps["scoring kernels"] = time.perf_counter() - t
    if not (pre_batched and scheme == pre_scheme):  # (else the start made ahead loaded them)
        _preload_batched(scheme, batched, steps)
    return StartedBackend(started.choice, started.gpu_id, steps, origin="standby")


def _preload_batched(scheme, batched: bool, steps: dict) -> None:
    """With ``batched`` (a re-scan: its delta is scored several queries per launch),
    load the batched scoring kernels too, on the start's thread while the job reads
    and matches its shards (loaded at their first launch, they cost a re-scan's
    scoring ~0.4 s on an H100 host)."""
    if not batched or scheme is None or os.environ.get("SWGPU_PRELOAD", "1") == "0":
        return
    from .kernels.gpu.backend import SIM, preload_kernels

    if SIM:
        return
    t = time.perf_counter()
    preload_kernels(scheme, batched=True)
    steps["batched kernels"] = time.perf_counter() - t


def start_backend(
    backend: str = "auto", device="auto", scheme=None, batched: bool = False, stop=None
) -> StartedBackend:
    """Choose the backend; for the GPU: lock and bind one, open its context, load helpers
    (and, given the :class:`~swgpu_tools.scoring.ScoringScheme`, the cached scoring kernels;
    with ``batched``, their several-queries-per-launch variants too).
    A start made ahead (:func:`prestart`) is taken where it fits."""
    pre = _take_prestarted(backend, device, scheme, batched)
    if pre is not None:
        return pre
    steps: dict[str, float] = {}
    t = time.perf_counter()
    gpu_id = None
    typing = None
    if backend != "cpu":
        _start_driver_beside()  # the driver's start beside numba-cuda's import
        typing = _init_gpu_typing_beside()  # Python work while the driver starts
        gpu_id = acquire_gpu(device)
        steps["lock"] = time.perf_counter() - t
        bind_gpu(gpu_id)
    t = time.perf_counter()
    choice = choose_backend(backend)
    steps["check"] = time.perf_counter() - t
    if choice.name == "gpu":
        from .kernels import gpu as gpu_kernels

        if typing is not None:
            typing.join()
        if batched:  # a re-scan's: its batched kernels first, then the single-query ones
            steps.update(gpu_kernels.warm_up(None))
            _preload_batched(scheme, batched, steps)
            steps.update(gpu_kernels.load_scoring_kernels(scheme, stop=stop))
        else:
            steps.update(gpu_kernels.warm_up(scheme, stop=stop))
    return StartedBackend(choice, gpu_id if choice.name == "gpu" else None, steps)


class BackendStart:
    """:func:`start_backend`, optionally on a thread.

    With ``background=True`` the start runs on a thread, so that the CUDA
    driver's start-up (seconds on a large GPU) overlaps reading the inputs;
    :meth:`result` waits for it and re-raises its errors.
    """

    def __init__(
        self,
        backend: str = "auto",
        device="auto",
        background: bool = False,
        scheme=None,
        batched: bool = False,
        stop=None,
    ):
        self._args = (backend, device, scheme, batched, stop)
        self._result: StartedBackend | None = None
        self._error: BaseException | None = None
        self._thread = None
        #: when the start began (``time.perf_counter``)
        self.began = time.perf_counter()
        if background:
            self._thread = threading.Thread(
                target=self._run, name="swgpu-backend-start", daemon=True
            )
            self._thread.start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            self._result = start_backend(*self._args)
        except BaseException as exc:  # re-raised in the caller's thread
            self._error = exc

    def seconds_left(self, expected: float) -> float:
        """About how long until :meth:`result` is ready, for a start-up expected to
        take ``expected`` seconds: 0 once done, infinity if it failed."""
        if self._thread is not None and self._thread.is_alive():
            return max(0.0, expected - (time.perf_counter() - self.began))
        return float("inf") if self._error is not None else 0.0

    def wait(self) -> None:
        """Wait until the start is over (done or failed), from any thread; its result or
        error is left to :meth:`result`."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def result(self) -> StartedBackend:
        self.wait()
        self._thread = None
        if self._error is not None:
            raise self._error
        return self._result
