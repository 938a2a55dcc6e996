"""CUDAMaster: MSKernelBench and an LLM kernel optimizer."""

from .cpus import confine_from_env

__version__ = "0.1.0"

confine_from_env()  # a worker or helper started on cores of its own stays there (cpus.py)
