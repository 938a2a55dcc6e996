"""Unseen cases: drawn from each operator's declared shape space, replayable from their seed,
inside every constraint, covering every listed value, small; the value kinds stay inside the
declared distribution. (The operators' own spaces and their known-wrong fixtures have tests per
group: tests/test_unseen_<group>.py; the evaluation's use of them, tests/test_evaluate_cpu.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cudamaster import formula
from cudamaster.bench.inputs import _shape_values
from cudamaster.bench.unseen import SUITE_PREFIX, UNSEEN_MAX_BYTES, draw, label
from cudamaster.errors import UserError
from cudamaster.tasks import VALUE_KINDS, VALUES_PARAM, discover, load_task

TASKS = discover()
FIXTURES = Path(__file__).parent / "fixtures" / "wrong_unseen"


def test_the_same_seed_draws_the_same_cases_and_another_seed_others():
    task = TASKS["matrix_mul"]
    assert draw(task, 6, 11) == draw(task, 6, 11)
    assert draw(task, 6, 11).cases != draw(task, 6, 12).cases
    assert {c.suite for c in draw(task, 6, 11).cases} == {f"{SUITE_PREFIX}11"}
    assert draw(task, 6).seed != draw(task, 6).seed  # fresh per evaluation


@pytest.mark.parametrize("op", sorted(TASKS))
def test_every_draw_meets_the_constraints_and_covers_every_listed_value(op):
    task = TASKS[op]
    space = task.spec.unseen
    for seed in range(10):
        cases = draw(task, 6, seed).cases
        for case in cases:
            params = case.params
            assert all(formula.evaluate(w, params) for w in space.where), (params, space.where)
            for name, dim in space.dims.items():
                bounds = space.range_of(name)
                if bounds is not None:
                    assert bounds[0] <= params[name] <= bounds[1]
                else:
                    assert params[name] in dim
            try:
                traffic = formula.evaluate(task.spec.metrics.bytes, task.names(params, "fp32"))
            except UserError:  # derived from the generator (nnz): bounded by `where`
                continue
            assert traffic <= UNSEEN_MAX_BYTES
        for name, dim in space.dims.items():
            if space.range_of(name) is None and len(dim) <= len(cases):
                assert {c.params[name] for c in cases} == set(dim), name
        kinds = {VALUE_KINDS[int(c.params.get(VALUES_PARAM, 0))] for c in cases}
        assert kinds == set(space.values)


def test_every_dimension_the_paper_suite_holds_fixed_is_varied():
    for op, task in TASKS.items():
        paper = task.cases("paper")
        for name in paper[0].params:
            if len({c.params[name] for c in paper}) == 1:
                drawn = {c.params[name] for s in range(5) for c in draw(task, 6, s).cases}
                assert len(drawn) > 1, (op, name)


def test_odd_prime_and_edge_sizes_are_drawn():
    cases = [c for s in range(20) for c in draw(TASKS["vector_add"], 6, s).cases]
    sizes = {c.params["N"] for c in cases}
    assert 1 in sizes or 2 in sizes or 1_000_000 in sizes
    assert any(n > 2 and all(n % d for d in range(2, int(n**0.5) + 1)) for n in sizes)
    assert any(n % 2 for n in sizes) and any(n % 1024 for n in sizes)


def test_a_label_names_the_value_kind():
    case = next(c for c in draw(TASKS["vector_add"], 6, 3).cases if VALUES_PARAM in c.params)
    assert "values=mixed" in label(case)


def test_a_space_its_constraints_cannot_meet_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "vector_add"
    folder.mkdir()
    text = (TASKS["vector_add"].folder / "task.toml").read_text()
    start = text.index("[unseen]")
    (folder / "task.toml").write_text(text[:start] + '[unseen]\ndims = { N = "1..10" }\n'
                                      'where = ["N > 10"]\n')  # fmt: skip
    with pytest.raises(UserError, match="no unseen case"):
        draw(load_task(folder), 6, 0)


@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ('{ M = "1..8" }', "every case parameter"),
        ('{ N = "9..1" }', "lo <= hi"),
        ('{ N = "1..8", values = [0] }', "harness's parameter"),
    ],
)
def test_a_malformed_space_is_refused_naming_the_field(tmp_path, dims, message):
    folder = tmp_path / "vector_add"
    folder.mkdir()
    text = (TASKS["vector_add"].folder / "task.toml").read_text()
    start = text.index("[unseen]")
    (folder / "task.toml").write_text(text[:start] + f"[unseen]\ndims = {dims}\n")
    with pytest.raises(UserError, match=message):
        load_task(folder)


@pytest.mark.parametrize("kind", VALUE_KINDS)
def test_each_value_kind_stays_inside_the_declared_range(kind):
    rng = np.random.default_rng(0)
    for low, high in ((-1.0, 1.0), (0.5, 2.0), (-3.0, -1.0), (-1.0, 3.0)):
        values = rng.uniform(low, high, 4096)
        out = _shape_values(values, kind, ("uniform", low, high), np.random.SeedSequence(1))
        assert out.shape == values.shape and low <= out.min() and out.max() <= high
    values = rng.uniform(-1, 1, 4096)
    out = _shape_values(values, kind, ("uniform", -1.0, 1.0), np.random.SeedSequence(1))
    if kind == "sorted":
        assert np.all(np.diff(out) >= 0)
    elif kind == "reversed":
        assert np.all(np.diff(out) <= 0)
    elif kind == "ties":
        assert len(np.unique(out)) <= 8
    elif kind == "mixed":  # magnitudes over many octaves, both signs
        mags = np.log2(np.abs(out))
        assert mags.max() - mags.min() > 16 and (out < 0).any() and (out > 0).any()


def test_every_known_wrong_fixture_names_a_task_and_says_what_it_assumes():
    assert FIXTURES.is_dir()
    for path in sorted(FIXTURES.glob("*.cu")):
        op = path.stem.split("__")[0]
        assert "__" in path.stem and op in TASKS, path.name
        first = path.read_text().splitlines()[0]
        assert first.startswith("// Known wrong (unseen "), path.name
        assert f'extern "C" void {TASKS[op].symbol("fp32")}(' in path.read_text(), path.name
