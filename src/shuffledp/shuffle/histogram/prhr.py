"""``prhr``: private-coin multi-message Hadamard response P^Had (Ghazi, Golowich, Kumar, Pagh,
Velingker, "On the Power of Multiple Anonymous Messages", EUROCRYPT 2021, Thm 4.3), with the
GF(2) rank-chain helpers its exact simulation uses.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import OutOfDomainError, ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, round_up
from ...core.validation import check_positive_int
from ..base import Messages, Protocol
from ._base import HistogramProtocol, _CELLS

__all__ = ["PRHR"]


_BITS = np.arange(64, dtype=np.uint64)


def _parity(x: np.ndarray) -> np.ndarray:
    """popcount(x) mod 2 for non-negative int64 arrays (0/1 as int64)."""
    x = np.asarray(x, dtype=np.int64)
    if hasattr(np, "bitwise_count"):
        return (np.bitwise_count(x) & 1).astype(np.int64)
    x = x ^ (x >> 32)
    x = x ^ (x >> 16)
    x = x ^ (x >> 8)
    x = x ^ (x >> 4)
    x = x ^ (x >> 2)
    x = x ^ (x >> 1)
    return x & 1


def _gf2_rank_probs(tau: int, dim: int) -> np.ndarray:
    """P(rank = r), r = 0..dim, of ``tau`` i.i.d. uniform vectors in GF(2)^dim (exact Markov chain)."""
    p = np.zeros(dim + 1)
    p[0] = 1.0
    for _ in range(tau):
        stay = p * np.exp2(np.arange(dim + 1) - dim)   # the new vector lies in the current span
        up = p - stay
        p = stay.copy()
        p[1:] += up[:-1]
    return p


def _span_nonzero(basis: np.ndarray) -> np.ndarray:
    """All 2^k - 1 nonzero elements of the span of each row's k basis vectors ((M, k) -> (M, 2^k-1))."""
    k = basis.shape[1]
    combos = np.arange(1, 1 << k)
    out = np.zeros((basis.shape[0], combos.size), dtype=np.int64)
    for b in range(k):  # one step per basis vector (k <= log2(2B))
        sel = ((combos >> b) & 1).astype(bool)
        out[:, sel] ^= basis[:, b:b + 1]
    return out


def _random_subspaces(k: int, L: int, fixed: np.ndarray | None, size: int, rng: np.random.Generator) -> np.ndarray:
    """Bases of ``size`` uniform random k-dim subspaces of GF(2)^L (containing ``fixed[i]`` if given).

    Rejection sampling of independent vectors; uniform by GL(L) (resp. stabiliser) symmetry.
    """
    basis = np.zeros((size, k), dtype=np.int64)
    start = 0
    if fixed is not None:
        basis[:, 0] = fixed
        start = 1
    for col in range(start, k):  # one step per basis vector
        todo = np.arange(size)
        while todo.size:  # rejection: redraw rows whose new vector lies in the current span
            v = rng.integers(1, 1 << L, size=todo.size, dtype=np.int64)
            if col:
                span = _span_nonzero(basis[todo, :col])
                bad = (span == v[:, None]).any(axis=1)
            else:
                bad = np.zeros(todo.size, dtype=bool)
            basis[todo[~bad], col] = v[~bad]
            todo = todo[bad]
    return basis


class PRHR(HistogramProtocol):
    """PRHR: private-coin multi-message Hadamard response P^Had (Ghazi et al., Alg. 1, k = 1).

    ``B`` = d rounded up to a power of two, ``L = log2(2B)``; value x uses Hadamard row ``x+1`` of
    size 2B and ``H_x = {a in [2B] : popcount(a & (x+1)) even}`` (|H_x| = B). Each user sends one
    tuple of tau indices drawn uniformly from ``H_x`` and rho blanket tuples of tau uniform indices
    in [2B] (``1 + rho`` messages of ``tau L`` bits). The analyzer counts, for each value j, the
    tuples lying entirely in ``H_j`` and debiases::

        x^_j = (count_j - (rho + 1) n 2^-tau) / (1 - 2^-tau)

    Parameters (Thm 4.3 with k = 1: tau = log n, rho = 36/eps^2 ln(e/(eps delta)) for eps, delta <= 1;
    derived here for n not a power of two): ``tau = floor(log2 n)``,
    ``rho = ceil(rho_0 2^tau / n)`` so the blanket mean ``rho n 2^-tau >= rho_0``. ``tau``/``rho`` may be
    given explicitly; the constructor then checks that they reach the target.

    Privacy: (epsilon, delta)-DP central; **no local DP** (a tuple inside H_x is always sent).
    Source: Ghazi, Golowich, Kumar, Pagh, Velingker, "On the Power of Multiple Anonymous Messages",
    EUROCRYPT 2021, §4.1.
    Error: exact ``Var = ((rho+1) n - c_j) 2^-tau (1 - 2^-tau) / (1 - 2^-tau)^2`` (unbiased).
    Aggregation: bitmask per index of the rows whose parity is even, AND over the tuple
    (O(m tau ceil(d/64))). Simulation: an exact joint sampler of the count vector (the kernel of
    a tuple's index matrix is a uniform random subspace given its dimension), O(d + #tuples with a
    non-trivial kernel), independent of n.
    """

    name = "prhr"

    def __init__(self, epsilon: float, delta: float, n: int, d: int, tau: int | None = None,
                 rho: int | None = None) -> None:
        super().__init__(epsilon, delta, n, d)
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 1.0:
            raise OutOfDomainError(f"prhr (Ghazi et al. Thm 4.3) needs epsilon <= 1, got {eps!r}", parameter="epsilon")
        if n < 2:
            raise ValidationError("prhr needs n >= 2 users", parameter="n")
        self.B = 1 << max(0, math.ceil(math.log2(self.d)))
        self.L = int(math.log2(2 * self.B))
        self.rho0 = 36.0 / eps**2 * math.log(math.e / (eps * delta))
        self.tau = int(math.floor(math.log2(n))) if tau is None else check_positive_int(tau, "tau")
        if tau is not None and self.tau > 62:
            raise ValidationError("tau must be <= 62", parameter="tau")
        self.rho = (int(math.ceil(self.rho0 * 2.0**self.tau / n - 1e-12)) if rho is None
                    else check_positive_int(rho, "rho"))
        achieved = self._epsilon_for(self.rho * n * 2.0**-self.tau)
        if achieved > eps * (1 + 1e-9):
            raise OutOfDomainError(f"prhr with tau={self.tau}, rho={self.rho} at n={n} gives only "
                                   f"epsilon={achieved:.4g} > {eps!r}", parameter="rho")
        self.r = 2.0**-self.tau
        rows = np.arange(1, self.d + 1, dtype=np.int64)
        a = np.arange(2 * self.B, dtype=np.int64)
        even = _parity(a[:, None] & rows[None, :]) == 0     # (2B, d): a in H_row
        self._words = -(-self.d // 64)
        pad = np.zeros((2 * self.B, self._words * 64), dtype=np.uint64)
        pad[:, : self.d] = even
        # masks[a, w]: bit b set iff index a lies in H of row 64 w + b + 1
        self._masks = (pad.reshape(2 * self.B, self._words, 64) << _BITS).sum(axis=2, dtype=np.uint64)

    def _epsilon_for(self, blanket_mean: float) -> float:
        """Smallest eps in (0, 1] with 36/eps^2 ln(e/(eps delta)) <= blanket_mean (inf if none)."""
        f = lambda e: 36.0 / e**2 * math.log(math.e / (e * self.delta)) - blanket_mean  # noqa: E731
        if f(1.0) > 0:
            return math.inf
        lo, hi = 1e-12, 1.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if f(mid) > 0:
                lo = mid
            else:
                hi = mid
        return hi

    # --- client -------------------------------------------------------------------------
    def _in_row(self, a: np.ndarray, row: np.ndarray) -> np.ndarray:
        """Map uniform a in [2B] to a uniform element of H_row (flip the lowest set bit of row if odd)."""
        return a ^ (_parity(a & row) * (row & -row))

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        n, tau, two_b = x.shape[0], self.tau, 2 * self.B
        dtype = np.uint16 if two_b <= 1 << 16 else np.int64
        real = self._in_row(rng.integers(0, two_b, size=(n, tau), dtype=np.int64), (x + 1)[:, None])
        blanket = rng.integers(0, two_b, size=(n * self.rho, tau), dtype=np.int64)
        return {"t": np.concatenate([real, blanket]).astype(dtype)}

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, messages: Messages) -> np.ndarray:
        if "t" not in messages:
            raise ValidationError(f"prhr messages need a 't' column, got {sorted(messages)}", parameter="messages")
        t = np.asarray(messages["t"])
        if t.ndim != 2 or t.shape[1] != self.tau or not np.issubdtype(t.dtype, np.integer):
            raise ValidationError(f"prhr messages 't' must be an integer array of shape (m, {self.tau})",
                                  parameter="messages")
        if t.size and (int(t.min()) < 0 or int(t.max()) >= 2 * self.B):
            raise ValidationError(f"prhr indices must lie in [0, {2 * self.B})", parameter="messages")
        out = np.zeros(self.d, dtype=np.int64)
        step = max(1, _CELLS // (self.tau * self._words))
        for lo in range(0, t.shape[0], step):  # chunks of tuples
            acc = np.bitwise_and.reduce(self._masks[t[lo:lo + step].astype(np.int64)], axis=1)  # (m, words)
            hit = np.nonzero(acc.any(axis=1))[0]
            if hit.size:
                bits = ((acc[hit][:, :, None] >> _BITS) & np.uint64(1)).reshape(hit.size, -1)
                out += bits[:, : self.d].sum(axis=0, dtype=np.int64)
        return out

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic, dtype=np.float64)
        est = (stat - (self.rho + 1) * n * self.r) / (1.0 - self.r)
        return self._estimate(est, self._var_counts(n, est), n)

    def _var_counts(self, n: int, c: np.ndarray | float) -> np.ndarray:
        c = np.clip(np.asarray(c, dtype=np.float64), 0.0, n)
        return ((self.rho + 1) * n - c) * self.r * (1 - self.r) / (1 - self.r) ** 2

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Exact variance of one item's estimated count when ``value`` users hold it."""
        return float(self._var_counts(self._n_of(n), value))

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact joint sample of the count vector, independent of n.

        A tuple counts for every data row in the kernel K of its tau x L bit matrix. For tau
        uniform indices in [2B] = GF(2)^L, K is a uniform random subspace given its dimension
        L - rank, whose law is the rank chain of :func:`_gf2_rank_probs`. For a user with row x,
        the indices are uniform in the hyperplane x-perp and K is a uniform subspace containing x
        of dimension L - rank (rank chain in dimension L - 1). Tuples with kernel {0} (blanket)
        or {0, x} (real) are accounted for in bulk; the few others get an explicit subspace.
        """
        c = self.check_counts(data)
        n, L, d, tau = int(c.sum()), self.L, self.d, self.tau
        out = np.zeros(d, dtype=np.int64)
        # blanket tuples: kernel dimension L - rank
        pr = _gf2_rank_probs(tau, L)[::-1]           # index = kernel dimension
        kdim = rng.multinomial(self.rho * n, pr)
        # real tuples of a value-x user: kernel dim = 1 + (L - 1 - rank in L-1 dims)
        pu = _gf2_rank_probs(tau, L - 1)[::-1]      # index = kernel dim - 1
        ku = rng.multinomial(c, pu)                 # (d, L)
        out += ku[:, 0]                              # kernel {0, x}: counts for x only
        elems = []
        for k in range(1, L + 1):  # one step per kernel dimension (<= log2(2B)), not per tuple
            if kdim[k]:
                elems.append(_span_nonzero(_random_subspaces(k, L, None, int(kdim[k]), rng)).ravel())
            if k >= 2 and ku[:, k - 1].any():
                fixed = np.repeat(np.arange(1, d + 1, dtype=np.int64), ku[:, k - 1])
                elems.append(_span_nonzero(_random_subspaces(k, L, fixed, fixed.size, rng)).ravel())
        if elems:
            e = np.concatenate(elems)
            e = e[(e >= 1) & (e <= d)]
            out += np.bincount(e - 1, minlength=d)
        return out

    def _privacy(self, n: int) -> PrivacyStatement:
        eps = self._epsilon_for(self.rho * n * self.r)
        if not math.isfinite(eps):
            return PrivacyStatement(math.inf, 0.0, model="shuffle",
                                    note=f"prhr: blanket mean too small at n={n}; no local DP")
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"prhr: Ghazi et al. Thm 4.3 with blanket mean rho n 2^-tau = "
                                     f"{self.rho * n * self.r:.6g} (tau={self.tau}, rho={self.rho})")

    @property
    def messages_per_user(self) -> float:
        return 1.0 + self.rho

    @property
    def bits_per_message(self) -> float:
        return float(self.tau * self.L)


PROTOCOLS: dict[str, type[Protocol]] = {"prhr": PRHR}
