"""The one place the services call the privacy accountant.

:mod:`shuffledp.accounting` (``shuffle_amplification``/``min_users_for`` with the numerical
``clones`` bound) is used; it is part of the package. Only if it cannot be imported does a
fallback implement the closed-form bound of Feldman, McMillan and Talwar, "Hiding among the
clones" (FOCS 2021, Thm 3.1)::

    eps_c <= ln(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 ln(4/delta) / n) + 8 e^eps0 / n))

valid for ``eps0 <= ln(n / (16 ln(2/delta)))`` and any eps0-LDP randomizer (replace-one
neighbouring). Outside that range no amplification is claimed (eps_c = eps0: the shuffled
multiset is a post-processing of eps0-LDP reports). The closed form is 3-4x looser than the
numerical bound, so minimum batch sizes from the fallback are conservative (larger).

Group privacy (several reports of one user in one release) is
:func:`shuffledp.accounting.group_privacy` and its log-space form
:func:`shuffledp.accounting.group_privacy_log_delta` (no fallback: imported when called).
"""

from __future__ import annotations

import math

from ..core.errors import OutOfDomainError, ValidationError

__all__ = ["central_epsilon", "min_batch_size", "group_bound", "group_log_delta", "ACCOUNTANT"]

try:
    from ..accounting import min_users_for as _min_users_for  # type: ignore
    from ..accounting import shuffle_amplification as _shuffle_amplification  # type: ignore
    ACCOUNTANT = "shuffledp.accounting"
except ImportError:  # pragma: no cover - the fallback below
    _min_users_for = None
    _shuffle_amplification = None
    ACCOUNTANT = "FMT21 closed form (service fallback)"


def _fmt21_closed_form(eps0: float, n: int, delta: float) -> float:
    if n < 2 or eps0 > math.log(n / (16.0 * math.log(2.0 / delta))):
        return eps0
    e = math.exp(eps0)
    x = (e - 1.0) / (e + 1.0) * (8.0 * math.sqrt(e * math.log(4.0 / delta) / n) + 8.0 * e / n)
    return min(eps0, math.log1p(x))


def central_epsilon(eps0: float, n: int, delta: float) -> tuple[float, str]:
    """eps_c of a shuffled batch of ``n`` eps0-LDP reports at ``delta``; returns (eps_c, method)."""
    if not math.isfinite(eps0):
        return math.inf, "no local randomization (test mechanism): no privacy"
    if _shuffle_amplification is not None:
        if n < 1:
            return eps0, "no reports"
        try:  # FMT21 numerical clone bound: valid for every eps0-LDP randomizer
            eps = float(_shuffle_amplification(eps0, n, delta, method="clones"))
        except OutOfDomainError:
            return eps0, f"{ACCOUNTANT}: outside the bound's domain, no amplification claimed"
        return min(eps, eps0), f"{ACCOUNTANT} (clones)"
    return _fmt21_closed_form(eps0, n, delta), ACCOUNTANT


def min_batch_size(eps0: float, eps_c: float, delta: float, n_max: int = 10**8) -> int:
    """Smallest n with eps_c(eps0, n, delta) <= target; ValidationError when unreachable.

    ``n_max`` is the operational cap on a batch (a target needing more reports per batch than any
    window can deliver is treated as unreachable).
    """
    if not (eps_c > 0 and 0 < delta < 1):
        raise ValidationError(f"target central (eps, delta) must have eps > 0 and delta in (0, 1), got "
                              f"({eps_c}, {delta})", parameter="target_central")
    if eps0 <= eps_c:
        return 1
    if not math.isfinite(eps0):
        raise ValidationError("a mechanism without local randomization cannot reach a central target",
                              parameter="target_central")
    if _min_users_for is not None:
        try:
            n = int(_min_users_for(eps0, eps_c, delta, method="clones"))
        except OutOfDomainError as e:
            raise ValidationError(f"target eps_c={eps_c} at delta={delta} is unreachable from eps0={eps0}: {e}",
                                  parameter="target_central") from e
        if n > n_max:
            raise ValidationError(f"target eps_c={eps_c} at delta={delta} is unreachable from eps0={eps0} with "
                                  f"at most {n_max} reports per batch (needs {n})", parameter="target_central")
        return n
    if central_epsilon(eps0, n_max, delta)[0] > eps_c:
        raise ValidationError(f"target eps_c={eps_c} at delta={delta} is unreachable from eps0={eps0} with "
                              f"at most {n_max} reports per batch", parameter="target_central")
    lo, hi = 1, n_max
    while lo < hi:
        mid = (lo + hi) // 2
        if central_epsilon(eps0, mid, delta)[0] <= eps_c:
            hi = mid
        else:
            lo = mid + 1
    return lo


def group_log_delta(eps: float, delta: float, k: int) -> float:
    """``ln(k e^{(k-1) eps} delta)``, the log of the group-privacy delta of ``k`` reports of one user
    (:func:`shuffledp.accounting.group_privacy_log_delta`): finite for any ``k``, ``-inf`` for
    ``delta = 0``; ``>= 0`` means the group statement is vacuous."""
    from ..accounting.composition import group_privacy_log_delta
    return group_privacy_log_delta(eps, delta, k)


def group_bound(eps: float, delta: float, k: int) -> tuple[float, float] | None:
    """``(k eps, k e^{(k-1) eps} delta)`` for ``k`` reports of one user, from
    :func:`shuffledp.accounting.group_privacy` (epsilon rounded up); ``None`` when that delta is
    ``>= 1`` (no guarantee). ``eps`` may be ``inf`` (then ``None`` unless ``delta = 0``)."""
    from ..accounting.composition import group_privacy
    if group_log_delta(eps, delta, k) >= 0:
        return None
    st = group_privacy((eps, delta), k)
    return st.eps, st.delta
