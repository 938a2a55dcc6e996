"""The whole evaluation protocol on the CPU: the worker runs against a stand-in for the CUDA
runtime (host memory, a host clock), and implementations are plain C built with gcc. This
proves the coordinator, the worker protocol, the verdicts and the reports without a GPU."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from cudamaster.bench import evaluate, protocol
from cudamaster.bench.build import BuildResult
from cudamaster.bench.evaluate import Evaluator, Impl
from cudamaster.bench.timing import TimingPolicy
from cudamaster.report import score_impl
from cudamaster.tasks import get_task

FAKE = Path(__file__).parent / "fixtures" / "fake_cuda"
pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")


@pytest.fixture
def fake_cuda(tmp_path, monkeypatch):
    runtime = tmp_path / "libcudart.so.13"
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-O1",
            "-Wl,-soname,libcudart.so.13",
            "-o",
            str(runtime),
            str(FAKE / "fake_cudart.c"),
        ],
        check=True,
    )
    monkeypatch.setenv("CUDAMASTER_CUDART", str(runtime))
    comparer = tmp_path / "compare_host.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(comparer),
                    str(FAKE / "compare_host.c")], check=True)  # fmt: skip
    monkeypatch.setenv("CUDAMASTER_COMPARER", str(comparer))

    def gcc_build(source, arch, links=(), extra_flags=(), compile_only=False):
        lib = tmp_path / f"{Path(source).stem}-{next(_builds)}.so"  # two builds of one file at once
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(source)], check=True)
        return BuildResult(Path(source), lib, lib, [], False, [])

    monkeypatch.setattr(evaluate, "build", gcc_build)
    return tmp_path


_builds = itertools.count()
POLICY = TimingPolicy(warmup=1, batch=3, min_samples=6, max_samples=30, time_cap_s=0.5)


def run(*names: str, cases=(0, 1), timeout: float = 20.0):
    task = get_task("vector_add")
    impls = [Impl("baseline", FAKE / "vector_add_cpu.c", trusted=True)]
    impls += [Impl(n, FAKE / f"{n}.c") for n in names]
    ev = Evaluator(
        task,
        "fp32",
        "paper",
        "sm_90",
        unseen=0,
        policy=POLICY,
        cases=list(cases),
        call_timeout_s=timeout,
    )
    return task, ev.run(impls)


def test_correct_implementations_pass_and_are_timed_together(fake_cuda):
    task, report = run("vector_add_cpu_slow")
    base, slow = report.impl("baseline"), report.impl("vector_add_cpu_slow")
    assert base.verdict == "ok" and slow.verdict == "ok", (base.detail, slow.detail)
    for case in base.cases + slow.cases:
        assert case.cold is not None and case.cold.samples >= POLICY.min_samples
        assert case.hot is not None and case.paper_rule_passed
        assert len(set(case.seeds)) == 3
    score = score_impl(task, report, slow, None)
    assert score.score is not None and score.score < 1.0  # three times the work is slower
    assert report.device["sm_count"] == 4


def test_unwritten_element_is_caught_by_the_poison(fake_cuda):
    _, report = run("vector_add_cpu_wrong")
    wrong = report.impl("vector_add_cpu_wrong")
    assert wrong.verdict == "wrong"
    assert "1/1024 elements wrong, 1 NaN" in wrong.detail
    # timed while its first output was judged, but no time is reported for a wrong output
    assert all(c.verdict == "wrong" and c.cold is None and c.hot is None for c in wrong.cases)


def test_a_cases_judgements_are_awaited_after_the_next_cases_first_calls(fake_cuda, monkeypatch):
    # The GPU does not wait for the host's judging: a case's first outputs are judged while it
    # is timed, its timed and re-checked outputs while the next case loads and runs.
    order: list[str] = []
    first_calls, settle = Evaluator._first_calls, evaluate._Settle.run

    def spy_first(self, loaded, results):
        order.append(f"first calls {next(iter(results.values())).index}")
        return first_calls(self, loaded, results)

    def spy_settle(self):
        order.append(f"settle {next(iter(self.results.values())).index}")
        return settle(self)

    monkeypatch.setattr(Evaluator, "_first_calls", spy_first)
    monkeypatch.setattr(evaluate._Settle, "run", spy_settle)
    _, report = run("vector_add_cpu_slow", cases=(0, 1, 2))
    assert [i.verdict for i in report.impls] == ["ok", "ok"]
    assert order == ["first calls 0", "first calls 1", "settle 0", "first calls 2", "settle 1",
                     "settle 2"]  # fmt: skip
    assert all(c.hot is not None for i in report.impls for c in i.cases)


def test_outputs_are_judged_the_same_where_they_cannot_be_page_locked(fake_cuda, monkeypatch):
    monkeypatch.setenv("FAKE_CUDA_NO_PIN", "1")
    _, report = run("vector_add_cpu_wrong", cases=(0,))
    assert report.impl("baseline").verdict == "ok"
    assert report.impl("vector_add_cpu_wrong").verdict == "wrong"
    phases = report.phases[0]
    waited = phases["finish"] + phases["settle"]  # the first calls' verdicts, then the others
    assert 0 < phases["checks"] <= waited
    assert phases["making"] > 0 and phases["judging"] > 0  # the helper's side, beside it
    assert phases["helper_cpu"] > 0  # its CPU time, read from /proc


def test_crash_and_hang_are_verdicts_and_the_others_still_evaluate(fake_cuda):
    _, report = run("crashes", "hangs", "vector_add_cpu_slow", timeout=3)
    assert report.impl("crashes").verdict == "crash"
    assert "SIGSEGV" in report.impl("crashes").detail
    assert report.impl("hangs").verdict == "timeout"
    assert report.impl("hangs").cases[1].verdict == "skipped"  # no second wait after a hang
    assert report.impl("vector_add_cpu_slow").verdict == "ok"
    assert report.impl("baseline").verdict == "ok"


@pytest.mark.parametrize("comparer", ["on the device", "through host copies"])
def test_input_mutation_and_first_call_caching_are_caught(fake_cuda, comparer, monkeypatch):
    if comparer == "through host copies":
        monkeypatch.setenv("CUDAMASTER_COMPARER", "")
    _, report = run("mutates", "caches", cases=(0,))
    assert report.impl("mutates").verdict == "inputs_mutated"
    assert "A" in report.impl("mutates").detail
    assert report.impl("caches").verdict == "wrong_when_timed"


def test_an_evaluations_last_verdicts_come_in_while_the_next_evaluation_runs(
    fake_cuda, tmp_path, monkeypatch
):
    from cudamaster.bench.prepare import Preparer

    order: list[str] = []
    first_calls = Evaluator._first_calls

    def spy_first(self, loaded, results):
        order.append(f"first calls {self.suite}")
        return first_calls(self, loaded, results)

    monkeypatch.setattr(Evaluator, "_first_calls", spy_first)
    task = get_task("vector_add")
    impls = [Impl("baseline", FAKE / "vector_add_cpu.c", trusted=True),
             Impl("wrong", FAKE / "vector_add_cpu_wrong.c")]  # fmt: skip
    prep = Preparer(tmp_path / "scratch")
    try:
        first = Evaluator(
            task, "fp32", "paper", "sm_90", unseen=0, policy=POLICY, cases=[0], preparer=prep
        )
        report = first.run(impls, defer=True)
        # not settled yet: the wrong first output is known, the rest is not
        assert [i.cases[0].verdict for i in report.impls] == ["pending", "wrong"]
        assert [i.verdict for i in report.impls] == ["pending", "pending"]
        settle = first.settle

        def spy_settle():
            order.append("settle paper")
            settle()

        second = Evaluator(
            task, "fp32", "large", "sm_90", unseen=0, policy=POLICY, cases=[0], preparer=prep
        )
        later = second.run(impls, previous=spy_settle, defer=True)
        assert [i.verdict for i in report.impls] == ["ok", "wrong"]
        assert report.phases[0]["checks"] > 0 and "settle" in report.phases[0]
        second.settle()
        second.settle()  # once is enough; again does nothing
    finally:
        prep.close()
    assert order == ["first calls paper", "first calls large", "settle paper"]
    assert [i.verdict for i in later.impls] == ["ok", "wrong"]
    with pytest.raises(ValueError, match="preparer"):
        Evaluator(task, "fp32", "paper", "sm_90").run(impls, defer=True)


def test_trusted_workers_are_reused_across_evaluations_candidates_never(fake_cuda):
    from cudamaster.bench.client import WorkerPool

    task = get_task("vector_add")
    pool = WorkerPool()
    try:
        pids = []
        for _ in range(2):
            impls = [Impl("baseline", FAKE / "vector_add_cpu.c", trusted=True),
                     Impl("cand", FAKE / "vector_add_cpu_slow.c")]  # fmt: skip
            report = Evaluator(task, "fp32", "paper", "sm_90", unseen=0, policy=POLICY, cases=[0],
                               pool=pool).run(impls)  # fmt: skip
            assert [i.verdict for i in report.impls] == ["ok", "ok"]
            assert {label for label, _gpu in pool._idle} == {"baseline"}  # the candidate is gone
            pids.append(pool._idle[("baseline", "")][0].proc.pid)
        assert pids[0] == pids[1]
    finally:
        pool.close()


def test_implementations_share_their_timing_window(fake_cuda):
    # Each would settle after its own number of samples; both keep taking turns until both are
    # settled, so neither median comes from a stretch of time the other did not see.
    task = get_task("vector_add")
    impls = [Impl("steady", FAKE / "vector_add_steady.c", trusted=True),
             Impl("jittery", FAKE / "vector_add_jittery.c")]  # fmt: skip
    policy = TimingPolicy(warmup=1, batch=3, min_samples=6, max_samples=24, time_cap_s=60)
    report = Evaluator(task, "fp32", "paper", "sm_90", unseen=0, policy=policy, cases=[0]).run(
        impls
    )
    counts = {i.label: i.cases[0].cold.samples for i in report.impls}
    assert counts == {"steady": 24, "jittery": 24}, counts


def test_no_input_preparation_runs_while_anything_is_timed(fake_cuda, tmp_path, monkeypatch):
    # Every timed batch finds the preparer's helper process stopped; the next case is being
    # prepared (it is asked for ahead), so a helper that ran on would be seen running.
    from cudamaster.bench.client import WorkerClient
    from cudamaster.bench.prepare import Preparer

    prep = Preparer(tmp_path / "scratch")
    states: list[str] = []
    request = WorkerClient.request

    def spy(self, timeout, req):
        if isinstance(req, protocol.Time):
            stat = Path(f"/proc/{prep._proc.pid}/stat").read_text()
            states.append(stat.rsplit(")", 1)[1].split()[0])
        return request(self, timeout, req)

    monkeypatch.setattr(WorkerClient, "request", spy)
    task = get_task("vector_add")
    try:
        ev = Evaluator(task, "fp32", "paper", "sm_90", unseen=0, policy=POLICY, cases=[0, 1, 2],
                       preparer=prep)  # fmt: skip
        report = ev.run([Impl("baseline", FAKE / "vector_add_cpu.c")])
    finally:
        prep.close()
    assert report.impl("baseline").verdict == "ok"
    assert states and set(states) == {"T"}, states
    assert [p["case"] for p in report.phases] == [0, 1, 2]


def _allowed(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(ln.split()[1] for ln in status.splitlines() if ln.startswith("Cpus_allowed_list"))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
@pytest.mark.parametrize("short", [False, True], ids=["long calls", "short calls"])
def test_with_cores_of_its_own_the_helper_prepares_beside_long_timed_calls_only(
    short, fake_cuda, tmp_path, monkeypatch
):
    # The workers run on the timing cores only, the helper on the others. Beside long calls
    # the helper is never stopped; the timed turns of short calls find it stopped (a timed
    # region holds host work, which a helper busy on other cores still slows), their warm-up
    # (untimed) does not.
    from cudamaster.bench.client import WorkerClient
    from cudamaster.bench.prepare import Preparer
    from cudamaster.cpus import Split

    monkeypatch.setattr(evaluate, "SHORT_CALL_S", 1e3 if short else 0.0)
    timing, helper = sorted(os.sched_getaffinity(0))[:2]
    prep = Preparer(tmp_path / "scratch", cores=(helper,))
    seen: list[tuple[str, str, str, bool]] = []
    warming: list[bool] = []
    request, warm_up = WorkerClient.request, Evaluator._warm_up

    def spy(self, timeout, req):
        if isinstance(req, protocol.Time) and req.mode == "cold":
            stat = Path(f"/proc/{prep._proc.pid}/stat").read_text()
            state = stat.rsplit(")", 1)[1].split()[0]
            seen.append((_allowed(self.proc.pid), _allowed(prep._proc.pid), state, bool(warming)))
        return request(self, timeout, req)

    def marked(self, *args, **kwargs):
        warming.append(True)
        try:
            return warm_up(self, *args, **kwargs)
        finally:
            warming.pop()

    monkeypatch.setattr(WorkerClient, "request", spy)
    monkeypatch.setattr(Evaluator, "_warm_up", marked)
    task = get_task("vector_add")
    try:
        ev = Evaluator(task, "fp32", "paper", "sm_90", unseen=0, policy=POLICY, cases=[0, 1, 2],
                       preparer=prep, cores=Split((timing,), (helper,)))  # fmt: skip
        report = ev.run([Impl("baseline", FAKE / "vector_add_cpu.c")])
    finally:
        prep.close()
    assert report.impl("baseline").verdict == "ok"
    assert seen and {(w, h) for w, h, _, _ in seen} == {(str(timing), str(helper))}, seen
    assert {warm for *_, warm in seen} == {True, False}
    assert all((state == "T") == (short and not warm) for _, _, state, warm in seen), seen


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_the_helper_is_stopped_for_the_turns_of_short_calls_only(fake_cuda, tmp_path, monkeypatch):
    # A long implementation timed against a short one (as their warm-ups measured them, here
    # set for the test: on the CPU stand-in the L2 flush alone takes milliseconds): the helper
    # goes on during the long one's turns, and is stopped during the short one's.
    from cudamaster.bench.client import WorkerClient
    from cudamaster.bench.prepare import Preparer
    from cudamaster.cpus import Split

    warm_up = Evaluator._warm_up

    def measured(self, lv, res, timed, batch, per_call):
        warm_up(self, lv, res, timed, batch, per_call)
        per_call[lv.impl.label] = {"short": 1e-5, "long": 1e-1}[lv.impl.label]

    monkeypatch.setattr(Evaluator, "_warm_up", measured)
    timing, helper = sorted(os.sched_getaffinity(0))[:2]
    prep = Preparer(tmp_path / "scratch", cores=(helper,))
    seen: list[tuple[str, str]] = []
    request = WorkerClient.request

    def spy(self, timeout, req):
        if isinstance(req, protocol.Time) and req.mode == "cold" and req.n % 2 == 0:
            stat = Path(f"/proc/{prep._proc.pid}/stat").read_text()
            seen.append((self.label, stat.rsplit(")", 1)[1].split()[0]))
        return request(self, timeout, req)

    monkeypatch.setattr(WorkerClient, "request", spy)
    impls = [Impl("short", FAKE / "vector_add_cpu.c", trusted=True),
             Impl("long", FAKE / "vector_add_steady.c")]  # fmt: skip
    try:
        ev = Evaluator(get_task("vector_add"), "fp32", "paper", "sm_90", unseen=0, policy=POLICY,
                       cases=[0, 1], preparer=prep, cores=Split((timing,), (helper,)))  # fmt: skip
        report = ev.run(impls)
    finally:
        prep.close()
    assert [i.verdict for i in report.impls] == ["ok", "ok"]
    assert {state for label, state in seen if label == "short"} == {"T"}, seen
    assert "T" not in {state for label, state in seen if label == "long"}, seen


def _recording_worker(tmp_path: Path, n: int = 1000):
    """A worker (in this process, on the CPU stand-in) holding a vector_add case of three
    input sets, with an implementation that remembers each call's buffers."""
    import ctypes

    import numpy as np

    from cudamaster.bench.worker import Worker

    lib = tmp_path / "where.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(lib),
                    str(FAKE / "vector_add_where.c")], check=True)  # fmt: skip
    rng = np.random.default_rng(7)
    sets = []
    for s in range(3):
        (tmp_path / f"set{s}").mkdir()
        a, b = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
        a.tofile(tmp_path / f"set{s}" / "A.bin")
        b.tofile(tmp_path / f"set{s}" / "B.bin")
        sets.append(a + b)
    args = tuple(protocol.ArgSpec(x, r, "f32", 4 * n)
                 for x, r in (("A", "input"), ("B", "input"), ("C", "output")))  # fmt: skip
    args += (protocol.ArgSpec("N", "scalar", "i32"),)
    worker = Worker()
    worker.init(protocol.Init())
    assert worker.load(protocol.Load(str(lib), "vector_add", args)).ok
    worker.setup(protocol.Setup(str(tmp_path), 3, args, ((n,),) * 3, str(tmp_path / "out")))
    seen = ctypes.CDLL(str(lib))  # the same loaded library: its record of the calls
    seen.buffer_of.restype = ctypes.c_void_p

    def buffers(first: int) -> list[tuple[int, int, int]]:
        return [
            tuple(seen.buffer_of(c, k) for k in range(3)) for c in range(first, seen.calls_made())
        ]

    return worker, buffers, sets


def test_cold_timed_calls_rotate_over_placements_and_the_last_ones_output_is_saved(
    fake_cuda, tmp_path
):
    import numpy as np

    from cudamaster.bench.worker import PLACEMENTS

    worker, buffers, sets = _recording_worker(tmp_path)
    worker.run(protocol.Run(0))
    ((first_a, first_b, first_c),) = buffers(0)
    reply = worker.time(protocol.Time(3, "cold", (0, 1)))  # a warm-up, then 2 batches
    for _ in range(2):
        reply = worker.time(protocol.Time(2 * PLACEMENTS + 2, "cold", (0, 1)))
    calls = buffers(1)
    assert reply.placements == PLACEMENTS
    # every placement in turn, each with the two sets' inputs, its own output buffer
    assert len({a for a, _, _ in calls}) == len({b for _, b, _ in calls}) == 2 * PLACEMENTS
    outputs = [c for _, _, c in calls]
    assert len(set(outputs)) == PLACEMENTS and first_c in outputs
    counts = sorted(outputs.count(c) for c in set(outputs))
    assert counts[-1] - counts[0] <= 2, counts  # evenly, carried over from batch to batch
    assert (first_a, first_b) in {(a, b) for a, b, _ in calls[::2]}
    slot = worker.save(protocol.Save()).outputs.path  # the last call: set 1, at its placement
    saved = np.fromfile(slot, dtype=np.float32, count=len(sets[1]))
    assert np.array_equal(saved, sets[1])
    hot_from = len(buffers(0))
    worker.time(protocol.Time(4, "hot", (0, 1)))  # hot calls stay on the first buffers
    assert {c for _, _, c in buffers(hot_from)} == {first_c}


def test_placements_are_only_what_device_memory_allows(fake_cuda, tmp_path, monkeypatch):
    from cudamaster.bench import worker as worker_module

    monkeypatch.setattr(worker_module, "PLACEMENT_SHARE", 1e-9)
    worker, buffers, _ = _recording_worker(tmp_path)
    reply = worker.time(protocol.Time(8, "cold", (0, 1)))
    assert reply.placements == 1
    assert len({c for _, _, c in buffers(0)}) == 1
    worker.release(protocol.Release())


def test_output_slots_take_turns_and_are_mapped_again_only_to_resize(
    fake_cuda, tmp_path, monkeypatch
):
    import numpy as np

    from cudamaster.bench import worker as worker_module

    worker, _, sets = _recording_worker(tmp_path)  # case 0 set up
    args, scalars, out = worker.arg_specs, worker.scalars, str(tmp_path / "out")

    def setup(nsets: int, args: tuple[protocol.ArgSpec, ...]) -> None:
        worker.setup(protocol.Setup(str(tmp_path), nsets, args, scalars, out))

    def run_and_save() -> tuple[str, str]:
        checked = worker.run(protocol.Run(0)).outputs.path
        return checked, worker.save(protocol.Save()).outputs.path

    used = []
    for case in range(5):
        if case:
            setup(3, args)
        used.append(run_and_save())
        if case == 1:  # every slot written once by now
            mapped = [slot.data for slot in worker.slots]
    # a case's first output never goes where the case before left outputs still being judged
    for (check, timed), (next_check, _) in itertools.pairwise(used):
        assert next_check not in (check, timed) and check != timed
    assert all(s.data is m for s, m in zip(worker.slots, mapped, strict=True))  # not remapped
    # a bigger case: the slots it writes are made anew, as new files (the check slot at setup,
    # beside the other workers' setups; the timed slot when it is written), while a reader of
    # the old timed slot (the judge of the case before) still reads what it was given
    setup(0, tuple(replace(a, nbytes=16 * a.nbytes) for a in args))
    target = worker.timed_slot
    assert worker.slots[worker.check_slot].data.nbytes >= 16 * 4000
    assert worker.slots[target].data is mapped[target]
    reader = np.memmap(worker.slots[target].path, dtype=np.float32, mode="r", shape=(1000,))
    before = np.array(reader)
    worker.save(protocol.Save())
    assert worker.slots[target].data.nbytes >= 16 * 4000
    assert np.array_equal(reader, before) and np.array_equal(before, sets[0])
    [other] = [i for i in range(worker_module.SLOTS) if i not in (target, worker.check_slot)]
    assert worker.slots[other].data is mapped[other]  # untouched until this case writes it
    monkeypatch.setattr(worker_module, "SHRINK_FROM", 0)  # a far smaller case: slots shrink
    setup(0, tuple(replace(a, nbytes=4) for a in args))
    worker.save(protocol.Save())
    assert worker.slots[worker.timed_slot].data.nbytes == worker_module.SLOT_ALIGN
    worker.release(protocol.Release())


def unseen_run(*names: str, seed: int | None = None, unseen: int = 4):
    task = get_task("vector_add")
    impls = [Impl("baseline", FAKE / "vector_add_cpu.c", trusted=True)]
    impls += [Impl(n, FAKE / f"{n}.c") for n in names]
    ev = Evaluator(task, "fp32", "paper", "sm_90", policy=POLICY, cases=[0],
                   unseen=unseen, unseen_seed=seed)  # fmt: skip
    return ev.run(impls)


def test_a_kernel_right_only_on_the_suites_sizes_is_caught_by_unseen_cases_and_not_timed(
    fake_cuda,
):
    report = unseen_run("vector_add_cpu_tiles")
    base, tiles = report.impl("baseline"), report.impl("vector_add_cpu_tiles")
    assert base.verdict == "ok" and len(base.unseen) == 4
    assert all(c.ok and c.cold is None and c.hot is None for c in base.unseen)  # never timed
    assert base.cases[0].cold is not None  # the suite's case is timed as before
    assert tiles.verdict == "wrong_on_unseen"
    assert f"replay with --unseen-seed {report.unseen_seed}" in tiles.detail
    assert tiles.cases[0].verdict == "skipped"  # once wrong, it is not timed at all
    failing = next(c for c in tiles.unseen if not c.ok)
    assert failing.params["N"] % 1024 != 0 and "elements wrong" in failing.detail


def test_the_recorded_seed_replays_the_same_unseen_cases_and_inputs(fake_cuda):
    first = unseen_run("vector_add_cpu_tiles")
    again = unseen_run("vector_add_cpu_tiles", seed=first.unseen_seed)
    other = unseen_run(seed=first.unseen_seed + 1)
    shapes = [
        [(c.params, c.seeds) for c in r.impl("baseline").unseen] for r in (first, again, other)
    ]
    assert shapes[0] == shapes[1] and shapes[0] != shapes[2]
    assert first.impl("vector_add_cpu_tiles").detail == again.impl("vector_add_cpu_tiles").detail


def test_no_unseen_cases_when_asked_for_none(fake_cuda):
    report = unseen_run(unseen=0)
    assert report.unseen_seed is None and report.impl("baseline").unseen == []


def test_aa_times_an_implementation_against_itself_with_an_uncertainty_per_ratio(fake_cuda):
    from cudamaster.bench.aa import run_aa

    rep = run_aa(get_task("vector_add"), "fp32", "paper", "sm_90", cases=[0, 1],
                 source=FAKE / "vector_add_cpu.c")  # fmt: skip
    assert [r.index for r in rep.rows] == [0, 1]
    for r in rep.rows:
        assert r.ratio == pytest.approx(r.a_ms / r.b_ms) and r.uncertainty > 0
        assert r.holds == (abs(r.ratio - 1) <= r.uncertainty)
    assert rep.worst() == max(abs(r.ratio - 1) for r in rep.rows)
