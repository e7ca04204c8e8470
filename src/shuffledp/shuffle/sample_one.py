"""``sample_one``: sample one attribute and perturb it (the survey §4.2's "randomly sample 1 value
and perturb it"): each user draws an attribute ``J`` uniformly and sends ``(J, GRR_{d_J}(x_J))``
through one shuffler.

Amplification (derived from Balle, Bell, Gascon, Nissim, CRYPTO 2019, Thm 3.1): given J = a, the
reports of the other n-1 users that are blanket reports for the cell (a, v) are independent
Bernoulli(gamma_a / (k d_a)) sources, so the blanket condition needs
``(n-1) gamma_a / (k d_a) >= max(14 ln(2/delta)/eps^2, 27/eps)``; gamma_a is set to equality.
The attribute choice is data independent, so the guarantee holds for a change of the user's
whole vector (joint convexity over J). See ``docs/protocols-histogram.md`` for measured errors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import OutOfDomainError, ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..local.grr import GeneralizedRandomizedResponse
from .base import Messages, Protocol, bits_for
from .histogram._base import _MARGIN, blanket_epsilon, blanket_required
from .multi_attribute import _Multi

__all__ = ["SampleOneRandomizer", "SampleOne", "PROTOCOLS"]


class SampleOneRandomizer:
    """Local randomizer of ``sample_one``: ``Pr[(a, y) | x] = (1/k) GRR_a(y | x_a)``.

    eps-LDP with ``epsilon = max_a eps_a`` (the ratio on cell (a, y) is at most p_a/q_a).
    Reports: columns ``"attr"`` and ``"y"``.
    """

    def __init__(self, grrs: Sequence[GeneralizedRandomizedResponse]) -> None:
        self.grrs = list(grrs)
        self.k = len(self.grrs)
        self.epsilon = max(g.epsilon for g in self.grrs)

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        x = np.asarray(x)
        attr, y = np.asarray(reports["attr"]), np.asarray(reports["y"])
        p = np.array([g.p for g in self.grrs])[attr]
        q = np.array([g.q for g in self.grrs])[attr]
        return np.where(y == x[attr], p, q) / self.k


class SampleOne(_Multi):
    """Sample one attribute: each user reports ``(J, GRR_{d_J}(x_J))`` with J uniform in [k].

    Parameters from the central target (BBGN19 Thm 3.1 blanket per cell; eps <= 1)::

        gamma_a = k d_a max(14 ln(2/delta)/eps^2, 27/eps) / (n-1) < 1
        eps_a   = ln(1 + d_a (1 - gamma_a) / gamma_a)          (GRR on attribute a)

    Analyzer: ``C_{a,v}`` = number of reports (a, v); ``c^_{a,v} = (k C_{a,v} - n q_a)/(p_a - q_a)``
    (unbiased). Exact variance: ``k^2 [c pi1(1-pi1) + (n-c) pi0(1-pi0)] / (p_a-q_a)^2`` with
    ``pi1 = p_a/k``, ``pi0 = q_a/k`` (the attribute sampling adds the ``k c`` term).
    ``privacy(n)`` equals the accounting module's blanket bound for a k d_a-ary RR with the same
    blanket per cell (``e^eps' = 1 + k d_a (1-gamma_a)/gamma_a``), i.e.
    ``eps = max(sqrt(14 ln(2/delta)/c), 27/c)`` with ``c = min_a (n-1) gamma_a/(k d_a)`` (the 27/c
    term binds only for large delta, e.g. delta = 0.5 at eps = 1); if that exceeds 1 (outside Thm
    3.1) or eps_l, the statement is the local guarantee ``(max_a eps_a, 0)``.

    Privacy: each report is (max_a eps_a)-LDP; the shuffled reports are (eps, delta)-DP
    (replace-one on the whole vector). Source: the ESA survey §4.2 (sampling beats budget
    splitting in LDP, its refs [65-66]); amplification derived here from BBGN19 Thm 3.1.
    Cost: 1 message of ceil(log2 k) + ceil(log2 max d_a) bits.
    """

    name = "sample_one"
    one_message_per_user = True

    def __init__(self, epsilon: float, delta: float, n: int, d: int | Sequence[int], k: int | None = None) -> None:
        super().__init__(epsilon, delta, n, d, k)
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 1.0:
            raise OutOfDomainError(f"sample_one uses BBGN19 Thm 3.1 and needs epsilon <= 1, got {eps!r}",
                                   parameter="epsilon")
        if n < 2:
            raise ValidationError("sample_one needs n >= 2 users", parameter="n")
        c_req = blanket_required(eps, delta) * _MARGIN  # a hair more blanket: see histogram._MARGIN
        gam = [self.k * da * c_req / (n - 1) for da in self.dims]
        if max(gam) >= 1.0:
            n_min = math.floor(self.k * max(self.dims) * c_req) + 2
            raise OutOfDomainError(f"sample_one cannot reach epsilon={eps!r}, delta={delta!r} with n={n}, k={self.k}, "
                                   f"d={max(self.dims)}: needs gamma = {max(gam):.4g} < 1, i.e. n >= {n_min}",
                                   parameter="n")
        self.eps_attr = [math.log1p(da * (1 - g) / g) for da, g in zip(self.dims, gam)]
        self.grrs = [GeneralizedRandomizedResponse(e, da) for e, da in zip(self.eps_attr, self.dims)]
        self.p = np.array([g.p for g in self.grrs])
        self.q = np.array([g.q for g in self.grrs])
        self.gamma = np.asarray(self.dims, dtype=np.float64) * self.q
        self._cell_p = np.repeat(self.p, self.dims)
        self._cell_q = np.repeat(self.q, self.dims)

    @property
    def local_randomizer(self) -> SampleOneRandomizer:
        return SampleOneRandomizer(self.grrs)

    @property
    def eps_l(self) -> float:
        return max(self.eps_attr)

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        n = x.shape[0]
        attr = rng.integers(0, self.k, size=n, dtype=np.int64)
        y = np.empty(n, dtype=np.int64)
        for a, grr in enumerate(self.grrs):  # one vectorized GRR per attribute
            sel = np.nonzero(attr == a)[0]
            if sel.size:
                y[sel] = grr.randomize(x[sel, a], rng)["y"]
        return {"attr": attr, "y": y}

    def aggregate(self, messages: Messages) -> np.ndarray:
        for key in ("attr", "y"):
            if key not in messages:
                raise ValidationError(f"sample_one messages need an {key!r} column", parameter="messages")
        attr, y = np.asarray(messages["attr"]), np.asarray(messages["y"])
        for name, col in (("attr", attr), ("y", y)):
            if col.dtype == np.bool_ or not np.issubdtype(col.dtype, np.integer):
                raise ValidationError(f"sample_one column {name!r} must be integers", parameter="messages")
        if attr.size:
            if attr.min() < 0 or attr.max() >= self.k:
                raise ValidationError(f"'attr' must lie in [0, {self.k})", parameter="messages")
            if y.min() < 0 or (y >= np.asarray(self.dims)[attr]).any():
                raise ValidationError("'y' must lie in [0, d_attr)", parameter="messages")
        return np.bincount(self.offsets[attr.astype(np.int64)] + y.astype(np.int64),
                           minlength=int(self.offsets[-1])).astype(np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic, dtype=np.float64)
        if stat.shape != (int(self.offsets[-1]),):
            raise ValidationError(f"statistic must have shape ({int(self.offsets[-1])},)", parameter="statistic")
        est = (self.k * stat - n * self._cell_q) / (self._cell_p - self._cell_q)
        var = self._var_cells(n, est)
        return Estimate(est, np.sqrt(var), n, self.privacy(n), kind="count",
                        extra={"offsets": self.offsets.copy(), "dims": self.dims})

    def _var_cells(self, n: int, c: np.ndarray, p: np.ndarray | None = None, q: np.ndarray | None = None) -> np.ndarray:
        p = self._cell_p if p is None else p
        q = self._cell_q if q is None else q
        c = np.clip(np.asarray(c, dtype=np.float64), 0.0, n)
        p1, p0 = p / self.k, q / self.k
        return self.k**2 * (c * p1 * (1 - p1) + (n - c) * p0 * (1 - p0)) / (p - q) ** 2

    def attribute_variance(self, n: int | None, value: float, attribute: int) -> float:
        """Exact variance of the estimated count of a cell of ``attribute`` held by ``value`` users."""
        a = self._attribute(attribute)
        return float(self._var_cells(self._n_of(n), np.asarray(value), self.p[a], self.q[a]))

    def summarize(self, values: Any) -> np.ndarray:
        """Distinct rows and their multiplicities, as an ``(u, k + 1)`` array (last column = count):
        the joint data the attribute sampling needs for an exact simulation."""
        x = self.check_values(values)
        rows, counts = np.unique(x, axis=0, return_counts=True)
        return np.column_stack([rows, counts]).astype(np.int64)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: split each distinct row's users over the k attributes (multinomial), then GRR
        per attribute as keep-or-uniform; O(u k + sum d_a)."""
        data = np.asarray(data)
        if data.ndim != 2 or data.shape[1] != self.k + 1 or not np.issubdtype(data.dtype, np.integer):
            raise ValidationError(f"data must be summarize()'s (u, {self.k + 1}) array", parameter="data")
        rows, counts = data[:, :-1], data[:, -1]
        self.check_values(rows)
        if counts.size and counts.min() < 0:
            raise ValidationError("row counts must be non-negative", parameter="data")
        split = rng.multinomial(counts, np.full(self.k, 1.0 / self.k)) if counts.size else np.zeros((0, self.k), int)
        out = np.zeros(int(self.offsets[-1]), dtype=np.int64)
        for a, da in enumerate(self.dims):  # one step per attribute
            ca = np.bincount(rows[:, a], weights=split[:, a], minlength=da).astype(np.int64)
            kept = rng.binomial(ca, self.p[a] - self.q[a])
            out[self.offsets[a]:self.offsets[a + 1]] = kept + rng.multinomial(int(ca.sum() - kept.sum()),
                                                                               np.full(da, 1.0 / da))
        return out

    def blanket(self, n: int | None = None) -> float:
        """Expected blanket reports per cell for a target user (minimum over attributes)."""
        n = self._n_of(n)
        return float(min((n - 1) * g / (self.k * da) for g, da in zip(self.gamma, self.dims)))

    def _privacy(self, n: int) -> PrivacyStatement:
        eps = blanket_epsilon(self.blanket(n), self.delta)
        if eps > 1.0 or eps >= self.eps_l:
            return PrivacyStatement(self.eps_l, 0.0, model="shuffle",
                                    note=f"sample_one: only the local guarantee at n={n}")
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"sample_one: blanket {self.blanket(n):.6g} per cell (k={self.k})")

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.k) + bits_for(max(self.dims))


PROTOCOLS: dict[str, type[Protocol]] = {"sample_one": SampleOne}
