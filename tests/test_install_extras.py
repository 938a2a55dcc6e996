"""The benchmark installs and runs without the optimizer's SDKs; what needs an extra that is not
installed says, in one line, which extra to install (pyproject.toml's optional dependencies)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from cudamaster.errors import UserError
from cudamaster.extras import OPTIMIZER_MODULES

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, cwd: Path, blocked: tuple[str, ...] = OPTIMIZER_MODULES):
    """Run CODE in a fresh interpreter in which the BLOCKED modules cannot be imported, as if
    their packages were not installed."""
    block = f"import sys\nfor m in {blocked!r}:\n    sys.modules[m] = None\n"
    return subprocess.run([sys.executable, "-c", block + textwrap.dedent(code)], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def _cli(*args: str) -> str:
    return f"from cudamaster.cli import main\nsys.argv = ['cudamaster', *{args!r}]\nmain()\n"


def test_the_default_install_holds_the_benchmark_and_the_optimizer_is_an_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("<")[0].split("[")[0] for d in project["dependencies"]}
    extras = project["optional-dependencies"]
    for module in OPTIMIZER_MODULES:
        package = module.replace("_", "-")
        assert package not in names and package in " ".join(extras["optimize"]), package
    assert any(d.startswith("cudamaster[optimize") for d in extras["test"])


def test_the_benchmark_commands_import_no_sdk(tmp_path):
    proc = _python(_cli("tasks"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "vector_add" in proc.stdout


@pytest.mark.parametrize("missing", ["openai", "anthropic", "genai_prices", "tiktoken", "jinja2"])
def test_optimize_without_an_sdk_is_one_line_naming_the_extra(missing, tmp_path):
    proc = _python(_cli("optimize", "--model", "openai:gpt-x", "--ops", "vector_add"), tmp_path,
                   blocked=(missing,))  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "the optimizer needs its SDKs" in lines[0] and missing.replace("_", "-") in lines[0]
    assert f"pip install -e '{ROOT}[optimize]'" in lines[0]
    assert not (tmp_path / "runs").exists()  # stopped before a run directory was made


def test_online_providers_need_the_sdks_offline_ones_only_the_templates(monkeypatch, tmp_path):
    from cudamaster.extras import install_line
    from cudamaster.llm.registry import make_provider

    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.chdir(ROOT)
    with pytest.raises(UserError, match=r"needs its SDKs \(missing: openai\): pip install -e "
                                        r"'\.\[optimize\]'$"):  # fmt: skip
        make_provider("deepseek:deepseek-chat")
    # replay and exchange call no API: a machine with only the templates drives them
    assert make_provider(f"exchange:{tmp_path / 'x'}").name == "exchange"
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(UserError, match=r"missing: jinja2"):
        make_provider(f"exchange:{tmp_path / 'x'}")
    assert install_line("cudnn") == "pip install -e '.[cudnn]'"


def test_an_sdk_missing_at_its_import_site_is_the_same_one_line_error(monkeypatch):
    """Where the up-front check is bypassed (a provider made directly), each import site says
    the same."""
    from cudamaster.llm import prices
    from cudamaster.llm.anthropic_provider import Anthropic
    from cudamaster.llm.base import Message, Options, Usage
    from cudamaster.llm.openai_compat import OpenAICompatible

    for module in ("openai", "anthropic", "genai_prices"):
        monkeypatch.setitem(sys.modules, module, None)
    prices._in_table.cache_clear()
    opts, messages = Options(max_retries=0), [Message("user", "hi")]
    with pytest.raises(UserError, match="missing: openai"):
        OpenAICompatible("vllm", "m").complete(messages, opts, "k")
    with pytest.raises(UserError, match="missing: anthropic"):
        Anthropic("m", api_key="x").complete(messages, opts, "k")
    with pytest.raises(UserError, match="missing: genai-prices"):
        prices.cost_usd("openai", "gpt-4.1", Usage(10, 10))
    prices._in_table.cache_clear()


def test_a_cudnn_baseline_without_cudnn_names_the_extra(tmp_path, monkeypatch):
    from cudamaster.bench.build import BuildError, build, nvcc, vendor_include_dirs

    try:
        nvcc()
    except UserError:
        pytest.skip("needs nvcc")
    monkeypatch.setenv("CUDAMASTER_VENDOR", str(tmp_path / "no-vendor-headers"))
    monkeypatch.setenv("CUDAMASTER_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    if any((d / "cudnn.h").exists() for d in vendor_include_dirs()):
        pytest.skip("cuDNN is installed here (the cudnn extra's wheel)")
    try:
        build(ROOT / "tasks" / "RELU" / "library.cu", "sm_90", ("cudnn",), compile_only=True)
    except BuildError as exc:
        assert str(exc) == "library.cu needs cuDNN, which is not installed here: " \
                           "pip install -e '.[cudnn]'"  # fmt: skip
    else:
        pytest.skip("a cuDNN of the system is installed here")


def test_a_profile_without_tiktoken_has_no_token_counts_and_says_so_once(monkeypatch, caplog):
    from cudamaster.profile import summary

    monkeypatch.setitem(sys.modules, "tiktoken", None)
    summary._encoding.cache_clear()
    summary._no_tiktoken.cache_clear()
    assert summary.count_tokens("one") is None and summary.count_tokens("two") is None
    warned = [r.getMessage() for r in caplog.records if "tiktoken" in r.getMessage()]
    assert len(warned) == 1 and "[optimize]'" in warned[0], warned
    summary._no_tiktoken.cache_clear()
