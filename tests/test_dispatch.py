"""Size dispatch between two implementations: `choose` picks the rule from per-case speedups,
`merge` writes one .cu file that nvcc compiles and whose entry runs each path on its side."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from cudamaster.agents.dispatch import Dispatch, MergeError, choose, merge
from cudamaster.bench.build import arch_flags

SIGNATURE = "void vector_add(const float* A, const float* B, float* C, int N)"
SIZES = [{"N": 1024}, {"N": 4096}, {"N": 65536}, {"N": 262144}]
EVEN = [0.25] * 4
RULE = Dispatch("N", 32768, below=0, above=1, predicted=1.5)

# path 0: one element per thread; its MARK is 0, its BLOCK 128, its TILE a macro
PATH0 = r"""// path 0
#include <cuda_runtime.h>
#include <cstdio>

#define BLOCK 128
#define MARK 0
#define TILE 1
extern "C" void cm_mark(int);

__constant__ float scale[2] = {1.0f, 1.0f};
static int blocks_for(int n) { return (n + TILE * BLOCK - 1) / (TILE * BLOCK); }  // "{"

__global__ void __launch_bounds__(BLOCK) add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) c[i] = scale[0] * (a[i] + b[i]);
}

extern "C"
void vector_add(const float* A, const float* B, float* C, int N) {
    cm_mark(MARK);
    add<<<blocks_for(N), BLOCK>>>(A, B, C, N);
    cudaGetLastError();  /* no GPU here: the launch fails, the host code goes on */
}
"""

# path 1: four elements per thread, the same kernel, helper and constant names, extern "C" { };
# its MARK is 1 unless path 0's leaked in, and its `constexpr int TILE` fails under a macro TILE
PATH1 = r"""#include <cstdio>
#include <cuda_runtime.h>
#define BLOCK 256
#ifndef MARK
#define MARK 1
#endif
constexpr int TILE = 4;

__constant__ float scale[4] = {1.0f, 1.0f, 1.0f, 1.0f};
static int blocks_for(int n) { return (n / TILE + BLOCK - 1) / BLOCK; }

template <int VEC>
__global__ void __launch_bounds__(BLOCK) add(const float* a, const float* b, float* c, int n) {
    int i = (blockIdx.x * BLOCK + threadIdx.x) * VEC;
    for (int k = i; k < i + VEC && k < n; ++k) c[k] = scale[k % 4] * (a[k] + b[k]);
}

extern "C" {
void cm_mark(int);

void vector_add(const float* A, const float* B, float* C, int N) {
    cm_mark(MARK);
    add<TILE><<<blocks_for(N), BLOCK>>>(A, B, C, N);
    cudaGetLastError();
}
}
"""

HARNESS = r"""#include <cstdio>
#include <vector>
static std::vector<int> marks;
extern "C" void cm_mark(int k) { marks.push_back(k); }
extern "C" void vector_add(const float* A, const float* B, float* C, int N);
int main() {
    for (int n : {1000, 32767, 32768, 1 << 20}) vector_add(nullptr, nullptr, nullptr, n);
    for (int k : marks) std::printf("%d\n", k);
}
"""

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def nvcc(tmp_path, files: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    cmd = ["nvcc", "-O3", "-std=c++17", *arch_flags("sm_90a"), *flags, *files]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def marks(tmp_path, merged: str) -> list[int]:
    """Build the merged file with the harness, run it, and return which path each N ran."""
    built = nvcc(tmp_path, {"merged.cu": merged, "harness.cu": HARNESS}, "-o", "prog")
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return [int(k) for k in ran.stdout.split()]


# ---------------------------------------------------------------------------------- choose


def test_the_rule_runs_the_faster_path_on_each_side_of_a_clean_split():
    rule = choose(SIZES, [[2.0, 1.8, 0.9, 0.8], [1.0, 1.1, 1.5, 1.6]], EVEN)
    assert rule == Dispatch("N", 16384, below=0, above=1, predicted=pytest.approx(1.725))
    swapped = choose(SIZES, [[1.0, 1.1, 1.5, 1.6], [2.0, 1.8, 0.9, 0.8]], EVEN)
    assert (swapped.below, swapped.above) == (1, 0)


def test_no_rule_when_one_path_leads_everywhere():
    assert choose(SIZES, [[2.0, 1.8, 1.6, 1.7], [1.0, 1.1, 1.5, 1.6]], EVEN) is None


def test_a_rule_never_runs_a_path_on_a_case_where_its_speedup_is_unknown():
    # splitting above 65536 would score best, but it runs path 0 on its failed case 65536
    speedups: list[list[float | None]] = [[3.0, 3.0, None, 1.0], [1.0, 1.0, 1.2, 1.5]]
    rule = choose(SIZES, speedups, EVEN)
    assert rule == Dispatch("N", 16384, 0, 1, pytest.approx(0.25 * (3 + 3 + 1.2 + 1.5)))
    # each side of every split holds a case that each path failed on
    assert choose(SIZES, [[None, 3.0, None, 3.0], [1.0, None, 1.0, None]], EVEN) is None


@pytest.mark.parametrize("a, b, threshold",
                         [(10, 1000, 100), (1000, 1 << 20, 32382), (3, 4, 4), (0, 5, 1),
                          (-4, 4, 0)])  # fmt: skip
def test_the_threshold_is_the_rounded_up_geometric_mean_clamped_between_the_values(a, b, threshold):
    rule = choose([{"N": a}, {"N": b}], [[2.0, 1.0], [1.0, 2.0]], [0.5, 0.5])
    assert rule is not None and rule.threshold == threshold and a < rule.threshold <= b


def test_with_two_arguments_the_rule_splits_on_the_one_that_separates_the_paths():
    values = [{"M": 1, "N": 10}, {"M": 2, "N": 1000}, {"M": 1, "N": 100000}, {"M": 2, "N": 10**6}]
    rule = choose(values, [[2.0, 2.0, 1.0, 1.0], [1.0, 1.0, 2.0, 2.0]], EVEN)
    assert rule == Dispatch("N", 10000, 0, 1, pytest.approx(2.0))


# ---------------------------------------------------------------------------------- merge


def test_the_merged_file_hoists_includes_once_and_exports_only_the_dispatcher():
    merged = merge([PATH0, PATH1], "vector_add", SIGNATURE, RULE)
    assert merged.startswith("// cudamaster dispatch: vector_add() runs path 0 when N < 32768")
    assert merged.count("#include <cstdio>") == merged.count("#include <cuda_runtime.h>") == 1
    assert merged.index("#include <cstdio>") < merged.index("namespace cm_path0")
    assert len(re.findall(r'extern\s*"C"\s*void\s+vector_add', merged)) == 1
    assert merged.count('extern "C" void cm_mark(int);') == 1  # a declaration keeps C linkage
    assert merged.index("#undef BLOCK") < merged.index("namespace cm_path1")


def test_a_source_without_the_entry_cannot_be_merged():
    declared_only = 'extern "C" void vector_add(const float* A, const float* B, float* C, int N);'
    with pytest.raises(MergeError, match="source 1 has no definition of vector_add"):
        merge([PATH0, declared_only], "vector_add", SIGNATURE, RULE)


@pytest.mark.parametrize("arg", ["A", "M"])
def test_the_rule_must_split_on_an_int_parameter(arg):
    rule = Dispatch(arg, 32768, 0, 1, 1.5)
    with pytest.raises(MergeError, match=f"'{arg}'"):
        merge([PATH0, PATH1], "vector_add", SIGNATURE, rule)


@needs_nvcc
def test_the_merged_file_compiles_as_a_shared_library(tmp_path):
    merged = merge([PATH0, PATH1], "vector_add", SIGNATURE, RULE)
    built = nvcc(tmp_path, {"merged.cu": merged}, "-Xcompiler", "-fPIC", "-shared", "-o", "m.so")
    assert built.returncode == 0, built.stderr


@needs_nvcc
def test_the_entry_runs_path_0_below_the_threshold_and_path_1_from_it_on(tmp_path):
    merged = merge([PATH0, PATH1], "vector_add", SIGNATURE, RULE)
    assert marks(tmp_path, merged) == [0, 0, 1, 1]  # N = 1000, 32767, 32768, 1 << 20
    flipped = Dispatch("N", 32768, below=1, above=0, predicted=1.5)
    assert marks(tmp_path, merge([PATH0, PATH1], "vector_add", SIGNATURE, flipped)) == [1, 1, 0, 0]


@needs_nvcc
def test_a_define_in_one_source_does_not_leak_into_the_other(tmp_path):
    merged = merge([PATH0, PATH1], "vector_add", SIGNATURE, RULE)
    assert marks(tmp_path, merged) == [0, 0, 1, 1]
    # without `#undef MARK`, path 0's MARK reaches path 1, which then marks 0
    assert marks(tmp_path, merged.replace("#undef MARK\n", "")) == [0, 0, 0, 0]
    # without `#undef TILE`, path 1's `constexpr int TILE = 4` reads `constexpr int 1 = 4`
    leaky = nvcc(tmp_path, {"leaky.cu": merged.replace("#undef TILE\n", "")}, "-c")
    assert leaky.returncode != 0 and "constexpr int 1 = 4" in leaky.stderr
