"""Task folders: load, validate and discover MSKernelBench operators.

A task is one folder under ``tasks/`` holding ``task.toml``, the baselines and a
``reference.py`` with the float64 oracle (and, optionally, an input generator).
See docs/task-format.md for every field.
"""

from __future__ import annotations

import importlib.util
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import formula
from .dtypes import VARIANTS
from .errors import UserError

Role = Literal["input", "output", "inplace", "accumulate", "scalar"]
ArgDtype = Literal["T", "f32", "bf16", "i32"]
_DIST = re.compile(r"^(uniform|randint)\(\s*(-?[\d.eE+-]+)\s*,\s*(-?[\d.eE+-]+)\s*\)$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RANGE = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*$")
#: How the harness may draw the values of an unseen case's inputs that are not generated (see
#: bench/inputs.py): as declared; with mixed magnitudes (the declared bound times 2^-U(0, 24),
#: signs as declared); as ties (8 distinct values); sorted ascending; sorted descending.
VALUE_KINDS = ("declared", "mixed", "ties", "sorted", "reversed")
#: The case parameter that carries an unseen case's value kind (an index into VALUE_KINDS).
VALUES_PARAM = "values"


def value_kind(params: dict[str, int | float]) -> str:
    """The value kind a case's harness-drawn inputs take ("declared" but in unseen cases)."""
    return VALUE_KINDS[int(params.get(VALUES_PARAM, 0))]


def _check_formula(text: str) -> None:
    try:
        formula.parse(text)
    except UserError as exc:  # pydantic reports ValueErrors with the field's location
        raise ValueError(str(exc)) from None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Arg(_Strict):
    """One parameter of the operator's entry function, in signature order."""

    name: str
    role: Role
    dtype: ArgDtype
    shape: str | None = None
    value: str | None = None
    dist: str | None = None
    bf16_role: Role | None = None
    generated: bool = False

    @field_validator("shape", "value")
    @classmethod
    def _parses(cls, text: str | None) -> str | None:
        if text is not None:
            for part in text.split(","):
                _check_formula(part)
        return text

    @field_validator("dist")
    @classmethod
    def _dist_form(cls, text: str | None) -> str | None:
        if text is not None and not _DIST.match(text.strip()):
            raise ValueError("dist must be 'uniform(a, b)' or 'randint(a, b)'")
        return text

    @model_validator(mode="after")
    def _role_fields(self) -> Arg:
        if not _IDENT.match(self.name):
            raise ValueError(f"name {self.name!r} is not a C identifier")
        if self.role == "scalar":
            if (self.value is None) == (self.dist is None):
                raise ValueError(f"scalar {self.name!r} needs exactly one of 'value' or 'dist'")
        elif self.shape is None and not self.generated:
            raise ValueError(f"pointer argument {self.name!r} needs 'shape' (or generated = true)")
        return self

    def role_for(self, variant: str) -> Role:
        """The argument's output contract in one variant (FP32 and BF16 may differ)."""
        if variant == "bf16" and self.bf16_role is not None:
            return self.bf16_role
        return self.role

    def distribution(self) -> tuple[str, float, float]:
        """(kind, low, high) of the default random distribution; uniform(-1, 1) if unset."""
        if self.dist is None:
            return ("uniform", -1.0, 1.0)
        m = _DIST.match(self.dist.strip())
        assert m is not None
        return (m.group(1), float(m.group(2)), float(m.group(3)))


class Metrics(_Strict):
    """Formulas over case parameters: complexity T, compulsory bytes and FLOPs."""

    complexity: str
    bytes: str
    flops: str
    peak: Literal["fp32", "tensor"] = "fp32"

    @field_validator("complexity", "bytes", "flops")
    @classmethod
    def _parses(cls, text: str) -> str:
        _check_formula(text)
        return text


class Tolerance(_Strict):
    """Pass iff |got - ref| <= atol + rtol*|ref| + mtol*mag, for every checked element.

    ``mag`` is the oracle's per-element magnitude (e.g. the sum of |terms| of a reduction);
    where the oracle gives none, it is |ref|.
    """

    rtol: float = Field(ge=0)
    atol: float = Field(default=0.0, ge=0)
    mtol: float = Field(default=0.0, ge=0)
    budget: float = Field(default=0.0, ge=0, lt=1)


class PaperRule(_Strict):
    """The original benchmark's comparator, reported next to our verdict."""

    kind: Literal["abs", "rel"]
    tol: float = Field(gt=0)
    budget: float = Field(default=0.0, ge=0, lt=1)


class ShapeSpace(_Strict):
    """``[unseen]``: the operator's valid shape space. Every correctness check also runs on
    extra cases drawn from it (bench/unseen.py), judged and never timed.

    ``dims`` gives each case parameter either an inclusive range ``"lo..hi"`` or a list of the
    values it may take; ``where`` are constraints between them (formulas that must give a
    non-zero value, such as ``"k <= L"``); ``values`` are the value kinds (VALUE_KINDS) that
    the inputs the harness draws may take."""

    dims: dict[str, str | list[int | float]]
    where: list[str] = []
    values: list[str] = ["declared"]

    @field_validator("dims")
    @classmethod
    def _dims(cls, dims: dict[str, str | list[int | float]]) -> dict[str, str | list[int | float]]:
        if not dims:
            raise ValueError("dims must name every case parameter")
        for name, dim in dims.items():
            if isinstance(dim, str):
                m = _RANGE.match(dim)
                if not m or int(m.group(1)) > int(m.group(2)):
                    raise ValueError(f"dims.{name}: {dim!r} is not a range 'lo..hi' with lo <= hi")
            elif not dim:
                raise ValueError(f"dims.{name}: the list of values is empty")
        return dims

    @field_validator("where")
    @classmethod
    def _where(cls, where: list[str]) -> list[str]:
        for text in where:
            _check_formula(text)
        return where

    @field_validator("values")
    @classmethod
    def _values(cls, values: list[str]) -> list[str]:
        unknown = [v for v in values if v not in VALUE_KINDS]
        if unknown or not values or len(set(values)) != len(values):
            raise ValueError(f"values must be distinct names from {', '.join(VALUE_KINDS)}")
        return values

    def range_of(self, name: str) -> tuple[int, int] | None:
        """The inclusive range of a range dimension; None for a listed one."""
        dim = self.dims[name]
        if not isinstance(dim, str):
            return None
        m = _RANGE.match(dim)
        assert m is not None
        return int(m.group(1)), int(m.group(2))


class TaskSpec(_Strict):
    """The validated content of one task.toml."""

    name: str
    category: str
    summary: str
    symbol: str | None = None
    library: str | None = None
    library_note: str | None = None
    library_links: list[Literal["cublas", "cublasLt", "cusparse", "cudnn", "cufft"]] = []
    semantics_note: str | None = None
    args: list[Arg]
    suites: dict[str, list[dict[str, int | float]]]
    metrics: Metrics
    tolerance: dict[str, Tolerance]
    paper_rule: PaperRule
    unseen: ShapeSpace

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise ValueError("argument names must be unique")
        for variant in VARIANTS:
            if not any(a.role_for(variant) != "input" and a.role != "scalar" for a in self.args):
                raise ValueError(f"no output argument in the {variant} variant")
        for suite in ("paper", "large"):
            if not self.suites.get(suite):
                raise ValueError(f"suites.{suite} must list at least one case")
        missing = [v for v in VARIANTS if v not in self.tolerance]
        if missing:
            raise ValueError(f"tolerance.{missing[0]} is missing")
        params = {k for cases in self.suites.values() for case in cases for k in case}
        if undeclared := sorted(params - set(self.unseen.dims)):
            raise ValueError(
                f"unseen.dims must give every case parameter ({', '.join(undeclared)})"
            )
        if VALUES_PARAM in params or VALUES_PARAM in self.unseen.dims:
            raise ValueError(f"{VALUES_PARAM!r} is the harness's parameter, not a case's")
        for text in self.unseen.where:
            if unknown := sorted(formula.names_in(text) - set(self.unseen.dims)):
                raise ValueError(f"unseen.where {text!r} names {', '.join(unknown)}, not a dim")
        return self


@dataclass(frozen=True)
class Case:
    """One size of one suite: its parameters and position."""

    suite: str
    index: int
    params: dict[str, int | float]

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params.items())


@dataclass(frozen=True)
class Task:
    """A loaded operator folder."""

    spec: TaskSpec
    folder: Path
    _module: list[ModuleType] = field(default_factory=list, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.spec.name

    def symbol(self, variant: str) -> str:
        base = self.spec.symbol or self.spec.name
        return base if variant == "fp32" else f"{base}_bf16"

    def cases(self, suite: str) -> list[Case]:
        if suite not in self.spec.suites:
            raise UserError(
                f"task {self.name} has no suite {suite!r} (has: {', '.join(self.spec.suites)})"
            )
        return [Case(suite, i, dict(p)) for i, p in enumerate(self.spec.suites[suite])]

    def source(self, kind: Literal["baseline", "library"], variant: str) -> Path | None:
        """Path of baseline.cu / baseline_bf16.cu / library.cu / library_bf16.cu, if present."""
        suffix = "" if variant == "fp32" else "_bf16"
        path = self.folder / f"{kind}{suffix}.cu"
        return path if path.exists() else None

    @cached_property
    def reference(self) -> ModuleType:
        """The folder's reference.py (oracle and optional generator), imported once."""
        path = self.folder / "reference.py"
        spec = importlib.util.spec_from_file_location(f"cudamaster_ref_{self.name}", path)
        if spec is None or spec.loader is None or not path.exists():
            raise UserError(f"{path} is missing: every task needs a float64 oracle")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if not callable(getattr(module, "oracle", None)):
            raise UserError(f"{path} does not define oracle(inputs, params, variant)")
        return module

    @property
    def oracle(self) -> Callable[..., dict[str, Any]]:
        return self.reference.oracle

    @property
    def generator(self) -> Callable[..., dict[str, Any]] | None:
        return getattr(self.reference, "generate", None)

    def names(self, params: dict[str, int | float], variant: str) -> dict[str, int | float]:
        """Names visible to formulas: the case parameters and e (element bytes)."""
        return {**params, "e": 4 if variant == "fp32" else 2}

    def complexity(self, params: dict[str, int | float], variant: str = "fp32") -> int:
        """The case's complexity T, exact (never wraps); must fit in a signed 64-bit int."""
        t = formula.evaluate(self.spec.metrics.complexity, self.names(params, variant))
        t = int(t)
        if not 0 < t < 2**63:
            raise UserError(f"{self.name}: complexity {t} of case {params} is not in (0, 2^63)")
        return t


def _format_validation(path: Path, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{path}: field {loc}: {msg}"


def load_task(folder: Path) -> Task:
    """Load and validate one task folder; a malformed task.toml raises a UserError naming the
    field."""
    path = folder / "task.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path} is missing") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise UserError(_format_validation(path, exc)) from None
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
    if spec.name != folder.name:
        raise UserError(f"{path}: field name: {spec.name!r} must equal the folder name")
    return Task(spec=spec, folder=folder)


def tasks_root() -> Path:
    """The tasks/ folder: $CUDAMASTER_TASKS, else the one beside the source tree."""
    env = os.environ.get("CUDAMASTER_TASKS")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / "tasks"
    if not root.is_dir():
        raise UserError(f"no tasks folder at {root}: set CUDAMASTER_TASKS to the repo's tasks/")
    return root


def discover(root: Path | None = None) -> dict[str, Task]:
    """All tasks under root, by name, found by globbing */task.toml."""
    root = root or tasks_root()
    return {t.name: t for t in (load_task(p.parent) for p in sorted(root.glob("*/task.toml")))}


def get_task(name: str, root: Path | None = None) -> Task:
    """One task by name, or a UserError listing close names."""
    tasks = discover(root)
    if name not in tasks:
        import difflib

        close = difflib.get_close_matches(name, list(tasks), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else " (see `cudamaster tasks`)"
        raise UserError(f"unknown operator {name!r}{hint}")
    return tasks[name]
