"""Every baseline and every library baseline passes against the float64 oracle on every case of
both suites, in both dtypes (timing kept short: correctness is the point here)."""

import pytest

from cudamaster.bench.evaluate import Evaluator, standard_impls
from cudamaster.bench.timing import TimingPolicy
from cudamaster.tasks import discover

pytestmark = pytest.mark.gpu
QUICK = TimingPolicy(warmup=1, batch=2, min_samples=2, max_samples=4, time_cap_s=0.2, hot_samples=2)


def _jobs():
    for task in discover().values():
        for variant in ("fp32", "bf16"):
            for suite in ("paper", "large"):
                yield pytest.param(task, variant, suite, id=f"{task.name}-{variant}-{suite}")


@pytest.mark.parametrize(("task", "variant", "suite"), list(_jobs()))
def test_baseline_and_library_pass_every_case(task, variant, suite, arch):
    report = Evaluator(task, variant, suite, arch, policy=QUICK).run(standard_impls(task, variant))
    for impl in report.impls:
        bad = [f"case {c.index} {c.verdict}: {c.detail}" for c in impl.cases if not c.ok]
        assert impl.correct and not bad, f"{impl.label}: {impl.verdict} {impl.detail} {bad}"
