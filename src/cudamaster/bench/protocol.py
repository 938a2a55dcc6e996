"""The worker protocol: every request the coordinator makes of a worker and the reply it gets,
one definition for both sides, and their wire form.

Each request is a frozen dataclass that names its command and, as its type parameter, its
reply (``class Setup(Request[SetupReply], cmd="setup")``), so that ``WorkerClient.request``
returns the right reply type and ``Worker.setup`` takes a ``Setup`` and returns a
``SetupReply``. On the wire each message is one JSON object on one line: a request carries
its command (``{"cmd": "setup", ...fields}``), a reply only its fields; a worker that fails
answers ``Fatal`` (``{"fatal": true, ...}``) and exits. Decoding checks every field against the
dataclass: a missing or unknown field, or a value of the wrong type, is a ProtocolError that
names it. Requests hold tuples (they may be kept and sent again); replies hold lists.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

T = TypeVar("T")
Scalar = int | float  # a scalar argument as passed to the entry function (bf16: its bits)


class ProtocolError(ValueError):
    """A line that is not a message of this protocol (a field missing, unknown or mistyped)."""


@dataclass(frozen=True)
class ArgSpec:
    """One argument of the entry function, in order."""

    name: str
    role: str  # input | output | inplace | accumulate | scalar
    dtype: str  # concrete: f32, bf16, i32, ...
    nbytes: int = 0  # the buffer's size in this case (0: a scalar, or not known yet)


# -- replies --------------------------------------------------------------------------------
class Reply:
    """A worker's answer to one request (each subclass is a dataclass)."""


R = TypeVar("R", bound=Reply)


@dataclass(frozen=True)
class InitReply(Reply):
    sm_count: int
    l2_bytes: int
    cc: str  # compute capability, e.g. "90"
    cudart: str  # the CUDA runtime library loaded
    # the confinement this worker puts on a candidate (bench/sandbox.py: nocaps, seccomp,
    # landlock, ...) and, one line each, what is not enforced and why (kernel, CUDAMASTER_SANDBOX)
    sandbox: list[str] = field(default_factory=list)
    sandbox_gaps: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LoadReply(Reply):
    """The library loaded (``loaded``: vendor libraries that came with it), or why it did not."""

    loaded: list[str] = field(default_factory=list)
    verdict: str | None = None  # load_error | missing_symbol, where it did not load
    error: str = ""
    sandbox: list[str] = field(default_factory=list)  # the confinement in force now

    @property
    def ok(self) -> bool:
        return self.verdict is None


@dataclass(frozen=True)
class SetupReply(Reply):
    layout: dict[str, tuple[int, int]]  # per output: (offset, bytes) in an output slot
    sandbox: list[str] = field(default_factory=list)  # the confinement in force now


@dataclass(frozen=True)
class OutputSlot:
    """Where a call's outputs were written: an output slot file, at the offsets of the case's
    layout; ``unpinned``: it could not be page-locked (correct, only slower)."""

    path: str
    unpinned: bool


@dataclass(frozen=True)
class RunReply(Reply):
    wall_ms: float  # the call and a device synchronize, on the host clock
    changed_inputs: list[str]  # inputs that differ from their pristine copy after the call
    vendor_libraries: list[str]  # vendor libraries loaded since the library was loaded
    unordered_outputs: list[str]  # outputs still being written after the call returned
    outputs: OutputSlot


@dataclass(frozen=True)
class TimeReply(Reply):
    times_ms: list[float]  # one per call, in order
    placements: int  # buffer placements that cold calls rotate over (1: none moved)


@dataclass(frozen=True)
class SaveReply(Reply):
    outputs: OutputSlot


@dataclass(frozen=True)
class Done(Reply):
    """Nothing to report."""


@dataclass(frozen=True)
class Fatal:
    """The worker failed (and exits): ``verdict`` for the evaluation, ``error`` in one line."""

    verdict: str
    error: str
    trace: str = ""


# -- requests -------------------------------------------------------------------------------
_REQUESTS: dict[str, type[Request[Any]]] = {}


class Request(Generic[R]):
    """A command to a worker; ``R``, its type parameter, is the reply it gets."""

    cmd: ClassVar[str]
    _reply: ClassVar[type[Any]]

    def __init_subclass__(cls, *, cmd: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        bases = cls.__dict__.get("__orig_bases__", ())
        replies = [typing.get_args(b)[0] for b in bases if typing.get_origin(b) is Request]
        if len(replies) != 1 or not issubclass(replies[0], Reply):
            raise TypeError(f"{cls.__name__} must subclass Request[SomeReply]")
        if cmd in _REQUESTS or cmd == Exit.cmd:
            raise TypeError(f"two requests named {cmd!r}")
        cls.cmd, cls._reply = cmd, replies[0]
        _REQUESTS[cmd] = cls

    def reply_type(self) -> type[R]:
        return self._reply


@dataclass(frozen=True)
class Exit:
    """Ends the worker's loop; it gets no reply."""

    cmd: ClassVar[str] = "exit"


@dataclass(frozen=True)
class Init(Request[InitReply], cmd="init"):
    """Start the CUDA runtime on ``device``; ``comparer``: a library comparing device buffers
    on the device (csrc/compare.cu), else they are compared through host copies."""

    device: int = 0
    comparer: str | None = None


@dataclass(frozen=True)
class Load(Request[LoadReply], cmd="load"):
    """Load the implementation's library and find its entry function. A sandboxed worker
    loads a ``trusted`` one (baselines, library baselines) now, under the trusted profile, and
    an untrusted one at its first Setup, under the full profile (bench/sandbox.py)."""

    library: str
    symbol: str
    args: tuple[ArgSpec, ...]
    trusted: bool = False


@dataclass(frozen=True)
class Setup(Request[SetupReply], cmd="setup"):
    """Load a case's ``nsets`` input sets from ``case_dir``/set*/ (with ``args``' sizes);
    ``scalars`` per set; the output slots are files in the folder ``slot_dir``."""

    case_dir: str
    nsets: int
    args: tuple[ArgSpec, ...]
    scalars: tuple[tuple[Scalar, ...], ...]
    slot_dir: str


@dataclass(frozen=True)
class Run(Request[RunReply], cmd="run"):
    """One checked call on input set ``input_set``."""

    input_set: int


@dataclass(frozen=True)
class Time(Request[TimeReply], cmd="time"):
    """``n`` timed calls rotating over ``sets`` from position ``start``; cold: L2 flushed."""

    n: int
    mode: Literal["cold", "hot"]
    sets: tuple[int, ...]
    start: int = 0


@dataclass(frozen=True)
class Save(Request[SaveReply], cmd="save"):
    """Save the outputs as the last call left them."""


@dataclass(frozen=True)
class Release(Request[Done], cmd="release"):
    """Free the case's buffers."""


@dataclass(frozen=True)
class ProfiledCall(Request[Done], cmd="profiled_call"):
    """One call on ``input_set`` between cudaProfilerStart and cudaProfilerStop."""

    input_set: int


# -- the wire -------------------------------------------------------------------------------
def encode_request(req: Request[Any] | Exit) -> str:
    """The request as one line of JSON (without the newline)."""
    return json.dumps({"cmd": req.cmd, **_fields(req)})


def decode_request(line: str | bytes) -> Request[Any] | Exit:
    """The request on one line; ProtocolError if it is not one."""
    data = _object(line)
    cmd = data.pop("cmd", None)
    if cmd == Exit.cmd and not data:
        return Exit()
    if not isinstance(cmd, str) or cmd not in _REQUESTS:
        raise ProtocolError(f"unknown command {cmd!r} (known: {', '.join(_REQUESTS)}, exit)")
    return _build(_REQUESTS[cmd], data, cmd)


def encode_reply(reply: Reply | Fatal) -> str:
    """The reply as one line of JSON (without the newline)."""
    if isinstance(reply, Fatal):
        return json.dumps({"fatal": True, **_fields(reply)})
    return json.dumps(_fields(reply))


def decode_reply(line: str | bytes, expected: type[R]) -> R | Fatal:
    """The reply on one line, of the type ``expected`` (or Fatal); ProtocolError if neither."""
    data = _object(line)
    if data.pop("fatal", False) is True:
        return _build(Fatal, data, "fatal reply")
    return _build(expected, data, expected.__name__)


def to_json(obj: Any) -> str:
    """A dataclass as JSON (the form ``from_json`` reads back)."""
    return json.dumps(_fields(obj), indent=1)


def from_json(cls: type[T], text: str | bytes) -> T:
    """A ``cls`` (a dataclass) from JSON; ProtocolError where a field is missing, unknown or
    of the wrong type."""
    return _build(cls, _object(text), cls.__name__)


def _fields(obj: Any) -> dict[str, Any]:
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"not a dataclass instance: {obj!r}")
    return dataclasses.asdict(obj)


def _object(line: str | bytes) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {exc}: {line[:200]!r}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"not a JSON object: {line[:200]!r}")
    return data


_SCHEMAS: dict[type, tuple[dict[str, Any], frozenset[str]]] = {}


def _schema(cls: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A dataclass's fields with their types, and those without a default (worked out once)."""
    if cls in _SCHEMAS:
        return _SCHEMAS[cls]
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    required = frozenset(
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    _SCHEMAS[cls] = {f.name: hints[f.name] for f in fields}, required
    return _SCHEMAS[cls]


def _build(cls: type[T], data: Any, where: str) -> T:
    """``cls`` from its JSON form, every field checked."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: expected an object, got {data!r:.80}")
    hints, required = _schema(cls)
    unknown = sorted(set(data) - set(hints))
    if unknown:
        known = ", ".join(hints) or "none"
        raise ProtocolError(f"{where}: unknown field(s) {', '.join(unknown)} (fields: {known})")
    missing = sorted(required - set(data))
    if missing:
        raise ProtocolError(f"{where}: missing field(s) {', '.join(missing)}")
    return cls(**{k: _value(hints[k], v, f"{where}.{k}") for k, v in data.items()})


def _value(tp: Any, raw: Any, where: str) -> Any:
    """``raw`` (decoded JSON) as the type ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return raw
    if origin in (typing.Union, types.UnionType):
        if raw is None and type(None) in args:
            return None
        for option in args:
            if option is type(None):
                continue
            try:
                return _value(option, raw, where)
            except ProtocolError:
                continue
        raise ProtocolError(f"{where}: {raw!r:.80} is none of {tp}")
    if origin is Literal:
        if raw not in args:
            raise ProtocolError(f"{where}: {raw!r:.80} is not one of {', '.join(map(repr, args))}")
        return raw
    if origin in (list, tuple):
        if not isinstance(raw, list):
            raise ProtocolError(f"{where}: expected a list, got {raw!r:.80}")
        if origin is list:
            return [_value(args[0], x, f"{where}[{i}]") for i, x in enumerate(raw)]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], x, f"{where}[{i}]") for i, x in enumerate(raw))
        if len(raw) != len(args):
            raise ProtocolError(f"{where}: expected {len(args)} items, got {len(raw)}")
        pairs = enumerate(zip(args, raw, strict=True))
        return tuple(_value(t, x, f"{where}[{i}]") for i, (t, x) in pairs)
    if origin is dict:
        if not isinstance(raw, dict):
            raise ProtocolError(f"{where}: expected an object, got {raw!r:.80}")
        return {_value(args[0], k, where): _value(args[1], v, f"{where}[{k!r}]")
                for k, v in raw.items()}  # fmt: skip
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build(tp, raw, where)
    if tp is float and isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if tp in (int, str, bool):
        if isinstance(raw, tp) and (tp is bool or not isinstance(raw, bool)):
            return raw
        raise ProtocolError(f"{where}: expected {tp.__name__}, got {raw!r:.80}")
    if tp is float:
        raise ProtocolError(f"{where}: expected a number, got {raw!r:.80}")
    raise TypeError(f"{where}: the protocol cannot carry {tp}")
