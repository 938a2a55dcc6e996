"""The build cache is keyed on what the vendor include folders hold, not on where they are: two
checkouts with the same headers share builds, and a changed header builds again."""

from __future__ import annotations

import shutil

import pytest

from cudamaster.bench import build as build_mod
from cudamaster.bench.build import build
from cudamaster.errors import UserError

SOURCE = """#include "scale.h"
extern "C" void vector_add(const float*, const float*, float*, int) {}
"""


@pytest.fixture
def headers(tmp_path, monkeypatch):
    try:
        build_mod.nvcc()
    except UserError:
        pytest.skip("needs nvcc")
    monkeypatch.setenv("CUDAMASTER_CACHE", str(tmp_path / "cache"))
    first = tmp_path / "checkout-a" / "include"
    first.mkdir(parents=True)
    (first / "scale.h").write_text("#define SCALE 2\n")
    second = tmp_path / "checkout-b" / "include"
    shutil.copytree(first, second)
    return first, second


def test_two_checkouts_with_the_same_headers_share_a_build(headers, tmp_path, monkeypatch):
    first, second = headers
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    monkeypatch.setattr(build_mod, "vendor_include_dirs", lambda: [first])
    built = build(src, "sm_90")
    assert not built.cached and f"-I{first}" in built.flags
    monkeypatch.setattr(build_mod, "vendor_include_dirs", lambda: [second])
    again = build(src, "sm_90")
    assert again.cached and again.library == built.library
    assert f"-I{second}" in again.flags  # the flags name this checkout's folder


def test_a_changed_header_builds_again(headers, tmp_path, monkeypatch):
    first, _ = headers
    src = tmp_path / "k.cu"
    src.write_text(SOURCE)
    monkeypatch.setattr(build_mod, "vendor_include_dirs", lambda: [first])
    built = build(src, "sm_90")
    (first / "scale.h").write_text("#define SCALE 3\n")
    changed = build(src, "sm_90")
    assert not changed.cached and changed.library != built.library
    (first / "extra.h").write_text("// a header more\n")
    assert not build(src, "sm_90").cached
