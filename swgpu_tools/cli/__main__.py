"""``python -m swgpu_tools.cli``: the ``swgpu`` command (as the console script runs it)."""

from ..console import entry

entry()
