"""swgpu: exact Smith-Waterman database search on GPUs (Numba CUDA) and CPUs.

The Python API::

    import swgpu_tools as sw
    queries = sw.read_fasta("queries.fasta")
    database = sw.read_fasta("database.fasta.gz")
    scheme = sw.ScoringScheme("BLOSUM62", gap_open=11, gap_extend=1)
    result = sw.search(queries, database, scheme, top_k=10)
    result.hits, result.alignments          # pandas DataFrames
    aln = sw.align("MKTAYIAKQR", "MKTAHIAKQR", scheme, mode="global")
"""

__version__ = "0.2.0"

from .cache import configure_numba as _configure_numba

_configure_numba()  # before any kernel module is imported

from .errors import InputError, OutputError  # noqa: E402

# loaded on first use, so that `swgpu` commands that need none of them (numpy,
# numba, pandas, CUDA) start in a fraction of a second
_LAZY = {
    "search": "api",
    "align": "api",
    "SearchResult": "api",
    "Alignment": "alignment",
    "read_fasta": "io.fasta",
    "ScoringScheme": "scoring",
    "SequenceSet": "sequences",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'swgpu_tools' has no attribute '{name}'")


__all__ = [
    "InputError",
    "OutputError",
    "read_fasta",
    "ScoringScheme",
    "SequenceSet",
    "search",
    "align",
    "SearchResult",
    "Alignment",
    "__version__",
]
