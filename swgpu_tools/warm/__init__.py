"""Warm start: one process per local workflow run that has the step commands' imports
loaded, and forks one child per ``swgpu`` command the run's jobs start.

Every job of the workflow is a fresh ``swgpu`` process, and each paid its
imports (numpy, pandas, Numba, numba-cuda and its typing set-up, matplotlib):
about 1.4 s of the scoring job and 0.9 s of rule ``finish`` on the 2-core
machine, more on a GPU host, in every run.  With the warm start, the
Snakefile's ``onstart`` hook starts ``swgpu warm-serve`` beside Snakemake (a
local run only, never a cluster job) and tells the jobs where it listens
(``$SWGPU_WARM``).  A job's ``swgpu`` then hands its command line, working
folder, environment and standard streams to that process, which forks a
child to run it exactly as the job would have, and waits for the child's exit
status, which it returns as its own.

Nothing else changes: the child is a process of its own (its own GPU lock,
CUDA context, memory), started from a parent that never touched the GPU
(CUDA does not survive a fork), and a job runs the command itself whenever
the warm process is missing, not ready, ended, or started under another
environment (:func:`.protocol.fingerprint`).

==============  ===========================================================
``protocol``    the messages (length-prefixed JSON, standard streams passed
                as file descriptors) and the environment fingerprint
``client``      :func:`forward`: a job's side (imports nothing heavy)
``server``      :func:`serve`: the imports, in stages, and one child per
                command; ends with its Snakemake
``launch``      :func:`start` / :func:`stop`, for the Snakefile's hooks
==============  ===========================================================
"""

from .protocol import ENV

__all__ = ["ENV"]
