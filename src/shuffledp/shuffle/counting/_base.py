"""Input and message helpers shared by the counting protocols (bits in, true counts ``[n0, n1]``
for the exact simulations, one-bit "1" messages).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import ValidationError
from .._common import check_bits
from ..base import Messages

__all__ = []


def _counts(values: Any) -> np.ndarray:
    x = check_bits(values)
    return np.bincount(x, minlength=2).astype(np.int64)


def _check_counts(data: Any) -> np.ndarray:
    c = np.asarray(data)
    if c.shape != (2,) or not np.issubdtype(c.dtype, np.integer) or c.min() < 0:
        raise ValidationError("counting data must be the true counts [n0, n1] (two non-negative integers)",
                              parameter="data")
    return c.astype(np.int64)


def _ones_messages(values: Any, extra: np.ndarray) -> Messages:
    return {"one": np.ones(int(values.sum() + extra.sum()), dtype=np.int8)}


def _count_ones_messages(messages: Messages) -> np.ndarray:
    if not messages:
        return np.zeros(1, dtype=np.int64)
    if set(messages) - {"shuffler"} != {"one"}:
        raise ValidationError("messages must have the single column 'one'", parameter="messages")
    m = np.asarray(messages["one"])
    if m.size and (m.dtype == np.bool_ or not np.issubdtype(m.dtype, np.integer) or m.min() != 1 or m.max() != 1):
        raise ValidationError("every message of this protocol is the bit 1", parameter="messages")
    return np.array([m.size], dtype=np.int64)
