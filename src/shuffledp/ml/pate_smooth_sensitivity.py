"""Publishing PATE's data-dependent privacy cost with smooth sensitivity (Papernot et al., ICLR 2018).

The data-dependent RDP of GNMax (Theorem 6 with q from Proposition 7) is a function of the private
votes, so the number itself must be released privately. Following Papernot et al. (2018, Sec. 4.2
and App. B.4-C), at one fixed Rényi order ``lambda`` we

1. write the per-query cost as a function of the Prop. 7 bound ``q`` only:
   ``beta(q) = Theorem 6`` for ``q < q0`` and ``lambda / sigma^2`` (data-independent) above, where
   ``q0`` is where the two meet;
2. bound the local sensitivity of ``beta`` at a histogram (Algorithm 3): a neighbouring histogram
   (one teacher's vote moved) has ``q' in [bl(q), bu(q)]``, with
   ``bu(q) = (m-1)/2 erfc(erfcinv(2q/(m-1)) - 1/sigma)`` and ``bl`` the same with ``+ 1/sigma``
   (proved below), hence ``LS(q) = max(beta(bu(q)) - beta(q), beta(q) - beta(bl(q)))``, and every
   ``q`` in ``[q1, q0]`` (``q1 = bl(q0)``) is replaced by ``q1`` (the plateau);
3. bound the local sensitivity at distance ``k`` (histograms ``k`` teachers away) by the largest
   ``LS`` over ``q' in [bl^k(q), bu^k(q)]``; ``bu^k`` has the closed form with ``k/sigma``. Because
   ``LS`` rises up to the plateau and falls after it, this is ``LS`` at the end of the interval
   nearest to the plateau. For a sum over answered queries the bounds add;
4. take the beta-smooth sensitivity ``SS = max_k e^{-beta_s k} A(k)`` (Nissim, Raskhodnikova,
   Smith 2007) and release ``cost + SS * N(0, sigma_s^2)`` (GNSS).

Why ``bu``/``bl`` are valid (Prop. 13 of the paper; argued here independently): let ``i*`` be the
plurality class of ``n``. Moving one vote changes every gap ``n_i* - n_i`` by at most 2, i.e. every
erfc argument ``x_i = gap_i / (2 sigma)`` by at most ``1/sigma``. If the plurality class of the
neighbour differs, measuring its gaps from ``i*`` instead can only increase the bound, so
``q' <= sum_i erfc(x_i - 1/sigma)/2``. The map ``y -> erfc(erfcinv(2y) - s)/2`` is concave
(it is ``y -> Phi(Phi^{-1}(y) + s sqrt 2)``, a Gaussian ROC curve), so by Jensen's inequality the sum
with ``sum_i erfc(x_i)/2 = q`` is at most ``bu(q)``. The lower bound is the same with the convex
map ``s -> -s`` (if the plurality changes, the new top's gap to ``i*`` is at most 2).

The construction needs two monotonicity conditions of the paper (C5: ``beta`` non-decreasing on
``(0, q0)``; C6: ``beta(bu(q)) - beta(q)`` non-decreasing on ``(0, q1)``). Like the authors' code, we
verify them numerically per ``(sigma, m, lambda)`` (here on a dense grid of ``log q`` covering the
queries) and refuse to release when they fail.

The RDP of the GNSS release is derived here from the closed form of the Rényi divergence between
two Gaussians (Gil, Alajaji, Linder 2013): with ``S(y) = e^t S(x)``, ``|t| <= beta_s`` and mean gap
at most ``min(S(x), S(y))``, the divergence of order ``lambda`` is at most
``max(beta_s + lambda/(2 sigma_s^2), -log(c)/(2(lambda-1)) + lambda e^{-2 beta_s}/(2 sigma_s^2 c))``
with ``c = 1 - lambda (1 - e^{-2 beta_s}) > 0`` (:func:`rdp_gnss`). The formula in the authors' code
(``lambda e^{2 beta}/sigma^2 + (beta lambda - log(1 - 2 lambda beta)/2)/(lambda - 1)``) is smaller than
the exact divergence at admissible pairs near ``lambda beta = 1/2`` (e.g. lambda = 100, beta =
0.0045, sigma = 20: 0.27 against 1.20), so it is not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import optimize, special

from ..accounting.rdp import rdp_to_epsilon
from ..core.errors import ValidationError
from ..core.validation import check_delta, check_positive_int, check_real

__all__ = [
    "rdp_gnmax_at_q", "log_q0_gnmax", "log_q_min_gnmax", "log_q_neighbour_bounds",
    "check_smooth_sensitivity_conditions",
    "local_sensitivity_gnmax", "local_sensitivity_at_distance_gnmax", "smooth_sensitivity", "rdp_gnss",
    "SmoothSensitivityRelease", "release_gnmax_cost",
]

_SQRT2 = math.sqrt(2.0)


def _order(order: float) -> float:
    return check_real(order, "order", low=1.0, low_open=True)


def _log1mexp(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -0.693, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _theorem6(log_q: np.ndarray, sigma: float, order: float) -> np.ndarray:
    """Theorem 6 with ``mu2 = sigma sqrt(log 1/q)``, ``mu1 = mu2 + 1``, ``eps_i = mu_i / sigma^2``
    (no validity check; NaN/inf where it is undefined)."""
    lq = np.asarray(log_q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mu2 = sigma * np.sqrt(-lq)
        mu1 = mu2 + 1.0
        eps1, eps2 = mu1 / sigma**2, mu2 / sigma**2
        log1q = _log1mexp(lq)
        log_a = log1q - _log1mexp((lq + eps2) * (1.0 - 1.0 / mu2))
        log_b = eps1 - lq / (mu1 - 1.0)
        return np.logaddexp(log1q + (order - 1) * log_a, lq + (order - 1) * log_b) / (order - 1)


def _theorem6_valid(log_q: np.ndarray, sigma: float, order: float) -> np.ndarray:
    lq = np.asarray(log_q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu2 = sigma * np.sqrt(-lq)
        mu1 = mu2 + 1.0
        eps2 = mu2 / sigma**2
        lemma9 = lq <= (mu2 - 1) * eps2 - mu2 * (np.log(mu1 / (mu1 - 1)) + np.log(mu2 / (mu2 - 1)))
        return (mu2 > 1.0) & (order < mu1) & (lq + eps2 < 0) & lemma9


@lru_cache(maxsize=256)
def log_q0_gnmax(sigma: float, order: float) -> float:
    """``log q0``: below it Theorem 6 is valid and smaller than the data-independent ``lambda/sigma^2``.

    Root of ``Theorem6(q) = lambda / sigma^2``, bracketed from a point where the theorem's conditions
    hold (``mu2 >= max(sigma + 1, lambda - 0.99)``, ``log q <= -1/sigma^2``).
    """
    s, a = check_real(sigma, "sigma", low=0.0, low_open=True), _order(order)
    indep = a / s**2
    hi = -max((1.0 + 1.0 / s) ** 2, ((a - 0.99) / s) ** 2, 1.0 / s**2)
    while not bool(_theorem6_valid(hi, s, a)):
        hi *= 1.5
    gap = lambda lq: float(_theorem6(lq, s, a)) - indep  # noqa: E731
    if gap(hi) < 0:
        return hi
    lo = 2.0 * hi
    while gap(lo) > 0:
        lo *= 1.5
        if lo < -1e7:
            raise ValidationError("could not bracket q0: Theorem 6 never beats the data-independent bound",
                                  parameter="sigma")
    return float(optimize.brentq(gap, lo, hi, xtol=1e-12, rtol=1e-14))


def rdp_gnmax_at_q(log_q: Any, sigma: float, order: float) -> np.ndarray:
    """Per-query RDP of GNMax at order ``lambda`` as a function of ``log q`` (Prop. 7 bound):
    Theorem 6 below ``log q0`` (:func:`log_q0_gnmax`), ``lambda / sigma^2`` from ``log q0`` on, 0 at ``q = 0``.

    This is the function whose smooth sensitivity is computed; it is at least the value of
    :func:`shuffledp.ml.pate.rdp_gnmax_data_dependent` wherever conditions C5 hold.
    """
    s, a = check_real(sigma, "sigma", low=0.0, low_open=True), _order(order)
    lq = np.asarray(log_q, dtype=float)
    lq0 = log_q0_gnmax(s, a)
    dd = _theorem6(np.minimum(lq, lq0), s, a)
    out = np.where(lq < lq0, dd, a / s**2)
    return np.where(np.isneginf(lq), 0.0, out)


def log_q_neighbour_bounds(log_q: Any, sigma: float, n_classes: int,
                           distance: Any = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(log bl^k(q), log bu^k(q))``: the range of the Prop. 7 bound over histograms at most ``k``
    teachers away (module docstring), ``bu^k(q) = (m-1)/2 erfc(erfcinv(2q/(m-1)) - k/sigma)`` capped at 1.

    Broadcasts ``log_q`` against ``distance``. Computed through ``ndtri_exp``/``log_ndtr`` so that
    ``q`` far below the smallest double is handled.
    """
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    m = check_positive_int(n_classes, "n_classes")
    if m < 2:
        raise ValidationError("n_classes must be >= 2", parameter="n_classes")
    lm = math.log(m - 1)
    lq = np.asarray(log_q, dtype=float)
    z = -special.ndtri_exp(np.minimum(lq - lm, math.log(0.5)))      # q/(m-1) = Phi(-z), z >= 0
    shift = _SQRT2 * np.asarray(distance, dtype=float) / s
    hi = np.minimum(lm + special.log_ndtr(shift - z), 0.0)
    lo = lm + special.log_ndtr(-z - shift)
    neg = np.isneginf(lq)
    return np.where(neg, -np.inf, lo), np.where(neg, -np.inf, hi)


def _ls_at(log_q: np.ndarray, sigma: float, m: int, order: float, lq0: float) -> np.ndarray:
    """Algorithm 3 without the plateau substitution.

    ``beta`` may jump up at ``q0`` (when ``q0`` is the end of Theorem 6's validity rather than the
    crossing point), and ``bu(q1) = q0`` holds only up to rounding: an upper neighbour bound within
    1e-9 (relative) of ``log q0`` is taken as reaching it.
    """
    b = rdp_gnmax_at_q(log_q, sigma, order)
    lo, hi = log_q_neighbour_bounds(log_q, sigma, m)
    up = np.where(hi >= lq0 - 1e-9 * abs(lq0), order / sigma**2, rdp_gnmax_at_q(hi, sigma, order))
    return np.maximum(up - b, b - rdp_gnmax_at_q(lo, sigma, order))


def _log_q0_q1(sigma: float, m: int, order: float) -> tuple[float, float]:
    lq0 = log_q0_gnmax(sigma, order)
    lq1 = float(log_q_neighbour_bounds(lq0, sigma, m)[0])
    return lq0, lq1


@lru_cache(maxsize=256)
def _conditions(sigma: float, m: int, order: float, log_q_min: float) -> tuple[bool, bool, bool]:
    lq0, lq1 = _log_q0_q1(sigma, m, order)
    lo = min(log_q_min, 4.0 * lq0) - 1.0
    grid0 = np.unique(np.concatenate([lq0 - np.geomspace(1e-9, lq0 - lo, 6000), [lq0]]))
    valid = bool(np.all(_theorem6_valid(grid0[grid0 < lq0], sigma, order)))
    b = rdp_gnmax_at_q(grid0, sigma, order)
    tol = 1e-12 * max(order / sigma**2, 1e-300)
    c5 = bool(np.all(np.diff(b) >= -tol))
    grid1 = grid0[grid0 <= lq1]
    d = rdp_gnmax_at_q(log_q_neighbour_bounds(grid1, sigma, m)[1], sigma, order) - rdp_gnmax_at_q(grid1, sigma, order)
    c6 = bool(np.all(np.diff(d) >= -tol))
    return valid, c5, c6


def log_q_min_gnmax(sigma: float, n_classes: int, n_teachers: int) -> float:
    """The smallest Prop. 7 bound any histogram of ``n_teachers`` votes can have (all votes on one class):
    ``log((m-1) erfc(N/(2 sigma))/2)``. Data-independent."""
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    m, N = check_positive_int(n_classes, "n_classes"), check_positive_int(n_teachers, "n_teachers")
    return math.log(m - 1) + float(special.log_ndtr(-N / (_SQRT2 * s)))


def check_smooth_sensitivity_conditions(sigma: float, n_classes: int, order: float,
                                        n_teachers: int) -> tuple[bool, bool]:
    """Conditions C5 and C6 of Papernot et al. (2018, App. B.4), checked on a dense grid of ``log q``
    from ``bl`` of the smallest possible value (:func:`log_q_min_gnmax`; or ``4 log q0`` if lower) to
    ``log q0`` (6000 points, geometric in the distance to ``q0``). Depends on ``(sigma, m, lambda, N)``
    only.

    Also requires Theorem 6's conditions at every grid point below ``q0``. Returns ``(C5, C6)``.
    """
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    m = check_positive_int(n_classes, "n_classes")
    # one neighbour step below the smallest reachable q: Algorithm 3 evaluates beta at bl(q)
    lowest = float(log_q_neighbour_bounds(log_q_min_gnmax(s, m, n_teachers), s, m)[0])
    valid, c5, c6 = _conditions(s, m, _order(order), lowest)
    return valid and c5, valid and c5 and c6


def local_sensitivity_gnmax(log_q: Any, sigma: float, n_classes: int, order: float) -> np.ndarray:
    """Algorithm 3 of Papernot et al. (2018): an upper bound on the local sensitivity of
    :func:`rdp_gnmax_at_q` at histograms with Prop. 7 bound ``q`` (``q`` in ``[q1, q0]`` replaced by ``q1``)."""
    s, a = check_real(sigma, "sigma", low=0.0, low_open=True), _order(order)
    m = check_positive_int(n_classes, "n_classes")
    lq0, lq1 = _log_q0_q1(s, m, a)
    lq = np.asarray(log_q, dtype=float)
    lq = np.where((lq >= lq1) & (lq <= lq0), lq1, lq)
    return _ls_at(lq, s, m, a, lq0)


def local_sensitivity_at_distance_gnmax(log_q: Any, sigma: float, n_classes: int, order: float) -> np.ndarray:
    """``A[i, k]``: upper bound on the local sensitivity of query ``i``'s cost at any histogram at most
    ``k`` teachers away, for ``k = 0 .. K`` where every query has reached the plateau ``LS(q1)`` by ``K``
    (constant afterwards). Shape ``(queries, K + 1)``.

    ``A[i, k] = LS(min(bu^k(q_i), q1))`` for ``q_i < q1``, ``LS(max(bl^k(q_i), q0))`` for ``q_i > q0``,
    ``LS(q1)`` in between (valid under C5-C6, :func:`check_smooth_sensitivity_conditions`).
    """
    s, a = check_real(sigma, "sigma", low=0.0, low_open=True), _order(order)
    m = check_positive_int(n_classes, "n_classes")
    lq = np.atleast_1d(np.asarray(log_q, dtype=float))
    lq0, lq1 = _log_q0_q1(s, m, a)
    lm = math.log(m - 1)
    zq = -special.ndtri_exp(np.minimum(lq - lm, math.log(0.5)))
    z0, z1 = (float(-special.ndtri_exp(min(v - lm, math.log(0.5)))) for v in (lq0, lq1))
    with np.errstate(invalid="ignore"):
        steps = np.where(lq < lq1, (zq - z1), np.where(lq > lq0, (z0 - zq), 0.0)) * s / _SQRT2
    steps = np.where(np.isneginf(lq), 0.0, steps)  # q = 0 exactly: handled below
    K = int(np.ceil(np.max(steps, initial=0.0))) + 1
    k = np.arange(K + 1, dtype=float)[None, :]
    lo, hi = log_q_neighbour_bounds(lq[:, None], s, m, k)
    col = lq[:, None]
    target = np.where(col < lq1, np.minimum(hi, lq1), np.where(col > lq0, np.maximum(lo, lq0), lq1))
    target = np.where(np.isneginf(col), lq1, target)  # no finite bound on the distance: take the plateau
    target = np.where((target >= lq1) & (target <= lq0), lq1, target)
    return _ls_at(target, s, m, a, lq0)


def smooth_sensitivity(ls_at_distance: Any, beta: float) -> float:
    """``max_k e^{-beta k} A(k)`` over the columns of ``A`` (summed over rows if 2-D).

    ``A(k)`` must be non-decreasing in ``k`` and constant after its last column (as returned by
    :func:`local_sensitivity_at_distance_gnmax`); then this is a beta-smooth upper bound on the local
    sensitivity (Nissim et al. 2007, Def. 2.1 and Prop. 2.2).
    """
    b = check_real(beta, "beta", low=0.0, low_open=True)
    A = np.asarray(ls_at_distance, dtype=float)
    if A.ndim == 2:
        A = A.sum(axis=0)
    if A.ndim != 1 or A.size == 0 or np.any(A < 0):
        raise ValidationError("ls_at_distance must be non-negative, one value per distance", parameter="ls_at_distance")
    return float(np.max(A * np.exp(-b * np.arange(A.size))))


def rdp_gnss(orders: Any, beta: float, sigma_ss: float) -> np.ndarray:
    """RDP of ``f(D) + SS_beta(D) * N(0, sigma_ss^2)`` with ``SS_beta`` a beta-smooth upper bound on the
    local sensitivity of ``f`` (bound derived in the module docstring); ``inf`` at orders with
    ``lambda (1 - e^{-2 beta}) >= 1``."""
    a = np.atleast_1d(np.asarray(orders, dtype=float))
    if np.any(a <= 1) or np.any(~np.isfinite(a)):
        raise ValidationError("orders must be finite reals > 1", parameter="orders")
    b = check_real(beta, "beta", low=0.0, low_open=True)
    s = check_real(sigma_ss, "sigma_ss", low=0.0, low_open=True)
    c = 1.0 - a * (-math.expm1(-2.0 * b))
    with np.errstate(divide="ignore", invalid="ignore"):
        up = b + a / (2 * s**2)
        down = -0.5 * np.log(c) / (a - 1) + a * math.exp(-2 * b) / (2 * s**2 * c)
    return np.where(c > 0, np.maximum(up, down), np.inf)


@dataclass(frozen=True)
class SmoothSensitivityRelease:
    """A private release of PATE's data-dependent cost at one order (GNSS, Papernot et al. 2018).

    Publishable: ``order``, ``beta``, ``sigma_ss`` (chosen without the votes), ``rdp_noisy`` (the noisy
    data-dependent RDP of the labels), ``rdp_release`` (RDP of publishing ``rdp_noisy``) and
    ``epsilon_released`` (``rdp_noisy + fixed + rdp_release`` converted at ``delta``).
    **Not publishable**: ``rdp_data_dependent`` and ``smooth_sensitivity`` (functions of the votes).
    """

    order: float
    beta: float
    sigma_ss: float
    delta: float
    rdp_data_dependent: float
    smooth_sensitivity: float
    rdp_noisy: float
    rdp_fixed: float
    rdp_release: float
    epsilon_released: float


def release_gnmax_cost(counts: Any, sigma: float, order: float, beta: float, sigma_ss: float, delta: float,
                       rng: np.random.Generator, rdp_fixed: float = 0.0) -> SmoothSensitivityRelease:
    """Release ``sum_i beta(q_i) + SS * N(0, sigma_ss^2)`` over the answered queries' vote histograms
    ``counts`` at order ``lambda``; ``rdp_fixed`` (data-independent part, e.g. Confident-GNMax's check)
    is added as is. Raises :class:`ValidationError` when conditions C5-C6 fail at ``(sigma, m, lambda)``.
    """
    from .pate import _counts, log_q_gnmax  # the layer's own module; imported here to avoid a cycle

    c = _counts(counts)
    s, a = check_real(sigma, "sigma", low=0.0, low_open=True), _order(order)
    b = check_real(beta, "beta", low=0.0, low_open=True)
    ss_sigma = check_real(sigma_ss, "sigma_ss", low=0.0, low_open=True)
    d = check_delta(delta)
    fixed = check_real(rdp_fixed, "rdp_fixed", low=0.0)
    m = c.shape[1]
    lq = log_q_gnmax(c, s)
    n_teachers = int(round(c[0].sum())) if len(c) else 1
    if np.any(np.abs(c.sum(axis=1) - n_teachers) > 1e-9):
        raise ValidationError("every query must have the same number of votes", parameter="counts")
    c5, c6 = check_smooth_sensitivity_conditions(s, m, a, n_teachers)
    if not (c5 and c6):
        raise ValidationError(f"conditions C5-C6 of Papernot et al. (2018) fail at sigma={s:g}, m={m}, order={a:g}: "
                              f"the smooth-sensitivity release is not available there (choose another order)",
                              parameter="order")
    cost = float(rdp_gnmax_at_q(lq, s, a).sum())
    ss = smooth_sensitivity(local_sensitivity_at_distance_gnmax(lq, s, m, a), b) if len(c) else 0.0
    noisy = cost + ss * float(rng.normal(scale=ss_sigma))
    rel = float(rdp_gnss([a], b, ss_sigma)[0])
    eps, _ = rdp_to_epsilon(np.array([a]), np.array([max(noisy, 0.0) + fixed + rel]), d)
    return SmoothSensitivityRelease(a, b, ss_sigma, d, cost, ss, noisy, fixed, rel, eps)
