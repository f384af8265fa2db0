"""The advice printed when a SLURM job of the workflow hits its time limit."""

import os
import sys

import pytest
from test_workflow import BIN, SNAKEMAKE, _make_inputs, _snakemake, _write_config

from swgpu_tools.cluster import advice_for_logs, timeout_advice

# as Snakemake 9 with the slurm executor plugin 2.8 writes it (tests/slurm/failure_cases.sh)
LOG = """\
[Mon Nov 23 04:21:07 2026]
Error in rule score_shard:
    message: SLURM-job '35' failed, SLURM status is: 'TIMEOUT'. Detailed failure reason \
unavailable (status command is not 'sacct')
    jobid: 3
    input: results/shards/shard-0001.swdb, queries.fasta
    output: results/hits/shard-0001.npz, results/stats/score_shard/shard-0001.json
    log: results/logs/score_shard/shard-0001.log (check log file(s) for error details)
    external_jobid: 35

Trying to restart job 3.
Error in rule score_shard:
    message: SLURM-job '36' failed, SLURM status is: 'TIMEOUT'. Detailed failure reason unavailable
    jobid: 3
Error in rule finish:
    message: SLURM-job '37' failed, SLURM status is: 'FAILED'.
    jobid: 2
"""


def test_timeout_names_the_rule_once_and_says_how():
    lines = timeout_advice(LOG)
    assert len(lines) == 1
    assert lines[0].startswith("rule score_shard ran past its SLURM time limit")
    assert "set-resources: score_shard: runtime:" in lines[0]


def test_other_failures_get_no_timeout_advice():
    assert timeout_advice(LOG.split("Trying to restart")[1].replace("TIMEOUT", "FAILED")) == []
    assert timeout_advice("") == []
    # a TIMEOUT after the block of another rule belongs to that block only
    assert timeout_advice(
        "Error in rule a:\n  ok\nError in rule b:\n  SLURM status is: 'TIMEOUT'\n"
    ) == timeout_advice("Error in rule b:\n  SLURM status is: 'TIMEOUT'\n")


def test_advice_reads_one_log_path_or_a_list_of_them(tmp_path):
    """Snakemake 9 hands the onerror hook a list of log files, Snakemake 8 one path."""
    log = tmp_path / "snakemake.log"
    log.write_text(LOG)
    want = timeout_advice(LOG)
    assert advice_for_logs([str(log)]) == want
    assert advice_for_logs(str(log)) == want
    assert advice_for_logs([str(tmp_path / "gone.log"), log]) == want
    assert advice_for_logs([]) == [] and advice_for_logs(None) == []


FAILING_SWGPU = r"""#!{python}
import os, sys
args = sys.argv[1:]
if args[:1] != ["score-shard"]:
    os.execv({real!r}, [{real!r}] + args)
# what a SLURM run's log says of a job past its time limit (LOG above)
print("Error in rule score_shard:", file=sys.stderr)
print("    message: SLURM-job '35' failed, SLURM status is: 'TIMEOUT'.", file=sys.stderr)
sys.exit(1)
"""


@pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake is not installed")
def test_the_snakefiles_onerror_hook_prints_the_advice(tmp_path):
    """The Snakefile's onerror hook reads Snakemake's own log, where a failed job's
    log is copied (show-failed-logs): the advice comes out, and the hook does not
    fail on the list of log files that Snakemake 9 gives it."""
    work = tmp_path / "work"
    work.mkdir()
    _make_inputs(work)
    _write_config(work, shards=1, backend="cpu", threads=1)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "swgpu").write_text(
        FAILING_SWGPU.format(python=sys.executable, real=str(BIN / "swgpu"))
    )
    (fake / "swgpu").chmod(0o755)
    env = {"PATH": f"{fake}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = _snakemake(work, check=False, extra_env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "TypeError" not in out and 'Snakefile", line' not in out, out[-3000:]
    assert "swgpu: rule score_shard ran past its SLURM time limit (TIMEOUT)" in out, out[-3000:]
