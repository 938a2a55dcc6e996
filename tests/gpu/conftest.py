"""Helpers for GPU tests: the device's arch, and a place to leave figures for the notes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def arch() -> str:
    from cudamaster.device import detect_arch

    return detect_arch()


@pytest.fixture(scope="session")
def record():
    """record(name, data): write a JSON figure under $CUDAMASTER_TEST_OUT (if set)."""
    out = os.environ.get("CUDAMASTER_TEST_OUT")

    def _record(name: str, data) -> None:
        print(f"\n[{name}] {json.dumps(data, default=str)}")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))

    return _record
