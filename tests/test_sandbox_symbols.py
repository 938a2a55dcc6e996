"""The static checks, first and explained: escapes that name what they use are refused before
running, with the reason; those that reach libc by address pass them (the kernel sandbox stops
those: tests/test_sandbox_eval_cpu.py, tests/gpu/test_rejections_gpu.py). And nvcc never sees
the keys in the environment."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cudamaster.bench import build as build_module
from cudamaster.bench.build import build
from cudamaster.bench.symbols import check_library

ARCH = "sm_90"
WRONG = Path(__file__).parent / "fixtures" / "wrong"
needs_nvcc = pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")


@needs_nvcc
@pytest.mark.parametrize(
    ("fixture", "reasons"),
    [
        ("dlsym_system.cu", ["calls dlsym (it loads code or looks functions up by name"]),
        ("dlopens_cublas.cu", ["calls dlopen (it loads code"]),
        (
            "reads_parent_environ.cu",
            ["uses std::basic_ifstream (C++ file streams", "uses std::basic_ofstream"],
        ),
        ("opens_file.cu", ["calls fopen (it opens or changes files)"]),
        ("raw_syscall.cu", ["contains a raw syscall instruction (it bypasses libc"]),
    ],
)
def test_escapes_that_name_what_they_use_are_refused_with_the_reason(fixture, reasons):
    report = check_library(build(WRONG / fixture, ARCH).library)
    assert not report.ok
    for reason in reasons:
        assert any(f.startswith(reason) for f in report.forbidden), report.forbidden


@needs_nvcc
@pytest.mark.parametrize(
    "fixture",
    [
        "system_via_elf_walk.cu",
        "opens_socket.cu",
        "reads_other_proc_mem.cu",
        "reads_parent_environ_by_address.cu",
    ],
)
def test_escapes_by_address_pass_the_static_checks(fixture):
    # only the kernel can stop these: they import nothing forbidden
    report = check_library(build(WRONG / fixture, ARCH).library)
    assert report.ok, report.forbidden


@needs_nvcc
def test_code_built_on_cub_and_thrust_passes_the_static_checks():
    # the rules allow CCCL: MSE_loss's library source (CUB's TransformReduce, Thrust iterators)
    # as a candidate; CUB's NVTX ranges would bring in dlopen and dlsym, which every build turns off
    source = Path(__file__).parents[1] / "tasks" / "MSE_loss" / "library.cu"
    assert check_library(build(source, ARCH).library).ok
    with_nvtx = check_library(build(source, ARCH, (), ("-UCCCL_DISABLE_NVTX",)).library)
    assert [f.split(" (")[0] for f in with_nvtx.forbidden] == ["calls dlopen", "calls dlsym"]


@pytest.fixture
def fake_nvcc(tmp_path, monkeypatch):
    """A stand-in nvcc that writes its environment to env.txt and its process group to
    pgid.txt; yields a function that builds a kernel with it."""
    fake = tmp_path / "nvcc"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--version*) echo "Cuda compilation tools, release 13.0, V13.0.48";'
        " exit 0;; esac\n"
        f'env > "{tmp_path / "env.txt"}"\n'
        f'cut -d" " -f5 /proc/$$/stat > "{tmp_path / "pgid.txt"}"\n'
        'while [ "$#" -gt 0 ]; do [ "$1" = "-o" ] && : > "$2"; shift; done\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("CUDAMASTER_NVCC", str(fake))
    monkeypatch.setenv("CUDAMASTER_CACHE", str(tmp_path / "cache"))
    build_module.nvcc.cache_clear()
    build_module.nvcc_version.cache_clear()

    def build_one() -> None:
        source = tmp_path / "k.cu"
        source.write_text('extern "C" void vector_add() {}\n')
        build(source, ARCH)

    yield build_one
    build_module.nvcc.cache_clear()
    build_module.nvcc_version.cache_clear()


def test_nvcc_gets_an_environment_without_secrets(tmp_path, monkeypatch, fake_nvcc):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("HF_TOKEN", "hf-do-not-leak")
    monkeypatch.setenv("CUDAMASTER_PLAIN", "kept")
    fake_nvcc()
    env = (tmp_path / "env.txt").read_text()
    assert "CUDAMASTER_PLAIN=kept" in env and f"PATH={os.environ['PATH']}" in env
    assert "do-not-leak" not in env


def test_a_ctrl_c_at_the_terminal_does_not_reach_nvcc(tmp_path, fake_nvcc):
    # the terminal signals its foreground process group: nvcc is outside ours, so a Ctrl-C
    # stops the run after the build instead of killing nvcc into a false compile error
    fake_nvcc()
    assert int((tmp_path / "pgid.txt").read_text()) != os.getpgrp()
