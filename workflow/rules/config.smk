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
from swgpu_tools.config import check_config

_check = check_config(config, Path(workflow.basedir) / "workflow/schemas/config.schema.yaml")
if workflow.is_main_process:
    for _w in _check.warnings:
        print(f"swgpu: warning: {_w}", file=sys.stderr)
if _check.problems:
    raise ValueError(
        "swgpu: the configuration cannot be used:\n"
        + "\n".join(f"  - {p}" for p in _check.problems)
    )
