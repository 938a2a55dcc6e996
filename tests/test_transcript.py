"""The recorded transcript of a real model driving the optimizer (tests/fixtures/transcripts):
every prompt has its answer, `replay:DIR` gives each by its key with the tokens the exchange
counted, and every coder answer holds a complete file defining the operator's entry."""

from __future__ import annotations

from cudamaster.agents.parse import extract_code, split_plans
from cudamaster.llm.base import Message, Options
from cudamaster.llm.registry import make_provider
from cudamaster.tasks import discover


def test_every_prompt_of_the_recorded_run_has_its_answer(real_transcript):
    exchange, manifest = real_transcript
    prompts = sorted(exchange.glob("*.prompt.md"))
    assert len(prompts) >= 2 * len(manifest["tasks"])  # a planner and a coder per task at least
    answers = {p.name.replace(".prompt.md", ".answer.md") for p in prompts}
    unanswered = sorted(a for a in answers if not (exchange / a).exists())
    assert unanswered == []


def test_replay_answers_each_task_s_first_round_as_the_model_did(real_transcript):
    exchange, manifest = real_transcript
    replay = make_provider(f"replay:{exchange}")
    tasks = discover()
    asked = [Message("user", "(replayed: the answer is looked up by key)")]
    for op, dtype in manifest["tasks"]:
        task = f"{op}-{dtype}"
        plan = replay.complete(asked, Options(), f"{task}/round1/planner")
        assert split_plans(plan.text, manifest["options"]["candidates"]), task
        coder = replay.complete(asked, Options(), f"{task}/round1/c1/coder")
        assert extract_code(coder.text, tasks[op].symbol(dtype)), task
        assert coder.usage.input_tokens > 1000 and coder.usage.output_tokens > 100
        assert coder.cost_usd == 0.0
