"""(eps, delta) algebra: basic and advanced composition, subsampling, group privacy, Gaussian profiles.

Every function returns the *mathematical* value; the accountants and the public statement
helpers round epsilons outward with :func:`shuffledp.core.privacy.round_up`.
"""

from __future__ import annotations

import math
from typing import Sequence

from scipy import optimize, special

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_delta, check_positive_int, check_probability, check_real

__all__ = [
    "basic_composition",
    "parallel_composition",
    "advanced_composition",
    "subsampling_amplification",
    "group_privacy",
    "gaussian_delta_exact",
    "gaussian_epsilon_exact",
    "gaussian_epsilon_classic",
]


def basic_composition(statements: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Sequential composition: ``(sum eps_i, sum delta_i)`` (Dwork et al. 2006; seed 003 Thm 3)."""
    eps = math.fsum(e for e, _ in statements)
    delta = math.fsum(d for _, d in statements)
    return eps, min(delta, 1.0)


def parallel_composition(statements: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Parallel composition on disjoint parts of the data: ``(max eps_i, max delta_i)``
    (McSherry 2009). Valid when each user's record influences exactly one part."""
    if not statements:
        return 0.0, 0.0
    return max(e for e, _ in statements), max(d for _, d in statements)


def advanced_composition(epsilons: Sequence[float], delta_prime: float) -> float:
    """Dwork–Rothblum–Vadhan advanced composition (FOCS 2010, Thm III.3; heterogeneous form).

    k mechanisms, the i-th (eps_i, delta_i)-DP, adaptively composed are
    ``(sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1),  sum delta_i + delta')``-DP.
    This returns the epsilon part; the caller accounts for ``sum delta_i + delta'``.
    For k identical mechanisms: ``sqrt(2k ln(1/delta')) eps0 + k eps0 (e^eps0 - 1)``.
    """
    delta_prime = check_delta(delta_prime, "delta_prime")
    s2 = math.fsum(e * e for e in epsilons)
    s1 = math.fsum(e * math.expm1(e) for e in epsilons)
    return math.sqrt(2.0 * math.log(1.0 / delta_prime) * s2) + s1


def subsampling_amplification(epsilon: float, delta: float, q: float) -> tuple[float, float]:
    """Privacy amplification by subsampling: an (eps, delta)-DP mechanism run on a subsample is
    ``(log(1 + q (e^eps - 1)), q delta)``-DP (seed 003 Thm 10; Balle, Barthe, Gaboardi 2018).

    Holds for Poisson sampling with rate q under add/remove-one neighbours and for sampling
    m of N records without replacement (q = m/N) under replace-one neighbours.
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    delta = check_delta(delta, allow_zero=True)
    q = check_probability(q, "q")
    return math.log1p(q * math.expm1(epsilon)), q * delta


def group_privacy(statement: PrivacyStatement | tuple[float, float], k: int) -> PrivacyStatement:
    """Group privacy (seed 003 Thm 5; Dwork–Roth 2014 Thm 2.2 / Lemma 2.2 for approximate DP).

    An (eps, delta)-DP guarantee for neighbours differing in one record gives, for datasets
    differing in ``k`` records, ``(k eps, k e^{(k-1) eps} delta)``; pure eps-DP gives ``k eps``.
    The returned statement keeps the model and neighbouring relation of the input.
    """
    k = check_positive_int(k, "k")
    if isinstance(statement, PrivacyStatement):
        eps, delta = statement.eps, statement.delta
        model, nb = statement.model, statement.neighbouring
    else:
        eps, delta = statement
        model, nb = "central", "replace_one"
    eps_k = round_up(k * eps)
    if delta == 0.0:
        delta_k = 0.0
    else:
        log_d = math.log(k) + (k - 1) * eps + math.log(delta)
        delta_k = math.exp(log_d) if log_d < 0 else 1.0
        if delta_k >= 1.0:
            raise ValidationError(f"group privacy for k={k} gives delta >= 1 (no guarantee); "
                                  "use a smaller group or a tighter per-record delta", parameter="k")
        delta_k = round_up(delta_k)
    return PrivacyStatement(eps_k, delta_k, model=model, neighbouring=nb, note=f"group privacy, group size {k}")


# --------------------------------------------------------------------------- Gaussian profiles


def gaussian_delta_exact(epsilon: float, mu: float) -> float:
    """Exact privacy profile of the Gaussian mechanism with ``mu = sensitivity / sigma``
    (Balle & Wang, ICML 2018, Thm 8):
    ``delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)``.
    k-fold composition is the same formula with ``mu * sqrt(k)``."""
    if mu <= 0:
        return 0.0
    a = special.log_ndtr(mu / 2 - epsilon / mu)
    b = epsilon + special.log_ndtr(-mu / 2 - epsilon / mu)
    if b >= a:
        return 0.0
    return float(math.exp(a) * -math.expm1(b - a))


def gaussian_epsilon_exact(delta: float, mu: float) -> float:
    """Smallest eps with :func:`gaussian_delta_exact` ``<= delta`` (root found by Brent, then
    moved up to a point that satisfies the inequality). Not rounded."""
    delta = check_delta(delta)
    if gaussian_delta_exact(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta_exact(hi, mu) > delta:
        hi *= 2.0
    root = optimize.brentq(lambda e: gaussian_delta_exact(e, mu) - delta, 0.0, hi, xtol=1e-14, rtol=1e-13)
    e = root
    for _ in range(200):  # make sure the returned value really satisfies delta(e) <= delta
        if gaussian_delta_exact(e, mu) <= delta:
            break
        e = math.nextafter(e + 1e-13 * max(e, 1.0), math.inf)
    return e


def gaussian_epsilon_classic(delta: float, sigma: float, sensitivity: float = 1.0) -> float | None:
    """Classic Gaussian calibration inverted: ``eps = sensitivity sqrt(2 ln(1.25/delta)) / sigma``
    (Dwork–Roth 2014 Thm A.1; seed 003 Thm 6). The proof needs eps < 1; returns ``None`` otherwise."""
    delta = check_delta(delta)
    eps = sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / sigma
    return eps if eps < 1.0 else None




