"""Shared input handling of the multi-attribute protocols: each user holds k categorical
attributes, an ``(n, k)`` int array with column ``a`` in ``[0, d_a)``. Estimates are the
per-attribute histograms (counts) concatenated in attribute order; :func:`split_attributes`
cuts them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.validation import check_domain_size, check_positive_int
from .base import Protocol

__all__ = ["split_attributes"]


def _dims(d: int | Sequence[int], k: int | None) -> tuple[int, ...]:
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        if k is None:
            raise ValidationError("give k (number of attributes) when d is one domain size", parameter="k")
        return (check_domain_size(d),) * check_positive_int(k, "k")
    if isinstance(d, (str, bytes)) or not isinstance(d, Sequence) or len(d) == 0:
        raise ValidationError(f"d must be a domain size or a non-empty list of them, got {d!r}", parameter="d")
    dims = tuple(check_domain_size(x, "d") for x in d)
    if k is not None and check_positive_int(k, "k") != len(dims):
        raise ValidationError(f"k={k} does not match the {len(dims)} domain sizes in d", parameter="k")
    return dims


def split_attributes(values: np.ndarray, dims: Sequence[int]) -> list[np.ndarray]:
    """Cut a concatenated per-attribute vector into one array per attribute."""
    return np.split(np.asarray(values), np.cumsum(dims)[:-1])


class _Multi(Protocol):
    input_kind = "multi_categorical"

    def __init__(self, epsilon: float, delta: float, n: int, d: int | Sequence[int], k: int | None) -> None:
        super().__init__(epsilon, delta, n)
        if self.delta <= 0:
            raise ValidationError(f"{self.name} is an approximate-DP protocol: delta must lie in (0, 1)",
                                  parameter="delta")
        self.dims = _dims(d, k)
        self.k = len(self.dims)
        self.offsets = np.concatenate([[0], np.cumsum(self.dims)]).astype(np.int64)

    def check_values(self, values: Any) -> np.ndarray:
        arr = np.asarray(values)
        if arr.ndim != 2 or arr.shape[1] != self.k:
            raise ValidationError(f"values must be an (n, {self.k}) integer array, got shape {arr.shape}",
                                  parameter="values")
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise ValidationError(f"values must be integers, got dtype {arr.dtype}", parameter="values")
        if arr.size:
            bad = (arr < 0) | (arr >= np.asarray(self.dims)[None, :])
            if bad.any():
                i, a = np.argwhere(bad)[0]
                raise ValidationError(f"values[:, {a}] must lie in [0, {self.dims[a]}), found {int(arr[i, a])}",
                                      parameter="values")
        return arr.astype(np.int64, copy=False)

    def _n_of(self, n: int | None) -> int:
        return self.n if n is None else check_positive_int(n, "n")

    def _attribute(self, attribute: int) -> int:
        if isinstance(attribute, bool) or not isinstance(attribute, (int, np.integer)) \
                or not 0 <= attribute < self.k:
            raise ValidationError(f"attribute must be an integer in [0, {self.k}), got {attribute!r}",
                                  parameter="attribute")
        return int(attribute)

    def attribute_variance(self, n: int | None, value: float, attribute: int) -> float:
        """Variance of the estimated count of one cell of ``attribute`` held by ``value`` users."""
        raise NotImplementedError(f"{type(self).__name__} states no closed-form variance")

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """The largest over the attributes of :meth:`attribute_variance` ``(n, value, a)``: the
        variance of one cell's estimated count held by ``value`` users, in the worst attribute."""
        return max(self.attribute_variance(n, value, a) for a in range(self.k))
