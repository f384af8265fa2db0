"""In-memory computations, no files: the workflow steps (:mod:`swgpu_tools.steps`)
and the Python API (:mod:`swgpu_tools.api`) both call these.

* :func:`.scan.score`: top-k hits of queries in one database part (a backend);
* :func:`.merge.merge`: hits of all parts -> final top-k with E-values;
* :func:`.traceback.traceback`: hits -> one alignment per hit, every output field.
"""
