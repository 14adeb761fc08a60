"""A hand-driven monotonic clock for code that takes a ``clock`` callable."""

from __future__ import annotations


class FakeClock:
    """Returns :attr:`now`; tests move it with :meth:`advance`."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
