"""TreeHist: heavy hitters by a pruned prefix tree over a frequency oracle.

Source: Raef Bassily, Kobbi Nissim, Uri Stemmer, Abhradeep Thakurta, "Practical Locally Private
Heavy Hitters", NeurIPS 2017 (JMLR 21(16), 2020).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.validation import check_positive_int, check_probability
from ._common import make_codec, normal_quantile
from ._prefix import DEFAULT_MAX_DOMAIN, PrefixTreeMechanism

__all__ = ["TreeHist"]


class TreeHist(PrefixTreeMechanism):
    """TreeHist (Bassily, Nissim, Stemmer, Thakurta 2017): eps-LDP heavy hitters by a prefix tree.

    The ``B``-bit codes (words through :class:`~._common.StringCodec`: one character per level
    by default, so short words are complete at every depth through the padding symbol; or
    integers in ``[0, 2^bits)``, one bit per level by default) are cut in levels of
    ``bits_per_level`` bits: level ``i`` holds prefixes of ``t_i = min(B, (i+1) bits_per_level)``
    bits, ``G = ceil(B / bits_per_level)`` levels.

    Client: a level ``i`` drawn uniformly (independently of the value); the ``t_i``-bit prefix
    reported through level ``i``'s frequency oracle (any of the registry, OLH by default) with the
    full epsilon (public universal hash into ``[0, max_domain)`` when ``2^{t_i} > max_domain``).

    Server (breadth-first search): the candidates of level ``i`` are the previous survivors
    extended by every ``bits_per_level``-bit suffix (valid encodings only); a candidate survives
    when its estimated count ``n f_i`` is at least ``tau_i = z_i n sigma_i``, with ``sigma_i`` the
    standard deviation of a fraction estimate of an item nobody holds among level ``i``'s ``n_i``
    users and ``z_i = Phi^{-1}(1 - beta / (G |C_i|))`` (Bonferroni over the level's ``|C_i|``
    candidates and the ``G`` levels: under the oracle's normal approximation, an item nobody
    holds survives any level with probability at most ``beta`` in all). At most
    ``max_candidates`` survivors (the largest estimates) are kept per level. The output is the last
    level's survivors, largest first (the top ``k`` when ``k`` is given), with counts ``n f`` and
    stderr ``n`` times the oracle's. An item whose true fraction exceeds
    ``(z_i + z) sigma_i`` at every level is output with probability about ``1 - G Phi(-z)``.

    Privacy: one report per user at one level: ``max_i eps_i``-LDP, ``eps_i <= epsilon`` the level
    oracles' effective epsilons; ``Pr[y | x] = (1/G) Pr_i[y_i | map_i(x)]``.

    Parameters
    ----------
    epsilon : float
        Local privacy parameter, > 0.
    oracle, oracle_params : str, dict
        Registry frequency oracle (default ``"olh"``) and its extra parameters.
    alphabet, max_length, bits :
        The encoding (as :class:`~.prefix_extending.PrefixExtendingMethod`).
    bits_per_level : int, optional
        Bits per level (default: one symbol for words, 1 for integers).
    beta : float
        Bound on the probability that an item nobody holds survives some level (default 0.05).
    max_candidates : int
        Survivors kept per level at most (default 64: with one 5-bit symbol per level, 2048
        candidates per level, half the default ``max_domain``; see :mod:`._prefix`).
    k : int, optional
        Return only the ``k`` largest final estimates.
    max_domain, hash_seed, hash_copies :
        Domain reduction of long prefixes (default 4096), the public hash seed, and the number of
        independent hashes of a hashed level (default 2; see :mod:`._prefix`).
    """

    name = "treehist"
    title = "TreeHist"

    def __init__(self, epsilon: float, oracle: str = "olh", oracle_params: dict[str, Any] | None = None,
                 alphabet: str | None = None, max_length: int | None = None, bits: int | None = None,
                 bits_per_level: int | None = None, beta: float = 0.05, max_candidates: int = 64,
                 k: int | None = None, max_domain: int = DEFAULT_MAX_DOMAIN, hash_seed: int | None = None,
                 hash_copies: int = 2) -> None:
        super().__init__(epsilon)
        self.codec = make_codec(alphabet, max_length, bits)
        B = self.codec.bits
        step = self.codec.symbol_bits if bits_per_level is None else check_positive_int(bits_per_level,
                                                                                       "bits_per_level")
        if step > 16:
            raise ValidationError(f"bits_per_level must be an integer in [1, 16], got {step}",
                                  parameter="bits_per_level")
        self.bits_per_level = step
        self.beta = check_probability(beta, "beta", open_low=True, open_high=True)
        self.max_candidates = check_positive_int(max_candidates, "max_candidates")
        if self.max_candidates * (1 << step) > (1 << 22):
            raise ValidationError("max_candidates * 2^bits_per_level must be <= 2^22", parameter="max_candidates")
        self.k = None if k is None else check_positive_int(k, "k")
        lengths = list(range(step, B, step)) + [B]
        self._init_levels(lengths, oracle, oracle_params, max_domain, hash_seed, hash_copies)

    def threshold(self, level_users: int, candidates: int, level: int, n: int) -> float:
        """The survival threshold ``tau_i`` (a count among ``n`` users) of ``candidates`` candidates
        at ``level``, which ``level_users`` users reported."""
        z = normal_quantile(1.0 - self.beta / (self.levels.G * max(1, candidates)))
        return z * n * self.levels.zero_stderr(level, int(level_users))

    def estimate(self, statistic: np.ndarray, n: int | None = None) -> Estimate:
        """The last level's surviving items with their estimated counts (class docstring)."""
        stat = np.asarray(statistic)
        users = self.group_users(stat)
        level_users = self.levels.level_users(users)
        survivors = np.zeros(1, dtype=np.int64)
        f = s = np.zeros(0)
        prev = 0
        evaluated, taus = 0, []
        for i, t in enumerate(self.levels.lengths):  # one oracle estimate per level
            step = t - prev
            cand = ((survivors[:, None] << step) | np.arange(1 << step, dtype=np.int64)[None, :]).ravel()
            cand = cand[self.codec.valid_prefixes(cand, t)]
            evaluated += cand.size
            if cand.size == 0:
                survivors, f, s = cand, np.zeros(0), np.zeros(0)
                break
            f, s = self.levels.estimate_level(i, lambda g: self._piece(stat, g), users, cand)
            tau = self.threshold(int(level_users[i]), cand.size, i, n)
            taus.append(tau)
            keep = np.flatnonzero(f * n >= tau)
            keep = keep[np.argsort(-f[keep], kind="stable")[:self.max_candidates]]
            survivors, f, s = cand[keep], f[keep], s[keep]
            prev = t
        if self.k is not None:
            survivors, f, s = survivors[:self.k], f[:self.k], s[:self.k]
        return Estimate(f * n, s * n, n, self.privacy(), "count", labels=self._labels(survivors),
                        extra={"method": "treehist", "oracle": self.levels.oracle_name, "levels": self.levels.G,
                               "lengths": self.lengths, "thresholds": taus, "beta": self.beta,
                               "candidates_evaluated": int(evaluated), "users_per_level": level_users.tolist(),
                               "hash_seed": self.hash_seed})

    def __repr__(self) -> str:
        return (f"TreeHist(epsilon={self.epsilon:g}, oracle={self.levels.oracle_name!r}, "
                f"levels={self.levels.G}, beta={self.beta:g})")
