"""Local hashing frequency oracles: BLH and OLH (Wang, Blocki, Li, Jha, USENIX Security 2017).

Hash family
-----------
Each user draws a seed ``s`` uniformly from ``[0, (P-1) P)`` where ``P`` is a prime >= d (by
default the smallest one). The seed encodes ``a = s // P + 1`` in ``[1, P)`` and ``b = s % P`` in
``[0, P)`` and the hash is the affine map over the prime field, reduced to ``[g]``::

    H_s(x) = ((a * x + b) mod P) mod g.

For two distinct inputs ``x != x'`` in ``[0, P)`` the pair ``(a x + b, a x' + b) mod P`` is uniform
over the ``P (P-1)`` ordered pairs of *distinct* field elements, so the collision probability is
the same for every pair and known exactly::

    Pr[H_s(x) = H_s(x')] = sum_r c_r (c_r - 1) / (P (P - 1)),   c_r = #{u in [0, P): u mod g = r}.

It is not exactly ``1/g`` (``g`` does not divide ``P``), so the estimator uses the exact support
probability ``q* = q + coll (p - q)`` instead of ``1/g``: this keeps the estimator *exactly*
unbiased and the closed-form variance exact. Privacy does not depend on the family at all (the
seed is independent of the data and ``y`` is GRR over ``[g]``).

Fast aggregation
----------------
The support count of item ``i`` is ``C_i = sum_u 1{H_{s_u}(i) = y_u}``. Writing ``v = a i mod P``,
the users sharing the multiplier ``a`` contribute ``G_a(a i mod P)`` where
``G_a(v) = #{u : a_u = a, ((v + b_u) mod P) mod g = y_u}``. For one user the set of such ``v`` is
at most two arithmetic progressions of step ``g`` (before and after the wrap at ``P``), so ``G_a``
is built from four +-1 marks per user and a prefix sum with stride ``g`` (O(n + (P-1) P) in
total), and ``C_i = sum_a G_a(a i mod P)`` is a gather of ``(P-1) d`` entries. At d = 1024 this
is about 10^6 operations whatever ``n`` is, instead of the ``n d`` hash evaluations of the
direct method (kept as :meth:`LocalHashing.support_counts_direct`, the test oracle).

For large domains the ``(P-1) d`` gather dominates. There a report's support set is one
arithmetic progression ``a^{-1} s (j0 + t)``, ``t < c_y ~ P/g``, which in discrete-log coordinates
of ``Z_P^*`` is a contiguous slice of a fixed table shifted by ``L(s) - L(a)``
(:meth:`LocalHashing.support_counts_progressions`): about ``n P / g`` integer additions and no
hash evaluation. :meth:`LocalHashing.aggregate` picks the method with the fewest cells.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..core.validation import check_domain_size, check_epsilon, check_int_values, check_positive_int
from .base import FrequencyOracle, Reports, check_n, smallest_variance
from ._lh_torch import resolve_device, support_counts_torch
from ._lh_progressions import MAX_TABLE_PRIME, progression_cost, support_counts_progressions
from .bits import UNIFORM_PRECISION, calibrate_probability

__all__ = [
    "LocalHashing",
    "BinaryLocalHashing",
    "OptimizedLocalHashing",
    "is_prime",
    "smallest_prime_at_least",
    "affine_hash",
]

#: Largest prime modulus accepted (keeps a * x + b < 2^62 in int64 arithmetic).
MAX_PRIME = (1 << 31) - 1
#: Largest number of cells a dense intermediate array may hold on the aggregation path.
_CELLS = 1 << 22


def is_prime(m: int) -> bool:
    """Deterministic primality test for ``m < 2^32`` (trial division by odd numbers)."""
    if m < 2:
        return False
    if m % 2 == 0:
        return m == 2
    r = math.isqrt(m)
    f = 3
    while f <= r:
        if m % f == 0:
            return False
        f += 2
    return True


def smallest_prime_at_least(m: int) -> int:
    """The smallest prime >= ``m`` (``m`` >= 2)."""
    c = max(2, int(m))
    while not is_prime(c):
        c += 1
    return c


def affine_hash(seeds: np.ndarray, x: Any, prime: int, g: int) -> np.ndarray:
    """Evaluate ``H_s(x) = ((a x + b) mod P) mod g`` with ``a = s // P + 1``, ``b = s % P``.

    ``seeds`` and ``x`` broadcast against each other; int64 arithmetic is exact because
    ``a, b, x < P < 2^31``. This is the single definition used by client and server.
    """
    s = np.asarray(seeds).astype(np.int64, copy=False)
    a = s // prime + 1
    b = s % prime
    return ((a * np.asarray(x, dtype=np.int64) + b) % prime) % g


class LocalHashing(FrequencyOracle):
    """Local hashing with ``g`` hash buckets (the family of BLH and OLH).

    Each user draws a hash ``H_s : [d] -> [g]`` from the affine family above (the seed ``s`` is
    public and independent of her value), hashes her value and reports
    ``(s, y)`` with ``y = GRR_g(H_s(x))``: ``y = H_s(x)`` with probability ``p``, each other
    bucket with probability ``q = (1 - p) / (g - 1)``. Ideally ``p = e^eps / (e^eps + g - 1)``; the
    sampled ``p`` is rounded **down** to the ``2^-53`` grid (``rng.random() < p`` draws it exactly)
    until ``p (g-1) / (1-p) <= e^eps`` holds exactly.

    Privacy: exactly ``effective_epsilon``-LDP with ``effective_epsilon = ln(p (g-1) / (1-p)) <=
    epsilon`` for the sampled ``p`` (the seed is data independent; GRR on [g] has that ratio).
    The privacy statement carries it; estimator, variance and :meth:`probabilities` use the
    sampled ``p``, ``q``.
    Source: Wang, Blocki, Li, Jha, "Locally differentially private protocols for frequency
    estimation", USENIX Security 2017 (BLH, OLH).
    Estimator: pure protocol with ``p* = p`` and ``q* = q + coll (p - q)`` where ``coll`` is the
    exact collision probability of the family (``~ 1/g``; ``q* ~ 1/g``).
    Variance of one fraction: [q*(1-q*) + f(1-p*-q*)(p*-q*)] / (n (p*-q*)^2).
    Cost: O(n) encode; aggregate O(P + min(n P / g, min(n, P) P)) by progressions for large P,
    O(n + min(n, P) (P + d)) with the grouped algorithm (P ~ d): the
    quadratic term dominates once n >~ d (0.1-0.2 s at n = 10^6, d = 1024; 1.2 s at d = 4096); ``ceil(log2 ((P-1)P)) + ceil(log2 g)`` bits per report.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    d : int
        Domain size, >= 2 (at most 2^31 - 1).
    g : int
        Number of hash buckets, >= 2.
    prime : int, optional
        The field size ``P``: a prime with ``d <= P <= 2^31 - 1``; default the smallest prime >= d.
    device : str, optional
        Where :meth:`aggregate` counts: ``'cpu'`` (numpy, default), ``'torch-cpu'`` (PyTorch on CPU
        tensors) or ``'cuda'`` / ``'cuda:N'`` (PyTorch on a GPU; needs the ``gpu`` extra). All give
        the same integers. A CUDA device that is not available is a ``ValidationError``.
    device_fallback : bool, optional
        With an unavailable CUDA device, count on the CPU (numpy) instead of raising.
    """

    name = "lh"
    accepts_device = True

    def __init__(self, epsilon: float, d: int, g: int, prime: int | None = None, device: str = "cpu",
                 device_fallback: bool = False) -> None:
        super().__init__(epsilon, d)
        #: where :meth:`aggregate` counts: 'cpu' (numpy), 'torch-cpu' or 'cuda[:N]' (PyTorch)
        self.device = resolve_device(device, bool(device_fallback))
        if self.d > MAX_PRIME:
            raise ValidationError(f"d must be <= {MAX_PRIME} for local hashing, got {self.d}", parameter="d")
        self.g = check_positive_int(g, "g", minimum=2)
        if self.g > MAX_PRIME:
            raise ValidationError(f"g must be an integer in [2, {MAX_PRIME}], got {self.g}", parameter="g")
        if prime is None:
            P = smallest_prime_at_least(self.d)
        else:
            P = check_positive_int(prime, "prime", minimum=self.d)
            if P > MAX_PRIME or not is_prime(P):
                raise ValidationError(f"prime must be a prime in [{self.d}, {MAX_PRIME}], got {P}", parameter="prime")
        self.prime = P
        self.n_seeds = (P - 1) * P
        e = math.exp(self.epsilon) if self.epsilon < 700.0 else math.inf
        others = self.g - 1
        p, self.effective_epsilon = calibrate_probability(e / (e + others) if e < math.inf else 1.0, self.epsilon,
                                                          lambda t: t * others / (1 - t), "down")
        #: exact sampled probabilities (``p`` is a double on the 2^-53 grid)
        self.p_exact, self.q_exact = p, (1 - p) / others
        self.p = float(p)
        self.q = float(self.q_exact)
        self.collision_fraction = self.exact_collision_probability(P, self.g)
        self.collision = float(self.collision_fraction)
        self.p_star = self.p
        self.q_star = self.q + self.collision * (self.p - self.q)

    def _privacy(self) -> PrivacyStatement:
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"{type(self).__name__}: p={self.p!r} on the grid 2^-{UNIFORM_PRECISION}; "
                                     f"exact eps of the sampled p <= requested {self.epsilon:g}")

    # --- the hash family --------------------------------------------------------------
    @staticmethod
    def exact_collision_probability(prime: int, g: int) -> Fraction:
        """Pr over seeds of ``H_s(x) = H_s(x')`` for any ``x != x'`` in [0, P) (exact)."""
        base, extra = divmod(prime, g)
        # `extra` residues have base + 1 preimages in [0, P), the other g - extra have base.
        num = extra * (base + 1) * base + (g - extra) * base * (base - 1)
        return Fraction(num, prime * (prime - 1))

    def hash(self, seeds: np.ndarray, x: Any) -> np.ndarray:
        """``H_s(x)`` for each seed (broadcasting), the function clients and server share."""
        return affine_hash(seeds, x, self.prime, self.g)

    # --- client -----------------------------------------------------------------------
    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        x = self.check_values(values)
        n = x.shape[0]
        seeds = rng.integers(0, self.n_seeds, size=n, dtype=np.int64)
        h = self.hash(seeds, x)
        keep = rng.random(n) < self.p  # exact Bernoulli(p): p is on the 2^-53 grid
        r = rng.integers(0, self.g - 1, size=n, dtype=np.int64)
        y = np.where(keep, h, r + (r >= h))
        return {"seed": seeds.astype(np.uint64), "y": y.astype(np.int64)}

    def validate_reports(self, reports: Reports) -> Reports:
        if not isinstance(reports, dict) or set(reports) != {"seed", "y"}:
            raise ValidationError("local hashing reports must have exactly the fields 'seed' and 'y'",
                                  parameter="reports")
        seed = check_int_values(reports["seed"], self.n_seeds, "seed")
        y = check_int_values(reports["y"], self.g, "y")
        if seed.shape != y.shape:
            raise ValidationError(f"seed and y must have the same length, got {seed.shape[0]} and {y.shape[0]}",
                                  parameter="reports")
        return {"seed": seed.astype(np.uint64), "y": y}

    # --- analyzer ---------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """Support counts ``C_i = #{u : H_{s_u}(i) = y_u}`` for every item (mergeable).

        Picks the cheapest exact method by its cell count: discrete-log progressions (large
        domains, :meth:`support_counts_progressions`), the grouped-by-multiplier algorithm (small
        domains, many reports) or direct evaluation (tiny n with a large user-chosen prime). All
        three return the same integers.
        """
        s = np.asarray(reports["seed"]).astype(np.int64, copy=False)
        y = np.asarray(reports["y"]).astype(np.int64, copy=False)
        n = s.shape[0]
        P, d = self.prime, self.d
        if self.device != "cpu" and 3 <= P <= MAX_TABLE_PRIME:
            return support_counts_torch(s, y, P, self.g, d, self.device)
        groups = min(n, P - 1)
        grouped = groups * (P + d) + n
        direct = 4 * n * d
        if P <= MAX_TABLE_PRIME and progression_cost(n, P, self.g) < min(grouped, direct):
            return self.support_counts_progressions({"seed": s, "y": y})
        if grouped <= direct:
            return self._support_grouped(s, y)
        return self.support_counts_direct({"seed": s, "y": y})

    def support_counts_progressions(self, reports: Reports) -> np.ndarray:
        """Support counts by discrete-log progressions (exact; the large-domain CPU path).

        A report ``(a, b, y)`` supports exactly the items ``a^{-1} s (j0 + t) mod P``,
        ``t < c_y`` (``s = g`` if ``g < P`` else 1, ``j0 = (y - b) s^{-1}``): in discrete-log
        coordinates a contiguous slice of one table shifted by ``L(s) - L(a)``, so the counts are
        additions of ``~P / g`` cells per report (or, where the reports of a block of offsets are
        many, ``O(P)`` streaming cells per offset: coverage rows summed along diagonals), never
        ``n d`` hash evaluations. Proof and cost in
        :mod:`shuffledp.local._lh_progressions`. Requires ``P <= 2^23``.
        """
        s = np.asarray(reports["seed"]).astype(np.int64, copy=False)
        y = np.asarray(reports["y"]).astype(np.int64, copy=False)
        P = self.prime
        if P > MAX_TABLE_PRIME:
            raise ValidationError(f"prime must be <= {MAX_TABLE_PRIME} for the progression method, got {P}",
                                  parameter="prime")
        q = s // P  # seed = (a - 1) P + b
        return support_counts_progressions(q + 1, s - q * P, y, P, self.g, self.d)

    def support_counts_direct(self, reports: Reports) -> np.ndarray:
        """Reference O(n d) support counts: evaluate every user's hash on every item (chunked)."""
        s = np.asarray(reports["seed"]).astype(np.int64, copy=False)
        y = np.asarray(reports["y"]).astype(np.int64, copy=False)
        items = np.arange(self.d, dtype=np.int64)
        out = np.zeros(self.d, dtype=np.int64)
        step = max(1, _CELLS // self.d)
        for lo in range(0, s.shape[0], step):  # chunks of users
            h = self.hash(s[lo:lo + step, None], items[None, :])
            out += (h == y[lo:lo + step, None]).sum(axis=0)
        return out

    def _support_grouped(self, s: np.ndarray, y: np.ndarray) -> np.ndarray:
        P, g, d = self.prime, self.g, self.d
        a = s // P + 1
        b = s % P
        # v ranges over a i mod P; user u supports v iff ((v + b) mod P) mod g == y.
        # Piece 1 (no wrap, w = v + b < P): v = start1 + k g, k < count1.
        start1 = (y - b) % g
        count1 = (P - 1 - (b + start1)) // g + 1
        # Piece 2 (wrap, w = v + b - P < b): v = y + P - b + k g, k < count2.
        start2 = y + P - b
        count2 = (b - y + g - 1) // g
        end1 = start1 + count1 * g
        end2 = start2 + count2 * g

        if (P - 1) * (P + d) <= _CELLS:  # dense over every multiplier a in [1, P)
            return self._grouped_block(a - 1, P - 1, np.arange(1, P, dtype=np.int64),
                                       (start1, end1, start2, end2))
        ua, inv = np.unique(a, return_inverse=True)
        per = max(1, _CELLS // (P + d))
        order = np.argsort(inv, kind="stable")
        inv_sorted = inv[order]
        out = np.zeros(d, dtype=np.int64)
        for glo in range(0, ua.size, per):  # chunks of multiplier groups
            ghi = min(ua.size, glo + per)
            lo, hi = np.searchsorted(inv_sorted, [glo, ghi])
            sel = order[lo:hi]
            out += self._grouped_block(inv[sel] - glo, ghi - glo, ua[glo:ghi],
                                       tuple(arr[sel] for arr in (start1, end1, start2, end2)))
        return out

    def _grouped_block(self, group: np.ndarray, m: int, multipliers: np.ndarray,
                       marks: tuple[np.ndarray, ...]) -> np.ndarray:
        """Support counts contributed by ``m`` multiplier groups (users' group index ``group``)."""
        P, g, d = self.prime, self.g, self.d
        stride = g if g < P else None
        width = P if stride is None else -(-P // g) * g  # P rounded up to a multiple of g
        diff = np.zeros(m * width, dtype=np.int64)
        base = group * width
        for sign, pos in zip((1, -1, 1, -1), marks):
            keep = pos < P  # marks at or beyond P never reach positions < P
            diff += sign * np.bincount(base[keep] + pos[keep], minlength=m * width)
        if stride is None:
            G = diff.reshape(m, width)
        else:
            G = diff.reshape(m, width // g, g).cumsum(axis=1).reshape(m, width)
        out = np.zeros(d, dtype=np.int64)
        items = np.arange(d, dtype=np.int64)
        rows_per = max(1, _CELLS // d)
        for lo in range(0, m, rows_per):  # chunks of groups for the gather
            hi = min(m, lo + rows_per)
            v = (multipliers[lo:hi, None] * items[None, :]) % P
            out += np.take_along_axis(G[lo:hi], v, axis=1).sum(axis=0)
        return out

    def _total_per_user(self) -> tuple[float, float]:
        """A report supports its own item w.p. p* and each other item w.p. q* (over the seed and
        the coin); the count it adds lies in [0, d]."""
        return self.p_star + (self.d - 1) * self.q_star, float(self.d) ** 2

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic)
        if stat.shape != (self.d,):
            raise ValidationError(f"statistic must have shape ({self.d},), got {stat.shape}", parameter="statistic")
        return self._pure_estimate(stat, n, self.p_star, self.q_star)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        return self._pure_variance(check_n(n), value, self.p_star, self.q_star)

    # --- privacy ----------------------------------------------------------------------
    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact Pr[seed, y | x] = (1 / ((P-1) P)) * (p if y = H_seed(x) else q)."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        h = self.hash(reports["seed"], xv)
        y = np.asarray(reports["y"]).astype(np.int64, copy=False)
        return np.where(y == h, self.p, self.q) / self.n_seeds

    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Exact sample of the aggregate from true counts, by chunked randomize + aggregate.

        Cost O(n + P^2) per chunk of users: it is *not* n-independent (no closed-form law of the
        joint support counts under a hash family is known), but memory stays O(chunk + P^2).
        """
        c = self.check_counts(true_counts)
        n = int(c.sum())
        out = np.zeros(self.d, dtype=np.int64)
        step = 1 << 20
        bounds = np.concatenate([[0], np.cumsum(c)])
        for lo in range(0, n, step):  # chunks of users, values reconstructed per chunk
            hi = min(n, lo + step)
            vals = np.searchsorted(bounds, np.arange(lo, hi), side="right") - 1
            out += self.aggregate(self.randomize(vals, rng))
        return out

    def __repr__(self) -> str:
        dev = "" if self.device == "cpu" else f", device={self.device!r}"
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, d={self.d}, g={self.g}, prime={self.prime}{dev})"


class BinaryLocalHashing(LocalHashing):
    """Binary local hashing (BLH): local hashing with ``g = 2`` buckets.

    Privacy: exactly ``effective_epsilon``-LDP (``<= epsilon``, see :class:`LocalHashing`).
    Source: Wang et al., USENIX Security 2017 (BLH; Bassily & Smith
    2015). Var* ~ n (e^eps + 1)^2 / (e^eps - 1)^2 in counts. Cost as :class:`LocalHashing`.
    """

    name = "blh"

    def __init__(self, epsilon: float, d: int, prime: int | None = None, device: str = "cpu",
                 device_fallback: bool = False) -> None:
        super().__init__(epsilon, d, 2, prime, device, device_fallback)


class OptimizedLocalHashing(LocalHashing):
    """Optimized local hashing (OLH): by default the number of buckets ``g`` with the smallest
    variance (:meth:`best_g`; about ``e^eps + 1``, Wang et al.'s choice, except on small domains).

    Privacy: exactly ``effective_epsilon``-LDP (``<= epsilon``, see :class:`LocalHashing`).
    Source: Wang et al., USENIX Security 2017 (OLH).
    Var* ~ n 4 e^eps / (e^eps - 1)^2 in counts (the exact value uses this family's ``q*``).
    Cost as :class:`LocalHashing`: O(n) encode, O(n + P^2 + P d) aggregate.

    Parameters
    ----------
    g : int, optional
        Override the number of buckets (default :meth:`best_g`; :attr:`g` is the one in use and
        :attr:`g_chosen` says whether the mechanism chose it).
    """

    name = "olh"

    def __init__(self, epsilon: float, d: int, g: int | None = None, prime: int | None = None,
                 device: str = "cpu", device_fallback: bool = False) -> None:
        #: whether ``g`` was chosen by the mechanism (``g=None``) rather than given
        self.g_chosen = g is None
        if g is None:
            g = self.best_g(epsilon, d, prime)
        super().__init__(epsilon, d, g, prime, device, device_fallback)

    @staticmethod
    def best_g(epsilon: float, d: int, prime: int | None = None) -> int:
        """The ``g`` with the smallest :meth:`uniform_variance` for this ``(epsilon, d, prime)``.

        Wang et al.'s ``g = e^eps + 1`` minimises the variance when collisions happen at rate
        exactly ``1/g``; with the exact collision rate of the affine family (``0`` once ``g >= P``)
        a small domain prefers ``g`` near ``P`` (at ``eps = 4, d = 16``: ``g = 17``, 2.4x less
        variance than ``g = 56``). The search ranks every ``g`` in ``[2, min(P, e^eps + 2)]`` by
        the ideal scheme's variance (a geometric grid refined around its best point when the range
        exceeds 2^20), then compares the best three as built (:func:`~.base.smallest_variance`).
        """
        eps = check_epsilon(epsilon)
        dd = check_domain_size(d)
        P = smallest_prime_at_least(dd) if prime is None else check_positive_int(prime, "prime", minimum=dd)
        e = math.exp(eps) if eps < 700.0 else math.inf
        hi = int(min(P, MAX_PRIME, math.ceil(e) + 2 if e < 2.0**62 else MAX_PRIME))
        hi = max(hi, 2)

        def ideal(gs: np.ndarray) -> np.ndarray:
            g = gs.astype(np.float64)
            p = e / (e + g - 1) if e < math.inf else np.ones_like(g)
            q = (1 - p) / (g - 1)
            base, extra = np.divmod(P, gs)
            coll = (extra * (base + 1.0) * base + (gs - extra) * base * (base - 1.0)) / (P * (P - 1.0))
            qs = q + coll * (p - q)
            f = 1.0 / dd
            with np.errstate(divide="ignore", invalid="ignore"):
                v = (qs * (1 - qs) + f * (1 - p - qs) * (p - qs)) / (p - qs) ** 2
            return np.where(np.isfinite(v), v, np.inf)

        if hi - 1 <= 1 << 20:
            gs = np.arange(2, hi + 1, dtype=np.int64)
        else:
            coarse = np.unique(np.rint(np.geomspace(2, hi, 1 << 12)).astype(np.int64))
            c = int(coarse[int(np.argmin(ideal(coarse)))])
            gs = np.arange(max(2, c - (1 << 12)), min(hi, c + (1 << 12)) + 1, dtype=np.int64)
        return int(smallest_variance(gs, ideal(gs), lambda g: LocalHashing(eps, dd, g, prime)))
