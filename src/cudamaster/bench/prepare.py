"""Input sets, their oracles and the judging of outputs, in a helper process, cases ahead.

Making a case's seeded input sets and computing their float64 oracles is host work of up to
seconds per case. The coordinator tells the helper which cases it will take next (up to
MAX_AHEAD, as host memory allows); a helper process (spawned once) makes the sets, writes them
where the workers load them, and computes each set's oracle, several cases at once where it has
the cores and the host memory, so that the GPU rarely waits. The oracles stay in the helper's
memory: the coordinator asks the helper to judge the outputs that the workers leave in files
(cudamaster.bench.verify), so that no oracle (up to 12 GiB per set) is ever copied.

Timed calls never share a core with that work. Where the host has cores to spare
(cudamaster.cpus), the helper runs on cores that no worker uses, and goes on while calls are
timed; otherwise the coordinator stops it with SIGSTOP for every timed stretch
(``Preparer.quiet``) and lets it go on afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from .. import cpus, formula
from ..dtypes import STORAGE, concrete
from ..errors import UserError
from ..tasks import Case, Task, load_task
from .client import worker_env
from .inputs import InputSet, case_seed, make_inputs
from .verify import CheckResult, as_magnitude, compare, recheck

log = logging.getLogger(__name__)

N_SETS = 3  # input sets per case: the first call's, the second timing set, the re-check's
# cases asked for before they are taken: the next MIN_AHEAD, and further ones (up to MAX_AHEAD)
# while their footprints (estimates, see footprint) stay within AHEAD_SHARE of host memory, so
# that a heavy oracle is started while the light cases before it are timed
MIN_AHEAD = 4
MAX_AHEAD = 32
AHEAD_SHARE = 0.5
MAX_AT_ONCE = 3  # cases the helper prepares at the same time (fewer on few cores)
MEMORY_RESERVE = 0.15  # share of host memory a case started beside others leaves free
# Linux nice values of the threads preparing a case (the judges' stays 0): the oldest case being
# prepared, which the GPU waits for first, at FIRST_NICE; the cases behind it at PREPARE_NICE
FIRST_NICE = 10
PREPARE_NICE = 19


@dataclass(frozen=True)
class CaseKey:
    """What identifies one case's prepared inputs: the same key always gives the same bytes."""

    folder: str
    variant: str
    case: Case
    base_seed: int

    def seeds(self, name: str) -> list[int]:
        return [case_seed(name, self.variant, self.case, s, self.base_seed) for s in range(N_SETS)]


@dataclass(frozen=True)
class OutputFile:
    """Where a worker left one call's outputs: one file, each output's bytes at an offset."""

    path: Path
    layout: dict[str, tuple[int, int]]  # per output: (offset, bytes)


@dataclass
class Prepared:
    """One case's input sets (written under ``case_dir``; their values are not kept here), and
    the judge of outputs against their oracles (held by the helper)."""

    rid: int
    key: CaseKey
    seeds: list[int]
    case_dir: Path
    sets: list[InputSet] = field(default_factory=list)
    oracle_seconds: dict[int, float] = field(default_factory=dict)  # per set, once computed
    making_seconds: float = 0.0  # the helper's wall time making and writing the sets
    judging_seconds: float = 0.0  # its wall time judging outputs (once each oracle was in)
    error: str | None = None
    _owner: Preparer | None = field(default=None, repr=False)

    def judge(self, index: int, outputs: OutputFile, full: bool = True) -> list[CheckResult]:
        """The outputs judged against set ``index``'s oracle (waiting for it): with ``full``
        every output's verdict with the original benchmark's rule (verify.compare), else only
        the failing outputs (verify.recheck)."""
        return self.ask(index, outputs, full).result()

    def ask(self, index: int, outputs: OutputFile, full: bool = True) -> Judgement:
        """Start judging (as ``judge``) and return at once; the file must stay as it is until
        the result is in."""
        if self._owner is None:
            raise UserError("a dropped case cannot judge outputs")
        return self._owner._ask_judge(self, index, outputs, full)

    def discard(self) -> None:
        """Free the case: its files here, its oracles in the helper."""
        if self._owner is not None:
            self._owner._drop(self)
        shutil.rmtree(self.case_dir, ignore_errors=True)


@dataclass
class Judgement:
    """A judgement asked of the helper; ``result`` waits for it."""

    jid: int
    prepared: Prepared
    owner: Preparer = field(repr=False)

    def result(self) -> list[CheckResult]:
        return self.owner._judged(self)


class Preparer:
    """The coordinator's side of the helper process; used from one thread."""

    def __init__(self, scratch: Path | None = None, cores: tuple[int, ...] | None = None) -> None:
        """``cores``: the helper's own cores (it then runs while calls are timed); None: it
        may share the workers' cores, and is stopped while anything is timed."""
        self.cores = cores
        self.root = Path(tempfile.mkdtemp(prefix="cudamaster-", dir=scratch_dir(scratch)))
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._cases: dict[int, Prepared] = {}  # asked for and not discarded
        self._verdicts: dict[int, tuple[bool, Any, float]] = {}  # judge replies, by request id
        self._ahead: list[Prepared] = []  # asked for before being taken, in order
        self._next_id = 0
        self._pauses = 0
        self._footprints: dict[tuple[str, str, str, int], int] = {}

    # -- requests ---------------------------------------------------------------------------
    def ahead(self, upcoming: Sequence[tuple[Task, str, Case]], base_seed: int) -> None:
        """The cases (task, variant, case) to be taken next, in order: the first MIN_AHEAD, and
        those after them that the ahead budget allows (MAX_AHEAD), are prepared from now on;
        those asked for earlier and no longer among them are dropped."""
        budget, spent = AHEAD_SHARE * (_memory_total() or 0), 0
        keys: list[tuple[Task, CaseKey]] = []
        for t, v, c in upcoming[:MAX_AHEAD]:
            key = CaseKey(str(t.folder), v, c, base_seed)
            spent += self._footprint(t, key)
            if len(keys) >= MIN_AHEAD and spent > budget:
                break
            keys.append((t, key))
        wanted = [k for _, k in keys]
        for dropped in [p for p in self._ahead if p.key not in wanted]:
            self._ahead.remove(dropped)
            dropped.discard()
        for task, key in keys:
            if all(p.key != key for p in self._ahead):
                self._ahead.append(self._ask(task, key))

    def _footprint(self, task: Task, key: CaseKey) -> int:
        """footprint(task, key), worked out once per case (ahead() looks at many, each time)."""
        name = (key.folder, key.variant, key.case.suite, key.case.index)
        if name not in self._footprints:
            self._footprints[name] = footprint(task, key)
        return self._footprints[name]

    def take(self, task: Task, variant: str, case: Case, base_seed: int) -> Prepared:
        """The case's input sets, written (prepared ahead, or now: then every case asked for
        ahead is dropped); raises UserError when the task's generator failed. Its oracles may
        still be computing."""
        key = CaseKey(str(task.folder), variant, case, base_seed)
        prepared = next((p for p in self._ahead if p.key == key), None)
        if prepared is not None:
            self._ahead.remove(prepared)
        else:
            self._drop_ahead()
            prepared = self._ask(task, key)
        self._pump(lambda: bool(prepared.sets) or prepared.error is not None)
        if prepared.error is not None:
            raise UserError(prepared.error)
        return prepared

    def cpu_seconds(self) -> float:
        """The CPU time (user and system, all threads) that the helper process has used so far;
        0 before it starts or where /proc does not say."""
        fields = _proc_stat(self._proc.pid) if self._proc is not None else None
        if fields is None:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @contextlib.contextmanager
    def quiet(self, strict: bool = False) -> Iterator[None]:
        """No preparation shares a core with what runs inside this block: a helper on cores of
        its own goes on, unless ``strict``; otherwise it is stopped, then continued.

        ``strict`` is for short timed calls. A timed region holds host work too (the launch,
        the synchronize, the end event), and a helper streaming through host memory slows it
        even from other cores: on an H200 host with every helper core running numpy, a 12 us
        vector_add was timed 3-4 us longer (+30%), while calls of 0.1 ms and more moved by
        about 2% or less (tests/gpu/test_timing_gpu.py)."""
        if self.cores is not None and not strict:
            yield
            return
        proc = self._proc
        stop = proc is not None and proc.poll() is None
        if stop and self._pauses == 0:
            assert proc is not None
            proc.send_signal(signal.SIGSTOP)
            _until_stopped(proc.pid)
        self._pauses += 1
        try:
            yield
        finally:
            self._pauses -= 1
            if stop and self._pauses == 0:
                assert proc is not None
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self._ahead = []
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()  # SIGKILL works on a stopped process too
            proc.wait(5)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._cases.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- talking to the helper --------------------------------------------------------------
    def _ask(self, task: Task, key: CaseKey) -> Prepared:
        if self._conn is None or self._proc is None or self._proc.poll() is not None:
            self._start()
        self._next_id += 1
        rid = self._next_id
        case_dir = self.root / "cases" / f"r{rid}"  # a sandboxed worker reads cases/ only
        prepared = Prepared(rid, key, key.seeds(task.name), case_dir, _owner=self)
        self._cases[rid] = prepared
        self._send(("prepare", rid, key, str(prepared.case_dir), self._footprint(task, key)))
        return prepared

    def _ask_judge(
        self, prepared: Prepared, index: int, outputs: OutputFile, full: bool
    ) -> Judgement:
        self._next_id += 1
        self._send(("judge", self._next_id, prepared.rid, index, outputs, full))
        return Judgement(self._next_id, prepared, self)

    def _judged(self, asked: Judgement) -> list[CheckResult]:
        jid, prepared = asked.jid, asked.prepared
        self._pump(lambda: jid in self._verdicts or prepared.error is not None)
        if jid not in self._verdicts:
            raise UserError(prepared.error or "the input-preparation process ended")
        ok, payload, seconds = self._verdicts.pop(jid)
        prepared.judging_seconds += seconds
        if not ok:
            raise UserError(payload)
        return payload

    def _drop(self, prepared: Prepared) -> None:
        prepared._owner = None
        if self._cases.pop(prepared.rid, None) is not None and self._conn is not None:
            with contextlib.suppress(OSError):
                self._send(("drop", prepared.rid))

    def _drop_ahead(self) -> None:
        dropped, self._ahead = self._ahead, []
        for prepared in dropped:
            prepared.discard()

    def _send(self, msg: tuple) -> None:
        assert self._conn is not None
        self._conn.send(msg)

    def _start(self) -> None:
        if self._conn is not None:
            self._conn.close()
        for lost in self._cases.values():
            lost.error = lost.error or "the input-preparation process ended"
        self._cases.clear()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        # a fresh interpreter (not fork: the coordinator has threads), talking over a socket; in
        # a session of its own, so that a Ctrl-C at the terminal reaches the coordinator alone
        # (which lets the evaluation under way finish); it exits when the socket closes
        ours, theirs = socket.socketpair()
        with theirs:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "cudamaster.bench.prepare", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env={**worker_env(), **cpus.env(self.cores)},
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._conn = Connection(ours.detach())

    def _pump(self, until: Callable[[], bool]) -> None:
        """Read the helper's messages until ``until()`` holds."""
        while not until():
            assert self._conn is not None and self._pauses == 0
            try:
                kind, ident, payload = self._conn.recv()
            except (EOFError, OSError):
                for lost in self._cases.values():
                    lost.error = "the input-preparation process died (out of host memory?)"
                self._conn = None
                return
            if kind == "judged":
                self._verdicts[ident] = payload
                continue
            entry = self._cases.get(ident)
            if entry is None:  # discarded already
                continue
            if kind == "inputs":
                entry.sets, entry.making_seconds = payload
            elif kind == "oracle":
                entry.oracle_seconds[payload[0]] = payload[1]
            elif kind == "error":
                entry.error = payload


def _until_stopped(pid: int, limit_s: float = 2.0) -> None:
    """Wait until the stop signal has taken effect (it is delivered asynchronously)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        fields = _proc_stat(pid)
        if fields is None:
            return  # gone, or no /proc: nothing to wait for
        if fields[0] in "TtZX":
            return
        time.sleep(0.0002)
    log.warning("the input-preparation process %d did not stop within %.0f s", pid, limit_s)


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces): the state
    first, user and system clock ticks at 11 and 12; None where the process or /proc is not."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields or None


def scratch_dir(work_dir: Path | None = None) -> str | None:
    """Where case folders go: work_dir, else /dev/shm when it holds big input sets, else /tmp."""
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        return str(work_dir)
    shm = Path("/dev/shm")  # memory-backed, when it is large enough for big input sets
    if shm.is_dir() and shutil.disk_usage(shm).free >= 16 << 30:
        return str(shm)
    return None


def footprint(task: Task, key: CaseKey) -> int:
    """A rough estimate of the host memory (bytes) one case holds while it is prepared: every
    argument whose shape the case's parameters give, in float64, three times over (values,
    oracle, temporaries) for each set. Shapes only a generator knows are not counted."""
    names = task.names(dict(key.case.params), key.variant)
    elements = 0
    for arg in task.spec.args:
        if arg.shape is None:
            continue
        with contextlib.suppress(UserError):  # a size the generator derives (nnz)
            elements += int(np.prod(formula.evaluate_shape(arg.shape, names), dtype=np.int64))
    return elements * 8 * 3 * N_SETS


def memory_available() -> int | None:
    """Host memory still available (MemAvailable, bytes), or None where /proc says nothing."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _memory_total() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def oracle_of(task: Task, variant: str, inputs: InputSet) -> dict[str, Any]:
    """The task's float64 oracle on one input set, checked to give exactly the outputs, each
    as the judge reads it (flat and contiguous, float64; a float32 magnitude stays float32), so
    that no judgement copies an oracle again."""
    dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
    out = task.oracle(inputs.values(dtypes), dict(inputs.params), variant)
    expected = {a.name for a in task.spec.args if a.role_for(variant) not in ("input", "scalar")}
    if set(out) != expected:
        raise UserError(
            f"{task.name}: oracle returned {sorted(out)}, expected outputs {sorted(expected)}"
        )
    return {name: _as_judged(value) for name, value in out.items()}


def _as_judged(value: Any) -> Any:
    ref, mag = value if isinstance(value, tuple) else (value, None)
    ref = np.ascontiguousarray(ref, dtype=np.float64).reshape(-1)
    return ref if mag is None else (ref, as_magnitude(mag).reshape(-1))


# -- inside the helper process -------------------------------------------------------------
class _Helper:
    """The helper's state: requests arrive on the main thread; cases are prepared in the order
    asked, up to ``at_once`` at a time (while host memory allows) on threads of lower priority;
    judging runs on others, each waiting for the oracle it needs."""

    def __init__(self, conn: Connection, at_once: int = 1) -> None:
        self.conn = conn
        self.send_lock = threading.Lock()
        self.lock = threading.Lock()
        self.tasks: dict[str, Task] = {}
        self.keys: dict[int, CaseKey] = {}
        self.oracles: dict[int, dict[int, dict[str, Any]]] = {}
        self.ready: dict[int, list[threading.Event]] = {}
        self.errors: dict[int, str] = {}
        self.work: queue.Queue[tuple[int, CaseKey, Path, int]] = queue.Queue()
        # a judge waits for its set's oracle; those of two cases may be pending at once
        self.judges = ThreadPoolExecutor(max_workers=2 * N_SETS)
        self.at_once = at_once
        self.busy = 0  # cases being prepared now
        self.room = threading.Condition(self.lock)  # notified when a case is done or dropped
        self.turn = threading.Lock()
        self.order: list[int] = []  # the cases being prepared, oldest first
        self.threads: dict[int, set[int]] = {}  # per case being prepared: its threads' ids

    def send(self, msg: tuple) -> None:
        with self.send_lock:
            self.conn.send(msg)

    def serve(self) -> None:
        for _ in range(self.at_once):
            threading.Thread(target=self._prepare_loop, daemon=True).start()
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                os._exit(0)
            if msg[0] == "prepare":
                _, rid, key, case_dir, size = msg
                with self.lock:
                    self.keys[rid] = key
                    self.oracles[rid] = {}
                    self.ready[rid] = [threading.Event() for _ in range(N_SETS)]
                self.work.put((rid, key, Path(case_dir), size))
            elif msg[0] == "judge":
                self.judges.submit(self._judge, *msg[1:])
            elif msg[0] == "drop":
                with self.lock:
                    self.oracles.pop(msg[1], None)
                    self.keys.pop(msg[1], None)
                    for event in self.ready.pop(msg[1], []):
                        event.set()
                    self.room.notify_all()

    def _task(self, key: CaseKey) -> Task:
        with self.lock:
            if key.folder not in self.tasks:
                self.tasks[key.folder] = load_task(Path(key.folder))
            return self.tasks[key.folder]

    def _prepare_loop(self) -> None:
        while True:
            with self.turn:  # one thread takes the next case, in order, and waits for room
                rid, key, case_dir, size = self.work.get()
                with self.room:
                    while rid in self.keys and not self._fits(rid, size):
                        self.room.wait(0.5)  # memory is freed by drops and finished cases
                    if rid not in self.keys:
                        continue  # dropped before its turn
                    self.busy += 1
                    self.order.append(rid)
            try:
                with self._enlisted(rid):
                    self._prepare(rid, key, self._task(key), case_dir)
            except Exception as exc:  # the task's generator or oracle: one line, go on
                where = f"{Path(key.folder).name} {key.variant} {key.case.suite} case "
                detail = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
                with self.lock:
                    self.errors[rid] = f"{where}{key.case.index}: {detail}"
                    for event in self.ready.get(rid, []):
                        event.set()
                self.send(("error", rid, self.errors[rid]))
            # dropped while it was being made: its files too (the coordinator removed them
            if self._done(rid):  # before they were all written)
                shutil.rmtree(case_dir, ignore_errors=True)

    def _done(self, rid: int) -> bool:
        """Case ``rid`` is no longer being prepared: the next oldest is raised to FIRST_NICE.
        Returns whether the case was dropped meanwhile."""
        with self.room:
            self.busy -= 1
            dropped = rid not in self.keys
            self.order.remove(rid)
            self.threads.pop(rid, None)
            first = set(self.threads.get(self.order[0], ())) if self.order else set()
            self.room.notify_all()
        for tid in first:  # the case the GPU now waits for first
            _renice(tid, FIRST_NICE)
        return dropped

    @contextlib.contextmanager
    def _enlisted(self, rid: int) -> Iterator[None]:
        """The calling thread works for case ``rid`` inside this block, below the judges (who
        decide the case being timed now): at FIRST_NICE while that case is the oldest being
        prepared, else at PREPARE_NICE, and raised to FIRST_NICE when it becomes the oldest. A
        Linux nice value is per thread, and the threads a thread starts (parallel.over_rows)
        inherit it. The cases behind the oldest run at the lowest priority: their oracles run up
        to MAX_AT_ONCE * N_SETS at once, each over many threads, and would otherwise take the
        cores from the oracle that the GPU is waiting for."""
        tid = threading.get_native_id()
        with self.lock:
            mine = self.threads.setdefault(rid, set())
            mine.add(tid)
            first = bool(self.order) and self.order[0] == rid
        _renice(tid, FIRST_NICE if first else PREPARE_NICE)
        try:
            yield
        finally:
            with self.lock:
                mine.discard(tid)

    def _fits(self, rid: int, size: int) -> bool:
        """Whether case ``rid`` of about ``size`` bytes may start now: while the host keeps
        MEMORY_RESERVE of its memory free after it, and always when no other case is being
        prepared and at most one older case is held. The coordinator, waiting to take a case,
        holds the one before it until this one's first calls are made (bench.evaluate), so
        such a case must start; older cases prepared ahead are let go as it goes on."""
        held = sum(1 for other in self.keys if other < rid and other not in self.order)
        if self.busy == 0 and held <= 1:
            return True
        free, total = memory_available(), _memory_total()
        if free is None or total is None:
            return False  # unknown memory: one case at a time
        return free - size >= MEMORY_RESERVE * total

    def _prepare(self, rid: int, key: CaseKey, task: Task, case_dir: Path) -> None:
        t0 = time.monotonic()
        seeds = key.seeds(task.name)

        def make(index: int) -> InputSet:
            with self._enlisted(rid):
                inp = make_inputs(task, key.case, key.variant, seeds[index])
                inp.write(case_dir / f"set{index}")
            return inp

        with ThreadPoolExecutor(max_workers=N_SETS) as pool:  # the sets are independent
            sets = list(pool.map(make, range(N_SETS)))
        made = [replace(s, stored={}) for s in sets]  # the values are in the files
        self.send(("inputs", rid, (made, time.monotonic() - t0)))

        def oracle(index: int) -> None:
            t0 = time.monotonic()
            with self._enlisted(rid):
                out = oracle_of(task, key.variant, sets[index])
            with self.lock:
                if rid not in self.keys:
                    return  # dropped meanwhile
                self.oracles[rid][index] = out
                ready = self.ready[rid][index]
            self.send(("oracle", rid, (index, time.monotonic() - t0)))
            ready.set()

        with ThreadPoolExecutor(max_workers=N_SETS) as pool:  # numpy releases the GIL
            list(pool.map(oracle, range(N_SETS)))

    def _judge(self, jid: int, rid: int, index: int, outputs: OutputFile, full: bool) -> None:
        seconds = 0.0
        try:
            with self.lock:
                events, key = self.ready.get(rid), self.keys.get(rid)
            if events is None or key is None:
                raise UserError("judging a case that was dropped")
            events[index].wait()
            with self.lock:
                if rid in self.errors:
                    raise UserError(self.errors[rid])
                oracle = self.oracles.get(rid, {}).get(index)
            if oracle is None:
                raise UserError("judging a case that was dropped")
            t0 = time.monotonic()
            verdicts = _judge_outputs(self._task(key), key.variant, oracle, outputs, full)
            seconds = time.monotonic() - t0
            reply: tuple[bool, Any, float] = (True, verdicts, seconds)
        except UserError as exc:
            reply = (False, str(exc), seconds)
        except Exception as exc:  # a bug: one line for the coordinator
            reply = (False, f"judging outputs failed: {type(exc).__name__}: {exc}", seconds)
        self.send(("judged", jid, reply))


def _renice(tid: int, nice: int) -> None:
    """Set a thread's nice value; raising a priority needs privileges (root, CAP_SYS_NICE), and
    without them the thread keeps the lower one."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, tid, nice)


def _judge_outputs(
    task: Task, variant: str, oracle: dict[str, Any], outputs: OutputFile, full: bool
) -> list[CheckResult]:
    """Each output in ``outputs`` against the oracle (see Prepared.judge)."""
    tol = task.spec.tolerance[variant]
    verdicts = []
    for name, expected in oracle.items():
        ref, mag = expected if isinstance(expected, tuple) else (expected, None)
        arg = next(a for a in task.spec.args if a.name == name)
        dtype = concrete(arg.dtype, variant)
        storage = np.dtype(STORAGE[dtype])
        offset, nbytes = outputs.layout[name]
        n = nbytes // storage.itemsize
        try:
            got = (
                np.memmap(outputs.path, dtype=storage, mode="r", offset=offset, shape=(n,))
                if n
                else np.empty(0, storage)
            )
            if full:
                rule = task.spec.paper_rule
                verdicts.append(compare(name, got, ref, mag, tol, rule, dtype, stored=True))
            elif (failed := recheck(name, got, ref, mag, tol, dtype, stored=True)) is not None:
                verdicts.append(failed)
        except ValueError as exc:  # a task whose oracle and output shapes disagree
            raise UserError(f"{task.name}: {exc}") from None
    return verdicts


def main() -> None:
    """The helper process: serve the coordinator on the socket whose descriptor is argv[1]."""
    _die_with_parent()
    logging.basicConfig(level=logging.WARNING)
    at_once = max(1, min(MAX_AT_ONCE, len(cpus.available()) // N_SETS))
    _Helper(Connection(int(sys.argv[1])), at_once).serve()


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process if the coordinator dies (even while it is stopped)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


if __name__ == "__main__":
    main()
