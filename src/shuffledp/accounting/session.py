"""A privacy budget that refuses: :class:`PrivacySession`, an odometer over one dataset.

A session is given a total ``(epsilon, delta)`` and an accountant. Every release made through it
(a shuffle/local/central protocol run, a local oracle's reports, a central mechanism's noisy
answer, or an explicit charge) is composed with everything released before by that accountant,
**before** the release happens. A release that would take the composed guarantee past the budget
raises :class:`BudgetExceeded` and nothing is charged or released::

    from shuffledp.accounting.session import PrivacySession

    session = PrivacySession(epsilon=1.0, delta=1e-6, accountant="pld")
    est = session.run(protocol, values, rng)     # charges protocol.privacy(n)
    y = session.release(mechanism, true_value)   # charges mechanism.privacy
    session.remaining()                          # (epsilon left, delta left)
    print(session)                               # the ledger

Composition is the accountant's (:mod:`shuffledp.accounting.accountants`,
:class:`~shuffledp.accounting.pld.PldAccountant`); the session only decides whether the
composed ``get_epsilon(delta_budget)`` stays within ``epsilon_budget``. With
``accountant="basic"`` and only fixed ``(eps, delta)`` statements the decision is exact: the
sums are compared in rational arithmetic, so a release that reaches the budget exactly is
accepted and one that exceeds it by one ulp is refused (so ten releases at ``eps=0.1`` do not
fit ``epsilon=1.0``: the float 0.1 is slightly above 1/10). The other accountants round their
epsilon outward, so a release that lands exactly on the budget may be refused (never the
reverse).

Each release is described to the accountant by its privacy statement
(:class:`~shuffledp.accounting.events.PureDpEvent` for ``delta = 0``, else
:class:`~shuffledp.accounting.events.ApproxDpEvent`), or by an explicit ``event=`` (e.g. a
``GaussianEvent``, which RDP and PLD compose more tightly than its ``(eps, delta)``). All
statements charged to one session must use the session's neighbouring relation.

Not thread-safe: use one session from one thread (or guard it with a lock); concurrent
``run`` calls could each pass the check before either is recorded.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import Neighbouring, PrivacyStatement
from ..core.validation import check_delta, check_epsilon, check_positive_int
from .accountants import (AdvancedCompositionAccountant, BasicCompositionAccountant, PrivacyAccountant,
                          RdpAccountant, ZCdpAccountant)
from .events import ApproxDpEvent, PureDpEvent, UnsupportedEventError
from .ledger import BudgetExceededError

__all__ = ["PrivacySession", "BudgetExceeded", "SessionCharge", "ACCOUNTANTS"]

#: accountant names accepted by :class:`PrivacySession`
ACCOUNTANTS = ("basic", "advanced", "rdp", "zcdp", "pld")


class BudgetExceeded(BudgetExceededError):
    """A release would take the session past its budget; nothing was charged or released.

    ``requested`` is the refused release's statement, ``remaining`` the session's
    ``(epsilon, delta)`` left before it, ``would_spend`` the epsilon the composition would reach
    at the session's delta.
    """

    def __init__(self, message: str, *, remaining: tuple[float, float], requested: Any,
                 would_spend: float) -> None:
        super().__init__(message, user="session", remaining=remaining)
        self.requested = requested
        self.would_spend = would_spend


@dataclass(frozen=True)
class SessionCharge:
    """One accepted release: what it was, its statement or event, how many times it composes,
    and the session's composed epsilon (at the budget's delta) after it."""

    index: int
    what: str
    charged: Any
    count: int
    epsilon_after: float

    def __str__(self) -> str:
        times = f" x{self.count}" if self.count != 1 else ""
        desc = self.charged if isinstance(self.charged, PrivacyStatement) else repr(self.charged)
        if isinstance(desc, PrivacyStatement):
            d = "0" if desc.delta == 0 else f"{desc.delta:.3g}"
            desc = f"({desc.eps:.6g}, {d}) {desc.model}"
        return f"#{self.index} {self.what}{times}: {desc} -> spent eps {self.epsilon_after:.6g}"


def _make_accountant(accountant: str | PrivacyAccountant, neighbouring: Neighbouring) -> PrivacyAccountant:
    if isinstance(accountant, PrivacyAccountant):
        if accountant.ledger:
            raise ValidationError("accountant must be empty (a session starts with nothing spent); got one with "
                                  f"{len(accountant.ledger)} events", parameter="accountant")
        if accountant.neighbouring != neighbouring:
            raise ValidationError(f"accountant has neighbouring={accountant.neighbouring!r} but the session "
                                  f"uses {neighbouring!r}", parameter="accountant")
        return accountant
    if accountant == "basic":
        return BasicCompositionAccountant(neighbouring)
    if accountant == "advanced":
        return AdvancedCompositionAccountant(neighbouring)
    if accountant == "rdp":
        return RdpAccountant(neighbouring=neighbouring)
    if accountant == "zcdp":
        return ZCdpAccountant(neighbouring)
    if accountant == "pld":
        from .pld import PldAccountant

        return PldAccountant(neighbouring=neighbouring)
    raise ValidationError(f"accountant must be one of {ACCOUNTANTS} or a PrivacyAccountant, got {accountant!r}",
                          parameter="accountant")


def _statement_of(obj: Any, n: int | None = None) -> PrivacyStatement:
    """``obj.privacy(n)`` (protocols; ``privacy(n=None)`` on every contract) or ``obj.privacy``
    where it is still a property."""
    p = getattr(obj, "privacy", None)
    if p is None:
        raise ValidationError(f"{type(obj).__name__} has no privacy statement (privacy)", parameter="mechanism")
    if callable(p):
        try:
            return p(n) if n is not None else p()
        except TypeError:
            return p()
    return p


class PrivacySession:
    """A total privacy budget, charged release by release, that refuses a release exceeding it.

    Parameters
    ----------
    epsilon : float
        Total epsilon budget (> 0).
    delta : float
        Total delta budget, in [0, 1) (``0``: only pure-DP releases fit, and only with the
        basic, advanced or PLD accountants).
    accountant : {"basic", "advanced", "rdp", "zcdp", "pld"} or PrivacyAccountant
        How releases compose: basic sums; advanced is Dwork-Rothblum-Vadhan (min with basic); rdp
        and zcdp take pure-DP statements and Gaussian/zCDP events only; pld composes privacy-loss
        distributions (tightest; takes (eps, delta) statements). An accountant instance must be
        empty and use ``neighbouring``.
    neighbouring : {"replace_one", "add_remove_one"}
        The relation every charged statement must refer to (the protocols' statements are
        replace-one).
    """

    def __init__(self, epsilon: float, delta: float = 0.0, *, accountant: str | PrivacyAccountant = "basic",
                 neighbouring: Neighbouring = "replace_one") -> None:
        self.epsilon = check_epsilon(epsilon, "epsilon")
        self.delta = check_delta(delta, "delta", allow_zero=True)
        if neighbouring not in ("replace_one", "add_remove_one"):
            raise ValidationError(f"neighbouring must be 'replace_one' or 'add_remove_one', got {neighbouring!r}",
                                  parameter="neighbouring")
        self.neighbouring: Neighbouring = neighbouring
        self._acc = _make_accountant(accountant, neighbouring)
        self.accountant_name = accountant if isinstance(accountant, str) else type(accountant).__name__
        self._charges: list[SessionCharge] = []
        self._spent_eps = 0.0
        # exact sums of fixed (eps, delta) statements, for the basic accountant's exact boundary
        self._exact: tuple[Fraction, Fraction] | None = (Fraction(0), Fraction(0))
        self._delta_charged = Fraction(0)

    # ------------------------------------------------------------------ the odometer
    @property
    def ledger(self) -> list[SessionCharge]:
        """The accepted releases, oldest first."""
        return list(self._charges)

    def spent(self) -> PrivacyStatement:
        """The composed guarantee of everything released so far, at the budget's delta."""
        d = self.delta if self._charges else 0.0
        return PrivacyStatement(self._spent_eps, d, model="central", neighbouring=self.neighbouring,
                                note=f"PrivacySession ({self.accountant_name}), {len(self._charges)} releases")

    def remaining(self) -> tuple[float, float]:
        """``(epsilon, delta)`` left: the budget's epsilon minus the composed epsilon at the budget's
        delta, and the budget's delta minus the deltas of the charged statements (events without
        a delta, such as Gaussian ones, draw on the delta at conversion and are not subtracted)."""
        return (max(self.epsilon - self._spent_eps, 0.0),
                max(float(Fraction(self.delta) - self._delta_charged), 0.0))

    def can_afford(self, charge: Any, count: int = 1) -> bool:
        """True if :meth:`charge` would accept ``charge`` (a statement or an event); no state change."""
        try:
            self._tentative(charge, count)
        except BudgetExceeded:
            return False
        return True

    def charge(self, charge: PrivacyStatement | Any, count: int = 1, *, what: str = "") -> tuple[float, float]:
        """Charge a release described by a :class:`PrivacyStatement` or an accounting event,
        composed ``count`` times; returns :meth:`remaining`.

        Raises :class:`BudgetExceeded` (nothing charged) if the composition would exceed the
        budget, and :class:`ValidationError` for a statement with another neighbouring relation
        or an event the accountant cannot compose.
        """
        self._commit(self._tentative(charge, count), charge, count, what or "charge")
        return self.remaining()

    # ------------------------------------------------------------------ releases
    def run(self, protocol: Any, values: Any, rng: Any = None, *, simulate: bool = False, **kwargs: Any) -> Any:
        """Charge ``protocol.privacy(n)`` for the ``n`` users of ``values``, then run it
        (:func:`shuffledp.pipeline.run`, or :func:`~shuffledp.pipeline.simulate` with
        ``simulate=True``; ``kwargs`` such as ``domain=`` go through) and return the Estimate.

        The charge is checked before anything runs and recorded only once the run returns: a
        refused or failed run charges nothing.
        """
        from .. import pipeline

        n = pipeline._n_users(values)
        st = _statement_of(protocol, n)
        name = getattr(protocol, "name", "") or type(protocol).__name__
        pending = self._tentative(st, 1)
        est = (pipeline.simulate if simulate else pipeline.run)(protocol, values, rng, **kwargs)
        self._commit(pending, st, 1, f"{name} (n={n})")
        return est

    def randomize(self, oracle: Any, values: Any, rng: Any = None) -> Any:
        """A local oracle's reports on ``values``, charging its eps-LDP statement once (each user
        sends one report; the whole collection is eps-DP). Returns the reports; aggregating and
        estimating them is post-processing and free."""
        st = _statement_of(oracle)
        pending = self._tentative(st, 1)
        reports = oracle.randomize(values, rng)
        self._commit(pending, st, 1, f"{getattr(oracle, 'name', '') or type(oracle).__name__} reports")
        return reports

    def release(self, mechanism: Any, true_value: Any, **kwargs: Any) -> Any:
        """A central mechanism's ``release(true_value, **kwargs)``, charging ``mechanism.privacy``
        once, or once per coordinate for a vector released with ``per_coordinate=True``."""
        st = _statement_of(mechanism)
        count = int(np.size(true_value)) if kwargs.get("per_coordinate") else 1
        count = check_positive_int(count, "true_value")
        pending = self._tentative(st, count)
        out = mechanism.release(true_value, **kwargs)
        self._commit(pending, st, count, type(mechanism).__name__)
        return out

    # ------------------------------------------------------------------ internals
    def _event(self, charge: Any) -> tuple[Any, PrivacyStatement | None]:
        if isinstance(charge, PrivacyStatement):
            if charge.neighbouring != self.neighbouring:
                raise ValidationError(f"statement is for neighbouring={charge.neighbouring!r} but the session "
                                      f"composes {self.neighbouring!r} statements", parameter="statement")
            if math.isinf(charge.eps):
                return None, charge
            ev = PureDpEvent(charge.eps) if charge.delta == 0 else ApproxDpEvent(charge.eps, charge.delta)
            return ev, charge
        return charge, None

    def _tentative(self, charge: Any, count: int) -> tuple[PrivacyAccountant, float, Any, Fraction]:
        count = check_positive_int(count, "count")
        event, st = self._event(charge)
        rem = self.remaining()
        if event is None:
            raise BudgetExceeded(f"a release with eps = inf ({st}) can never fit a budget; remaining "
                                 f"({rem[0]:.6g}, {rem[1]:.3g})", remaining=rem, requested=charge,
                                 would_spend=math.inf)
        acc = copy.deepcopy(self._acc)
        try:
            acc.compose(event, count)
        except UnsupportedEventError as e:
            hint = " (use accountant='pld' or 'advanced' for (eps, delta) statements)" \
                if isinstance(event, ApproxDpEvent) else ""
            raise ValidationError(f"the {self.accountant_name} accountant cannot compose {event!r}: {e}{hint}",
                                  parameter="statement" if st is not None else "event") from e
        delta_add = Fraction(st.delta) * count if st is not None else Fraction(0)
        exact = None
        if self.accountant_name == "basic" and self._exact is not None and st is not None:
            e0, d0 = self._exact
            exact = (e0 + Fraction(st.eps) * count, d0 + Fraction(st.delta) * count)
            eps_after = float(exact[0])
            fits = exact[0] <= Fraction(self.epsilon) and exact[1] <= Fraction(self.delta)
            would = eps_after if exact[1] <= Fraction(self.delta) else math.inf
        else:
            eps_after = acc.get_epsilon(self.delta) if self.delta > 0 else _pure_epsilon(acc)
            fits = eps_after <= self.epsilon
            would = eps_after
        if not fits:
            raise BudgetExceeded(
                f"refused: {_describe(charge)}{f' x{count}' if count != 1 else ''} would take the session "
                f"{'to eps=' + format(would, '.6g') if would > self.epsilon else 'past eps=' + format(self.epsilon, 'g')}"
                f"{'' if math.isfinite(would) else ' (its delta does not fit)'} "
                f"at delta={self.delta:g} ({self.accountant_name} composition), over the budget "
                f"({self.epsilon:g}, {self.delta:g}); remaining ({rem[0]:.6g}, {rem[1]:.3g}); nothing was charged",
                remaining=rem, requested=charge, would_spend=would)
        return acc, eps_after, exact, delta_add

    def _commit(self, pending: tuple, charge: Any, count: int, what: str) -> None:
        acc, eps_after, exact, delta_add = pending
        self._acc, self._spent_eps, self._exact = acc, eps_after, exact
        self._delta_charged += delta_add
        self._charges.append(SessionCharge(len(self._charges) + 1, what, charge, count, eps_after))

    def __repr__(self) -> str:
        rem = self.remaining()
        return (f"PrivacySession(budget=({self.epsilon:g}, {self.delta:g}), accountant={self.accountant_name!r}, "
                f"releases={len(self._charges)}, spent_epsilon={self._spent_eps:.6g}, "
                f"remaining=({rem[0]:.6g}, {rem[1]:.3g}))")

    def __str__(self) -> str:
        lines = [repr(self)]
        shown = self._charges if len(self._charges) <= 20 else self._charges[:10] + self._charges[-10:]
        for i, c in enumerate(shown):
            if len(self._charges) > 20 and i == 10:
                lines.append(f"  ... {len(self._charges) - 20} more")
            lines.append(f"  {c}")
        return "\n".join(lines)


def _pure_epsilon(acc: PrivacyAccountant) -> float:
    """Composed epsilon at delta = 0 (pure DP): only accountants that can certify it."""
    try:
        return acc.get_epsilon(0.0)
    except ValidationError:
        return math.inf


def _describe(charge: Any) -> str:
    if isinstance(charge, PrivacyStatement):
        d = "0" if charge.delta == 0 else f"{charge.delta:.3g}"
        return f"({charge.eps:.6g}, {d}) {charge.model}"
    return repr(charge)
