"""Shuffle-model multi-value frequency estimation: each user holds k categorical attributes.

Input: an ``(n, k)`` int array, column ``a`` in ``[0, d_a)``. Estimates are the per-attribute
histograms (counts), concatenated in attribute order (``Estimate.extra["offsets"]`` gives where
each attribute starts; :func:`split_attributes` cuts them apart).

* ``fragmenting`` (attribute fragmenting, Erlingsson et al. "Encode, Shuffle, Analyze" [52] as
  described in the survey §4.2): each attribute is one fragment, reported through its own
  histogram protocol (``inner``, default Hist_KR) at ``(eps/k, delta/k)`` and shuffled by its
  own shuffler (``n_shufflers = k``). Central guarantee by basic composition: ``(eps, delta)``.
* ``sample_one`` (sample one attribute, the survey's "randomly sample 1 value and perturb it"):
  each user draws an attribute ``J`` uniformly and sends ``(J, GRR_{d_J}(x_J))`` through one
  shuffler. Amplification [D]: given J = a, the reports of the other n-1 users that are blanket
  reports for the cell (a, v) are independent Bernoulli(gamma_a / (k d_a)) sources, so the
  blanket condition of BBGN19 Thm 3.1 (spec §2) needs
  ``(n-1) gamma_a / (k d_a) >= max(14 ln(2/delta)/eps^2, 27/eps)``; gamma_a is set to equality.
  The attribute choice is data independent, so the guarantee holds for a change of the user's
  whole vector (joint convexity over J).

See ``docs/protocols-histogram.md`` for measured errors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..accounting.composition import basic_composition
from ..core.errors import OutOfDomainError, ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_domain_size, check_positive_int
from ..local.grr import GeneralizedRandomizedResponse
from .base import Messages, Protocol, bits_for, n_messages, take_messages
from .histogram import PROTOCOLS as HISTOGRAM_PROTOCOLS
from .histogram import _MARGIN, PUCM, HistogramProtocol, blanket_epsilon, blanket_required

__all__ = ["Fragmenting", "SampleOne", "ProductRandomizer", "SampleOneRandomizer", "split_attributes", "PROTOCOLS"]


def _dims(d: int | Sequence[int], k: int | None) -> tuple[int, ...]:
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        if k is None:
            raise ValidationError("give k (number of attributes) when d is one domain size", parameter="k")
        return (check_domain_size(d),) * check_positive_int(k, "k")
    if isinstance(d, (str, bytes)) or not isinstance(d, Sequence) or len(d) == 0:
        raise ValidationError(f"d must be a domain size or a non-empty list of them, got {d!r}", parameter="d")
    dims = tuple(check_domain_size(x, "d") for x in d)
    if k is not None and check_positive_int(k, "k") != len(dims):
        raise ValidationError(f"k={k} does not match the {len(dims)} domain sizes in d", parameter="k")
    return dims


def split_attributes(values: np.ndarray, dims: Sequence[int]) -> list[np.ndarray]:
    """Cut a concatenated per-attribute vector into one array per attribute."""
    return np.split(np.asarray(values), np.cumsum(dims)[:-1])


class _Multi(Protocol):
    input_kind = "multi_categorical"

    def __init__(self, epsilon: float, delta: float, n: int, d: int | Sequence[int], k: int | None) -> None:
        super().__init__(epsilon, delta, n)
        if self.delta <= 0:
            raise ValidationError(f"{self.name} is an approximate-DP protocol: delta must lie in (0, 1)",
                                  parameter="delta")
        self.dims = _dims(d, k)
        self.k = len(self.dims)
        self.offsets = np.concatenate([[0], np.cumsum(self.dims)]).astype(np.int64)

    def check_values(self, values: Any) -> np.ndarray:
        arr = np.asarray(values)
        if arr.ndim != 2 or arr.shape[1] != self.k:
            raise ValidationError(f"values must be an (n, {self.k}) integer array, got shape {arr.shape}",
                                  parameter="values")
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise ValidationError(f"values must be integers, got dtype {arr.dtype}", parameter="values")
        if arr.size:
            bad = (arr < 0) | (arr >= np.asarray(self.dims)[None, :])
            if bad.any():
                i, a = np.argwhere(bad)[0]
                raise ValidationError(f"values[:, {a}] must lie in [0, {self.dims[a]}), found {int(arr[i, a])}",
                                      parameter="values")
        return arr.astype(np.int64, copy=False)

    def _n_of(self, n: int | None) -> int:
        return self.n if n is None else check_positive_int(n, "n")


# =========================================================================== fragmenting

class ProductRandomizer:
    """The joint local randomizer of fragmenting: independent per-attribute randomizers.

    ``probabilities(reports, x)`` multiplies the attributes' exact probabilities; reports carry
    one column ``"{a}:{field}"`` per attribute field. ``epsilon`` is the sum of the attributes'
    (a product of eps_a-LDP randomizers is (sum eps_a)-LDP, and the bound is attained).
    """

    def __init__(self, parts: Sequence[Any]) -> None:
        self.parts = list(parts)
        self.epsilon = math.fsum(p.epsilon for p in self.parts)

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        x = np.asarray(x)
        out = None
        for a, mech in enumerate(self.parts):
            sub = {key.split(":", 1)[1]: v for key, v in reports.items() if key.startswith(f"{a}:")}
            pr = np.asarray(mech.probabilities(sub, int(x[a])), dtype=np.float64)
            out = pr if out is None else out * pr
        assert out is not None
        return out


class Fragmenting(_Multi):
    """Attribute fragmenting: one histogram protocol and one shuffler per attribute.

    Attribute ``a`` is reported with ``inner`` (a registered histogram protocol, default
    ``"hist_kr"``) built for ``(eps/k, delta/k, n, d_a)``; its messages carry
    ``shuffler = a`` so each attribute is shuffled separately (unlinkable across attributes).

    Privacy: ``(eps, delta)``-DP central by basic composition of the k attributes' guarantees
    (replace-one on the whole vector); each user's joint report is (sum of eps_l,a)-LDP when the
    inner protocol has a local randomizer. Source: Erlingsson et al. (ESA/Prochlo, SOSP 2017) as
    summarised by the survey (seed 000 §4.2); the per-attribute protocols are those of
    :mod:`shuffledp.shuffle.histogram`.
    Error: the inner protocol's at (eps/k, delta/k): for Hist_KR, Var ~ 14 ln(2k/delta) k^2/eps^2 per
    empty cell.
    """

    name = "fragmenting"

    def __init__(self, epsilon: float, delta: float, n: int, d: int | Sequence[int], k: int | None = None,
                 inner: str = "hist_kr", **inner_params: Any) -> None:
        super().__init__(epsilon, delta, n, d, k)
        if not isinstance(inner, str) or inner.lower() not in HISTOGRAM_PROTOCOLS:
            raise ValidationError(f"inner must be a histogram protocol {sorted(HISTOGRAM_PROTOCOLS)}, got {inner!r}",
                                  parameter="inner")
        cls = HISTOGRAM_PROTOCOLS[inner.lower()]
        if not issubclass(cls, HistogramProtocol):  # pragma: no cover - table holds histogram classes
            raise ValidationError(f"inner must be a histogram protocol (hist_kr, hist_mm, slh, murs, prhr, pucm), "
                                  f"got {inner!r}", parameter="inner")
        self.inner_name = cls.name
        eps_a, delta_a = self.epsilon / self.k, self.delta / self.k
        self.parts: list[HistogramProtocol] = [cls(epsilon=eps_a, delta=delta_a, n=self.n, d=da, **inner_params)
                                               for da in self.dims]  # one per attribute (k objects)
        if any(p.n_shufflers != 1 for p in self.parts):
            raise ValidationError("fragmenting needs single-shuffler inner protocols (e.g. murs with mode='chain')",
                                  parameter="inner")
        self.n_shufflers = self.k
        # shape of each attribute's statistic (PUCM keeps a (tau, d) array, the others (d,))
        self._shapes = [(p.tau, p.d) if isinstance(p, PUCM) else (p.d,) for p in self.parts]

    @property
    def local_randomizer(self) -> ProductRandomizer | None:
        mechs = [p.local_randomizer for p in self.parts]
        return None if any(m is None for m in mechs) else ProductRandomizer(mechs)

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        out = []
        for a, part in enumerate(self.parts):  # one batch per attribute
            m = dict(part.encode(x[:, a], rng))
            m["shuffler"] = np.full(n_messages(m), a, dtype=np.int64)
            out.append(m)
        return _concat_loose(out)

    def shuffler_messages(self, shuffler: int, rng: np.random.Generator) -> Messages:
        return self.parts[shuffler].shuffler_messages(0, rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        if "shuffler" not in messages:
            raise ValidationError("fragmenting messages need the 'shuffler' column", parameter="messages")
        route = np.asarray(messages["shuffler"])
        stats = []
        for a, part in enumerate(self.parts):  # one batch per attribute
            sel = np.nonzero(route == a)[0]
            sub = {k: v for k, v in take_messages(messages, sel).items() if k != "shuffler"}
            stats.append(np.asarray(part.aggregate(sub)))
        return self._flatten(stats)

    def _flatten(self, stats: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(s).ravel() for s in stats])

    def _unflatten(self, statistic: np.ndarray) -> list[np.ndarray]:
        shapes = self._shapes
        sizes = [int(np.prod(s)) for s in shapes]
        stat = np.asarray(statistic)
        if stat.shape != (sum(sizes),):
            raise ValidationError(f"statistic must have shape ({sum(sizes)},), got {stat.shape}", parameter="statistic")
        parts = np.split(stat, np.cumsum(sizes)[:-1])
        return [p.reshape(s) for p, s in zip(parts, shapes)]

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        ests = [part.estimate(s, n) for part, s in zip(self.parts, self._unflatten(statistic))]
        return Estimate(np.concatenate([e.values for e in ests]), np.concatenate([e.stderr for e in ests]), n,
                        self.privacy(n), kind="count", extra={"offsets": self.offsets.copy(), "dims": self.dims})

    def summarize(self, values: Any) -> np.ndarray:
        x = self.check_values(values)
        return np.concatenate([np.bincount(x[:, a], minlength=da) for a, da in enumerate(self.dims)]).astype(np.int64)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: attributes are randomized independently, so each inner statistic is sampled
        from its attribute's true counts."""
        c = np.asarray(data)
        if c.shape != (int(self.offsets[-1]),):
            raise ValidationError(f"data must be the {int(self.offsets[-1])} concatenated counts", parameter="data")
        return self._flatten([part.simulate_statistic(ca, rng)
                              for part, ca in zip(self.parts, split_attributes(c, self.dims))])

    def variance(self, n: int | None = None, count: float = 0.0, attribute: int = 0) -> float:
        return self.parts[attribute].variance(self._n_of(n), count)

    def _privacy(self, n: int) -> PrivacyStatement:
        sts = [p.privacy(n) for p in self.parts]
        eps, delta = basic_composition([(s.eps, s.delta) for s in sts])
        return PrivacyStatement(round_up(eps) if math.isfinite(eps) else eps, delta, model="shuffle",
                                note=f"fragmenting: basic composition of {self.k} x {self.inner_name}")

    @property
    def messages_per_user(self) -> float:
        return math.fsum(p.messages_per_user for p in self.parts)

    @property
    def bits_per_user(self) -> float:
        return math.fsum(p.bits_per_user for p in self.parts)

    @property
    def bits_per_message(self) -> float:
        return self.bits_per_user / self.messages_per_user


def _concat_loose(parts: list[Messages]) -> Messages:
    keys = list(parts[0].keys())
    for p in parts[1:]:
        if list(p.keys()) != keys:
            raise ValidationError("fragmenting needs the same message columns for every attribute", parameter="inner")
    out = {}
    for key in keys:
        cols = [np.asarray(p[key]) for p in parts]
        dt = np.result_type(*cols) if all(c.dtype == cols[0].dtype for c in cols) else np.int64
        out[key] = np.concatenate([c.astype(dt, copy=False) for c in cols])
    return out


# =========================================================================== sample one

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

    Parameters from the central target (BBGN19 Thm 3.1 blanket per cell, spec §2; eps <= 1)::

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
    (replace-one on the whole vector). Source: survey seed 000 §4.2 (sampling beats budget
    splitting in LDP, its refs [65-66]); amplification [D] from BBGN19.
    Cost: 1 message of ceil(log2 k) + ceil(log2 max d_a) bits.
    """

    name = "sample_one"

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

    def variance(self, n: int | None = None, count: float = 0.0, attribute: int = 0) -> float:
        a = attribute
        return float(self._var_cells(self._n_of(n), np.asarray(count), self.p[a], self.q[a]))

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


PROTOCOLS: dict[str, type[Protocol]] = {"fragmenting": Fragmenting, "sample_one": SampleOne}
