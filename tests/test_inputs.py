import numpy as np

from cudamaster.bench.inputs import case_seed, make_inputs
from cudamaster.tasks import discover


def _dtypes(task, variant):
    from cudamaster.dtypes import concrete

    return {a.name: concrete(a.dtype, variant) for a in task.spec.args}


def test_inputs_replay_from_the_seed_and_differ_between_sets():
    for task in discover().values():
        case = task.cases("paper")[0]
        for variant in ("fp32", "bf16"):
            s0, s1 = (case_seed(task.name, variant, case, i, 0) for i in (0, 1))
            a, b = make_inputs(task, case, variant, s0), make_inputs(task, case, variant, s0)
            c = make_inputs(task, case, variant, s1)
            assert a.stored.keys() == b.stored.keys() and a.stored
            for name in a.stored:
                assert np.array_equal(a.stored[name], b.stored[name])
            assert any(not np.array_equal(a.stored[n], c.stored[n]) for n in a.stored)


def test_float_inputs_are_never_all_zero_and_bf16_is_rounded():
    for task in discover().values():
        case = task.cases("paper")[0]
        inp = make_inputs(task, case, "bf16", 123)
        values = inp.values(_dtypes(task, "bf16"))
        for arg in task.spec.args:
            if arg.name in inp.stored and arg.dtype == "T":
                v = values[arg.name]
                if not arg.generated:  # structured inputs may hold structural zeros (ELL padding)
                    assert np.count_nonzero(v) > 0.9 * v.size, (task.name, arg.name)
                # exactly representable in bf16: the low 16 bits of the float32 are zero
                assert not (v.astype(np.float32).view(np.uint32) & 0xFFFF).any()
