"""Event-style privacy accountants: ``compose(event, count)``, ``get_epsilon(delta)``, ``get_delta(eps)``.

Back ends
---------
- :class:`BasicCompositionAccountant` — sequential sum (and max over :class:`ParallelComposedEvent`
  branches). Gaussian / zCDP events get an equal share of the delta budget.
- :class:`AdvancedCompositionAccountant` — Dwork–Rothblum–Vadhan with the delta split written out:
  events with a fixed delta keep theirs; the rest of delta is split half to delta' and half
  equally over the Gaussian / zCDP compositions. Reports min(DRV, basic).
- :class:`RdpAccountant` — RDP on an order grid with large orders; improved conversion by default.
- :class:`ZCdpAccountant` — sums rho (and xi); CKS20 optimal conversion by default.
- :class:`~shuffledp.accounting.pld.PldAccountant` (module ``pld``) — privacy-loss distributions,
  connect-the-dots discretization, FFT composition: the tightest of these.

All epsilons (and deltas) returned are rounded outward with :func:`~shuffledp.core.privacy.round_up`.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from typing import Callable, Literal

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import Model, Neighbouring, PrivacyStatement, round_up
from ..core.validation import check_delta, check_positive_int, check_real
from . import composition as comp
from . import rdp as R
from .events import (ApproxDpEvent, ComposedEvent, GaussianEvent, LaplaceEvent, ParallelComposedEvent,
                     PoissonSampledEvent, PureDpEvent, RandomizedResponseEvent, SelfComposedEvent, UnsupportedEventError,
                     ZCdpEvent, _check_event)

__all__ = [
    "PrivacyAccountant",
    "BasicCompositionAccountant",
    "AdvancedCompositionAccountant",
    "RdpAccountant",
    "ZCdpAccountant",
]

_NEIGHBOURING = ("replace_one", "add_remove_one")


def _check_neighbouring(nb: str) -> str:
    if nb not in _NEIGHBOURING:
        raise ValidationError(f"neighbouring must be one of {_NEIGHBOURING}, got {nb!r}", parameter="neighbouring")
    return nb


class PrivacyAccountant(ABC):
    """Base class: a ledger of (event, count) and the conversion to (eps, delta).

    ``compose`` validates the whole event tree before changing any state, so an unsupported
    event leaves the accountant as it was.
    """

    name = "base"

    def __init__(self, neighbouring: Neighbouring = "add_remove_one") -> None:
        self.neighbouring: Neighbouring = _check_neighbouring(neighbouring)  # type: ignore[assignment]
        self._ledger: list[tuple[object, int]] = []

    # -- public API
    @property
    def ledger(self) -> list[tuple[object, int]]:
        """The composed events, in order, with their counts."""
        return list(self._ledger)

    def supports(self, event: object) -> bool:
        """True if :meth:`compose` would accept ``event``."""
        try:
            _check_event(event)
            self._check_relation(event)
            self._validate(event)
        except UnsupportedEventError:
            return False
        return True

    def compose(self, event: object, count: int = 1) -> "PrivacyAccountant":
        """Add ``event`` composed ``count`` times. Returns ``self`` (chainable)."""
        _check_event(event)
        count = check_positive_int(count, "count")
        self._check_relation(event)
        self._validate(event)
        self._add(event, count)
        self._ledger.append((event, count))
        return self

    @abstractmethod
    def get_epsilon(self, delta: float) -> float:
        """Smallest certified epsilon at ``delta`` (rounded up; ``inf`` if none)."""

    def get_delta(self, epsilon: float) -> float:
        """Smallest certified delta at ``epsilon`` (rounded up; 1.0 if none).

        Default: bisection in log(delta) on :meth:`get_epsilon`, which is non-increasing in delta;
        the returned delta always satisfies ``get_epsilon(delta) <= epsilon``.
        """
        epsilon = check_real(epsilon, "epsilon", low=0.0)
        if not self._ledger:
            return 0.0
        hi = 1.0 - 1e-12
        if self.get_epsilon(hi) > epsilon:
            return 1.0
        lo = 1e-300
        if self.get_epsilon(lo) <= epsilon:
            return lo
        llo, lhi = math.log(lo), math.log(hi)
        for _ in range(80):
            mid = 0.5 * (llo + lhi)
            if self.get_epsilon(math.exp(mid)) <= epsilon:
                lhi = mid
            else:
                llo = mid
            if lhi - llo < 1e-9:
                break
        return round_up(math.exp(lhi))

    def statement(self, delta: float, model: Model = "central") -> PrivacyStatement:
        """The accumulated guarantee at ``delta`` as a :class:`PrivacyStatement`."""
        eps = self.get_epsilon(delta)
        return PrivacyStatement(eps, delta, model=model, neighbouring=self.neighbouring,
                                note=f"{self.name} accountant, {sum(c for _, c in self._ledger)} compositions")

    def __repr__(self) -> str:
        """Type, settings, the composed events (the first three, then how many more) and the totals.

        E.g. ``RdpAccountant(neighbouring='add_remove_one', conversion='improved', compositions=2,
        events=[GaussianEvent(sigma=1.0, ...) x2], pure_eps=inf)``.
        """
        shown = [f"{ev!r}" + (f" x{c}" if c != 1 else "") for ev, c in self._ledger[:3]]
        if len(self._ledger) > 3:
            shown.append(f"... {len(self._ledger) - 3} more")
        fields = [f"neighbouring={self.neighbouring!r}", *self._settings_repr(),
                  f"compositions={sum(c for _, c in self._ledger)}", f"events=[{', '.join(shown)}]",
                  *self._totals_repr()]
        return f"{type(self).__name__}({', '.join(fields)})"

    def _settings_repr(self) -> list[str]:
        """``name=value`` strings of the constructor settings other than ``neighbouring``."""
        return []

    def _totals_repr(self) -> list[str]:
        """``name=value`` strings of the accumulated state."""
        return []

    # -- hooks
    def _check_relation(self, event: object) -> None:
        """Neighbouring-relation requirements (as in dp-accounting)."""
        if isinstance(event, RandomizedResponseEvent) and self.neighbouring != "replace_one":
            raise UnsupportedEventError("RandomizedResponseEvent needs neighbouring='replace_one' "
                                        "(a user's value changes)", parameter="event")
        if isinstance(event, PoissonSampledEvent):
            if self.neighbouring != "add_remove_one":
                raise UnsupportedEventError("PoissonSampledEvent needs neighbouring='add_remove_one'",
                                            parameter="event")
            self._check_relation(event.event)
        elif isinstance(event, SelfComposedEvent):
            self._check_relation(event.event)
        elif isinstance(event, (ComposedEvent, ParallelComposedEvent)):
            for e in event.events:
                self._check_relation(e)

    @abstractmethod
    def _validate(self, event: object) -> None:
        """Raise UnsupportedEventError if the back end cannot handle ``event``."""

    @abstractmethod
    def _add(self, event: object, count: int) -> None:
        """Fold a validated event into the state."""


# =========================================================================== (eps, delta) back ends

class _Atoms:
    """Flattened composition: fixed (eps, delta) atoms and delta-dependent 'profile' atoms."""

    def __init__(self) -> None:
        self.fixed: list[tuple[float, float, int]] = []
        self.profiles: list[tuple[Callable[[float], float], int]] = []

    def extend(self, other: "_Atoms", mult: int) -> None:
        self.fixed += [(e, d, c * mult) for e, d, c in other.fixed]
        self.profiles += [(f, c * mult) for f, c in other.profiles]


class _EpsDeltaAccountant(PrivacyAccountant):
    """Shared event flattening of the basic and advanced accountants."""

    def __init__(self, neighbouring: Neighbouring = "add_remove_one",
                 gaussian_conversion: Literal["analytic", "classic"] = "analytic") -> None:
        super().__init__(neighbouring)
        if gaussian_conversion not in ("analytic", "classic"):
            raise ValidationError("gaussian_conversion must be 'analytic' or 'classic', "
                                  f"got {gaussian_conversion!r}", parameter="gaussian_conversion")
        self.gaussian_conversion = gaussian_conversion
        self._atoms = _Atoms()

    def _settings_repr(self) -> list[str]:
        return [f"gaussian_conversion={self.gaussian_conversion!r}"]

    def _totals_repr(self) -> list[str]:
        eps = math.fsum(e * c for e, _, c in self._atoms.fixed)
        delta = math.fsum(d * c for _, d, c in self._atoms.fixed)
        out = [f"fixed_epsilon={eps:.6g}", f"fixed_delta={delta:.6g}"]
        m = sum(c for _, c in self._atoms.profiles)
        if m:
            out.append(f"gaussian_or_zcdp_compositions={m}")
        return out

    def _gaussian_profile(self, ev: GaussianEvent) -> Callable[[float], float]:
        mu, sigma, sens = ev.mu, ev.sigma, ev.sensitivity
        classic = self.gaussian_conversion == "classic"

        def eps_of(delta_i: float) -> float:
            if classic:
                e = comp.gaussian_epsilon_classic(delta_i, sigma, sens)
                if e is not None:
                    return e
            return comp.gaussian_epsilon_exact(delta_i, mu)

        return eps_of

    def _flatten(self, ev: object) -> _Atoms:
        out = _Atoms()
        if isinstance(ev, (PureDpEvent, LaplaceEvent, RandomizedResponseEvent)):
            out.fixed.append((ev.epsilon, 0.0, 1))
        elif isinstance(ev, ApproxDpEvent):
            out.fixed.append((ev.epsilon, ev.delta, 1))
        elif isinstance(ev, GaussianEvent):
            out.profiles.append((self._gaussian_profile(ev), 1))
        elif isinstance(ev, ZCdpEvent):
            rho, xi = ev.rho, ev.xi
            out.profiles.append((lambda d, rho=rho, xi=xi: R.zcdp_to_epsilon(rho, d, xi), 1))
        elif isinstance(ev, SelfComposedEvent):
            out.extend(self._flatten(ev.event), ev.count)
        elif isinstance(ev, ComposedEvent):
            for e in ev.events:
                out.extend(self._flatten(e), 1)
        elif isinstance(ev, ParallelComposedEvent):
            branches = [self._fixed_statement(e, "ParallelComposedEvent") for e in ev.events]
            out.fixed.append((*comp.parallel_composition(branches), 1))
        elif isinstance(ev, PoissonSampledEvent):
            e, d = self._fixed_statement(ev.event, "PoissonSampledEvent")
            out.fixed.append((*comp.subsampling_amplification(e, d, ev.sampling_probability), 1))
        else:  # pragma: no cover - _check_event already filtered
            raise UnsupportedEventError(f"unsupported event {type(ev).__name__}", parameter="event")
        return out

    def _fixed_statement(self, ev: object, where: str) -> tuple[float, float]:
        a = self._flatten(ev)
        if a.profiles:
            raise UnsupportedEventError(f"{self.name} accountant: Gaussian/zCDP events inside a {where} "
                                        "need a fixed delta; wrap them as ApproxDpEvent or use RdpAccountant",
                                        parameter="event")
        return comp.basic_composition([(e * c, d * c) for e, d, c in a.fixed])

    def _validate(self, event: object) -> None:
        self._flatten(event)

    def _add(self, event: object, count: int) -> None:
        self._atoms.extend(self._flatten(event), count)

    def _split(self, delta: float) -> tuple[float, float, int] | None:
        """(sum of fixed eps, remaining delta, number of profile compositions) or None if infeasible."""
        fixed_delta = math.fsum(d * c for _, d, c in self._atoms.fixed)
        rem = delta - fixed_delta
        m = sum(c for _, c in self._atoms.profiles)
        if rem < 0 or (rem == 0 and m > 0):
            return None
        return rem, fixed_delta, m


class BasicCompositionAccountant(_EpsDeltaAccountant):
    """Sequential composition ``(sum eps_i, sum delta_i)``; parallel branches take the max.

    Gaussian / zCDP events (no fixed delta) share the delta left after fixed-delta events
    equally; ``gaussian_conversion='analytic'`` (default, Balle–Wang exact) or ``'classic'``
    (``sqrt(2 ln(1.25/delta_i))/sigma``, only where it is < 1, else analytic).
    Cost: O(#events) per query.
    """

    name = "basic composition"

    def get_epsilon(self, delta: float) -> float:
        delta = check_delta(delta)
        sp = self._split(delta)
        if sp is None:
            return math.inf
        rem, _, m = sp
        eps = math.fsum(e * c for e, _, c in self._atoms.fixed)
        if m:
            per = rem / m
            eps += math.fsum(f(per) * c for f, c in self._atoms.profiles)
        return round_up(eps)

    def get_delta(self, epsilon: float) -> float:
        if not self._atoms.profiles:
            epsilon = check_real(epsilon, "epsilon", low=0.0)
            eps = math.fsum(e * c for e, _, c in self._atoms.fixed)
            d = math.fsum(d * c for _, d, c in self._atoms.fixed)
            return round_up(min(d, 1.0)) if epsilon >= eps else 1.0
        return super().get_delta(epsilon)


class AdvancedCompositionAccountant(_EpsDeltaAccountant):
    """Dwork–Rothblum–Vadhan advanced composition (heterogeneous form), delta split written out.

    With target delta: fixed-delta events keep their delta_i; of the rest, ``delta' = rem/2``
    goes to the DRV slack and ``rem/2`` is split equally over the Gaussian / zCDP compositions
    (with no such events, ``delta' = rem``). Total: ``sum delta_i + delta' = delta``.
    Epsilon: ``sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1)``; the accountant
    reports the smaller of that and basic composition with the same per-event deltas (both valid);
    :attr:`last_method` says which.
    """

    name = "advanced composition"
    last_method: str = ""

    def get_epsilon(self, delta: float) -> float:
        delta = check_delta(delta)
        sp = self._split(delta)
        if sp is None:
            return math.inf
        rem, _, m = sp
        eps_list: list[tuple[float, int]] = [(e, c) for e, _, c in self._atoms.fixed]
        if m:
            per = rem / (2 * m)
            delta_prime = rem / 2
            eps_list += [(f(per), c) for f, c in self._atoms.profiles]
        else:
            delta_prime = rem
        basic = math.fsum(e * c for e, c in eps_list)
        if delta_prime <= 0:
            self.last_method = "basic"
            return round_up(basic)
        s2 = math.fsum(e * e * c for e, c in eps_list)
        s1 = math.fsum(e * math.expm1(e) * c for e, c in eps_list)
        adv = math.sqrt(2.0 * math.log(1.0 / delta_prime) * s2) + s1
        self.last_method = "advanced" if adv < basic else "basic"
        return round_up(min(adv, basic))


# =========================================================================== RDP

class RdpAccountant(PrivacyAccountant):
    """Rényi-DP accountant on an order grid (default :data:`~shuffledp.accounting.rdp.DEFAULT_ORDERS`,
    1.1 … 16384).

    Pure-DP events (pure, Laplace, RR) also add to a pure epsilon (the order alpha = inf); while every
    event is pure, the reported epsilon is the smaller of the RDP conversion and that sum.

    Supported events: Gaussian, Laplace, k-ary randomized response, pure DP, zCDP, Poisson-subsampled
    Gaussian (MTZ19; add/remove neighbours), self-composition, composition and parallel composition
    (max of the branch curves, per order). ``ApproxDpEvent`` with delta > 0 is not supported.

    ``conversion='improved'`` (CKS20 / Balle et al. 2020) is the default; ``'naive'`` (Mironov 2017,
    Prop. 3) only on request. Cost: O(#orders) per event (O(alpha) terms for subsampled Gaussian
    at integer orders).
    """

    name = "RDP"

    def __init__(self, orders=None, neighbouring: Neighbouring = "add_remove_one",
                 conversion: R.Conversion = "improved") -> None:
        super().__init__(neighbouring)
        if conversion not in ("improved", "naive"):
            raise ValidationError(f"conversion must be 'improved' or 'naive', got {conversion!r}",
                                  parameter="conversion")
        self.orders = R.check_orders(orders)
        self.conversion = conversion
        self.rdp = np.zeros_like(self.orders)
        self.pure_eps = 0.0  # sum of eps while every event is pure DP (inf otherwise): the alpha = inf order
        self.last_order: float | None = None

    def _settings_repr(self) -> list[str]:
        return [f"conversion={self.conversion!r}",
                f"orders={len(self.orders)} in [{float(self.orders.min()):g}, {float(self.orders.max()):g}]"]

    def _totals_repr(self) -> list[str]:
        return [f"pure_eps={self.pure_eps:.6g}"]

    def _pure(self, ev: object) -> float:
        """Pure-DP epsilon of an event tree (inf if some part is not pure)."""
        if isinstance(ev, (PureDpEvent, LaplaceEvent, RandomizedResponseEvent)):
            return ev.epsilon
        if isinstance(ev, ApproxDpEvent) and ev.delta == 0.0:
            return ev.epsilon
        if isinstance(ev, SelfComposedEvent):
            return ev.count * self._pure(ev.event)
        if isinstance(ev, ComposedEvent):
            return math.fsum(self._pure(e) for e in ev.events)
        if isinstance(ev, ParallelComposedEvent):
            return max(self._pure(e) for e in ev.events)
        return math.inf

    def _curve(self, ev: object) -> np.ndarray:
        a = self.orders
        if isinstance(ev, GaussianEvent):
            return R.rdp_gaussian(a, ev.sigma, ev.sensitivity)
        if isinstance(ev, LaplaceEvent):
            return R.rdp_laplace(a, ev.scale, ev.sensitivity)
        if isinstance(ev, RandomizedResponseEvent):
            return R.rdp_randomized_response(a, ev.epsilon, ev.k)
        if isinstance(ev, PureDpEvent):
            return R.rdp_pure(a, ev.epsilon)
        if isinstance(ev, ApproxDpEvent):
            if ev.delta == 0.0:
                return R.rdp_pure(a, ev.epsilon) if ev.epsilon > 0 else np.zeros_like(a)
            raise UnsupportedEventError("RdpAccountant cannot compose ApproxDpEvent with delta > 0",
                                        parameter="event")
        if isinstance(ev, ZCdpEvent):
            return R.rdp_zcdp(a, ev.rho, ev.xi)
        if isinstance(ev, PoissonSampledEvent):
            inner = ev.event
            if isinstance(inner, GaussianEvent):
                return R.rdp_poisson_subsampled_gaussian(a, ev.sampling_probability, inner.sigma / inner.sensitivity)
            raise UnsupportedEventError("RdpAccountant supports Poisson sampling of a GaussianEvent only",
                                        parameter="event")
        if isinstance(ev, SelfComposedEvent):
            return ev.count * self._curve(ev.event)
        if isinstance(ev, ComposedEvent):
            out = np.zeros_like(a)
            for e in ev.events:
                out = out + self._curve(e)
            return out
        if isinstance(ev, ParallelComposedEvent):
            return np.max(np.stack([self._curve(e) for e in ev.events]), axis=0)
        raise UnsupportedEventError(f"unsupported event {type(ev).__name__}", parameter="event")  # pragma: no cover

    def _validate(self, event: object) -> None:
        self._pending = self._curve(event)

    def _add(self, event: object, count: int) -> None:
        self.rdp = self.rdp + count * self._pending
        self.pure_eps = self.pure_eps + count * self._pure(event)

    def get_epsilon(self, delta: float) -> float:
        delta = check_delta(delta)
        if not self._ledger:
            return 0.0
        eps, a = R.rdp_to_epsilon(self.orders, self.rdp, delta, self.conversion)
        if self.pure_eps <= eps:  # pure DP (alpha = inf) is the better bound
            self.last_order = math.inf
            return round_up(self.pure_eps)
        self.last_order = a
        if a == self.orders[-1] and len(self.orders) > 1:
            warnings.warn(f"optimal RDP order {a:g} is the largest of the grid; add larger orders", stacklevel=2)
        return round_up(eps)

    def get_delta(self, epsilon: float) -> float:
        epsilon = check_real(epsilon, "epsilon", low=0.0)
        if not self._ledger:
            return 0.0
        if epsilon >= self.pure_eps:
            self.last_order = math.inf
            return 0.0
        d, a = R.rdp_to_delta(self.orders, self.rdp, epsilon, self.conversion)
        self.last_order = a
        return min(1.0, round_up(d))


# =========================================================================== zCDP

class ZCdpAccountant(PrivacyAccountant):
    """zCDP accountant: sums (xi, rho) (Bun–Steinke 2016).

    Gaussian: rho = sensitivity^2 / (2 sigma^2); pure eps-DP, Laplace and randomized response:
    rho = eps^2 / 2 (Bun–Steinke Prop. 1.4); parallel branches: max xi, max rho.
    ``conversion='improved'`` = CKS20 optimal (default); ``'naive'`` = ``rho + 2 sqrt(rho log 1/delta)``
    (Bun–Steinke 2016 Prop. 1.3).
    """

    name = "zCDP"

    def __init__(self, neighbouring: Neighbouring = "add_remove_one", conversion: R.Conversion = "improved") -> None:
        super().__init__(neighbouring)
        if conversion not in ("improved", "naive"):
            raise ValidationError(f"conversion must be 'improved' or 'naive', got {conversion!r}",
                                  parameter="conversion")
        self.conversion = conversion
        self.rho = 0.0
        self.xi = 0.0

    def _settings_repr(self) -> list[str]:
        return [f"conversion={self.conversion!r}"]

    def _totals_repr(self) -> list[str]:
        return [f"rho={self.rho:.6g}", f"xi={self.xi:.6g}"]

    def _pair(self, ev: object) -> tuple[float, float]:
        if isinstance(ev, ZCdpEvent):
            return ev.xi, ev.rho
        if isinstance(ev, GaussianEvent):
            return 0.0, ev.mu**2 / 2
        if isinstance(ev, (PureDpEvent, LaplaceEvent, RandomizedResponseEvent)):
            return 0.0, ev.epsilon**2 / 2
        if isinstance(ev, ApproxDpEvent) and ev.delta == 0.0:
            return 0.0, ev.epsilon**2 / 2
        if isinstance(ev, SelfComposedEvent):
            x, r = self._pair(ev.event)
            return ev.count * x, ev.count * r
        if isinstance(ev, ComposedEvent):
            ps = [self._pair(e) for e in ev.events]
            return math.fsum(p[0] for p in ps), math.fsum(p[1] for p in ps)
        if isinstance(ev, ParallelComposedEvent):
            ps = [self._pair(e) for e in ev.events]
            return max(p[0] for p in ps), max(p[1] for p in ps)
        raise UnsupportedEventError(f"ZCdpAccountant does not support {type(ev).__name__}", parameter="event")

    def _validate(self, event: object) -> None:
        self._pending = self._pair(event)

    def _add(self, event: object, count: int) -> None:
        self.xi += count * self._pending[0]
        self.rho += count * self._pending[1]

    def get_epsilon(self, delta: float) -> float:
        delta = check_delta(delta)
        return round_up(R.zcdp_to_epsilon(self.rho, delta, self.xi, self.conversion))

    def get_delta(self, epsilon: float) -> float:
        return min(1.0, round_up(R.zcdp_to_delta(self.rho, epsilon, self.xi, self.conversion)))
