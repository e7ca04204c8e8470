"""``range_count``: shuffled hierarchical histogram for range counts (survey §4.4), a
reconstruction: the results of the range-counting papers the survey cites are stated in their
abstracts only, so this is the standard hierarchical construction, documented in
``docs/protocols-other.md``.

A dyadic tree over [0, d): every user sends one k-RR report per tree level (k = 2^l at level l),
the central budget is split evenly over the L levels (basic composition), each level is a
shuffled k-RR whose local epsilon comes from the accounting module's amplification bound, and the
analyzer makes the noisy tree consistent (two-pass constrained inference, Hay, Rastogi, Miklau,
Suciu, "Boosting the Accuracy of Differentially Private Histograms Through Consistency", VLDB
2010, with per-level weights). Range answers are linear in the level counts, so they are unbiased
and their variance is computed exactly.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from ..accounting.shuffle import local_epsilon_for, shuffle_statement
from ..core.errors import OutOfDomainError, ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_domain_size, check_int_values, check_positive_int
from ..local.bits import LOG_MARGIN
from ._common import check_int_statistic, check_true_counts, krr_local_epsilon, need_delta, sampled_blanket
from .base import Messages, Protocol, bits_for

__all__ = ["TreeKRRRandomizer", "RangeCount", "PROTOCOLS"]


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
        need_delta(self.delta, "range_count")
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
        s = check_int_statistic(statistic, self.statistic_length).astype(np.float64)
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
        c = check_true_counts(true_counts, self.d)
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

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Average exact variance of a single-item estimate over the d items, data uniform on [0, d)
        (``value`` is ignored: an item's variance depends on the whole tree's counts;
        :meth:`range_variance` gives it for given counts)."""
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
        c = check_true_counts(data, self.d)
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
        for e0, k, e_local in zip(self.eps0, self.ks, self.randomizer.level_eps):
            try:
                st = shuffle_statement(float(e0), n, self.delta_level, self._method(), **self._options(int(k)))
            except OutOfDomainError:  # the bound does not apply at this n: the level's local eps
                eps += float(e_local)
                continue
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


PROTOCOLS: dict[str, type[Protocol]] = {"range_count": RangeCount}
