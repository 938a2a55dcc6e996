"""Anthropic's Messages API through the official anthropic SDK: answers are streamed (the SDK
refuses a non-streamed call whose max_tokens could take over ten minutes) and the SDK retries
with backoff on 429 and 5xx before the stream starts."""

from __future__ import annotations

import os
import time
from typing import Any

from ..extras import optimizer_missing
from . import caps
from .base import Completion, Message, Options, Provider, ProviderError, Usage
from .prices import Price

EFFORT_BUDGET = {"low": 2048, "medium": 8192, "high": 24576}  # extended-thinking token budgets
ANSWER_ROOM = 4096  # output tokens beyond the thinking budget, for the answer itself
CUT = ("max_tokens", "model_context_window_exceeded")  # stop reasons of a cut answer


class Anthropic(Provider):
    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 price: Price | None = None) -> None:  # fmt: skip
        self.name, self.model, self.base_url, self.price = "anthropic", model, base_url, price
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ProviderError("ANTHROPIC_API_KEY is not set: export it")
        self._key = key

    def output_cap(self, options: Options) -> int:
        """With extended thinking: max(cap, budget + ANSWER_ROOM, REASONING_MIN_CAP)."""
        cap = caps.output_cap(self.model, options)
        if options.reasoning_effort:
            cap = max(cap, EFFORT_BUDGET[options.reasoning_effort] + ANSWER_ROOM)
        return cap

    def _stream(self, client: Any, kwargs: dict[str, Any]) -> Any:
        """One streamed call -> the final message; every failure a one-line ProviderError
        (with the HTTP status where the server refused the request)."""
        try:
            import anthropic
        except ImportError:
            raise optimizer_missing("anthropic") from None

        started = False
        try:
            with client.messages.stream(**kwargs) as stream:
                started = True
                return stream.get_final_message()
        except anthropic.APIStatusError as exc:
            if started:  # an error event in the middle of the answer
                msg = f"{self.label}: the answer stream broke: {exc.message}"
                raise ProviderError(msg) from None
            raise ProviderError(f"{self.label}: HTTP {exc.status_code}: {exc.message}",
                                exc.status_code) from None  # fmt: skip
        except anthropic.APIError as exc:
            raise ProviderError(f"{self.label}: {exc.message}") from None

    def complete(self, messages: list[Message], options: Options, key: str) -> Completion:
        try:
            import anthropic
        except ImportError:
            raise optimizer_missing("anthropic") from None

        cap = self.output_cap(options)
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        kwargs: dict[str, Any] = {"model": self.model, "messages": chat, "max_tokens": cap}
        if system:
            kwargs["system"] = system
        if options.reasoning_effort:
            budget = EFFORT_BUDGET[options.reasoning_effort]
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
        elif options.temperature is not None:
            kwargs["temperature"] = options.temperature
        t0 = time.monotonic()
        with anthropic.Anthropic(api_key=self._key, base_url=self.base_url,
                                 timeout=options.timeout_s,
                                 max_retries=options.max_retries) as client:  # fmt: skip
            final = self._stream(client, kwargs)
        text = "".join(getattr(b, "text", "") for b in final.content if b.type == "text")
        u = final.usage
        cached = u.cache_read_input_tokens or 0
        # Anthropic's input_tokens leaves out the cache reads and writes; ours counts them all
        usage = Usage(u.input_tokens + cached + (u.cache_creation_input_tokens or 0),
                      u.output_tokens, cached)  # fmt: skip
        cut = final.stop_reason in CUT or caps.spent_on_reasoning(text, u.output_tokens, cap)
        return Completion(text=text, model=final.model, usage=usage, cost_usd=self.cost(usage),
                          latency_s=time.monotonic() - t0, stop_reason=final.stop_reason,
                          truncated=cut)  # fmt: skip
