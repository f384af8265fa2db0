"""``python -m swgpu_tools.cli``: the ``swgpu`` command."""

from . import entry

entry()
