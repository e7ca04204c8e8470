"""``hh_pem``: PEM (Wang, Li, Jha, TDSC 2019) reports, shuffled, calibrated for a central target."""

from __future__ import annotations

from typing import Any

from ...local.heavy_hitters import PrefixExtendingMethod
from ..base import Protocol
from ._base import ShuffledHeavyHitters

__all__ = ["ShuffledPEM", "PROTOCOLS"]


class ShuffledPEM(ShuffledHeavyHitters):
    """``hh_pem``: :class:`~shuffledp.local.heavy_hitters.PrefixExtendingMethod` at the amplified
    local epsilon (:class:`~._base.ShuffledHeavyHitters`); ``d`` (integers in ``[0, d)``, default
    2^16) or ``alphabet``/``max_length`` (words); ``k``, ``eta``, ``oracle``, ``oracle_params``,
    ``max_domain``, ``hash_seed`` as in the local mechanism."""

    name = "hh_pem"
    mechanism_class = PrefixExtendingMethod

    def __init__(self, epsilon: float, delta: float, n: int, d: int = 1 << 16, k: int = 16, eta: int = 4,
                 oracle: str = "olh", oracle_params: dict[str, Any] | None = None, alphabet: str | None = None,
                 max_length: int | None = None, max_domain: int = 4096, hash_seed: int | None = None) -> None:
        enc = self._setup(epsilon, delta, n, d, alphabet, max_length)
        self.mechanism = PrefixExtendingMethod(self.eps_l, k=k, eta=eta, oracle=oracle, oracle_params=oracle_params,
                                               max_domain=max_domain, hash_seed=hash_seed, **enc)


PROTOCOLS: dict[str, type[Protocol]] = {"hh_pem": ShuffledPEM}
