"""Rényi-DP curves of the basic mechanisms and the RDP/zCDP -> (eps, delta) conversions.

All curves are evaluated on an array of orders ``alpha > 1`` and returned as numpy arrays
(``rdp[i]`` is the RDP epsilon at ``orders[i]``). Everything is computed in log space so that
large orders (thousands) do not overflow.

Sources
-------
- Mironov, "Rényi differential privacy", CSF 2017: Gaussian (Prop. 7), Laplace (Prop. 6),
  randomized response (Prop. 5), composition, naive conversion (Prop. 3).
- Mironov, Talwar, Zhang, "Rényi differential privacy of the sampled Gaussian mechanism",
  arXiv 1908.10530 (2019): Poisson-subsampled Gaussian, exact integer-order binomial sum (Sec. 3.3)
  and the two-series formula for fractional orders (Sec. 3.2).
- Bun, Steinke, "Concentrated differential privacy", TCC 2016: zCDP, pure eps-DP as RDP (Prop. 3.3).
- Canonne, Kamath, Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020,
  Prop. 12 (= Balle et al. 2020 Thm 21; Asoodeh et al. 2020): the improved conversion.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Literal

import numpy as np
from scipy import optimize, special

from ..core.errors import ValidationError
from ..core.privacy import round_up
from ..core.validation import check_delta, check_epsilon, check_order, check_positive_int, check_probability, check_real

__all__ = [
    "DEFAULT_ORDERS",
    "Conversion",
    "check_orders",
    "rdp_gaussian",
    "rdp_laplace",
    "rdp_randomized_response",
    "rdp_pure",
    "rdp_zcdp",
    "rdp_poisson_subsampled_gaussian",
    "rdp_to_epsilon",
    "rdp_to_delta",
    "zcdp_to_epsilon",
    "zcdp_to_delta",
]

Conversion = Literal["improved", "naive"]

#: Default order grid: fine steps where DP-SGD-like optima live (1.1..10.9), every integer to 128,
#: then geometric steps of ~5% up to 16384, so that very small per-step losses (e.g. one Gaussian
#: with sigma = 200: optimal alpha ~ 960) are not stuck at the grid end.
DEFAULT_ORDERS: np.ndarray = np.unique(np.concatenate([
    np.round(np.arange(1.1, 11.0, 0.1), 10),
    np.arange(11, 129, dtype=float),
    np.round(np.geomspace(128, 16384, 100)),
]))


def check_orders(orders: Iterable[float] | np.ndarray | None) -> np.ndarray:
    """Validate an order grid: a non-empty 1-D array of finite reals > 1 (sorted, duplicates removed)."""
    if orders is None:
        return DEFAULT_ORDERS.copy()
    arr = np.atleast_1d(np.asarray(orders))
    if arr.ndim != 1 or arr.size == 0:
        raise ValidationError("orders must be a non-empty 1-D sequence of reals > 1", parameter="orders")
    out = np.array([check_order(a, "orders") for a in arr.tolist()], dtype=np.float64)
    return np.unique(out)


def _orders_array(orders: Iterable[float] | np.ndarray) -> np.ndarray:
    """Orders as a float array in the caller's order (no sorting, so curves stay aligned); every
    order must be a finite real > 1 (ValidationError naming ``orders`` otherwise). O(#orders)."""
    a = np.asarray(orders, dtype=float)
    if a.ndim > 1 or a.size == 0:
        raise ValidationError("orders must be a non-empty 1-D sequence of reals > 1", parameter="orders")
    bad = ~(np.isfinite(a) & (a > 1.0))
    if np.any(bad):
        raise ValidationError(f"orders must be finite reals > 1, got {np.atleast_1d(a)[np.atleast_1d(bad)][0]!r}",
                              parameter="orders")
    return a


def _rdp_like(rdp: Any, orders: np.ndarray) -> np.ndarray:
    """An RDP curve with one value per order, each >= 0 (``inf`` allowed: no guarantee at that
    order); ValidationError naming ``rdp`` otherwise (NaN, negative, wrong shape, not numeric)."""
    try:
        r = np.asarray(rdp, dtype=float)
    except (TypeError, ValueError):
        raise ValidationError(f"rdp must be a sequence of reals >= 0, got {rdp!r}", parameter="rdp") from None
    if r.shape != orders.shape:
        raise ValidationError(f"rdp must have one value per order: shape {r.shape} vs orders {orders.shape}",
                              parameter="rdp")
    bad = np.isnan(r) | (r < 0)
    if np.any(bad):
        raise ValidationError(f"rdp values must be >= 0 (Renyi divergences are non-negative), "
                              f"got {np.atleast_1d(r)[np.atleast_1d(bad)][0]!r}", parameter="rdp")
    return r


# --------------------------------------------------------------------------- mechanisms


def rdp_gaussian(orders: np.ndarray, sigma: float, sensitivity: float = 1.0) -> np.ndarray:
    """Gaussian mechanism N(0, sigma^2) on an L2-sensitivity-``sensitivity`` query:
    ``alpha * sensitivity^2 / (2 sigma^2)`` (Mironov 2017, Prop. 7). Exact. sigma, sensitivity > 0."""
    sigma = check_real(sigma, "sigma", low=0.0, low_open=True)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
    return _orders_array(orders) * sensitivity**2 / (2.0 * sigma**2)


def rdp_zcdp(orders: np.ndarray, rho: float, xi: float = 0.0) -> np.ndarray:
    """(xi, rho)-zCDP as an RDP curve: ``xi + rho * alpha`` (Bun–Steinke 2016, Def. 1.1). rho, xi >= 0."""
    rho = check_real(rho, "rho", low=0.0)
    xi = check_real(xi, "xi", low=0.0)
    return xi + rho * _orders_array(orders)


def rdp_laplace(orders: np.ndarray, scale: float, sensitivity: float = 1.0) -> np.ndarray:
    """Laplace mechanism Lap(scale) on an L1-sensitivity-``sensitivity`` query (Mironov 2017, Prop. 6).

    With ``e = sensitivity / scale``:
    ``1/(a-1) * log( a/(2a-1) * exp((a-1) e) + (a-1)/(2a-1) * exp(-a e) )``. Exact; tends to ``e``.
    """
    scale = check_real(scale, "scale", low=0.0, low_open=True)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
    a = _orders_array(orders)
    e = sensitivity / scale
    t1 = np.log(a / (2 * a - 1)) + (a - 1) * e
    t2 = np.log((a - 1) / (2 * a - 1)) - a * e
    return np.logaddexp(t1, t2) / (a - 1)


def rdp_randomized_response(orders: np.ndarray, epsilon: float, k: int = 2) -> np.ndarray:
    """k-ary randomized response with LDP parameter ``epsilon`` (truth w.p. e^eps/(e^eps+k-1)).

    Exact Rényi divergence between the output laws for two different inputs x != x'
    (the only outputs whose probabilities differ are x and x'):
    ``1/(a-1) * log( p^a q^(1-a) + q^a p^(1-a) + (k-2) q )`` with ``q = 1/(e^eps+k-1)``.
    For k = 2 this is Mironov 2017 Prop. 5; it is also the worst case over all pure
    eps-DP mechanisms (Bun–Steinke 2016, Prop. 3.3). epsilon > 0, integer k >= 2.
    """
    epsilon = check_epsilon(epsilon, "epsilon")
    k = check_positive_int(k, "k", minimum=2)
    a = _orders_array(orders)
    logz = math.log(math.exp(epsilon) + k - 1) if epsilon < 700 else epsilon + math.log1p((k - 1) * math.exp(-epsilon))
    lp = epsilon - logz
    lq = -logz
    terms = [a * lp + (1 - a) * lq, a * lq + (1 - a) * lp]
    if k > 2:
        terms.append(np.full_like(a, math.log(k - 2) + lq))
    return special.logsumexp(np.stack(terms), axis=0) / (a - 1)


def rdp_pure(orders: np.ndarray, epsilon: float) -> np.ndarray:
    """Pure eps-DP as RDP: the binary-RR curve, which dominates every eps-DP mechanism
    (Bun–Steinke 2016 Prop. 3.3: ``D_a <= log((sinh(a e) - sinh((a-1) e)) / sinh(e)) / (a-1)``).
    epsilon > 0."""
    epsilon = check_epsilon(epsilon, "epsilon")
    return np.minimum(rdp_randomized_response(orders, epsilon, 2), epsilon)


def _log_binom_real(a: float, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log|C(a, i)| and sign(C(a, i)) for real a and integer i >= 0."""
    i = np.asarray(i, dtype=float)
    # C(a, i) = Gamma(a+1) / (Gamma(i+1) Gamma(a-i+1)); gammasgn handles the poles' signs.
    lg = special.gammaln(a + 1) - special.gammaln(i + 1) - special.gammaln(a - i + 1)
    sign = special.gammasgn(a + 1) * special.gammasgn(a - i + 1)
    return lg, sign


def _log_a_integer(q: float, sigma: float, alpha: int) -> float:
    """log A_alpha for integer alpha (MTZ19 Sec. 3.3):
    A = sum_{k=0}^{alpha} C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2 - k) / (2 sigma^2))."""
    k = np.arange(alpha + 1, dtype=float)
    log_terms = (special.gammaln(alpha + 1) - special.gammaln(k + 1) - special.gammaln(alpha - k + 1)
                 + k * math.log(q) + (alpha - k) * math.log1p(-q) + (k * k - k) / (2 * sigma**2))
    return float(special.logsumexp(log_terms))


def _log_a_fractional(q: float, sigma: float, alpha: float, *, max_terms: int = 100_000) -> float:
    """log A_alpha for fractional alpha (MTZ19 Sec. 3.2): two alternating series with erfc weights,
    z0 = sigma^2 log(1/q - 1) + 1/2, summed until both terms fall below exp(-36) of the running sum."""
    z0 = sigma**2 * math.log(1.0 / q - 1.0) + 0.5
    total_logs: list[np.ndarray] = []
    total_signs: list[np.ndarray] = []
    start, block = 0, 64
    while start < max_terms:
        i = np.arange(start, start + block, dtype=float)
        lc, sgn = _log_binom_real(alpha, i)
        j = alpha - i
        l0 = (lc + i * math.log(q) + j * math.log1p(-q) + (i * i - i) / (2 * sigma**2)
              + special.log_ndtr((z0 - i) / sigma))  # 0.5 erfc((i - z0)/(sqrt2 sigma)) = Phi((z0 - i)/sigma)
        l1 = (lc + j * math.log(q) + i * math.log1p(-q) + (j * j - j) / (2 * sigma**2)
              + special.log_ndtr((j - z0) / sigma))  # 0.5 erfc((z0 - j)/(sqrt2 sigma))
        total_logs.append(np.concatenate([l0, l1]))
        total_signs.append(np.concatenate([sgn, sgn]))
        running = special.logsumexp(np.concatenate(total_logs), b=np.concatenate(total_signs))
        if start > alpha + 1 and max(l0[-1], l1[-1]) < running - 36.0:
            break
        start += block
    return float(special.logsumexp(np.concatenate(total_logs), b=np.concatenate(total_signs)))


def rdp_poisson_subsampled_gaussian(orders: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """Poisson-subsampled Gaussian (sampling rate q, noise multiplier sigma = std / L2 sensitivity),
    add/remove-one neighbours (Mironov, Talwar, Zhang 2019).

    Integer orders use the exact finite binomial sum; fractional orders the two-series formula.
    ``rdp(a) = log(A_a) / (a - 1)``. ``q = 0`` gives 0 and ``q = 1`` the plain Gaussian.
    q in [0, 1], sigma > 0.
    """
    q = check_probability(q, "q")
    sigma = check_real(sigma, "sigma", low=0.0, low_open=True)
    a = _orders_array(orders)
    if q == 0.0:
        return np.zeros_like(a)
    if q == 1.0:
        return rdp_gaussian(a, sigma)
    out = np.empty_like(a)
    for idx, alpha in enumerate(a.tolist()):
        if float(alpha).is_integer():
            la = _log_a_integer(q, sigma, int(alpha))
        else:
            la = _log_a_fractional(q, sigma, alpha)
        out[idx] = max(la, 0.0) / (alpha - 1)
    return out


# --------------------------------------------------------------------------- conversions


def _conversion_terms(orders: np.ndarray, rdp: np.ndarray, delta: float, conversion: Conversion) -> np.ndarray:
    a = orders
    if conversion == "naive":
        return rdp + math.log(1.0 / delta) / (a - 1)
    if conversion == "improved":
        return rdp + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1)
    raise ValidationError(f"conversion must be 'improved' or 'naive', got {conversion!r}", parameter="conversion")


def rdp_to_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: float,
                   conversion: Conversion = "improved") -> tuple[float, float]:
    """Smallest eps over the grid such that the RDP curve implies (eps, delta)-DP.

    ``naive`` (Mironov 2017 Prop. 3): ``eps = rdp(a) + log(1/delta)/(a-1)``.
    ``improved`` (CKS20 Prop. 12 / Balle et al. 2020 Thm 21):
    ``eps = rdp(a) + log1p(-1/a) - (log delta + log a)/(a-1)``; it is smaller by
    ``log(a)/(a-1) - log1p(-1/a)`` at every order. Negative values are clamped to 0.

    The RDP values must be >= 0 (``inf`` allowed). Returns ``(eps, alpha_opt)`` with eps rounded up.
    """
    delta = check_delta(delta)
    orders = _orders_array(orders)
    rdp = _rdp_like(rdp, orders)
    eps = _conversion_terms(orders, rdp, delta, conversion)
    eps = np.where(np.isnan(eps), np.inf, eps)
    i = int(np.argmin(eps))
    return round_up(max(float(eps[i]), 0.0)), float(orders[i])


def rdp_to_delta(orders: np.ndarray, rdp: np.ndarray, epsilon: float,
                 conversion: Conversion = "improved") -> tuple[float, float]:
    """Smallest delta over the grid such that the RDP curve implies (eps, delta)-DP.

    ``naive``: ``delta = exp((a-1)(rdp(a) - eps))``; ``improved``:
    ``delta = exp((a-1)(rdp(a) - eps) + (a-1) log1p(-1/a) - log a)`` (the inverse of
    :func:`rdp_to_epsilon`). Capped at 1. Returns ``(delta, alpha_opt)``.
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    a = _orders_array(orders)
    rdp = _rdp_like(rdp, a)
    if conversion == "naive":
        logd = (a - 1) * (rdp - epsilon)
    elif conversion == "improved":
        logd = (a - 1) * (rdp - epsilon) + (a - 1) * np.log1p(-1.0 / a) - np.log(a)
    else:
        raise ValidationError(f"conversion must be 'improved' or 'naive', got {conversion!r}", parameter="conversion")
    logd = np.where(np.isnan(logd), np.inf, logd)
    i = int(np.argmin(logd))
    return float(min(1.0, math.exp(min(float(logd[i]), 0.0)))), float(a[i])


def zcdp_to_epsilon(rho: float, delta: float, xi: float = 0.0, conversion: Conversion = "improved") -> float:
    """(xi, rho)-zCDP -> (eps, delta)-DP.

    ``naive`` (standard, Bun–Steinke 2016 Prop. 1.3): ``xi + rho + 2 sqrt(rho log(1/delta))``
    — the exact minimum over real a of the naive RDP bound on the line ``xi + rho a``.
    ``improved`` (CKS20 Prop. 12, as in OpenDP's ``cdp_delta``): the improved RDP bound on the same
    line minimised over real a > 1 numerically. Any a gives a valid bound, so an inexact minimiser
    can only make the answer larger, never invalid. Rounded up.
    """
    delta = check_delta(delta)
    rho = check_real(rho, "rho", low=0.0)
    xi = check_real(xi, "xi", low=0.0)
    if rho == 0.0:
        return xi
    if conversion == "naive":
        return round_up(xi + rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))
    if conversion != "improved":
        raise ValidationError(f"conversion must be 'improved' or 'naive', got {conversion!r}", parameter="conversion")
    logd = math.log(delta)

    def f(t: float) -> float:  # t = log(a - 1)
        a = 1.0 + math.exp(t)
        return xi + rho * a + math.log1p(-1.0 / a) - (logd + math.log(a)) / (a - 1)

    t0 = 0.5 * math.log(max(math.log(1.0 / delta) / rho, 1e-300))  # naive optimum as a start
    res = optimize.minimize_scalar(f, bracket=(t0 - 1.0, t0, t0 + 1.0)) if math.isfinite(t0) else None
    cands = [f(t0)]
    if res is not None and np.isfinite(res.fun):
        cands.append(float(res.fun))
    eps = min(cands)
    # the naive bound is also valid; never report more than it
    return round_up(max(0.0, min(eps, xi + rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))))


def zcdp_to_delta(rho: float, epsilon: float, xi: float = 0.0, conversion: Conversion = "improved") -> float:
    """(xi, rho)-zCDP -> smallest delta at ``epsilon`` (minimised over real a > 1)."""
    rho = check_real(rho, "rho", low=0.0)
    xi = check_real(xi, "xi", low=0.0)
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    if rho == 0.0:
        return 0.0 if epsilon >= xi else 1.0
    if conversion == "naive":
        if epsilon <= xi + rho:
            return 1.0
        return min(1.0, math.exp(-((epsilon - xi - rho) ** 2) / (4 * rho)))
    if conversion != "improved":
        raise ValidationError(f"conversion must be 'improved' or 'naive', got {conversion!r}", parameter="conversion")

    def g(t: float) -> float:
        a = 1.0 + math.exp(t)
        return (a - 1) * (xi + rho * a - epsilon) + (a - 1) * math.log1p(-1.0 / a) - math.log(a)

    ts = np.linspace(-12, 15, 271)
    vals = [g(t) for t in ts]
    i = int(np.argmin(vals))
    res = optimize.minimize_scalar(g, bounds=(ts[max(i - 1, 0)], ts[min(i + 1, len(ts) - 1)]), method="bounded")
    best = min(vals[i], float(res.fun))
    naive = 1.0 if epsilon <= xi + rho else math.exp(-((epsilon - xi - rho) ** 2) / (4 * rho))
    return float(min(1.0, naive, math.exp(min(best, 0.0))))

