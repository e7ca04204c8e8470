"""``hh_treehist``: TreeHist (Bassily, Nissim, Stemmer, Thakurta, NeurIPS 2017) reports, shuffled,
calibrated for a central target."""

from __future__ import annotations

from typing import Any

from ...local.heavy_hitters import TreeHist
from ..base import Protocol
from ._base import ShuffledHeavyHitters

__all__ = ["ShuffledTreeHist", "PROTOCOLS"]


class ShuffledTreeHist(ShuffledHeavyHitters):
    """``hh_treehist``: :class:`~shuffledp.local.heavy_hitters.TreeHist` at the amplified local
    epsilon (:class:`~._base.ShuffledHeavyHitters`); ``d`` (integers in ``[0, d)``, default 2^16) or
    ``alphabet``/``max_length`` (words); ``oracle``, ``oracle_params``, ``bits_per_level``,
    ``beta``, ``max_candidates``, ``k``, ``max_domain``, ``hash_seed`` as in the local mechanism."""

    name = "hh_treehist"
    mechanism_class = TreeHist

    def __init__(self, epsilon: float, delta: float, n: int, d: int = 1 << 16, oracle: str = "olh",
                 oracle_params: dict[str, Any] | None = None, alphabet: str | None = None,
                 max_length: int | None = None, bits_per_level: int | None = None, beta: float = 0.05,
                 max_candidates: int = 64, k: int | None = None, max_domain: int = 4096,
                 hash_seed: int | None = None) -> None:
        enc = self._setup(epsilon, delta, n, d, alphabet, max_length)
        self.mechanism = TreeHist(self.eps_l, oracle=oracle, oracle_params=oracle_params,
                                  bits_per_level=bits_per_level, beta=beta, max_candidates=max_candidates, k=k,
                                  max_domain=max_domain, hash_seed=hash_seed, **enc)


PROTOCOLS: dict[str, type[Protocol]] = {"hh_treehist": ShuffledTreeHist}
