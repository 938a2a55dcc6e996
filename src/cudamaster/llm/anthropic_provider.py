"""Anthropic's Messages API through the official anthropic SDK (retries with backoff)."""

from __future__ import annotations

import os
import time

from .base import Completion, Message, Options, Provider, ProviderError, Usage
from .prices import cost_usd

EFFORT_BUDGET = {"low": 2048, "medium": 8192, "high": 24576}  # extended-thinking token budgets


class Anthropic(Provider):
    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None):
        self.name, self.model, self.base_url = "anthropic", model, base_url
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ProviderError("ANTHROPIC_API_KEY is not set: export it")
        self._key = key

    def complete(self, messages: list[Message], options: Options, key: str) -> Completion:
        import anthropic

        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        kwargs: dict = {"model": self.model, "messages": chat,
                        "max_tokens": options.max_output_tokens}  # fmt: skip
        if system:
            kwargs["system"] = system
        if options.reasoning_effort:
            budget = EFFORT_BUDGET[options.reasoning_effort]
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
            kwargs["max_tokens"] = max(options.max_output_tokens, budget + 4096)
        elif options.temperature is not None:
            kwargs["temperature"] = options.temperature
        client = anthropic.Anthropic(
            api_key=self._key,
            base_url=self.base_url,
            timeout=options.timeout_s,
            max_retries=options.max_retries,
        )
        t0 = time.monotonic()
        try:
            resp = client.messages.create(**kwargs)
        except anthropic.APIStatusError as exc:
            raise ProviderError(f"{self.label}: HTTP {exc.status_code}: {exc.message}") from None
        except anthropic.APIError as exc:
            raise ProviderError(f"{self.label}: {exc}") from None
        text = "".join(getattr(b, "text", "") for b in resp.content if b.type == "text")
        u = resp.usage
        usage = Usage(
            u.input_tokens, u.output_tokens, getattr(u, "cache_read_input_tokens", 0) or 0
        )
        return Completion(text=text, model=resp.model, usage=usage,
                          cost_usd=cost_usd("anthropic", self.model, usage),
                          latency_s=time.monotonic() - t0)  # fmt: skip
