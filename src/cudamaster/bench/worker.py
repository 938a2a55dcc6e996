"""The isolated worker: one process per implementation under test.

It loads one built library, holds the case's buffers on the GPU, and runs the calls the
coordinator asks for: checked calls (poisoned outputs, zeroed accumulators, restored in-place
inputs; inputs compared afterwards) and timed batches; cold timed calls rotate over several
placements of the buffers (copies at other device addresses; see Worker.time). Outputs are
copied, when asked, into one of a few output files (slots, memory-backed, every output of a call
at its offset), mapped and page-locked once for the worker's life and resized only when a case
needs it, so that the coordinator reads them without another copy and no case pays for fresh
page-locked memory (about 0.5 s per GiB on an H200 host). The slots take turns, so that the
coordinator can judge the outputs of one case while the next case writes its own. It judges
nothing: verdicts are the coordinator's. A crash, a CUDA error or a hang ends only this process.

Protocol (bench/protocol.py): one JSON request per line on stdin; one JSON reply per line on
the original stdout, which is moved to a private descriptor so that anything the implementation
prints goes to stderr.

Confinement (bench/sandbox.py, docs/sandbox.md): the worker process puts a Landlock layer on
itself at start (no other process's /proc entries), confines itself further before a trusted
library is loaded, and loads a candidate's library only at its first case, once the full
profile, whose files are the folder of the case and slot folders, is in force: the library's
constructors run at dlopen. A Worker made by other code (the profile target under ncu, which
injects itself into the process) is not confined, and says so in its replies.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..cpus import one_cpu
from .cudart import (
    ATTR_CC_MAJOR,
    ATTR_CC_MINOR,
    ATTR_L2_BYTES,
    ATTR_SM_COUNT,
    CudaRuntime,
    loaded_libraries,
)
from .protocol import (
    ArgSpec,
    Done,
    Exit,
    Fatal,
    Init,
    InitReply,
    Load,
    LoadReply,
    OutputSlot,
    ProfiledCall,
    Release,
    Reply,
    Request,
    Run,
    RunReply,
    Save,
    SaveReply,
    Scalar,
    Setup,
    SetupReply,
    Time,
    TimeReply,
    decode_request,
    encode_reply,
)
from .sandbox import Confinement, Profile
from .symbols import VENDOR_LIBRARY_FILES

POISON_BYTE = 0xFF  # all-ones is NaN in fp32 and bf16, and -1 in int32
SCALAR_CTYPES = {"i32": ctypes.c_int, "f32": ctypes.c_float, "bf16": ctypes.c_uint16}
PLACEMENTS = 8  # buffer placements that cold timed calls rotate over, at most
PLACEMENT_SHARE = 0.125  # of the device memory free at the first cold batch, at most, for them
#: How the worker's synchronize waits, set through SYNC_ENV (unset: the runtime's automatic
#: choice): cudaDeviceScheduleSpin, Yield or BlockingSync.
SYNC_ENV = "CUDAMASTER_SYNC"
SYNC_FLAGS = {"spin": 1, "yield": 2, "blocking": 4}
# output slots: per case one for the checked calls (first and re-check), one for the last timed
# call; a case's slots are read until the next case, its first calls made, waits for their
# verdicts (bench.evaluate), so three in turn suffice: case k writes slots 2k and 2k+1 (mod 3)
SLOTS = 3
SLOT_ALIGN = 1 << 12  # each output's offset in a slot
# a slot is made smaller once a case needs less than SHRINK_BELOW of it and it is larger than
# SHRINK_FROM bytes; smaller ones keep their size for the worker's life (the bench alternates
# small and large suites, and page-locking a slot again is 0.5 s per GiB, host memory is not)
SHRINK_BELOW = 0.25
SHRINK_FROM = 2 << 30


@dataclass
class ArgBuffers:
    name: str
    role: str
    dtype: str
    nbytes: int
    work: int = 0  # device buffer passed to the call (outputs, in-place)
    snapshot: int = 0  # what the default stream saw right after the call returned
    per_set: list[int] = field(default_factory=list)  # device copies of each input set
    pristine: list[int] = field(default_factory=list)  # untouched device copies (with a comparer)
    host: list[np.ndarray] = field(default_factory=list)  # host copies (without one)
    offset: int = 0  # where the output lies in an output slot (outputs only)
    # placements 1, 2, ... (0 is the buffers above): copies of the timing sets (inputs) or
    # another work buffer (the other roles), elsewhere in device memory
    moved_inputs: list[dict[int, int]] = field(default_factory=list)
    moved_work: list[int] = field(default_factory=list)


class LoadFailed(Exception):
    """A candidate's library, loaded at its first case, did not load (``verdict``: load_error
    or missing_symbol); the worker answers Fatal with that verdict."""

    def __init__(self, verdict: str, error: str) -> None:
        super().__init__(error)
        self.verdict = verdict


UNCONFINED = "unconfined: not started as a sandboxed worker (the profile target runs under ncu)"


@dataclass
class Slot:
    """An output file, mapped (and page-locked where the runtime allows)."""

    path: Path
    data: np.ndarray | None = None
    pinned: bool = False


class Worker:
    def __init__(self, confinement: Confinement | None = None) -> None:
        """``confinement``: the sandbox this process puts on itself (None: none)."""
        self.confinement = confinement
        self.pending: Load | None = None  # a candidate's library, loaded at its first case
        self.rt: CudaRuntime | None = None
        self.fn: Any = None
        self.args: list[ArgBuffers] = []
        self.scalars: tuple[tuple[Scalar, ...], ...] = ()
        self.arg_specs: tuple[ArgSpec, ...] = ()
        self.flush_ptr = 0
        self.flush_bytes = 0
        self.events: tuple[int, int] = (0, 0)
        self.baseline_libs: set[str] = set()
        self.count_diff: Any = None  # csrc/compare.cu's cm_count_diff, when given
        self.placements = 0  # made for this case's cold timing (0: not yet)
        self.cold_calls = 0  # cold timed calls on this case so far
        self.current = 0  # the placement of the last call (its outputs are the ones saved)
        self.slot_dir: Path | None = None
        self.slots: list[Slot] = []
        self.cases = 0  # cases set up so far (they choose the slots)
        self.slot_bytes = 0  # what this case's outputs take in a slot
        self.check_slot = self.timed_slot = 0

    # -- commands ---------------------------------------------------------------------------
    def init(self, req: Init) -> InitReply:
        device, comparer = req.device, req.comparer
        self.rt = CudaRuntime()
        if comparer:  # compare device buffers on the device, not through host copies
            fn = ctypes.CDLL(comparer).cm_count_diff
            fn.restype = ctypes.c_longlong
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            self.count_diff = fn
        count = self.rt.device_count()
        if count == 0:
            raise RuntimeError("no CUDA GPU is visible")
        if mode := os.environ.get(SYNC_ENV):  # how the synchronize waits (scripts/aa-causes.py)
            if mode not in SYNC_FLAGS:
                raise RuntimeError(f"{SYNC_ENV} must be one of {', '.join(SYNC_FLAGS)}")
            self.rt.check("cudaSetDeviceFlags", self.rt.lib.cudaSetDeviceFlags(SYNC_FLAGS[mode]))
        self.rt.set_device(device)
        l2 = self.rt.attribute(ATTR_L2_BYTES, device)
        self.flush_bytes = max(4 * l2, 256 << 20)
        self.flush_ptr = self.rt.malloc(self.flush_bytes)
        self.events = (self.rt.event(), self.rt.event())
        major = self.rt.attribute(ATTR_CC_MAJOR, device)
        minor = self.rt.attribute(ATTR_CC_MINOR, device)
        if self.confinement is not None:
            planned, gaps = self.confinement.planned()
        else:
            planned, gaps = [], [UNCONFINED]
        return InitReply(
            sm_count=self.rt.attribute(ATTR_SM_COUNT, device),
            l2_bytes=l2,
            cc=str(10 * major + minor),
            cudart=self.rt.path,
            sandbox=planned,
            sandbox_gaps=gaps,
        )

    @property
    def sandbox(self) -> list[str]:
        """The confinement in force now."""
        return list(self.confinement.features) if self.confinement else []

    def load(self, req: Load) -> LoadReply:
        """A trusted library is loaded now (confined first, with the trusted profile); a
        candidate's is loaded at its first case (see the module docstring)."""
        confined = self.confinement is not None and self.confinement.on
        if confined and not req.trusted:
            if not Path(req.library).is_file():
                return LoadReply(verdict="load_error", error=f"no such library: {req.library}")
            self.pending, self.fn = req, None
            return LoadReply(sandbox=self.sandbox)
        if confined and self.confinement is not None:
            self.confinement.confine(Profile.TRUSTED)
        before = loaded_libraries()
        verdict, error = self._open(req)
        if verdict:
            return LoadReply(verdict=verdict, error=error, sandbox=self.sandbox)
        self.baseline_libs = loaded_libraries()
        new = sorted(x for x in self.baseline_libs - before if VENDOR_LIBRARY_FILES.search(x))
        return LoadReply(loaded=new, sandbox=self.sandbox)

    def _open(self, req: Load) -> tuple[str | None, str]:
        """dlopen the library and find its entry function: (None, "") or (verdict, error)."""
        try:
            lib = ctypes.CDLL(req.library)
        except OSError as exc:
            return "load_error", str(exc)
        try:
            fn = getattr(lib, req.symbol)
        except AttributeError:
            return "missing_symbol", f'the library does not define extern "C" {req.symbol}'
        fn.restype = None
        fn.argtypes = [
            SCALAR_CTYPES[a.dtype] if a.role == "scalar" else ctypes.c_void_p for a in req.args
        ]
        self.fn = fn
        return None, ""

    def _load_pending(self, case_dir: Path, slot_dir: Path) -> None:
        """A candidate's first case: the full profile (it reads the folder of every case's
        inputs and writes its own slot folder, nothing else), then its library. Libraries it
        brings in are reported by the first Run (vendor_libraries), as for any loaded later."""
        req, self.pending = self.pending, None
        assert req is not None and self.confinement is not None
        slot_dir.mkdir(parents=True, exist_ok=True)
        cases = case_dir.resolve().parent  # every case's inputs, read-only
        self.confinement.confine(Profile.UNTRUSTED, [Path(req.library), cases], slot_dir.resolve())
        self.baseline_libs = loaded_libraries()
        verdict, error = self._open(req)
        if verdict:
            raise LoadFailed(verdict, error)

    def setup(self, req: Setup) -> SetupReply:
        """Load the case's input sets from ``case_dir``/set*/; the output slots are files in the
        folder ``slot_dir`` (the same across cases, or they are made anew). Replies with each
        output's place in a slot (offset, bytes)."""
        assert self.rt is not None
        self._free()
        base = Path(req.case_dir)
        if self.pending is not None:
            self._load_pending(base, Path(req.slot_dir))
        writable = self.confinement.writable if self.confinement else None
        if writable is not None:
            cases = self.confinement.readable[-1] if self.confinement else None
            if Path(req.slot_dir).resolve() != writable:
                raise RuntimeError(f"{req.slot_dir} is not the sandbox's output folder {writable}")
            if cases is not None and base.resolve().parent != cases:
                raise RuntimeError(f"{base} lies outside the sandbox's case folder {cases}")
        layout: dict[str, tuple[int, int]] = {}
        end = 0
        for spec in req.args:
            if spec.role == "scalar":
                continue
            buf = ArgBuffers(spec.name, spec.role, spec.dtype, spec.nbytes)
            if buf.role in ("input", "inplace"):
                for s in range(req.nsets):
                    path = base / f"set{s}" / f"{buf.name}.bin"
                    size = path.stat().st_size
                    if size != buf.nbytes:
                        raise RuntimeError(f"{buf.name}: file has {size} bytes, not {buf.nbytes}")
                    ptr = self.rt.malloc(buf.nbytes)
                    buf.per_set.append(ptr)
                    if self.count_diff is not None:  # straight from the (memory-backed) file
                        if size:
                            self._upload_file(ptr, path)
                        buf.pristine.append(self.rt.malloc(buf.nbytes))
                        self.rt.copy_d2d_async(buf.pristine[-1], ptr, buf.nbytes)
                    else:
                        host = np.fromfile(path, dtype=np.uint8)
                        self.rt.upload_array(ptr, host)
                        buf.host.append(host)
            if buf.role != "input":
                buf.work = self.rt.malloc(buf.nbytes)
                buf.snapshot = self.rt.malloc(buf.nbytes)
                buf.offset = end
                layout[buf.name] = (end, buf.nbytes)
                end += -(-buf.nbytes // SLOT_ALIGN) * SLOT_ALIGN
            self.args.append(buf)
        self.arg_specs = req.args
        self.scalars = req.scalars
        folder = Path(req.slot_dir)
        if folder != self.slot_dir:
            for slot in self.slots:
                self._unmap(slot)
            folder.mkdir(parents=True, exist_ok=True)
            self.slot_dir = folder
            self.slots = [Slot(folder / f"slot{i}.bin") for i in range(SLOTS)]
        self.slot_bytes = end
        self.check_slot = (2 * self.cases) % SLOTS
        self.timed_slot = (self.check_slot + 1) % SLOTS
        self.cases += 1
        self._sized(self.check_slot)  # page-locking a new slot is 0.5 s per GiB: beside the
        self.rt.synchronize()  # other workers' setups, not in the first calls one by one
        return SetupReply(layout, sandbox=self.sandbox)

    def _sized(self, index: int) -> Slot:
        """Slot ``index``, resized for this case where it is too small (or far too large). Only
        a slot about to be written is resized, and as a new file: the coordinator may still be
        reading the others, or the old file."""
        assert self.rt is not None
        slot = self.slots[index]
        size = 0 if slot.data is None else slot.data.nbytes
        wasteful = size > SHRINK_FROM and self.slot_bytes < SHRINK_BELOW * size
        if self.slot_bytes <= size and not wasteful and slot.path.exists():
            return slot
        self._unmap(slot)
        slot.path.unlink(missing_ok=True)
        if self.slot_bytes:
            slot.data = np.memmap(slot.path, dtype=np.uint8, mode="w+", shape=(self.slot_bytes,))
            slot.pinned = self.rt.register(slot.data)
        else:
            slot.path.write_bytes(b"")
        return slot

    def _unmap(self, slot: Slot) -> None:
        assert self.rt is not None
        if slot.data is not None and slot.pinned:
            self.rt.unregister(slot.data)
        slot.data, slot.pinned = None, False  # unmapped once no reference is left

    def _upload_file(self, ptr: int, path: Path) -> None:
        """Copy a (memory-backed) file to the device, page-locked for the copy where it can be.
        Mapped read-only: a sandboxed candidate may read the cases, never change them."""
        assert self.rt is not None
        mapped = np.memmap(path, dtype=np.uint8, mode="r")
        pinned = self.rt.register(mapped, read_only=True)
        try:
            self.rt.upload_array(ptr, mapped)
        finally:
            if pinned:
                self.rt.unregister(mapped)

    @staticmethod
    def _work(buf: ArgBuffers, p: int) -> int:
        return buf.work if p == 0 else buf.moved_work[p - 1]

    @staticmethod
    def _input(buf: ArgBuffers, s: int, p: int) -> int:
        return buf.per_set[s] if p == 0 else buf.moved_inputs[p - 1][s]

    def _prepare(self, s: int, p: int = 0) -> None:
        """Per-call state: restore in-place inputs, zero accumulators, poison outputs."""
        assert self.rt is not None
        for buf in self.args:
            if buf.role == "inplace":
                self.rt.copy_d2d_async(self._work(buf, p), buf.per_set[s], buf.nbytes)
            elif buf.role == "accumulate":
                self.rt.memset_async(self._work(buf, p), 0, buf.nbytes)
            elif buf.role == "output":
                self.rt.memset_async(self._work(buf, p), POISON_BYTE, buf.nbytes)

    def _call_args(self, s: int, p: int = 0) -> list[Any]:
        out: list[Any] = []
        bufs = {b.name: b for b in self.args}
        scalars = iter(self.scalars[s])
        for spec in self.arg_specs:
            if spec.role == "scalar":
                out.append(next(scalars))
            else:
                b = bufs[spec.name]
                out.append(self._input(b, s, p) if b.role == "input" else self._work(b, p))
        return out

    def _write_outputs(self, index: int) -> OutputSlot:
        """The outputs as the last call left them, into a slot; returns where, for the reply."""
        assert self.rt is not None
        slot = self._sized(index)
        for buf in self.args:
            if buf.role != "input" and buf.nbytes:
                assert slot.data is not None
                where = slot.data[buf.offset : buf.offset + buf.nbytes]
                self.rt.download_into(where, self._work(buf, self.current))
        return OutputSlot(str(slot.path), unpinned=slot.data is not None and not slot.pinned)

    def _place(self, sets: tuple[int, ...]) -> None:
        """Make the placements of this case's cold timing, once: as many as PLACEMENTS and
        PLACEMENT_SHARE of the free device memory allow (1: the buffers alone)."""
        assert self.rt is not None
        if self.placements:
            return
        each = sum(b.nbytes * (len(set(sets)) if b.role == "input" else 1) for b in self.args)
        room = int(PLACEMENT_SHARE * self.rt.free_memory()) // max(each, 1)
        self.placements = 1 + max(0, min(PLACEMENTS - 1, room))
        for _ in range(self.placements - 1):
            for buf in self.args:
                if buf.role == "input":
                    copies = {s: self.rt.malloc(buf.nbytes) for s in set(sets)}
                    for s, ptr in copies.items():
                        self.rt.copy_d2d_async(ptr, buf.per_set[s], buf.nbytes)
                    buf.moved_inputs.append(copies)
                else:
                    buf.moved_work.append(self.rt.malloc(buf.nbytes))
        self.rt.synchronize()

    def run(self, req: Run) -> RunReply:
        """One checked call on input set ``req.input_set``; its outputs land in the case's slot
        for checked calls."""
        assert self.rt is not None
        s = req.input_set
        self.current = 0
        self._prepare(s)
        self.rt.synchronize()
        args = self._call_args(s)
        t0 = time.perf_counter()
        self.fn(*args)
        # Right after the call returns, copy the outputs on the legacy default stream: a caller
        # ordered after the call sees exactly this. Work left running on a stream that is not
        # ordered with it (a non-blocking stream, a host thread) makes the copy differ.
        for buf in self.args:
            if buf.role != "input":
                self.rt.copy_d2d_async(buf.snapshot, buf.work, buf.nbytes)
        self.rt.synchronize()
        wall_ms = (time.perf_counter() - t0) * 1e3
        self.rt.last_error()
        written = self._write_outputs(self.check_slot)
        unordered = [b.name for b in self.args if b.role != "input" and not self._same(b)]
        changed = [
            b.name for b in self.args if b.role == "input" and not self._input_unchanged(b, s)
        ]
        libs = sorted(
            x for x in loaded_libraries() - self.baseline_libs if VENDOR_LIBRARY_FILES.search(x)
        )
        return RunReply(
            wall_ms=wall_ms,
            changed_inputs=changed,
            vendor_libraries=libs,
            unordered_outputs=unordered,
            outputs=written,
        )

    def _same(self, buf: ArgBuffers) -> bool:
        """The output as the call left it equals the output after a device synchronize."""
        return self._equal(buf.work, buf.snapshot, buf.nbytes)

    def _input_unchanged(self, buf: ArgBuffers, s: int) -> bool:
        if self.count_diff is not None:
            return self._equal(buf.per_set[s], buf.pristine[s], buf.nbytes)
        assert self.rt is not None
        now = np.empty(buf.nbytes, dtype=np.uint8)
        self.rt.download_into(now, buf.per_set[s])
        return bool(np.array_equal(now, buf.host[s]))

    def _equal(self, a: int, b: int, nbytes: int) -> bool:
        assert self.rt is not None
        if self.count_diff is not None:
            n = self.count_diff(a, b, nbytes)
            if n < 0:
                self.rt.check("device compare", -1 - n)
            return n == 0
        x = np.empty(nbytes, dtype=np.uint8)
        y = np.empty(nbytes, dtype=np.uint8)
        self.rt.download_into(x, a)
        self.rt.download_into(y, b)
        return bool(np.array_equal(x, y))

    def time(self, req: Time) -> TimeReply:
        """n timed calls rotating over input sets; cold mode flushes L2 before each.

        Cold calls also rotate over placements, one step per round of the sets, carried over
        from batch to batch: the same buffers at other physical addresses. A kernel that keeps
        few requests in flight (one block streaming memory, say) can take several percent
        longer at one placement than at another, steadily (on an H200: 13.2 to 14.1 ms over 12
        placements of the same vector_add); two processes allocate at different places, so
        with one placement each, an implementation timed against itself would differ by that
        much."""
        assert self.rt is not None
        n, mode, sets, start = req.n, req.mode, req.sets, req.start
        rt, (ev0, ev1), fn = self.rt, self.events, self.fn
        record, device_sync = rt.lib.cudaEventRecord, rt.lib.cudaDeviceSynchronize
        if mode == "cold":
            self._place(sets)
        converted: dict[tuple[int, int], tuple[Any, ...]] = {}
        times = []
        with one_cpu():  # every worker of this GPU times on the same CPU (cpus.one_cpu)
            for i in range(n):
                s, p = sets[(start + i) % len(sets)], 0
                if mode == "cold":
                    p = (self.cold_calls // len(sets)) % self.placements
                    self.cold_calls += 1
                if (s, p) not in converted:
                    converted[s, p] = self._ctypes_args(s, p)
                self._prepare(s, p)
                self.current = p
                if mode == "cold":
                    rt.memset_async(self.flush_ptr, i & 0xFF, self.flush_bytes)
                rt.synchronize()
                args = converted[s, p]
                # the timed region holds the calls and nothing else; their codes are checked after
                began = record(ev0, None)
                fn(*args)
                synced = device_sync()
                ended = record(ev1, None)
                rt.check("cudaEventRecord", began)
                rt.check("cudaDeviceSynchronize", synced)
                rt.check("cudaEventRecord", ended)
                times.append(rt.elapsed_ms(ev0, ev1))
        rt.last_error()
        return TimeReply(times_ms=times, placements=max(self.placements, 1))

    def _ctypes_args(self, s: int, p: int) -> tuple[Any, ...]:
        """The call's arguments on input set ``s`` at placement ``p``, as C types."""
        assert self.fn is not None
        args = self._call_args(s, p)
        return tuple(t(v) for t, v in zip(self.fn.argtypes, args, strict=True))

    def save(self, req: Save) -> SaveReply:
        """Copy the outputs as the last call left them (the last timed call's, after time) into
        the case's slot for the timed output."""
        return SaveReply(self._write_outputs(self.timed_slot))

    def profiled_call(self, req: ProfiledCall) -> Done:
        """One call between cudaProfilerStart and cudaProfilerStop (for ncu's range filter)."""
        assert self.rt is not None
        self.current = 0
        self._prepare(req.input_set)
        self.rt.synchronize()
        args = self._call_args(req.input_set)
        self.rt.check("cudaProfilerStart", self.rt.lib.cudaProfilerStart())
        self.fn(*args)
        self.rt.synchronize()
        self.rt.check("cudaProfilerStop", self.rt.lib.cudaProfilerStop())
        self.rt.last_error()
        return Done()

    def release(self, req: Release) -> Done:
        """Free the case's buffers."""
        self._free()
        return Done()

    def _free(self) -> None:
        if self.rt is not None:
            for buf in self.args:
                moved = [p for copies in buf.moved_inputs for p in copies.values()]
                for p in [*buf.per_set, *buf.pristine, buf.work, buf.snapshot, *moved,
                          *buf.moved_work]:  # fmt: skip
                    if p:
                        self.rt.free(p)
        self.args = []
        self.placements = self.cold_calls = self.current = 0


def serve(worker: Worker, req: Request[Any]) -> Reply:
    """The worker's reply to one request."""
    match req:
        case Init():
            return worker.init(req)
        case Load():
            return worker.load(req)
        case Setup():
            return worker.setup(req)
        case Run():
            return worker.run(req)
        case Time():
            return worker.time(req)
        case Save():
            return worker.save(req)
        case Release():
            return worker.release(req)
        case ProfiledCall():
            return worker.profiled_call(req)
    raise TypeError(f"no handler for {type(req).__name__}")


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker if the coordinator dies (it runs in its own session)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def main() -> None:
    _die_with_parent()
    confinement = Confinement()
    confinement.startup()  # before any thread exists (WorkerClient keeps numpy's BLAS single)
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the implementation prints lands on stderr
    replies = os.fdopen(reply_fd, "w", buffering=1)
    worker = Worker(confinement)
    for line in sys.stdin:
        try:
            req = decode_request(line)
            if isinstance(req, Exit):
                break
            reply = serve(worker, req)
        except Exception as exc:  # every failure is reported, then the process ends
            fatal = Fatal(
                verdict=exc.verdict if isinstance(exc, LoadFailed) else "runtime_error",
                error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                trace=traceback.format_exc(limit=3),
            )
            replies.write(encode_reply(fatal) + "\n")
            replies.flush()
            sys.exit(3)
        replies.write(encode_reply(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
