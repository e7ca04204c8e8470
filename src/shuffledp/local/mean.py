"""eps-LDP mean oracles for values in [-1, 1]: Duchi et al., Harmony, PM and HM.

Conventions shared by every oracle here
---------------------------------------
* ``dim`` coordinates per user. ``dim == 1``: ``values`` is a 1-D array of ``n`` numbers;
  ``dim > 1``: an ``(n, dim)`` array. Every entry must be a finite number in [-1, 1].
* ``aggregate(reports)`` returns the per-coordinate **sums** of the (unscaled) report values, a
  ``(dim,)`` array, so ``aggregate(a ∪ b) == aggregate(a) + aggregate(b)``. For Duchi and
  Harmony the sums are integers (sums of signs) and merging is exact; for PM and HM they are
  float sums and merging is exact up to floating-point rounding.
* ``estimate(statistic, n).values`` are the unbiased per-coordinate means (``kind="mean"``).
  ``stderr`` is *conservative*: the per-user variance of every mechanism here has the form
  ``a + b t^2 + g(t)`` with ``0 <= g(t) <= g_max`` (``g`` is the input-snapping term of PM/HM,
  0 for Duchi and Harmony), so it is evaluated at both ends of ``t^2 in [m^2, 1]`` (``m`` the
  clipped estimate; every population with mean ``m`` has ``mean(t^2)`` in that range), the
  larger value is used and ``g_max`` is added.
* ``variance(n, f)`` is the exact variance of one coordinate's mean estimate when **every**
  user holds the value ``f`` in that coordinate (``f`` may be an array of per-coordinate values).
  For a heterogeneous population ``f = sqrt(mean_i t_i^2)`` (the RMS of the users' values) gives
  the exact variance up to the snapping term, i.e. within ``g_max / n``
  (:meth:`_SumMeanOracle.snap_variance_bound`; below ``10^-6`` of the variance by default).
* ``probabilities(reports, x)``: the exact pmf of each report for a single user holding ``x``.
  Every oracle here has a **finite output set that does not depend on the input**: signs for
  Duchi and Harmony, a fixed grid of ``K`` float64 values (plus, for HM, the two Duchi atoms)
  for PM and HM (:meth:`PiecewiseMechanism.output_grid`). :func:`shuffledp.local.verify.worst_case_log_ratio` uses it.

Exact sampling
--------------
Every random choice whose probability enters the privacy ratio is made by comparing integers
drawn with ``rng.integers`` (exactly uniform on ``[0, N)`` for any ``N``) against integer
thresholds, or from fair bits of ``rng.bytes``: the realised probabilities are the stated
rationals, not their float roundings. The
``e^eps`` of each mechanism is replaced by a ratio of integers ``H / L < e^eps``
(:func:`exp_ratio_below`); the mechanism is then exactly ``ln(H / L)``-LDP and states that
number, rounded up and capped at the requested eps, as ``effective_epsilon`` (and in
``privacy``). Steps that only mix private laws (the randomized rounding of ``t`` to ``±1`` in
Duchi/Harmony or to the input grid in PM/HM) cannot raise the privacy loss whatever their
probabilities; they are also drawn as integers (``rng.integers(0, 2^53) < m``) and
``probabilities`` uses the realised ``m / 2^53``, so the stated pmf is the law of the code.

Sources: Duchi, Jordan, Wainwright, "Minimax optimal procedures for locally private
estimation", JASA 2018 (as restated in Wang et al., ICDE 2019, Algorithms 1 and 2);
Nguyen, Xiao, Yang, Hui, Shin, Shin, "Collecting and analyzing data from smart device users with
local differential privacy" (Harmony), arXiv:1606.05053, 2016; Wang, Xiao, Yang, Zhao, Hui, Shin,
Shin, Yu, "Collecting and analyzing multidimensional data with local differential privacy",
ICDE 2019 (PM, HM, Algorithm 4). Floating-point attacks on real-valued outputs: Mironov, "On
significance of the least significant bits for differential privacy", CCS 2012.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_positive_int
from .base import MeanOracle, Reports, check_n

__all__ = [
    "DuchiMechanism",
    "Harmony",
    "PiecewiseMechanism",
    "HybridMechanism",
    "DiscretePiecewise",
    "HM_EPSILON_STAR",
    "DEFAULT_GRID_SIZE",
    "duchi_multidim_constants",
    "exp_ratio_below",
]


def gammaln(x: Any) -> Any:
    """``scipy.special.gammaln`` (log |Gamma(x)|); scipy is imported on first use, not with the module."""
    from scipy.special import gammaln as _gammaln

    return _gammaln(x)


#: Threshold eps* of Wang et al. (ICDE'19): HM mixes in PM only when eps > eps*.
HM_EPSILON_STAR = 0.61

#: Number K of output values of PM (and of HM's PM part) per coordinate.
DEFAULT_GRID_SIZE = 4096
#: Smallest and largest K accepted.
MIN_GRID_SIZE, MAX_GRID_SIZE = 16, 1 << 20

#: Integer bounds handed to ``rng.integers`` are at most 2^53, so every count (H, L, N) is an
#: exact float64 and the pmfs returned are correctly rounded quotients of exact integers.
_MAX_DRAW = 1 << 53
#: Snapping probabilities are realised as m / 2^53 (``rng.integers(0, 2^53) < m``).
_SNAP_ONE = 1 << 53
_SNAP_SCALE = float(_SNAP_ONE)
#: HM's mixing probability is a multiple of 2^-32.
_ALPHA_BITS = 32


def exp_ratio_below(epsilon: float, max_numerator: int = _MAX_DRAW, power: int = 1) -> tuple[int, int]:
    """Integers ``(H, L)`` with ``1 <= L < H <= max_numerator`` and ``(H / L)^power < e^epsilon``.

    ``L`` is the largest power of two ``<= 2^52`` with ``L e^{eps / power} <= max_numerator``
    (``L = 1`` when even that is too large) and ``H`` the largest integer ``<= max_numerator``
    with ``(H / L)^power <= e^eps (1 - 2^-50)``, checked in exact rational arithmetic against the
    float ``e^eps``. The ``2^-50`` margin covers the error of the float ``e^eps`` (< 2^-52
    relative), so the bound holds for the real number ``e^eps``; ``ln(H / L)`` is within about
    ``1 / L`` of ``eps / power`` unless ``max_numerator`` caps it.
    """
    power = int(power)
    target = Fraction(math.exp(epsilon)) * (1 - Fraction(1, 1 << 50))
    per = Fraction(math.exp(epsilon / power))
    L = 1 << 52
    while L > 1 and per * L > max_numerator:
        L >>= 1
    H = min(math.floor(per * L) + 1, max_numerator)
    while H > L and Fraction(H, L) ** power > target:
        H -= 1
    if H <= L:
        raise ValidationError(f"epsilon={epsilon!r} is too small: e^eps cannot be separated from 1 by a ratio of "
                              f"integers <= {max_numerator}", parameter="epsilon")
    return H, L


def _log_ratio(H: int, L: int) -> float:
    """ln(H / L) (H - L exact, no cancellation for small eps)."""
    return math.log1p((H - L) / L)


def _effective_epsilon(requested: float, log_ratio: float) -> float:
    """``log_ratio`` rounded up, capped at ``requested`` (the construction guarantees the exact
    ratio is below ``e^requested``, so the cap never understates it)."""
    return min(requested, round_up(log_ratio))


def _threshold53(q: np.ndarray) -> np.ndarray:
    """``x = q 2^53`` (float64, an exact product) for probabilities ``q`` in [0, 1]: the draw
    ``rng.integers(0, 2^53) < x`` (an integer below 2^53 is an exact float) has probability
    exactly ``ceil(x) / 2^53`` (:func:`_realised`)."""
    return np.asarray(q, dtype=np.float64) * _SNAP_SCALE


def _realised(x: np.ndarray) -> np.ndarray:
    """The probability ``ceil(x) / 2^53`` that :func:`_bernoulli_below` realises."""
    return np.ceil(x) / _SNAP_SCALE


def _bernoulli_below(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Independent booleans ``1{U < x}``, ``U`` uniform on the integers [0, 2^53): probability
    exactly ``ceil(x) / 2^53`` for ``x`` in [0, 2^53]."""
    return rng.integers(0, _SNAP_ONE, size=np.shape(x), dtype=np.int64) < x


def _as_dim_vector(f: Any, dim: int, name: str = "f") -> np.ndarray:
    arr = np.asarray(f, dtype=np.float64) if not isinstance(f, np.ndarray) else f.astype(np.float64)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] not in (1, dim)):
        raise ValidationError(f"{name} must be a number or {dim} numbers, got shape {arr.shape}", parameter=name)
    if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > 1.0):
        raise ValidationError(f"{name} must be finite numbers in [-1, 1]", parameter=name)
    return arr


def _result(var: np.ndarray, scalar: bool) -> Any:
    return float(var) if scalar else var


class _SumMeanOracle(MeanOracle):
    """Shared analyzer: the statistic is per-coordinate sums; ``mean = scale * sum / n``.

    Subclasses define ``_scale``, ``effective_epsilon`` and
    ``_unit_variance_coefficients() -> (a, b)`` (and, if they snap inputs to a grid,
    ``_unit_variance_extra(t)`` and ``snap_variance_bound()``) such that one user's contribution
    to the mean estimate (``scale * report``) has variance ``a + b t^2 + extra(t)``.
    """

    _scale: float = 1.0
    #: Largest eps accepted (e^eps must stay a finite float).
    MAX_EPSILON = 700.0
    #: Exact eps of the mechanism as implemented (rounded up), <= epsilon; set by subclasses.
    effective_epsilon: float

    def __init__(self, epsilon: float, dim: int = 1) -> None:
        super().__init__(epsilon, dim)
        if self.epsilon > self.MAX_EPSILON:
            raise ValidationError(f"epsilon must be <= {self.MAX_EPSILON:g} (e^eps must be finite), "
                                  f"got {self.epsilon!r}", parameter="epsilon")

    def _unit_variance_coefficients(self) -> tuple[float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _unit_variance_extra(self, t: np.ndarray) -> np.ndarray:
        """Input-dependent variance term beyond ``a + b t^2`` (0 unless inputs are snapped)."""
        return np.zeros_like(t, dtype=np.float64)

    def snap_variance_bound(self) -> float:
        """``g_max``: the largest value of the extra per-user variance term over ``t`` in [-1, 1]."""
        return 0.0

    def _privacy(self) -> PrivacyStatement:
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(
            self.effective_epsilon, 0.0, "local", "replace_one",
            note=(f"{type(self).__name__}: exact eps of the implemented (integer-ratio, finite-output) "
                  f"mechanism, rounded up; requested {self.epsilon:g}"))

    def _stat_dtype(self) -> type:
        return np.float64

    def _report_bound(self) -> float:
        """Largest |contribution| of one user to one coordinate of the statistic."""
        return 1.0

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        s = self.check_statistic(statistic)
        bound = n * self._report_bound()
        if np.any(np.abs(s) > bound * (1 + 1e-12)):
            raise ValidationError(f"statistic must lie in [-{bound:g}, {bound:g}] for n={n} reports",
                                  parameter="statistic")
        return s

    def check_statistic(self, statistic: Any) -> np.ndarray:
        s = np.asarray(statistic)
        if s.shape != (self.dim,) or not (np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)):
            raise ValidationError(f"statistic must be {self.dim} numbers, got shape {s.shape}", parameter="statistic")
        if not np.all(np.isfinite(s)):
            raise ValidationError("statistic must be finite", parameter="statistic")
        return s.astype(np.float64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        n = check_n(n)
        s = self.check_statistic(statistic)
        m = self._scale * s / n
        a, b = self._unit_variance_coefficients()
        mc = np.clip(m, -1.0, 1.0)
        # conservative: worst of t^2 in [m^2, 1], plus the largest snapping term
        var = (np.maximum(a + b * mc**2, a + b) + self.snap_variance_bound()) / n
        return Estimate(m, np.sqrt(np.maximum(var, 0.0)), n, self.privacy(), "mean",
                        extra={"mechanism": self.name, "dim": self.dim})

    def variance(self, n: int | None = None, value: Any = 0.0) -> Any:
        """Variance of one coordinate's mean estimate when every user holds ``value`` there (exact).

        ``value`` may be a scalar or ``dim`` per-coordinate values; for a heterogeneous population
        pass the RMS value ``sqrt(mean t^2)`` (exact up to ``snap_variance_bound() / n``).
        """
        n = check_n(n)
        scalar = np.ndim(value) == 0
        fv = _as_dim_vector(value, self.dim)
        a, b = self._unit_variance_coefficients()
        return _result((a + b * fv**2 + self._unit_variance_extra(fv)) / n, scalar)

    def _values(self, values: Any) -> np.ndarray:
        """Validated values as an (n, dim) float array."""
        x = self.check_values(values)
        return x.reshape(-1, 1) if self.dim == 1 else x

    def _x(self, x: Any) -> np.ndarray:
        """A single user's input as a (dim,) array."""
        arr = np.asarray(x)
        if self.dim == 1 and arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.shape != (self.dim,):
            raise ValidationError(f"x must be one user's {self.dim} value(s), got shape {arr.shape}", parameter="x")
        from ..core.validation import check_real_values

        return check_real_values(arr, -1.0, 1.0, "x")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, dim={self.dim})"


# ---------------------------------------------------------------------------------------------
# Duchi et al.
# ---------------------------------------------------------------------------------------------

def duchi_multidim_constants(epsilon: float, dim: int, ratio: float | None = None) -> dict[str, float]:
    """Constants of the d-dimensional Duchi mechanism with the even-d fix.

    ``T+ = {w in {±1}^d : sum w > 0}``, ``T- = {sum w <= 0}`` (``w = z * v`` elementwise),
    ``P[z | v] = r / N`` on ``T+`` and ``1 / N`` on ``T-`` with ``N = r |T+| + |T-|``, and
    ``B = N / ((r - 1) binom(d-1, floor(d/2)))``, where ``r`` is ``ratio`` (default ``e^eps``;
    the mechanism passes its integer ratio ``H / L``). Returned with every count divided by ``2^d``
    (so large ``d`` does not overflow): ``frac_plus = |T+| / 2^d``, ``norm = N / 2^d``, ``B``,
    ``p_u = r |T+| / N`` (probability the output lands in ``T+``).
    """
    d = dim
    log2d = d * math.log(2.0)
    if d % 2 == 0:
        frac_tie = math.exp(gammaln(d + 1) - 2 * gammaln(d // 2 + 1) - log2d)  # binom(d, d/2) / 2^d
    else:
        frac_tie = 0.0
    frac_plus = 0.5 - 0.5 * frac_tie
    frac_minus = 1.0 - frac_plus
    e = math.exp(epsilon) if ratio is None else float(ratio)
    rm1 = math.expm1(epsilon) if ratio is None else float(Fraction(ratio) - 1)
    norm = e * frac_plus + frac_minus
    k = d // 2
    log_binom = gammaln(d) - gammaln(k + 1) - gammaln(d - k)  # binom(d-1, floor(d/2))
    B = norm * math.exp(log2d - log_binom) / rm1
    return {"frac_plus": frac_plus, "norm": norm, "B": B, "p_u": e * frac_plus / norm}


class DuchiMechanism(_SumMeanOracle):
    """Duchi et al.'s mean mechanism, 1-D (Wang et al. ICDE'19 Alg. 1) and d-D (Alg. 2).

    The ``e^eps`` of the paper is replaced by the integer ratio ``r = H / L < e^eps``
    (:func:`exp_ratio_below`), and every step is sampled exactly (module docstring).

    1-D: round ``t`` to ``v = ±1`` with ``P[v = 1] = (1 + t) / 2``, keep ``v`` with probability
    ``H / (H + L)`` (else flip) and output ``C z`` with ``C = (H + L) / (H - L)``, i.e.
    ``P[+C] = 1/2 + t (r - 1) / (2 r + 2)``. Unbiased, per-user variance ``C^2 - t^2``, one bit.

    d-D: ``v_j = ±1`` independently with ``P[v_j = 1] = (1 + t_j) / 2``; the output is ``B z`` for a
    sign vector ``z`` drawn with ``P[z | v] ∝ H`` if ``z · v > 0`` and ``∝ L`` if ``z · v <= 0``
    (a uniform sign vector ``w = z v`` is accepted if ``sum w > 0``, else with probability
    ``L / H``; rejected users draw again). For odd ``d`` this is the printed algorithm (``z · v``
    is never 0). For even ``d`` the printed algorithm is not simultaneously unbiased and eps-LDP;
    ties ``z · v = 0`` are put in ``T-`` only and ``B = (r |T+| + |T-|) / ((r - 1) binom(d-1, d/2))``
    (see :func:`duchi_multidim_constants` and docs/local-mean.md), which makes it exactly
    unbiased and exactly ``ln r``-LDP. Per-user variance per coordinate ``B^2 - t_j^2``; ``d`` bits.

    Privacy: exactly ``ln(H / L)``-LDP (``P[z | v]`` takes only the values ``H / N`` and ``L / N``,
    so every mixture over ``v`` stays within a factor ``H / L``); ``effective_epsilon`` is that
    number rounded up, ``<= epsilon``. The rounding of ``t`` to ``v`` has probability
    ``ceil(2^53 (1 + t) / 2) / 2^53`` (so ``E[report] = t`` up to ``2^-52 B``).

    Reports: ``{"z": int8 signs}``, shape ``(n,)`` for ``dim == 1`` and ``(n, dim)`` otherwise.
    Statistic: integer per-coordinate sums of the signs; ``mean = B * sum / n``.
    """

    name = "duchi"

    def __init__(self, epsilon: float, dim: int = 1) -> None:
        super().__init__(epsilon, dim)
        self._H, self._L = exp_ratio_below(self.epsilon)
        self.ratio = self._H / self._L  # exact float: H, L <= 2^53
        c = duchi_multidim_constants(self.epsilon, self.dim, ratio=Fraction(self._H, self._L))
        self.B = c["B"]
        self.p_u = c["p_u"]
        self._norm = c["norm"]
        self._scale = self.B
        self.effective_epsilon = _effective_epsilon(self.epsilon, _log_ratio(self._H, self._L))

    def _unit_variance_coefficients(self) -> tuple[float, float]:
        return self.B**2, -1.0

    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        H, L = self._H, self._L
        if self.dim == 1:
            t = self.check_values(values)
            n = t.shape[0]
            v = _bernoulli_below(_threshold53((1.0 + t) * 0.5), rng)
            keep = rng.integers(0, H + L, size=n, dtype=np.int64) < H
            return {"z": np.where(v == keep, 1, -1).astype(np.int8)}
        t = self._values(values)
        n, d = t.shape
        v = _bernoulli_below(_threshold53((1.0 + t) * 0.5), rng).astype(np.int8) * np.int8(2) - np.int8(1)
        # w = z * v with P[w] ∝ H on T+ (sum w > 0) and ∝ L on T- (sum w <= 0): rejection sampling
        # from uniform sign vectors (accept T+ always, T- with probability L / H); the first round
        # covers every user, later rounds only the rejected ones
        w = self._uniform_signs(n, rng)
        todo = np.flatnonzero(~self._accept(w, rng))
        while todo.size:
            cand = self._uniform_signs(todo.size, rng)
            ok = self._accept(cand, rng)
            w[todo[ok]] = cand[ok]
            todo = todo[~ok]
        # stored coordinate-major (Fortran order), so per-coordinate sums read contiguous memory
        return {"z": np.asfortranarray(w * v)}

    def _uniform_signs(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """``m`` uniform vectors in {±1}^d (int8) from ``m d`` fair bits of ``rng.bytes``."""
        d = self.dim
        bits = np.unpackbits(np.frombuffer(rng.bytes((m * d + 7) // 8), dtype=np.uint8), count=m * d)
        return bits.view(np.int8).reshape(m, d) * np.int8(2) - np.int8(1)

    def _accept(self, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Accept ``w`` if ``sum w > 0``, else with probability exactly ``L / H``."""
        plus = np.matmul(w, np.ones(self.dim, dtype=np.int8), dtype=np.int32) > 0
        return plus | (rng.integers(0, self._H, size=w.shape[0], dtype=np.int64) < self._L)

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"z"}:
            raise ValidationError("Duchi reports must have exactly the field 'z'", parameter="reports")
        z = np.asarray(reports["z"])
        shape_ok = z.ndim == 1 if self.dim == 1 else (z.ndim == 2 and z.shape[1] == self.dim)
        if not shape_ok or not np.issubdtype(z.dtype, np.integer) or not np.all(np.abs(z) == 1):
            raise ValidationError(f"Duchi reports 'z' must be ±1 integers of width {self.dim}", parameter="z")
        return {"z": z.astype(np.int8)}

    def aggregate(self, reports: Reports) -> np.ndarray:
        z = np.asarray(reports["z"])
        if not np.issubdtype(z.dtype, np.integer):
            z = z.astype(np.int64)
        if self.dim == 1:
            return np.array([z.sum(dtype=np.int64)], dtype=np.int64)
        z = z.reshape(z.shape[0], -1)
        if z.flags.f_contiguous:  # randomize's layout: each coordinate is contiguous
            return z.T.sum(axis=1, dtype=np.int64)
        # column sums as a row of ones times z, accumulated in int64 (exact; fast for C-ordered z)
        return np.matmul(np.ones(z.shape[0], dtype=z.dtype), z, dtype=np.int64).reshape(self.dim)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[z | x]`` for each report (the output space is ``{±B}^dim``), with the
        realised rounding probabilities ``P[v_j = 1] = ceil(2^53 (1 + t_j) / 2) / 2^53``."""
        t = self._x(x)
        q = _realised(_threshold53((1.0 + t) * 0.5))  # realised P[v_j = +1]
        z = np.asarray(reports["z"], dtype=np.float64).reshape(-1, self.dim)
        H, L = float(self._H), float(self._L)
        if self.dim == 1:
            # P[+1] = q H / (H + L) + (1 - q) L / (H + L); P[-1] = (1 - q) H / (H + L) + q L / (H + L),
            # each formed directly (``1 - P[+1]`` cancels once L / (H + L) is below ~2^-53)
            p_plus = (L + q[0] * (H - L)) / (H + L)
            p_minus = (H - q[0] * (H - L)) / (H + L)
            return np.where(z[:, 0] > 0, p_plus, p_minus)
        d = self.dim
        # a = number of coordinates where v agrees with z; P[v_j = z_j] = q_j or 1 - q_j.
        agree = np.where(z > 0, q, 1.0 - q)
        dist = np.zeros((z.shape[0], d + 1))
        dist[:, 0] = 1.0
        for j in range(d):  # Poisson-binomial by dynamic programming over coordinates
            pj = agree[:, j:j + 1]
            nxt = dist * (1.0 - pj)
            nxt[:, 1:] += dist[:, :-1] * pj
            dist = nxt
        a = np.arange(d + 1)
        p_plus = dist[:, 2 * a - d > 0].sum(axis=1)  # z . v = 2a - d > 0
        norm_count = self._norm * 2.0**d  # r |T+| + |T-|
        return (self.ratio * p_plus + (1.0 - p_plus)) / norm_count


# ---------------------------------------------------------------------------------------------
# Harmony
# ---------------------------------------------------------------------------------------------

class Harmony(_SumMeanOracle):
    """Harmony's mean estimator (Nguyen et al. 2016).

    Each user samples one coordinate ``j`` uniformly (independent of the data), discretizes
    ``t_j`` to ``x = +1`` with probability ``(1 + t_j) / 2`` (else ``-1``), keeps ``x`` with
    probability ``H / (H + L)`` (else flips it; ``H / L < e^eps`` is the integer ratio of
    :func:`exp_ratio_below`) and sends ``(j, x')``. The analyzer treats the report as the vector
    with ``d C x'`` at ``j`` and 0 elsewhere, ``C = (H + L) / (H - L)``, and averages. Unbiased;
    per-user variance per coordinate ``d C^2 - t_j^2``. ``d = 1`` coincides with the 1-D Duchi
    mechanism.

    Privacy: exactly ``ln(H / L)``-LDP (``j`` is data independent; ``x'`` is randomized response
    with integer-sampled keep probability on a value whose ``+1`` probability lies in [0, 1]);
    ``effective_epsilon`` is that number rounded up, ``<= epsilon``. ``ceil(log2 d) + 1`` bits.

    Reports: ``{"j": int64 coordinate, "s": int8 sign}``. Statistic: integer per-coordinate sums
    of the signs; ``mean = d C * sum / n``.
    """

    name = "harmony"

    def __init__(self, epsilon: float, dim: int = 1) -> None:
        super().__init__(epsilon, dim)
        self._H, self._L = exp_ratio_below(self.epsilon)
        H, L = self._H, self._L
        self.C = float(Fraction(H + L, H - L))
        self.p_keep = H / (H + L)
        self._scale = self.dim * self.C
        self.effective_epsilon = _effective_epsilon(self.epsilon, _log_ratio(H, L))

    def _unit_variance_coefficients(self) -> tuple[float, float]:
        return self.dim * self.C**2, -1.0

    def sign_plus_probability(self, t: Any) -> np.ndarray:
        """Exact ``P[x' = +1]`` for the value ``t`` of the sampled coordinate (array-valued):
        ``q H / (H + L) + (1 - q) L / (H + L)`` with the realised ``q = ceil(2^53 (1 + t)/2) / 2^53``."""
        return self.sign_probability(t, 1)

    def sign_probability(self, t: Any, sign: int) -> np.ndarray:
        """Exact ``P[x' = sign]``, formed directly for either sign (``1 - P[x' = +1]`` would cancel
        once ``L / (H + L)`` is below ~``2^-53``)."""
        q = _realised(_threshold53((1.0 + np.asarray(t, dtype=np.float64)) * 0.5))
        H, L = float(self._H), float(self._L)
        return (L + q * (H - L)) / (H + L) if sign > 0 else (H - q * (H - L)) / (H + L)

    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        t = self._values(values)
        n = t.shape[0]
        j = rng.integers(0, self.dim, size=n) if self.dim > 1 else np.zeros(n, dtype=np.int64)
        tj = t[np.arange(n), j]
        x = _bernoulli_below(_threshold53((1.0 + tj) * 0.5), rng)
        keep = rng.integers(0, self._H + self._L, size=n, dtype=np.int64) < self._H
        s = np.where(x == keep, 1, -1).astype(np.int8)
        return {"j": j.astype(np.int64), "s": s}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"j", "s"}:
            raise ValidationError("Harmony reports must have exactly the fields 'j' and 's'", parameter="reports")
        from ..core.validation import check_int_values

        j = check_int_values(reports["j"], self.dim, "j")
        s = np.asarray(reports["s"])
        if s.shape != j.shape or not np.issubdtype(s.dtype, np.integer) or not np.all(np.abs(s) == 1):
            raise ValidationError("Harmony reports 's' must be ±1 integers, one per report", parameter="s")
        return {"j": j, "s": s.astype(np.int8)}

    def aggregate(self, reports: Reports) -> np.ndarray:
        j = np.asarray(reports["j"], dtype=np.int64)
        s = np.asarray(reports["s"])
        plus = np.bincount(j[s > 0], minlength=self.dim)
        minus = np.bincount(j[s < 0], minlength=self.dim)
        return (plus - minus).astype(np.int64)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[(j, s) | x] = (1/d) P[s | t_j]`` (:meth:`sign_plus_probability`)."""
        t = self._x(x)
        j = np.asarray(reports["j"], dtype=np.int64)
        s = np.asarray(reports["s"])
        return np.where(s > 0, self.sign_probability(t[j], 1), self.sign_probability(t[j], -1)) / self.dim


# ---------------------------------------------------------------------------------------------
# Piecewise and Hybrid mechanisms (Wang et al. ICDE'19), with Algorithm 4 for dim > 1
# ---------------------------------------------------------------------------------------------

class DiscretePiecewise:
    """The Piecewise Mechanism on a fixed grid: one coordinate at budget ``eps / power`` (``ln(H/L)``,
    with ``(H / L)^power < e^eps``: ``power`` coordinates of one user share ``eps``).

    Output grid (independent of the input): ``y_j = a (j - (K - 1) / 2)``, ``j = 0..K-1``.
    Input grid: ``t_s = 2 s / M - 1``, ``s = 0..M`` with ``M = K - w``. For ``t_s`` the output index
    is ``j`` with probability ``H / N`` for ``j`` in the window ``[s, s + w)`` and ``L / N``
    elsewhere, ``N = w H + M L`` (the discrete analogue of PM's high band ``[l(t), r(t)]``).
    A real ``t`` is first rounded to ``t_s`` or ``t_{s+1}`` (its neighbours) without bias.

    With ``a = 2 N / ((H - L) w M)``: ``E[y | t_s] = t_s`` exactly and
    ``E[y^2 | t_s] = A0 + B0 t_s^2``, ``A0 = a^2 (L K (K^2 - 1) + (H - L) w (w^2 - 1)) / (12 N)``,
    ``B0 = a M / 2``; the rounding adds ``B0 Δ^2 λ (1 - λ)`` (``Δ = 2 / M``, ``λ`` the position of
    ``t`` between its two neighbours). ``w`` is ``K / (e^{eps/2} + 1)`` rounded to the side with
    the smaller worst-case variance (the continuous PM puts the fraction ``1 / (z + 1)`` of its
    range in the high band); as ``K -> inf`` the grid tends to the continuous PM.

    Sampling: ``s = s0 + 1{rng.integers(0, 2^53) < 2^53 λ}``, then window or not by
    ``rng.integers(0, N) < w H`` and a uniform cell of the chosen part (``rng.integers(0, w)`` or
    ``rng.integers(0, M)``), so the realised law is exactly the stated one (``N <= 2^53``).
    Privacy: every input grid point's law takes only the values ``H / N`` and ``L / N``, so every
    mixture of them (every real input) has pmf ratio ``<= H / L``.
    """

    def __init__(self, eps: float, grid_size: int, power: int = 1) -> None:
        K = int(grid_size)
        z = math.exp(eps / power / 2.0)
        self.H, self.L = exp_ratio_below(eps, _MAX_DRAW // K, power=power)
        ideal = K / (z + 1.0)
        cands = sorted({min(K - 1, max(1, math.floor(ideal))), min(K - 1, max(1, math.ceil(ideal)))})
        self.K = K
        self.w = min(cands, key=lambda w: self._constants(w)["worst"])
        c = self._constants(self.w)
        self.M = K - self.w
        self.N = c["N"]
        self.a = float(c["a"])
        self.A0 = float(c["A0"])
        self.B0 = float(c["B0"])
        self.g_max = float(c["g_max"])
        self.log_ratio = _log_ratio(self.H, self.L)
        self.grid = self.a * (np.arange(K, dtype=np.float64) - (K - 1) / 2.0)
        self._pH = self.H / self.N  # exact quotients of integers <= 2^53, correctly rounded
        self._pL = self.L / self.N

    def _constants(self, w: int) -> dict[str, Any]:
        K, H, L = self.K, self.H, self.L
        M = K - w
        N = w * H + M * L
        a = Fraction(2 * N, (H - L) * w * M)
        A0 = a * a * (L * K * (K * K - 1) + (H - L) * w * (w * w - 1)) / (12 * N)
        B0 = a * M / 2
        g_max = B0 / (M * M)  # B0 Δ^2 / 4
        return {"N": N, "a": a, "A0": A0, "B0": B0, "g_max": g_max, "worst": A0 + B0 - 1 + g_max}

    # --- input rounding --------------------------------------------------------------------
    def _snap(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(s0, lam): lower neighbour index (float, integral) and position in [0, 1] of ``t``."""
        pos = (np.asarray(t, dtype=np.float64) + 1.0) * (self.M * 0.5)
        s0 = np.minimum(np.floor(pos), self.M - 1)
        return s0, pos - s0  # pos - s0 is exact (Sterbenz)

    # --- sampler ---------------------------------------------------------------------------
    def sample_index(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Grid indices (int64, shape of ``t``) for inputs ``t``."""
        s0, lam = self._snap(t)
        s = s0.astype(np.int64)
        s += _bernoulli_below(_threshold53(lam), rng)  # upper neighbour: prob. ceil(2^53 lam) / 2^53
        shape = np.shape(t)
        # window (probability w H / N, then a uniform cell of it) or outside (M L / N, then a
        # uniform cell among the M others): each cell's probability is H / N or L / N exactly
        inside = rng.integers(0, self.N, size=shape, dtype=np.int64) < self.w * self.H
        cell_in = rng.integers(0, self.w, size=shape, dtype=np.int64)
        r = rng.integers(0, self.M, size=shape, dtype=np.int64)
        r += self.w * (r >= s)
        return np.where(inside, s + cell_in, r)

    def sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Grid values for inputs ``t`` (float64 from the fixed table ``grid``)."""
        return self.grid[self.sample_index(t, rng)]

    # --- law -------------------------------------------------------------------------------
    def index_of(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index, on_grid): the grid index of each ``y`` and whether ``y`` is exactly that grid value."""
        y = np.asarray(y, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            jf = np.rint(y / self.a + (self.K - 1) / 2.0)
        ok = np.isfinite(jf) & (jf >= 0) & (jf <= self.K - 1)
        j = np.where(ok, jf, 0).astype(np.int64)
        return j, ok & (self.grid[j] == y)

    def pmf(self, y: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Exact ``Pr[y | t]`` (broadcast); 0 off the grid."""
        j, ok = self.index_of(y)
        s0, lam = self._snap(t)
        lam = _realised(_threshold53(lam))

        def at(s: np.ndarray) -> np.ndarray:
            return np.where((j >= s) & (j < s + self.w), self._pH, self._pL)

        return np.where(ok, (1.0 - lam) * at(s0) + lam * at(s0 + 1), 0.0)

    def snap_variance(self, t: np.ndarray) -> np.ndarray:
        """The rounding term ``B0 Δ^2 λ (1 - λ)`` of the variance at ``t``."""
        _, lam = self._snap(t)
        return self.B0 * (2.0 / self.M) ** 2 * lam * (1.0 - lam)


def _check_grid_size(grid_size: Any) -> int:
    K = check_positive_int(grid_size, "grid_size")
    if not MIN_GRID_SIZE <= K <= MAX_GRID_SIZE:
        raise ValidationError(f"grid_size must be an integer in [{MIN_GRID_SIZE}, {MAX_GRID_SIZE}], got {K}",
                              parameter="grid_size")
    return K


class PiecewiseMechanism(_SumMeanOracle):
    """Piecewise Mechanism (PM) of Wang et al. (ICDE 2019, Alg. 3; Alg. 4 for ``dim > 1``), on a
    fixed output grid.

    1-D, continuous original: ``z = e^{eps/2}``, ``C = (z + 1) / (z - 1)``,
    ``l(t) = (C + 1) t / 2 - (C - 1) / 2``, ``r(t) = l(t) + C - 1``; with probability ``z / (z + 1)``
    output ``U[l(t), r(t)]``, else a uniform point of ``[-C, l(t)) ∪ (r(t), C]``. Its float
    outputs ``l(t) + (C - 1) u`` take input-dependent bit patterns (a report can be impossible
    under another input: infinite privacy loss), so this class releases the discrete analogue
    :class:`DiscretePiecewise` instead: ``K = grid_size`` fixed output values ``y_j`` spanning
    ``[-C', C']`` (``C' = self.C``, within ``O(1/K)`` of ``C``), a window of ``w ≈ K / (z + 1)``
    cells with pmf ratio ``H / L < e^eps`` (integers) to the rest, the input rounded without bias
    to ``M + 1 = K - w + 1`` input grid points. Unbiased; per-user variance
    ``A0 + (B0 - 1) t^2 + B0 Δ^2 λ(t)(1 - λ(t))`` (see :class:`DiscretePiecewise`), which tends
    to PM's ``t^2 / (z - 1) + (z + 3) / (3 (z - 1)^2)`` as ``K`` grows (relative difference
    ``O(1 / w) = O(e^{eps/2} / K)``; the grid version is slightly *less* noisy).

    ``dim > 1`` (Alg. 4): ``k`` coordinates (default :meth:`best_k`, the ``k`` with the smallest
    worst-case variance, near Wang et al.'s ``floor(eps / 2.5)``; ``k=`` overrides it and
    :attr:`k_chosen` says which happened) are sampled uniformly without replacement, each is perturbed at budget ``eps / k``, and
    the estimate scales by ``dim / k``. Per-user variance per coordinate
    ``(dim/k) (Var_{eps/k}(t_j) + t_j^2) - t_j^2``.

    Privacy: exactly ``k ln(H / L)``-LDP with ``(H / L)^k < e^eps`` (pmf ratio ``<= H / L`` per
    sampled coordinate, ``k`` of them; the sampled set is data independent);
    ``effective_epsilon`` is that number rounded up, ``<= epsilon``.

    Reports: ``dim == 1``: ``{"t": float64 (n,)}``; ``dim > 1``: ``{"j": int64 (n, k)`` sampled
    coordinates, ``"t": float64 (n, k)`` unscaled outputs ``}``; every ``t`` is a value of
    :meth:`output_grid` (``validate_reports`` rejects anything else). Statistic: float
    per-coordinate sums of the outputs; ``mean = (dim / k) * sum / n``.
    """

    name = "pm"

    def __init__(self, epsilon: float, dim: int = 1, k: int | None = None,
                 grid_size: int = DEFAULT_GRID_SIZE) -> None:
        super().__init__(epsilon, dim)
        #: whether ``k`` was chosen by the mechanism (``k=None``) rather than given
        self.k_chosen = k is None
        if k is None:
            k = self.best_k(self.epsilon, self.dim, grid_size)
        self.k = check_positive_int(k, "k")
        if self.k > self.dim:
            raise ValidationError(f"k must be <= dim = {self.dim}, got {self.k}", parameter="k")
        self.grid_size = _check_grid_size(grid_size)
        self.eps_coord = self.epsilon / self.k
        self._scale = self.dim / self.k
        self._build()
        self.C = self._output_bound()
        self.effective_epsilon = _effective_epsilon(self.epsilon, self.k * self._coord_log_ratio())

    @classmethod
    def best_k(cls, epsilon: float, dim: int, grid_size: int = DEFAULT_GRID_SIZE) -> int:
        """The number of sampled coordinates with the smallest :meth:`worst_variance`.

        Wang et al.'s ``k = max(1, min(dim, floor(eps / 2.5)))`` approximates the minimiser of the
        worst-case variance of the continuous mechanism; this compares the mechanisms as built for
        every ``k`` up to ``min(dim, ceil(eps))`` (a per-coordinate budget below 1 never wins):
        at ``eps = 4`` PM's worst-case variance is 12 % smaller with ``k = 2`` than with the
        formula's ``k = 1``, HM's 21 %.
        """
        top = max(1, min(int(dim), math.ceil(epsilon)))
        best, best_v = 1, math.inf
        for k in range(1, top + 1):  # a handful of candidates (at most ceil(eps))
            v = cls(epsilon, dim, k=k, grid_size=grid_size).worst_variance()
            if v < best_v:
                best, best_v = k, v
        return best

    def _report_bound(self) -> float:
        return self.C

    # --- the per-coordinate mechanism (overridden by HM) ---------------------------------------
    def _build(self) -> None:
        self._pm = DiscretePiecewise(self.epsilon, self.grid_size, power=self.k)

    def _coord_log_ratio(self) -> float:
        return self._pm.log_ratio

    def _output_bound(self) -> float:
        return float(self._pm.grid[-1])

    def output_grid(self) -> np.ndarray:
        """The sorted finite set of values every report entry ``t`` takes, whatever the input."""
        return self._pm.grid.copy()

    def _coord_sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._pm.sample(t, rng)

    def _coord_pmf(self, y: np.ndarray, t: np.ndarray) -> np.ndarray:
        return self._pm.pmf(y, t)

    def _coord_valid(self, y: np.ndarray) -> np.ndarray:
        return self._pm.index_of(y)[1]

    def _coord_variance_coefficients(self) -> tuple[float, float]:
        return self._pm.A0, self._pm.B0 - 1.0

    def _coord_snap_variance(self, t: np.ndarray) -> np.ndarray:
        return self._pm.snap_variance(t)

    def _coord_snap_variance_max(self) -> float:
        return self._pm.g_max

    # --- shared -------------------------------------------------------------------------------
    def _unit_variance_coefficients(self) -> tuple[float, float]:
        a, b = self._coord_variance_coefficients()
        r = self.dim / self.k
        return r * a, r * (b + 1.0) - 1.0

    def _unit_variance_extra(self, t: np.ndarray) -> np.ndarray:
        return (self.dim / self.k) * self._coord_snap_variance(t)

    def snap_variance_bound(self) -> float:
        return (self.dim / self.k) * self._coord_snap_variance_max()

    def _sample_coordinates(self, n: int, rng: np.random.Generator) -> np.ndarray:
        d, k = self.dim, self.k
        if k == 1:
            return rng.integers(0, d, size=(n, 1))
        if k == d:
            return np.broadcast_to(np.arange(d), (n, d)).copy()
        # uniform k-subset per user: first k entries of an exact uniform permutation (Fisher-Yates
        # with bounded integer draws), so the stated 1 / binom(d, k) is the realised law
        perm = rng.permuted(np.broadcast_to(np.arange(d, dtype=np.int64), (n, d)), axis=1)
        return np.ascontiguousarray(perm[:, :k])

    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        if self.dim == 1:
            t = self.check_values(values)
            return {"t": self._coord_sample(t, rng)}
        t = self._values(values)
        n = t.shape[0]
        j = self._sample_coordinates(n, rng)
        tj = np.take_along_axis(t, j, axis=1)
        return {"j": j.astype(np.int64), "t": self._coord_sample(tj, rng)}

    def validate_reports(self, reports: Reports) -> Reports:
        fields = {"t"} if self.dim == 1 else {"j", "t"}
        if set(reports) != fields:
            raise ValidationError(f"{self.name} reports must have exactly the fields {sorted(fields)}",
                                  parameter="reports")
        t = np.asarray(reports["t"])
        want = (t.shape[0],) if self.dim == 1 else (t.shape[0], self.k)
        if t.ndim < 1 or t.shape != want or not np.issubdtype(t.dtype, np.floating) \
                or not np.all(self._coord_valid(t)):
            raise ValidationError(f"{self.name} reports 't' must be values of the mechanism's output grid "
                                  f"(output_grid(), {self.grid_size} values in [-C, C]) of shape {want}",
                                  parameter="t")
        out = {"t": t.astype(np.float64)}
        if self.dim > 1:
            j = np.asarray(reports["j"])
            in_range = j.size == 0 or (np.issubdtype(j.dtype, np.integer) and j.min() >= 0 and j.max() < self.dim)
            if j.shape != want or not np.issubdtype(j.dtype, np.integer) or not in_range:
                raise ValidationError(f"reports 'j' must be integers in [0, {self.dim}) of shape {want}", parameter="j")
            if self.k > 1 and np.any(np.diff(np.sort(j, axis=1), axis=1) == 0):
                raise ValidationError("reports 'j' must hold distinct coordinates per user", parameter="j")
            out["j"] = j.astype(np.int64)
        return out

    def aggregate(self, reports: Reports) -> np.ndarray:
        t = np.asarray(reports["t"], dtype=np.float64)
        if self.dim == 1:
            return np.array([t.sum()], dtype=np.float64)
        j = np.asarray(reports["j"], dtype=np.int64)
        return np.bincount(j.ravel(), weights=t.ravel(), minlength=self.dim).astype(np.float64)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact pmf of each report: the product of the ``k`` coordinates' grid pmfs, times the
        ``1 / binom(dim, k)`` probability of the sampled coordinate set (0 for values off the grid)."""
        xv = self._x(x)
        t = np.asarray(reports["t"], dtype=np.float64)
        if self.dim == 1:
            return self._coord_pmf(t, np.full(t.shape, xv[0]))
        j = np.asarray(reports["j"], dtype=np.int64)
        pmf = self._coord_pmf(t, xv[j]).prod(axis=1)
        log_sets = gammaln(self.dim + 1) - gammaln(self.k + 1) - gammaln(self.dim - self.k + 1)
        return pmf * math.exp(-log_sets)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, dim={self.dim}, k={self.k})"


class HybridMechanism(PiecewiseMechanism):
    """Hybrid Mechanism (HM) of Wang et al. (ICDE 2019); Alg. 4 for ``dim > 1``.

    Per coordinate, with budget ``e = eps / k``: with probability ``alpha`` run the grid PM of
    :class:`PiecewiseMechanism` at ``e``, otherwise the 1-D Duchi mechanism at ``e`` (integer
    ratio ``H_D / L_D``, outputs ``±C_D``, ``C_D = (H_D + L_D) / (H_D - L_D)``). ``alpha`` is
    ``1 - e^{-e/2}`` if ``e > eps* = 0.61`` (else 0) rounded to a multiple of ``2^-32`` and drawn
    by an integer comparison. Both parts are unbiased, so HM is; per-user variance
    ``alpha (Var_PM(t) + t^2) + (1 - alpha) C_D^2 - t^2``. For ``e > eps*`` the ``t^2`` terms
    cancel up to the grid (``O(1/K)``), as in the paper.

    Output set (independent of the input): the PM grid (when ``alpha > 0``) and the two atoms
    ``±C_D`` (:meth:`output_grid`). :meth:`probabilities` returns the exact pmf
    ``alpha P_PM(y) + (1 - alpha) P_Duchi(y)`` (both terms where an atom coincides with a grid
    value). Each part has pmf ratio at most ``e^e`` across inputs, so HM is exactly
    ``k max(ln(H/L), ln(H_D/L_D))``-LDP (``effective_epsilon``, ``<= eps``).

    Reports and statistic: as :class:`PiecewiseMechanism`.
    """

    name = "hm"

    def _build(self) -> None:
        e = self.eps_coord
        alpha = -math.expm1(-e / 2.0) if e > HM_EPSILON_STAR else 0.0
        self._alpha_num = int(round(alpha * (1 << _ALPHA_BITS)))
        self.alpha = self._alpha_num / (1 << _ALPHA_BITS)
        self._pm = DiscretePiecewise(self.epsilon, self.grid_size, power=self.k) if self._alpha_num else None
        self._HD, self._LD = exp_ratio_below(self.epsilon, power=self.k)
        self.C_duchi = float(Fraction(self._HD + self._LD, self._HD - self._LD))  # Duchi-1D outputs ±C_D

    def _coord_log_ratio(self) -> float:
        d = _log_ratio(self._HD, self._LD)
        return d if self._pm is None else max(d, self._pm.log_ratio)

    def _output_bound(self) -> float:
        return self.C_duchi if self._pm is None else max(float(self._pm.grid[-1]), self.C_duchi)

    def output_grid(self) -> np.ndarray:
        atoms = np.array([-self.C_duchi, self.C_duchi])
        return atoms if self._pm is None else np.unique(np.concatenate([self._pm.grid, atoms]))

    def _duchi_plus(self, t: np.ndarray, sign: int = 1) -> np.ndarray:
        """Realised P[sign C_D | t] of the Duchi part (each sign formed directly: no cancellation)."""
        q = _realised(_threshold53((1.0 + np.asarray(t, dtype=np.float64)) * 0.5))
        H, L = float(self._HD), float(self._LD)
        return (L + q * (H - L)) / (H + L) if sign > 0 else (H - q * (H - L)) / (H + L)

    def _coord_sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        v = _bernoulli_below(_threshold53((1.0 + t) * 0.5), rng)
        keep = rng.integers(0, self._HD + self._LD, size=t.shape, dtype=np.int64) < self._HD
        duchi = np.where(v == keep, self.C_duchi, -self.C_duchi)
        if self._pm is None:
            return duchi
        use_pm = rng.integers(0, 1 << _ALPHA_BITS, size=t.shape, dtype=np.int64) < self._alpha_num
        return np.where(use_pm, self._pm.sample(t, rng), duchi)

    def _coord_pmf(self, y: np.ndarray, t: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        p_plus = self._duchi_plus(t)
        duchi = np.where(y == self.C_duchi, p_plus, 0.0) + np.where(y == -self.C_duchi, self._duchi_plus(t, -1), 0.0)
        if self._pm is None:
            return duchi
        return (1.0 - self.alpha) * duchi + self.alpha * self._pm.pmf(y, t)

    def _coord_valid(self, y: np.ndarray) -> np.ndarray:
        atom = np.abs(np.asarray(y, dtype=np.float64)) == self.C_duchi
        return atom if self._pm is None else atom | self._pm.index_of(y)[1]

    def _coord_variance_coefficients(self) -> tuple[float, float]:
        a_d = self.C_duchi**2
        if self._pm is None:
            return a_d, -1.0
        al = self.alpha
        return al * self._pm.A0 + (1.0 - al) * a_d, al * self._pm.B0 - 1.0

    def _coord_snap_variance(self, t: np.ndarray) -> np.ndarray:
        if self._pm is None:
            return np.zeros_like(np.asarray(t, dtype=np.float64))
        return self.alpha * self._pm.snap_variance(t)

    def _coord_snap_variance_max(self) -> float:
        return 0.0 if self._pm is None else self.alpha * self._pm.g_max
