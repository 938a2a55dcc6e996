import shutil
from pathlib import Path

import pytest

from cudamaster.errors import UserError
from cudamaster.tasks import discover, get_task, load_task

ISSUE_2_OPS = {
    "vector_add",
    "dot_product",
    "matrix_mul",
    "spmv_csr",
    "rms_norm",
    "softmax",
    "silu_and_mul",
    "stencil_2d",
    "prefix_sum",
    "sorting",
}


def test_every_task_validates_and_has_both_baselines_and_an_oracle():
    tasks = discover()
    assert tasks, "no task folders found"
    for task in tasks.values():
        for variant in ("fp32", "bf16"):
            assert task.source("baseline", variant) is not None, (task.name, variant)
            if task.spec.library_links:
                assert task.source("library", variant) is not None or task.spec.library_note
        assert callable(task.oracle)
        assert task.spec.suites["paper"] and task.spec.suites["large"]


def test_the_first_ten_operators_are_present():
    assert set(discover()) >= ISSUE_2_OPS


def test_entry_symbols():
    t = get_task("vector_add")
    assert t.symbol("fp32") == "vector_add" and t.symbol("bf16") == "vector_add_bf16"


def test_unknown_operator_suggests_close_names():
    with pytest.raises(UserError, match="did you mean vector_add"):
        get_task("vector_ad")


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    folder = tmp_path / "vector_add"
    shutil.copytree(get_task("vector_add").folder, folder)
    toml = folder / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    return folder


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('role = "input"', 'role = "inptu"', "args.0.role"),
        ('dtype = "T"', 'dtype = "f16"', "args.0.dtype"),
        ('complexity = "N"', 'complexity = "N*"', "complexity"),
        ("rtol = 1e-6", "rtol = -1", "tolerance.fp32.rtol"),
        ('kind = "abs"', 'kind = "absolute"', "paper_rule.kind"),
        ('name = "vector_add"', 'name = "vector_sub"', "name"),
        ("[suites]", "[suites]\nextra = 1\n[other]", "suites"),
        ('shape = "N"\n', "\n", "args.0"),
    ],
)
def test_malformed_task_toml_names_the_field(tmp_path, old, new, field):
    folder = _broken(tmp_path, old, new)
    with pytest.raises(UserError) as exc:
        load_task(folder)
    message = str(exc.value)
    assert "task.toml" in message and field in message, message
    assert "\n" not in message


def test_not_toml_at_all(tmp_path):
    folder = _broken(tmp_path, "[suites]", "[suites")
    with pytest.raises(UserError, match="not valid TOML"):
        load_task(folder)


def test_readme_library_table_is_current():
    from cudamaster.cli import library_table

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start, end = "<!-- library-table -->\n", "<!-- /library-table -->"
    assert start in readme and end in readme, "README lacks the library table markers"
    table = readme.split(start, 1)[1].split(end, 1)[0].strip()
    assert table == library_table(discover()), "run `cudamaster tasks --markdown` into README"
