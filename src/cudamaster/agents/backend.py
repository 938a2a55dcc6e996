"""What the loop asks of the machine it runs on: build a candidate (any machine with nvcc),
screen candidates and evaluate them in full, profile (a GPU).

A run goes on without a GPU until it needs one: ``CpuBackend`` builds with the arch recorded
when the run last saw its GPU, and raises ``NeedsGpu`` for the rest, so every task stops in a
clean ``needs_gpu`` state and `cudamaster resume` on a GPU machine picks them all up.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Protocol

from ..bench.build import BuildError, build
from ..device import DeviceFacts
from .outcome import Outcome, ProfileView

LOG_TAIL = 40  # lines of a failed build's log given to the debug agent
DEVICE_FILE = "device.json"  # in the run directory: the facts of the GPU the run last saw


class NeedsGpu(Exception):
    """The task's next step needs a GPU, and this machine has none."""


@dataclass(frozen=True)
class Submission:
    """A source to build and run, with its nvcc flags, under a name for its files."""

    name: str
    source: str
    flags: tuple[str, ...] = ("-O3",)


class Backend(Protocol):
    def device(self) -> DeviceFacts:
        """The GPU the prompts describe and the builds target."""
        ...

    def compile(self, sub: Submission) -> Outcome | None:
        """None when ``sub`` builds; its compile_error outcome (with the log) when not."""
        ...

    def screen(self, subs: list[Submission], variants: bool) -> list[Outcome]:
        """Each checked (suite and unseen cases) and timed briefly against the baseline of the
        same session, without the library (with ``variants``, beside its flag variants: the
        fastest correct build is its outcome). Outcomes say stage "screen"."""
        ...

    def evaluate(self, subs: list[Submission]) -> list[Outcome]:
        """The full interleaved evaluation of all of ``subs`` in one session with the baseline
        and the library: the numbers reported. Outcomes say stage "full"."""
        ...

    def profile(self, sub: Submission, mode: str, case: int) -> ProfileView: ...


def extra_flags(flags: tuple[str, ...]) -> tuple[str, ...]:
    """Flags beyond the build's own -O3."""
    return tuple(f for f in flags if f != "-O3")


def log_tail(path: Path | None, lines: int = LOG_TAIL) -> str:
    try:
        text = path.read_text(errors="replace") if path else ""
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def compile_check(path: Path, arch: str, flags: tuple[str, ...]) -> Outcome | None:
    """Build ``path`` for ``arch``: None when it builds, else its compile_error outcome."""
    try:
        build(path, arch, (), extra_flags(flags))
    except BuildError as exc:
        return Outcome("compile_error", str(exc), list(flags), compile_log=log_tail(exc.log_path))
    return None


def save_device(run_root: Path, device: DeviceFacts) -> str | None:
    """Record the GPU the run now uses; returns the model it replaces, where it is another."""
    before = load_device(run_root)
    path = run_root / DEVICE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(device), indent=1))
    return before.name if before is not None and before.name != device.name else None


def load_device(run_root: Path) -> DeviceFacts | None:
    path = run_root / DEVICE_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return DeviceFacts(**{f.name: data[f.name] for f in fields(DeviceFacts)})


class CpuBackend:
    """A machine without a GPU: builds for the GPU the run last saw; everything else waits."""

    def __init__(self, run_root: Path, code_dir: Path, why: str) -> None:
        self.run_root, self.code_dir, self.why = run_root, code_dir, why

    def device(self) -> DeviceFacts:
        device = load_device(self.run_root)
        if device is None:
            raise NeedsGpu(f"the baseline's evaluation needs a GPU ({self.why})")
        return device

    def compile(self, sub: Submission) -> Outcome | None:
        path = self.code_dir / f"{sub.name}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sub.source)
        return compile_check(path, self.device().arch, sub.flags)

    def screen(self, subs: list[Submission], variants: bool) -> list[Outcome]:
        raise NeedsGpu(f"{len(subs)} candidate(s) to screen ({self.why})")

    def evaluate(self, subs: list[Submission]) -> list[Outcome]:
        raise NeedsGpu(f"{len(subs)} evaluation(s) to run ({self.why})")

    def profile(self, sub: Submission, mode: str, case: int) -> ProfileView:
        raise NeedsGpu(f"a profile of {sub.name} ({self.why})")
