"""Noise calibration: from (eps, delta, sensitivity) to a noise parameter, and back.

- Gaussian: classic (Dwork–Roth Thm A.1, eps < 1 only) and analytic (Balle & Wang, ICML 2018,
  Thm 8: the exact condition Phi(D/2s - e s/D) - e^e Phi(-D/2s - e s/D) <= delta, solved by
  bisection). Reference: sigma = 3.7306 at eps = 1, delta = 1e-5, D = 1.
- Discrete Gaussian: exact delta by Canonne–Kamath–Steinke 2020 Thm 7,
  delta = P[Y > e s^2/D - D/2] - e^e P[Y > e s^2/D + D/2], summed exactly for moderate sigma
  and bounded rigorously (integral comparison) for very large sigma.
- Binomial mechanism (survey Thm 6): the survey's sufficient number of trials and the exact
  hockey-stick delta of Bin(N, 1/2) against its shift, with the minimal N meeting a target.

Every search returns the conservative end (larger sigma / N), and reported privacy parameters
are rounded up with :func:`shuffledp.core.round_up`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from ..core.errors import OutOfDomainError
from ..core.privacy import round_up
from ..core.validation import check_delta, check_epsilon, check_positive_int, check_real

__all__ = [
    "classic_gaussian_sigma",
    "gaussian_delta",
    "analytic_gaussian_sigma",
    "gaussian_epsilon",
    "discrete_gaussian_delta",
    "discrete_gaussian_epsilon",
    "discrete_gaussian_sigma",
    "binomial_trials_survey",
    "binomial_delta",
    "binomial_minimal_trials",
    "check_sensitivity",
]


def check_sensitivity(sensitivity: object, name: str = "sensitivity", *, integer: bool = False) -> float | int:
    """A sensitivity: a finite number > 0 (an integer >= 1 where ``integer``)."""
    if integer:
        return check_positive_int(sensitivity, name)
    return check_real(sensitivity, name, low=0.0, low_open=True)


# --------------------------------------------------------------------------------------------
# Gaussian
# --------------------------------------------------------------------------------------------

def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """sigma = D sqrt(2 ln(1.25/delta)) / eps (Dwork & Roth 2014, Thm A.1); valid for eps < 1."""
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    d = check_sensitivity(sensitivity)
    if eps >= 1.0:
        raise OutOfDomainError(f"the classic Gaussian calibration needs epsilon < 1, got {eps!r}; "
                               "use calibration='analytic'", parameter="epsilon")
    return round_up(d * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps)


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact delta(eps) of the Gaussian mechanism (Balle & Wang 2018, Thm 8)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = special.ndtr(a - b)
    second = math.exp(epsilon + special.log_ndtr(-a - b))
    return max(0.0, float(first - second))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest sigma with :func:`gaussian_delta` <= delta (Balle & Wang 2018, Alg. 1 by bisection).

    Bisection on sigma (delta is decreasing in sigma) to a relative width of 1e-13; returns the
    upper end, so the guarantee holds at the returned sigma.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    d = check_sensitivity(sensitivity)
    lo, hi = d * 1e-3, d
    while gaussian_delta(hi, eps, d) > dlt:
        lo, hi = hi, hi * 2.0
    while gaussian_delta(lo, eps, d) <= dlt:
        lo = lo / 2.0
    while hi - lo > 1e-13 * hi:
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mid, eps, d) <= dlt:
            hi = mid
        else:
            lo = mid
    return hi


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest eps with :func:`gaussian_delta`(sigma, eps) <= delta (rounded up)."""
    dlt = check_delta(delta)
    return _epsilon_by_bisection(lambda e: gaussian_delta(sigma, e, sensitivity), dlt)


def _epsilon_by_bisection(delta_of_eps, target: float) -> float:
    if delta_of_eps(0.0) <= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while delta_of_eps(hi) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            return math.inf
    while hi - lo > 1e-12 * max(hi, 1e-300):
        mid = 0.5 * (lo + hi)
        if delta_of_eps(mid) <= target:
            hi = mid
        else:
            lo = mid
    return round_up(hi)


# --------------------------------------------------------------------------------------------
# Discrete Gaussian
# --------------------------------------------------------------------------------------------

_DG_EXACT_MAX_SIGMA = 1e4


def _dg_tail_exact(sigma: float, threshold: float) -> float:
    """P[Y > threshold] for Y ~ N_Z(0, sigma^2), summed over the integers (sigma <= 1e4)."""
    half = int(math.ceil(40.0 * sigma)) + 10
    z = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-z * z / (2.0 * sigma * sigma))
    norm = w.sum()
    m = math.floor(threshold) + 1
    return float(w[z >= m].sum() / norm)


def _dg_upper_tail_bounds(sigma: float, m: int) -> tuple[float, float]:
    """Rigorous (lower, upper) bounds on P[Y >= m], Y ~ N_Z(0, sigma^2), integer m >= 0.

    With f(x) = exp(-x^2/2s^2) and the normaliser sqrt(2 pi) s (1 + 2 sum_k exp(-2 pi^2 s^2 k^2)),
    which is sqrt(2 pi) s in double precision for s >= 1 (Poisson summation):
    where f is convex on [m - 1/2, inf) (m >= s + 1/2), Hermite–Hadamard gives
    int_m^inf f + f(m)/2 <= sum_{z >= m} f(z) <= int_{m - 1/2}^inf f (a gap of order f'(m));
    otherwise, f decreasing gives int_m^inf f <= sum <= f(m) + int_m^inf f.
    """
    root = math.sqrt(2.0 * math.pi) * sigma
    fm = math.exp(-m * m / (2.0 * sigma * sigma)) / root
    lower = float(stats.norm.sf(m / sigma))
    if m >= sigma + 0.5:
        return lower + 0.5 * fm, min(1.0, float(stats.norm.sf((m - 0.5) / sigma)))
    return lower, min(1.0, lower + fm)


def _dg_tail_bounds(sigma: float, threshold: float) -> tuple[float, float]:
    """Rigorous (lower, upper) bounds on P[Y > threshold] for large sigma (negative thresholds
    by symmetry: P[Y > t] = 1 - P[Y >= 1 - m] with m = floor(t) + 1)."""
    m = math.floor(threshold) + 1
    if m >= 0:
        return _dg_upper_tail_bounds(sigma, m)
    lo_k, hi_k = _dg_upper_tail_bounds(sigma, 1 - m)
    return 1.0 - hi_k, 1.0 - lo_k


def discrete_gaussian_delta(sigma: float, epsilon: float, sensitivity: int = 1) -> float:
    """delta(eps) of adding N_Z(0, sigma^2) to an integer query with sensitivity D (CKS20 Thm 7).

    Exact summation for sigma <= 1e4 (float sums, relative error ~1e-13); above that an upper
    bound from :func:`_dg_tail_bounds` (tails by Hermite–Hadamard integral comparison; its slack
    is of order the pmf's slope at the thresholds, relative O(eps/D) or smaller).
    """
    s2 = sigma * sigma
    a = epsilon * s2 / sensitivity - sensitivity / 2.0
    b = epsilon * s2 / sensitivity + sensitivity / 2.0
    if sigma <= _DG_EXACT_MAX_SIGMA:
        val = _dg_tail_exact(sigma, a) - math.exp(epsilon) * _dg_tail_exact(sigma, b)
    else:
        val = _dg_tail_bounds(sigma, a)[1] - math.exp(epsilon) * _dg_tail_bounds(sigma, b)[0]
    return max(0.0, val)


def discrete_gaussian_epsilon(sigma: float, delta: float, sensitivity: int = 1) -> float:
    """Smallest eps with :func:`discrete_gaussian_delta` <= delta (rounded up).

    Reference values (D = 1, delta = 1e-5): sigma 1 -> 4.4302, 2 -> 2.0113,
    5 -> 0.7266.
    """
    dlt = check_delta(delta)
    return _epsilon_by_bisection(lambda e: discrete_gaussian_delta(sigma, e, sensitivity), dlt)


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: int = 1) -> float:
    """A sigma (within 1e-9 relative of the smallest found by bisection) whose exact
    discrete-Gaussian delta at ``epsilon`` is <= ``delta``; verified at the returned value."""
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    d = check_sensitivity(sensitivity, integer=True)
    guess = analytic_gaussian_sigma(eps, dlt, d)
    lo, hi = guess / 1.5, guess * 1.5
    while discrete_gaussian_delta(hi, eps, d) > dlt:
        lo, hi = hi, hi * 2.0
    while discrete_gaussian_delta(lo, eps, d) <= dlt and lo > 1e-6:
        lo /= 2.0
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        if discrete_gaussian_delta(mid, eps, d) <= dlt:
            hi = mid
        else:
            lo = mid
    assert discrete_gaussian_delta(hi, eps, d) <= dlt
    return hi


# --------------------------------------------------------------------------------------------
# Binomial mechanism
# --------------------------------------------------------------------------------------------

_BINOMIAL_EXACT_MAX_TRIALS = 20_000_000


def binomial_trials_survey(epsilon: float, delta: float, sensitivity: int = 1) -> int:
    """The survey's Thm 6 sufficient number of trials, rounded up to an even integer:

    N >= 20 (e^{eps/D} + 1) / (e^{eps/D} - 1)^2 ln(2/delta).

    The survey's formula is [R] (its typesetting was lost); it is checked here by the exact
    :func:`binomial_delta`, which the mechanism reports (e.g. eps = 1, delta = 1e-6, D = 1:
    N = 366, exact delta 1.9e-21).
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    d = check_sensitivity(sensitivity, integer=True)
    e = math.exp(eps / d)
    n = math.ceil(20.0 * (e + 1.0) / (e - 1.0) ** 2 * math.log(2.0 / dlt))
    return n + (n % 2)


def binomial_delta(trials: int, epsilon: float, sensitivity: int = 1) -> float:
    """Exact delta(eps) of adding Bin(N, 1/2) to an integer query with sensitivity D.

    The hockey-stick divergence sum_y max(0, P(y - k) - e^eps P(y)) of the shifted pmf against
    the pmf, maximised over every shift k = 1..D when D (N + 1) <= 5e7, otherwise over
    k = 1..32 and k = D (for this log-concave law delta grows with the shift in every case we
    computed, but that is not proved here); symmetric in direction. Cost O(N) per shift
    (N <= 2e7).
    """
    n = check_positive_int(trials, "trials")
    if n > _BINOMIAL_EXACT_MAX_TRIALS:
        raise OutOfDomainError(f"exact binomial delta is computed for trials <= {_BINOMIAL_EXACT_MAX_TRIALS}, "
                               f"got {n}", parameter="trials")
    if sensitivity * (n + 1) <= 50_000_000:
        shifts = list(range(1, sensitivity + 1))
    else:
        shifts = sorted(set(range(1, min(sensitivity, 32) + 1)) | {sensitivity})
    y = np.arange(0, n + 1, dtype=np.float64)
    logb = stats.binom.logpmf(y, n, 0.5)
    worst = 0.0
    for k in shifts:
        # P1(y) = b(y - k) on y = k..n+k; P0(y) = b(y) (0 beyond n)
        lp1 = logb  # indexed by y - k
        yy = y + k
        lp0 = np.full_like(lp1, -np.inf)
        inside = yy <= n
        lp0[inside] = logb[yy[inside].astype(np.int64)]
        with np.errstate(over="ignore"):
            terms = np.exp(lp1) * -np.expm1(np.minimum(epsilon + lp0 - lp1, 0.0))
        worst = max(worst, float(terms.sum()))
    return worst


def binomial_minimal_trials(epsilon: float, delta: float, sensitivity: int = 1) -> int:
    """The smallest even N whose exact :func:`binomial_delta` is <= delta (binary search).

    delta is non-increasing in N: Bin(N + 1, 1/2) = Bin(N, 1/2) + an independent bit, and adding
    independent noise is post-processing. Reference: eps = 1, delta = 1e-6, D = 1 -> 80.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    d = check_sensitivity(sensitivity, integer=True)
    hi = binomial_trials_survey(eps, dlt, d)
    while binomial_delta(hi, eps, d) > dlt:
        hi *= 2
    lo = 0  # invariant: lo fails (or is 0), hi passes; both even
    while hi - lo > 2:
        mid = (lo + hi) // 2
        mid -= mid % 2
        if mid <= lo:
            break
        if binomial_delta(mid, eps, d) <= dlt:
            hi = mid
        else:
            lo = mid
    return hi
