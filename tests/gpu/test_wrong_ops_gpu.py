"""For every operator, a known-wrong implementation (tests/fixtures/wrong_ops/OP.cu: one
realistic bug, named in its first line) is rejected against the float64 oracle on the GPU."""

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudamaster.bench.build import BuildError, build
from cudamaster.bench.evaluate import Evaluator, Impl
from cudamaster.bench.timing import TimingPolicy
from cudamaster.tasks import discover

pytestmark = pytest.mark.gpu
WRONG_OPS = Path(__file__).resolve().parents[1] / "fixtures" / "wrong_ops"
REJECTED = {"wrong", "wrong_when_timed", "wrong_on_fresh_inputs", "wrong_on_unseen"}
FAST = TimingPolicy(warmup=1, batch=3, min_samples=3, max_samples=6, time_cap_s=0.2)


@pytest.fixture(scope="module", autouse=True)
def _build_all_at_once(arch):
    def one(src: Path) -> None:
        with contextlib.suppress(BuildError):  # reported by the test itself
            build(src, arch)

    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        list(pool.map(one, sorted(WRONG_OPS.glob("*.cu"))))


@pytest.mark.parametrize("op", sorted(discover()))
def test_known_wrong_implementation_is_rejected(op, arch, record):
    task = discover()[op]
    src = WRONG_OPS / f"{op}.cu"
    bug = src.read_text().splitlines()[0].removeprefix("// KNOWN WRONG (test fixture): ")
    # on the suite's cases, as each fixture's second line says (unseen cases, checked first,
    # may meet the bug otherwise: spmm_coo's nnz - 1 blocks are no grid at all when nnz = 1)
    ev = Evaluator(task, "fp32", "paper", arch, policy=FAST, unseen=0, call_timeout_s=60)
    report = ev.run([Impl("wrong", src)])
    result = report.impl("wrong")
    assert result is not None
    record(f"wrong-{op}", {"bug": bug, "verdict": result.verdict, "detail": result.detail[:300]})
    assert result.verdict in REJECTED, (bug, result.verdict, result.detail)
