"""The shuffled heavy-hitter protocol shared by ``hh_sfp``, ``hh_pem`` and ``hh_treehist``."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from ...accounting.shuffle import local_epsilon_for, shuffle_amplification
from ...core.errors import OutOfDomainError, ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_domain_size
from ...local.heavy_hitters import HeavyHitterMechanism
from ..base import Messages, Protocol

__all__ = ["ShuffledHeavyHitters"]


class ShuffledHeavyHitters(Protocol):
    """A heavy-hitter mechanism's reports, one message per user, through a shuffler.

    Calibration: ``eps_l = local_epsilon_for(epsilon, n, delta, "clones")``, the largest local
    epsilon whose ``n`` shuffled eps_l-LDP reports are ``(epsilon, delta)``-DP by the
    Feldman-McMillan-Talwar bound for generic randomizers (the whole report, level or fragment
    position included, is one eps_l-LDP randomizer of the user's value); never below ``epsilon``
    (shuffling is post-processing). ``privacy(n)`` is that bound evaluated at the mechanism's
    effective local epsilon and the actual ``n`` (the local guarantee when the bound does not
    apply). Inputs: integers in ``[0, d)`` (``input_kind = "categorical"``) or, with
    ``alphabet``/``max_length``, words. The estimate is the mechanism's (discovered items as
    ``labels``, their counts and standard errors) with the shuffle statement.
    """

    model = "shuffle"
    input_kind = "categorical"
    one_message_per_user = True
    mechanism_class: ClassVar[type[HeavyHitterMechanism]]

    def _setup(self, epsilon: float, delta: float, n: int, d: int, alphabet: str | None,
               max_length: int | None) -> dict[str, Any]:
        Protocol.__init__(self, epsilon, delta, n)
        if not self.delta:
            raise ValidationError("shuffled heavy hitters need delta > 0 (approximate DP by amplification)",
                                  parameter="delta")
        self.words = alphabet is not None or max_length is not None
        self.d = check_domain_size(d)
        self.eps_l = local_epsilon_for(self.epsilon, self.n, self.delta, method="clones")
        if self.words:
            return {"alphabet": alphabet, "max_length": max_length}
        return {"bits": max(1, (self.d - 1).bit_length())}

    mechanism: HeavyHitterMechanism

    def check_values(self, values: Any) -> Any:
        if self.words:
            return values
        arr = np.asarray(values)
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer) or arr.ndim != 1:
            raise ValidationError(f"values must be a 1-d array of integers in [0, {self.d})", parameter="values")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.d):
            raise ValidationError(f"values must lie in [0, {self.d}), got [{arr.min()}, {arr.max()}]",
                                  parameter="values")
        return arr

    def example_values(self, n: int = 1) -> Any:
        if self.words:
            return np.full(int(n), "", dtype="U1")
        return super().example_values(n)

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.mechanism.randomize(self.check_values(values), rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            raise ValidationError(f"{self.name}: no reports to aggregate", parameter="messages")
        reports = {k: v for k, v in messages.items() if k != "shuffler"}
        return self.mechanism.aggregate(self.mechanism.validate_reports(reports))

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        est = self.mechanism.estimate(statistic, n)
        return dataclasses.replace(est, privacy=self.privacy(est.n),
                                   extra={**est.extra, "local_epsilon": self.mechanism.privacy().eps})

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Variance of one discovered item's estimated count when ``value`` users hold it (the
        mechanism's final-stage fraction variance at ``value / n``, times ``n^2``)."""
        n = self.n if n is None else int(n)
        return float(n) ** 2 * self.mechanism.variance(n, min(1.0, max(0.0, value / n)))

    def _privacy(self, n: int) -> PrivacyStatement:
        eps_local = self.mechanism.privacy().eps
        try:
            eps = shuffle_amplification(eps_local, n, self.delta, method="clones")
        except OutOfDomainError:
            return PrivacyStatement(eps_local, 0.0, "local", note=f"{self.name}: amplification does not apply")
        return PrivacyStatement(eps, self.delta, "shuffle",
                                note=f"{self.name}: {n} shuffled eps_l={eps_local:.6g}-LDP reports "
                                     "(Feldman-McMillan-Talwar, generic randomizer)")

    @property
    def hash_seed(self) -> int:
        """The seed of the mechanism's public hashes (drawn at construction when not given): an
        analyzer must rebuild the protocol with it."""
        return int(self.mechanism.hash_seed)

    @property
    def local_randomizer(self) -> HeavyHitterMechanism:
        return self.mechanism

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def bits_per_message(self) -> float:
        """The report's size (dtype bytes of one row of every field)."""
        rep = self.mechanism.randomize(self.example_values(1), np.random.default_rng(0))
        return float(sum(np.asarray(v)[0].nbytes * 8 for v in rep.values()))
