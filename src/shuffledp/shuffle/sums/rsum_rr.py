"""Shuffle-model summation: each user holds x in [0, 1], the analyzer estimates sum(x).

Protocols (survey §4.3; spec ``shared/spec/shuffle-amplification-sum-other.md`` §4), all built on
randomized rounding ``fe_p(x) = floor(x p) + Ber(frac(x p))`` (unbiased, Var <= 1/4 per user):

- ``rsum_rr``  RSum_RR  — Cheu et al. EUROCRYPT 2019 multi-message sum: r = ceil(eps sqrt(n))
  unary bits per user, each through shuffled binary RR; calibration by group privacy over the
  n r "virtual users" (spec §4.1, [DERIVED] constants).
- ``rsum_kr``  RSum_KR  — Balle, Bell, Gascón, Nissim CRYPTO 2019 Alg. 2: one (k+1)-ary RR message
  of fe_k(x), blanket gamma from Thm 3.1 (or the numeric Bennett bound).
- ``rsum_rm``  RSum_RM  — Balle, Bell, Gascón, Nissim CCS 2020 recursive protocol: m labelled
  messages, digit j of x in base p_j through a shuffled K_j-ary RR; basic composition.
- ``rsum_dsg`` RSum_DSG — distributed symmetric geometric noise (Pólya shares) + split-and-mix
  with precision p = ceil(sqrt(n)) (spec §4.4).

``rsum_pure`` (Ghazi et al., ITC 2020) is **not implemented**: it is built on Cnt_PURE, whose
algorithm could not be recovered (see ``docs/protocols-counting-sums.md``).

Estimates are sums. ``summarize(values)`` returns the validated values themselves: the
statistic's law depends on every user's fractional part, so ``simulate_statistic`` draws the
randomized rounding per user (one uniform each, vectorized) and everything after it at count
level (O(k) per protocol), exactly in law. ``variance(n, values)`` is the exact variance for
given values, ``variance(n)`` the worst case over inputs in [0, 1]^n.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from scipy import stats

from ..accounting.composition import advanced_composition, basic_composition, group_privacy
from ..accounting.shuffle import local_epsilon_for, shuffle_statement
from ..central.distributed import SplitAndMix, split_and_mix_delta, split_and_mix_messages, split_and_mix_security_bits
from ..central.distributions import simulate_polya
from ..core.errors import OutOfDomainError, ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..local.bits import LOG_MARGIN
from ..core.validation import check_positive_int, check_real
from ._common import (check_statistic, check_unit_values, krr_local_epsilon, krr_report_variance,
                      krr_sum_given_levels, randomized_rounding, sampled_blanket, rounding_parts, scalar_estimate, split_and_mix_honest_parties,
                      split_and_mix_sigma_at)
from .base import Messages, Protocol, bits_for

__all__ = ["RSumRR", "RSumKR", "RSumRM", "RSumDSG", "PROTOCOLS", "blanket_gamma"]


#: Calibrate to a target a hair below the requested epsilon: the stated guarantee is rounded
#: outward (``round_up``: relative 1e-12 + 1 ulp per step), and without this slack the statement
#: of a protocol built from a target came out at target * (1 + 1e-13 .. 1e-12)
#: (tests/shuffle/test_targets_met.py checks ``privacy(n).eps <= target`` with no tolerance).
_CAL = 1.0 - 1e-10


def _need_delta(delta: float, name: str) -> None:
    if not delta:
        raise ValidationError(f"{name} is an (eps, delta) protocol: delta must lie in (0, 1), got 0",
                              parameter="delta")


def blanket_gamma(k: int, epsilon: float, delta: float, n: int) -> float:
    """Balle et al. 2019 Thm 3.1 (survey eq. 8) for k-ary RR: ``max(14 k ln(2/delta)/((n-1) eps^2),
    27 k/((n-1) eps))``; valid for eps <= 1 and a result < 1 (OutOfDomainError otherwise)."""
    if epsilon > 1.0:
        raise OutOfDomainError(f"the privacy blanket's Thm 3.1 needs epsilon <= 1, got {epsilon!r}; "
                               "use bound='bennett'", parameter="epsilon")
    if n < 2:
        raise OutOfDomainError("the privacy blanket needs n >= 2", parameter="n")
    g = max(14.0 * k * math.log(2.0 / delta) / ((n - 1) * epsilon**2), 27.0 * k / ((n - 1) * epsilon))
    # a hair more blanket than the formula: at epsilon = 1 the forward bound must not land at
    # 1 + 1 ulp, outside Thm 3.1's domain (more blanket is always safe)
    g *= 1.0 + 1e-12
    if not g < 1.0:
        raise OutOfDomainError(f"blanket probability gamma = {g:.4g} >= 1 for a {k}-ary RR at epsilon={epsilon!r}, "
                               f"delta={delta!r}, n={n}: too few users for this precision", parameter="n")
    return g


def _krr_gamma(k: int, epsilon: float, delta: float, n: int, bound: str) -> float:
    return _krr_gamma_bound(k, epsilon, delta, n, bound)[0]


def _krr_gamma_bound(k: int, epsilon: float, delta: float, n: int, bound: str) -> tuple[float, str]:
    """Blanket probability of a k-ary RR reaching (epsilon, delta) over n users, and the bound used.

    ``bound="best"``: the smaller blanket (larger eps_l, smaller error) of the closed form (where it
    applies) and the numeric Bennett bound; both are proven bounds, so the guarantee is the same.
    """
    if bound == "closed_form":
        return blanket_gamma(k, epsilon, delta, n), "closed_form"
    # aim 1e-9 below: the numeric inverse and the forward bound's bisection differ in the last digits
    e0 = local_epsilon_for(epsilon * (1.0 - 1e-9), n, delta, method="blanket", bound="bennett", randomizer="krr",
                           k=k)
    g = k / (math.exp(e0) + k - 1.0)
    if bound == "best":
        try:
            gc = blanket_gamma(k, epsilon, delta, n)
        except OutOfDomainError:
            return g, "bennett"
        if gc < g:
            return gc, "closed_form"
    return g, "bennett"


def _krr_statement(k: int, gamma: float, n: int, delta: float, bound: str) -> PrivacyStatement:
    eps_l = krr_local_epsilon(k, gamma)
    return shuffle_statement(eps_l, n, delta, "blanket", bound=bound, randomizer="krr", k=k)


def _check_bound(bound: str) -> str:
    if bound not in ("closed_form", "bennett", "best"):
        raise ValidationError(f"bound must be 'closed_form', 'bennett' or 'best', got {bound!r}", parameter="bound")
    return bound


def _single_column(messages: Messages, col: str, name: str) -> np.ndarray:
    if set(messages) - {"shuffler"} != {col}:
        raise ValidationError(f"{name} messages must have the single column {col!r}", parameter="messages")
    return np.asarray(messages[col])


def _check_int_range(a: np.ndarray, lo: int, hi: int, what: str) -> np.ndarray:
    if a.size and (a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer) or a.min() < lo or a.max() > hi):
        raise ValidationError(f"{what} must be integers in [{lo}, {hi}]", parameter="messages")
    return a.astype(np.int64, copy=False)


class _SumProtocol(Protocol):
    model = "shuffle"
    input_kind = "unit_interval"

    def summarize(self, values: Any) -> np.ndarray:
        return check_unit_values(values)

    def _estimate(self, value: float, n: int, **extra: Any) -> Estimate:
        return scalar_estimate(value, self.variance(n), n, self.privacy(n), "sum", stderr_is_worst_case=True,
                               **extra)


# =============================================================================== RSum_RR

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

    Privacy ([DERIVED], spec §4.1): the n r bits are shuffled binary RR of N = n r virtual users;
    each bit-count is made (eps/r, delta_b)-DP with delta_b = delta / (r e^eps), and a user changes
    at most r virtual users, so group privacy (:func:`shuffledp.accounting.group_privacy`) gives
    (r eps_b, r e^{(r-1) eps_b} delta_b) <= (eps, delta). The per-bit bound (``accounting``):

    - ``"cheu_cor47"`` (default): Cheu et al.'s own Corollary 4.7 (read in the paper), lambda
      inverted numerically over the N virtual users;
    - ``"cheu2019"``: the accounting module's survey Thm 3 form sqrt(32 ln(4/delta)/(flip N))
      (the spec's calibration; more noise at large r; see the doc for why it is not Cor. 4.7);
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

    def __init__(self, epsilon: float, delta: float, n: int, *, precision: int | None = None,
                 accounting: Literal["cheu_cor47", "cheu2019", "clones", "cheu_thm54"] = "cheu_cor47") -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, self.name)
        if accounting not in ("cheu_cor47", "cheu2019", "clones", "cheu_thm54"):
            raise ValidationError("accounting must be 'cheu_cor47', 'cheu2019', 'clones' or 'cheu_thm54', "
                                  f"got {accounting!r}", parameter="accounting")
        self.accounting = accounting
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
            from .counting import CntRR

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

    def _init_thm54(self) -> None:
        from .counting import CntRR

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

    def variance(self, n: int | None = None, values: Any = None) -> float:
        n = self.n if n is None else n
        f, r = self.flip, self.r
        rr = n * r * (f / 2.0) * (1.0 - f / 2.0) / ((1.0 - f) * r) ** 2
        if values is None:
            return rr + n / (4.0 * r * r)
        _, frac = rounding_parts(check_unit_values(values), r)
        return rr + float(np.sum(frac * (1.0 - frac))) / r**2

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = check_unit_values(data)
        T = int(randomized_rounding(x, self.r, rng).sum())
        N = x.shape[0] * self.r
        f = self.flip
        return np.array([rng.binomial(T, 1.0 - f / 2.0) + rng.binomial(N - T, f / 2.0)], dtype=np.int64)

    def _privacy(self, n: int) -> PrivacyStatement:
        if self.accounting == "cheu_thm54":
            from .counting import cheu_corollary47_epsilon

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
                from .counting import cheu_corollary47_epsilon

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


# =============================================================================== RSum_KR

class _RoundedKRRRandomizer:
    """fe_k(x) through (k+1)-ary RR with blanket gamma: P(y | x) = (1 - gamma) P(fe_k(x) = y) + gamma/(k+1)."""

    def __init__(self, k: int, gamma: float) -> None:
        self.k, self.gamma = k, sampled_blanket(gamma)  # the blanket probability sampled exactly
        self.epsilon = krr_local_epsilon(k + 1, self.gamma)

    def randomize(self, values: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
        x = check_unit_values(values)
        v = randomized_rounding(x, self.k, rng)
        blank = rng.random(v.shape[0]) < self.gamma
        u = rng.integers(0, self.k + 1, size=v.shape[0])
        return {"y": np.where(blank, u, v).astype(np.int64)}

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        y = np.asarray(reports["y"]).astype(np.int64)
        lo, r = rounding_parts(np.array([float(x)]), self.k)
        p_round = np.where(y == lo[0], 1.0 - r[0], 0.0) + np.where(y == lo[0] + 1, r[0], 0.0)
        return (1.0 - self.gamma) * p_round + self.gamma / (self.k + 1)


class RSumKR(_SumProtocol):
    """RSum_KR: Balle, Bell, Gascón, Nissim (CRYPTO 2019) single-message summation (Alg. 2).

    Encoder: ``v = fe_k(x)`` in {0..k}; w.p. 1 - gamma send v, else a uniform value of {0..k}.
    Analyzer: ``S = (sum y / k - gamma n / 2) / (1 - gamma)`` (unbiased).
    Privacy: a (k+1)-ary RR, eps_l = ln(1 + (k+1)(1 - gamma)/gamma); gamma from Thm 3.1 with k+1
    values (``bound="closed_form"``, needs eps <= 1) or the numeric Bennett bound
    (``bound="bennett"``), or the smaller blanket of the two (``bound="best"``, recorded in
    ``bound_used``); :meth:`privacy` is the accounting module's blanket bound for eps_l.
    Precision: ``precision=None`` picks the k that minimizes the worst-case MSE (the paper's
    k = Theta((eps^2 n / ln(1/delta))^{1/3}), MSE O(n^{1/3})); the survey used k = 10.
    Cost: 1 message of log2(k+1) bits; O(n) encode/aggregate; simulation O(n) rounding + O(k).
    """

    name = "rsum_kr"

    def __init__(self, epsilon: float, delta: float, n: int, *, precision: int | None = None,
                 bound: Literal["closed_form", "bennett", "best"] = "closed_form") -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, self.name)
        self.bound = _check_bound(bound)
        if precision is None:
            self.k = self._best_precision()
        else:
            self.k = check_positive_int(precision, "precision")
        #: the blanket bound actually used ("best" resolves to "closed_form" or "bennett")
        self.gamma, self.bound_used = _krr_gamma_bound(self.k + 1, self.epsilon * _CAL, self.delta, self.n,
                                                       self.bound)
        self.randomizer = _RoundedKRRRandomizer(self.k, self.gamma)
        self.gamma = self.randomizer.gamma
        self.eps_l = self.randomizer.epsilon

    def _worst_user_variance(self, k: int, gamma: float) -> float:
        # Var(y) as a function of t = k x is gamma(1-gamma)(t^2 - k t) + (1-gamma) r(1-r) + const:
        # its maximum lies in the first (or, symmetrically, the last) unit interval, at the
        # stationary point t* = (1 - gamma k) / (2 (1 - gamma)) clipped to [0, 1], or an end.
        t_star = min(max((1.0 - gamma * k) / (2.0 * (1.0 - gamma)), 0.0), 1.0)
        t = np.array([0.0, t_star, 1.0 if k > 1 else 0.5])
        frac = t - np.floor(t)
        frac = np.where(t >= k, 0.0, frac)
        return float(krr_report_variance(t, t * t + frac * (1 - frac), k + 1, gamma).max())

    def _best_precision(self) -> int:
        k0 = (self.epsilon**2 * self.n / math.log(1.0 / self.delta)) ** (1.0 / 3.0)
        best, best_mse = None, math.inf
        for k in range(1, max(8, int(4 * k0) + 8)):
            # closed-form (Thm 3.1) shape, also used to choose k for the Bennett calibration
            g = blanket_gamma_or_none(k + 1, self.epsilon, self.delta, self.n)
            if g is None:
                break
            mse = self.n * self._worst_user_variance(k, g) / (k * k * (1.0 - g) ** 2)
            if mse < best_mse:
                best, best_mse = k, mse
        if best is None:
            raise OutOfDomainError(f"rsum_kr: no precision k gives a blanket gamma < 1 at epsilon={self.epsilon!r}, "
                                   f"delta={self.delta!r}, n={self.n}", parameter="n")
        return best

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.randomizer.randomize(values, rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        y = _check_int_range(_single_column(messages, "y", self.name), 0, self.k, "rsum_kr messages")
        return np.array([int(y.sum())], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        val = (float(s[0]) / self.k - self.gamma * n / 2.0) / (1.0 - self.gamma)
        return self._estimate(val, n, precision=self.k, gamma=self.gamma)

    def variance(self, n: int | None = None, values: Any = None) -> float:
        n = self.n if n is None else n
        den = (self.k * (1.0 - self.gamma)) ** 2
        if values is None:
            return n * self._worst_user_variance(self.k, self.gamma) / den
        x = check_unit_values(values)
        lo, r = rounding_parts(x, self.k)
        t = lo + r
        return float(np.sum(krr_report_variance(t, t * t + r * (1 - r), self.k + 1, self.gamma))) / den

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = check_unit_values(data)
        levels = np.bincount(randomized_rounding(x, self.k, rng), minlength=self.k + 1)
        return np.array([krr_sum_given_levels(levels, self.k + 1, self.gamma, rng)], dtype=np.int64)

    def _privacy(self, n: int) -> PrivacyStatement:
        try:
            st = _krr_statement(self.k + 1, self.gamma, n, self.delta, self.bound_used)
        except OutOfDomainError:
            return PrivacyStatement(self.eps_l, 0.0, "shuffle", note=f"rsum_kr: blanket out of domain at n={n}")
        return PrivacyStatement(st.eps, st.delta, "shuffle", note=f"rsum_kr (k={self.k}): {st.note}")

    @property
    def local_randomizer(self) -> _RoundedKRRRandomizer:
        return self.randomizer

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.k + 1)


def blanket_gamma_or_none(k: int, epsilon: float, delta: float, n: int) -> float | None:
    """:func:`blanket_gamma`, or None outside Thm 3.1's domain (for precision searches; eps > 1 uses
    the eps = 1 shape)."""
    try:
        return blanket_gamma(k, min(epsilon, 1.0), delta, n)
    except OutOfDomainError:
        return None


# =============================================================================== RSum_RM

class _RecursiveRandomizer:
    """One user's m digits (level j in base p_j; the last randomly rounded), each through a K_j-ary
    RR with blanket gamma_j. eps_l = sum_j ln(1 + K_j (1 - gamma_j)/gamma_j)."""

    def __init__(self, proto: "RSumRM") -> None:
        self.proto = proto
        # fsum is correctly rounded (2^-53 relative): the margin covers it
        self.epsilon = round_up(math.fsum(krr_local_epsilon(K, g) for K, g in zip(proto.K, proto.gammas)), LOG_MARGIN)

    def randomize(self, values: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d = self.proto._digits(check_unit_values(values), rng)
        return {"y": self.proto._rr_levels(d, rng)}

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        P = self.proto
        y = np.asarray(reports["y"]).astype(np.int64)
        xs = np.array([float(x)])
        det, lo, r = P._digit_parts(xs)
        out = np.ones(y.shape[0])
        for j in range(P.m - 1):
            g = P.gammas[j]
            out *= (1 - g) * (y[:, j] == det[0, j]) + g / P.K[j]
        g = P.gammas[-1]
        p_round = np.where(y[:, -1] == lo[0], 1.0 - r[0], 0.0) + np.where(y[:, -1] == lo[0] + 1, r[0], 0.0)
        return out * ((1 - g) * p_round + g / P.K[-1])


class RSumRM(_SumProtocol):
    """RSum_RM: Balle, Bell, Gascón, Nissim (CCS 2020) recursive multi-message summation.

    Parameters m (messages), precisions p_1..p_m, q_j = p_1 ... p_j. Encoder: x_1 = x; for j < m,
    ``d_j = min(floor(x_j p_j), p_j - 1)`` and ``x_{j+1} = x_j p_j - d_j``; ``d_m = fe_{p_m}(x_m)``.
    Digit j goes through a K_j-ary RR (K_j = p_j, K_m = p_m + 1) with blanket gamma_j and is sent
    labelled with j. Analyzer: ``T_j = (S_j - gamma_j n (K_j - 1)/2)/(1 - gamma_j)``,
    ``S = sum_j T_j / q_j`` (unbiased; x = sum_{j<m} d_j/q_j + E[d_m]/q_m).
    Privacy: each level is a shuffled K_j-ary RR at (eps/m, delta/m) (Thm 3.1, or Bennett);
    basic composition gives (eps, delta). :meth:`privacy` composes the accounting module's
    per-level blanket bounds.
    Defaults (the authors' analytic rule, ``find_parameters.recursive``): m = round(log_3 log_2 n)
    (at least 2), ``p_j = min(ceil(a^{3^j}), floor(p_max))`` with
    ``a = ((3^m - 1) n eps^2 / m^3)^{3^{-m-1}}``, ``p_max = (n-1) eps_j / max(14 ln(2m/delta)/eps_j, 27)``;
    with the closed-form bound the last level (p_m + 1 values) is capped at p_max - 1 (spec pitfall 1).
    ``bound="best"`` picks, per level, the smaller blanket of the closed form and Bennett
    (``level_bounds``); the last level is then not capped.
    Cost: m messages of (label, log2 K_j bits); O(n m) encode/aggregate; simulation O(n) + O(sum K_j).
    """

    name = "rsum_rm"

    def __init__(self, epsilon: float, delta: float, n: int, *, messages: int | None = None,
                 precisions: list[int] | tuple[int, ...] | None = None,
                 bound: Literal["closed_form", "bennett", "best"] = "closed_form") -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, self.name)
        self.bound = _check_bound(bound)
        if precisions is not None:
            ps = [check_positive_int(p, "precisions", minimum=2) for p in precisions]
            if messages is not None and check_positive_int(messages, "messages") != len(ps):
                raise ValidationError("messages must equal len(precisions)", parameter="messages")
            if not ps:
                raise ValidationError("precisions must not be empty", parameter="precisions")
            self.m = len(ps)
        else:
            self.m = (max(2, round(math.log(math.log2(max(self.n, 4)), 3))) if messages is None
                      else check_positive_int(messages, "messages"))
            ps = self._analytic_precisions()
        self.p = ps
        self.q = [int(v) for v in np.cumprod(ps)]
        self.K = ps[:-1] + [ps[-1] + 1]
        self.eps_level = self.epsilon * _CAL / self.m
        self.delta_level = self.delta / self.m
        picked = [_krr_gamma_bound(K, self.eps_level, self.delta_level, self.n, self.bound) for K in self.K]
        self.gammas = [sampled_blanket(g) for g, _ in picked]  # the blanket probabilities sampled exactly
        #: the blanket bound used per level ("best" picks per level)
        self.level_bounds = [b for _, b in picked]
        self.randomizer = _RecursiveRandomizer(self)

    def _analytic_precisions(self) -> list[int]:
        m, n, eps = self.m, self.n, self.epsilon
        ej = eps / m
        pmax = (n - 1) * ej / max(14.0 * math.log(2.0 * m / self.delta) / ej, 27.0)
        a = ((3**m - 1) * n * eps**2 / m**3) ** (3.0 ** (-m - 1))
        cap = math.floor(pmax)
        ps = [min(math.ceil(a ** (3**j)), cap) for j in range(1, m + 1)]
        if self.bound == "closed_form":
            ps[-1] = min(ps[-1], math.ceil(pmax) - 2)  # K_m = p_m + 1 < p_max
        if min(ps) < 2:
            raise OutOfDomainError(f"rsum_rm: n={n} is too small for m={m} levels at epsilon={eps!r}, "
                                   f"delta={self.delta!r} (precisions {ps}); use fewer messages or more users",
                                   parameter="n")
        return ps

    # ---- encoding helpers (vectorized over users; loops over the m levels only)
    def _digit_parts(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        det = np.zeros((x.shape[0], max(self.m - 1, 0)), dtype=np.int64)
        xj = x.astype(np.float64)
        for j in range(self.m - 1):
            t = xj * self.p[j]
            d = np.minimum(np.floor(t), self.p[j] - 1).astype(np.int64)
            det[:, j] = d
            xj = np.clip(t - d, 0.0, 1.0)
        lo, r = rounding_parts(xj, self.p[-1])
        return det, lo, r

    def _digits(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        det, lo, r = self._digit_parts(x)
        last = lo + (rng.random(x.shape[0]) < r)
        return np.concatenate([det, last[:, None]], axis=1)

    def _rr_levels(self, d: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        y = d.copy()
        for j in range(self.m):
            blank = rng.random(d.shape[0]) < self.gammas[j]
            y[blank, j] = rng.integers(0, self.K[j], size=int(blank.sum()))
        return y

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        y = self.randomizer.randomize(values, rng)["y"]
        level = np.broadcast_to(np.arange(self.m, dtype=np.int8), y.shape)
        return {"level": level.reshape(-1).copy(), "y": y.reshape(-1)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(self.m, dtype=np.int64)
        if set(messages) - {"shuffler"} != {"level", "y"}:
            raise ValidationError("rsum_rm messages must have the columns 'level' and 'y'", parameter="messages")
        lv = _check_int_range(np.asarray(messages["level"]), 0, self.m - 1, "rsum_rm levels")
        y = np.asarray(messages["y"])
        if y.shape != lv.shape:
            raise ValidationError("rsum_rm columns differ in length", parameter="messages")
        y = _check_int_range(y, 0, max(self.K) - 1, "rsum_rm values")
        if y.size and np.any(y >= np.asarray(self.K)[lv]):
            raise ValidationError("rsum_rm: a value exceeds its level's domain", parameter="messages")
        return np.bincount(lv, weights=y, minlength=self.m).astype(np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, self.m)
        n = check_positive_int(n, "n")
        val = 0.0
        for j in range(self.m):
            g, K = self.gammas[j], self.K[j]
            val += (float(s[j]) - g * n * (K - 1) / 2.0) / (1.0 - g) / self.q[j]
        return self._estimate(val, n, precisions=self.p, gammas=self.gammas)

    def variance(self, n: int | None = None, values: Any = None) -> float:
        n = self.n if n is None else n
        total = 0.0
        if values is None:
            for j in range(self.m):
                g, K = self.gammas[j], self.K[j]
                per = g * (K * K - 1) / 12.0 + g * (1 - g) * (K - 1) ** 2 / 4.0
                if j == self.m - 1:
                    per += (1 - g) / 4.0  # rounding of the last digit
                total += n * per / (self.q[j] * (1 - g)) ** 2
            return total
        x = check_unit_values(values)
        det, lo, r = self._digit_parts(x)
        for j in range(self.m):
            g, K = self.gammas[j], self.K[j]
            if j < self.m - 1:
                d = det[:, j].astype(np.float64)
                v = krr_report_variance(d, d * d, K, g)
            else:
                t = lo + r
                v = krr_report_variance(t, t * t + r * (1 - r), K, g)
            total += float(np.sum(v)) / (self.q[j] * (1 - g)) ** 2
        return total

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = check_unit_values(data)
        d = self._digits(x, rng)
        out = np.empty(self.m, dtype=np.int64)
        for j in range(self.m):
            levels = np.bincount(d[:, j], minlength=self.K[j])
            out[j] = krr_sum_given_levels(levels, self.K[j], self.gammas[j], rng)
        return out

    def _privacy(self, n: int) -> PrivacyStatement:
        try:
            parts = [_krr_statement(K, g, n, self.delta_level, b)
                     for K, g, b in zip(self.K, self.gammas, self.level_bounds)]
        except OutOfDomainError:
            return PrivacyStatement(self.randomizer.epsilon, 0.0, "shuffle",
                                    note=f"rsum_rm: blanket out of domain at n={n}; local eps only")
        eps, dlt = basic_composition([(s.eps, s.delta) for s in parts])
        return PrivacyStatement(eps, dlt, "shuffle",
                                note=f"rsum_rm: basic composition of {self.m} shuffled K-RR levels "
                                     f"(K={self.K}, blanket {'/'.join(self.level_bounds)})")

    @property
    def local_randomizer(self) -> _RecursiveRandomizer:
        return self.randomizer

    @property
    def messages_per_user(self) -> float:
        return float(self.m)

    @property
    def bits_per_message(self) -> float:
        return float(bits_for(self.m) + max(bits_for(K) for K in self.K)) if self.m > 1 else bits_for(self.K[0])


# =============================================================================== RSum_DSG

class RSumDSG(_SumProtocol):
    """RSum_DSG: distributed symmetric geometric noise + split-and-mix (spec §4.4; Balle et al.
    2019 arXiv 1906.09116 / CCS 2020, Ghazi et al. 2020).

    Encoder: ``v = fe_p(x)`` + X - Y with X, Y i.i.d. Pólya(1/(gamma n), alpha = e^{-eps/p}); v is
    split into m additive shares mod q. Analyzer: s = sum of all shares mod q, mapped to
    [-q/2, q/2); ``S = s / p``.
    Privacy: with >= gamma n honest users the total noise is NB(>= 1) - NB(>= 1), eps/p-DP per unit
    of the integer sum (log-concave, spec §1.6), and one user moves the sum by <= p: eps-DP;
    split-and-mix with security sigma adds (1 + e^eps) 2^-sigma (survey Thm 9), sigma chosen so
    that this is <= delta. Statement: (eps, (1 + e^eps) 2^-sigma[, gamma]).
    Error (all honest): ``Var = [sum_i r_i (1 - r_i) + 2 R alpha/(1 - alpha)^2] / p^2``, R = 1/gamma;
    with p = ceil(sqrt(n)) about 1/4 + 2/(gamma eps^2), independent of n.
    q: a power of two > 2 (n p + tau), tau the (1 - wrap_probability) quantile of |noise|.
    Cost: m = max(3, ceil((2 sigma + log2 q)/(log2 h - log2 e) + 1)) messages of log2 q bits,
    h = floor(gamma n) honest parties (split-and-mix must be secure among the honest users alone);
    O(n m) encode/aggregate; simulation O(n) rounding + O(1).
    """

    name = "rsum_dsg"

    def __init__(self, epsilon: float, delta: float, n: int, *, precision: int | None = None,
                 gamma: float = 1.0, wrap_probability: float = 1e-9) -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, "rsum_dsg (split-and-mix adds a statistical delta)")
        if self.n < 3:
            raise ValidationError("rsum_dsg needs n >= 3 users (split-and-mix)", parameter="n")
        self.gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True)
        if self.gamma * self.n < 1.0:
            raise ValidationError(f"rsum_dsg needs gamma * n >= 1, got {self.gamma * self.n!r}", parameter="gamma")
        beta = check_real(wrap_probability, "wrap_probability", low=0.0, high=0.5, low_open=True)
        self.precision = (math.ceil(math.sqrt(self.n)) if precision is None
                          else check_positive_int(precision, "precision"))
        p = self.precision
        self.alpha = math.exp(-self.epsilon / p)
        self.shape = 1.0 / (self.gamma * self.n)
        self.total_shape = 1.0 / self.gamma
        self.sigma = split_and_mix_security_bits(self.epsilon, self.delta)
        tau = float(stats.nbinom.isf(beta / 2.0, self.total_shape, 1.0 - self.alpha))
        self.modulus = 1 << max(2, math.ceil(math.log2(2.0 * (self.n * p + tau + 1.0))))
        if self.modulus > 1 << 62:
            raise ValidationError("rsum_dsg: modulus would exceed 2^62; lower the precision", parameter="precision")
        #: honest parties the (robust) guarantee may rely on: split-and-mix is sized (and its
        #: security sigma evaluated) among floor(gamma n) parties, not n
        self.honest_parties = split_and_mix_honest_parties(self.gamma, self.n, "rsum_dsg")
        self.n_messages = split_and_mix_messages(self.honest_parties, math.log2(self.modulus), self.sigma)
        self._sm = SplitAndMix(self.modulus, self.n_messages)

    @property
    def robust(self) -> bool:  # type: ignore[override]
        return self.gamma < 1.0

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_unit_values(values)
        v = randomized_rounding(x, self.precision, rng)
        k = x.shape[0]
        noise = simulate_polya(self.shape, self.alpha, k, rng) - simulate_polya(self.shape, self.alpha, k, rng)
        return {"share": self._sm.simulate_encode(v + noise, rng).reshape(-1)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        return np.array([self._sm.aggregate(_single_column(messages, "share", self.name))], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        val = self._sm.decode_signed(int(s[0]) % self.modulus) / self.precision
        return self._estimate(val, n, precision=self.precision, modulus=self.modulus, messages=self.n_messages)

    def noise_variance(self, n: int | None = None) -> float:
        """Variance of the integer noise when all n users are honest: 2 R alpha/(1 - alpha)^2."""
        n = self.n if n is None else n
        R = n * self.shape
        return 2.0 * R * self.alpha / (1.0 - self.alpha) ** 2

    def variance(self, n: int | None = None, values: Any = None) -> float:
        n = self.n if n is None else n
        p = self.precision
        if values is None:
            rounding = n / 4.0
        else:
            _, r = rounding_parts(check_unit_values(values), p)
            rounding = float(np.sum(r * (1 - r)))
        return (rounding + self.noise_variance(n)) / p**2

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = check_unit_values(data)
        total = int(randomized_rounding(x, self.precision, rng).sum())
        R = x.shape[0] * self.shape
        z = int(simulate_polya(R, self.alpha, 1, rng)[0]) - int(simulate_polya(R, self.alpha, 1, rng)[0])
        return np.array([(total + z) % self.modulus], dtype=np.int64)

    def _privacy(self, n: int) -> PrivacyStatement:
        honest_needed = self.gamma * self.n
        if n < honest_needed or n < 3:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"rsum_dsg: fewer than gamma*n users at n={n}")
        # security among the floor(gamma self.n) honest parties the guarantee assumes
        sigma = split_and_mix_sigma_at(self.n_messages, self.honest_parties, self.modulus, self.sigma,
                                       self.honest_parties)
        extra = split_and_mix_delta(self.epsilon, sigma) if sigma > 0 else 1.0
        if extra >= 1.0:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"rsum_dsg: split-and-mix insecure at n={n}")
        return PrivacyStatement(self.epsilon, extra, "shuffle", gamma=min(1.0, honest_needed / n),
                                note=f"rsum_dsg: distributed geometric (alpha=e^-eps/p, p={self.precision}) + "
                                     f"split-and-mix (m={self.n_messages}, q=2^{int(math.log2(self.modulus))})")

    @property
    def messages_per_user(self) -> float:
        return float(self.n_messages)

    @property
    def bits_per_message(self) -> float:
        return math.log2(self.modulus)


#: registry table (``rsum_pure`` deliberately absent: built on the unrecovered Cnt_PURE)
PROTOCOLS: dict[str, type[Protocol]] = {"rsum_rr": RSumRR, "rsum_kr": RSumKR, "rsum_rm": RSumRM, "rsum_dsg": RSumDSG}
