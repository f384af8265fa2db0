"""The advice printed when a SLURM job of the workflow hits its time limit."""

from swgpu_tools.cluster import timeout_advice

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
