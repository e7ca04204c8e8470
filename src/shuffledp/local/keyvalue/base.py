"""Contract of key-value LDP mechanisms and their estimate type."""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
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
    #: Largest eps accepted (as the mean oracles: e^eps stays a finite double). Every mechanism samples
    #: probabilities on the ``2^-53`` grid of ``Generator.random()`` (so ``random() < p`` draws them
    #: exactly), calibrated so that the exact worst-case likelihood ratio of what is sampled is at
    #: most ``e^eps`` (:func:`shuffledp.local.bits.calibrate_probability`); the statement carries the
    #: realised ``effective_epsilon <= epsilon``. Past eps ~ 37 the grid bounds the probabilities away
    #: from 0 and 1, and the realised eps saturates (about 37 to 150 depending on the mechanism).
    MAX_EPSILON: float = 700.0

    #: Exact eps of the client path as sampled (rounded up), ``<= epsilon``; set by subclasses.
    effective_epsilon: float

    def __init__(self, epsilon: float, d: int) -> None:
        super().__init__(epsilon)
        if self.epsilon > self.MAX_EPSILON:
            raise ValidationError(f"epsilon must be <= {self.MAX_EPSILON:g} for {type(self).__name__} "
                                  f"(e^eps must be a finite double), got {epsilon!r}", parameter="epsilon")
        self.effective_epsilon = self.epsilon
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
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"{type(self).__name__}: exact eps of the sampled probabilities "
                                     f"<= requested {self.epsilon:g}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, d={self.d})"


def _check_stat(stat: Any, size: int, name: str) -> np.ndarray:
    s = np.asarray(stat)
    if s.shape != (size,):
        raise ValidationError(f"statistic of {name} must have shape ({size},), got {s.shape}", parameter="statistic")
    return s.astype(np.float64)


def _nan_stderr(d: int) -> np.ndarray:
    return np.full(d, math.nan)


def _exp_neg(x: float) -> float:
    """``e^-x`` for x >= 0 (no overflow at any eps): ideal probabilities are written with it, e.g.
    ``e^eps / (e^eps + 1) = 1 / (1 + e^-eps)``, which is 1.0 rather than nan when e^eps overflows."""
    return math.exp(-x)


def _column_ratio(rows: list[list[Fraction]]) -> Fraction:
    """Exact worst-case ratio of a channel whose input-conditional output laws are the convex hull of
    ``rows``: ``max`` over outputs of ``max / min`` over rows (a mixture lies between its rows)."""
    worst = Fraction(1)
    for col in zip(*rows):
        lo = min(col)
        if lo <= 0:
            raise ValidationError("a report has probability 0 under some input", parameter="epsilon")
        worst = max(worst, max(col) / lo)
    return worst
