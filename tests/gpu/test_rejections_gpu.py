"""Known-wrong implementations are rejected on the GPU, each for the right reason, and a crash
or a hang in one worker never stops the others from evaluating normally."""

from pathlib import Path

import pytest

from cudamaster.bench.evaluate import Evaluator, Impl
from cudamaster.bench.timing import TimingPolicy
from cudamaster.tasks import get_task

pytestmark = pytest.mark.gpu
FIX = Path(__file__).resolve().parents[1] / "fixtures"

# fixture -> the verdict it must get
EXPECTED = {
    "unwritten.cu": "wrong",
    "off_by_one.cu": "wrong",
    "writes_nan.cu": "wrong",
    "illegal_address.cu": "runtime_error",
    "infinite_loop.cu": "timeout",
    "other_stream.cu": "unsynchronized",
    "cached_first_call.cu": "wrong_when_timed",
    "mutates_input.cu": "inputs_mutated",
    "hardcoded_size.cu": "wrong",
    "calls_cublas.cu": "forbidden",
    "dlopens_cublas.cu": "forbidden",  # statically: it calls dlopen
    # escapes (docs/sandbox.md): refused by the static checks where they name what they use...
    "dlsym_system.cu": "forbidden",
    "reads_parent_environ.cu": "forbidden",
    # ...else stopped by the kernel: seccomp kills the worker (SIGSYS)...
    "system_via_elf_walk.cu": "sandbox_violation",
    "opens_socket.cu": "sandbox_violation",
    "reads_other_proc_mem.cu": "sandbox_violation",
    # ...or Landlock refuses the file (EACCES), and the fixture's output is right only where the
    # read worked: refused, it writes -errno into C[0]
    "reads_parent_environ_by_address.cu": "wrong",
}
# the system call each sandbox_violation names (system() blocks signals first: it may be unnamed)
BLOCKED = {"opens_socket": "socket", "reads_other_proc_mem": "process_vm_readv"}


def marker(label: str) -> Path:
    """Where an escape that worked leaves its proof."""
    return Path(f"/tmp/cudamaster-escaped-{label}")


def test_known_wrong_implementations_are_rejected_for_the_right_reason(arch, record):
    for name in EXPECTED:
        marker(name.removesuffix(".cu")).unlink(missing_ok=True)
    task = get_task("vector_add")
    impls = [Impl("baseline", task.source("baseline", "fp32"), trusted=True)]
    impls += [Impl(name.removesuffix(".cu"), FIX / "wrong" / name) for name in EXPECTED]
    impls.append(Impl("good", FIX / "good" / "vector_add_grid.cu"))  # evaluated after the crashes
    policy = TimingPolicy(warmup=1, batch=3, min_samples=6, max_samples=12, time_cap_s=0.5)
    # the suite's path (unseen cases, checked first, have their own tests): each fixture fails
    # where it is meant to, on the case it is meant to
    ev = Evaluator(task, "fp32", "paper", arch, policy=policy, cases=[0, 4], unseen=0,
                   call_timeout_s=15)  # fmt: skip
    report = ev.run(impls)
    got = {i.label: (i.verdict, i.detail) for i in report.impls}
    record("rejections", got)
    record("sandbox", {k: report.device.get(k) for k in ("sandbox", "sandbox_gaps")})
    escaped = [name for name in EXPECTED if marker(name.removesuffix(".cu")).exists()]
    assert not escaped, f"escaped the sandbox: {escaped}"
    for name, verdict in EXPECTED.items():
        label = name.removesuffix(".cu")
        assert got[label][0] == verdict or (
            verdict == "runtime_error" and got[label][0] == "crash"
        ), (label, got[label])
    assert (
        "illegal memory access" in got["illegal_address"][1] or got["illegal_address"][0] == "crash"
    )
    assert "case 4" in got["hardcoded_size"][1]  # right on N = 1024, wrong on N = 2^18
    assert "calls dlsym" in got["dlsym_system"][1]
    assert "std::basic_ifstream" in got["reads_parent_environ"][1]
    for label, call in BLOCKED.items():
        assert f"blocked {call} " in got[label][1], got[label]
    assert "the sandbox stopped it" in got["system_via_elf_walk"][1]
    assert "got -13" in got["reads_parent_environ_by_address"][1]  # EACCES
    assert got["baseline"][0] == "ok" and got["good"][0] == "ok"
    good = report.impl("good")
    base = report.impl("baseline")
    assert all(c.cold is not None for c in good.cases)
    assert good.cases[1].cold.median_ms < base.cases[1].cold.median_ms  # 2^18: one block is slow
