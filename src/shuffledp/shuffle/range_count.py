"""Other statistics in the shuffle model (survey §4.4): range counting, distinct elements,
uniformity testing (PUT, AUT).

Spec: ``shared/spec/shuffle-amplification-sum-other.md`` §5. The spec confirms the *results*
of these papers only at the level of their abstracts, so every protocol here is a clearly named
**reconstruction**; ``docs/protocols-other.md`` lists each choice.

* ``range_count`` — hierarchical dyadic tree over [0, d) (the "alternative (standard
  hierarchical)" construction of spec §5.2 [DERIVED]): every user sends one k-RR report per tree
  level (k = 2^l at level l), the central budget is split evenly over the L levels (basic
  composition), each level is a shuffled k-RR whose local epsilon comes from the accounting
  module's amplification bound, and the analyzer makes the noisy tree consistent (two-pass
  constrained inference, Hay et al. VLDB 2010, with per-level weights). Range answers are
  linear in the level counts, so they are unbiased and their variance is computed exactly.
* ``distinct`` — **project-original** (spec §5.1 says BCJM's protocol is not reconstructable):
  one-hot encoding + a robust counter per coordinate + a threshold "non-empty bucket" estimator
  corrected for empty-bucket false positives. Error O(sqrt(d)) plus a one-sided bias from
  coordinates whose count is comparable to the noise.
* ``put`` / ``aut`` — uniformity testers built, as the spec's [DERIVED] structure says, on one
  robust binary counter per coordinate (PUT: the distributed symmetric-geometric counter
  Cnt_SGM over a split-and-mix sum channel; AUT: the binomial counter Cnt_BN), then an unbiased
  collision statistic ``T`` estimating ``||p - u||_2^2`` and a threshold ``tau``. The exact
  statistic, threshold and constants of BCJM's PUT/AUT are [UNCONFIRMED]; ours are documented.

Per-coordinate counters (used by distinct / put / aut). Replace-one neighbours change two
coordinates of the one-hot histogram by one each, so each coordinate's counter is calibrated
to ``(eps/2, delta/2)`` and the vector is ``(eps, delta)``-DP by basic composition over the two
affected coordinates (the coordinates' noises are independent). The counters re-implement
``cnt_bn`` / ``cnt_sgm`` of :mod:`shuffledp.shuffle.counting` per coordinate (same formulas,
see there), vectorized over the d coordinates:

* ``"bn"`` (Balcer–Cheu P^zsum with n := gamma n, spec-counting §1.5 [R]): each user sends its
  value j as a message "j" and, for every coordinate j', an extra message "j'" with probability
  ``p = 1 - 50 ln(2/delta')/(eps'^2 gamma n)``; the analyzer counts messages per coordinate,
  ``c_hat_j = C_j - n p``, noise Bin(n, p) - n p, variance ``n p (1 - p)``.
* ``"sgm"`` (spec-counting §1.6 [R]): each user adds Pólya noise ``X - Y``, X, Y ~
  NB(1/(gamma n), e^{-eps'}) to every coordinate of its one-hot vector and sends every coordinate
  as m split-and-mix shares mod q labelled with the coordinate; the analyzer's per-coordinate
  sums are ``c_j + Z_j`` with Z_j a difference of NB(1/gamma) (all honest), i.e. exactly the
  central discrete-Laplace-like release the exact samplers produce; split-and-mix adds
  ``(1 + e^eps) d 2^-sigma`` to delta (d independent instances; Theorem 9 of the survey).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

from ..accounting.shuffle import local_epsilon_for, shuffle_statement
from ..central.distributed import SplitAndMix, split_and_mix_delta, split_and_mix_messages, split_and_mix_security_bits
from ..central.distributions import simulate_polya
from ..core.errors import OutOfDomainError, ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..local.bits import LOG_MARGIN
from ..core.validation import check_domain_size, check_int_values, check_positive_int, check_real
from ._common import krr_local_epsilon, sampled_blanket
from .base import Messages, Protocol, bits_for

__all__ = ["RangeCount", "TreeKRRRandomizer", "OneHotCounters", "Distinct", "UniformityTester", "PUT", "AUT",
           "UniformityTestResult", "PROTOCOLS"]


def _need_delta(delta: float, name: str) -> None:
    if not delta:
        raise ValidationError(f"{name} is an (eps, delta) protocol: delta must lie in (0, 1), got 0",
                              parameter="delta")


def _counts_data(data: Any, d: int) -> np.ndarray:
    c = np.asarray(data)
    if c.shape != (d,) or c.dtype == np.bool_ or not np.issubdtype(c.dtype, np.integer) or (c.size and c.min() < 0):
        raise ValidationError(f"data must be the true counts: {d} non-negative integers", parameter="data")
    return c.astype(np.int64)


def _check_stat(statistic: Any, length: int) -> np.ndarray:
    s = np.asarray(statistic)
    if s.shape != (length,) or s.dtype == np.bool_ or not np.issubdtype(s.dtype, np.integer):
        raise ValidationError(f"statistic must be an integer array of shape ({length},), got {s.shape} {s.dtype}",
                              parameter="statistic")
    return s.astype(np.int64)


def _sum_mod_by_label(labels: np.ndarray, values: np.ndarray, d: int, q: int) -> np.ndarray:
    """Exact per-label sums mod q of non-negative int64 values < 2^62 (sort + cumulative sums of
    31-bit halves, so int64 partial sums stay exact for up to 2^32 values)."""
    order = np.argsort(labels, kind="stable")
    ls = labels[order]
    v = values[order]
    bounds = np.searchsorted(ls, np.arange(d + 1))
    out = []
    for half in (v & 0x7FFFFFFF, v >> 31):
        cs = np.concatenate([[0], np.cumsum(half, dtype=np.int64)])
        out.append(cs[bounds[1:]] - cs[bounds[:-1]])
    if q <= 1 << 31:  # (hi mod q) * (2^31 mod q) < 2^62: exact in int64
        return (out[0] % q + (out[1] % q) * ((1 << 31) % q) % q) % q
    lo = out[0].astype(object) % q  # object arithmetic on d Python ints (q > 2^31 only)
    hi = out[1].astype(object) % q
    return ((lo + hi * ((1 << 31) % q)) % q).astype(np.int64)


# =============================================================================== range counting

class TreeKRRRandomizer:
    """One user's view in ``range_count``: L independent k-RR reports, one per tree level.

    Level l (1..L) reports the user's level-l node ``x >> (L - l)`` among k = 2^l nodes: kept
    w.p. 1 - lam_l, else a uniform node of the 2^l (true node included). eps-LDP with
    ``epsilon = sum_l ln(1 + k_l (1 - lam_l)/lam_l)`` (each report is exactly eps_l-LDP).
    Exposes ``probabilities(reports, x)`` (product over levels) for the exact ratio check.
    """

    def __init__(self, L: int, lams: np.ndarray) -> None:
        self.L = int(L)
        #: blanket probability per level, as sampled (rounded up to the 2^-53 grid)
        self.lams = np.array([sampled_blanket(v) for v in np.asarray(lams, dtype=np.float64)])
        self.ks = 2 ** np.arange(1, self.L + 1)
        #: exact eps of each level's report (rounded up)
        self.level_eps = np.array([krr_local_epsilon(int(k), v) for k, v in zip(self.ks, self.lams)])
        self.epsilon = round_up(math.fsum(self.level_eps), LOG_MARGIN)  # fsum: correctly rounded

    def randomize(self, values: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Reports as an (n, L) array ``y`` (column l-1 = level l)."""
        x = check_int_values(values, 2**self.L)
        n = x.shape[0]
        y = np.empty((n, self.L), dtype=np.int64)
        for i in range(self.L):  # one vector step per level, not per user
            node = x >> (self.L - 1 - i)
            blanket = rng.random(n) < self.lams[i]
            y[:, i] = np.where(blanket, rng.integers(0, self.ks[i], n), node)
        return {"y": y}

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        y = np.asarray(reports["y"], dtype=np.int64)
        x = int(x)
        prob = np.ones(y.shape[0])
        for i in range(self.L):
            node = x >> (self.L - 1 - i)
            k, lam = self.ks[i], self.lams[i]
            prob = prob * np.where(y[:, i] == node, 1.0 - lam + lam / k, lam / k)
        return prob


class RangeCount(Protocol):
    """``range_count`` [DERIVED reconstruction]: shuffled hierarchical histogram for range counts.

    Tree: d is padded to D = 2^L, L = ceil(log2 d); level l (1..L) has 2^l dyadic nodes (the
    root, level 0, is the public n under replace-one neighbours and is not sent). Each user sends
    L messages ``(level l, k-RR_l(node_l(x)))`` with k = 2^l and blanket probability
    ``lam_l = k/(e^{eps0_l} + k - 1)``.

    Budget split: level l gets ``(eps/L, delta/L)`` (basic composition over the L independent
    level releases; messages carry their level, equivalent to one shuffler per level). eps0_l is
    the largest local epsilon whose shuffled k-RR over n users is (eps/L, delta/L)-DP by the
    accounting module (``accounting="blanket"``: BBGN19 Bennett bound for k-RR, k = 2^l, the
    default; ``"clones"``: FMT21 generic clone bound; ``"closed_form"``: BBGN19 Thm 3.1, needs
    eps/L <= 1). :meth:`privacy` is the sum of the accounting module's per-level statements.

    Analyzer: per level the unbiased k-RR counts ``y_l = (C_l - n lam_l/k)/(1 - lam_l)``; with
    ``consistent=True`` (default) the two-pass constrained inference of Hay et al. (VLDB 2010)
    with per-level weights 1/sigma_l^2 (sigma_l^2 = a node's variance at the average count n/2^l)
    and the root fixed to n: bottom-up ``z_l = w_l y_l + (1 - w_l) (pair sums of z_{l+1})``,
    top-down ``x_l = z_l + (x_{l-1} - pair sum of z_l)/2`` on each sibling pair. Every output is
    a linear function of the level counts whose expectation is the truth (all constraints hold for
    the true counts), so leaf and range estimates are unbiased. With ``consistent=False`` a range
    is the sum of its <= 2L canonical dyadic nodes. Variances are exact: the linear map's
    coefficients are obtained by the adjoint (reverse) pass and combined with the exact
    multinomial covariance of each level's k-RR counts,
    ``Cov(C_l) = diag(n q + (1-lam) m) - n q^2 11' - q (1-lam)(1 m' + m 1') - (1-lam)^2 diag(m)``
    (m = true node counts, q = lam/k); reported standard errors plug in the estimated counts.

    Cost: L messages of ``ceil(log2 L) + l`` bits per user; O(n L) encode/aggregate (one
    bincount); O(D) estimation per query batch row; O(D) exact statistic simulation.
    """

    name = "range_count"
    model = "shuffle"
    input_kind = "categorical"

    def __init__(self, epsilon: float, delta: float, n: int, *, d: int,
                 accounting: Literal["blanket", "clones", "closed_form"] = "blanket",
                 consistent: bool = True) -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, "range_count")
        self.d = check_domain_size(d)
        if accounting not in ("blanket", "clones", "closed_form"):
            raise ValidationError(f"accounting must be 'blanket', 'clones' or 'closed_form', got {accounting!r}",
                                  parameter="accounting")
        if not isinstance(consistent, (bool, np.bool_)):
            raise ValidationError("consistent must be True or False", parameter="consistent")
        self.accounting = accounting
        self.consistent = bool(consistent)
        self.L = max(1, math.ceil(math.log2(self.d)))
        self.D = 2**self.L
        self.ks = 2 ** np.arange(1, self.L + 1)
        #: start of level l's block in the statistic (levels 1..L): 2^l - 2
        self.offsets = self.ks - 2
        self.eps_level = self.epsilon / self.L
        self.delta_level = self.delta / self.L
        target = self.eps_level * (1.0 - 1e-9)  # bisection slack: the per-level sum stays <= eps
        eps0 = []
        for k in self.ks:  # L accountant calls (one per level)
            try:
                eps0.append(local_epsilon_for(target, self.n, self.delta_level, self._method(),
                                              **self._options(int(k))))
            except OutOfDomainError as e:
                raise OutOfDomainError(f"range_count: level with k={int(k)} is outside the {accounting} bound's "
                                       f"domain at eps/L={self.eps_level:.4g}, n={self.n}: {e}",
                                       parameter="epsilon") from e
        self.eps0 = np.array(eps0)
        self.lams = self.ks / (np.exp(self.eps0) + self.ks - 1.0)
        self.randomizer = TreeKRRRandomizer(self.L, self.lams)
        self.lams = self.randomizer.lams
        n_ = self.n
        q = self.lams / self.ks
        p = 1.0 - self.lams + q
        m = n_ / self.ks
        #: working per-node variances at the average count (weights of the consistency step)
        self.sigma2 = (m * p * (1 - p) + (n_ - m) * q * (1 - q)) / (1.0 - self.lams) ** 2
        self._weights()

    def _method(self) -> str:
        return "clones" if self.accounting == "clones" else "blanket"

    def _options(self, k: int) -> dict[str, Any]:
        if self.accounting == "clones":
            return {"randomizer": "generic"}
        bound = "bennett" if self.accounting == "blanket" else "closed_form"
        return {"bound": bound, "randomizer": "krr", "k": k}

    def _weights(self) -> None:
        L = self.L
        V = np.empty(L + 1)
        w = np.ones(L + 1)
        V[L] = self.sigma2[L - 1]
        for lev in range(L - 1, 0, -1):
            inv = 1.0 / self.sigma2[lev - 1] + 1.0 / (2.0 * V[lev + 1])
            w[lev] = (1.0 / self.sigma2[lev - 1]) / inv
            V[lev] = 1.0 / inv
        self._w = w  # w[l] for l = 1..L (w[L] = 1)

    # --- client -------------------------------------------------------------------------
    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_int_values(values, self.d)
        y = self.randomizer.randomize(x, rng)["y"]  # (n, L)
        level = np.broadcast_to(np.arange(1, self.L + 1, dtype=np.int8), y.shape)
        return {"level": level.T.reshape(-1).copy(), "y": y.T.reshape(-1).copy()}

    # --- analyzer -----------------------------------------------------------------------
    @property
    def statistic_length(self) -> int:
        return 2 * self.D - 2

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(self.statistic_length, dtype=np.int64)
        if set(messages) - {"shuffler"} != {"level", "y"}:
            raise ValidationError("range_count messages must have the columns 'level' and 'y'", parameter="messages")
        lev = np.asarray(messages["level"])
        y = np.asarray(messages["y"])
        for nm, a in (("level", lev), ("y", y)):
            if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
                raise ValidationError(f"range_count messages '{nm}' must be integers", parameter="messages")
        lev = lev.astype(np.int64)
        y = y.astype(np.int64)
        if lev.shape != y.shape or (lev.size and (lev.min() < 1 or lev.max() > self.L)):
            raise ValidationError(f"range_count message levels must lie in [1, {self.L}]", parameter="messages")
        if y.size and (y.min() < 0 or np.any(y >= (1 << lev))):
            raise ValidationError("range_count message y must be a node index in [0, 2^level)", parameter="messages")
        return np.bincount(self.offsets[lev - 1] + y, minlength=self.statistic_length).astype(np.int64)

    def _levels(self, vec: np.ndarray) -> list[np.ndarray]:
        return [vec[..., o:o + k] for o, k in zip(self.offsets, self.ks)]

    def level_estimates(self, statistic: np.ndarray, n: int) -> list[np.ndarray]:
        """Unbiased per-level node counts ``(C_l - n lam_l/k_l)/(1 - lam_l)``, l = 1..L."""
        s = _check_stat(statistic, self.statistic_length).astype(np.float64)
        return [(c - n * lam / k) / (1.0 - lam) for c, lam, k in zip(self._levels(s), self.lams, self.ks)]

    def _consistent_leaves(self, ys: list[np.ndarray], n: float) -> np.ndarray:
        L = self.L
        z = [None] * (L + 1)
        z[L] = ys[L - 1]
        for lev in range(L - 1, 0, -1):
            pair = z[lev + 1].reshape(-1, 2).sum(axis=1)
            z[lev] = self._w[lev] * ys[lev - 1] + (1.0 - self._w[lev]) * pair
        x = np.array([float(n)])
        for lev in range(1, L + 1):
            gap = x - z[lev].reshape(-1, 2).sum(axis=1)
            x = z[lev] + 0.5 * np.repeat(gap, 2)
        return x

    def _adjoint(self, g: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Coefficients of ``g @ leaves`` (g: (Q, D)) on each level's y_l and on n (consistent)."""
        L = self.L
        gz = [None] * (L + 1)
        gx = g
        for lev in range(L, 0, -1):
            pg = gx.reshape(gx.shape[0], -1, 2).sum(axis=2)
            gz[lev] = gx - 0.5 * np.repeat(pg, 2, axis=1)
            gx = 0.5 * pg
        g_n = gx[:, 0]
        gy = [None] * L
        for lev in range(1, L):
            gy[lev - 1] = self._w[lev] * gz[lev]
            gz[lev + 1] = gz[lev + 1] + (1.0 - self._w[lev]) * np.repeat(gz[lev], 2, axis=1)
        gy[L - 1] = gz[L]
        return gy, g_n

    def _canonical(self, lo: np.ndarray, hi: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Coefficients (0/1) of the canonical dyadic decomposition of [lo, hi) on each level."""
        Q = lo.size
        gy = [np.zeros((Q, int(k))) for k in self.ks]
        a, b = lo.copy(), hi.copy()
        rows = np.arange(Q)
        for lev in range(self.L, 0, -1):
            take = (a < b) & (a % 2 == 1)
            gy[lev - 1][rows[take], a[take]] += 1.0
            a = np.where(take, a + 1, a)
            take = (a < b) & (b % 2 == 1)
            gy[lev - 1][rows[take], b[take] - 1] += 1.0
            b = np.where(take, b - 1, b)
            a, b = a // 2, b // 2
        g_n = ((a == 0) & (b == 1)).astype(np.float64)  # the whole domain: the root, n
        return gy, g_n

    def _query_coefficients(self, lo: np.ndarray, hi: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        if self.consistent:
            g = np.zeros((lo.size, self.D))
            idx = np.arange(self.D)
            g[:] = (idx >= lo[:, None]) & (idx < hi[:, None])
            return self._adjoint(g)
        return self._canonical(lo, hi)

    def _level_variance(self, gy: list[np.ndarray], node_counts: list[np.ndarray], n: float) -> np.ndarray:
        """Exact Var(sum_l gy_l . y_l) given the true node counts per level (multinomial k-RR)."""
        var = np.zeros(gy[0].shape[0])
        for a, m, lam, k in zip(gy, node_counts, self.lams, self.ks):
            q = lam / k
            t = 1.0 - lam
            A = a.sum(axis=1)
            diag = (a**2 * (n * q + t * m)[None, :]).sum(axis=1)
            mean_sq = ((q * A[:, None] + t * a) ** 2 * m[None, :]).sum(axis=1)
            var += (diag - mean_sq) / t**2
        return var

    def _node_counts(self, leaves: np.ndarray) -> list[np.ndarray]:
        full = np.zeros(self.D)
        full[:leaves.size] = leaves
        return [full.reshape(int(k), -1).sum(axis=1) for k in self.ks]

    def _check_ranges(self, lo: Any, hi: Any) -> tuple[np.ndarray, np.ndarray]:
        lo_a = np.atleast_1d(np.asarray(lo))
        hi_a = np.atleast_1d(np.asarray(hi))
        for nm, a in (("lo", lo_a), ("hi", hi_a)):
            if a.ndim != 1 or a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
                raise ValidationError(f"{nm} must be integers (one per range)", parameter=nm)
        if lo_a.shape != hi_a.shape:
            raise ValidationError("lo and hi must have the same length", parameter="hi")
        if lo_a.size and (lo_a.min() < 0 or hi_a.max() > self.d or np.any(lo_a >= hi_a)):
            raise ValidationError(f"ranges must be half-open [lo, hi) with 0 <= lo < hi <= d = {self.d}",
                                  parameter="hi")
        return lo_a.astype(np.int64), hi_a.astype(np.int64)

    #: queries per block when forming the (queries x D) coefficient matrices
    QUERY_BLOCK = 256

    def _blocks(self, lo: np.ndarray, hi: np.ndarray):  # noqa: ANN202 - generator of coefficient blocks
        for s in range(0, lo.size, self.QUERY_BLOCK):
            yield self._query_coefficients(lo[s:s + self.QUERY_BLOCK], hi[s:s + self.QUERY_BLOCK])

    def range_variance(self, true_counts: Any, lo: Any, hi: Any) -> np.ndarray:
        """Exact variance of the estimates of ranges [lo, hi) when the true leaf counts are ``true_counts``."""
        c = _counts_data(true_counts, self.d)
        lo_a, hi_a = self._check_ranges(lo, hi)
        nodes = self._node_counts(c.astype(np.float64))
        return np.concatenate([self._level_variance(gy, nodes, float(c.sum())) for gy, _ in self._blocks(lo_a, hi_a)])

    def range_queries(self, statistic: np.ndarray, n: int, lo: Any, hi: Any) -> Estimate:
        """Estimated counts of the ranges [lo_i, hi_i) with plug-in exact standard errors."""
        n = check_positive_int(n, "n")
        lo_a, hi_a = self._check_ranges(lo, hi)
        ys = self.level_estimates(statistic, n)
        leaves = np.clip(self._consistent_leaves(ys, n), 0.0, None)[: self.d]
        nodes = self._node_counts(leaves)
        vals, var = [], []
        for gy, g_n in self._blocks(lo_a, hi_a):
            vals.append(sum((a * y[None, :]).sum(axis=1) for a, y in zip(gy, ys)) + g_n * n)
            var.append(self._level_variance(gy, nodes, float(n)))
        return Estimate(np.concatenate(vals), np.sqrt(np.maximum(np.concatenate(var), 0.0)), n, self.privacy(n),
                        "count", extra={"lo": lo_a, "hi": hi_a, "consistent": self.consistent})

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """Leaf counts of [0, d) (consistent tree or level-L counts) with exact plug-in errors."""
        n = check_positive_int(n, "n")
        lo = np.arange(self.d)
        est = self.range_queries(statistic, n, lo, lo + 1)
        return Estimate(est.values, est.stderr, n, est.privacy, "count",
                        extra={"consistent": self.consistent, "levels": self.L})

    def variance(self, n: int | None = None) -> float:
        """Average exact variance of a single-item estimate over the d items, data uniform on [0, d)."""
        n = self.n if n is None else n
        cache = self.__dict__.setdefault("_variance_cache", {})
        if n not in cache:
            lo = np.arange(self.d)
            nodes = self._node_counts(np.full(self.d, n / self.d))
            cache[n] = float(np.mean(np.concatenate([self._level_variance(gy, nodes, float(n))
                                                     for gy, _ in self._blocks(lo, lo + 1)])))
        return cache[n]

    # --- simulation ---------------------------------------------------------------------
    def summarize(self, values: Any) -> np.ndarray:
        return np.bincount(check_int_values(values, self.d), minlength=self.d).astype(np.int64)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact law in O(D): per level, kept reports Bin(m_j, 1 - lam), the rest uniform (multinomial)."""
        c = _counts_data(data, self.d)
        full = np.zeros(self.D, dtype=np.int64)
        full[: self.d] = c
        n = int(c.sum())
        out = []
        for k, lam in zip(self.ks, self.lams):  # one vector step per level
            m = full.reshape(int(k), -1).sum(axis=1)
            kept = rng.binomial(m, 1.0 - lam)
            out.append(kept + rng.multinomial(n - int(kept.sum()), np.full(int(k), 1.0 / k)))
        return np.concatenate(out).astype(np.int64)

    # --- privacy and cost ---------------------------------------------------------------
    def _privacy(self, n: int) -> PrivacyStatement:
        eps = dlt = 0.0
        for e0, k in zip(self.eps0, self.ks):
            st = shuffle_statement(float(e0), n, self.delta_level, self._method(), **self._options(int(k)))
            eps += st.eps
            dlt += st.delta
        return PrivacyStatement(eps, min(dlt, 0.999999), "shuffle",
                                note=f"range_count [DERIVED]: {self.L} levels of shuffled k-RR "
                                     f"({self.accounting}), basic composition")

    @property
    def local_randomizer(self) -> TreeKRRRandomizer:
        return self.randomizer

    @property
    def messages_per_user(self) -> float:
        return float(self.L)

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.L) + float(np.mean(np.arange(1, self.L + 1)))


# =============================================================================== one-hot counters

class OneHotCounters(Protocol):
    """One robust binary counter per coordinate of the one-hot encoding of x in [0, d).

    The statistic is the per-coordinate noisy counts ``c_hat_j = c_j + eta_j`` (eta_j
    independent, zero mean, variance :attr:`noise_variance`); see the module docstring for the
    two counters (``"bn"``, ``"sgm"``) and their privacy argument. Subclasses post-process
    :meth:`counts` (post-processing keeps the guarantee).
    """

    model = "shuffle"
    input_kind = "categorical"
    robust = True
    default_counter: str = "bn"

    def __init__(self, epsilon: float, delta: float, n: int, *, d: int, gamma: float = 0.5,
                 counter: Literal["bn", "sgm"] | None = None, wrap_probability: float = 1e-12) -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, self.name)
        self.d = check_domain_size(d)
        self.gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True)
        counter = self.default_counter if counter is None else counter
        if counter not in ("bn", "sgm"):
            raise ValidationError(f"counter must be 'bn' or 'sgm', got {counter!r}", parameter="counter")
        self.counter = counter
        #: per-coordinate budget (two coordinates change under replace-one)
        self.eps_coord = self.epsilon / 2.0
        self.delta_coord = self.delta / 2.0
        honest = self.gamma * self.n
        if counter == "bn":
            if self.eps_coord > 1.0:
                raise OutOfDomainError(f"{self.name} (bn counters) needs eps/2 <= 1, got epsilon={self.epsilon!r}",
                                       parameter="epsilon")
            need = 100.0 * math.log(2.0 / self.delta_coord) / self.eps_coord**2
            if honest < need:
                raise OutOfDomainError(f"{self.name} (bn counters) needs gamma n >= 100 ln(2/(delta/2))/(eps/2)^2 = "
                                       f"{need:.6g}, got {honest:.6g}", parameter="n")
            # rounded up to the 2^-53 grid: 1 - q_noise is sampled exactly, never with less noise
            self.q_noise = sampled_blanket(50.0 * math.log(2.0 / self.delta_coord) / (self.eps_coord**2 * honest))
            self.p = 1.0 - self.q_noise
        else:
            if honest < 1.0 or self.n < 3:
                raise ValidationError(f"{self.name} (sgm counters) needs n >= 3 and gamma n >= 1", parameter="n")
            beta = check_real(wrap_probability, "wrap_probability", low=0.0, high=0.5, low_open=True)
            self.alpha = math.exp(-self.eps_coord)
            self.shape = 1.0 / honest
            # split-and-mix over d independent coordinate instances: extra delta <= d (1+e^eps) 2^-sigma
            self.sigma = split_and_mix_security_bits(self.epsilon, self.delta / self.d)
            tau = float(stats.nbinom.isf(beta / (2.0 * self.d), 1.0 / self.gamma, 1.0 - self.alpha))
            self.modulus = 1 << max(2, math.ceil(math.log2(2.0 * (self.n + tau + 1.0))))
            if self.modulus > 1 << 62:
                raise ValidationError(f"{self.name}: modulus would exceed 2^62", parameter="n")
            parties = max(3, math.floor(honest))
            self.n_messages = split_and_mix_messages(parties, math.log2(self.modulus), self.sigma)
            self._sm = SplitAndMix(self.modulus, self.n_messages)

    # --- noise moments ------------------------------------------------------------------
    def _noise_cumulants(self, n: int) -> tuple[float, float, float]:
        """(variance, third central moment, fourth central moment) of eta_j with n honest users."""
        if self.counter == "bn":
            p, q = self.p, self.q_noise
            v = n * p * q
            return v, v * (q - p), v * (1.0 + 3.0 * (n - 2) * p * q)
        R = n * self.shape
        a = self.alpha
        k2 = 2.0 * R * a / (1 - a) ** 2
        k4 = 2.0 * R * a * (1 + 4 * a + a * a) / (1 - a) ** 4
        return k2, 0.0, k4 + 3.0 * k2**2

    def noise_variance(self, n: int | None = None) -> float:
        """Var(eta_j), all n users honest: ``n p (1-p)`` (bn) or ``2 R alpha/(1-alpha)^2``, R = n/(gamma self.n) (sgm)."""
        return self._noise_cumulants(self.n if n is None else n)[0]

    # --- client -------------------------------------------------------------------------
    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_int_values(values, self.d)
        n = x.shape[0]
        if self.counter == "bn":
            parts = [x]
            chunk = max(1, (1 << 22) // self.d)
            for s in range(0, n, chunk):  # bounded memory; each step vectorized over users x coords
                m = min(n, s + chunk) - s
                _, j = np.nonzero(rng.random((m, self.d)) < self.p)
                parts.append(j.astype(np.int64))
            return {"j": np.concatenate(parts)}
        noisy = np.zeros((n, self.d), dtype=np.int64)
        noisy[np.arange(n), x] = 1
        noisy += simulate_polya(self.shape, self.alpha, (n, self.d), rng)
        noisy -= simulate_polya(self.shape, self.alpha, (n, self.d), rng)
        shares = self._sm.simulate_encode(noisy.reshape(-1), rng)  # (n d, m)
        coord = np.broadcast_to(np.tile(np.arange(self.d, dtype=np.int64), n)[:, None], shares.shape)
        return {"j": coord.reshape(-1).copy(), "share": shares.reshape(-1)}

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, messages: Messages) -> np.ndarray:
        """bn: message count per coordinate; sgm: per-coordinate share sum mod q."""
        want = {"j"} if self.counter == "bn" else {"j", "share"}
        if not messages:
            return np.zeros(self.d, dtype=np.int64)
        if set(messages) - {"shuffler"} != want:
            raise ValidationError(f"{self.name} messages must have the columns {sorted(want)}", parameter="messages")
        j = check_int_values(messages["j"], self.d, "j")
        if self.counter == "bn":
            return np.bincount(j, minlength=self.d).astype(np.int64)
        sh = self._sm.validate_shares(messages["share"])
        if sh.shape != j.shape:
            raise ValidationError("each share needs its coordinate label", parameter="messages")
        return _sum_mod_by_label(j, sh, self.d, self.modulus)

    def counts(self, statistic: np.ndarray, n: int) -> np.ndarray:
        """Unbiased per-coordinate counts ``c_hat_j = c_j + eta_j``."""
        s = _check_stat(statistic, self.d)
        if self.counter == "bn":
            return s.astype(np.float64) - n * self.p
        t = s % self.modulus
        return np.where(t >= (self.modulus + 1) // 2, t - self.modulus, t).astype(np.float64)

    # --- simulation ---------------------------------------------------------------------
    def summarize(self, values: Any) -> np.ndarray:
        return np.bincount(check_int_values(values, self.d), minlength=self.d).astype(np.int64)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact law of the statistic in O(d): c + Bin(n, p) (bn) or c + NB(R) - NB(R) mod q (sgm)."""
        c = _counts_data(data, self.d)
        n = int(c.sum())
        if self.counter == "bn":
            return c + rng.binomial(n, self.p, self.d)
        R = n * self.shape
        z = simulate_polya(R, self.alpha, self.d, rng) - simulate_polya(R, self.alpha, self.d, rng)
        return (c + z) % self.modulus

    # --- privacy and cost ---------------------------------------------------------------
    def _privacy(self, n: int) -> PrivacyStatement:
        honest = self.gamma * self.n
        if n < honest:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"{self.name}: fewer than gamma*n users at n={n}")
        g = min(1.0, honest / n)
        if self.counter == "bn":
            return PrivacyStatement(self.epsilon, self.delta, "shuffle", gamma=g,
                                    note=f"{self.name}: per-coordinate robust binomial counters (cnt_bn [R]) at "
                                         "(eps/2, delta/2), basic composition over the 2 changed coordinates")
        extra = self.d * split_and_mix_delta(self.epsilon, self.sigma)
        return PrivacyStatement(self.epsilon, min(extra, 0.999999), "shuffle", gamma=g,
                                note=f"{self.name}: per-coordinate distributed geometric counters (cnt_sgm [R]) at "
                                     f"eps/2 (pure for the exact sums) + split-and-mix over {self.d} coordinates "
                                     f"(m={self.n_messages}, q=2^{int(math.log2(self.modulus))}, sigma={self.sigma})")

    @property
    def messages_per_user(self) -> float:
        if self.counter == "bn":
            return 1.0 + self.d * self.p
        return float(self.d * self.n_messages)

    @property
    def bits_per_message(self) -> float:
        if self.counter == "bn":
            return bits_for(self.d)
        return bits_for(self.d) + math.log2(self.modulus)


# =============================================================================== distinct elements

class Distinct(OneHotCounters):
    """``distinct`` — **project-original** distinct-elements counter (not BCJM's protocol, which
    the spec could not reconstruct; spec §5.1).

    From the per-coordinate robust counts ``c_hat_j`` (see :class:`OneHotCounters`): with
    ``N = #{j : c_hat_j >= theta}`` and the noise's false-positive rate ``f0 = P(eta >= theta)``,
    ``D_hat = (N - d f0)/(1 - f0)``. Then ``E[D_hat] = D - sum_{c_j > 0} P(eta < theta - c_j)/(1 - f0)``:
    unbiased when every present value has a count well above ``theta`` + noise, otherwise biased
    downwards by the expected number of missed small buckets. Variance
    ``sum_j f_j (1 - f_j)/(1 - f0)^2 <= d/(4 (1 - f0)^2)`` (independent coordinates), i.e.
    error O(sqrt(d)) — the same order as BCJM's Theta(sqrt(k)) for robust shuffle privacy.
    ``theta`` (default ``sqrt(Var eta)``) trades the two. Privacy: that of the counters.
    """

    name = "distinct"
    default_counter = "sgm"

    def __init__(self, epsilon: float, delta: float, n: int, *, d: int, gamma: float = 0.5,
                 counter: Literal["bn", "sgm"] | None = None, threshold: float | None = None) -> None:
        super().__init__(epsilon, delta, n, d=d, gamma=gamma, counter=counter)
        self.threshold = (math.sqrt(self.noise_variance()) if threshold is None
                          else check_real(threshold, "threshold"))

    def _tail(self, t: np.ndarray | float, n: int) -> np.ndarray:
        """P(eta >= t) for the (all-honest) noise law with n users."""
        t = np.asarray(t, dtype=np.float64)
        if self.counter == "bn":
            # eta = Bin(n, p) - n p
            return stats.binom.sf(np.ceil(t + n * self.p) - 1, n, self.p)
        R = n * self.shape
        a = self.alpha
        # Z = X - Y, X, Y ~ NB(R, a): P(Z >= t) = sum_y P(Y = y) P(X >= t + y)
        ymax = int(stats.nbinom.isf(1e-16, R, 1 - a)) + 1
        yv = np.arange(ymax + 1)
        py = stats.nbinom.pmf(yv, R, 1 - a)
        tt = np.ceil(t)[..., None] + yv
        return (py * stats.nbinom.sf(tt - 1, R, 1 - a)).sum(axis=-1)

    def false_positive_rate(self, n: int | None = None) -> float:
        return float(self._tail(self.threshold, self.n if n is None else n))

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        n = check_positive_int(n, "n")
        c = self.counts(statistic, n)
        f0 = self.false_positive_rate(n)
        N = int(np.count_nonzero(c >= self.threshold))
        D = (N - self.d * f0) / (1.0 - f0)
        var = self.d / (4.0 * (1.0 - f0) ** 2)
        return Estimate(np.array([D]), math.sqrt(var), n, self.privacy(n), "distinct",
                        extra={"above_threshold": N, "false_positive_rate": f0, "threshold": self.threshold,
                               "bias_note": "one-sided: present values with counts near the threshold are missed"})

    def expected_estimate(self, true_counts: Any) -> tuple[float, float]:
        """Exact (mean, variance) of D_hat for these true counts (all users honest)."""
        c = _counts_data(true_counts, self.d)
        n = int(c.sum())
        f0 = float(self._tail(self.threshold, n))
        f = self._tail(self.threshold - c, n)
        return (float(f.sum()) - self.d * f0) / (1 - f0), float((f * (1 - f)).sum()) / (1 - f0) ** 2

    def variance(self, n: int | None = None) -> float:
        """Bound d/(4 (1 - f0)^2) on Var(D_hat)."""
        return self.d / (4.0 * (1.0 - self.false_positive_rate(n)) ** 2)


# =============================================================================== uniformity testing

@dataclass(frozen=True)
class UniformityTestResult:
    """Outcome of a uniformity test: reject H0 (p = uniform) iff ``statistic > threshold``."""

    reject: bool
    statistic: float
    threshold: float
    null_sd: float
    counts: np.ndarray

    @property
    def accept(self) -> bool:
        return not self.reject


class UniformityTester(OneHotCounters):
    """Uniformity tester on per-coordinate robust counters [DERIVED reconstruction of BCJM's PUT/AUT].

    Statistic (unbiased for ``||p - u||_2^2`` with n i.i.d. samples of p, fixed n, and noise of
    variance s^2 independent of the data):
    ``T = sum_j (c_hat_j^2 - c_hat_j - s^2) / (n (n - 1)) - 1/d``
    (E[c_hat_j^2 - c_hat_j - s^2] = E[c_j (c_j - 1)] = n (n-1) p_j^2). Under H0 E[T] = 0; if
    TV(p, u) >= alpha then ``||p - u||_2^2 >= 4 alpha^2/d`` (Cauchy–Schwarz), so the threshold
    is the midpoint ``tau = 2 alpha^2/d`` (``alpha`` = the distance parameter). The exact null
    variance (:meth:`null_variance`) uses the noise's central moments; by Chebyshev the type-I
    error is at most ``Var_0(T)/tau^2`` (:meth:`type1_bound`).
    The spec's own form ``sum_j [(c_hat_j - n/d)^2 - c_hat_j] - d s^2`` is the Poissonized
    version (its mean is -n/d, not 0, under fixed-n sampling); we use the fixed-n unbiased form.
    """

    default_counter = "bn"

    def __init__(self, epsilon: float, delta: float, n: int, *, d: int, alpha: float = 0.25,
                 gamma: float = 0.5, counter: Literal["bn", "sgm"] | None = None) -> None:
        super().__init__(epsilon, delta, n, d=d, gamma=gamma, counter=counter)
        self.alpha_tv = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True)
        self.threshold = 2.0 * self.alpha_tv**2 / self.d

    def statistic_T(self, statistic: np.ndarray, n: int) -> float:
        n = check_positive_int(n, "n", minimum=2)
        c = self.counts(statistic, n)
        s2 = self.noise_variance(n)
        return float(np.sum(c * c - c - s2) / (n * (n - 1.0)) - 1.0 / self.d)

    def null_variance(self, n: int | None = None) -> float:
        """Exact Var(T) under H0 (p uniform, all users honest)."""
        n = self.n if n is None else n
        d = self.d
        s2, m3, m4 = self._noise_cumulants(n)
        ec = n / d
        ec2 = n / d * (1 - 1 / d) + ec**2
        v_data = 2.0 * n * (n - 1.0) / d * (1 - 1 / d)
        v_noise = d * ((4 * ec2 - 4 * ec + 1) * s2 + 2 * m3 * (2 * ec - 1) + (m4 - s2**2))
        return (v_data + v_noise) / (n * (n - 1.0)) ** 2

    def type1_bound(self, n: int | None = None) -> float:
        """Chebyshev bound on the false-rejection probability: Var_0(T)/tau^2 (capped at 1)."""
        return min(1.0, self.null_variance(n) / self.threshold**2)

    def test_statistic(self, statistic: np.ndarray, n: int) -> UniformityTestResult:
        T = self.statistic_T(statistic, n)
        return UniformityTestResult(bool(T > self.threshold), T, self.threshold, math.sqrt(self.null_variance(n)),
                                    self.counts(statistic, n))

    def test(self, values: Any, rng: np.random.Generator) -> UniformityTestResult:
        """Run the whole protocol (encode, shuffle, analyze) on samples ``values`` (simulation)."""
        from .shuffler import run_shufflers

        x = check_int_values(values, self.d)
        stat = self.aggregate(run_shufflers(self, self.encode(x, rng), rng))
        return self.test_statistic(stat, x.shape[0])

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """values = [T] (estimate of ||p - u||_2^2), stderr = null sd; extra: reject/accept, tau."""
        r = self.test_statistic(statistic, n)
        return Estimate(np.array([r.statistic]), r.null_sd, n, self.privacy(n), "uniformity",
                        extra={"reject": r.reject, "accept": r.accept, "threshold": r.threshold,
                               "alpha": self.alpha_tv})

    def variance(self, n: int | None = None) -> float:
        return self.null_variance(n)


class PUT(UniformityTester):
    """``put`` — uniformity tester on robust distributed-geometric counters (Cnt_SGM per coordinate).

    BCJM's PUT is robust *pure* shuffle private; our counter needs a split-and-mix sum channel,
    which adds a statistical delta, so the statement is (eps, d (1 + e^eps) 2^-sigma, gamma)
    with sigma chosen to make that <= delta (see :class:`OneHotCounters`). [DERIVED/R]
    """

    name = "put"
    default_counter = "sgm"


class AUT(UniformityTester):
    """``aut`` — uniformity tester on robust binomial counters (Cnt_BN per coordinate):
    (eps, delta, gamma)-robustly shuffle private. [DERIVED/R]"""

    name = "aut"
    default_counter = "bn"


#: registry table
PROTOCOLS: dict[str, type[Protocol]] = {"range_count": RangeCount, "distinct": Distinct, "put": PUT, "aut": AUT}
