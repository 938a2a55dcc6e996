"""Element types of MSKernelBench arguments, with exact bf16 conversion in numpy.

bf16 tensors are held on the host as uint16 bit patterns.
"""

from __future__ import annotations

import numpy as np

#: Variant names, as used on the command line and in task.toml.
VARIANTS = ("fp32", "bf16")

#: Storage numpy dtype of each argument dtype.
STORAGE = {"f32": np.float32, "bf16": np.uint16, "i32": np.int32, "f64": np.float64}
ITEMSIZE = {"f32": 4, "bf16": 2, "i32": 4, "f64": 8}


def concrete(dtype: str, variant: str) -> str:
    """Resolve an argument dtype ("T" means the variant's float type) to f32, bf16 or i32."""
    if dtype == "T":
        return "f32" if variant == "fp32" else "bf16"
    return dtype


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bf16 (round to nearest even), returning uint16 bit patterns."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen bf16 bit patterns to float32 exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    """Convert float64/float32/int values to the storage array of a concrete dtype."""
    if dtype == "bf16":
        return f32_to_bf16_bits(np.asarray(values, dtype=np.float32))
    return np.ascontiguousarray(values, dtype=STORAGE[dtype])


def to_float64(stored: np.ndarray, dtype: str) -> np.ndarray:
    """The exact values of a storage array, as float64 (ints stay ints)."""
    if dtype == "bf16":
        return bf16_bits_to_f32(stored).astype(np.float64)
    if dtype == "i32":
        return np.asarray(stored, dtype=np.int64)
    return np.asarray(stored, dtype=np.float64)
