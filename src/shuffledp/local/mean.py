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
  ``a + b t^2``, so it is evaluated at both ends of ``t^2 in [m^2, 1]`` (``m`` the clipped
  estimate; every population with mean ``m`` has ``mean(t^2)`` in that range) and the larger
  value is used.
* ``variance(n, f)`` is the exact variance of one coordinate's mean estimate when **every**
  user holds the value ``f`` in that coordinate (``f`` may be an array of per-coordinate values).
  Because the per-user variance is ``a + b t^2``, a heterogeneous population is covered exactly
  by passing ``f = sqrt(mean_i t_i^2)`` (the RMS of the users' values in that coordinate).
* ``probabilities(reports, x)``: the exact pmf of each report (Duchi, Harmony), or its density
  (PM; HM w.r.t. Lebesgue measure plus counting measure on the two Duchi atoms ``±C``), for a
  single user holding ``x``. :func:`shuffledp.local.verify.worst_case_log_ratio` uses it.

Sources: Duchi, Jordan, Wainwright, "Minimax optimal procedures for locally private
estimation", JASA 2018 (as restated in Wang et al., ICDE 2019, Algorithms 1 and 2);
Nguyen, Xiao, Yang, Hui, Shin, Shin, "Collecting and analyzing data from smart device users with
local differential privacy" (Harmony), arXiv:1606.05053, 2016; Wang, Xiao, Yang, Zhao, Hui, Shin,
Shin, Yu, "Collecting and analyzing multidimensional data with local differential privacy",
ICDE 2019 (PM, HM, Algorithm 4).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import gammaln

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.validation import check_positive_int
from .base import MeanOracle, Reports, check_n

__all__ = [
    "DuchiMechanism",
    "Harmony",
    "PiecewiseMechanism",
    "HybridMechanism",
    "HM_EPSILON_STAR",
    "duchi_multidim_constants",
]

#: Threshold eps* of Wang et al. (ICDE'19): HM mixes in PM only when eps > eps*.
HM_EPSILON_STAR = 0.61


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

    Subclasses define ``_scale`` and ``_unit_variance_coefficients() -> (a, b)`` such that one
    user's contribution to the mean estimate (``scale * report``) has variance ``a + b t^2``.
    """

    _scale: float = 1.0
    #: Largest eps accepted (e^eps must stay a finite float).
    MAX_EPSILON = 700.0

    def __init__(self, epsilon: float, dim: int = 1) -> None:
        super().__init__(epsilon, dim)
        if self.epsilon > self.MAX_EPSILON:
            raise ValidationError(f"epsilon must be <= {self.MAX_EPSILON:g} (e^eps must be finite), "
                                  f"got {self.epsilon!r}", parameter="epsilon")

    def _unit_variance_coefficients(self) -> tuple[float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

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
        var = np.maximum(a + b * mc**2, a + b) / n  # conservative: worst of t^2 in [m^2, 1]
        return Estimate(m, np.sqrt(np.maximum(var, 0.0)), n, self.privacy, "mean",
                        extra={"mechanism": self.name, "dim": self.dim})

    def variance(self, n: int, f: Any = 0.0) -> Any:
        """Variance of one coordinate's mean estimate when every user holds ``f`` there.

        ``f`` may be a scalar or ``dim`` per-coordinate values; for a heterogeneous population
        pass the RMS value ``sqrt(mean t^2)`` (the per-user variance is ``a + b t^2``).
        """
        n = check_n(n)
        scalar = np.ndim(f) == 0
        fv = _as_dim_vector(f, self.dim)
        a, b = self._unit_variance_coefficients()
        return _result((a + b * fv**2) / n, scalar)

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

def duchi_multidim_constants(epsilon: float, dim: int) -> dict[str, float]:
    """Constants of the d-dimensional Duchi mechanism with the even-d fix.

    ``T+ = {w in {±1}^d : sum w > 0}``, ``T- = {sum w <= 0}`` (``w = z * v`` elementwise),
    ``P[z | v] = e^eps / N`` on ``T+`` and ``1 / N`` on ``T-`` with ``N = e^eps |T+| + |T-|``, and
    ``B = N / ((e^eps - 1) binom(d-1, floor(d/2)))``. Returned with every count divided by ``2^d``
    (so large ``d`` does not overflow): ``frac_plus = |T+| / 2^d``, ``norm = N / 2^d``, ``B``,
    ``p_u = e^eps |T+| / N`` (probability the output lands in ``T+``).
    """
    d = dim
    log2d = d * math.log(2.0)
    if d % 2 == 0:
        frac_tie = math.exp(gammaln(d + 1) - 2 * gammaln(d // 2 + 1) - log2d)  # binom(d, d/2) / 2^d
    else:
        frac_tie = 0.0
    frac_plus = 0.5 - 0.5 * frac_tie
    frac_minus = 1.0 - frac_plus
    e = math.exp(epsilon)
    norm = e * frac_plus + frac_minus
    k = d // 2
    log_binom = gammaln(d) - gammaln(k + 1) - gammaln(d - k)  # binom(d-1, floor(d/2))
    B = norm * math.exp(log2d - log_binom) / math.expm1(epsilon)
    return {"frac_plus": frac_plus, "norm": norm, "B": B, "p_u": e * frac_plus / norm}


class DuchiMechanism(_SumMeanOracle):
    """Duchi et al.'s mean mechanism, 1-D (Wang et al. ICDE'19 Alg. 1) and d-D (Alg. 2).

    1-D: with ``C = (e^eps + 1) / (e^eps - 1)`` output ``+C`` with probability
    ``1/2 + t (e^eps - 1) / (2 e^eps + 2)`` and ``-C`` otherwise. Unbiased, per-user variance
    ``C^2 - t^2``, one bit.

    d-D: ``v_j = ±1`` independently with ``P[v_j = 1] = (1 + t_j) / 2``; the output is ``B z`` for a
    sign vector ``z`` drawn with ``P[z | v] ∝ e^eps`` if ``z · v > 0`` and ``∝ 1`` if ``z · v <= 0``.
    For odd ``d`` this is the printed algorithm (``z · v`` is never 0). For even ``d`` the
    printed algorithm is not simultaneously unbiased and eps-LDP; ties ``z · v = 0`` are put in
    ``T-`` only and ``B = (e^eps |T+| + |T-|) / ((e^eps - 1) binom(d-1, d/2))`` (see
    :func:`duchi_multidim_constants` and docs/local-mean.md), which makes it exactly unbiased and
    exactly eps-LDP. Per-user variance per coordinate ``B^2 - t_j^2``; ``d`` bits.

    Privacy: eps-LDP exactly (``P[z | v]`` takes only the values ``e^eps / N`` and ``1 / N``, so
    every mixture over ``v`` stays within a factor ``e^eps``).

    Reports: ``{"z": int8 signs}``, shape ``(n,)`` for ``dim == 1`` and ``(n, dim)`` otherwise.
    Statistic: integer per-coordinate sums of the signs; ``mean = B * sum / n``.
    """

    name = "duchi"

    def __init__(self, epsilon: float, dim: int = 1) -> None:
        super().__init__(epsilon, dim)
        c = duchi_multidim_constants(self.epsilon, self.dim)
        self.B = c["B"]
        self.p_u = c["p_u"]
        self._norm = c["norm"]
        self._scale = self.B
        if self.dim > 1:
            # distribution of the number m of +1 entries of w = z * v (w is uniform given m):
            # weight binom(d, m) * (e^eps if 2m > d else 1)
            m = np.arange(self.dim + 1)
            logw = gammaln(self.dim + 1) - gammaln(m + 1) - gammaln(self.dim - m + 1)
            logw = logw + np.where(2 * m > self.dim, self.epsilon, 0.0)
            w = np.exp(logw - logw.max())
            self._m_cdf = np.cumsum(w / w.sum())
            self._m_cdf[-1] = 1.0

    def _unit_variance_coefficients(self) -> tuple[float, float]:
        return self.B**2, -1.0

    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        if self.dim == 1:
            t = self.check_values(values)
            e = math.exp(self.epsilon)
            p_plus = 0.5 + t * ((e - 1.0) / (2.0 * e + 2.0))
            z = np.where(rng.random(t.shape[0]) < p_plus, 1, -1).astype(np.int8)
            return {"z": z}
        t = self._values(values)
        n, d = t.shape
        v = (rng.random((n, d)) < (1.0 + t) * 0.5).astype(np.int8) * np.int8(2) - np.int8(1)
        m = np.searchsorted(self._m_cdf, rng.random(n), side="right").astype(np.int64)
        need = np.minimum(m, d)
        # w: uniformly random sign vector with exactly m (+1)s, by sequential selection sampling
        # (coordinate j is +1 with probability need / (d - j)); stored coordinate-major for speed
        w = np.empty((d, n), dtype=np.int8)
        u = rng.random((d, n))
        for j in range(d):  # loop over coordinates, vectorized over users
            take = u[j] * (d - j) < need
            w[j] = take
            need -= take
        z = (w.T * np.int8(2) - np.int8(1)) * v
        return {"z": z}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"z"}:
            raise ValidationError("Duchi reports must have exactly the field 'z'", parameter="reports")
        z = np.asarray(reports["z"])
        shape_ok = z.ndim == 1 if self.dim == 1 else (z.ndim == 2 and z.shape[1] == self.dim)
        if not shape_ok or not np.issubdtype(z.dtype, np.integer) or not np.all(np.abs(z) == 1):
            raise ValidationError(f"Duchi reports 'z' must be ±1 integers of width {self.dim}", parameter="z")
        return {"z": z.astype(np.int8)}

    def aggregate(self, reports: Reports) -> np.ndarray:
        z = np.asarray(reports["z"], dtype=np.int64)
        return z.reshape(z.shape[0], -1).sum(axis=0).astype(np.int64).reshape(self.dim)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[z | x]`` for each report (the output space is ``{±B}^dim``)."""
        t = self._x(x)
        z = np.asarray(reports["z"], dtype=np.float64).reshape(-1, self.dim)
        e = math.exp(self.epsilon)
        if self.dim == 1:
            return 0.5 + z[:, 0] * t[0] * ((e - 1.0) / (2.0 * e + 2.0))
        d = self.dim
        # a = number of coordinates where v agrees with z; P[v_j = z_j] = (1 + z_j t_j) / 2.
        agree = (1.0 + z * t) * 0.5
        dist = np.zeros((z.shape[0], d + 1))
        dist[:, 0] = 1.0
        for j in range(d):  # Poisson-binomial by dynamic programming over coordinates
            pj = agree[:, j:j + 1]
            nxt = dist * (1.0 - pj)
            nxt[:, 1:] += dist[:, :-1] * pj
            dist = nxt
        a = np.arange(d + 1)
        p_plus = dist[:, 2 * a - d > 0].sum(axis=1)  # z . v = 2a - d > 0
        norm_count = self._norm * 2.0**d  # e^eps |T+| + |T-|
        return (e * p_plus + (1.0 - p_plus)) / norm_count


# ---------------------------------------------------------------------------------------------
# Harmony
# ---------------------------------------------------------------------------------------------

class Harmony(_SumMeanOracle):
    """Harmony's mean estimator (Nguyen et al. 2016).

    Each user samples one coordinate ``j`` uniformly (independent of the data), discretizes
    ``t_j`` to ``x = +1`` with probability ``(1 + t_j) / 2`` (else ``-1``), keeps ``x`` with
    probability ``e^eps / (e^eps + 1)`` (else flips it) and sends ``(j, x')``. The analyzer
    treats the report as the vector with ``d C x'`` at ``j`` and 0 elsewhere,
    ``C = (e^eps + 1) / (e^eps - 1)``, and averages. Unbiased; per-user variance per coordinate
    ``d C^2 - t_j^2``. ``d = 1`` coincides with the 1-D Duchi mechanism.

    Privacy: eps-LDP exactly (``j`` is data independent; ``x'`` is randomized response on a
    value whose ``+1`` probability lies in [0, 1]). ``ceil(log2 d) + 1`` bits.

    Reports: ``{"j": int64 coordinate, "s": int8 sign}``. Statistic: integer per-coordinate sums
    of the signs; ``mean = d C * sum / n``.
    """

    name = "harmony"

    def __init__(self, epsilon: float, dim: int = 1) -> None:
        super().__init__(epsilon, dim)
        e = math.exp(self.epsilon)
        self.C = (e + 1.0) / (e - 1.0)
        self.p_keep = e / (e + 1.0)
        self._scale = self.dim * self.C

    def _unit_variance_coefficients(self) -> tuple[float, float]:
        return self.dim * self.C**2, -1.0

    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        t = self._values(values)
        n = t.shape[0]
        j = rng.integers(0, self.dim, size=n) if self.dim > 1 else np.zeros(n, dtype=np.int64)
        tj = t[np.arange(n), j]
        e = math.exp(self.epsilon)
        # P[x' = +1] = (1 + t)/2 * p + (1 - t)/2 * (1 - p) = 1/2 + t (e - 1) / (2 (e + 1))
        p_plus = 0.5 + tj * ((e - 1.0) / (2.0 * e + 2.0))
        s = np.where(rng.random(n) < p_plus, 1, -1).astype(np.int8)
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
        """Exact ``Pr[(j, s) | x] = (1/d) (1/2 + s t_j (e^eps - 1) / (2 e^eps + 2))``."""
        t = self._x(x)
        j = np.asarray(reports["j"], dtype=np.int64)
        s = np.asarray(reports["s"], dtype=np.float64)
        e = math.exp(self.epsilon)
        return (0.5 + s * t[j] * ((e - 1.0) / (2.0 * e + 2.0))) / self.dim


# ---------------------------------------------------------------------------------------------
# Piecewise and Hybrid mechanisms (Wang et al. ICDE'19), with Algorithm 4 for dim > 1
# ---------------------------------------------------------------------------------------------

def _pm_constants(eps: float) -> tuple[float, float]:
    """(z, C) of PM at budget eps: z = e^{eps/2}, C = (z + 1) / (z - 1)."""
    z = math.exp(eps / 2.0)
    return z, (z + 1.0) / math.expm1(eps / 2.0)


def _pm_sample(t: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """PM(eps) applied elementwise to ``t`` (any shape)."""
    z, C = _pm_constants(eps)
    left = (C + 1.0) * 0.5 * t - (C - 1.0) * 0.5
    u1 = rng.random(t.shape)
    u2 = rng.random(t.shape)
    centre = u1 < z / (z + 1.0)
    inner = left + (C - 1.0) * u2
    # outside [-C, l) ∪ (r, C], total length C + 1, uniform: position s in [0, C + 1)
    s = (C + 1.0) * u2
    left_len = left + C
    outer = np.where(s < left_len, s - C, s - left_len + left + (C - 1.0))
    return np.where(centre, inner, outer)


def _pm_density(y: np.ndarray, t: np.ndarray, eps: float) -> np.ndarray:
    """Density of PM(eps) at ``y`` for input ``t`` (broadcast)."""
    z, C = _pm_constants(eps)
    p = z * (z - 1.0) / (2.0 * (z + 1.0))  # (e^eps - e^{eps/2}) / (2 e^{eps/2} + 2)
    left = (C + 1.0) * 0.5 * t - (C - 1.0) * 0.5
    right = left + C - 1.0
    dens = np.where((y >= left) & (y <= right), p, p / (z * z))
    return np.where(np.abs(y) <= C, dens, 0.0)


def _pm_variance_coefficients(eps: float) -> tuple[float, float]:
    """Var_PM(t) = a + b t^2 with a = (z + 3) / (3 (z - 1)^2), b = 1 / (z - 1)."""
    zm1 = math.expm1(eps / 2.0)
    z = zm1 + 1.0
    return (z + 3.0) / (3.0 * zm1**2), 1.0 / zm1


def _duchi1_constants(eps: float) -> tuple[float, float]:
    """(C, slope): Duchi-1D outputs ±C with P[+C] = 1/2 + slope * t."""
    em1 = math.expm1(eps)
    return (em1 + 2.0) / em1, em1 / (2.0 * (em1 + 2.0))


class PiecewiseMechanism(_SumMeanOracle):
    """Piecewise Mechanism (PM) of Wang et al. (ICDE 2019, Alg. 3; Alg. 4 for ``dim > 1``).

    1-D: ``z = e^{eps/2}``, ``C = (z + 1) / (z - 1)``, ``l(t) = (C + 1) t / 2 - (C - 1) / 2``,
    ``r(t) = l(t) + C - 1``. With probability ``z / (z + 1)`` output ``U[l(t), r(t)]``, else a
    uniform point of ``[-C, l(t)) ∪ (r(t), C]``. Density ``p = (e^eps - z) / (2 z + 2)`` on
    ``[l, r]`` and ``p / e^eps`` elsewhere in ``[-C, C]``. Unbiased; per-user variance
    ``t^2 / (z - 1) + (z + 3) / (3 (z - 1)^2)``.

    ``dim > 1`` (Alg. 4): ``k = max(1, min(dim, floor(eps / 2.5)))`` coordinates (override with
    ``k``) are sampled uniformly without replacement, each is perturbed by PM(eps / k), and the
    estimate scales by ``dim / k``. Per-user variance per coordinate
    ``(dim/k) (Var_{eps/k}(t_j) + t_j^2) - t_j^2``.

    Privacy: eps-LDP exactly (density ratio ``e^{eps/k}`` per sampled coordinate, ``k`` of them;
    the sampled set is data independent).

    Reports: ``dim == 1``: ``{"t": float64 (n,)}``; ``dim > 1``: ``{"j": int64 (n, k)`` sampled
    coordinates, ``"t": float64 (n, k)`` unscaled PM outputs ``}``. Statistic: float
    per-coordinate sums of the outputs; ``mean = (dim / k) * sum / n``.
    """

    name = "pm"

    def __init__(self, epsilon: float, dim: int = 1, k: int | None = None) -> None:
        super().__init__(epsilon, dim)
        if k is None:
            k = max(1, min(self.dim, int(math.floor(self.epsilon / 2.5))))
        self.k = check_positive_int(k, "k")
        if self.k > self.dim:
            raise ValidationError(f"k must be <= dim = {self.dim}, got {self.k}", parameter="k")
        self.eps_coord = self.epsilon / self.k
        self._scale = self.dim / self.k
        self.C = self._output_bound()

    def _report_bound(self) -> float:
        return self.C

    # --- the per-coordinate mechanism (overridden by HM) ---------------------------------------
    def _output_bound(self) -> float:
        return _pm_constants(self.eps_coord)[1]

    def _coord_sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return _pm_sample(t, self.eps_coord, rng)

    def _coord_density(self, y: np.ndarray, t: np.ndarray) -> np.ndarray:
        return _pm_density(y, t, self.eps_coord)

    def _coord_variance_coefficients(self) -> tuple[float, float]:
        return _pm_variance_coefficients(self.eps_coord)

    # --- shared -------------------------------------------------------------------------------
    def _unit_variance_coefficients(self) -> tuple[float, float]:
        a, b = self._coord_variance_coefficients()
        r = self.dim / self.k
        return r * a, r * (b + 1.0) - 1.0

    def _sample_coordinates(self, n: int, rng: np.random.Generator) -> np.ndarray:
        d, k = self.dim, self.k
        if k == 1:
            return rng.integers(0, d, size=(n, 1))
        if k == d:
            return np.broadcast_to(np.arange(d), (n, d)).copy()
        return np.argpartition(rng.random((n, d)), k - 1, axis=1)[:, :k].astype(np.int64)

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
                or not np.all(np.isfinite(t)) or np.any(np.abs(t) > self.C):
            raise ValidationError(f"{self.name} reports 't' must be finite floats in [-C, C] of shape {want}",
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
        """Density of each report (w.r.t. Lebesgue measure on the ``k`` outputs, times the
        ``1 / binom(dim, k)`` probability of the sampled coordinate set)."""
        xv = self._x(x)
        t = np.asarray(reports["t"], dtype=np.float64)
        if self.dim == 1:
            return self._coord_density(t, xv[0])
        j = np.asarray(reports["j"], dtype=np.int64)
        dens = self._coord_density(t, xv[j]).prod(axis=1)
        log_sets = gammaln(self.dim + 1) - gammaln(self.k + 1) - gammaln(self.dim - self.k + 1)
        return dens * math.exp(-log_sets)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, dim={self.dim}, k={self.k})"


class HybridMechanism(PiecewiseMechanism):
    """Hybrid Mechanism (HM) of Wang et al. (ICDE 2019); Alg. 4 for ``dim > 1``.

    Per coordinate, with budget ``e = eps / k``: with probability ``alpha = 1 - e^{-e/2}`` if
    ``e > eps* = 0.61`` (else ``alpha = 0``) run PM(e), otherwise the 1-D Duchi mechanism (e).
    Both are unbiased, so HM is; per-user variance ``alpha Var_PM + (1 - alpha) Var_Duchi``,
    which for ``e > eps*`` equals ``(z + 3) / (3 z (z - 1)) + (e^e + 1)^2 / (z (e^e - 1)^2)``
    for every ``t`` (the ``t^2`` terms cancel), and ``C^2 - t^2`` for ``e <= eps*``.

    The output law is a mixture of a continuous part and two atoms at ``±C_D``
    (``C_D = (e^e + 1) / (e^e - 1)``). :meth:`probabilities` returns its density w.r.t. Lebesgue
    measure plus counting measure on ``{-C_D, +C_D}``: ``(1 - alpha) P_Duchi(y)`` at an atom and
    ``alpha * PM density`` elsewhere. Both parts have ratio at most ``e^e`` across inputs, so HM
    is eps-LDP exactly (``k`` coordinates at ``eps / k`` each).

    Reports and statistic: as :class:`PiecewiseMechanism` (a PM output equals ``±C_D`` with
    probability 0).
    """

    name = "hm"

    def __init__(self, epsilon: float, dim: int = 1, k: int | None = None) -> None:
        super().__init__(epsilon, dim, k)
        e = self.eps_coord
        self.alpha = -math.expm1(-e / 2.0) if e > HM_EPSILON_STAR else 0.0
        self.C_duchi, self._duchi_slope = _duchi1_constants(e)

    def _output_bound(self) -> float:
        return max(_pm_constants(self.eps_coord)[1], _duchi1_constants(self.eps_coord)[0])

    def _coord_sample(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        duchi = np.where(rng.random(t.shape) < 0.5 + self._duchi_slope * t, self.C_duchi, -self.C_duchi)
        if self.alpha == 0.0:
            return duchi
        pm = _pm_sample(t, self.eps_coord, rng)
        return np.where(rng.random(t.shape) < self.alpha, pm, duchi)

    def _coord_density(self, y: np.ndarray, t: np.ndarray) -> np.ndarray:
        atom = np.abs(y) == self.C_duchi
        p_duchi = (1.0 - self.alpha) * (0.5 + np.sign(y) * self._duchi_slope * t)
        cont = self.alpha * _pm_density(y, t, self.eps_coord)
        return np.where(atom, p_duchi, cont)

    def _coord_variance_coefficients(self) -> tuple[float, float]:
        a_pm, b_pm = _pm_variance_coefficients(self.eps_coord)
        a_d = self.C_duchi**2
        al = self.alpha
        return al * a_pm + (1.0 - al) * a_d, al * b_pm - (1.0 - al)
