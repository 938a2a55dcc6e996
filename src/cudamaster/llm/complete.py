"""Whole answers: a reply cut at the output cap is asked again with a larger cap, and past the
ceiling it is continued, so that a cut answer is never returned (nor cached).

complete() is what the optimizer calls; Provider.complete() is one call to the server."""

from __future__ import annotations

import logging
from dataclasses import replace

from .base import Completion, Message, Options, Provider, ProviderError, Usage

log = logging.getLogger(__name__)

#: At most this many continuations of an answer cut at the ceiling.
MAX_CONTINUATIONS = 2

#: The user message that follows the partial answer in a continuation request.
CONTINUE = ("Your answer was cut off by the output limit. Continue it exactly where it "
            "stopped: do not repeat anything, do not start over, add no preamble.")  # fmt: skip

#: HTTP statuses with which a server refuses a request; on a retry whose only change is a
#: larger cap, they mean that the cap is over the model's limit.
REFUSED = (400, 413, 422)


def complete(provider: Provider, messages: list[Message], options: Options, key: str) -> Completion:
    """One whole answer to MESSAGES, with usage, cost and latency summed over every call made.

    A reply cut at the output cap is asked again with the cap doubled, up to
    ``options.max_output_cap`` (or the first cap, if larger), or until the server refuses a
    cap; a reply still cut there is continued (the partial answer goes back as an assistant
    message, then CONTINUE) at most MAX_CONTINUATIONS times and the pieces are joined. An
    answer still cut after that raises ProviderError. Offline providers are never cut."""
    ceiling = max(options.max_output_cap, provider.output_cap(options))
    calls = [provider.complete(messages, options, key)]
    while calls[-1].truncated and provider.output_cap(options) < ceiling:
        cap = provider.output_cap(options)
        larger = replace(options, max_output_tokens=min(max(2 * cap, 1), ceiling))
        log.warning("%s: answer to %s cut at %d output tokens: asking again with a cap of %d",
                    provider.label, key, cap, provider.output_cap(larger))  # fmt: skip
        try:
            calls.append(provider.complete(messages, larger, key))
        except ProviderError as exc:
            if exc.status not in REFUSED:
                raise
            log.warning("%s refused a cap of %d (%s): continuing the answer instead",
                        provider.label, provider.output_cap(larger), exc)  # fmt: skip
            break
        options = larger
    pieces = [calls[-1].text]
    for n in range(1, MAX_CONTINUATIONS + 1):
        if not calls[-1].truncated or not "".join(pieces).strip():
            break  # whole, or nothing to continue from (the cap all went to reasoning)
        log.warning("%s: answer to %s cut at the ceiling of %d output tokens: continuing it "
                    "(%d of %d)", provider.label, key, provider.output_cap(options), n,
                    MAX_CONTINUATIONS)  # fmt: skip
        partial = "".join(pieces)
        more = [*messages, Message("assistant", partial), Message("user", CONTINUE)]
        calls.append(provider.complete(more, options, key))
        pieces.append(calls[-1].text)
    last = calls[-1]
    if last.truncated:
        why = "nothing but reasoning" if not "".join(pieces).strip() else "the answer"
        raise ProviderError(
            f"{provider.label}: answer to {key} still cut at the output cap after {len(calls)} "
            f"calls (cap {provider.output_cap(options)} tokens, {why} filled it): not kept; "
            "raise the cap (Options.max_output_cap) or ask for less"
        )
    costs = [c.cost_usd for c in calls]
    return Completion(
        text="".join(pieces),
        model=last.model,
        usage=sum((c.usage for c in calls), Usage()),
        cost_usd=None if None in costs else sum(c for c in costs if c is not None),
        latency_s=sum(c.latency_s for c in calls),
        stop_reason=last.stop_reason,
        truncated=False,
    )
