"""numba-cuda 0.30 uses numpy.row_stack, gone in numpy 2.5 (the GPU machine's image has
2.5.2): the device scripts copy this file to a folder on PYTHONPATH as
``sitecustomize.py``.  It aliases ``row_stack`` when Numba is first imported, not in
every Python process (the workflow's job processes import nothing heavy before they
hand their command to the warm-start process)."""

import sys


class _RowStack:
    def find_spec(self, name, path=None, target=None):
        if name == "numba" or name.startswith("numba."):
            sys.meta_path.remove(self)
            import numpy

            if not hasattr(numpy, "row_stack"):
                numpy.row_stack = numpy.vstack
        return None


sys.meta_path.insert(0, _RowStack())
