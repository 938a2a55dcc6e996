"""Cost of a completion from a maintained price table (the genai-prices package)."""

from __future__ import annotations

import logging
from functools import cache

from .base import Usage

log = logging.getLogger(__name__)

#: Our provider names -> genai-prices provider ids, where they differ.
PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic", "deepseek": "deepseek",
                "openrouter": "openrouter"}  # fmt: skip


@cache
def _warn_once(model: str) -> None:
    log.warning("no price known for %s: its cost is not counted", model)


def cost_usd(provider: str, model: str, usage: Usage) -> float | None:
    """USD for one call, or None when the table has no price (local servers, unknown models)."""
    if provider not in PROVIDER_IDS:
        return None  # vllm, ollama, lmstudio, custom servers: no public price
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price

        price = calc_price(
            PriceUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cached_tokens or None,
            ),
            model_ref=model,
            provider_id=PROVIDER_IDS[provider],
        )
        return float(price.total_price)
    except Exception:  # LookupError for unknown models; keep the run going either way
        _warn_once(f"{provider}:{model}")
        return None
