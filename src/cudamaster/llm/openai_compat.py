"""OpenAI and every server that speaks its chat-completions API (DeepSeek, OpenRouter, vLLM,
Ollama, LM Studio), through the official openai SDK (retries with backoff on 429 and 5xx)."""

from __future__ import annotations

import os
import time

from .base import Completion, Message, Options, Provider, ProviderError, Usage
from .prices import cost_usd

#: provider -> (default base URL, environment variable holding the key)
SERVERS = {
    "openai": (None, "OPENAI_API_KEY"),
    "deepseek": ("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "vllm": ("http://localhost:8000/v1", None),
    "ollama": ("http://localhost:11434/v1", None),
    "lmstudio": ("http://localhost:1234/v1", None),
}


class OpenAICompatible(Provider):
    def __init__(self, name: str, model: str, base_url: str | None = None,
                 api_key: str | None = None) -> None:  # fmt: skip
        default_url, key_var = SERVERS.get(name, (None, "OPENAI_API_KEY"))
        self.name, self.model = name, model
        self.base_url = base_url or default_url
        key = api_key or (os.environ.get(key_var) if key_var else None)
        if key_var and not key and base_url is None:
            raise ProviderError(f"{key_var} is not set: export it, or pass --base-url for a "
                                "server that needs no key")  # fmt: skip
        self._key = key or "not-needed"

    def _client(self, options: Options):
        from openai import OpenAI

        return OpenAI(api_key=self._key, base_url=self.base_url, timeout=options.timeout_s,
                      max_retries=options.max_retries)  # fmt: skip

    def complete(self, messages: list[Message], options: Options, key: str) -> Completion:
        import openai

        kwargs: dict = {"model": self.model, "messages": [m.__dict__ for m in messages],
                        "max_completion_tokens": options.max_output_tokens}  # fmt: skip
        if options.temperature is not None:
            kwargs["temperature"] = options.temperature
        if options.reasoning_effort:
            kwargs["reasoning_effort"] = options.reasoning_effort
        t0 = time.monotonic()
        try:
            resp = self._client(options).chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            raise ProviderError(f"{self.label}: HTTP {exc.status_code}: {exc.message}") from None
        except openai.APIError as exc:
            raise ProviderError(f"{self.label}: {exc}") from None
        u = resp.usage
        details = getattr(u, "prompt_tokens_details", None) if u else None
        usage = Usage(
            input_tokens=u.prompt_tokens if u else 0,
            output_tokens=u.completion_tokens if u else 0,
            cached_tokens=(getattr(details, "cached_tokens", 0) or 0) if details else 0,
        )
        text = resp.choices[0].message.content or "" if resp.choices else ""
        return Completion(text=text, model=resp.model or self.model, usage=usage,
                          cost_usd=cost_usd(self.name, self.model, usage),
                          latency_s=time.monotonic() - t0)  # fmt: skip
