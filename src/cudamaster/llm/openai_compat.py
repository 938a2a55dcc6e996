"""OpenAI and every server that speaks its chat-completions API (DeepSeek, OpenRouter, vLLM,
Ollama, LM Studio), through the official openai SDK: answers are streamed (a long reasoning
call never sits silent past the read timeout) and the SDK retries with backoff on 429 and 5xx
before the stream starts."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..extras import optimizer_missing
from . import caps
from .base import Completion, Message, Options, Provider, ProviderError, Usage
from .prices import Price

log = logging.getLogger(__name__)

#: provider -> (default base URL, environment variable holding the key)
SERVERS = {
    "openai": (None, "OPENAI_API_KEY"),
    "deepseek": ("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "vllm": ("http://localhost:8000/v1", None),
    "ollama": ("http://localhost:11434/v1", None),
    "lmstudio": ("http://localhost:1234/v1", None),
}


@dataclass
class Streamed:
    """What the chunks of one streamed answer add up to."""

    text: str = ""
    model: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None  # None: the server sent no usage chunk


def read_stream(chunks: Iterable[Any]) -> Streamed:
    """Accumulate chat.completion.chunk objects: the content deltas, the finish reason and the
    usage of the final chunk (sent when stream_options.include_usage is set). Reasoning deltas
    (``reasoning_content``, ``reasoning``) are not part of the answer."""
    out, parts = Streamed(), []
    for chunk in chunks:
        out.model = out.model or getattr(chunk, "model", "") or ""
        for choice in chunk.choices or []:
            if choice.index != 0:
                continue
            if choice.delta is not None and choice.delta.content:
                parts.append(choice.delta.content)
            if choice.finish_reason:
                out.finish_reason = choice.finish_reason
        if getattr(chunk, "usage", None) is not None:
            out.usage = _usage(chunk.usage)
    out.text = "".join(parts)
    return out


def _usage(u: Any) -> Usage:
    details = getattr(u, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details else None
    if cached is None:  # DeepSeek reports its prompt cache under its own name
        cached = getattr(u, "prompt_cache_hit_tokens", None)
    return Usage(u.prompt_tokens or 0, u.completion_tokens or 0, cached or 0)


class OpenAICompatible(Provider):
    def __init__(self, name: str, model: str, base_url: str | None = None,
                 api_key: str | None = None, price: Price | None = None) -> None:  # fmt: skip
        default_url, key_var = SERVERS.get(name, (None, "OPENAI_API_KEY"))
        self.name, self.model, self.price = name, model, price
        self.base_url = base_url or default_url
        key = api_key or (os.environ.get(key_var) if key_var else None)
        if key_var and not key and base_url is None:
            raise ProviderError(f"{key_var} is not set: export it, or pass --base-url for a "
                                "server that needs no key")  # fmt: skip
        self._key = key or "not-needed"

    def _client(self, options: Options) -> Any:
        try:
            from openai import OpenAI
        except ImportError:
            raise optimizer_missing("openai") from None

        return OpenAI(api_key=self._key, base_url=self.base_url, timeout=options.timeout_s,
                      max_retries=options.max_retries)  # fmt: skip

    def output_cap(self, options: Options) -> int:
        return caps.output_cap(self.model, options)

    def _stream(self, client: Any, kwargs: dict[str, Any]) -> Streamed:
        """One streamed call; every failure a one-line ProviderError (with the HTTP status
        where the server refused the request)."""
        try:
            import openai
        except ImportError:
            raise optimizer_missing("openai") from None

        try:
            stream = client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            raise ProviderError(f"{self.label}: HTTP {exc.status_code}: {exc.message}",
                                exc.status_code) from None  # fmt: skip
        except openai.APIError as exc:
            raise ProviderError(f"{self.label}: {exc.message}") from None
        try:
            with stream:
                return read_stream(stream)
        except openai.APIError as exc:
            raise ProviderError(f"{self.label}: the answer stream broke: {exc.message}") from None
        except ValueError as exc:  # a chunk that is not JSON
            raise ProviderError(f"{self.label}: unreadable answer stream: {exc}") from None

    def complete(self, messages: list[Message], options: Options, key: str) -> Completion:
        cap = self.output_cap(options)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            caps.cap_parameter(self.name): cap,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if options.temperature is not None:
            kwargs["temperature"] = options.temperature
        if options.reasoning_effort:
            kwargs["reasoning_effort"] = options.reasoning_effort
        t0 = time.monotonic()
        with self._client(options) as client:
            got = self._stream(client, kwargs)
        if got.usage is None:
            log.warning("%s sent no usage with its streamed answer: its tokens are not counted",
                        self.label)  # fmt: skip
        usage = got.usage or Usage()
        cut = got.finish_reason == "length" or caps.spent_on_reasoning(
            got.text, usage.output_tokens, cap
        )
        return Completion(text=got.text, model=got.model or self.model, usage=usage,
                          cost_usd=self.cost(usage), latency_s=time.monotonic() - t0,
                          stop_reason=got.finish_reason, truncated=cut)  # fmt: skip
