"""swgpu: exact Smith-Waterman database search on GPUs (Numba CUDA) and CPUs.

The Python API::

    import swgpu_tools as sw
    queries = sw.read_fasta("queries.fasta")
    database = sw.read_fasta("database.fasta.gz")
    scheme = sw.ScoringScheme("BLOSUM62", gap_open=11, gap_extend=1)
    hits = sw.score(queries, database, scheme, top_k=10)
"""
__version__ = "0.1.0"

from .cache import configure_numba as _configure_numba

_configure_numba()  # before any kernel module is imported


from .errors import InputError
from .fasta import read_fasta
from .scoring import ScoringScheme
from .sequences import EncodedSequences, SequenceSet

_PIPELINE = ("score", "merge", "traceback", "search")


def __getattr__(name):
    # the pipeline functions load on first use: `swgpu` commands that do not
    # need them (and GPU start-up) skip their imports
    if name in _PIPELINE:
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'swgpu_tools' has no attribute '{name}'")

__all__ = [
    "InputError", "read_fasta", "ScoringScheme", "SequenceSet", "EncodedSequences",
    "score", "merge", "traceback", "search", "__version__",
]
