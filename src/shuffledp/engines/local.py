"""The in-process engine (the default): partitions run one after the other in this process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from .base import Engine

__all__ = ["LocalEngine"]

T = TypeVar("T")
R = TypeVar("R")


class LocalEngine(Engine):
    """Runs every partition in the calling process, in order (no pickling, no workers)."""

    name = "local"

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return [fn(x) for x in items]
