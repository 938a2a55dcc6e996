"""Reading the model's answers faithfully: the code block that defines the entry function, in
whatever fence the model used; the flags a debug answer asks for; the plan's items."""

from __future__ import annotations

import pytest

from cudamaster.agents.parse import (
    debugger_flags,
    extract_code,
    fenced_blocks,
    parse_flags,
    plan_items,
    split_plans,
)

KERNEL = 'extern "C" void vector_add(const float* a, const float* b, float* c, int n) {\n}\n'


def test_a_bash_block_before_the_cuda_block_does_not_hide_the_code():
    answer = (
        "Build it with:\n```bash\nnvcc -O3 x.cu\n```\nHere is the code:\n```cuda\n"
        + KERNEL
        + "```\n"
    )
    assert extract_code(answer, "vector_add") == KERNEL


@pytest.mark.parametrize(
    "opening, closing",
    [("```CUDA", "```"), ("```c++ title=kernel.cu", "```"), ("~~~cuda", "~~~"),
     ("````cu", "````"), ("```", "```"), ("  ```cuda", "  ```")],
)  # fmt: skip
def test_any_info_string_in_any_case_and_tilde_fences(opening, closing):
    answer = f"The kernel:\n{opening}\n{KERNEL}{closing}\nDone."
    assert extract_code(answer, "vector_add") == KERNEL


def test_crlf_line_endings():
    answer = "Code:\r\n```cuda\r\n" + KERNEL.replace("\n", "\r\n") + "```\r\n"
    assert extract_code(answer, "vector_add") == KERNEL


def test_an_unterminated_last_fence_runs_to_the_end():
    answer = "Here it is:\n```cuda\n" + KERNEL
    assert extract_code(answer, "vector_add") == KERNEL
    assert fenced_blocks(answer)[0].closed is False


def test_a_shorter_fence_inside_does_not_close_a_longer_one():
    inner = "// a comment quoting ```\n" + KERNEL
    answer = "````cuda\n" + inner + "````\n"
    assert extract_code(answer, "vector_add") == inner


def test_the_block_that_defines_the_entry_wins_over_helpers_and_declarations():
    helper = (
        "```cuda\n__device__ float twice(float x) { return 2 * x; }\n" + "/* " * 200 + "*/\n```"
    )
    declaration = '```c\nextern "C" void vector_add(const float*, const float*, float*, int);\n```'
    answer = f"{helper}\n{declaration}\n```cuda\n{KERNEL}```"
    assert extract_code(answer, "vector_add") == KERNEL
    assert extract_code(f"{helper}\n{declaration}", "vector_add") is None


def test_an_unfenced_answer_that_is_the_file_is_taken():
    assert extract_code("\n" + KERNEL, "vector_add") == KERNEL
    assert extract_code("I would tile it.", "vector_add") is None


def test_the_longest_defining_block_is_taken():
    short = "```cuda\n" + KERNEL.replace("{\n}", "{}") + "```"
    full = "```cuda\n#include <cuda_runtime.h>\n" + KERNEL + "```"
    assert extract_code(f"{short}\nThe whole file:\n{full}", "vector_add").startswith("#include")


def test_flags_from_the_compiler_agent_and_from_a_debug_answer():
    flags, rejected = parse_flags(
        '{"flags": ["-O3", "--use_fast_math", "-maxrregcount=64", "-lcublas"]}'
    )
    assert flags == ("-O3", "--use_fast_math", "-maxrregcount=64") and rejected == ["-lcublas"]
    assert parse_flags("whatever")[0] == ("-O3",)
    fixed = (
        "The fast math build loses accuracy.\n**nvcc flags:** `-O3 -lineinfo`\n```cuda\n"
        + KERNEL
        + "```"
    )
    assert debugger_flags(fixed) == (("-O3", "-lineinfo"), [])
    assert debugger_flags("```cuda\n// nvcc flags: --use_fast_math\n" + KERNEL + "```") is None


def test_the_plans_numbered_optimizations():
    plan = (
        "Diagnosis: one thread per row leaves most SMs idle.\n\nOptimizations:\n"
        "1. **Block per row.** Use a block per row with a shared-memory reduction; DRAM "
        "throughput should rise from 5% to 60%.\n2) Vectorise loads with float4.\n"
    )
    assert plan_items(plan) == ["Block per row.", "Vectorise loads with float4."]
    assert plan_items("Just make it faster") == ["Just make it faster"]


def test_each_plan_heading_starts_a_plan_with_its_parent_and_strategy():
    answer = (
        "Here are my plans.\n\n"
        "## Plan 1: widen the loads\nParent: baseline\nStrategy: memory traffic\n"
        "Optimizations:\n1. float4.\n\n"
        "### Plan 2\n- Parent: `round1-c2`\n- **Strategy**: latency hiding\n1. Unroll.\n\n"
        "**Plan 3** (small sizes)\n**Parent**: round1-c1 (it wins on N=1024)\n"
        "Strategy: **launch overhead**\n1. One launch.\n\n"
        "plan 4\nParent: round1-c2\n1. Tensor cores.\n"
    )
    plans = split_plans(answer, 4)
    assert [(p.parent, p.strategy) for p in plans] == [
        ("baseline", "memory traffic"),
        ("round1-c2", "latency hiding"),
        ("round1-c1", "launch overhead"),
        ("round1-c2", ""),
    ]
    assert plans[0].text.startswith("## Plan 1") and "Here are my plans" not in plans[0].text
    assert plans[1].text.endswith("1. Unroll.") and "Plan 3" not in plans[1].text
    assert plans[3].text == "plan 4\nParent: round1-c2\n1. Tensor cores."


def test_no_more_plans_than_asked_are_taken():
    answer = "\n".join(f"## Plan {k}\nParent: baseline\n1. Idea {k}." for k in range(1, 6))
    assert [p.text.splitlines()[-1] for p in split_plans(answer, 3)] == [
        "1. Idea 1.",
        "1. Idea 2.",
        "1. Idea 3.",
    ]


def test_an_answer_without_plan_headings_is_one_plan_naming_no_parent():
    answer = "Diagnosis: one block.\nOptimizations:\n1. Planning the grid: use all SMs.\n"
    (plan,) = split_plans(answer, 4)
    assert (plan.text, plan.parent, plan.strategy) == (answer, "", "")
