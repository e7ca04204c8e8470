"""(eps, delta) algebra: basic and advanced composition, subsampling, group privacy, Gaussian profiles.

Every public function validates its inputs (:class:`~shuffledp.core.errors.ValidationError` naming
the parameter) and returns epsilons rounded outward with :func:`shuffledp.core.privacy.round_up`
(the package-wide promise, ``accounting/__init__.py``). :func:`parallel_composition` returns the
largest input epsilon unchanged: a maximum involves no float arithmetic to round.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from scipy import optimize, special

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import _is_real_scalar, check_delta, check_positive_int, check_probability, check_real

__all__ = [
    "group_privacy_or_none",
    "basic_composition",
    "parallel_composition",
    "advanced_composition",
    "subsampling_amplification",
    "group_privacy",
    "group_privacy_log_delta",
    "gaussian_delta_exact",
    "gaussian_epsilon_exact",
    "gaussian_epsilon_classic",
]


def _as_parameter(parameter: str, check: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a validator on one element of a sequence; its ValidationError keeps the element's
    message (e.g. ``statements[1].epsilon must ...``) but names the public parameter."""
    try:
        return check(*args, **kwargs)
    except ValidationError as err:
        raise ValidationError(str(err), parameter=parameter) from None


def _check_statement_eps(e: Any, name: str) -> float:
    """A statement's epsilon: a real >= 0; ``+inf`` ("no guarantee", as in PrivacyStatement) is kept."""
    if _is_real_scalar(e) and float(e) == math.inf:
        return math.inf
    return check_real(e, name, low=0.0)


def _check_statements(statements: Any, name: str = "statements") -> list[tuple[float, float]]:
    """A sequence of (eps, delta) pairs: eps >= 0 (inf allowed), delta in [0, 1)."""
    if isinstance(statements, (str, bytes)) or not isinstance(statements, Iterable):
        raise ValidationError(f"{name} must be a sequence of (epsilon, delta) pairs, got {statements!r}",
                              parameter=name)
    out: list[tuple[float, float]] = []
    for i, st in enumerate(statements):
        if isinstance(st, PrivacyStatement):
            st = (st.eps, st.delta)
        try:
            e, d = st
        except (TypeError, ValueError):
            raise ValidationError(f"{name}[{i}] must be an (epsilon, delta) pair, got {st!r}",
                                  parameter=name) from None
        out.append((_as_parameter(name, _check_statement_eps, e, f"{name}[{i}].epsilon"),
                    _as_parameter(name, check_delta, d, f"{name}[{i}].delta", allow_zero=True)))
    return out


def basic_composition(statements: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Sequential composition: ``(sum eps_i, sum delta_i)`` (Dwork, Kenthapadi, McSherry, Mironov, Naor, EUROCRYPT 2006; Dwork–Roth 2014 Thm 3.16).

    Each eps_i must be >= 0 (``inf`` allowed) and each delta_i in [0, 1); epsilon rounded up."""
    pairs = _check_statements(statements)
    eps = math.fsum(e for e, _ in pairs)
    delta = math.fsum(d for _, d in pairs)
    return round_up(eps), min(delta, 1.0)


def parallel_composition(statements: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Parallel composition on disjoint parts of the data: ``(max eps_i, max delta_i)``
    (McSherry 2009). Valid when each user's record influences exactly one part.
    Inputs validated as in :func:`basic_composition`; the maximum is exact (not rounded)."""
    pairs = _check_statements(statements)
    if not pairs:
        return 0.0, 0.0
    return max(e for e, _ in pairs), max(d for _, d in pairs)


def advanced_composition(epsilons: Sequence[float], delta_prime: float) -> float:
    """Dwork–Rothblum–Vadhan advanced composition (FOCS 2010, Thm III.3; heterogeneous form).

    k mechanisms, the i-th (eps_i, delta_i)-DP, adaptively composed are
    ``(sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1),  sum delta_i + delta')``-DP.
    This returns the epsilon part; the caller accounts for ``sum delta_i + delta'``.
    For k identical mechanisms: ``sqrt(2k ln(1/delta')) eps0 + k eps0 (e^eps0 - 1)``.
    Each eps_i must be a finite real >= 0; the result is rounded up.
    """
    delta_prime = check_delta(delta_prime, "delta_prime")
    if isinstance(epsilons, (str, bytes)) or not isinstance(epsilons, Iterable):
        raise ValidationError(f"epsilons must be a sequence of reals >= 0, got {epsilons!r}", parameter="epsilons")
    eps = [_as_parameter("epsilons", check_real, e, f"epsilons[{i}]", low=0.0) for i, e in enumerate(epsilons)]
    s2 = math.fsum(e * e for e in eps)
    s1 = math.fsum(e * math.expm1(e) for e in eps)
    return round_up(math.sqrt(2.0 * math.log(1.0 / delta_prime) * s2) + s1)


def subsampling_amplification(epsilon: float, delta: float, q: float) -> tuple[float, float]:
    """Privacy amplification by subsampling: an (eps, delta)-DP mechanism run on a subsample is
    ``(log(1 + q (e^eps - 1)), q delta)``-DP (Balle, Barthe, Gaboardi, "Privacy amplification by subsampling: tight analyses via couplings and
    divergences", NeurIPS 2018).

    Holds for Poisson sampling with rate q under add/remove-one neighbours and for sampling
    m of N records without replacement (q = m/N) under replace-one neighbours.
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    delta = check_delta(delta, allow_zero=True)
    q = check_probability(q, "q")
    return round_up(math.log1p(q * math.expm1(epsilon))), q * delta


def group_privacy(statement: PrivacyStatement | tuple[float, float], k: int) -> PrivacyStatement:
    """Group privacy (Dwork–Roth 2014 Thm 2.2 / Lemma 2.2 for approximate DP).

    An (eps, delta)-DP guarantee for neighbours differing in one record gives, for datasets
    differing in ``k`` records, ``(k eps, k e^{(k-1) eps} delta)``; pure eps-DP gives ``k eps``.
    The returned statement keeps the model and neighbouring relation of the input.
    """
    k = check_positive_int(k, "k")
    if isinstance(statement, PrivacyStatement):
        eps, delta = statement.eps, statement.delta
        model, nb = statement.model, statement.neighbouring
    else:
        ((eps, delta),) = _check_statements([statement], "statement")
        model, nb = "central", "replace_one"
    eps_k = round_up(k * eps)
    if delta == 0.0:
        delta_k = 0.0
    else:
        log_d = group_privacy_log_delta(eps, delta, k)
        delta_k = math.exp(log_d) if log_d < 0 else 1.0
        if delta_k >= 1.0:
            raise ValidationError(f"group privacy for k={k} gives delta >= 1 (no guarantee); "
                                  "use a smaller group or a tighter per-record delta", parameter="k")
        delta_k = round_up(delta_k)
    return PrivacyStatement(eps_k, delta_k, model=model, neighbouring=nb, note=f"group privacy, group size {k}")


def group_privacy_log_delta(epsilon: float, delta: float, k: int) -> float:
    """Natural log of the group-privacy delta ``k e^{(k-1) eps} delta`` (see :func:`group_privacy`).

    Computed as ``ln k + (k-1) eps + ln delta`` and moved up by one ulp, so it never overflows and
    never understates the bound; ``-inf`` when ``delta == 0`` (pure DP stays pure), ``+inf`` when
    ``eps`` is infinite and ``delta > 0``. A result ``>= 0`` means the group statement is vacuous
    (delta >= 1). ``epsilon`` must be a real >= 0 (``inf`` allowed), ``delta`` in [0, 1), ``k >= 1``.
    """
    k = check_positive_int(k, "k")
    ((eps, delta),) = _check_statements([(epsilon, delta)], "statement")
    if delta == 0.0:
        return -math.inf
    if math.isinf(eps):
        return math.inf
    return math.nextafter(math.log(k) + (k - 1) * eps + math.log(delta), math.inf)


# --------------------------------------------------------------------------- Gaussian profiles


def gaussian_delta_exact(epsilon: float, mu: float) -> float:
    """Exact privacy profile of the Gaussian mechanism with ``mu = sensitivity / sigma``
    (Balle & Wang, ICML 2018, Thm 8):
    ``delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)``.
    k-fold composition is the same formula with ``mu * sqrt(k)``.
    ``epsilon`` must be a finite real >= 0 and ``mu`` a finite real >= 0 (``mu = 0``: no leak, 0)."""
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    mu = check_real(mu, "mu", low=0.0)
    if mu == 0.0:
        return 0.0
    a = special.log_ndtr(mu / 2 - epsilon / mu)
    b = epsilon + special.log_ndtr(-mu / 2 - epsilon / mu)
    if b >= a:
        return 0.0
    return float(math.exp(a) * -math.expm1(b - a))


def gaussian_epsilon_exact(delta: float, mu: float) -> float:
    """Smallest eps with :func:`gaussian_delta_exact` ``<= delta`` (root found by Brent, then
    moved up to a point that satisfies the inequality), then rounded up (which keeps it valid:
    delta(eps) is non-increasing)."""
    delta = check_delta(delta)
    mu = check_real(mu, "mu", low=0.0)
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
    return round_up(e)


def gaussian_epsilon_classic(delta: float, sigma: float, sensitivity: float = 1.0) -> float | None:
    """Classic Gaussian calibration inverted: ``eps = sensitivity sqrt(2 ln(1.25/delta)) / sigma``
    (Dwork–Roth 2014 Thm A.1). The proof needs eps < 1; returns ``None`` otherwise.
    ``sigma`` and ``sensitivity`` must be finite reals > 0; the epsilon is rounded up."""
    delta = check_delta(delta)
    sigma = check_real(sigma, "sigma", low=0.0, low_open=True)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
    eps = round_up(sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / sigma)
    return eps if eps < 1.0 else None


def group_privacy_or_none(epsilon: float, delta: float, k: int) -> tuple[float, float] | None:
    """``(k eps, k e^{(k-1) eps} delta)`` for ``k`` reports of one user (:func:`group_privacy`,
    epsilon rounded up), or ``None`` when that delta is ``>= 1`` (no guarantee); ``epsilon`` may be
    ``inf`` (then ``None`` unless ``delta = 0``)."""
    if group_privacy_log_delta(epsilon, delta, k) >= 0:
        return None
    st = group_privacy((epsilon, delta), k)
    return st.eps, st.delta

