"""Unary encoding frequency oracles: SUE (basic one-time RAPPOR) and OUE.

Each user one-hot encodes her value ``x`` in ``{0,1}^d`` and reports every bit independently
perturbed: bit ``x`` is 1 with probability ``p``, every other bit with probability ``q``.

* SUE (symmetric unary encoding = basic one-time RAPPOR, Erlingsson, Pihur, Korolova CCS 2014):
  ``p = e^{eps/2} / (e^{eps/2} + 1)``, ``q = 1 - p``.
* OUE (optimized unary encoding, Wang, Blocki, Li, Jha USENIX Security 2017):
  ``p = 1/2``, ``q = 1 / (e^eps + 1)``.

Both are pure protocols (Wang, Blocki, Li, Jha, USENIX Security 2017) with ``Supp(y) = {j : y_j = 1}``; the estimator is
``(C_i - n q) / (n (p - q))`` and the exact variance of a fraction is
``[q(1-q) + f(1-p-q)(p-q)] / (n (p-q)^2)``.

Privacy
-------
Two inputs ``x != x'`` change the law of bits ``x`` and ``x'`` only, so for every report ``y``
``Pr[y|x] / Pr[y|x'] = [Pr[y_x|1] Pr[y_x'|0]] / [Pr[y_x|0] Pr[y_x'|1]]``, which is largest
(``y_x = 1, y_x' = 0``) at ``R = p (1-q) / (q (1-p))`` and smallest at ``1/R``. The mechanism is
``ln R``-LDP, and ``ln R = eps`` for the ideal ``p, q`` of both variants.

Dyadic rounding
---------------
Reports are sampled as packed bits with an exact sampler that needs ``p`` and ``q`` to be dyadic
rationals. The ideal values are rounded to the grid ``2^-K``: ``q`` **up**, ``p`` **down**
(``R`` increases in ``p`` and decreases in ``q``, so the ratio can only shrink). SUE keeps
``p = 1 - q`` exactly (``1 - floor(a) = ceil(1 - a)`` on the grid), OUE's ``p = 1/2`` is already
dyadic. The rounded ``(p, q)`` are then used *everywhere*: sampler, estimator, variance and
:meth:`UnaryEncoding.probabilities`. The rounded mechanism is exactly ``effective_epsilon``-LDP
with ``effective_epsilon = ln R <= epsilon`` (checked in exact rational arithmetic against
``e^eps``; the privacy statement carries ``effective_epsilon``). The default grid is
``K = min(48, 24 + ceil(log2(1/q)))``: ``q`` moves by at most ``2^-24`` of itself, so the
estimator's variance changes by < 10^-6 relative; because the sampler is lazy, a finer grid costs
no time.

Reports: ``{"bits": uint8 array (n, ceil(d / 8))}``, bit ``j`` of a user's report is bit ``j % 8``
of byte ``j // 8`` (little-endian), padding bits zero. Memory ``n d / 8`` bytes.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_int_values, check_positive_int
from .base import FrequencyOracle, Reports
from .bits import grid_fraction, packed_bits_at, set_bits
from .packed import bernoulli_packed_lazy, packed_column_sums_swar, popcount_rows

__all__ = ["UnaryEncoding", "SymmetricUnaryEncoding", "OptimizedUnaryEncoding", "MAX_PRECISION"]

#: Finest grid 2^-K accepted for the rounded probabilities.
MAX_PRECISION = 48
#: Coarsest grid accepted.
MIN_PRECISION = 8
#: Users per block in :meth:`UnaryEncoding.randomize` (bounds the sampler's temporaries).
_ROWS = 1 << 16


def _round_to_grid(v: float, k: int, direction: str) -> Fraction:
    return grid_fraction(v, k, direction)


class UnaryEncoding(FrequencyOracle):
    """Unary encoding with bit probabilities ``p`` (the true bit) and ``q`` (every other bit).

    Subclasses fix the ideal ``(p, q)`` as functions of eps (:meth:`ideal_pq`); this class
    rounds them to a dyadic grid (``q`` up, ``p`` down, see the module docstring) and implements
    the whole contract.

    Privacy: exactly ``effective_epsilon``-LDP with ``effective_epsilon = ln[p(1-q)/(q(1-p))]
    <= epsilon`` for the rounded ``p, q`` (replace-one, one report per user).
    Source: Wang, Blocki, Li, Jha, "Locally differentially private protocols for frequency
    estimation", USENIX Security 2017 (UE, SUE, OUE); Erlingsson, Pihur, Korolova, "RAPPOR",
    CCS 2014 (basic one-time RAPPOR = SUE).
    Cost: O(n d / 64) random words (about 8.6 per 64 bits, see :mod:`.packed`) to encode, O(n d / 8) byte operations
    to aggregate; reports take ``d`` bits per user.

    Parameters
    ----------
    epsilon : float
        Requested privacy parameter, > 0.
    d : int
        Domain size, >= 2.
    precision : int, optional
        ``K``: round ``p, q`` to multiples of ``2^-K``, ``K`` in [8, 48]. Default
        ``min(48, 24 + ceil(log2(1/q)))``.
    """

    name = "ue"

    def __init__(self, epsilon: float, d: int, precision: int | None = None) -> None:
        super().__init__(epsilon, d)
        p_ideal, q_ideal = self.ideal_pq(self.epsilon)
        if precision is None:
            k = MAX_PRECISION if q_ideal <= 0 else min(MAX_PRECISION, 24 + max(0, math.ceil(-math.log2(q_ideal))))
        else:
            k = check_positive_int(precision, "precision", minimum=MIN_PRECISION)
            if k > MAX_PRECISION:
                raise ValidationError(f"precision must be an integer in [{MIN_PRECISION}, {MAX_PRECISION}], got {k}",
                                      parameter="precision")
        self.precision = k
        self.p_ideal, self.q_ideal = p_ideal, q_ideal
        q = _round_to_grid(q_ideal, k, "up")
        if q == 0:
            q = Fraction(1, 1 << k)
        p = self._p_from(q, p_ideal, k)
        # Make sure R = p(1-q)/(q(1-p)) < e^eps in exact arithmetic (float e^eps has relative
        # error < 2^-52; we demand a 2^-50 margin). Each step moves R by more than the margin.
        while not self._ratio_below_exp(p, q):
            q += Fraction(1, 1 << k)
            p = self._p_from(q, p_ideal, k)
        if not (0 < q < p < 1):
            raise ValidationError(
                f"epsilon={self.epsilon!r} is too small for the probability grid 2^-{k} (p and q round to "
                f"p={float(p)!r}, q={float(q)!r}); use a larger precision", parameter="epsilon")
        self._p_frac, self._q_frac = p, q
        self.p = float(p)
        self.q = float(q)
        ratio = (p * (1 - q)) / (q * (1 - p))
        # ln R = log1p(R - 1) with R - 1 exact: no cancellation for small eps; round outward.
        self.effective_epsilon = min(self.epsilon, round_up(math.log1p(float(ratio - 1))))
        self.n_bytes = (self.d + 7) // 8

    # --- parameters -------------------------------------------------------------------
    @staticmethod
    def ideal_pq(epsilon: float) -> tuple[float, float]:  # pragma: no cover - abstract
        """The variant's unrounded ``(p, q)`` at ``epsilon``."""
        raise NotImplementedError

    def _p_from(self, q: Fraction, p_ideal: float, k: int) -> Fraction:
        """The rounded ``p`` given the rounded ``q`` (default: ``p`` rounded down on the grid)."""
        return _round_to_grid(p_ideal, k, "down")

    def _ratio_below_exp(self, p: Fraction, q: Fraction) -> bool:
        if not (0 < q < p < 1):
            return True  # infeasible; reported by the caller
        if self.epsilon >= 100.0:  # R <= 1/(q(1-p)) <= 2^(2 * 48) < e^67
            return True
        ratio = (p * (1 - q)) / (q * (1 - p))
        return ratio <= Fraction(math.exp(self.epsilon)) * (1 - Fraction(1, 1 << 50))

    def _privacy(self) -> PrivacyStatement:
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(
            self.effective_epsilon, 0.0, "local", "replace_one",
            note=(f"{type(self).__name__}: dyadic p={self.p!r}, q={self.q!r} (grid 2^-{self.precision}); "
                  f"exact eps of the rounded mechanism <= requested {self.epsilon:g}"))

    # --- client -----------------------------------------------------------------------
    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        """Perturbed one-hot bits of every user, packed: ``{"bits": (n, ceil(d/8)) uint8}``."""
        x = self.check_values(values)
        n = x.shape[0]
        out = np.empty((n, self.n_bytes), dtype=np.uint8)
        for lo in range(0, n, _ROWS):  # blocks of users: bounded temporaries
            hi = min(n, lo + _ROWS)
            bernoulli_packed_lazy(hi - lo, self.d, self.q, rng, out=out[lo:hi])
        # the true bit: an independent Bernoulli(p); rng.random() is k / 2^53, exact for dyadic p
        true_bit = rng.random(n) < self.p
        set_bits(out, x, true_bit)
        return {"bits": out}

    def validate_reports(self, reports: Reports) -> Reports:
        if not isinstance(reports, dict) or set(reports) != {"bits"}:
            raise ValidationError("unary encoding reports must have exactly the field 'bits'", parameter="reports")
        b = np.asarray(reports["bits"])
        if b.ndim != 2 or b.dtype != np.uint8 or b.shape[1] != self.n_bytes:
            raise ValidationError(f"bits must be a uint8 array of shape (n, {self.n_bytes}), got "
                                  f"{b.dtype} {b.shape}", parameter="bits")
        rem = self.d % 8
        if rem and b.shape[0] and np.any(b[:, -1] >> np.uint8(rem)):
            raise ValidationError(f"padding bits past d={self.d} must be zero", parameter="bits")
        return {"bits": b}

    # --- analyzer ---------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """Per-item bit counts ``C_i = #{u : y_u[i] = 1}`` (int64, mergeable)."""
        return packed_column_sums_swar(reports["bits"], self.d)

    def _total_per_user(self) -> tuple[float, float]:
        """A report's d bits are independent: its own bit is 1 w.p. p, each other bit w.p. q."""
        return self.p + (self.d - 1) * self.q, float(self.d)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic)
        if stat.shape != (self.d,):
            raise ValidationError(f"statistic must have shape ({self.d},), got {stat.shape}", parameter="statistic")
        n = check_positive_int(n, "n")
        return self._pure_estimate(stat, n, self.p, self.q)

    def variance(self, n: int | None = None, value: Any = 0.0) -> Any:
        """Exact variance of one item's fraction estimate (true fraction ``value``), rounded ``p, q``.

        ``value`` may be an array of fractions (one variance each).
        """
        n = check_positive_int(n, "n")
        fa = np.asarray(value, dtype=np.float64) if not isinstance(value, (bool, np.bool_)) else np.asarray(np.nan)
        if not np.all(np.isfinite(fa)) or np.any((fa < 0) | (fa > 1)):
            raise ValidationError(f"value must be fractions in [0, 1], got {value!r}", parameter="value")
        v = self._pure_variance(n, fa, self.p, self.q)
        return float(v) if fa.ndim == 0 else v

    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Exact law of the bit counts: ``C_i = Binomial(n_i, p) + Binomial(n - n_i, q)``, O(d)."""
        c = self.check_counts(true_counts)
        n = int(c.sum())
        return (rng.binomial(c, self.p) + rng.binomial(n - c, self.q)).astype(np.int64)

    # --- privacy ----------------------------------------------------------------------
    def log_probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """``ln Pr[R(x) = y]`` for each report (exact up to float rounding; no underflow at large d)."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        b = self.validate_reports(reports)["bits"]
        ones = popcount_rows(b)
        at_x = packed_bits_at(b, np.full(b.shape[0], xv, dtype=np.int64)).astype(np.int64)
        others = ones - at_x  # ones among the d - 1 bits with ideal value 0
        lp = np.where(at_x == 1, math.log(self.p), math.log1p(-self.p))
        return lp + others * math.log(self.q) + (self.d - 1 - others) * math.log1p(-self.q)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[R(x) = y] = p^{y_x}(1-p)^{1-y_x} prod_{j != x} q^{y_j}(1-q)^{1-y_j}``.

        Underflows to 0 for large ``d`` (about d > 500); use :meth:`log_probabilities` there.
        """
        return np.exp(self.log_probabilities(reports, x))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(epsilon={self.epsilon:g}, d={self.d}, p={self.p:.6g}, q={self.q:.6g}, "
                f"effective_epsilon={self.effective_epsilon:.12g})")


class SymmetricUnaryEncoding(UnaryEncoding):
    """Symmetric unary encoding (SUE) = basic one-time RAPPOR.

    ``p = e^{eps/2} / (e^{eps/2} + 1)``, ``q = 1 - p`` (each bit is randomized response at eps/2;
    two bits differ between inputs). Var* = n e^{eps/2} / (e^{eps/2} - 1)^2 in counts.

    Privacy: eps-LDP for the ideal values; exactly ``effective_epsilon``-LDP
    (``<= epsilon``) for the dyadic values used (``q`` rounded up, ``p = 1 - q``).
    Source: Erlingsson, Pihur, Korolova, CCS 2014; Wang et al., USENIX Security 2017 (SUE).
    """

    name = "sue"

    @staticmethod
    def ideal_pq(epsilon: float) -> tuple[float, float]:
        t = math.exp(-epsilon / 2.0)
        return 1.0 / (1.0 + t), t / (1.0 + t)

    def _p_from(self, q: Fraction, p_ideal: float, k: int) -> Fraction:
        return 1 - q  # exactly the grid value floor(p) since p = 1 - q ideally


class OptimizedUnaryEncoding(UnaryEncoding):
    """Optimized unary encoding (OUE): ``p = 1/2``, ``q = 1/(e^eps + 1)``.

    Minimises Var* among unary encodings: Var* = n 4 e^eps / (e^eps - 1)^2 in counts.

    Privacy: eps-LDP for the ideal values; exactly ``effective_epsilon``-LDP
    (``<= epsilon``) for the dyadic values used (``q`` rounded up, ``p = 1/2`` exact).
    Source: Wang, Blocki, Li, Jha, USENIX Security 2017 (OUE).
    """

    name = "oue"

    @staticmethod
    def ideal_pq(epsilon: float) -> tuple[float, float]:
        t = math.exp(-epsilon)
        return 0.5, t / (1.0 + t)
