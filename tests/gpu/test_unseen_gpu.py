"""Unseen cases on the GPU: every baseline and library baseline passes them (a shape space that
its own baselines fail is declared wrong), and every known-wrong implementation that is right on
the whole paper suite is caught by them (tests/fixtures/wrong_unseen/OP__IDEA.cu, its first line
says what it assumes)."""

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudamaster.bench.build import BuildError, build
from cudamaster.bench.evaluate import Evaluator, Impl, standard_impls
from cudamaster.bench.timing import TimingPolicy
from cudamaster.tasks import discover, get_task

pytestmark = pytest.mark.gpu
WRONG_UNSEEN = Path(__file__).resolve().parents[1] / "fixtures" / "wrong_unseen"
FAST = TimingPolicy(warmup=1, batch=3, min_samples=3, max_samples=6, time_cap_s=0.2)
FIXTURES = sorted(WRONG_UNSEEN.glob("*__*.cu"))


@pytest.fixture(scope="module", autouse=True)
def _build_all_at_once(arch):
    def one(src: Path) -> None:
        with contextlib.suppress(BuildError):  # reported by the test itself
            build(src, arch)

    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        list(pool.map(one, FIXTURES))


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("op", sorted(discover()))
def test_the_baselines_pass_every_unseen_case(op, variant, arch, record):
    task = discover()[op]
    ev = Evaluator(task, variant, "paper", arch, cases=[], unseen=12, call_timeout_s=60)
    report = ev.run(standard_impls(task, variant))
    got = {i.label: (i.verdict, i.detail[:300]) for i in report.impls}
    record(f"unseen-baselines-{op}-{variant}",
           {"seed": report.unseen_seed, "seconds": report.unseen_s, "verdicts": got})  # fmt: skip
    assert all(len(i.unseen) == 12 for i in report.impls)
    assert all(v == "ok" for v, _ in got.values()), (report.unseen_seed, got)


@pytest.mark.parametrize("src", FIXTURES, ids=lambda p: p.stem)
def test_a_kernel_right_on_the_whole_suite_is_caught_by_unseen_cases(src, arch, record):
    task = get_task(src.stem.split("__")[0])
    why = src.read_text().splitlines()[0]
    blind = Evaluator(task, "fp32", "paper", arch, policy=FAST, unseen=0, call_timeout_s=60)
    on_suite = blind.run([Impl("wrong", src)]).impl("wrong")
    seeing = Evaluator(task, "fp32", "paper", arch, cases=[], call_timeout_s=60)
    report = seeing.run([Impl("wrong", src)])
    caught = report.impl("wrong")
    assert on_suite is not None and caught is not None
    seen = {"why": why, "suite": on_suite.verdict, "unseen": caught.verdict}
    record(f"unseen-{src.stem}", seen | {"detail": caught.detail[:300]})
    assert on_suite.verdict == "ok", (why, on_suite.detail)  # only unseen cases can see it
    # wrong, or worse: a kernel with baked-in sizes may write past the buffers of other sizes
    assert caught.verdict in ("wrong_on_unseen", "crash", "runtime_error"), (why, caught.verdict)
    assert caught.detail.startswith("unseen case"), caught.detail
