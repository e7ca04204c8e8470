"""L-GRR: longitudinal generalized randomized response (chained permanent + instantaneous GRR).

Client, one user with value ``v`` in ``[0, k)``:

1. permanent (PRR, memoized per value): ``B = GRR_k(v)`` with ``p1 = e^{eps_perm} / (e^{eps_perm} + k - 1)``,
   ``q1 = (1 - p1) / (k - 1)``; drawn once per distinct value and reused;
2. instantaneous (IRR, fresh every report): ``y = GRR_k(B)`` with ``p2`` the GRR probability at
   ``eps_irr = ln((e^{eps_perm + eps_1} - 1) / (e^{eps_perm} - e^{eps_1}))``, ``q2 = (1 - p2) / (k - 1)``.

Guarantees
----------
* ``eps_perm`` (= ``eps_inf``): any number of reports of one value are post-processing of its
  memoized ``B``, and ``p1 / q1 = e^{eps_perm}``;
* ``eps_1`` for one report: the composed channel reports ``v`` w.p. ``sigma1 = p1 p2 + (k-1) q1 q2``
  and each other item w.p. ``sigma0 = q1 p2 + p1 q2 + (k-2) q1 q2``; its exact loss
  ``ln(sigma1 / sigma0)`` equals ``eps_1`` for ``k = 2`` and is below it for ``k > 2`` (the
  papers' IRR formula is the inverse of binary-RR composition); the statement carries the exact
  value, computed in rational arithmetic from the sampled probabilities;
* ``r >= 2`` reports of one value: ``min(eps_perm, r eps_irr)`` with ``eps_irr = ln(p2/q2)`` (a mixture
  over ``B`` of product laws; ``r eps_1`` is not a bound, the reports share ``B``);
* a user who reports ``s`` distinct values over time: at most ``min(s, k) eps_perm``.

Estimator: the one-report channel is a pure protocol with ``p* = sigma1``, ``q* = sigma0``, so
``f_hat(v) = (C(v) - n sigma0) / (n (sigma1 - sigma0))`` is unbiased, with variance
``[f sigma1 (1 - sigma1) + (1 - f) sigma0 (1 - sigma0)] / (n (sigma1 - sigma0)^2)``
(``sigma1 - sigma0 = (p1 - q1)(p2 - q2)``). Estimates of different rounds are correlated through the PRR.

Sampled probabilities: ``p1`` and ``p2`` are rounded **down** to the ``2^-53`` grid
(``rng.random() < p`` draws them exactly) until the exact ratios are within ``e^{eps_perm}`` and
``e^{eps_1}``; every formula uses the sampled values.

Source: Arcolezi, Couchot, Al Bouna, Xiao, "Improving the utility of locally differentially
private protocols for longitudinal and multidimensional frequency estimates", Digital
Communications and Networks 2022 (arXiv 2111.04636); Erlingsson, Pihur, Korolova, CCS 2014
(the PRR/IRR framework).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, format_up
from ...core.validation import check_epsilon, check_int_values
from ..base import FrequencyOracle, Reports, check_n
from ..bits import calibrate_probability, log_ratio_up
from .memo import LongitudinalMixin

__all__ = ["LongitudinalGRR", "ChainedGRR", "irr_epsilon", "check_epsilons"]


def irr_epsilon(epsilon_perm: float, epsilon_one: float) -> float:
    """``eps_irr = ln((e^{eps_perm + eps_1} - 1) / (e^{eps_perm} - e^{eps_1}))`` (the papers' IRR budget)."""
    a = math.expm1(epsilon_perm + epsilon_one)
    b = math.exp(epsilon_perm) - math.exp(epsilon_one)
    return math.log(a / b)


def check_epsilons(epsilon: float, epsilon_one: float | None) -> tuple[float, float]:
    """``(eps_perm, eps_1)`` with ``0 < eps_1 < eps_perm``; ``eps_1`` defaults to ``eps_perm / 2``."""
    e_perm = check_epsilon(epsilon, "epsilon")
    if e_perm > 30.0:
        raise ValidationError(f"epsilon (eps_perm) must be <= 30 for a longitudinal oracle, got {epsilon!r}",
                              parameter="epsilon")
    e_one = e_perm / 2.0 if epsilon_one is None else check_epsilon(epsilon_one, "epsilon_one")
    if not e_one < e_perm:
        raise ValidationError(f"epsilon_one (one report) must be < epsilon (eps_perm, unbounded reports of one "
                              f"value) = {e_perm:g}, got {epsilon_one!r}", parameter="epsilon_one")
    return e_perm, e_one


class ChainedGRR:
    """Two GRR channels on ``[m]`` in sequence: ``p1`` at ``eps_perm``, then ``p2`` at ``eps_irr``.

    Attributes (exact :class:`~fractions.Fraction`) ``p1, q1, p2, q2, sigma1, sigma0`` and the
    realized losses ``epsilon_perm`` (of ``p1``) and ``epsilon_one`` (of the composition).
    """

    def __init__(self, epsilon_perm: float, epsilon_one: float, m: int) -> None:
        self.m = m
        others = m - 1
        e = math.exp(epsilon_perm)
        self.p1, self.epsilon_perm = calibrate_probability(e / (e + others), epsilon_perm,
                                                           lambda t: t * others / (1 - t), "down")
        self.q1 = (1 - self.p1) / others
        e2 = math.exp(irr_epsilon(epsilon_perm, epsilon_one))
        p1, q1 = self.p1, self.q1

        def composed(p2: Fraction) -> Fraction:
            q2 = (1 - p2) / others
            return (p1 * p2 + others * q1 * q2) / (q1 * p2 + p1 * q2 + (m - 2) * q1 * q2)

        self.p2, eps_one = calibrate_probability(e2 / (e2 + others), epsilon_one, composed, "down",
                                                 parameter="epsilon_one")
        self.q2 = (1 - self.p2) / others
        #: loss of the instantaneous GRR alone (on the permanent symbol): ln(p2 / q2), rounded up
        self.epsilon_irr = log_ratio_up(self.p2 / self.q2)
        self.sigma1 = p1 * self.p2 + others * q1 * self.q2
        self.sigma0 = q1 * self.p2 + p1 * self.q2 + (m - 2) * q1 * self.q2
        self.epsilon_one = min(eps_one, log_ratio_up(self.sigma1 / self.sigma0))

    @staticmethod
    def grr(x: np.ndarray, p: Fraction, m: int, rng: np.random.Generator) -> np.ndarray:
        """``GRR_m(x)``: keep w.p. ``p`` (exact: ``p`` on the 2^-53 grid), else uniform other value."""
        keep = rng.random(x.shape[0]) < float(p)
        r = rng.integers(0, m - 1, size=x.shape[0], dtype=np.int64)
        return np.where(keep, x, r + (r >= x)).astype(np.int64)


class LongitudinalGRR(LongitudinalMixin, FrequencyOracle):
    """L-GRR: memoized GRR at ``eps_perm`` chained with a fresh GRR per report (module docstring).

    Privacy: ``epsilon`` is ``eps_perm``, the bound for unboundedly many reports of one value (the
    statement's ``eps``, realized exactly as ``epsilon_perm <= epsilon``); each single report is
    ``epsilon_one``-LDP (exact, ``<= eps_1``); a user with ``s`` distinct values over time loses at
    most ``min(s, d) eps_perm``.
    Source: Arcolezi et al., Digital Communications and Networks 2022 (L-GRR).
    Cost: O(n) encode; O(n) aggregate (a bincount); ``ceil(log2 d)`` bits per report.

    Parameters
    ----------
    epsilon : float
        ``eps_perm`` (``eps_inf``), > 0.
    d : int
        Domain size, >= 2.
    epsilon_one : float, optional
        ``eps_1``, the one-report target, ``0 < eps_1 < eps_perm``; default ``eps_perm / 2``.
    """

    name = "l_grr"
    setup_width = 0
    answer_width = 1
    answer_dtype = np.int64

    def __init__(self, epsilon: float, d: int, epsilon_one: float | None = None) -> None:
        e_perm, e_one = check_epsilons(epsilon, epsilon_one)
        super().__init__(e_perm, d)
        self.epsilon_one_target = e_one
        self.chain = ChainedGRR(self.epsilon, e_one, self.d)
        self.epsilon_perm, self.epsilon_one = self.chain.epsilon_perm, self.chain.epsilon_one
        self.epsilon_irr = self.chain.epsilon_irr
        self.key_space = self.d
        self.p1, self.q1 = float(self.chain.p1), float(self.chain.q1)
        self.p2, self.q2 = float(self.chain.p2), float(self.chain.q2)
        self.sigma1, self.sigma0 = float(self.chain.sigma1), float(self.chain.sigma0)

    def _privacy(self) -> PrivacyStatement:
        """``eps_perm``-LDP for any number of reports of one value; one report ``eps_1``-LDP (note)."""
        ep, e1 = format_up(self.epsilon_perm, 9), format_up(self.epsilon_one, 9)
        return PrivacyStatement(self.epsilon_perm, 0.0, "local", "replace_one",
                                note=f"{type(self).__name__}: eps_perm={ep} (unbounded reports of "
                                     f"one value, memoized PRR); eps_1={e1} (one report); "
                                     f"s distinct values: min(s, {self.d}) eps_perm")

    # --- client ------------------------------------------------------------------------
    def setup(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.zeros((n, 0), dtype=np.int64)

    def memo_keys(self, x: np.ndarray, setup: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.int64)

    def permanent(self, keys: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The memoized GRR answer ``B`` of each value, ``(n, 1)``."""
        return ChainedGRR.grr(np.asarray(keys, dtype=np.int64), self.chain.p1, self.d, rng)[:, None]

    def instantaneous(self, answers: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> Reports:
        return {"y": ChainedGRR.grr(np.asarray(answers)[:, 0], self.chain.p2, self.d, rng)}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"y"}:
            raise ValidationError("L-GRR reports must have exactly the field 'y'", parameter="reports")
        return {"y": check_int_values(reports["y"], self.d, "y")}

    # --- analyzer ----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        return np.bincount(np.asarray(reports["y"], dtype=np.int64), minlength=self.d).astype(np.int64)

    def _recorded_users(self, statistic: np.ndarray) -> float:
        return float(np.sum(statistic))

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        return self._pure_estimate(np.asarray(statistic), n, self.sigma1, self.sigma0)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        return self._pure_variance(check_n(n), value, self.sigma1, self.sigma0)

    # --- privacy -----------------------------------------------------------------------
    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """One report, PRR marginalized: ``sigma1`` if ``y = x`` else ``sigma0``."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        return np.where(np.asarray(reports["y"]) == xv, self.sigma1, self.sigma0)

    def permanent_probabilities(self, answers: Any, x: Any, setup: Any = None) -> np.ndarray:
        """``Pr[B | x]`` of the memoized answer: ``p1`` if ``B = x`` else ``q1``."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        return np.where(np.asarray(answers).reshape(-1) == xv, self.p1, self.q1)

    def __repr__(self) -> str:
        return (f"LongitudinalGRR(epsilon={self.epsilon:g}, d={self.d}, epsilon_one={self.epsilon_one_target:g})")
