"""What to tell a cluster user when a job failed in a way SLURM explains.

Snakemake's slurm executor reports a job that ran past its time limit only as
``Error in rule R: ... SLURM status is: 'TIMEOUT'``.  :func:`timeout_advice`
finds those rules in Snakemake's log (the Snakefile's ``onerror`` hands it
over) and says which rule needs more time, and how to give it.
"""

from __future__ import annotations

import os
import re

_ERROR = re.compile(r"^Error in rule (\w+):\s*$", re.MULTILINE)


def timeout_advice(log_text: str) -> list[str]:
    """One line per rule whose SLURM job ended as TIMEOUT (each rule once, in log order)."""
    starts = [(m.start(), m.group(1)) for m in _ERROR.finditer(log_text)]
    rules: list[str] = []
    for k, (pos, rule) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(log_text)
        if "SLURM status is: 'TIMEOUT'" in log_text[pos:end] and rule not in rules:
            rules.append(rule)
    return [
        f"rule {rule} ran past its SLURM time limit (TIMEOUT): give it more time in your "
        f"profile copy, under set-resources: {rule}: runtime: <minutes> (or a value that "
        f"grows with each retry, runtime: 720 * attempt), then run the same command again; "
        f"finished jobs are kept"
        for rule in rules
    ]


def advice_for_logs(logs) -> list[str]:
    """:func:`timeout_advice` over Snakemake's log file(s), as its ``onerror`` hook
    gets them: one path (Snakemake 8) or a list of paths (Snakemake 9)."""
    paths = [logs] if isinstance(logs, (str, os.PathLike)) else list(logs or [])
    text = ""
    for path in paths:
        try:
            with open(path, errors="replace") as fh:
                text += fh.read()
        except OSError:
            continue
    return timeout_advice(text)
