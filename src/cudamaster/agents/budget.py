"""The run's budgets (USD, tokens), shared by every task: calls in flight reserve their worst
case, so that tasks running at once cannot together overshoot what is left.

A call may start while what was spent, plus what the calls in flight reserved, plus its own
worst case (its prompt and its whole output cap), stays within the budget; otherwise it waits
for the calls in flight to finish. With none in flight it starts as long as anything is left
(the last call may then pass the budget by at most its own size, as a single task's would);
once the budget is spent, BudgetExceeded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class BudgetExceeded(Exception):
    pass


@dataclass(frozen=True)
class Cost:
    usd: float = 0.0
    tokens: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.usd + other.usd, self.tokens + other.tokens)

    def __sub__(self, other: Cost) -> Cost:
        return Cost(self.usd - other.usd, self.tokens - other.tokens)


class Budget:
    def __init__(self, max_usd: float | None, max_tokens: int | None, spent: Cost = Cost()) -> None:
        self.max_usd, self.max_tokens = max_usd, max_tokens
        self.spent = spent
        self.reserved = Cost()
        self.in_flight = 0
        self._cond = threading.Condition()

    def _within(self, total: Cost) -> bool:
        return (self.max_usd is None or total.usd <= self.max_usd) and (
            self.max_tokens is None or total.tokens <= self.max_tokens
        )

    def _exhausted(self) -> str | None:
        if self.max_usd is not None and self.spent.usd >= self.max_usd:
            return f"cost budget reached: ${self.spent.usd:.2f} of ${self.max_usd:.2f}"
        if self.max_tokens is not None and self.spent.tokens >= self.max_tokens:
            return f"token budget reached: {self.spent.tokens} of {self.max_tokens}"
        return None

    @contextmanager
    def call(self, worst: Cost) -> Iterator[None]:
        """Hold ``worst`` while the call runs; the caller then records what it really cost with
        ``spend`` (a call that fails spends nothing)."""
        with self._cond:
            while True:
                if reason := self._exhausted():
                    raise BudgetExceeded(reason)
                if self.in_flight == 0 or self._within(self.spent + self.reserved + worst):
                    break
                self._cond.wait()
            self.reserved += worst
            self.in_flight += 1
        try:
            yield
        finally:
            with self._cond:
                self.reserved -= worst
                self.in_flight -= 1
                self._cond.notify_all()

    def spend(self, cost: Cost) -> None:
        with self._cond:
            self.spent += cost
            self._cond.notify_all()
