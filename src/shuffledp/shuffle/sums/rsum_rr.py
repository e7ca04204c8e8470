"""``rsum_rr`` (RSum_RR): real summation with r one-bit messages per user, each through shuffled
binary RR (Cheu, Smith, Ullman, Zeber, Zhilyaev, EUROCRYPT 2019, §5).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from ...accounting.composition import advanced_composition, group_privacy
from ...accounting.shuffle import local_epsilon_for, shuffle_statement
from ...core.errors import OutOfDomainError, ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, round_up
from ...core.validation import check_positive_int
from ...local.bits import LOG_MARGIN
from .._common import (check_statistic, check_unit_values, krr_local_epsilon, need_delta, randomized_rounding,
                       rounding_parts, sampled_blanket)
from ..base import Messages, Protocol
from ._base import _CAL, _check_int_range, _single_column, _SumProtocol

__all__ = ["RSumRR", "PROTOCOLS"]


class _UnaryRRRandomizer:
    """One user's r unary bits ``1[j <= fe_r(x)]``, j = 1..r, each through binary RR with flip
    probability f. eps_l = r ln((1 - f/2)/(f/2)) (two inputs can differ in all r bits).

    ``f`` is stored as sampled (:func:`sampled_blanket`); ``bit_epsilon`` and ``epsilon`` are exact
    for it, rounded up."""

    def __init__(self, r: int, flip: float) -> None:
        self.r, self.flip = r, sampled_blanket(flip)
        self.bit_epsilon = krr_local_epsilon(2, self.flip)
        self.epsilon = round_up(r * self.bit_epsilon, LOG_MARGIN)  # one float product: 2^-53 relative

    def randomize(self, values: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
        x = check_unit_values(values)
        v = randomized_rounding(x, self.r, rng)
        bits = np.arange(1, self.r + 1)[None, :] <= v[:, None]
        coin = rng.random(bits.shape) < self.flip
        y = np.where(coin, rng.random(bits.shape) < 0.5, bits)
        return {"y": y.astype(np.int8)}

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        y = np.asarray(reports["y"]).astype(bool)
        lo, r = rounding_parts(np.array([float(x)]), self.r)
        keep, flip = 1.0 - self.flip / 2.0, self.flip / 2.0
        out = np.zeros(y.shape[0])
        for v, w in ((int(lo[0]), 1.0 - r[0]), (int(lo[0]) + 1, r[0])):
            if w <= 0 or v > self.r:
                continue
            bits = np.arange(1, self.r + 1)[None, :] <= v
            agree = (y == bits).sum(axis=1)
            out += w * keep**agree * flip ** (self.r - agree)
        return out


class RSumRR(_SumProtocol):
    """RSum_RR: Cheu et al. (EUROCRYPT 2019) real summation with r one-bit messages per user.

    Encoder: ``v = fe_r(x)`` in {0..r}; bits ``b_j = 1[j <= v]``, j = 1..r; each bit through the
    binary RR with flip probability f (fair coin w.p. f). Analyzer:
    ``S = (sum of all bits - f n r / 2) / ((1 - f) r)`` (unbiased).

    Privacy (derived here; Cheu, Smith, Ullman, Zeber, Zhilyaev, EUROCRYPT 2019, §5): the n r bits
    are shuffled binary RR of N = n r virtual users; each bit-count is made (eps/r, delta_b)-DP with
    delta_b = delta / (r e^eps), and a user changes at most r virtual users, so group privacy
    (:func:`shuffledp.accounting.group_privacy`) gives (r eps_b, r e^{(r-1) eps_b} delta_b) <= (eps, delta).
    The per-bit bound (``accounting``):

    - ``"best"`` (default): of the four below, those that reach the target, the one with the
      smallest variance: the tightest valid calibration, so it works wherever one of them does
      (``bound_used`` names it; at eps in [0.1, 2], n in [1e3, 1e6] it is ``"clones"``, with 8x to
      10x less variance than Cor. 4.7; it builds all four, and the clone bound's numeric
      inversion dominates that cost);
    - ``"cheu_cor47"``: Cheu et al.'s own Corollary 4.7, lambda inverted numerically over the N
      virtual users;
    - ``"cheu2019"``: the accounting module's survey Thm 3 form sqrt(32 ln(4/delta)/(flip N))
      (the survey's calibration; more noise at large r; ``docs/protocols-counting-sums.md`` says
      why it is not Cor. 4.7);
    - ``"clones"``: the accounting module's numeric clone bound for binary RR (least noise);
    - ``"cheu_thm54"``: the paper's Thm 5.4 instead of group privacy: the r bit positions are r
      copies of the n-user bit-sum protocol at (eps / sqrt(8 r ln(2/delta)), delta / (2 r)), lambda
      from Cor. 4.7, combined by advanced composition (accounting module) with delta/2 slack.

    Each user's r bits together are (r ln(2/f - 1))-LDP.
    Variance: ``n r (f/2)(1 - f/2) / ((1 - f) r)^2 + sum_i r_i (1 - r_i) / r^2``.
    Cost: r = ceil(eps sqrt(n)) by default (``precision``), r one-bit messages per user, O(n r)
    encode/aggregate; simulation: O(n) rounding + two binomials.
    """

    name = "rsum_rr"
    ACCOUNTINGS = ("cheu_cor47", "cheu2019", "clones", "cheu_thm54")

    def __init__(self, epsilon: float, delta: float, n: int, *, precision: int | None = None,
                 accounting: Literal["best", "cheu_cor47", "cheu2019", "clones", "cheu_thm54"] = "best",
                 ) -> None:
        super().__init__(epsilon, delta, n)
        need_delta(self.delta, self.name)
        if accounting not in ("best", *self.ACCOUNTINGS):
            raise ValidationError("accounting must be 'best', 'cheu_cor47', 'cheu2019', 'clones' or 'cheu_thm54', "
                                  f"got {accounting!r}", parameter="accounting")
        if accounting == "best":
            self._init_best(precision)
            return
        self.accounting = accounting
        #: the per-bit bound used ("best" resolves to the one with the smallest variance)
        self.bound_used = accounting
        self.r = (max(1, math.ceil(self.epsilon * math.sqrt(self.n))) if precision is None
                  else check_positive_int(precision, "precision"))
        if accounting == "cheu_thm54":
            self._init_thm54()
            return
        self.eps_bit = self.epsilon * _CAL / self.r
        self.delta_bit = self.delta / (self.r * math.exp(self.epsilon))
        opts: dict[str, Any] = {"randomizer": "binary_rr"} if accounting == "clones" else {"form": "exact"} if accounting == "cheu2019" else {}
        N = self.n * self.r
        if accounting == "cheu_cor47":
            from ..counting import CntRR

            try:
                lam = CntRR._invert_corollary47(self.eps_bit, self.delta_bit, N)
            except OutOfDomainError as exc:
                raise OutOfDomainError(f"rsum_rr: Cheu Cor. 4.7 over n*r = {N} virtual users cannot reach eps/r = "
                                       f"{self.eps_bit:.4g} at delta_b = {self.delta_bit:.3g} ({exc})",
                                       parameter="epsilon") from exc
            self.flip = lam / N
            if not self.flip < 1.0:
                raise OutOfDomainError("rsum_rr: Cheu Cor. 4.7 needs every bit randomized (flip >= 1); use a larger "
                                       "n or a smaller precision", parameter="n")
            self._use_flip(self.flip)
            return
        try:
            e0 = local_epsilon_for(self.eps_bit, N, self.delta_bit, accounting, **opts)  # type: ignore[arg-type]
        except OutOfDomainError as exc:
            raise OutOfDomainError(f"rsum_rr: no binary RR over n*r = {N} virtual users reaches eps/r = "
                                   f"{self.eps_bit:.4g} at delta_b = {self.delta_bit:.3g} ({exc}); use a larger n, a "
                                   "smaller precision or accounting='clones'", parameter="epsilon") from exc
        self.flip = 2.0 / (math.exp(e0) + 1.0)
        self._use_flip(self.flip)

    def _init_best(self, precision: int | None) -> None:
        """Take the state of the calibration with the smallest variance among those that reach the target."""
        cands, why = [], []
        for a in self.ACCOUNTINGS:
            try:
                cands.append(RSumRR(self.epsilon, self.delta, self.n, precision=precision, accounting=a))
            except OutOfDomainError as e:
                why.append(f"{a}: {e}")
        if not cands:
            raise OutOfDomainError(f"rsum_rr: no per-bit bound reaches epsilon={self.epsilon!r}, delta={self.delta!r} "
                                   f"at n={self.n} ({'; '.join(why)})", parameter="epsilon")
        best = min(cands, key=lambda c: c.variance())
        self.__dict__.update(best.__dict__)

    def _init_thm54(self) -> None:
        from ..counting import CntRR

        r, eps, dlt = self.r, self.epsilon * _CAL, self.delta
        self.eps_bit = eps / math.sqrt(8.0 * r * math.log(2.0 / dlt))
        self.delta_bit = dlt / (2.0 * r)
        if self.eps_bit >= 1.0:
            raise OutOfDomainError("rsum_rr (Cheu Thm 5.4) needs eps / sqrt(8 r ln(2/delta)) < 1", parameter="epsilon")
        lam = CntRR._invert_corollary47(self.eps_bit, self.delta_bit, self.n)
        if not lam < self.n:
            raise OutOfDomainError("rsum_rr (Cheu Thm 5.4): lambda reaches n", parameter="n")
        self.flip = lam / self.n
        self._use_flip(self.flip)

    def _use_flip(self, flip: float) -> None:
        """Build the randomizer; ``flip`` and the per-bit eps become the sampled flip and its exact eps."""
        self.randomizer = _UnaryRRRandomizer(self.r, flip)
        self.flip = self.randomizer.flip
        #: exact local eps of one bit at the sampled flip (rounded up)
        self.eps_l_bit = self.randomizer.bit_epsilon

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return {"y": self.randomizer.randomize(values, rng)["y"].reshape(-1)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        y = _check_int_range(_single_column(messages, "y", self.name), 0, 1, "rsum_rr messages")
        return np.array([int(y.sum())], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        val = (float(s[0]) - self.flip * n * self.r / 2.0) / ((1.0 - self.flip) * self.r)
        return self._estimate(val, n, precision=self.r, flip=self.flip)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Worst case over inputs in [0, 1]^n of the sum estimate's variance; ``value`` (the true
        sum) is ignored (the exact variance depends on every user's value, not only on the sum:
        :meth:`sum_variance`)."""
        n = self.n if n is None else n
        return self._rr_variance(n) + n / (4.0 * self.r * self.r)

    def _rr_variance(self, n: int) -> float:
        f, r = self.flip, self.r
        return n * r * (f / 2.0) * (1.0 - f / 2.0) / ((1.0 - f) * r) ** 2

    def sum_variance(self, values: Any) -> float:
        """Exact variance of the sum estimate for these inputs (n = their number)."""
        x = check_unit_values(values)
        _, frac = rounding_parts(x, self.r)
        return self._rr_variance(x.shape[0]) + float(np.sum(frac * (1.0 - frac))) / self.r**2

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # T = sum of every user's randomized rounding: sum(floor) + #(u < frac), one uniform per user
        floor_sum, frac = self._simulation_parts(data, lambda x: _floor_sum_and_fractions(x, self.r))
        T = floor_sum + int(np.count_nonzero(rng.random(frac.shape[0]) < frac))
        N = frac.shape[0] * self.r
        f = self.flip
        return np.array([rng.binomial(T, 1.0 - f / 2.0) + rng.binomial(N - T, f / 2.0)], dtype=np.int64)

    def _privacy(self, n: int) -> PrivacyStatement:
        if self.accounting == "cheu_thm54":
            from ..counting import cheu_corollary47_epsilon

            try:
                e_copy = cheu_corollary47_epsilon(self.flip * n, n, self.delta_bit)
            except OutOfDomainError:
                return PrivacyStatement(self.randomizer.epsilon, 0.0, "shuffle",
                                        note=f"rsum_rr: Cheu Cor. 4.7 out of domain at n={n}; local eps only")
            eps = advanced_composition([e_copy] * self.r, self.delta / 2.0)
            return PrivacyStatement(min(eps, self.randomizer.epsilon), min(self.r * self.delta_bit + self.delta / 2.0,
                                                                         0.999999), "shuffle",
                                    note=f"rsum_rr: Cheu Thm 5.4, advanced composition of r={self.r} bit-sum copies "
                                         f"(Cor. 4.7 eps {e_copy:.4g} each)")
        opts: dict[str, Any] = {"randomizer": "binary_rr"} if self.accounting == "clones" else {"form": "exact"} if self.accounting == "cheu2019" else {}
        try:
            if self.accounting == "cheu_cor47":
                from ..counting import cheu_corollary47_epsilon

                N = n * self.r
                e_bit = cheu_corollary47_epsilon(self.flip * N, N, self.delta_bit)
                per_bit = PrivacyStatement(e_bit, self.delta_bit, "shuffle",
                                           note=f"Cheu Cor. 4.7 over n*r = {N} virtual users")
            else:
                per_bit = shuffle_statement(self.eps_l_bit, n * self.r, self.delta_bit, self.accounting, **opts)  # type: ignore[arg-type]
        except OutOfDomainError:
            return PrivacyStatement(self.randomizer.epsilon, 0.0, "shuffle",
                                    note=f"rsum_rr: {self.accounting} out of domain at n={n}; local eps only")
        g = group_privacy(per_bit, self.r)
        return PrivacyStatement(g.eps, min(g.delta, 0.999999), "shuffle",
                                note=f"rsum_rr: group privacy (k={self.r}) of {per_bit.note}")

    @property
    def local_randomizer(self) -> _UnaryRRRandomizer:
        return self.randomizer

    @property
    def messages_per_user(self) -> float:
        return float(self.r)

    @property
    def bits_per_message(self) -> float:
        return 1.0


PROTOCOLS: dict[str, type[Protocol]] = {"rsum_rr": RSumRR}


def _floor_sum_and_fractions(x: np.ndarray, p: int) -> tuple[int, np.ndarray]:
    """``sum(floor(x p))`` and the fractions of :func:`rounding_parts`: what a sum of randomized
    roundings needs besides one uniform per user."""
    lo, frac = rounding_parts(x, p)
    return int(lo.sum()), frac
