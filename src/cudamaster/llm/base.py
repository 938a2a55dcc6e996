"""The provider interface: a list of messages in, one completion with its usage and cost out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


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
    cost_usd: float | None = None  # None when the price table does not know the model
    latency_s: float = 0.0


@dataclass(frozen=True)
class Options:
    temperature: float | None = None
    max_output_tokens: int = 16384
    reasoning_effort: str | None = None  # low | medium | high, where the model supports it
    timeout_s: float = 600.0
    max_retries: int = 5


class ProviderError(Exception):
    """The provider failed for good (after its retries); the message says why, on one line."""


class AnswerPending(Exception):
    """The exchange provider has written a request and no answer is there yet."""

    def __init__(self, request_path: str) -> None:
        super().__init__(f"waiting for an answer to {request_path}")
        self.request_path = request_path


class Provider(ABC):
    """One model behind one API."""

    name: str
    model: str

    @abstractmethod
    def complete(self, messages: list[Message], options: Options, key: str) -> Completion:
        """One completion. ``key`` names the request (e.g. 'round1-planner') for offline
        providers; online providers ignore it."""

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}"
