"""Input sets and oracles, made one case ahead in a helper process that stops while the GPU times.

Making a case's seeded input sets and computing their float64 oracles is host work of up to
seconds per case. The coordinator asks for the next case as soon as it starts one; a helper
process (spawned once, it serves requests in order) makes the sets, writes them where the
workers load them, and stores each oracle next to them, so that the GPU rarely waits.

Timed calls must not share the host with that work: the coordinator stops the helper with
SIGSTOP for every timed stretch (``Preparer.paused``) and lets it go on afterwards, so no
preparation runs while anything is timed.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import concrete
from ..errors import UserError
from ..tasks import Case, Task, load_task
from .inputs import InputSet, case_seed, make_inputs

log = logging.getLogger(__name__)

N_SETS = 3  # input sets per case: the first call's, the second timing set, the re-check's
MAPPED_BYTES = 1 << 20  # oracles larger than this are mapped from their file, not read


@dataclass(frozen=True)
class CaseKey:
    """What identifies one case's prepared inputs: the same key always gives the same bytes."""

    folder: str
    variant: str
    case: Case
    base_seed: int

    def seeds(self, name: str) -> list[int]:
        return [case_seed(name, self.variant, self.case, s, self.base_seed) for s in range(N_SETS)]


@dataclass
class Prepared:
    """One case's input sets (written under ``case_dir``; their values are not kept here) and,
    once computed, their oracles."""

    key: CaseKey
    seeds: list[int]
    case_dir: Path
    sets: list[InputSet] = field(default_factory=list)
    oracle_seconds: list[float] = field(default_factory=list)
    error: str | None = None
    _owner: Preparer | None = field(default=None, repr=False)
    _oracles: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)

    def oracle(self, index: int) -> dict[str, Any]:
        """The oracle of set ``index``: per output its values, or (values, magnitude); waits for
        the helper where it is still computing."""
        if not self.oracle_seconds and self._owner is not None:
            self._owner._wait(self, "oracles")
        if index not in self._oracles:
            self._oracles[index] = _load_oracle(self.case_dir / f"oracle{index}")
        return self._oracles[index]

    def wait_oracles(self) -> None:
        self.oracle(0)

    def discard(self) -> None:
        self._oracles.clear()
        shutil.rmtree(self.case_dir, ignore_errors=True)


class Preparer:
    """The coordinator's side of the helper process; used from one thread."""

    def __init__(self, scratch: Path | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cudamaster-", dir=scratch_dir(scratch)))
        self._proc: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._inflight: dict[int, Prepared] = {}  # asked for, final message not yet read
        self._ahead: Prepared | None = None
        self._next_id = 0
        self._pauses = 0

    # -- requests ---------------------------------------------------------------------------
    def ahead(self, task: Task, variant: str, case: Case, base_seed: int) -> None:
        """Start preparing a case that will be taken next (a previous such case not taken is
        dropped)."""
        key = CaseKey(str(task.folder), variant, case, base_seed)
        if self._ahead is not None and self._ahead.key == key:
            return
        self._drop_ahead()
        self._ahead = self._ask(task, key)

    def take(self, task: Task, variant: str, case: Case, base_seed: int) -> Prepared:
        """The case's input sets, written (prepared ahead, or now); raises UserError when the
        task's generator or oracle failed. The oracles may still be computing."""
        key = CaseKey(str(task.folder), variant, case, base_seed)
        if self._ahead is not None and self._ahead.key == key:
            prepared, self._ahead = self._ahead, None
        else:
            self._drop_ahead()
            prepared = self._ask(task, key)
        self._wait(prepared, "inputs")
        return prepared

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No preparation runs inside this block (the helper is stopped, then continued)."""
        proc = self._proc
        stop = proc is not None and proc.is_alive() and proc.pid is not None
        if stop and self._pauses == 0:
            os.kill(proc.pid, signal.SIGSTOP)  # type: ignore[union-attr, arg-type]
            _until_stopped(proc.pid)  # type: ignore[union-attr, arg-type]
        self._pauses += 1
        try:
            yield
        finally:
            self._pauses -= 1
            if stop and self._pauses == 0:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)  # type: ignore[union-attr, arg-type]

    def close(self) -> None:
        self._ahead = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)  # works on a stopped process too
            proc.join(5)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._inflight.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the helper -------------------------------------------------------------------------
    def _ask(self, task: Task, key: CaseKey) -> Prepared:
        if self._proc is None or not self._proc.is_alive():
            self._start()
        assert self._conn is not None
        self._next_id += 1
        rid = self._next_id
        prepared = Prepared(key, key.seeds(task.name), self.root / f"r{rid}", _owner=self)
        self._inflight[rid] = prepared
        self._conn.send((rid, key, str(prepared.case_dir)))
        return prepared

    def _start(self) -> None:
        if self._conn is not None:
            self._conn.close()
        for lost in self._inflight.values():
            lost.error = lost.error or "the input-preparation process ended"
        self._inflight.clear()
        ctx = multiprocessing.get_context("spawn")  # not fork: the coordinator has threads
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="cm-prepare")
        self._proc.start()
        child.close()

    def _wait(self, prepared: Prepared, stage: str) -> None:
        """Read the helper's messages until ``prepared`` has reached ``stage``."""

        def reached() -> bool:
            if prepared.error is not None:
                return True
            return bool(prepared.sets) if stage == "inputs" else bool(prepared.oracle_seconds)

        while not reached():
            assert self._conn is not None and self._pauses == 0
            try:
                rid, kind, payload = self._conn.recv()
            except (EOFError, OSError):
                prepared.error = "the input-preparation process died (out of host memory?)"
                self._start()  # the next request gets a fresh helper
                break
            entry = self._inflight.get(rid)
            if entry is None:
                continue
            if kind == "inputs":
                entry.sets = payload
            elif kind == "oracles":
                entry.oracle_seconds = payload
            else:
                entry.error = payload
            if kind != "inputs":
                del self._inflight[rid]
                if entry._owner is None:  # dropped before it was done
                    entry.discard()
        if prepared.error is not None:
            raise UserError(prepared.error)

    def _drop_ahead(self) -> None:
        dropped, self._ahead = self._ahead, None
        if dropped is None:
            return
        dropped._owner = None
        if dropped.error is not None or dropped.oracle_seconds:
            dropped.discard()  # done already; otherwise discarded when its last message comes


def _until_stopped(pid: int, limit_s: float = 2.0) -> None:
    """Wait until the stop signal has taken effect (it is delivered asynchronously)."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return  # gone, or no /proc: nothing to wait for
        if state in "TtZX":
            return
        time.sleep(0.0002)
    log.warning("the input-preparation process %d did not stop within %.0f s", pid, limit_s)


def scratch_dir(work_dir: Path | None = None) -> str | None:
    """Where case folders go: work_dir, else /dev/shm when it holds big input sets, else /tmp."""
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        return str(work_dir)
    shm = Path("/dev/shm")  # memory-backed, when it is large enough for big input sets
    if shm.is_dir() and shutil.disk_usage(shm).free >= 16 << 30:
        return str(shm)
    return None


# -- inside the helper process -------------------------------------------------------------
def _serve(conn: Connection) -> None:
    """Serve preparation requests in order until the pipe closes."""
    _die_with_parent()
    tasks: dict[str, Task] = {}
    while True:
        try:
            rid, key, case_dir = conn.recv()
        except (EOFError, OSError):
            return
        where = f"{Path(key.folder).name} {key.variant} {key.case.suite} case {key.case.index}"
        try:
            if key.folder not in tasks:
                tasks[key.folder] = load_task(Path(key.folder))
            seconds = _prepare(tasks[key.folder], key, Path(case_dir), conn, rid)
        except UserError as exc:
            conn.send((rid, "error", f"{where}: {exc}"))
        except Exception as exc:  # a bug in a task's generator or oracle: one line, go on
            conn.send((rid, "error", f"{where}: {type(exc).__name__}: {exc}"))
        else:
            conn.send((rid, "oracles", seconds))


def _prepare(task: Task, key: CaseKey, case_dir: Path, conn: Connection, rid: int) -> list[float]:
    """Make and write the sets (then say so), compute and store their oracles; returns each
    oracle's seconds."""
    seeds = key.seeds(task.name)

    def make(index: int) -> InputSet:
        inp = make_inputs(task, key.case, key.variant, seeds[index])
        inp.write(case_dir / f"set{index}")
        return inp

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=N_SETS) as pool:  # the sets are independent
        sets = list(pool.map(make, range(N_SETS)))
    log.info("%s %s case %d: inputs ready in %.1f s", task.name, key.variant, key.case.index,
             time.monotonic() - t0)  # fmt: skip
    conn.send((rid, "inputs", [replace(s, stored={}) for s in sets]))  # values stay in files

    def oracle(index: int) -> float:
        t = time.monotonic()
        _save_oracle(oracle_of(task, key.variant, sets[index]), case_dir / f"oracle{index}")
        return time.monotonic() - t

    with ThreadPoolExecutor(max_workers=N_SETS) as pool:  # numpy releases the GIL
        return list(pool.map(oracle, range(N_SETS)))


def oracle_of(task: Task, variant: str, inputs: InputSet) -> dict[str, Any]:
    """The task's float64 oracle on one input set, checked to give exactly the outputs."""
    dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
    out = task.oracle(inputs.values(dtypes), dict(inputs.params), variant)
    expected = {a.name for a in task.spec.args if a.role_for(variant) not in ("input", "scalar")}
    if set(out) != expected:
        raise UserError(
            f"{task.name}: oracle returned {sorted(out)}, expected outputs {sorted(expected)}"
        )
    return out


def _save_oracle(out: dict[str, Any], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in out.items():
        ref, mag = value if isinstance(value, tuple) else (value, None)
        np.save(folder / f"{name}.ref.npy", np.asarray(ref, dtype=np.float64))
        if mag is not None:
            np.save(folder / f"{name}.mag.npy", np.asarray(mag, dtype=np.float64))


def _load_oracle(folder: Path) -> dict[str, Any]:
    def load(path: Path) -> np.ndarray:
        big = path.stat().st_size > MAPPED_BYTES
        return np.load(path, mmap_mode="r" if big else None)

    out: dict[str, Any] = {}
    for ref in sorted(folder.glob("*.ref.npy")):
        name = ref.name.removesuffix(".ref.npy")
        mag = folder / f"{name}.mag.npy"
        out[name] = (load(ref), load(mag)) if mag.exists() else load(ref)
    return out


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process if the coordinator dies (even while it is stopped)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
