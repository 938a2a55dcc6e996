"""Seeded input sets for one case: never zeros, always replayable from the recorded seed."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import formula
from ..dtypes import ITEMSIZE, STORAGE, concrete, f32_to_bf16_bits, to_float64, to_storage
from ..errors import UserError
from ..parallel import over_rows, threads
from ..tasks import Case, Task, value_kind


def case_seed(task: str, variant: str, case: Case, set_index: int, base_seed: int) -> int:
    """A stable 63-bit seed for one input set of one case."""
    key = f"{task}/{variant}/{case.suite}/{case.index}/{set_index}/{base_seed}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") & (2**63 - 1)


@dataclass
class InputSet:
    """The stored bytes of every input, their exact values, and the scalars, for one set."""

    seed: int
    params: dict[str, int | float]
    stored: dict[str, np.ndarray] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    scalars: dict[str, Any] = field(default_factory=dict)  # exact values, for the oracle
    call_scalars: list[Any] = field(default_factory=list)  # as passed to the entry function
    nbytes: dict[str, int] = field(default_factory=dict)

    def values(self, dtypes: dict[str, str]) -> dict[str, Any]:
        """The oracle's view: exact float64 values of the inputs (ints as int64), shaped, and the
        scalars."""
        out: dict[str, Any] = dict(self.scalars)
        for name, arr in self.stored.items():
            dtype = dtypes[name]
            wide = np.empty(arr.size, dtype=np.int64 if dtype == "i32" else np.float64)

            def convert(lo: int, hi: int, arr=arr, wide=wide, dtype=dtype) -> None:
                wide[lo:hi] = to_float64(arr[lo:hi], dtype)

            over_rows(0, arr.size, 1, convert)  # on all cores: big sets are GiBs of float64
            out[name] = wide.reshape(self.shapes[name])
        return out

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name, arr in self.stored.items():
            arr.tofile(folder / f"{name}.bin")


CHUNK = 1 << 22  # elements per independently seeded chunk: the values never depend on threads


def _fill(rng: np.random.Generator, dist: tuple[str, float, float], out: np.ndarray) -> None:
    kind, low, high = dist
    if kind == "randint":
        out[:] = rng.integers(int(low), int(high), size=out.size, endpoint=True, dtype=np.int32)
    elif out.dtype == np.float32:
        rng.random(out=out, dtype=np.float32)
        out *= np.float32(high - low)
        out += np.float32(low)
    else:
        out[:] = rng.uniform(low, high, out.size)


def _draw(
    seq: np.random.SeedSequence, dist: tuple[str, float, float], size: int, dtype: str
) -> np.ndarray:
    """``size`` draws from ``dist``, in chunks seeded from ``seq`` and filled in parallel."""
    kind = dist[0]
    np_dtype = np.int32 if kind == "randint" else np.float32 if dtype in ("f32", "bf16") else float
    out = np.empty(size, dtype=np_dtype)
    chunks = [(s, min(s + CHUNK, size)) for s in range(0, size, CHUNK)]
    seeds = seq.spawn(len(chunks))

    def work(i: int) -> None:
        lo, hi = chunks[i]
        _fill(np.random.default_rng(seeds[i]), dist, out[lo:hi])

    if len(chunks) == 1:
        work(0)
    else:
        with ThreadPoolExecutor(max_workers=min(len(chunks), threads())) as pool:
            list(pool.map(work, range(len(chunks))))
    return out


def _store(values: np.ndarray, dtype: str) -> np.ndarray:
    """to_storage on all cores (bf16 rounding of a GiB-sized input is seconds on one)."""
    out = np.empty(values.size, dtype=STORAGE[dtype])

    def convert(lo: int, hi: int) -> None:
        out[lo:hi] = to_storage(values[lo:hi], dtype)

    over_rows(0, values.size, 1, convert)
    return out


def _shape_values(
    values: np.ndarray, kind: str, dist: tuple[str, float, float], seq: np.random.SeedSequence
) -> np.ndarray:
    """Drawn values (flat, from ``dist``) given the value kind of an unseen case (VALUE_KINDS);
    every kind stays inside the declared range."""
    if kind == "sorted":
        return np.sort(values)
    if kind == "reversed":
        return np.sort(values)[::-1].copy()
    rng = np.random.default_rng(seq)
    if kind == "ties":
        distinct = np.unique(values[: min(values.size, 64)])[:8]
        return distinct[rng.integers(0, distinct.size, values.size)].astype(values.dtype)
    if kind == "mixed" and dist[0] == "uniform":
        _, low, high = dist
        scale = np.exp2(-rng.uniform(0.0, 24.0, values.size))
        if low < 0 < high:
            negative = rng.random(values.size) < -low / (high - low)
            mixed = np.where(negative, low * scale, high * scale)
        elif low >= 0:
            mixed = low + (high - low) * scale
        else:
            mixed = high - (high - low) * scale
        return mixed.astype(values.dtype)
    return values


def make_inputs(task: Task, case: Case, variant: str, seed: int) -> InputSet:
    """Generate one input set: the task's generator first (structured inputs), then defaults."""
    rng = np.random.default_rng(seed)
    params: dict[str, int | float] = dict(case.params)
    generated: dict[str, Any] = {}
    if task.generator is not None:
        for key, value in task.generator(dict(params), rng, variant).items():
            if isinstance(value, np.ndarray):
                generated[key] = value
            else:
                params[key] = value
    names = task.names(params, variant)
    kind = value_kind(params)
    result = InputSet(seed=seed, params=params)
    for position, arg in enumerate(task.spec.args):
        arg_seq = np.random.SeedSequence([seed, position])  # each argument its own stream
        dtype = concrete(arg.dtype, variant)
        if arg.role == "scalar":
            if arg.value is not None:
                raw = formula.evaluate(arg.value, names)
            else:
                raw = float(_draw(arg_seq, arg.distribution(), 1, "f64")[0])
            if dtype == "i32":
                result.scalars[arg.name] = int(raw)
                result.call_scalars.append(int(raw))
            elif dtype == "bf16":
                bits = int(f32_to_bf16_bits(np.array([raw], dtype=np.float32))[0])
                result.scalars[arg.name] = float(to_float64(np.array([bits], np.uint16), "bf16")[0])
                result.call_scalars.append(bits)
            else:
                result.scalars[arg.name] = float(np.float32(raw))
                result.call_scalars.append(float(np.float32(raw)))
            continue
        shape = formula.evaluate_shape(arg.shape, names) if arg.shape else None
        role = arg.role_for(variant)
        if role in ("input", "inplace"):
            if arg.generated:
                if arg.name not in generated:
                    raise UserError(f"{task.name}: generate() did not return {arg.name!r}")
                values = np.asarray(generated[arg.name])
                if shape is None:
                    shape = values.shape
                if values.size != int(np.prod(shape)):
                    raise UserError(
                        f"{task.name}: generate() gave {arg.name} {values.size} elements, "
                        f"shape {arg.shape} says {int(np.prod(shape))}"
                    )
            else:
                assert shape is not None
                values = _draw(arg_seq, arg.distribution(), int(np.prod(shape)), dtype)
                if kind != "declared":
                    values = _shape_values(values, kind, arg.distribution(), arg_seq.spawn(1)[0])
            result.stored[arg.name] = _store(np.asarray(values).reshape(-1), dtype)
        elif shape is None:
            raise UserError(f"{task.name}: output {arg.name} needs a shape")
        result.shapes[arg.name] = tuple(shape)
        result.nbytes[arg.name] = int(np.prod(shape)) * ITEMSIZE[dtype]
    return result
