"""swgpu: exact Smith-Waterman database search on GPUs (Numba CUDA) and CPUs."""
__version__ = "0.1.0"
