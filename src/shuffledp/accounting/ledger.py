"""Per-user privacy budget ledger over time (pure Python; used by the analyzer service).

Each user has a cap ``(eps_cap, delta_cap)`` per sliding time window of length ``window``
(``None`` = the whole lifetime). Charges compose by basic composition (sum of eps, sum of delta),
which is valid for any mix of statements. A charge that would push the sum over any window
above the cap is refused with :class:`BudgetExceededError` and changes nothing.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Hashable

from ..core.errors import ShuffleDPError, ValidationError
from ..core.privacy import PrivacyStatement
from ..core.validation import check_delta, check_epsilon, check_real

__all__ = ["BudgetLedger", "BudgetExceededError", "Charge"]


class BudgetExceededError(ShuffleDPError):
    """A charge would exceed a user's budget cap in its window."""

    def __init__(self, message: str, *, user: Hashable, remaining: tuple[float, float]) -> None:
        super().__init__(message)
        self.user = user
        self.remaining = remaining


@dataclass(frozen=True)
class Charge:
    """One recorded charge."""

    time: float
    eps: float
    delta: float
    note: str = ""


class BudgetLedger:
    """Per-user (eps, delta) budget with a cap per sliding window.

    Parameters
    ----------
    eps_cap : float
        Largest total epsilon a user may spend in any window (> 0).
    delta_cap : float
        Largest total delta in any window, in [0, 1).
    window : float or None
        Window length in the caller's time unit (e.g. seconds); charges at times in
        ``(t - window, t]`` count at time t. ``None``: all charges count forever.

    Notes
    -----
    Times must be non-decreasing per user (a charge dated before the user's last charge is
    refused): then checking the window that ends at each new charge covers every window.
    Thread-safe (one lock). Memory: charges older than the window are dropped.
    """

    def __init__(self, eps_cap: float, delta_cap: float = 0.0, window: float | None = None) -> None:
        self.eps_cap = check_epsilon(eps_cap, "eps_cap")
        self.delta_cap = check_delta(delta_cap, "delta_cap", allow_zero=True)
        self.window = None if window is None else check_real(window, "window", low=0.0, low_open=True)
        self._charges: dict[Hashable, deque[Charge]] = {}
        self._lock = threading.Lock()

    # -- helpers
    @staticmethod
    def _check_user(user: Hashable) -> Hashable:
        if not isinstance(user, (str, int)) or isinstance(user, bool):
            raise ValidationError(f"user must be a str or int id, got {type(user).__name__}", parameter="user")
        return user

    def _live(self, user: Hashable, time: float) -> list[Charge]:
        q = self._charges.get(user)
        if not q:
            return []
        if self.window is None:
            return [c for c in q if c.time <= time]
        return [c for c in q if time - self.window < c.time <= time]

    def _prune(self, user: Hashable) -> None:
        q = self._charges.get(user)
        if q and self.window is not None:
            latest = q[-1].time
            while q and q[0].time <= latest - self.window:
                q.popleft()

    def _spent(self, user: Hashable, time: float) -> tuple[float, float]:
        live = self._live(user, time)
        return math.fsum(c.eps for c in live), math.fsum(c.delta for c in live)

    # -- public API
    def spent(self, user: Hashable, time: float) -> tuple[float, float]:
        """(eps, delta) the user has spent in the window ending at ``time``."""
        user = self._check_user(user)
        time = check_real(time, "time")
        with self._lock:
            return self._spent(user, time)

    def remaining(self, user: Hashable, time: float) -> tuple[float, float]:
        """(eps, delta) the user may still spend in the window ending at ``time`` (>= 0)."""
        e, d = self.spent(user, time)
        return max(self.eps_cap - e, 0.0), max(self.delta_cap - d, 0.0)

    def can_charge(self, user: Hashable, statement: PrivacyStatement, time: float) -> bool:
        """True if :meth:`charge` would accept this charge (no state change)."""
        try:
            self._check(self._check_user(user), statement, check_real(time, "time"))
        except BudgetExceededError:
            return False
        return True

    def _check(self, user: Hashable, statement: PrivacyStatement, time: float) -> None:
        if not isinstance(statement, PrivacyStatement):
            raise ValidationError(f"statement must be a PrivacyStatement, got {type(statement).__name__}",
                                  parameter="statement")
        if math.isinf(statement.eps):
            raise BudgetExceededError(f"user {user!r}: a statement with eps = inf can never be charged",
                                      user=user, remaining=(self.eps_cap, self.delta_cap))
        q = self._charges.get(user)
        if q and time < q[-1].time:
            raise ValidationError(f"time must be >= the user's last charge time {q[-1].time!r}, got {time!r}",
                                  parameter="time")
        e, d = self._spent(user, time)
        new_e = math.fsum([e, statement.eps])
        new_d = math.fsum([d, statement.delta])
        if new_e > self.eps_cap or new_d > self.delta_cap:
            rem = (max(self.eps_cap - e, 0.0), max(self.delta_cap - d, 0.0))
            raise BudgetExceededError(
                f"user {user!r}: charging ({statement.eps:.6g}, {statement.delta:.3g}) would spend "
                f"({new_e:.6g}, {new_d:.3g}) in the window, over the cap ({self.eps_cap:g}, {self.delta_cap:g}); "
                f"remaining ({rem[0]:.6g}, {rem[1]:.3g})", user=user, remaining=rem)

    def charge(self, user: Hashable, statement: PrivacyStatement, time: float) -> tuple[float, float]:
        """Record that ``user`` spent ``statement`` at ``time``; returns the remaining budget.

        Raises :class:`BudgetExceededError` (nothing recorded) if the cap would be exceeded.
        """
        user = self._check_user(user)
        time = check_real(time, "time")
        with self._lock:
            self._check(user, statement, time)
            self._charges.setdefault(user, deque()).append(Charge(time, statement.eps, statement.delta, statement.note))
            self._prune(user)
            e, d = self._spent(user, time)
        return max(self.eps_cap - e, 0.0), max(self.delta_cap - d, 0.0)

    def history(self, user: Hashable) -> list[Charge]:
        """The user's retained charges (oldest first)."""
        with self._lock:
            return list(self._charges.get(self._check_user(user), ()))

    def to_dict(self) -> dict:
        """JSON-ready snapshot (for the service's store)."""
        with self._lock:
            return {"eps_cap": self.eps_cap, "delta_cap": self.delta_cap, "window": self.window,
                    "charges": {str(u): [[c.time, c.eps, c.delta, c.note] for c in q] for u, q in self._charges.items()},
                    "user_types": {str(u): type(u).__name__ for u in self._charges}}

    @classmethod
    def from_dict(cls, d: dict) -> "BudgetLedger":
        led = cls(d["eps_cap"], d["delta_cap"], d["window"])
        types = d.get("user_types", {})
        for u, rows in d["charges"].items():
            key: Hashable = int(u) if types.get(u) == "int" else u
            led._charges[key] = deque(Charge(float(t), float(e), float(dl), str(nt)) for t, e, dl, nt in rows)
        return led
