"""The provider interface: a list of messages in, one completion with its usage and cost out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from .prices import Price, cost_usd, is_priced


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant
    content: str


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # input tokens served from the provider's prompt cache

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
        )


@dataclass
class Completion:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None  # None when no price is known for the model
    latency_s: float = 0.0
    stop_reason: str | None = None  # as the provider gave it: 'stop', 'length', 'end_turn', ...
    truncated: bool = False  # cut at the output cap: the text is not the whole answer


@dataclass(frozen=True)
class Options:
    temperature: float | None = None
    max_output_tokens: int = 16384  # the first cap asked for (reasoning models get more)
    reasoning_effort: str | None = None  # low | medium | high, where the model supports it
    timeout_s: float = 600.0  # per read: a streamed answer may take longer as a whole
    max_retries: int = 5
    #: The largest cap complete() grows to when an answer is cut (65536: more than an answer
    #: here needs, and what DeepSeek's reasoner allows; a server that refuses a cap stops the
    #: growth there). Past it the answer is continued instead.
    max_output_cap: int = 65536


class ProviderError(Exception):
    """The provider failed for good (after its retries); the message says why, on one line.

    ``status`` is the HTTP status the server answered with, where there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.status = status


class AnswerPending(Exception):
    """The exchange provider has written a request and no answer is there yet."""

    def __init__(self, request_path: str) -> None:
        super().__init__(f"waiting for an answer to {request_path}")
        self.request_path = request_path


class Provider(ABC):
    """One model behind one API."""

    name: str
    model: str
    #: (USD per million input tokens, USD per million output tokens) given by the user; it
    #: takes the place of the price table.
    price: Price | None = None

    @abstractmethod
    def complete(self, messages: list[Message], options: Options, key: str) -> Completion:
        """One call. ``key`` names the request (e.g. 'round1-planner') for offline providers;
        online providers ignore it. A reply cut at the output cap comes back with
        ``truncated`` set: use llm.complete.complete() to get whole answers."""

    def output_cap(self, options: Options) -> int:
        """The output cap this provider sends for OPTIONS."""
        return options.max_output_tokens

    def cost(self, usage: Usage) -> float | None:
        """USD for USAGE: the user's price, else the price table; 0.0 for local servers and
        offline providers; None when no price is known."""
        return cost_usd(self.name, self.model, usage, self.price)

    @property
    def priced(self) -> bool:
        """Whether cost() gives a number (False: a hosted model unknown to the price table,
        or a custom server, with no price from the user)."""
        return is_priced(self.name, self.model, self.price)

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}"
