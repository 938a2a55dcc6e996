"""Cost of a completion: the user's price (--price IN,OUT), else a maintained price table (the
genai-prices package); local servers and offline providers cost nothing."""

from __future__ import annotations

import logging
import math
from functools import cache
from typing import TYPE_CHECKING

from ..errors import UserError
from ..extras import optimizer_missing

if TYPE_CHECKING:
    from .base import Usage

log = logging.getLogger(__name__)

#: (USD per million input tokens, USD per million output tokens)
Price = tuple[float, float]

#: Our provider names -> genai-prices provider ids, where they differ.
PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic", "deepseek": "deepseek",
                "openrouter": "openrouter"}  # fmt: skip

#: Providers that run on the user's own machine, or answer without a model: no bill.
FREE = ("vllm", "ollama", "lmstudio", "replay", "exchange")


def parse_price(text: str) -> Price:
    """'IN,OUT' (USD per million input and output tokens, e.g. '0.27,1.1') -> (IN, OUT)."""
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        price = (float(parts[0]), float(parts[1]))
    except ValueError:
        raise UserError(f"--price must be IN,OUT in USD per million tokens (e.g. 3,15), "
                        f"not {text!r}") from None  # fmt: skip
    if not all(math.isfinite(p) and p >= 0 for p in price):
        raise UserError(f"--price must be two finite numbers >= 0, not {text!r}")
    return price


def _table_cost(provider: str, model: str, usage: Usage) -> float:
    """USD from the price table; LookupError when it does not know the model."""
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError:
        raise optimizer_missing("genai_prices") from None

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


@cache
def _in_table(provider: str, model: str) -> bool:
    if provider not in PROVIDER_IDS:
        return False
    from .base import Usage

    try:
        _table_cost(provider, model, Usage())
    except UserError:  # no price table: say which extra brings it
        raise
    except Exception:  # LookupError for unknown models; keep the run going either way
        return False
    return True


@cache
def _warn_once(label: str) -> None:
    log.warning("no price known for %s: its cost is not counted (pass --price IN,OUT)", label)


def is_priced(provider: str, model: str, price: Price | None = None) -> bool:
    """Whether cost_usd() can give a number for this model."""
    return price is not None or provider in FREE or _in_table(provider, model)


def cost_usd(provider: str, model: str, usage: Usage, price: Price | None = None) -> float | None:
    """USD for one call: by PRICE where given (cached input tokens at the input price), 0.0
    for a free provider, else from the table; None when nothing prices the model (warned
    once)."""
    if price is not None:
        return (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1e6
    if provider in FREE:
        return 0.0
    if _in_table(provider, model):
        try:
            return _table_cost(provider, model, usage)
        except UserError:  # no price table
            raise
        except Exception:  # the table knows the model but not this usage: keep going
            pass
    _warn_once(f"{provider}:{model}")
    return None
