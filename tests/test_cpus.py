"""Host cores: each GPU's workers get physical cores of their own, preparation the rest."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cudamaster import cpus


def smt_pairs(cpu: int) -> tuple[int, ...]:
    """A 16-thread host with 8 physical cores: cpu i and i + 8 are hyperthreads of one core."""
    return (cpu % 8, cpu % 8 + 8)


def test_the_workers_of_each_gpu_get_two_physical_cores_with_their_siblings():
    one = cpus.split_for(0, 1, set(range(16)), smt_pairs)
    assert one == cpus.Split(
        timing=(0, 1, 8, 9), helpers=(2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15)
    )
    second = cpus.split_for(1, 2, set(range(16)), smt_pairs)
    assert second is not None and second.timing == (2, 3, 10, 11)
    assert second.helpers == (4, 5, 6, 7, 12, 13, 14, 15)  # no GPU's timing cores


def test_no_split_when_too_few_cores_would_be_left_for_preparation():
    assert cpus.split_for(0, 1, {0, 1, 2, 3, 4, 5}, lambda c: (c,)) is not None  # 4 left
    assert cpus.split_for(0, 1, {0, 1, 2, 3, 4}, lambda c: (c,)) is None
    assert cpus.split_for(0, 1, {0, 1}, lambda c: (c,)) is None  # CI: 2 cores
    assert cpus.split_for(3, 2, set(range(64)), lambda c: (c,)) is None  # no such slot


def test_kernel_cpu_lists_are_parsed():
    assert cpus.parse("0-3,8,10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert cpus.parse("5") == (5,)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_a_process_started_with_cudamaster_cpus_confines_itself_on_import():
    mine = sorted(os.sched_getaffinity(0))
    env = {**os.environ, **cpus.env((mine[-1],))}
    out = subprocess.run(
        [sys.executable, "-c", "import os, cudamaster; print(sorted(os.sched_getaffinity(0)))"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert out.strip() == str([mine[-1]])
