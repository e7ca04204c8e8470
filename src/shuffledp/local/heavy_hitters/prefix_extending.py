"""PEM, the prefix extending method for heavy hitters over a large or unknown domain.

Source: Tianhao Wang, Ninghui Li, Somesh Jha, "Locally Differentially Private Heavy Hitter
Identification", IEEE TDSC 2019 (arXiv 1708.06674).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.validation import check_positive_int
from ._common import log2_ceil, make_codec
from ._prefix import DEFAULT_MAX_DOMAIN, PrefixTreeMechanism

__all__ = ["PrefixExtendingMethod"]

#: Largest number of candidates evaluated at one level (``k 2^eta``, or ``2^{t_0}`` first).
MAX_CANDIDATES = 1 << 20


class PrefixExtendingMethod(PrefixTreeMechanism):
    """PEM (Wang, Li, Jha, TDSC 2019): eps-LDP top-``k`` discovery by prefix extension.

    Values are ``B``-bit codes (words through :class:`~._common.StringCodec`, or integers in
    ``[0, 2^bits)``). Levels have prefix lengths ``t_0 = ceil(log2 k) + eta``,
    ``t_i = min(B, t_0 + i eta)``, ``G = 1 + ceil((B - t_0) / eta)`` levels.

    Client: draw a level ``i`` uniformly (independently of the value), report the ``t_i``-bit
    prefix through level ``i``'s frequency oracle (any of the registry, OLH by default) **with the
    full epsilon**; prefixes longer than ``log2 max_domain`` bits are first mapped by a public
    universal hash into ``[0, max_domain)``. Fields ``{"level", <oracle fields>}``.

    Server: level 0's candidates are all ``2^{t_0}`` prefixes; the ``k`` with the largest
    estimates survive; level ``i``'s candidates are the survivors extended by every ``eta``-bit
    suffix (``k 2^eta``, fewer bits at the last level), and again the top ``k`` survive
    (candidates that cannot be the prefix of an encoded word are dropped). The output is the last
    level's top ``k`` with counts ``n f_i`` (``f_i`` the oracle's fraction estimate among level
    ``i``'s ``n_i`` users: unbiased for the population fraction since levels are drawn
    independently of the values, up to the domain-reduction hash's collisions) and stderr
    ``n`` times the oracle's.

    Privacy: one report per user through one level's oracle: ``max_i eps_i``-LDP with ``eps_i``
    the oracle's effective epsilon (``<= epsilon``); the level is a data-independent coin, so
    ``Pr[y | x] = (1/G) Pr_i[y_i | map_i(x)]`` and the ratio is the oracle's.

    Parameters
    ----------
    epsilon : float
        Local privacy parameter, > 0.
    k : int
        Number of heavy hitters wanted (>= 1).
    eta : int
        Bits added per level (>= 1); ``k 2^eta <= 2^20``.
    oracle : str
        Registry name of the frequency oracle (default ``"olh"``); ``oracle_params`` its extra
        parameters.
    alphabet, max_length : str, int
        Words over ``alphabet`` padded to ``max_length`` symbols (default a-z, 10).
    bits : int, optional
        Integer values in ``[0, 2^bits)`` instead of words.
    max_domain : int
        Largest oracle domain per level (default 4096): longer prefixes are hashed into it.
    hash_seed : int, optional
        Seed of the public hashes (drawn from the OS when omitted).
    hash_copies : int
        Independent hashes per hashed level (default 2), users split among them by a coin; a
        candidate sharing its bucket with another under one hash is estimated from the others
        (:mod:`._prefix`).
    """

    name = "pem"
    title = "PEM"

    def __init__(self, epsilon: float, k: int = 16, eta: int = 4, oracle: str = "olh",
                 oracle_params: dict[str, Any] | None = None, alphabet: str | None = None,
                 max_length: int | None = None, bits: int | None = None, max_domain: int = DEFAULT_MAX_DOMAIN,
                 hash_seed: int | None = None, hash_copies: int = 2) -> None:
        super().__init__(epsilon)
        self.codec = make_codec(alphabet, max_length, bits)
        self.k = check_positive_int(k, "k")
        self.eta = check_positive_int(eta, "eta")
        B = self.codec.bits
        if self.k * (1 << min(self.eta, 40)) > MAX_CANDIDATES:
            raise ValidationError(f"k * 2^eta must be <= 2^20 candidates per level, got k={self.k}, eta={self.eta}",
                                  parameter="eta")
        t0 = min(B, log2_ceil(self.k) + self.eta)
        lengths = [t0]
        while lengths[-1] < B:
            lengths.append(min(B, lengths[-1] + self.eta))
        self._init_levels(lengths, oracle, oracle_params, max_domain, hash_seed, hash_copies)

    def estimate(self, statistic: np.ndarray, n: int | None = None) -> Estimate:
        """The top-``k`` items of the last level with their estimated counts (module docstring)."""
        stat = np.asarray(statistic)
        users = self.group_users(stat)
        level_users = self.levels.level_users(users)
        B = self.codec.bits
        survivors = np.zeros(1, dtype=np.int64)
        prev = 0
        evaluated = 0
        for i, t in enumerate(self.levels.lengths):  # one oracle estimate per level
            step = t - prev
            cand = ((survivors[:, None] << step) | np.arange(1 << step, dtype=np.int64)[None, :]).ravel()
            cand = cand[self.codec.valid_prefixes(cand, t)]
            evaluated += cand.size
            f, s = self.levels.estimate_level(i, lambda g: self._piece(stat, g), users, cand)
            order = np.argsort(-f, kind="stable")[:self.k]
            survivors, f, s = cand[order], f[order], s[order]
            prev = t
        assert prev == B
        return Estimate(f * n, s * n, n, self.privacy(), "count", labels=self._labels(survivors),
                        extra={"method": "pem", "oracle": self.levels.oracle_name, "levels": self.levels.G,
                               "lengths": self.lengths, "candidates_evaluated": int(evaluated),
                               "users_per_level": level_users.tolist(), "hash_seed": self.hash_seed})

    def __repr__(self) -> str:
        return (f"PrefixExtendingMethod(epsilon={self.epsilon:g}, k={self.k}, eta={self.eta}, "
                f"oracle={self.levels.oracle_name!r}, levels={self.levels.G})")
