"""``fragmenting``: attribute fragmenting for multi-attribute frequencies (Erlingsson, Feldman,
Mironov, Raghunathan, Song, Talwar, Thakurta, "Encode, Shuffle, Analyze Privacy Revisited:
Formalizations and Empirical Evaluation", arXiv 2001.03618, 2020, as described in the survey §4.2).

Each attribute is one fragment, reported through its own histogram protocol (``inner``, default
Hist_KR) at ``(eps/k, delta/k)`` and shuffled by its own shuffler (``n_shufflers = k``). Central
guarantee by basic composition: ``(eps, delta)``. See ``docs/protocols-histogram.md`` for
measured errors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..accounting.composition import basic_composition
from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from .base import Messages, Protocol, n_messages, take_messages
from .histogram import HistogramProtocol, PROTOCOLS as HISTOGRAM_PROTOCOLS, PUCM
from .multi_attribute import _Multi, split_attributes

__all__ = ["ProductRandomizer", "Fragmenting", "PROTOCOLS"]


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
    inner protocol has a local randomizer. Source: Erlingsson, Feldman, Mironov, Raghunathan,
    Song, Talwar, Thakurta, "Encode, Shuffle, Analyze Privacy Revisited", arXiv 2001.03618, 2020
    (attribute fragmenting), as summarised by the ESA survey §4.2; the per-attribute protocols are those of
    :mod:`shuffledp.shuffle.histogram`.
    Error: the inner protocol's at (eps/k, delta/k): for Hist_KR, Var ~ 14 ln(2k/delta) k^2/eps^2 per
    empty cell.
    """

    name = "fragmenting"
    user_routing = "every"   # each attribute goes to its own shuffler: every user reaches all of them

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

    def attribute_variance(self, n: int | None, value: float, attribute: int) -> float:
        """The inner protocol's variance for a cell of ``attribute`` held by ``value`` users."""
        return self.parts[self._attribute(attribute)].variance(self._n_of(n), value)

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


PROTOCOLS: dict[str, type[Protocol]] = {"fragmenting": Fragmenting}
