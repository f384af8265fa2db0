# The configuration, checked when the workflow is parsed: defaults from
# workflow/schemas/config.schema.yaml, then one short line per problem
# (swgpu_tools/config.py), before any job runs.  Functions only, no rules.

import sys


def _swgpu_tools():
    """The swgpu_tools package: the installed one, else this checkout's."""
    try:
        import swgpu_tools
    except ImportError:
        sys.path.insert(0, workflow.basedir)
        import swgpu_tools
    return swgpu_tools


_swgpu_tools()
from swgpu_tools.config import check_config, check_scheme


def _report(check):
    if workflow.is_main_process:
        for w in check.warnings:
            print(f"swgpu: warning: {w}", file=sys.stderr)
    if check.problems:
        raise ValueError(
            "swgpu: the configuration cannot be used:\n"
            + "\n".join(f"  - {p}" for p in check.problems)
        )


# all but the scoring scheme (numpy and Biopython: ~0.1 s of the parse), which the
# Snakefile checks once the warm process has started (check_scoring_scheme)
_CHECKED = check_config(
    config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml", scheme=False
)
_report(_CHECKED)


def check_scoring_scheme():
    """The matrix, the gap costs and the inputs' letters (swgpu_tools.config.check_scheme;
    the inputs' heads as check_config read them)."""
    _report(check_scheme(config, heads=_CHECKED.heads))
