"""CUDAMaster: MSKernelBench and an LLM kernel optimizer."""

__version__ = "0.1.0"
