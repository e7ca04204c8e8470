"""Shared timing helper of the benchmark scripts (run as ``python benchmarks/<script>.py``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable


def best_of(f: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of ``repeat`` calls of ``f`` (seconds)."""
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best
