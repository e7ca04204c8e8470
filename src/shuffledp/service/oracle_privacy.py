"""The guarantee of a local-oracle task's batch: eps0-LDP reports amplified by shuffling.

A task that names a local oracle (``mechanism``) releases each shuffled batch of ``n`` eps0-LDP
reports; its central epsilon is the numerical clone bound of Feldman, McMillan and Talwar,
"Hiding among the clones" (FOCS 2021), via :func:`shuffledp.accounting.shuffle_amplification`
(``method="clones"``), valid for every eps0-LDP randomizer (replace-one neighbouring). Outside
the bound's domain no amplification is claimed (eps_c = eps0: the shuffled multiset is a
post-processing of eps0-LDP reports). A task that names a registry protocol states
``protocol.privacy(n)`` instead (``service.analyzer.protocol_statement``).

Group privacy (several reports of one user in one release) is
:func:`shuffledp.accounting.group_privacy` and its log-space form
:func:`shuffledp.accounting.group_privacy_log_delta`.
"""

from __future__ import annotations

import math

from ..core.errors import OutOfDomainError, ValidationError

__all__ = ["central_epsilon", "min_batch_size", "group_bound", "group_log_delta", "ACCOUNTANT"]

ACCOUNTANT = "shuffledp.accounting"


def central_epsilon(eps0: float, n: int, delta: float) -> tuple[float, str]:
    """eps_c of a shuffled batch of ``n`` eps0-LDP reports at ``delta``; returns (eps_c, method)."""
    if not math.isfinite(eps0):
        return math.inf, "no local randomization (test mechanism): no privacy"
    from ..accounting import shuffle_amplification
    if n < 1:
        return eps0, "no reports"
    try:  # FMT21 numerical clone bound: valid for every eps0-LDP randomizer
        eps = float(shuffle_amplification(eps0, n, delta, method="clones"))
    except OutOfDomainError:
        return eps0, f"{ACCOUNTANT}: outside the bound's domain, no amplification claimed"
    return min(eps, eps0), f"{ACCOUNTANT} (clones)"


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
    from ..accounting import min_users_for
    try:
        n = int(min_users_for(eps0, eps_c, delta, method="clones"))
    except OutOfDomainError as e:
        raise ValidationError(f"target eps_c={eps_c} at delta={delta} is unreachable from eps0={eps0}: {e}",
                              parameter="target_central") from e
    if n > n_max:
        raise ValidationError(f"target eps_c={eps_c} at delta={delta} is unreachable from eps0={eps0} with "
                              f"at most {n_max} reports per batch (needs {n})", parameter="target_central")
    return n


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
