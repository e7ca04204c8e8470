"""Contract of key-value LDP mechanisms and their estimate type."""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_domain_size, check_real
from ..base import LocalRandomizer, Reports, check_rng
from .data import KeyValueData, as_keyvalue_data

__all__ = ["KeyValueEstimate", "KeyValueMechanism", "user_pairs"]


@dataclass(frozen=True)
class KeyValueEstimate:
    """Per-key frequency and mean estimates of a key-value collection.

    Attributes
    ----------
    frequency : Estimate
        Raw frequency estimates f̂_k (fraction of users holding k); unbiased where the mechanism
        says so (may lie outside [0, 1]).
    mean : Estimate
        Raw mean estimates m̂_k (the mechanism's ratio estimator before any clipping or
        correction; may lie outside [-1, 1]; consistent, not exactly unbiased).
    frequency_clipped : numpy.ndarray
        f̂ clipped to the mechanism's valid range (post-processing).
    mean_clipped : numpy.ndarray
        The mechanism's corrected mean estimator, always within [-1, 1] (post-processing).
    value_sum : Estimate or None
        Unbiased estimate of f_k * m_k (= (1/n) * sum of holders' values) where one exists.
    """

    frequency: Estimate
    mean: Estimate
    frequency_clipped: np.ndarray
    mean_clipped: np.ndarray
    value_sum: Estimate | None = None
    extra: dict = field(default_factory=dict)

    @property
    def privacy(self) -> PrivacyStatement:
        return self.frequency.privacy


def user_pairs(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """One user's set (dict, sequence of (key, value), or a (l, 2) array) as (keys, values)."""
    if isinstance(x, dict):
        items = list(x.items())
    else:
        arr = np.asarray(x, dtype=np.float64)
        if arr.size == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        items = [(a, b) for a, b in arr.reshape(-1, 2)]
    ks = np.asarray([int(k) for k, _ in items], dtype=np.int64)
    vs = np.asarray([float(v) for _, v in items], dtype=np.float64)
    return ks, vs


class KeyValueMechanism(LocalRandomizer[KeyValueEstimate]):
    """An eps-LDP key-value mechanism over keys [0, d) and values [-1, 1].

    ``randomize(data, rng)`` takes a :class:`~shuffledp.local.keyvalue.KeyValueData` (or the forms
    accepted by :func:`~shuffledp.local.keyvalue.as_keyvalue_data`) and returns columnar reports;
    ``aggregate`` returns a mergeable integer array; ``estimate(stat, n)`` a :class:`KeyValueEstimate`
    (the contract of :class:`~shuffledp.local.base.LocalRandomizer` with that estimate type;
    subclasses implement :meth:`_randomize` and :meth:`_estimate`, the base checks ``rng`` and ``n``);
    ``probabilities(reports, x)`` is exact for the full client path (sampling, discretization,
    perturbation), ``x`` being one user's set.
    """

    label: str = ""
    #: Largest eps accepted. These mechanisms sample probabilities such as ``e^eps / (e^eps + 1)``
    #: computed in double precision with ``rng.random() < p`` (outcomes ``k / 2^53``), so the
    #: complementary probability (``~ e^-eps``) is realised only to an absolute ``2^-53``: the
    #: likelihood ratio is off by a relative ``~ e^eps 2^-53`` (<= 1e-9 at eps <= 16; 4.4% for
    #: PCKV at eps = 36; infinite from eps ~ 37 for PCKV and ~ 74 for PrivKV, where ``p`` rounds
    #: to 1). A mechanism whose probabilities are exact on a grid overrides it.
    MAX_EPSILON: float = 16.0

    def __init__(self, epsilon: float, d: int) -> None:
        super().__init__(epsilon)
        if self.epsilon > self.MAX_EPSILON:
            raise ValidationError(f"epsilon must be <= {self.MAX_EPSILON:g} for {type(self).__name__} (its "
                                  f"double-precision probabilities cannot realise a larger eps), got {epsilon!r}",
                                  parameter="epsilon")
        self.d = check_domain_size(d)

    def check_data(self, data: Any) -> KeyValueData:
        return as_keyvalue_data(data, self.d)

    def randomize(self, values: Any, rng: np.random.Generator | int | None = None) -> Reports:
        """Randomize each user's set; returns columnar reports.

        ``rng``: a numpy Generator, an int seed (reproducible simulation) or ``None`` (a fresh
        cryptographically secure generator); anything else is a :class:`ValidationError` naming
        ``rng``, raised before any input is read.
        """
        return self._randomize(values, check_rng(rng))

    @abstractmethod
    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        """:meth:`randomize` with a checked generator."""

    def estimate(self, statistic: np.ndarray, n: int | None = None) -> KeyValueEstimate:
        """Per-key frequency and mean estimates from the aggregated statistic of ``n`` users.

        ``n`` is required (a key-value statistic does not record its number of users); ``None``
        or anything but an integer >= 1 is a :class:`ValidationError` naming ``n``.
        """
        if n is None:
            raise ValidationError(f"{type(self).__name__}'s statistic does not record its number of users: "
                                  "pass n= to estimate", parameter="n")
        return self._estimate(statistic, self._check_n(n))

    @abstractmethod
    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        """:meth:`estimate` for a checked ``n``."""

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Closed-form variance of one key's raw frequency estimate from ``n`` users when the key's
        true frequency is ``value`` (:meth:`frequency_variance`).

        The signature is the one of every contract; a key-value mechanism has no default ``n``, so
        ``n=None`` is a :class:`ValidationError` naming ``n``, and ``value`` must be a fraction.
        """
        if n is None:
            raise ValidationError(f"{type(self).__name__}.variance needs the number of users n", parameter="n")
        n = self._check_n(n)
        value = check_real(value, "value", low=0.0, high=1.0)
        return self.frequency_variance(n, value)

    @abstractmethod
    def frequency_variance(self, n: int, f: Any = 0.0) -> Any:
        """Variance of f̂_k over all the client randomness (sampling included)."""

    def run(self, values: Any, rng: np.random.Generator | int | None = None) -> KeyValueEstimate:
        data = self.check_data(values)
        return self.estimate(self.aggregate(self.randomize(data, rng)), data.n)

    @staticmethod
    def _check_n(n: Any) -> int:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValidationError(f"n must be an integer >= 1, got {n!r}", parameter="n")
        return int(n)

    def _privacy(self) -> PrivacyStatement:
        return PrivacyStatement(self.epsilon, 0.0, "local", "replace_one", note=type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, d={self.d})"


def _check_stat(stat: Any, size: int, name: str) -> np.ndarray:
    s = np.asarray(stat)
    if s.shape != (size,):
        raise ValidationError(f"statistic of {name} must have shape ({size},), got {s.shape}", parameter="statistic")
    return s.astype(np.float64)


def _nan_stderr(d: int) -> np.ndarray:
    return np.full(d, math.nan)
