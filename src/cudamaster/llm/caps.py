"""How many output tokens to ask for, under which parameter, and whether a reply was cut short.

A reasoning model spends its hidden reasoning out of the same output cap as its answer
(OpenAI o-series and gpt-5 inside ``max_completion_tokens``, DeepSeek's reasoner inside
``max_tokens``, Anthropic's extended thinking inside ``max_tokens``), so such a model is never
asked for fewer than REASONING_MIN_CAP tokens."""

from __future__ import annotations

import re

from .base import Options

#: The smallest output cap a reasoning model gets (reasoning and answer together).
REASONING_MIN_CAP = 32768

#: Model names of reasoning models, matched against the lower-cased name after any
#: 'vendor/' prefix (OpenRouter's 'openai/o3', vLLM's 'Qwen/QwQ-32B').
_REASONING_NAMES = re.compile(
    r"^o[134]($|[-_.:])"  # OpenAI o1, o3, o4-mini, ...
    r"|^gpt-5(?!.*-chat)"  # gpt-5, gpt-5-mini, gpt-5.1 (not gpt-5-chat-latest: no reasoning)
    r"|^deepseek-reasoner"
    r"|(^|[-_.:])r1($|[-_.:])"  # deepseek-r1, deepseek-r1:14b, deepseek-r1-distill-qwen-32b
    r"|qwq"
    r"|thinking"  # qwen3-...-thinking-2507, kimi-k2-thinking, gemini-...-thinking
)


def is_reasoning(model: str, options: Options) -> bool:
    """Whether MODEL reasons before it answers: ``--reasoning-effort`` was given, or its name
    says so (o1/o3/o4*, gpt-5* but not gpt-5*-chat*, deepseek-reasoner, *-r1*, qwq*,
    *thinking*)."""
    if options.reasoning_effort:
        return True
    return bool(_REASONING_NAMES.search(model.lower().rsplit("/", 1)[-1]))


def output_cap(model: str, options: Options) -> int:
    """The output cap to send: ``options.max_output_tokens``, raised to REASONING_MIN_CAP for a
    reasoning model."""
    if is_reasoning(model, options):
        return max(options.max_output_tokens, REASONING_MIN_CAP)
    return options.max_output_tokens


def cap_parameter(provider: str) -> str:
    """The request field that carries the output cap on an OpenAI-wire server.

    OpenAI's own API needs ``max_completion_tokens`` (its reasoning models refuse
    ``max_tokens``); DeepSeek, OpenRouter, vLLM, Ollama, LM Studio and most custom servers
    honour ``max_tokens`` (DeepSeek ignores ``max_completion_tokens`` and caps at its
    default)."""
    return "max_completion_tokens" if provider == "openai" else "max_tokens"


def spent_on_reasoning(text: str, output_tokens: int, cap: int) -> bool:
    """A reply with no answer text whose output filled the cap: the cap all went to reasoning,
    so the reply is cut short whatever stop reason the server gave."""
    return not text.strip() and output_tokens >= cap
