"""``pucm``: public-coin count-min sketch with a binomial blanket (Ghazi, Golowich, Kumar, Pagh,
Velingker, "On the Power of Multiple Anonymous Messages", EUROCRYPT 2021, Alg. 2 with k = 1,
Lemmas 4.8 and 4.10).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from ...core.errors import OutOfDomainError, ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, round_up
from ...core.validation import check_positive_int, check_probability
from .._common import sampled_blanket
from ..base import Messages, Protocol, bits_for
from ._base import HistogramProtocol, _CELLS, _MARGIN

__all__ = ["PUCM", "PROTOCOLS"]


class PUCM(HistogramProtocol):
    """PUCM: public-coin count-min sketch with a binomial blanket (Ghazi et al., Alg. 2, k = 1).

    Public randomness: tau hash functions ``h_t: [d] -> [s]`` (affine over a prime field, pairwise
    independent up to the final reduction), fixed by ``public_seed``. Each user sends
    ``(t, h_t(x))`` for every t, and every pair ``(t, l)`` in [tau] x [s] independently with
    probability gamma. The analyzer counts pairs ``C[t, l]`` and answers
    ``x^_j = max(min_t C[t, h_t(j)] - gamma n, 0)``.

    Parameters: ``tau = ceil(log2(2d/beta))``, ``s = 2n``, and Lemma 4.10's privacy condition
    ``gamma n >= 90 tau^2 ln(2 tau/delta) / eps^2`` with gamma <= 1 (so n >= that bound).
    ``tau`` and ``s`` may be overridden (small simulations); gamma always comes from the target.

    Privacy: (epsilon, delta)-DP central; no local DP. Source: Ghazi, Golowich, Kumar, Pagh,
    Velingker, EUROCRYPT 2021, §4.2. Biased (min over rows, clipping at 0).
    Stated error (Lemma 4.8): ``|x^_j - c_j| <= xi sqrt(gamma n)`` w.p. >= 1 - beta with
    ``xi^2 = 3 (log2(2 s tau) - log2(beta - (n/s)^tau))``; :meth:`variance` returns that bound squared
    and :meth:`exact_error` the exact bias and MSE for given counts (the noise is Bin(n, gamma) per cell).
    The statistic is ``C[t, h_t(j)]`` for j in [d] (a (tau, d) array; mergeable).
    """

    name = "pucm"

    def __init__(self, epsilon: float, delta: float, n: int, d: int, beta: float = 0.1,
                 public_seed: int | None = None, tau: int | None = None, s: int | None = None) -> None:
        super().__init__(epsilon, delta, n, d)
        self.beta = check_probability(beta, "beta", open_low=True, open_high=True)
        self.tau = int(math.ceil(math.log2(2 * self.d / self.beta))) if tau is None else check_positive_int(tau, "tau")
        self.s = 2 * self.n if s is None else check_positive_int(s, "s", minimum=2)
        need = 90.0 * self.tau**2 * math.log(2 * self.tau / self.delta) / self.epsilon**2
        self.gamma = need / self.n * _MARGIN  # a hair more blanket: see _MARGIN
        if self.gamma > 1.0:
            raise OutOfDomainError(f"pucm needs n >= 90 tau^2 ln(2 tau/delta)/eps^2 = {math.ceil(need)} users "
                                   f"(tau={self.tau}); got n={self.n}", parameter="n")
        self.gamma = sampled_blanket(self.gamma)  # as sampled: rounded up to the 2^-53 grid
        if public_seed is None:
            public_seed = int(np.random.SeedSequence().entropy % (1 << 63))  # type: ignore[operator]
        self.public_seed = int(public_seed)
        P = _next_prime(max(self.d, self.s))
        g = np.random.default_rng(self.public_seed)
        self.prime = P
        self.hash_a = g.integers(1, P, size=self.tau, dtype=np.int64)
        self.hash_b = g.integers(0, P, size=self.tau, dtype=np.int64)
        self.table = self.hash(np.arange(self.d, dtype=np.int64))  # (tau, d)

    def hash(self, x: np.ndarray) -> np.ndarray:
        """``h_t(x)`` for every t: a (tau, len(x)) array."""
        x = np.asarray(x, dtype=np.int64)
        return ((self.hash_a[:, None] * x[None, :] + self.hash_b[:, None]) % self.prime) % self.s

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        n, tau, s = x.shape[0], self.tau, self.s
        ts = [np.repeat(np.arange(tau, dtype=np.int64)[None, :], n, axis=0).ravel()]
        cells = [self.table[:, x].T.ravel()]
        per = tau * s
        step = max(1, _CELLS // per)
        for lo in range(0, n, step):  # chunks of users' blanket masks
            m = min(step, n - lo)
            idx = np.nonzero(rng.random((m, per)) < self.gamma)[1]
            ts.append(idx // s)
            cells.append(idx % s)
        return {"t": np.concatenate(ts), "cell": np.concatenate(cells)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        t = self._column(messages, "t", self.tau)
        cell = self._column(messages, "cell", self.s)
        counts = np.bincount(t * self.s + cell, minlength=self.tau * self.s)
        return counts[np.arange(self.tau)[:, None] * self.s + self.table]

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic, dtype=np.float64)
        if stat.shape != (self.tau, self.d):
            raise ValidationError(f"pucm statistic must have shape ({self.tau}, {self.d})", parameter="statistic")
        est = np.maximum(stat.min(axis=0) - self.gamma * n, 0.0)
        return self._estimate(est, np.full(self.d, self.variance(n)), n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: each distinct cell holds its hashed true counts plus an independent Bin(n, gamma)."""
        c = self.check_counts(data)
        n = int(c.sum())
        flat = (np.arange(self.tau)[:, None] * self.s + self.table).ravel()
        cells, inv = np.unique(flat, return_inverse=True)
        load = np.bincount(inv, weights=np.tile(c, self.tau), minlength=cells.size).astype(np.int64)
        val = load + rng.binomial(n, self.gamma, size=cells.size)
        return val[inv].reshape(self.tau, self.d)

    def _loads(self, c: np.ndarray) -> np.ndarray:
        flat = (np.arange(self.tau)[:, None] * self.s + self.table).ravel()
        _, inv = np.unique(flat, return_inverse=True)
        load = np.bincount(inv, weights=np.tile(c, self.tau))
        return load[inv].reshape(self.tau, self.d)

    def exact_error(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        """Exact (bias, MSE) of every item's estimate for true counts ``data`` (these hashes).

        ``min_t C[t, h_t(j)] = min_t (D_tj + N_t)`` with independent ``N_t ~ Bin(n, gamma)``, so
        ``P(min >= v) = prod_t P(N_t >= v - D_tj)``; evaluated over a +-12 sd window.
        """
        c = self.check_counts(np.asarray(data))
        n = int(c.sum())
        D = self._loads(c)  # (tau, d)
        sd = math.sqrt(n * self.gamma * (1 - self.gamma))
        lo = max(0, int(n * self.gamma - 12 * sd - 2))
        hi = min(n, int(n * self.gamma + 12 * sd + 2))
        k = np.arange(lo, hi + 2)
        sf = stats.binom.sf(k - 1, n, self.gamma)  # P(N >= k)
        base = D.min(axis=0)
        v = base[None, :] + k[:, None]  # candidate values of the min, per item
        # P(min >= v) = prod_t P(N >= v - D_t)
        shift = v[None, :, :] - D[:, None, :]  # (tau, K, d)
        surv = np.interp(shift, k, sf, left=1.0, right=0.0).prod(axis=0)  # (K, d)
        pmf = surv - np.vstack([surv[1:], np.zeros((1, self.d))])
        est = np.maximum(v - self.gamma * n, 0.0)
        err = est - c[None, :]
        return (pmf * err).sum(axis=0), (pmf * err**2).sum(axis=0)

    def error_bound(self, n: int | None = None, beta: float | None = None) -> float:
        """Lemma 4.8: ``xi sqrt(gamma n)`` with failure probability beta (inf if out of range)."""
        n = self._n_of(n)
        beta = self.beta if beta is None else check_probability(beta, "beta", open_low=True, open_high=True)
        rest = beta - (n / self.s) ** self.tau
        if rest <= 0:
            return math.inf
        xi2 = 3.0 * (math.log2(2 * self.s * self.tau) - math.log2(rest))
        if xi2 > self.gamma * n:
            return math.inf
        return math.sqrt(xi2 * self.gamma * n)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """The stated error bound squared (Lemma 4.8 at failure probability beta), for any ``value``."""
        return self.error_bound(n) ** 2

    def _privacy(self, n: int) -> PrivacyStatement:
        gn = self.gamma * n
        eps = math.sqrt(90.0 * self.tau**2 * math.log(2 * self.tau / self.delta) / gn)
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"pucm: Ghazi et al. Lemma 4.10 with gamma n = {gn:.6g}, tau={self.tau}")

    @property
    def messages_per_user(self) -> float:
        return self.tau + self.tau * self.s * self.gamma

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.tau) + bits_for(self.s)


def _next_prime(m: int) -> int:
    from ...local.hashing import smallest_prime_at_least

    return smallest_prime_at_least(m)


PROTOCOLS: dict[str, type[Protocol]] = {"pucm": PUCM}
