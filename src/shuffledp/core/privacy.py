"""Privacy statements: what guarantee a release carries, as data."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal
from typing import Literal

from .errors import ValidationError

__all__ = ["PrivacyStatement", "round_up", "format_up", "Model", "Neighbouring"]

Model = Literal["local", "shuffle", "central"]
Neighbouring = Literal["replace_one", "add_remove_one"]

_MODELS = ("local", "shuffle", "central")
_NEIGHBOURING = ("replace_one", "add_remove_one")


def round_up(x: float, rel: float = 1e-12) -> float:
    """Round a privacy parameter outward (up) so float error never understates it.

    Moves ``x`` up by a relative ``rel`` plus one ulp; exact zeros and infinities are kept.
    """
    if x == 0.0 or math.isinf(x):
        return x
    return math.nextafter(x + abs(x) * rel, math.inf)


def format_up(x: float, sig: int) -> str:
    """``x`` with ``sig`` significant digits, rounded **up**: the shown number is never below ``x``.

    ``f"{x:.{sig}g}"`` rounds to nearest, which can print a smaller eps or delta than the real one
    (e.g. ``1.0000004`` as ``1``). When the nearest-rounded text parses to less than ``x`` the
    exact binary value of ``x`` is rounded toward +inf at ``sig`` digits instead (the last digit is
    bumped). A text that parses back to ``x`` itself (``0.1``) is kept.
    """
    s = f"{x:.{sig}g}"
    if not math.isfinite(x) or float(s) >= x:
        return s
    up = Context(prec=sig, rounding=ROUND_CEILING).plus(Decimal(x))
    return f"{float(up):.{sig}g}"  # up has <= sig digits, so this prints exactly up


@dataclass(frozen=True)
class PrivacyStatement:
    """A precise (eps, delta)-DP statement.

    Parameters
    ----------
    eps : float
        Privacy loss bound, >= 0 (``inf`` allowed for "no guarantee").
    delta : float
        Failure probability in [0, 1).
    model : {"local", "shuffle", "central"}
        Trust model: ``local`` = each report is eps-LDP (the analyzer may see it);
        ``shuffle`` = the shuffled multiset is (eps, delta)-DP; ``central`` = the trusted
        curator's release is (eps, delta)-DP.
    neighbouring : {"replace_one", "add_remove_one"}
        The neighbouring relation on datasets the guarantee refers to.
    gamma : float, optional
        Robustness: the guarantee holds when at least a ``gamma`` fraction of users are honest
        (robust shuffle privacy, Balcer et al. 2021). ``1.0`` means all users.
    note : str
        Free text: which theorem/accountant produced it.
    """

    eps: float
    delta: float = 0.0
    model: Model = "central"
    neighbouring: Neighbouring = "replace_one"
    gamma: float = 1.0
    note: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.eps, (int, float)) or math.isnan(self.eps) or self.eps < 0:
            raise ValidationError(f"eps must be a number >= 0, got {self.eps!r}", parameter="eps")
        if not isinstance(self.delta, (int, float)) or not (0.0 <= self.delta < 1.0):
            raise ValidationError(f"delta must lie in [0, 1), got {self.delta!r}", parameter="delta")
        if self.model not in _MODELS:
            raise ValidationError(f"model must be one of {_MODELS}, got {self.model!r}", parameter="model")
        if self.neighbouring not in _NEIGHBOURING:
            raise ValidationError(f"neighbouring must be one of {_NEIGHBOURING}, got {self.neighbouring!r}",
                                  parameter="neighbouring")
        if not (0.0 < self.gamma <= 1.0):
            raise ValidationError(f"gamma must lie in (0, 1], got {self.gamma!r}", parameter="gamma")

    @property
    def pure(self) -> bool:
        """True for pure eps-DP (delta = 0)."""
        return self.delta == 0.0

    def __str__(self) -> str:
        # eps and delta are rounded up at the shown precision: the text never understates them
        d = "0" if self.delta == 0 else format_up(self.delta, 3)
        rob = "" if self.gamma == 1.0 else f", robust for gamma>={self.gamma:g}"
        s = f"({format_up(self.eps, 6)}, {d})-DP [{self.model} model, {self.neighbouring.replace('_', '-')}{rob}]"
        return s + (f" — {self.note}" if self.note else "")

    def to_dict(self) -> dict:
        return {"eps": self.eps, "delta": self.delta, "model": self.model,
                "neighbouring": self.neighbouring, "gamma": self.gamma, "note": self.note}

    @classmethod
    def from_dict(cls, d: dict) -> "PrivacyStatement":
        return cls(**d)
