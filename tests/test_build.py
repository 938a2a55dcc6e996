"""Every .cu compiles with nvcc; the pre-run checks refuse what they must, for the right reason."""

import contextlib
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudamaster.bench.build import BuildError, arch_flags, build, parse_ptxas
from cudamaster.bench.evaluate import Impl, ImplResult, prepare
from cudamaster.bench.symbols import check_library, defines_symbol
from cudamaster.tasks import discover

ARCH = "sm_90"
WRONG = Path(__file__).parent / "fixtures" / "wrong"
WRONG_OPS = Path(__file__).parent / "fixtures" / "wrong_ops"


def _sources(kind: str):
    for task in discover().values():
        for variant in ("fp32", "bf16"):
            src = task.source(kind, variant)
            if src is not None:
                yield pytest.param(task, variant, src, id=f"{task.name}-{src.name}")


@pytest.fixture(scope="module", autouse=True)
def _compile_selected_at_once(request, vendor_headers):
    """Build the selected tests' sources on all cores first; the tests then read the cache
    (a failure is still reported by its own test, with nvcc's message)."""
    jobs = []
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module is request.module and "src" in params:
            library = item.originalname == "test_library_baseline_compiles"
            links = tuple(params["task"].spec.library_links) if library else ()
            jobs.append((params["src"], links, library))
        elif item.module is request.module and "op" in params:
            jobs.append((WRONG_OPS / f"{params['op']}.cu", (), False))

    def one(job):
        with contextlib.suppress(BuildError, OSError):  # a missing fixture fails its own test
            build(job[0], ARCH, job[1], compile_only=job[2])

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(one, jobs))


@pytest.mark.parametrize(("task", "variant", "src"), list(_sources("baseline")))
def test_baseline_builds_exports_its_symbol_and_uses_nothing_forbidden(task, variant, src):
    result = build(src, ARCH)
    assert defines_symbol(result.library, task.symbol(variant))
    report = check_library(result.library)
    assert report.ok, report.forbidden
    assert result.resources, "ptxas -v reported no kernel"


@pytest.mark.parametrize(("task", "variant", "src"), list(_sources("library")))
def test_library_baseline_compiles(task, variant, src, vendor_headers):
    result = build(src, ARCH, tuple(task.spec.library_links), compile_only=True)
    assert result.library.stat().st_size > 0


def test_builds_are_cached_by_content(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text('extern "C" void vector_add(const float*, const float*, float*, int) {}\n')
    first = build(src, ARCH)
    again = build(src, ARCH)
    assert again.cached and again.library == first.library
    src.write_text(src.read_text() + "// changed\n")
    assert build(src, ARCH).library != first.library


def test_the_same_source_built_twice_at_once_compiles_once(tmp_path):
    """Two evaluations of one file (an A/A run) prepare it concurrently: the second waits for
    the first build instead of rewriting the library while the first one reads it."""
    src = tmp_path / "twice.cu"
    src.write_text(f'extern "C" void vector_add(const float*, const float*, float*, int) {{}}\n'
                   f"// {uuid.uuid4()}\n")  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: build(src, ARCH), range(2)))
    assert sorted(r.cached for r in results) == [False, True]
    assert all(defines_symbol(r.library, "vector_add") for r in results)


def test_exported_symbols_are_read_once_per_library_file(tmp_path, monkeypatch):
    from cudamaster.bench import symbols

    src = tmp_path / "once.cu"
    src.write_text(f'extern "C" void vector_add(const float*, const float*, float*, int) {{}}\n'
                   f"// {uuid.uuid4()}\n")  # fmt: skip
    library = tmp_path / "impl.so"
    shutil.copy(build(src, ARCH).library, library)
    runs = []
    real = symbols._output
    monkeypatch.setattr(symbols, "_output", lambda *a: runs.append(a) or real(*a))
    assert defines_symbol(library, "vector_add") and not defines_symbol(library, "relu")
    assert len(runs) == 1  # nm once for both questions
    src.write_text(src.read_text().replace("vector_add", "relu"))
    shutil.copy(build(src, ARCH).library, library)  # the same path, another library
    os.utime(library, ns=(1, 1))
    assert defines_symbol(library, "relu") and not defines_symbol(library, "vector_add")
    assert len(runs) == 2


HOPPER_ONLY = """
__global__ void k(float* y) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\\n");
    asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
    y[threadIdx.x] = 1.0f;
}
extern "C" void run(float* y) { k<<<1, 128>>>(y); }
"""


def test_code_using_hopper_only_instructions_builds_for_the_promised_sm_90a(tmp_path):
    # the prompts promise wgmma and setmaxnreg; nvcc 13's -arch=sm_90a would also compile the
    # file for generic compute_90 PTX, which rejects both
    src = tmp_path / "hopper.cu"
    src.write_text(HOPPER_ONLY)
    built = build(src, "sm_90a")
    assert (
        "-arch=sm_90a" not in built.flags
        and "arch=compute_90a,code=[sm_90a,compute_90a]" in built.flags
    )
    assert arch_flags("sm_80") == ("-arch=sm_80",)


def test_compile_error_carries_the_compilers_message():
    with pytest.raises(BuildError) as exc:
        build(WRONG / "compile_error.cu", ARCH)
    assert "compile_error.cu" in str(exc.value) and "error" in str(exc.value)
    assert "return value" in str(exc.value) or "return" in str(exc.value)
    assert exc.value.log_path.exists()


@pytest.mark.parametrize(
    ("fixture", "verdict", "reason"),
    [
        ("compile_error.cu", "compile_error", "error"),
        ("wrong_symbol.cu", "missing_symbol", 'extern "C" vector_add'),
        ("calls_cublas.cu", "forbidden", "cublas"),
        ("opens_file.cu", "forbidden", "calls fopen"),
        ("raw_syscall.cu", "forbidden", "raw syscall"),
        ("dlopens_cublas.cu", "forbidden", "calls dlopen"),
    ],
)
def test_refused_before_running(fixture, verdict, reason, vendor_headers):
    result = ImplResult("candidate", fixture)
    prepare(Impl("candidate", WRONG / fixture), ARCH, "vector_add", result)
    assert result.verdict == verdict, result.detail
    assert reason in result.detail


@pytest.mark.parametrize("fixture", ["off_by_one.cu", "other_stream.cu", "cached_first_call.cu"])
def test_runtime_cheats_pass_the_static_checks(fixture):
    # these need the GPU to be caught (tests/gpu); statically they look fine
    result = ImplResult("candidate", fixture)
    prepare(Impl("candidate", WRONG / fixture), ARCH, "vector_add", result)
    assert result.verdict == "pending", result.detail


def test_parse_ptxas():
    text = """ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
ptxas info    : Function properties for _Z1kPf
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 360 bytes cmem[0]"""
    (k,) = parse_ptxas(text)
    assert (k.kernel, k.registers, k.shared_bytes) == ("_Z1kPf", 40, 2048)
    assert (k.stack_bytes, k.spill_stores, k.spill_loads) == (16, 8, 4)


@pytest.mark.parametrize("op", sorted(discover()))
def test_every_operator_has_a_known_wrong_implementation_that_builds(op):
    src = WRONG_OPS / f"{op}.cu"
    assert src.exists(), f"{src} is missing: every operator needs a known-wrong fixture"
    assert src.read_text().startswith("// KNOWN WRONG (test fixture): ")
    task = discover()[op]
    result = build(src, ARCH)
    assert defines_symbol(result.library, task.symbol("fp32"))
    assert check_library(result.library).ok
