"""``python -m swgpu_tools.cli``: the ``swgpu`` command."""

import sys

from . import main

sys.exit(main())
