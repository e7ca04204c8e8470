"""L-OUE: longitudinal optimized unary encoding (chained permanent + instantaneous OUE).

Client, one user with value ``v`` in ``[0, d)``:

1. permanent (memoized per value): ``B`` = one-hot of ``v`` with bit ``v`` kept w.p. ``p1 = 1/2`` and
   every other bit set w.p. ``q1 = 1 / (e^{eps_perm} + 1)`` (OUE at ``eps_perm``);
2. instantaneous (fresh every report), per bit: ``P(S_i = 1 | B_i = 1) = p2 = 1/2``,
   ``P(S_i = 1 | B_i = 0) = q2``, the smaller root of
   ``4 E_perm (E_1 - 1) q^2 - 2 (3 E_1 E_perm - E_1 - E_perm - 1) q + (2 E_perm + 1 - 3 E_1) = 0``
   (``E = e^eps``), which makes the composed one-report channel exactly ``eps_1``-LDP; it exists
   (``q2 > 0``) only for ``e^{eps_1} < (2 e^{eps_perm} + 1) / 3``, the loss of the chain at ``q2 = 0``.

Guarantees
----------
* ``eps_perm``: the reports of one value are post-processing of its memoized ``B``, an OUE output
  with ratio ``p1 (1 - q1) / (q1 (1 - p1)) = (1 - q1) / q1``;
* ``eps_1`` for one report: per bit ``sigma1 = p1 p2 + (1 - p1) q2`` (true bit) and
  ``sigma0 = q1 p2 + (1 - q1) q2`` (others), independent over bits, so one report is unary encoding
  with ``(sigma1, sigma0)`` and loss ``ln[sigma1 (1 - sigma0) / (sigma0 (1 - sigma1))]``;
* ``s`` distinct values over time: at most ``min(s, d) eps_perm``.

Estimator: pure protocol with ``p* = sigma1``, ``q* = sigma0``; unbiased, variance
``[f sigma1 (1 - sigma1) + (1 - f) sigma0 (1 - sigma0)] / (n (sigma1 - sigma0)^2)``.

Sampled probabilities: ``q1`` and ``q2`` are rounded **up** to the ``2^-48`` grid (exact packed
Bernoulli sampling of dyadic probabilities, :mod:`shuffledp.local.packed`) until the exact
ratios are within ``e^{eps_perm}`` and ``e^{eps_1}``; every formula uses the sampled values.

Source: Arcolezi, Couchot, Al Bouna, Xiao, Digital Communications and Networks 2022
(arXiv 2111.04636), L-OUE; Wang, Blocki, Li, Jha, USENIX Security 2017 (OUE).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, format_up
from ...core.validation import check_int_values
from ..base import FrequencyOracle, Reports, check_n
from ..bits import calibrate_probability, log_ratio_up, packed_bits_at, set_bits
from ..packed import bernoulli_packed_lazy, packed_column_sums_swar, popcount_rows
from .l_grr import check_epsilons
from .memo import LongitudinalMixin

__all__ = ["LongitudinalOUE", "l_oue_q2"]

#: Grid 2^-PRECISION of the sampled q1, q2.
PRECISION = 48
_HALF = Fraction(1, 2)


def l_oue_q2(epsilon_perm: float, epsilon_one: float) -> float:
    """The ideal IRR probability ``q2`` of L-OUE (smaller root of the quadratic in the module docstring)."""
    E1, Ep = math.exp(epsilon_one), math.exp(epsilon_perm)
    a = 4 * Ep * (E1 - 1)
    b = -2 * (3 * E1 * Ep - E1 - Ep - 1)
    c = 2 * Ep + 1 - 3 * E1
    disc = b * b - 4 * a * c
    # the smaller root in the cancellation-free form 2c / (-b + sqrt(disc))
    return 2 * c / (-b + math.sqrt(disc))


class LongitudinalOUE(LongitudinalMixin, FrequencyOracle):
    """L-OUE: memoized OUE at ``eps_perm`` chained with a fresh per-bit randomization (module docstring).

    Privacy: ``epsilon`` is ``eps_perm`` (any number of reports of one value; realized exactly as
    ``epsilon_perm <= epsilon``); one report is ``epsilon_one``-LDP (exact, ``<= eps_1``); ``s``
    distinct values cost at most ``min(s, d) eps_perm``.
    Source: Arcolezi et al., Digital Communications and Networks 2022 (L-OUE).
    Cost: O(n d / 64) random words per round (packed bits); reports ``d`` bits; memo ``d`` bits per value.

    Parameters
    ----------
    epsilon : float
        ``eps_perm``, > 0.
    d : int
        Domain size, >= 2.
    epsilon_one : float, optional
        One-report target ``0 < eps_1 < eps_perm``; default ``eps_perm / 2``.
    """

    name = "l_oue"
    setup_width = 0
    answer_dtype = np.uint8

    def __init__(self, epsilon: float, d: int, epsilon_one: float | None = None) -> None:
        e_perm, e_one = check_epsilons(epsilon, epsilon_one)
        super().__init__(e_perm, d)
        self.epsilon_one_target = e_one
        self.key_space = self.d
        self.n_bytes = self.answer_width = (self.d + 7) // 8
        ep = math.exp(e_perm)
        if math.exp(e_one) >= (2 * ep + 1) / 3:
            # with p2 = 1/2 the composed ratio is at most (2 - q1) / (3 q1) = (2 e^eps_perm + 1) / 3 (at q2 = 0)
            raise ValidationError(f"L-OUE needs e^epsilon_one < (2 e^epsilon + 1) / 3, i.e. epsilon_one < "
                                  f"{math.log((2 * ep + 1) / 3):.6g} at epsilon={e_perm:g}; got {e_one:g}",
                                  parameter="epsilon_one")
        self._q1, self.epsilon_perm = calibrate_probability(1.0 / (ep + 1.0), e_perm, lambda q: (1 - q) / q, "up",
                                                            precision=PRECISION)
        q1 = self._q1

        def composed(q2: Fraction) -> Fraction:
            s1 = _HALF * _HALF + (1 - _HALF) * q2
            s0 = q1 * _HALF + (1 - q1) * q2
            return s1 * (1 - s0) / (s0 * (1 - s1))

        self._q2, eps_one = calibrate_probability(l_oue_q2(e_perm, e_one), e_one, composed, "up",
                                                  precision=PRECISION, parameter="epsilon_one")
        self._sigma1 = _HALF * _HALF + _HALF * self._q2
        self._sigma0 = q1 * _HALF + (1 - q1) * self._q2
        self.epsilon_one = min(eps_one, log_ratio_up(composed(self._q2)))
        self.p1, self.q1, self.p2, self.q2 = 0.5, float(q1), 0.5, float(self._q2)
        self.sigma1, self.sigma0 = float(self._sigma1), float(self._sigma0)

    def _privacy(self) -> PrivacyStatement:
        """``eps_perm``-LDP for any number of reports of one value; one report ``eps_1``-LDP (note)."""
        ep, e1 = format_up(self.epsilon_perm, 9), format_up(self.epsilon_one, 9)
        return PrivacyStatement(self.epsilon_perm, 0.0, "local", "replace_one",
                                note=f"{type(self).__name__}: eps_perm={ep} (unbounded reports of "
                                     f"one value, memoized PRR); eps_1={e1} (one report); "
                                     f"s distinct values: min(s, {self.d}) eps_perm")

    # --- client ------------------------------------------------------------------------
    def _mask_padding(self, bits: np.ndarray) -> np.ndarray:
        rem = self.d % 8
        if rem:
            bits[:, -1] &= np.uint8((1 << rem) - 1)
        return bits

    def setup(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.zeros((n, 0), dtype=np.int64)

    def memo_keys(self, x: np.ndarray, setup: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.int64)

    def permanent(self, keys: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """OUE bits of each value at ``eps_perm``, packed ``(n, ceil(d/8))``."""
        x = np.asarray(keys, dtype=np.int64)
        out = self._mask_padding(bernoulli_packed_lazy(x.shape[0], self.d, self.q1, rng))
        set_bits(out, x, rng.random(x.shape[0]) < 0.5)
        return out

    def instantaneous(self, answers: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> Reports:
        b = np.asarray(answers, dtype=np.uint8)
        n = b.shape[0]
        keep = bernoulli_packed_lazy(n, self.d, 0.5, rng)
        fake = bernoulli_packed_lazy(n, self.d, self.q2, rng)
        return {"bits": self._mask_padding((b & keep) | (~b & fake))}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"bits"}:
            raise ValidationError("L-OUE reports must have exactly the field 'bits'", parameter="reports")
        b = np.asarray(reports["bits"])
        if b.ndim != 2 or b.dtype != np.uint8 or b.shape[1] != self.n_bytes:
            raise ValidationError(f"bits must be a uint8 array of shape (n, {self.n_bytes})", parameter="bits")
        rem = self.d % 8
        if rem and b.shape[0] and np.any(b[:, -1] >> np.uint8(rem)):
            raise ValidationError(f"padding bits past d={self.d} must be zero", parameter="bits")
        return {"bits": b}

    # --- analyzer ----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        return packed_column_sums_swar(np.asarray(reports["bits"]), self.d)

    def _total_per_user(self) -> tuple[float, float]:
        """One report's d bits are independent: its own bit is 1 w.p. sigma1, the others w.p. sigma0."""
        return self.sigma1 + (self.d - 1) * self.sigma0, float(self.d)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        return self._pure_estimate(np.asarray(statistic), n, self.sigma1, self.sigma0)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        return self._pure_variance(check_n(n), value, self.sigma1, self.sigma0)

    # --- privacy -----------------------------------------------------------------------
    def _log_bits(self, bits: Any, x: Any, p: float, q: float) -> np.ndarray:
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        b = np.asarray(bits, dtype=np.uint8)
        ones = popcount_rows(b)
        at_x = packed_bits_at(b, np.full(b.shape[0], xv, dtype=np.int64)).astype(np.int64)
        others = ones - at_x
        lp = np.where(at_x == 1, math.log(p), math.log1p(-p))
        return lp + others * math.log(q) + (self.d - 1 - others) * math.log1p(-q)

    def log_probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """``ln Pr[S | x]`` of one report (PRR marginalized): bit ``x`` ~ sigma1, others ~ sigma0."""
        return self._log_bits(self.validate_reports(reports)["bits"], x, self.sigma1, self.sigma0)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        return np.exp(self.log_probabilities(reports, x))

    def permanent_probabilities(self, answers: Any, x: Any, setup: Any = None) -> np.ndarray:
        """``Pr[B | x]`` of the memoized bits: bit ``x`` ~ 1/2, others ~ q1."""
        return np.exp(self._log_bits(answers, x, self.p1, self.q1))

    def __repr__(self) -> str:
        return f"LongitudinalOUE(epsilon={self.epsilon:g}, d={self.d}, epsilon_one={self.epsilon_one_target:g})"
