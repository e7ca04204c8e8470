"""Shuffle-model histogram (frequency) protocols: each user holds x in [0, d).

Every protocol is built from its central target ``(epsilon, delta)`` and ``n`` (and ``d``) and
chooses its local parameters from the theorem it implements (spec
``shared/spec/shuffle-counting-histogram.md`` §3; survey seed 000 §4.2). Estimates are **counts**
(number of users per item), as in the survey.

=========  ==========================================================  ============================
name       protocol                                                    source (spec tag)
=========  ==========================================================  ============================
hist_kr    k-ary RR + privacy blanket                                  Balle et al. CRYPTO'19 [P]
hist_mm    P^hist = P^zsum per coordinate (multi-message)              Balcer & Cheu ITC'20 [P2]
slh        shuffled optimized local hashing (SOLH), "optimal" or "v1"  Wang et al. VLDB'20 [A]+[D]
murs       several shufflers adding uniform fake reports               Wang et al. VLDB'20 [A]+[D]
prhr       private-coin multi-message Hadamard response P^Had          Ghazi et al. EUROCRYPT'21 [P]
pucm       public-coin count-min P^CM                                  Ghazi et al. EUROCRYPT'21 [P]
=========  ==========================================================  ============================

``docs/protocols-histogram.md`` gives the formulas, every reconstruction choice and measured errors.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from ..accounting.shuffle import local_epsilon_for, shuffle_amplification
from ..core.errors import OutOfDomainError, ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_domain_size, check_int_values, check_positive_int, check_probability
from ..local.grr import GeneralizedRandomizedResponse
from ..local.hashing import LocalHashing
from ._common import sampled_blanket
from .base import Messages, Protocol, bits_for, n_messages

__all__ = ["HistogramProtocol", "HistKR", "HistMM", "SLH", "MURS", "PRHR", "PUCM", "PROTOCOLS",
           "blanket_epsilon", "blanket_required"]

_CELLS = 1 << 22  # cells per chunk on O(n * d) client paths


# =========================================================================== shared pieces

def blanket_required(epsilon: float, delta: float) -> float:
    """Blanket size per value needed by BBGN19 Thm 3.1: ``max(14 ln(2/delta)/eps^2, 27/eps)``."""
    return max(14.0 * math.log(2.0 / delta) / epsilon**2, 27.0 / epsilon)


#: relative extra blanket used when calibrating, so that the forward bound evaluated in floating
#: point does not land an ulp above the target (and, at eps = 1, outside Thm 3.1's domain). It must
#: also outweigh the statements' outward rounding (``round_up``: relative 1e-12 + 1 ulp, applied up
#: to twice, e.g. fragmenting's composition): eps ~ c^-1/2 drops by 5e-12 here. With 1e-12 the
#: stated eps was target * (1 + 5e-13).
_MARGIN = 1.0 + 1e-11


def blanket_epsilon(c: float, delta: float) -> float:
    """Central eps certified by a blanket of expected size ``c`` per value (BBGN19 Thm 3.1 proof):
    the smallest eps with ``c >= max(14 ln(2/delta)/eps^2, 27/eps)``. Valid only when <= 1."""
    if c <= 0:
        return math.inf
    return max(math.sqrt(14.0 * math.log(2.0 / delta) / c), 27.0 / c)


def _local_statement(eps_l: float, why: str) -> PrivacyStatement:
    return PrivacyStatement(eps_l, 0.0, model="shuffle", note=f"only the local guarantee eps_l={eps_l:.6g} ({why})")


class HistogramProtocol(Protocol):
    """Common input handling of the histogram protocols (values: ints in [0, d)).

    ``summarize(values)`` is the vector of true counts; ``estimate`` returns counts;
    ``variance(n, count)`` is the variance (or stated squared error) of one item's estimated
    count when its true count is ``count``.
    """

    input_kind = "categorical"

    def __init__(self, epsilon: float, delta: float, n: int, d: int) -> None:
        super().__init__(epsilon, delta, n)
        if self.delta <= 0:
            raise ValidationError(f"{self.name} is an approximate-DP protocol: delta must lie in (0, 1)",
                                  parameter="delta")
        self.d = check_domain_size(d)

    # --- input ------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        return check_int_values(values, self.d)

    def summarize(self, values: Any) -> np.ndarray:
        return np.bincount(self.check_values(values), minlength=self.d).astype(np.int64)

    def check_counts(self, data: Any) -> np.ndarray:
        c = np.asarray(data)
        if c.shape != (self.d,) or not np.issubdtype(c.dtype, np.integer) or (c.size and c.min() < 0):
            raise ValidationError(f"true counts must be {self.d} non-negative integers", parameter="data")
        return c.astype(np.int64)

    def _column(self, messages: Messages, key: str, high: int) -> np.ndarray:
        if key not in messages:
            raise ValidationError(f"{self.name} messages need a {key!r} column, got {sorted(messages)}",
                                  parameter="messages")
        col = np.asarray(messages[key])
        if col.size and np.issubdtype(col.dtype, np.unsignedinteger):
            if int(col.max()) >= high:
                raise ValidationError(f"column {key!r} must hold integers in [0, {high})", parameter="messages")
            return col.astype(np.int64)
        return check_int_values(col, high, key)

    def _estimate(self, values: np.ndarray, var: np.ndarray, n: int, **extra: Any) -> Estimate:
        return Estimate(values, np.sqrt(np.maximum(var, 0.0)), n, self.privacy(n), kind="count", extra=extra)

    def _n_of(self, n: int | None) -> int:
        return self.n if n is None else check_positive_int(n, "n")


class _PureOracleMixin:
    """Estimator and exact variance of a pure (p*, q*) oracle plus a fixed number of fakes.

    ``C_j = Bin(c_j, p*) + Bin(n - c_j, q*) + Bin(n_fake, pi_f)`` (independent users/fakes);
    ``c^_j = (C_j - n q* - n_fake pi_f) / (p* - q*)`` is unbiased and
    ``Var = [c p*(1-p*) + (n-c) q*(1-q*) + n_fake pi_f(1-pi_f)] / (p*-q*)^2`` exactly.
    """

    p_star: float
    q_star: float
    fake_total: int = 0
    fake_support: float = 0.0

    def _debias(self, stat: np.ndarray, n: int) -> np.ndarray:
        return (np.asarray(stat, dtype=np.float64) - n * self.q_star - self.fake_total * self.fake_support) / (
            self.p_star - self.q_star)

    def _var_counts(self, n: int, c: np.ndarray | float) -> np.ndarray:
        p, q, f = self.p_star, self.q_star, self.fake_support
        c = np.clip(np.asarray(c, dtype=np.float64), 0.0, n)
        return (c * p * (1 - p) + (n - c) * q * (1 - q) + self.fake_total * f * (1 - f)) / (p - q) ** 2


# =========================================================================== Hist_KR

class HistKR(_PureOracleMixin, HistogramProtocol):
    """Hist_KR: k-ary randomized response amplified by shuffling (the privacy blanket).

    Each user sends one GRR report ``y`` over [d] at ``eps_l`` (``y = x`` w.p. ``p``, else a
    uniform other value); the shuffler permutes; the analyzer debiases the histogram.

    Parameters from the central target (``bound="closed_form"``, the survey's Thm 4 = BBGN19
    Thm 3.1, needs ``epsilon <= 1``)::

        gamma = max(14 d ln(2/delta) / ((n-1) eps^2), 27 d / ((n-1) eps)) < 1
        eps_l = ln(1 + d (1 - gamma) / gamma)

    ``bound="hoeffding"`` / ``"bennett"`` use the numeric blanket bounds of BBGN19 §5 (any eps),
    via :func:`shuffledp.accounting.local_epsilon_for`. ``bound="best"`` takes whichever of the three
    (all proven) allows the largest eps_l, i.e. the smallest error for the same guarantee; ``self.bound``
    then names the one used (at the survey's Fig 7(b) setting it is Hoeffding/Bennett, RMSE ~1.8x lower).

    Privacy: each report is eps_l-LDP (exact GRR ratio); the shuffled histogram is
    (epsilon, delta)-DP (replace-one); ``privacy(n)`` is
    ``shuffle_amplification(eps_l, n, delta, "blanket", bound=..., randomizer="krr", k=d)``.
    Source: Balle, Bell, Gascón, Nissim, "The Privacy Blanket of the Shuffle Model", CRYPTO 2019,
    Alg. 1 + Thm 3.1 (estimator derived, spec §3.1).
    Error: exact ``Var[c^_j] = [c p(1-p) + (n-c) q(1-q)] / (p-q)^2``.
    Cost: 1 message of ceil(log2 d) bits per user; O(n) encode and aggregate.
    """

    name = "hist_kr"

    def __init__(self, epsilon: float, delta: float, n: int, d: int, bound: str = "closed_form") -> None:
        super().__init__(epsilon, delta, n, d)
        if bound not in ("closed_form", "hoeffding", "bennett", "best"):
            raise ValidationError(f"bound must be 'closed_form', 'hoeffding', 'bennett' or 'best', got {bound!r}",
                                  parameter="bound")
        if self.n < 2:
            raise ValidationError("hist_kr needs n >= 2 users", parameter="n")
        d = self.d
        if bound == "best":  # every bound is proven: take the one allowing the largest eps_l
            cands: dict[str, float] = {}
            for b in ("closed_form", "hoeffding", "bennett"):
                try:
                    cands[b] = self._calibrate(b)
                except OutOfDomainError:
                    pass
            bound = max(cands, key=lambda b: cands[b])  # the numeric bounds never refuse
            eps_l = cands[bound]
        else:
            eps_l = self._calibrate(bound)
        #: the bound used ("best" resolves to the one giving the largest eps_l)
        self.bound = bound
        self.eps_l = eps_l
        self.grr = GeneralizedRandomizedResponse(eps_l, d)
        self.p_star, self.q_star = self.grr.p, self.grr.q
        self.gamma = 1.0 - (self.grr.p - self.grr.q)

    def _calibrate(self, bound: str) -> float:
        """eps_l of the GRR whose shuffled reports meet the target under ``bound``."""
        n, d, eps, delta = self.n, self.d, self.epsilon, self.delta
        if bound != "closed_form":
            # local_epsilon_for guarantees shuffle_amplification(eps_l, ...) <= eps, which is privacy(n)
            return local_epsilon_for(eps, n, delta, method="blanket", bound=bound, randomizer="krr", k=d)
        if eps > 1.0:
            raise OutOfDomainError(f"hist_kr with bound='closed_form' (BBGN19 Thm 3.1) needs epsilon <= 1, got "
                                   f"{eps!r}; use bound='hoeffding', 'bennett' or 'best' for larger epsilon",
                                   parameter="epsilon")
        # a hair more blanket than required (_MARGIN), so the forward bound at epsilon = 1 does not
        # land 1 ulp outside Thm 3.1's domain (eps_c <= 1); more blanket is always safe
        gamma = d * blanket_required(eps, delta) / (n - 1) * _MARGIN
        if gamma >= 1.0:
            n_min = math.floor(d * blanket_required(eps, delta)) + 2
            raise OutOfDomainError(f"hist_kr cannot reach epsilon={eps!r}, delta={delta!r} with n={n}, d={d}: "
                                   f"the blanket needs gamma = {gamma:.4g} < 1, i.e. n >= {n_min}",
                                   parameter="n")
        return math.log1p(d * (1.0 - gamma) / gamma)

    @property
    def local_randomizer(self) -> GeneralizedRandomizedResponse:
        return self.grr

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return {"y": self.grr.randomize(self.check_values(values), rng)["y"]}

    def aggregate(self, messages: Messages) -> np.ndarray:
        return np.bincount(self._column(messages, "y", self.d), minlength=self.d).astype(np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        est = self._debias(statistic, n)
        return self._estimate(est, self._var_counts(n, est), n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: GRR = keep w.p. 1-gamma, else uniform over [d]; O(d)."""
        c = self.check_counts(data)
        kept = rng.binomial(c, self.p_star - self.q_star)
        return kept + rng.multinomial(int(c.sum() - kept.sum()), np.full(self.d, 1.0 / self.d))

    def variance(self, n: int | None = None, count: float = 0.0) -> float:
        return float(self._var_counts(self._n_of(n), count))

    def _privacy(self, n: int) -> PrivacyStatement:
        try:
            eps = shuffle_amplification(self.eps_l, n, self.delta, method="blanket", bound=self.bound,
                                        randomizer="krr", k=self.d)
        except OutOfDomainError:
            return _local_statement(self.eps_l, f"BBGN19 Thm 3.1 does not apply at n={n}")
        return PrivacyStatement(eps, self.delta, model="shuffle",
                                note=f"hist_kr: BBGN19 blanket ({self.bound}) for eps_l={self.eps_l:.6g}, d={self.d}")

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.d)


# =========================================================================== Hist_MM

class HistMM(HistogramProtocol):
    """Hist_MM: Balcer & Cheu's P^hist, the zero-sum counter P^zsum on each coordinate.

    Each user sends her label ``x`` once, and every label ``j`` in [d] once more with probability
    ``p`` (``1 + Bin(d, p)`` messages of ceil(log2 d) bits). Per coordinate this is P^zsum at
    ``(eps/2, delta/2)``::

        p = 1 - 50 ln(2/delta') / (eps'^2 n) = 1 - 200 ln(4/delta) / (eps^2 n)

    valid for ``eps' <= 1`` (``epsilon <= 2``) and ``n >= 100 ln(2/delta')/eps'^2`` (i.e.
    ``1 - p <= 1/2``). Analyzer: ``c^_j = |y_j| - n p`` if ``|y_j| > n`` else 0 (the truncation
    makes zero counts exact and biases counts below about ``n (1-p)`` towards 0).

    Privacy: (epsilon, delta)-DP central (one user moves two coordinates: 2 x (eps/2, delta/2));
    **no local DP** (a user's label is always sent). Source: Balcer & Cheu, ITC 2020, §3 [P2].
    Error (no truncation): ``Var = n p (1-p)`` exactly (``|y_j| = c_j + Bin(n, p)``), independent
    of d.
    """

    name = "hist_mm"

    def __init__(self, epsilon: float, delta: float, n: int, d: int) -> None:
        super().__init__(epsilon, delta, n, d)
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 2.0:
            raise OutOfDomainError(f"hist_mm (Balcer-Cheu P^zsum at eps/2 per coordinate) needs epsilon <= 2, "
                                   f"got {eps!r}", parameter="epsilon")
        n_min = 400.0 * math.log(4.0 / delta) / eps**2
        if n < n_min:
            raise OutOfDomainError(f"hist_mm needs n >= 400 ln(4/delta)/epsilon^2 = {math.ceil(n_min)} users "
                                   f"for epsilon={eps!r}, delta={delta!r}; got n={n}", parameter="n")
        # eps' stays <= 1 at eps = 2; rounded up to the 2^-53 grid, so 1 - p is sampled exactly
        self.one_minus_p = sampled_blanket(200.0 * math.log(4.0 / delta) / (eps**2 * n) * _MARGIN)
        self.p = 1.0 - self.one_minus_p

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        parts = [x]
        step = max(1, _CELLS // self.d)
        for lo in range(0, x.shape[0], step):  # chunks of users
            m = min(step, x.shape[0] - lo)
            parts.append(np.nonzero(rng.random((m, self.d)) < self.p)[1].astype(np.int64))
        return {"y": np.concatenate(parts)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        return np.bincount(self._column(messages, "y", self.d), minlength=self.d).astype(np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic, dtype=np.float64)
        est = np.where(stat > n, stat - n * self.p, 0.0)
        return self._estimate(est, np.full(self.d, self.variance(n)), n, truncated=stat <= n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: ``|y_j| = c_j + Bin(n, p)`` independently per label; O(d)."""
        c = self.check_counts(data)
        return c + rng.binomial(int(c.sum()), self.p, size=self.d)

    def variance(self, n: int | None = None, count: float = 0.0) -> float:
        """``n p (1-p)``: the exact variance for counts above the truncation (``count`` unused)."""
        return self._n_of(n) * self.p * self.one_minus_p

    def _privacy(self, n: int) -> PrivacyStatement:
        mass = n * self.one_minus_p  # mean of the Bin(n, 1-p) smoothing noise
        eps_c = math.sqrt(50.0 * math.log(4.0 / self.delta) / mass)
        if eps_c > 1.0 or self.one_minus_p > 0.5:
            return PrivacyStatement(math.inf, 0.0, model="shuffle",
                                    note=f"hist_mm: P^zsum's condition fails at n={n} and there is no local DP")
        return PrivacyStatement(round_up(2.0 * eps_c), self.delta, model="shuffle",
                                note=f"hist_mm: Balcer-Cheu P^zsum (eps'={eps_c:.6g}, delta/2) per coordinate, x2")

    @property
    def messages_per_user(self) -> float:
        return 1.0 + self.d * self.p

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.d)


# =========================================================================== SLH (SOLH)

class SLH(_PureOracleMixin, HistogramProtocol):
    """SLH: shuffled optimized local hashing (SOLH), one message per user.

    Each user draws a public hash ``H: [d] -> [g]`` (the affine family of
    :class:`shuffledp.local.hashing.LocalHashing`), and sends ``(seed, GRR_g(H(x)))`` at eps_l.
    The analyzer debiases the support counts ``S_j = #{i : H_i(j) = y_i}``.

    Amplification (spec §3.3 [D]: BBGN19 Thm 3.1 with k = g; a blanket report supports any fixed
    value with probability exactly 1/g): (eps, delta)-DP for eps <= 1 when
    ``m := e^eps_l + g - 1 = (n-1) / max(14 ln(2/delta)/eps^2, 27/eps)``.

    ``variant="optimal"`` (default; DUMP authors' SOLH): ``g = floor((m+2)/3)`` minimises the
    zero-count variance for that m, ``e^eps_l = m + 1 - g``; ``privacy(n)`` is
    ``shuffle_amplification(eps_l, n, delta, "blanket", bound="closed_form", randomizer="krr", k=g)``.

    ``variant="v1"`` (Wang et al. arXiv v1 parameter choice, author code ``blanket_naive_olh``):
    ``g = round(e^{eps_l/2} + 1)`` and ``eps_c = 2 sqrt(14 ln(2/delta) (e^eps_l + g - 1) / (n-1))``;
    eps_l is the largest value whose eps_c meets the target (found by bisection, not by the author
    code's reverse formula, which is not its inverse -- see the docs). ``privacy(n)`` is twice the
    blanket bound (conservative).

    Privacy: each report eps_l-LDP (exact). Source: Wang et al., "Improving Utility and Security
    of the Shuffler-based Differential Privacy", PVLDB 13(13) 2020 (arXiv 1908.11515).
    Error: exact ``Var = [c p(1-p) + (n-c) q*(1-q*)] / (p-q*)^2`` with q* the exact support
    probability of the hash family (~1/g). If ``g >= d``, Hist_KR is more accurate.
    Cost: 1 message of ceil(log2 #seeds) + ceil(log2 g) bits; O(n + P^2) aggregation.
    """

    name = "slh"

    def __init__(self, epsilon: float, delta: float, n: int, d: int, variant: str = "optimal") -> None:
        super().__init__(epsilon, delta, n, d)
        if variant not in ("optimal", "v1"):
            raise ValidationError(f"variant must be 'optimal' or 'v1', got {variant!r}", parameter="variant")
        self.variant = variant
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 1.0:
            raise OutOfDomainError(f"slh uses BBGN19 Thm 3.1 and needs epsilon <= 1, got {eps!r}", parameter="epsilon")
        if n < 2:
            raise ValidationError("slh needs n >= 2 users", parameter="n")
        if variant == "optimal":
            m = (n - 1) / (blanket_required(eps, delta) * _MARGIN)
            g = int(math.floor((m + 2.0) / 3.0))
            if g < 2 or m + 1.0 - g <= 1.0:
                raise OutOfDomainError(f"slh cannot reach epsilon={eps!r}, delta={delta!r} with n={n}: the blanket "
                                       f"allows m = e^eps_l + g - 1 = {m:.4g}, which needs to be >= 4", parameter="n")
            eps_l = math.log(m + 1.0 - g)
        else:
            # m(u) = u^2 + round(u + 1) - 1 with u = e^{eps_l/2}; need 2*blanket_eps((n-1)/m) <= eps
            M = (n - 1) / (blanket_required(eps / 2.0, delta) * _MARGIN)

            def m_of(u: float) -> float:
                return u * u + round(u + 1.0) - 1.0

            if m_of(1.0 + 1e-9) > M:
                raise OutOfDomainError(f"slh variant='v1' cannot reach epsilon={eps!r}, delta={delta!r} with n={n} "
                                       f"(needs e^eps_l + g - 1 <= {M:.4g} with eps_l > 0)", parameter="n")
            lo, hi = 1.0 + 1e-9, math.sqrt(M) + 1.0
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if m_of(mid) <= M:
                    lo = mid
                else:
                    hi = mid
            eps_l, g = 2.0 * math.log(lo), int(round(lo + 1.0))
        self.eps_l, self.g = eps_l, g
        self.oracle = LocalHashing(eps_l, self.d, g)
        self.p_star, self.q_star = self.oracle.p_star, self.oracle.q_star

    @property
    def local_randomizer(self) -> LocalHashing:
        return self.oracle

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.oracle.randomize(self.check_values(values), rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        seed = self._column(messages, "seed", self.oracle.n_seeds)
        y = self._column(messages, "y", self.g)
        return self.oracle.aggregate({"seed": seed, "y": y})

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        est = self._debias(statistic, n)
        return self._estimate(est, self._var_counts(n, est), n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact (chunked client + aggregation of the hash reports; O(n), no closed form known)."""
        return self.oracle.simulate_statistic(self.check_counts(data), rng)

    def variance(self, n: int | None = None, count: float = 0.0) -> float:
        return float(self._var_counts(self._n_of(n), count))

    def _privacy(self, n: int) -> PrivacyStatement:
        try:
            eps = shuffle_amplification(self.eps_l, n, self.delta, method="blanket", bound="closed_form",
                                        randomizer="krr", k=self.g)
        except OutOfDomainError:
            return _local_statement(self.eps_l, f"the blanket bound does not apply at n={n}")
        if self.variant == "v1":
            eps = min(self.eps_l, round_up(2.0 * eps))
        return PrivacyStatement(eps, self.delta, model="shuffle",
                                note=f"slh ({self.variant}): blanket with k=g={self.g}, eps_l={self.eps_l:.6g}")

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.oracle.n_seeds) + bits_for(self.g)


# =========================================================================== MURS

class MURS(_PureOracleMixin, HistogramProtocol):
    """MURS: multiple uniform random shufflers that each inject uniform fake reports.

    Users send one GRR report over [d] or one OLH report ``(seed, y)`` over [g] at eps_l.
    ``shufflers = r`` shufflers each add their share of ``n_fake`` uniformly random fake reports
    (GRR: ``y ~ U[d]``; OLH: a fresh seed and ``y ~ U[g]``, which supports any fixed value with
    probability exactly ``pi_f = 1/g``); the analyzer knows how many fakes were added and
    subtracts their expected contribution::

        c^_j = (C_j - n q* - n_fake pi_f) / (p* - q*)

    ``mode="chain"``: the shufflers process the whole batch one after another (onion routing in
    the paper); the analyzer receives one uniformly shuffled batch of ``n + n_fake`` reports.
    ``mode="parallel"``: each user sends her report to a uniformly random shuffler; each shuffler
    adds its fakes and forwards its own batch (``n_shufflers = r``).

    Privacy (all shufflers honest; spec §3.4 [A]+[D], BBGN19 Thm 3.1 proof with independent
    Bernoulli blanket sources): the expected blanket per value is
    ``c = (n-1)/m + n_fake/g_eff`` (chain) or ``(n-1)/(r m) + min_j fakes_j/g_eff`` (parallel),
    with ``m = e^eps_l + g_eff - 1`` and ``g_eff = d`` (GRR) or g (OLH);
    eps = ``max(sqrt(14 ln(2/delta)/c), 27/c)`` (eps <= 1). eps_l is solved from the target.
    :meth:`privacy_collusion` is the guarantee left when the analyzer colludes with r-1 shufflers
    and n-1 users (only the honest shuffler's fakes remain; author code ``blanket_naive_fn_alone``).

    [R] ``n_fake`` is the **total** number of fakes (default 1% of n, the survey's setting) split
    evenly across shufflers; whether each shuffler adds n_fake or n_fake/r is not confirmed.

    ``oracle="auto"`` (default, as the author code) picks GRR or OLH, whichever has the smaller
    zero-count variance; OLH's g is chosen by minimising that variance. When the fakes alone
    already form the blanket (``n_fake/d >= max(14 ln(2/delta)/eps^2, 27/eps)``, e.g. n = 10^7,
    d = 100 with 1% fakes), users send their true value (``oracle_kind="none"``, no local DP).
    Source: Wang et al., PVLDB 13(13) 2020 (author code vvv214/LDP_Protocols ``murs/``).
    Error: exact ``Var = [c p(1-p) + (n-c) q*(1-q*) + n_fake pi_f(1-pi_f)] / (p-q*)^2``.
    """

    name = "murs"

    def __init__(self, epsilon: float, delta: float, n: int, d: int, n_fake: int | None = None,
                 shufflers: int = 2, mode: str = "chain", oracle: str = "auto") -> None:
        super().__init__(epsilon, delta, n, d)
        if mode not in ("chain", "parallel"):
            raise ValidationError(f"mode must be 'chain' or 'parallel', got {mode!r}", parameter="mode")
        if oracle not in ("auto", "grr", "olh"):
            raise ValidationError(f"oracle must be 'auto', 'grr' or 'olh', got {oracle!r}", parameter="oracle")
        self.mode = mode
        self.shufflers = check_positive_int(shufflers, "shufflers")
        n_fake = math.ceil(0.01 * self.n) if n_fake is None else n_fake
        self.fake_total = check_positive_int(n_fake, "n_fake", minimum=0)
        r = self.shufflers
        self.fakes = np.full(r, self.fake_total // r, dtype=np.int64)
        self.fakes[: self.fake_total % r] += 1
        self.n_shufflers = r if mode == "parallel" else 1
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 1.0:
            raise OutOfDomainError(f"murs uses BBGN19 Thm 3.1 and needs epsilon <= 1, got {eps!r}", parameter="epsilon")
        if n < 2:
            raise ValidationError("murs needs n >= 2 users", parameter="n")
        self._c_req = blanket_required(eps, delta) * _MARGIN

        grr = self._solve(self.d)  # (eps_l, var) or None
        olh = self._best_olh() if oracle in ("auto", "olh") else None
        if oracle in ("auto", "grr") and self._c_req - float(self._fake_blanket(self.d)) <= 0:
            # the fakes alone form the blanket: users may report their true value (no local noise)
            self.oracle_kind, self.g, self.eps_l = "none", self.d, math.inf
            self.oracle = None  # type: ignore[assignment]
            self.p_star, self.q_star = 1.0, 0.0
        elif oracle == "grr" or (oracle == "auto" and grr is not None and (olh is None or grr[1] <= olh[1])):
            if grr is None:
                raise self._impossible("GRR")
            self.oracle_kind, self.g = "grr", self.d
            self.eps_l = grr[0]
            self.oracle: GeneralizedRandomizedResponse | LocalHashing = GeneralizedRandomizedResponse(self.eps_l, self.d)
            self.p_star, self.q_star = self.oracle.p, self.oracle.q
        else:
            if olh is None:
                raise self._impossible("OLH")
            self.oracle_kind, self.g, self.eps_l = "olh", olh[2], olh[0]
            self.oracle = LocalHashing(self.eps_l, self.d, self.g)
            self.p_star, self.q_star = self.oracle.p_star, self.oracle.q_star
        self.fake_support = 1.0 / self.g

    # --- parameter choice ---------------------------------------------------------------
    def _fake_blanket(self, g: np.ndarray | float) -> np.ndarray | float:
        f = self.fake_total if self.mode == "chain" else int(self.fakes.min())
        return f / np.asarray(g, dtype=np.float64)

    def _user_share(self) -> float:
        return 1.0 if self.mode == "chain" else float(self.shufflers)

    def _m_for(self, g: np.ndarray | float) -> np.ndarray:
        """``m = e^eps_l + g - 1`` that makes the blanket exactly c_req (nan where impossible)."""
        need = self._c_req - self._fake_blanket(g)
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.where(need > 0, (self.n - 1) / (self._user_share() * need), np.nan)
        return np.asarray(m, dtype=np.float64)

    def _solve(self, g: int) -> tuple[float, float] | None:
        m = float(self._m_for(g))
        if not np.isfinite(m) or m - g + 1.0 <= 1.0:
            return None
        e = m - g + 1.0
        p, q, f = e / m, 1.0 / m, 1.0 / g
        var = (self.n * q * (1 - q) + self.fake_total * f * (1 - f)) / (p - q) ** 2
        return math.log(e), var

    def _best_olh(self) -> tuple[float, float, int] | None:
        m_max = float(self._m_for(1e18)) if self._c_req > 0 else np.nan
        if not np.isfinite(m_max) or m_max < 4:
            return None
        g = np.arange(2, int(min(m_max, 1 << 22)) + 1, dtype=np.float64)
        m = self._m_for(g)
        e = m - g + 1.0
        ok = np.isfinite(m) & (e > 1.0)
        if not ok.any():
            return None
        g, m, e = g[ok], m[ok], e[ok]
        p, q, f = e / m, 1.0 / g, 1.0 / g  # support probability of a non-holder ~ 1/g
        var = (self.n * q * (1 - q) + self.fake_total * f * (1 - f)) / (p - q) ** 2
        i = int(np.argmin(var))
        return float(math.log(e[i])), float(var[i]), int(g[i])

    def _impossible(self, kind: str) -> OutOfDomainError:
        fb = self._fake_blanket(self.d if kind == "GRR" else 2)
        if fb >= self._c_req:
            why = (f"the fakes alone already give a blanket of {float(fb):.4g} >= {self._c_req:.4g} per value; "
                   "use fewer fakes")
        else:
            why = f"n={self.n} users cannot supply the blanket of {self._c_req:.4g} per value with eps_l > 0"
        return OutOfDomainError(f"murs ({kind}) cannot reach epsilon={self.epsilon!r}, delta={self.delta!r}: {why}",
                                parameter="n")

    # --- client and shufflers -------------------------------------------------------------
    @property
    def local_randomizer(self) -> GeneralizedRandomizedResponse | LocalHashing | None:
        """The users' eps_l-LDP randomizer (``None`` when the fakes alone form the blanket)."""
        return self.oracle

    def _fake_batch(self, k: int, rng: np.random.Generator) -> Messages:
        if self.oracle_kind in ("grr", "none"):
            return {"y": rng.integers(0, self.d, size=k, dtype=np.int64)}
        assert isinstance(self.oracle, LocalHashing)
        return {"seed": rng.integers(0, self.oracle.n_seeds, size=k, dtype=np.int64).astype(np.uint64),
                "y": rng.integers(0, self.g, size=k, dtype=np.int64)}

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        msgs = {"y": x.copy()} if self.oracle is None else dict(self.oracle.randomize(x, rng))
        if self.mode == "parallel":
            msgs["shuffler"] = rng.integers(0, self.shufflers, size=n_messages(msgs), dtype=np.int64)
        return msgs

    def shuffler_messages(self, shuffler: int, rng: np.random.Generator) -> Messages:
        """Shuffler ``shuffler``'s uniform fakes (chain mode: every shuffler's fakes, in one batch)."""
        k = self.fake_total if self.mode == "chain" else int(self.fakes[shuffler])
        return self._fake_batch(k, rng) if k else {}

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, messages: Messages) -> np.ndarray:
        if self.oracle_kind in ("grr", "none"):
            return np.bincount(self._column(messages, "y", self.d), minlength=self.d).astype(np.int64)
        assert isinstance(self.oracle, LocalHashing)
        return self.oracle.aggregate({"seed": self._column(messages, "seed", self.oracle.n_seeds),
                                      "y": self._column(messages, "y", self.g)})

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """Debiased counts; assumes the statistic includes all ``n_fake`` fakes."""
        est = self._debias(statistic, n)
        return self._estimate(est, self._var_counts(n, est), n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: GRR in O(d) (keep w.p. 1-gamma, else uniform; fakes uniform); OLH by chunked
        client simulation plus the fakes' support counts."""
        c = self.check_counts(data)
        if self.oracle_kind in ("grr", "none"):
            kept = rng.binomial(c, self.p_star - self.q_star)
            rest = int(c.sum() - kept.sum()) + self.fake_total
            return kept + rng.multinomial(rest, np.full(self.d, 1.0 / self.d))
        assert isinstance(self.oracle, LocalHashing)
        out = self.oracle.simulate_statistic(c, rng)
        if self.fake_total:
            out = out + self.oracle.aggregate(self._fake_batch(self.fake_total, rng))
        return out

    def variance(self, n: int | None = None, count: float = 0.0) -> float:
        return float(self._var_counts(self._n_of(n), count))

    # --- privacy ------------------------------------------------------------------------
    def blanket(self, n: int | None = None) -> float:
        """Expected blanket reports per value seen by a target user (users' plus fakes)."""
        n = self._n_of(n)
        if self.oracle is None:
            return float(self._fake_blanket(self.g))
        m = math.exp(self.eps_l) + self.g - 1.0
        return (n - 1) / (self._user_share() * m) + float(self._fake_blanket(self.g))

    def _privacy(self, n: int) -> PrivacyStatement:
        eps = blanket_epsilon(self.blanket(n), self.delta)
        if eps > 1.0 or eps >= self.eps_l:
            return _local_statement(self.eps_l, f"the blanket bound exceeds 1 at n={n}")
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"murs ({self.mode}, {self.oracle_kind}, r={self.shufflers}, "
                                     f"n_fake={self.fake_total}): blanket of users and fakes, eps_l={self.eps_l:.6g}")

    def privacy_collusion(self) -> PrivacyStatement:
        """Guarantee against the analyzer colluding with r-1 shufflers and n-1 users: the honest
        shuffler's fakes alone form the blanket (author code ``blanket_naive_fn_alone``); never
        worse than the users' eps_l-LDP."""
        f = int(self.fakes.min())
        eps = blanket_epsilon(f / self.g, self.delta) if f else math.inf
        if eps > 1.0 or eps >= self.eps_l:
            return _local_statement(self.eps_l, "colluding analyzer, r-1 shufflers and n-1 users")
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"murs: {f} fakes of the honest shuffler against collusion")

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def fake_messages(self) -> int:
        return self.fake_total

    @property
    def bits_per_message(self) -> float:
        if self.oracle_kind in ("grr", "none"):
            return bits_for(self.d)
        assert isinstance(self.oracle, LocalHashing)
        return bits_for(self.oracle.n_seeds) + bits_for(self.g)


# =========================================================================== PRHR

_BITS = np.arange(64, dtype=np.uint64)


def _parity(x: np.ndarray) -> np.ndarray:
    """popcount(x) mod 2 for non-negative int64 arrays (0/1 as int64)."""
    x = np.asarray(x, dtype=np.int64)
    if hasattr(np, "bitwise_count"):
        return (np.bitwise_count(x) & 1).astype(np.int64)
    x = x ^ (x >> 32)
    x = x ^ (x >> 16)
    x = x ^ (x >> 8)
    x = x ^ (x >> 4)
    x = x ^ (x >> 2)
    x = x ^ (x >> 1)
    return x & 1

def _gf2_rank_probs(tau: int, dim: int) -> np.ndarray:
    """P(rank = r), r = 0..dim, of ``tau`` i.i.d. uniform vectors in GF(2)^dim (exact Markov chain)."""
    p = np.zeros(dim + 1)
    p[0] = 1.0
    for _ in range(tau):
        stay = p * np.exp2(np.arange(dim + 1) - dim)   # the new vector lies in the current span
        up = p - stay
        p = stay.copy()
        p[1:] += up[:-1]
    return p


def _span_nonzero(basis: np.ndarray) -> np.ndarray:
    """All 2^k - 1 nonzero elements of the span of each row's k basis vectors ((M, k) -> (M, 2^k-1))."""
    k = basis.shape[1]
    combos = np.arange(1, 1 << k)
    out = np.zeros((basis.shape[0], combos.size), dtype=np.int64)
    for b in range(k):  # one step per basis vector (k <= log2(2B))
        sel = ((combos >> b) & 1).astype(bool)
        out[:, sel] ^= basis[:, b:b + 1]
    return out


def _random_subspaces(k: int, L: int, fixed: np.ndarray | None, size: int, rng: np.random.Generator) -> np.ndarray:
    """Bases of ``size`` uniform random k-dim subspaces of GF(2)^L (containing ``fixed[i]`` if given).

    Rejection sampling of independent vectors; uniform by GL(L) (resp. stabiliser) symmetry.
    """
    basis = np.zeros((size, k), dtype=np.int64)
    start = 0
    if fixed is not None:
        basis[:, 0] = fixed
        start = 1
    for col in range(start, k):  # one step per basis vector
        todo = np.arange(size)
        while todo.size:  # rejection: redraw rows whose new vector lies in the current span
            v = rng.integers(1, 1 << L, size=todo.size, dtype=np.int64)
            if col:
                span = _span_nonzero(basis[todo, :col])
                bad = (span == v[:, None]).any(axis=1)
            else:
                bad = np.zeros(todo.size, dtype=bool)
            basis[todo[~bad], col] = v[~bad]
            todo = todo[bad]
    return basis


class PRHR(HistogramProtocol):
    """PRHR: private-coin multi-message Hadamard response P^Had (Ghazi et al., Alg. 1, k = 1).

    ``B`` = d rounded up to a power of two, ``L = log2(2B)``; value x uses Hadamard row ``x+1`` of
    size 2B and ``H_x = {a in [2B] : popcount(a & (x+1)) even}`` (|H_x| = B). Each user sends one
    tuple of tau indices drawn uniformly from ``H_x`` and rho blanket tuples of tau uniform indices
    in [2B] (``1 + rho`` messages of ``tau L`` bits). The analyzer counts, for each value j, the
    tuples lying entirely in ``H_j`` and debiases::

        x^_j = (count_j - (rho + 1) n 2^-tau) / (1 - 2^-tau)

    Parameters (Thm 4.3 with k = 1: tau = log n, rho = 36/eps^2 ln(e/(eps delta)) for eps, delta <= 1;
    spec §3.5 [D] for n not a power of two): ``tau = floor(log2 n)``,
    ``rho = ceil(rho_0 2^tau / n)`` so the blanket mean ``rho n 2^-tau >= rho_0``. ``tau``/``rho`` may be
    given explicitly; the constructor then checks that they reach the target.

    Privacy: (epsilon, delta)-DP central; **no local DP** (a tuple inside H_x is always sent).
    Source: Ghazi, Golowich, Kumar, Pagh, Velingker, "On the Power of Multiple Anonymous Messages",
    EUROCRYPT 2021, §4.1 [P].
    Error: exact ``Var = ((rho+1) n - c_j) 2^-tau (1 - 2^-tau) / (1 - 2^-tau)^2`` (unbiased).
    Aggregation: bitmask per index of the rows whose parity is even, AND over the tuple
    (O(m tau ceil(d/64))). Simulation: an exact joint sampler of the count vector (the kernel of
    a tuple's index matrix is a uniform random subspace given its dimension), O(d + #tuples with a
    non-trivial kernel), independent of n.
    """

    name = "prhr"

    def __init__(self, epsilon: float, delta: float, n: int, d: int, tau: int | None = None,
                 rho: int | None = None) -> None:
        super().__init__(epsilon, delta, n, d)
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 1.0:
            raise OutOfDomainError(f"prhr (Ghazi et al. Thm 4.3) needs epsilon <= 1, got {eps!r}", parameter="epsilon")
        if n < 2:
            raise ValidationError("prhr needs n >= 2 users", parameter="n")
        self.B = 1 << max(0, math.ceil(math.log2(self.d)))
        self.L = int(math.log2(2 * self.B))
        self.rho0 = 36.0 / eps**2 * math.log(math.e / (eps * delta))
        self.tau = int(math.floor(math.log2(n))) if tau is None else check_positive_int(tau, "tau")
        if tau is not None and self.tau > 62:
            raise ValidationError("tau must be <= 62", parameter="tau")
        self.rho = (int(math.ceil(self.rho0 * 2.0**self.tau / n - 1e-12)) if rho is None
                    else check_positive_int(rho, "rho"))
        achieved = self._epsilon_for(self.rho * n * 2.0**-self.tau)
        if achieved > eps * (1 + 1e-9):
            raise OutOfDomainError(f"prhr with tau={self.tau}, rho={self.rho} at n={n} gives only "
                                   f"epsilon={achieved:.4g} > {eps!r}", parameter="rho")
        self.r = 2.0**-self.tau
        rows = np.arange(1, self.d + 1, dtype=np.int64)
        a = np.arange(2 * self.B, dtype=np.int64)
        even = _parity(a[:, None] & rows[None, :]) == 0     # (2B, d): a in H_row
        self._words = -(-self.d // 64)
        pad = np.zeros((2 * self.B, self._words * 64), dtype=np.uint64)
        pad[:, : self.d] = even
        # masks[a, w]: bit b set iff index a lies in H of row 64 w + b + 1
        self._masks = (pad.reshape(2 * self.B, self._words, 64) << _BITS).sum(axis=2, dtype=np.uint64)

    def _epsilon_for(self, blanket_mean: float) -> float:
        """Smallest eps in (0, 1] with 36/eps^2 ln(e/(eps delta)) <= blanket_mean (inf if none)."""
        f = lambda e: 36.0 / e**2 * math.log(math.e / (e * self.delta)) - blanket_mean  # noqa: E731
        if f(1.0) > 0:
            return math.inf
        lo, hi = 1e-12, 1.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if f(mid) > 0:
                lo = mid
            else:
                hi = mid
        return hi

    # --- client -------------------------------------------------------------------------
    def _in_row(self, a: np.ndarray, row: np.ndarray) -> np.ndarray:
        """Map uniform a in [2B] to a uniform element of H_row (flip the lowest set bit of row if odd)."""
        return a ^ (_parity(a & row) * (row & -row))

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        n, tau, two_b = x.shape[0], self.tau, 2 * self.B
        dtype = np.uint16 if two_b <= 1 << 16 else np.int64
        real = self._in_row(rng.integers(0, two_b, size=(n, tau), dtype=np.int64), (x + 1)[:, None])
        blanket = rng.integers(0, two_b, size=(n * self.rho, tau), dtype=np.int64)
        return {"t": np.concatenate([real, blanket]).astype(dtype)}

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, messages: Messages) -> np.ndarray:
        if "t" not in messages:
            raise ValidationError(f"prhr messages need a 't' column, got {sorted(messages)}", parameter="messages")
        t = np.asarray(messages["t"])
        if t.ndim != 2 or t.shape[1] != self.tau or not np.issubdtype(t.dtype, np.integer):
            raise ValidationError(f"prhr messages 't' must be an integer array of shape (m, {self.tau})",
                                  parameter="messages")
        if t.size and (int(t.min()) < 0 or int(t.max()) >= 2 * self.B):
            raise ValidationError(f"prhr indices must lie in [0, {2 * self.B})", parameter="messages")
        out = np.zeros(self.d, dtype=np.int64)
        step = max(1, _CELLS // (self.tau * self._words))
        for lo in range(0, t.shape[0], step):  # chunks of tuples
            acc = np.bitwise_and.reduce(self._masks[t[lo:lo + step].astype(np.int64)], axis=1)  # (m, words)
            hit = np.nonzero(acc.any(axis=1))[0]
            if hit.size:
                bits = ((acc[hit][:, :, None] >> _BITS) & np.uint64(1)).reshape(hit.size, -1)
                out += bits[:, : self.d].sum(axis=0, dtype=np.int64)
        return out

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic, dtype=np.float64)
        est = (stat - (self.rho + 1) * n * self.r) / (1.0 - self.r)
        return self._estimate(est, self._var_counts(n, est), n)

    def _var_counts(self, n: int, c: np.ndarray | float) -> np.ndarray:
        c = np.clip(np.asarray(c, dtype=np.float64), 0.0, n)
        return ((self.rho + 1) * n - c) * self.r * (1 - self.r) / (1 - self.r) ** 2

    def variance(self, n: int | None = None, count: float = 0.0) -> float:
        return float(self._var_counts(self._n_of(n), count))

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact joint sample of the count vector, independent of n.

        A tuple counts for every data row in the kernel K of its tau x L bit matrix. For tau
        uniform indices in [2B] = GF(2)^L, K is a uniform random subspace given its dimension
        L - rank, whose law is the rank chain of :func:`_gf2_rank_probs`. For a user with row x,
        the indices are uniform in the hyperplane x-perp and K is a uniform subspace containing x
        of dimension L - rank (rank chain in dimension L - 1). Tuples with kernel {0} (blanket)
        or {0, x} (real) are accounted for in bulk; the few others get an explicit subspace.
        """
        c = self.check_counts(data)
        n, L, d, tau = int(c.sum()), self.L, self.d, self.tau
        out = np.zeros(d, dtype=np.int64)
        # blanket tuples: kernel dimension L - rank
        pr = _gf2_rank_probs(tau, L)[::-1]           # index = kernel dimension
        kdim = rng.multinomial(self.rho * n, pr)
        # real tuples of a value-x user: kernel dim = 1 + (L - 1 - rank in L-1 dims)
        pu = _gf2_rank_probs(tau, L - 1)[::-1]      # index = kernel dim - 1
        ku = rng.multinomial(c, pu)                 # (d, L)
        out += ku[:, 0]                              # kernel {0, x}: counts for x only
        elems = []
        for k in range(1, L + 1):  # one step per kernel dimension (<= log2(2B)), not per tuple
            if kdim[k]:
                elems.append(_span_nonzero(_random_subspaces(k, L, None, int(kdim[k]), rng)).ravel())
            if k >= 2 and ku[:, k - 1].any():
                fixed = np.repeat(np.arange(1, d + 1, dtype=np.int64), ku[:, k - 1])
                elems.append(_span_nonzero(_random_subspaces(k, L, fixed, fixed.size, rng)).ravel())
        if elems:
            e = np.concatenate(elems)
            e = e[(e >= 1) & (e <= d)]
            out += np.bincount(e - 1, minlength=d)
        return out

    def _privacy(self, n: int) -> PrivacyStatement:
        eps = self._epsilon_for(self.rho * n * self.r)
        if not math.isfinite(eps):
            return PrivacyStatement(math.inf, 0.0, model="shuffle",
                                    note=f"prhr: blanket mean too small at n={n}; no local DP")
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"prhr: Ghazi et al. Thm 4.3 with blanket mean rho n 2^-tau = "
                                     f"{self.rho * n * self.r:.6g} (tau={self.tau}, rho={self.rho})")

    @property
    def messages_per_user(self) -> float:
        return 1.0 + self.rho

    @property
    def bits_per_message(self) -> float:
        return float(self.tau * self.L)


# =========================================================================== PUCM

class PUCM(HistogramProtocol):
    """PUCM: public-coin count-min sketch with a binomial blanket (Ghazi et al., Alg. 2, k = 1).

    Public randomness: tau hash functions ``h_t: [d] -> [s]`` (affine over a prime field, pairwise
    independent up to the final reduction), fixed by ``public_seed``. Each user sends
    ``(t, h_t(x))`` for every t, and every pair ``(t, l)`` in [tau] x [s] independently with
    probability gamma. The analyzer counts pairs ``C[t, l]`` and answers
    ``x^_j = max(min_t C[t, h_t(j)] - gamma n, 0)``.

    Parameters: ``tau = ceil(log2(2d/beta))``, ``s = 2n``, and Lemma 4.10's privacy condition
    ``gamma n >= 90 tau^2 ln(2 tau/delta) / eps^2`` with gamma <= 1 (so n >= that bound).
    ``tau`` and ``s`` may be overridden (small simulations); gamma always comes from the target.

    Privacy: (epsilon, delta)-DP central; no local DP. Source: Ghazi, Golowich, Kumar, Pagh,
    Velingker, EUROCRYPT 2021, §4.2 [P]. Biased (min over rows, clipping at 0).
    Stated error (Lemma 4.8): ``|x^_j - c_j| <= xi sqrt(gamma n)`` w.p. >= 1 - beta with
    ``xi^2 = 3 (log2(2 s tau) - log2(beta - (n/s)^tau))``; :meth:`variance` returns that bound squared
    and :meth:`exact_error` the exact bias and MSE for given counts (the noise is Bin(n, gamma) per cell).
    The statistic is ``C[t, h_t(j)]`` for j in [d] (a (tau, d) array; mergeable).
    """

    name = "pucm"

    def __init__(self, epsilon: float, delta: float, n: int, d: int, beta: float = 0.1,
                 public_seed: int | None = None, tau: int | None = None, s: int | None = None) -> None:
        super().__init__(epsilon, delta, n, d)
        self.beta = check_probability(beta, "beta", open_low=True, open_high=True)
        self.tau = int(math.ceil(math.log2(2 * self.d / self.beta))) if tau is None else check_positive_int(tau, "tau")
        self.s = 2 * self.n if s is None else check_positive_int(s, "s", minimum=2)
        need = 90.0 * self.tau**2 * math.log(2 * self.tau / self.delta) / self.epsilon**2
        self.gamma = need / self.n * _MARGIN  # a hair more blanket: see _MARGIN
        if self.gamma > 1.0:
            raise OutOfDomainError(f"pucm needs n >= 90 tau^2 ln(2 tau/delta)/eps^2 = {math.ceil(need)} users "
                                   f"(tau={self.tau}); got n={self.n}", parameter="n")
        self.gamma = sampled_blanket(self.gamma)  # as sampled: rounded up to the 2^-53 grid
        if public_seed is None:
            public_seed = int(np.random.SeedSequence().entropy % (1 << 63))  # type: ignore[operator]
        self.public_seed = int(public_seed)
        P = _next_prime(max(self.d, self.s))
        g = np.random.default_rng(self.public_seed)
        self.prime = P
        self.hash_a = g.integers(1, P, size=self.tau, dtype=np.int64)
        self.hash_b = g.integers(0, P, size=self.tau, dtype=np.int64)
        self.table = self.hash(np.arange(self.d, dtype=np.int64))  # (tau, d)

    def hash(self, x: np.ndarray) -> np.ndarray:
        """``h_t(x)`` for every t: a (tau, len(x)) array."""
        x = np.asarray(x, dtype=np.int64)
        return ((self.hash_a[:, None] * x[None, :] + self.hash_b[:, None]) % self.prime) % self.s

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        n, tau, s = x.shape[0], self.tau, self.s
        ts = [np.repeat(np.arange(tau, dtype=np.int64)[None, :], n, axis=0).ravel()]
        cells = [self.table[:, x].T.ravel()]
        per = tau * s
        step = max(1, _CELLS // per)
        for lo in range(0, n, step):  # chunks of users' blanket masks
            m = min(step, n - lo)
            idx = np.nonzero(rng.random((m, per)) < self.gamma)[1]
            ts.append(idx // s)
            cells.append(idx % s)
        return {"t": np.concatenate(ts), "cell": np.concatenate(cells)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        t = self._column(messages, "t", self.tau)
        cell = self._column(messages, "cell", self.s)
        counts = np.bincount(t * self.s + cell, minlength=self.tau * self.s)
        return counts[np.arange(self.tau)[:, None] * self.s + self.table]

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic, dtype=np.float64)
        if stat.shape != (self.tau, self.d):
            raise ValidationError(f"pucm statistic must have shape ({self.tau}, {self.d})", parameter="statistic")
        est = np.maximum(stat.min(axis=0) - self.gamma * n, 0.0)
        return self._estimate(est, np.full(self.d, self.variance(n)), n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: each distinct cell holds its hashed true counts plus an independent Bin(n, gamma)."""
        c = self.check_counts(data)
        n = int(c.sum())
        flat = (np.arange(self.tau)[:, None] * self.s + self.table).ravel()
        cells, inv = np.unique(flat, return_inverse=True)
        load = np.bincount(inv, weights=np.tile(c, self.tau), minlength=cells.size).astype(np.int64)
        val = load + rng.binomial(n, self.gamma, size=cells.size)
        return val[inv].reshape(self.tau, self.d)

    def _loads(self, c: np.ndarray) -> np.ndarray:
        flat = (np.arange(self.tau)[:, None] * self.s + self.table).ravel()
        _, inv = np.unique(flat, return_inverse=True)
        load = np.bincount(inv, weights=np.tile(c, self.tau))
        return load[inv].reshape(self.tau, self.d)

    def exact_error(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        """Exact (bias, MSE) of every item's estimate for true counts ``data`` (these hashes).

        ``min_t C[t, h_t(j)] = min_t (D_tj + N_t)`` with independent ``N_t ~ Bin(n, gamma)``, so
        ``P(min >= v) = prod_t P(N_t >= v - D_tj)``; evaluated over a +-12 sd window.
        """
        c = self.check_counts(np.asarray(data))
        n = int(c.sum())
        D = self._loads(c)  # (tau, d)
        sd = math.sqrt(n * self.gamma * (1 - self.gamma))
        lo = max(0, int(n * self.gamma - 12 * sd - 2))
        hi = min(n, int(n * self.gamma + 12 * sd + 2))
        k = np.arange(lo, hi + 2)
        sf = stats.binom.sf(k - 1, n, self.gamma)  # P(N >= k)
        base = D.min(axis=0)
        v = base[None, :] + k[:, None]  # candidate values of the min, per item
        # P(min >= v) = prod_t P(N >= v - D_t)
        shift = v[None, :, :] - D[:, None, :]  # (tau, K, d)
        surv = np.interp(shift, k, sf, left=1.0, right=0.0).prod(axis=0)  # (K, d)
        pmf = surv - np.vstack([surv[1:], np.zeros((1, self.d))])
        est = np.maximum(v - self.gamma * n, 0.0)
        err = est - c[None, :]
        return (pmf * err).sum(axis=0), (pmf * err**2).sum(axis=0)

    def error_bound(self, n: int | None = None, beta: float | None = None) -> float:
        """Lemma 4.8: ``xi sqrt(gamma n)`` with failure probability beta (inf if out of range)."""
        n = self._n_of(n)
        beta = self.beta if beta is None else check_probability(beta, "beta", open_low=True, open_high=True)
        rest = beta - (n / self.s) ** self.tau
        if rest <= 0:
            return math.inf
        xi2 = 3.0 * (math.log2(2 * self.s * self.tau) - math.log2(rest))
        if xi2 > self.gamma * n:
            return math.inf
        return math.sqrt(xi2 * self.gamma * n)

    def variance(self, n: int | None = None, count: float = 0.0) -> float:
        """The stated error bound squared (Lemma 4.8 at failure probability beta)."""
        return self.error_bound(n) ** 2

    def _privacy(self, n: int) -> PrivacyStatement:
        gn = self.gamma * n
        eps = math.sqrt(90.0 * self.tau**2 * math.log(2 * self.tau / self.delta) / gn)
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"pucm: Ghazi et al. Lemma 4.10 with gamma n = {gn:.6g}, tau={self.tau}")

    @property
    def messages_per_user(self) -> float:
        return self.tau + self.tau * self.s * self.gamma

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.tau) + bits_for(self.s)


def _next_prime(m: int) -> int:
    from ..local.hashing import smallest_prime_at_least

    return smallest_prime_at_least(m)


PROTOCOLS: dict[str, type[Protocol]] = {
    "hist_kr": HistKR, "hist_mm": HistMM, "slh": SLH, "murs": MURS, "prhr": PRHR, "pucm": PUCM,
}
