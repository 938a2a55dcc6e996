"""Every task's oracle answers for exactly its outputs, with the declared sizes (first paper
case, both dtypes): the contract the evaluator relies on, checked without a GPU."""

import numpy as np
import pytest

from cudamaster.bench.inputs import make_inputs
from cudamaster.dtypes import concrete
from cudamaster.tasks import discover


def _pairs():
    for task in discover().values():
        for variant in ("fp32", "bf16"):
            yield pytest.param(task, variant, id=f"{task.name}-{variant}")


@pytest.mark.parametrize(("task", "variant"), list(_pairs()))
def test_oracle_returns_every_output_with_its_declared_size(task, variant):
    case = task.cases("paper")[0]
    inputs = make_inputs(task, case, variant, seed=11)
    dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
    out = task.oracle(inputs.values(dtypes), dict(inputs.params), variant)
    outputs = {a.name for a in task.spec.args if a.role_for(variant) not in ("input", "scalar")}
    assert set(out) == outputs
    for name, value in out.items():
        ref, mag = value if isinstance(value, tuple) else (value, None)
        expected = int(np.prod(inputs.shapes[name]))
        assert np.asarray(ref).size == expected, (name, np.asarray(ref).shape, expected)
        assert np.isfinite(np.asarray(ref, dtype=np.float64)).any()
        if mag is not None:
            assert np.asarray(mag).size == expected
            assert np.all(np.asarray(mag, dtype=np.float64) >= 0)
    # the scalars the entry function gets are one per scalar argument, in order
    assert len(inputs.call_scalars) == sum(a.role == "scalar" for a in task.spec.args)
