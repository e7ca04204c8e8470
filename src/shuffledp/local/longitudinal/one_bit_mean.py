"""1BitMean with alpha-point rounding and memoization (Ding, Kulkarni, Yekhanin, NeurIPS 2017).

Values ``x`` in ``[-1, 1]`` are mapped to ``u = (x + 1) / 2`` in ``[0, 1]`` (the paper's ``x / m``).

* **alpha-point rounding** (the paper's Section 3.1, patent US 10776242): the grid has ``K``
  steps of width ``s = 1 / K``; each user draws ``alpha`` uniformly in ``[0, s)`` **once** at
  setup (on the ``2^-53 s`` grid). With ``L = floor(u / s) s`` and ``R = L + s``, the rounded value is
  ``R`` if ``u + alpha >= R`` and ``L`` otherwise, so ``P_alpha[R] = (u - L) / s`` and
  ``E_alpha[rounded] = u`` (up to the ``2^-53`` resolution of ``alpha``). A user whose value moves
  inside one interval keeps her rounded value most of the time.
* **1BitMean** on the rounded level ``j`` (``rounded = j / K``): ``P[b = 1] = pi_j = pi_0 + j Delta``
  with ``pi_0 = 1 / (e^eps + 1)`` and ``K Delta = (e^eps - 1) / (e^eps + 1)`` (the paper's
  ``1/(e^eps + 1) + (x/m)(e^eps - 1)/(e^eps + 1)``);
* **memoization** (Section 3): the bit of each level is drawn the first time the user's rounded
  value takes that level and re-sent for every later report at that level (no fresh randomness);
* optional **output perturbation** (Section 3.3): each report flips the memoized bit with
  probability ``gamma`` (fresh coins), which hides exactly when the memoized bit changed.

Guarantees
----------
* one report: eps-LDP (``pi`` stays in ``[pi_0, 1 - pi_0]`` and ``(1 - pi_0) / pi_0 <= e^eps``); with
  ``gamma > 0`` it is ``eps_1 = ln[(gamma + (1 - 2 gamma)(1 - pi_0)) / (gamma + (1 - 2 gamma) pi_0)] < eps``;
* ``r >= 2`` reports at one level with ``gamma > 0``: ``min(eps, r ln((1 - gamma) / gamma))``;
* memoized: the whole transcript is a function of the memo table and of the sequence of rounded
  levels, so a user whose rounded value does not change is eps-LDP over any number of reports,
  and one who visits ``S`` levels loses at most ``|S| eps`` (``<= (K + 1) eps``). Without output
  perturbation the times at which the rounded value changed are visible. The paper puts it as:
  with memoization "privacy leakage is limited. When data collector observes that user's response
  had changed, this only indicates that user's value had changed, but not what it was and not
  what it is."

Estimator: ``x_hat = 2 [ (S / n - gamma) / (1 - 2 gamma) - pi_0 ] / (K Delta) - 1`` with ``S`` the number
of ones; ``E[b] = gamma + (1 - 2 gamma)(pi_0 + K Delta u)`` exactly (marginally over ``alpha``), so it is
unbiased, with variance ``4 pihat (1 - pihat) / (n ((1 - 2 gamma) K Delta)^2)``,
``pihat = gamma + (1 - 2 gamma)(pi_0 + K Delta u)`` for ``n`` users of value ``x``.

Sampled probabilities: ``Delta`` is rounded down on the ``2^-52`` grid and ``pi_0 = (1 - K Delta) / 2``,
so every ``pi_j`` is an exact double and ``rng.random() < pi_j`` draws it exactly; ``gamma`` is
rounded up to the ``2^-53`` grid.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, format_up
from ...core.validation import check_positive_int, check_probability
from ..base import MeanOracle, Reports, check_n
from ..bits import grid_fraction, log_ratio_up
from .memo import LongitudinalMixin

__all__ = ["OneBitMean"]

_TWO53 = 1 << 53
_EXP_MARGIN = 1 - Fraction(1, 1 << 50)


class OneBitMean(LongitudinalMixin, MeanOracle):
    """1BitMean with alpha-point rounding to ``levels`` steps and per-level memoization (module docstring).

    Privacy: each report is ``effective_epsilon``-LDP (``<= epsilon``), ``epsilon_one``-LDP with
    output perturbation; any number of reports at one rounded level are ``effective_epsilon``-LDP;
    ``s`` levels visited cost at most ``s effective_epsilon``.
    Source: Ding, Kulkarni, Yekhanin, "Collecting Telemetry Data Privately", NeurIPS 2017.
    Cost: O(n) encode and aggregate; one bit per report.

    Parameters
    ----------
    epsilon : float
        Privacy parameter of the memoized bit, > 0.
    dim : int
        Must be 1 (the mechanism is scalar).
    levels : int
        Rounding steps ``K`` on ``[0, 1]`` (``K + 1`` levels), >= 1; default 16.
    gamma : float
        Output-perturbation flip probability in ``[0, 1/2)``; default 0 (none).
    """

    name = "one_bit_mean"
    setup_width = 1
    answer_width = 1
    answer_dtype = np.uint8

    def __init__(self, epsilon: float, dim: int = 1, levels: int = 16, gamma: float = 0.0) -> None:
        super().__init__(epsilon, dim)
        if self.dim != 1:
            raise ValidationError(f"1BitMean is scalar: dim must be 1, got {dim}", parameter="dim")
        if self.epsilon > 30.0:
            raise ValidationError(f"epsilon must be <= 30, got {epsilon}", parameter="epsilon")
        self.levels = check_positive_int(levels, "levels")
        if self.levels > 1 << 20:
            raise ValidationError(f"levels must be in [1, 2^20], got {levels}", parameter="levels")
        g = check_probability(gamma, "gamma")
        if g >= 0.5:
            raise ValidationError(f"gamma must be in [0, 1/2), got {gamma}", parameter="gamma")
        self._gamma = grid_fraction(g, 53, "up")
        if self._gamma >= Fraction(1, 2):
            raise ValidationError(f"gamma must be in [0, 1/2), got {gamma}", parameter="gamma")
        K = self.levels
        e = math.exp(self.epsilon)
        bound = Fraction(e) * _EXP_MARGIN
        step = Fraction(1, 1 << 52)
        delta = grid_fraction(math.tanh(self.epsilon / 2) / K, 52, "down")  # (e-1)/(e+1) = tanh(eps/2)
        while delta > 0 and (1 - (1 - K * delta) / 2) / ((1 - K * delta) / 2) > bound:
            delta -= step
        if delta <= 0:
            raise ValidationError(f"epsilon={epsilon} is too small for {K} levels on the 2^-52 grid",
                                  parameter="epsilon")
        self._delta = delta
        self._pi0 = (1 - K * delta) / 2
        ratio = (1 - self._pi0) / self._pi0
        self.effective_epsilon = min(self.epsilon, log_ratio_up(ratio))
        gam = self._gamma
        one = (gam + (1 - 2 * gam) * (1 - self._pi0)) / (gam + (1 - 2 * gam) * self._pi0)
        self.epsilon_perm = self.effective_epsilon
        self.epsilon_one = min(self.effective_epsilon, log_ratio_up(one))
        #: the output perturbation alone flips one bit: ln((1 - gamma) / gamma); none without it
        self.epsilon_irr = log_ratio_up((1 - gam) / gam) if gam > 0 else None
        self.pi0, self.delta_step, self.gamma = float(self._pi0), float(delta), float(gam)
        self.key_space = K + 1
        #: the per-level probabilities (exact doubles)
        self.pi = self.pi0 + np.arange(K + 1) * self.delta_step  # exact: multiples of 2^-53 below 1

    def _privacy(self) -> PrivacyStatement:
        """``effective_epsilon``-LDP per report and for any number of reports at one rounded level."""
        ep, e1 = format_up(self.epsilon_perm, 9), format_up(self.epsilon_one, 9)
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"OneBitMean(levels={self.levels}, gamma={self.gamma:g}): eps_perm={ep} "
                                     f"(memoized bit per rounded level, any number of reports at one level); "
                                     f"eps_1={e1} (one report); s levels: s eps_perm")

    # --- client ------------------------------------------------------------------------
    def setup(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Each user's rounding offset ``alpha = a 2^-53 s`` as the integer ``a`` in ``[0, 2^53)``."""
        return rng.integers(0, _TWO53, size=(n, 1), dtype=np.int64)

    def _round_up_threshold(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lower level ``L``, threshold ``t``): the level is ``L + 1`` iff ``a >= t`` (``P = (2^53 - t) / 2^53``)."""
        u = (np.asarray(x, dtype=np.float64) + 1.0) * 0.5 * self.levels
        low = np.minimum(np.floor(u), self.levels).astype(np.int64)
        frac = u - low
        t = np.where(frac > 0, np.ceil((1.0 - frac) * _TWO53), float(_TWO53)).astype(np.float64)
        return low, np.minimum(t, float(_TWO53)).astype(np.int64)

    def memo_keys(self, x: np.ndarray, setup: np.ndarray) -> np.ndarray:
        """The alpha-rounded level ``j`` in ``[0, levels]``."""
        low, t = self._round_up_threshold(x)
        return (low + (np.asarray(setup)[:, 0] >= t)).astype(np.int64)

    def permanent(self, keys: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The memoized bit of each level: Bernoulli(pi_j), ``(n, 1)``."""
        j = np.asarray(keys, dtype=np.int64)
        return (rng.random(j.shape[0]) < self.pi[j]).astype(np.uint8)[:, None]

    def instantaneous(self, answers: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> Reports:
        b = np.asarray(answers, dtype=np.uint8)[:, 0]
        if self._gamma > 0:
            b = b ^ (rng.random(b.shape[0]) < self.gamma).astype(np.uint8)
        return {"b": b}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"b"}:
            raise ValidationError("1BitMean reports must have exactly the field 'b'", parameter="reports")
        b = np.asarray(reports["b"])
        if b.ndim != 1 or not np.issubdtype(b.dtype, np.integer) or b.dtype == np.bool_ or np.any((b != 0) & (b != 1)):
            raise ValidationError("b must be a 1-D array of 0/1 integers", parameter="b")
        return {"b": b.astype(np.uint8)}

    # --- analyzer ----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        return np.array([np.asarray(reports["b"]).sum(dtype=np.int64)], dtype=np.int64)

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        s = super()._check_statistic_for(statistic, n)
        if s.min() < 0 or s.max() > n:
            raise ValidationError(f"statistic must be a count of ones in [0, n={n}]", parameter="statistic")
        return s

    def _total_per_user(self) -> None:
        return None

    def _scale(self) -> float:
        return (1 - 2 * self.gamma) * self.levels * self.delta_step

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """Unbiased mean of the values in ``[-1, 1]``; standard error at the clipped estimate."""
        s = float(np.asarray(statistic, dtype=np.float64)[0])
        mean = 2.0 * (s / n - self.gamma - (1 - 2 * self.gamma) * self.pi0) / self._scale() - 1.0
        var = self._variance(n, min(1.0, max(-1.0, mean)))
        return Estimate(np.array([mean]), np.array([math.sqrt(var)]), int(n), self.privacy(), "mean",
                        extra={"mechanism": self.name, "levels": self.levels, "gamma": self.gamma})

    def _mean_bit(self, value: float) -> float:
        u = (value + 1.0) / 2.0
        return self.gamma + (1 - 2 * self.gamma) * (self.pi0 + self.levels * self.delta_step * u)

    def _variance(self, n: int, value: float) -> float:
        pb = self._mean_bit(value)
        return 4.0 * pb * (1.0 - pb) / (n * self._scale() ** 2)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Variance of the mean estimate from ``n`` users who all hold ``value``."""
        return self._variance(check_n(n), float(np.asarray(value)))

    # --- privacy -----------------------------------------------------------------------
    def _level_up_probability(self, x: Any) -> tuple[int, float]:
        xv = np.asarray([x], dtype=np.float64)
        if not np.all(np.isfinite(xv)) or np.any(np.abs(xv) > 1):
            raise ValidationError(f"x must be in [-1, 1], got {x!r}", parameter="x")
        low, t = self._round_up_threshold(xv)
        return int(low[0]), float(_TWO53 - int(t[0])) / _TWO53

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """One report, alpha and memo marginalized: ``P[b = 1 | x] = gamma + (1 - 2 gamma) E[pi_j]``."""
        low, up = self._level_up_probability(x)
        pi = self.pi[low] if up == 0 else (1 - up) * self.pi[low] + up * self.pi[min(low + 1, self.levels)]
        p1 = self.gamma + (1 - 2 * self.gamma) * pi
        return np.where(np.asarray(reports["b"]) == 1, p1, 1.0 - p1)

    def permanent_probabilities(self, answers: Any, x: Any, setup: Any) -> np.ndarray:
        """``Pr[B | x, alpha]`` of the memoized bit: Bernoulli(pi_j) at the rounded level ``j``."""
        xv = np.full(np.asarray(setup).reshape(-1, 1).shape[0], float(x))
        j = self.memo_keys(xv, np.asarray(setup, dtype=np.int64).reshape(-1, 1))
        return np.where(np.asarray(answers).reshape(-1) == 1, self.pi[j], 1.0 - self.pi[j])

    def __repr__(self) -> str:
        return f"OneBitMean(epsilon={self.epsilon:g}, levels={self.levels}, gamma={self.gamma:g})"

