"""--model PROVIDER:MODEL (and --price IN,OUT) -> a Provider."""

from __future__ import annotations

from ..errors import UserError
from ..extras import OFFLINE_MODULES, OPTIMIZER_MODULES, require_optimizer
from .base import Provider, ProviderError
from .openai_compat import SERVERS
from .prices import Price

OFFLINE = ("replay", "exchange")
KNOWN = (*SERVERS, "anthropic", "custom", *OFFLINE)


def make_provider(spec: str, base_url: str | None = None, price: Price | None = None) -> Provider:
    """openai:gpt-4.1, deepseek:deepseek-chat, vllm:MODEL, ollama:MODEL, lmstudio:MODEL,
    openrouter:MODEL, anthropic:MODEL, custom:MODEL (with --base-url), replay:FILE|DIR,
    exchange:DIR. PRICE (USD per million input, output tokens; prices.parse_price reads
    --price) replaces the price table; offline providers ignore it."""
    name, sep, model = spec.partition(":")
    if not sep or not model:
        raise UserError(f"--model must be PROVIDER:MODEL (providers: {', '.join(KNOWN)})")
    # every provider's run renders prompts; the online ones call an SDK and price tokens
    require_optimizer(OFFLINE_MODULES if name in OFFLINE else OPTIMIZER_MODULES)
    try:
        if name == "replay":
            from .offline import Replay

            return Replay(model)
        if name == "exchange":
            from .offline import Exchange

            return Exchange(model)
        if name == "anthropic":
            from .anthropic_provider import Anthropic

            return Anthropic(model, base_url=base_url, price=price)
        if name in SERVERS or name == "custom":
            if name == "custom" and not base_url:
                raise UserError("custom:MODEL needs --base-url (an OpenAI-compatible server)")
            from .openai_compat import OpenAICompatible

            return OpenAICompatible(name, model, base_url=base_url, price=price)
    except ProviderError as exc:
        raise UserError(str(exc)) from None
    raise UserError(f"unknown provider {name!r} (known: {', '.join(KNOWN)})")
