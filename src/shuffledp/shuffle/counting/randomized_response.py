"""Shuffle-model counting: each user holds a bit, the analyzer estimates the number of ones.

Protocols (survey §4.1; spec ``shared/spec/shuffle-counting-histogram.md`` §1):

- ``cnt_rr``  Cnt_RR  — Cheu, Smith, Ullman, Zeber, Zhilyaev, EUROCRYPT 2019, Alg. 1 (shuffled binary RR).
- ``cnt_2m``  Cnt_2M  — Balcer & Cheu, ITC 2020, protocol P^zsum (0, 1 or 2 one-bit messages).
- ``cnt_bn``  Cnt_BN  — robust binomial counter, **[R]** reconstruction (P^zsum with n := gamma n).
- ``cnt_sgm`` Cnt_SGM — robust distributed symmetric-geometric counter over a sum-only channel
  (split-and-mix), **[R]** reconstruction; (eps, delta_split, gamma)-DP, *not* pure.

``cnt_pure`` (Ghazi et al., ITC 2020) is **not implemented**: its algorithm (arXiv 2002.01919 §3)
could not be recovered; see ``docs/protocols-counting-sums.md``.

Every estimate is a count (number of users holding 1). ``summarize(bits)`` returns the true
counts ``[n0, n1]``; ``simulate_statistic`` samples the analyzer's statistic exactly from them in
O(1) time, whatever n.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from scipy import optimize, stats

from ..accounting.shuffle import shuffle_statement
from ..central.distributed import SplitAndMix, split_and_mix_delta, split_and_mix_messages, split_and_mix_security_bits
from ..central.distributions import discrete_laplace_variance, simulate_polya
from ..core.errors import OutOfDomainError, ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..core.validation import check_int_values, check_positive_int, check_real
from ._common import (BinaryRRRandomizer, check_bits, check_statistic, sampled_blanket, scalar_estimate,
                      shift_hockey_stick,
                      split_and_mix_honest_parties, split_and_mix_sigma_at)
from .base import Messages, Protocol

__all__ = ["CntRR", "Cnt2M", "CntBN", "CntSGM", "PROTOCOLS", "cheu_corollary47_epsilon", "cheu_lemma48_lambda"]


def _need_delta(delta: float, name: str) -> None:
    if not delta:
        raise ValidationError(f"{name} is an (eps, delta) protocol: delta must lie in (0, 1), got 0",
                              parameter="delta")


def _counts(values: Any) -> np.ndarray:
    x = check_bits(values)
    return np.bincount(x, minlength=2).astype(np.int64)


def _check_counts(data: Any) -> np.ndarray:
    c = np.asarray(data)
    if c.shape != (2,) or not np.issubdtype(c.dtype, np.integer) or c.min() < 0:
        raise ValidationError("counting data must be the true counts [n0, n1] (two non-negative integers)",
                              parameter="data")
    return c.astype(np.int64)


def _ones_messages(values: Any, extra: np.ndarray) -> Messages:
    return {"one": np.ones(int(values.sum() + extra.sum()), dtype=np.int8)}


def _count_ones_messages(messages: Messages) -> np.ndarray:
    if not messages:
        return np.zeros(1, dtype=np.int64)
    if set(messages) - {"shuffler"} != {"one"}:
        raise ValidationError("messages must have the single column 'one'", parameter="messages")
    m = np.asarray(messages["one"])
    if m.size and (m.dtype == np.bool_ or not np.issubdtype(m.dtype, np.integer) or m.min() != 1 or m.max() != 1):
        raise ValidationError("every message of this protocol is the bit 1", parameter="messages")
    return np.array([m.size], dtype=np.int64)


# =============================================================================== Cnt_RR

def cheu_corollary47_epsilon(lam: float, n: int, delta: float) -> float:
    """Cheu et al. 2019 Corollary 4.7: P_lambda is (eps*, delta)-DP for lambda in [14 ln(4/delta), n],
    ``s = lambda - sqrt(2 lambda ln(2/delta))``, ``eps* = sqrt(32 ln(4/delta)/s) (1 - s/n)``.
    ``lam`` is the *expected number* of users who randomize (flip probability lam/n)."""
    if lam < 14.0 * math.log(4.0 / delta) or lam > n:
        raise OutOfDomainError(f"Cheu Cor. 4.7 needs lambda in [14 ln(4/delta), n] = [{14 * math.log(4 / delta):.4g}, {n}],"
                               f" got {lam:.6g}", parameter="lambda")
    s = lam - math.sqrt(2.0 * lam * math.log(2.0 / delta))
    return math.sqrt(32.0 * math.log(4.0 / delta) / s) * (1.0 - s / n)


def cheu_lemma48_lambda(epsilon: float, delta: float, n: int) -> float:
    """Cheu et al. 2019 Lemma 4.8: the expected number lambda of randomizing users that makes
    shuffled binary RR (epsilon, delta)-DP. Preconditions (raised as OutOfDomainError):
    delta in (0, 1), n >= 14 ln(4/delta), sqrt(3456 ln(4/delta)/n) < epsilon < 1."""
    L = math.log(4.0 / delta)
    if n < 14.0 * L:
        raise OutOfDomainError(f"cnt_rr (Cheu Lemma 4.8) needs n >= 14 ln(4/delta) = {14 * L:.4g}, got n={n}",
                               parameter="n")
    lo = math.sqrt(3456.0 * L / n)
    if not (lo < epsilon < 1.0):
        raise OutOfDomainError(f"cnt_rr (Cheu Lemma 4.8) needs sqrt(3456 ln(4/delta)/n) = {lo:.6g} < epsilon < 1, "
                               f"got epsilon={epsilon!r} (n={n}, delta={delta!r}); use a larger n or "
                               "calibration='clones'", parameter="epsilon")
    if epsilon >= math.sqrt(192.0 * L / n):
        return 64.0 * L / epsilon**2
    return n - epsilon * n**1.5 / math.sqrt(432.0 * L)


class CntRR(Protocol):
    """Cnt_RR: shuffled binary randomized response (Cheu et al., EUROCRYPT 2019, Alg. 1).

    Each user sends one bit: with probability ``flip = lambda/n`` a fair coin, else its bit.
    The analyzer outputs ``(sum y - n flip/2) / (1 - flip)`` (unbiased), with the data-independent
    variance ``n (flip/2)(1 - flip/2) / (1 - flip)^2``.

    Privacy: each report is eps_l-LDP with ``eps_l = ln(2/flip - 1)``; the shuffled bits are
    (eps_c, delta)-DP. ``calibration`` picks lambda:

    - ``"lemma4.8"`` (default, as the survey): Cheu Lemma 4.8's closed form (needs eps < 1 and
      eps > sqrt(3456 ln(4/delta)/n));
    - ``"corollary4.7"``: the smallest lambda with Cheu Cor. 4.7's eps*(lambda) <= eps (numeric);
    - ``"clones"``: the largest eps_l whose shuffled binary RR the accounting module certifies at
      (eps, delta) (:func:`shuffledp.accounting.local_epsilon_for`, method ``clones``,
      randomizer ``binary_rr``): far less noise, any eps.

    :meth:`privacy` reports the accounting module's bound for the chosen eps_l
    (``accounting="clones"`` with ``randomizer="binary_rr"`` by default, or ``"cheu2019"``).
    Cost: O(n) encode and aggregate; 1 message of 1 bit per user; O(1) exact simulation.
    """

    name = "cnt_rr"
    model = "shuffle"
    input_kind = "bit"

    def __init__(self, epsilon: float, delta: float, n: int, *,
                 calibration: Literal["lemma4.8", "corollary4.7", "clones"] = "lemma4.8",
                 accounting: Literal["clones", "cheu2019"] = "clones") -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, "cnt_rr")
        if calibration not in ("lemma4.8", "corollary4.7", "clones"):
            raise ValidationError(f"calibration must be 'lemma4.8', 'corollary4.7' or 'clones', got {calibration!r}",
                                  parameter="calibration")
        if accounting not in ("clones", "cheu2019"):
            raise ValidationError(f"accounting must be 'clones' or 'cheu2019', got {accounting!r}",
                                  parameter="accounting")
        self.calibration = calibration
        self.accounting = accounting
        n_, eps, dlt = self.n, self.epsilon, self.delta
        if calibration == "lemma4.8":
            lam = cheu_lemma48_lambda(eps, dlt, n_)
        elif calibration == "corollary4.7":
            lam = self._invert_corollary47(eps, dlt, n_)
        else:
            from ..accounting.shuffle import local_epsilon_for

            # aim a hair below the target: the round trip eps0 -> lambda -> eps_l and the forward
            # bound's outward rounding otherwise state eps = target * (1 + 1e-10) at n = 4000
            e0 = local_epsilon_for(eps * (1.0 - 1e-9), n_, dlt, method="clones", randomizer="binary_rr")
            lam = n_ * 2.0 / (math.exp(e0) + 1.0)
        if not (0.0 < lam < n_):
            raise OutOfDomainError(f"cnt_rr: calibrated lambda = {lam:.6g} is outside (0, n={n_})", parameter="epsilon")
        #: expected number of randomizing users (Cheu's lambda)
        self.lam = float(lam)
        #: flip probability lambda / n
        self.randomizer = BinaryRRRandomizer(self.lam / n_)
        #: flip probability lambda / n as sampled (rounded up to the 2^-53 grid)
        self.flip = self.randomizer.flip
        self.lam = self.flip * n_
        #: local epsilon of one report, ln(2n/lambda - 1)
        self.eps_l = self.randomizer.epsilon

    @staticmethod
    def _invert_corollary47(eps: float, delta: float, n: int) -> float:
        lo = 14.0 * math.log(4.0 / delta)
        if lo >= n:
            raise OutOfDomainError(f"cnt_rr (Cheu Cor. 4.7) needs n > 14 ln(4/delta) = {lo:.4g}", parameter="n")
        f = lambda lam: cheu_corollary47_epsilon(lam, n, delta) - eps  # noqa: E731
        if f(lo) <= 0:
            return lo
        hi = float(n) * (1.0 - 1e-12)
        if f(hi) > 0:
            raise OutOfDomainError(f"cnt_rr (Cheu Cor. 4.7): no lambda <= n reaches epsilon={eps!r} at n={n}",
                                   parameter="epsilon")
        return float(optimize.brentq(f, lo, hi, xtol=1e-10, rtol=1e-14)) * (1.0 + 1e-12)

    # client
    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.randomizer.randomize(values, rng)

    # analyzer
    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        if set(messages) - {"shuffler"} != {"y"}:
            raise ValidationError("cnt_rr messages must have the single column 'y'", parameter="messages")
        y = np.asarray(messages["y"])
        if y.size and (y.dtype == np.bool_ or not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() > 1):
            raise ValidationError("cnt_rr messages must be bits 0/1", parameter="messages")
        return np.array([int(y.sum(dtype=np.int64))], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        c = (float(s[0]) - n * self.flip / 2.0) / (1.0 - self.flip)
        return scalar_estimate(c, self.variance(n), n, self.privacy(n), "count", lam=self.lam, flip=self.flip)

    def variance(self, n: int | None = None) -> float:
        """Exact, data independent: ``n (flip/2)(1 - flip/2) / (1 - flip)^2`` (= (lambda/2)(1 -
        lambda/2n)/(1 - lambda/n)^2 at the calibrated n)."""
        n = self.n if n is None else n
        f = self.flip
        return n * (f / 2.0) * (1.0 - f / 2.0) / (1.0 - f) ** 2

    # simulation
    def summarize(self, values: Any) -> np.ndarray:
        return _counts(values)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n0, n1 = _check_counts(data)
        f = self.flip
        return np.array([rng.binomial(n1, 1.0 - f / 2.0) + rng.binomial(n0, f / 2.0)], dtype=np.int64)

    # privacy and cost
    def _privacy(self, n: int) -> PrivacyStatement:
        opts: dict[str, Any] = {"randomizer": "binary_rr"} if self.accounting == "clones" else {}
        try:
            st = shuffle_statement(self.eps_l, n, self.delta, self.accounting, **opts)  # type: ignore[arg-type]
        except OutOfDomainError:
            return PrivacyStatement(self.eps_l, 0.0, "shuffle",
                                    note=f"cnt_rr: {self.accounting} bound out of domain at n={n}; local eps_l only")
        return PrivacyStatement(st.eps, st.delta, "shuffle",
                                note=f"cnt_rr (Cheu et al. 2019, {self.calibration}): {st.note}")

    def paper_epsilon(self, n: int | None = None) -> float:
        """Cheu Cor. 4.7's eps*(lambda) for this flip probability at ``n`` users (the paper's own bound)."""
        n = self.n if n is None else n
        return cheu_corollary47_epsilon(self.flip * n, n, self.delta)

    @property
    def local_randomizer(self) -> BinaryRRRandomizer:
        return self.randomizer

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def bits_per_message(self) -> float:
        return 1.0


# =============================================================================== Cnt_2M / Cnt_BN

class Cnt2M(Protocol):
    """Cnt_2M: Balcer & Cheu's P^zsum (ITC 2020, §3) — unary counting with binomial noise.

    Each user sends ``x + Ber(p)`` copies of the one-bit message "1" (0, 1 or 2 messages), with
    ``p = 1 - 50 ln(2/delta) / (eps^2 n)``. The analyzer counts the messages |y| and outputs
    ``|y| - n p`` if ``|y| > n``, else 0 (the truncation makes an all-zero input give exactly 0;
    it biases counts below about ``n (1 - p)`` towards 0).

    Privacy: (eps, delta)-DP for eps, delta in (0, 1] and n >= 100 ln(2/delta)/eps^2 (paper's
    theorem; |y| = c + n - Bin(n, 1 - p) and Bin(n, 1 - p) is smooth, Ghazi et al. Lemma 4.12).
    There is **no local DP** (a user holding 1 always sends a message): ``local_randomizer`` is None.
    ``exact_delta(eps)`` computes the exact privacy curve of |y| (hockey-stick, O(n)).
    Variance without truncation: ``n p (1 - p)`` (≈ 50 ln(2/delta)/eps^2).
    Cost: O(n) encode/aggregate; expected ``q + p`` messages of 1 bit per user (q = fraction of
    ones, ``ones_fraction``); O(1) exact simulation (|y| = c + Bin(n, p)).
    Source: spec §1.2 **[P2]** (two transcriptions of the paper agree; PDF not read).
    """

    name = "cnt_2m"
    model = "shuffle"
    input_kind = "bit"
    truncate = True

    def __init__(self, epsilon: float, delta: float, n: int, *, ones_fraction: float = 0.5) -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, self.name)
        self.ones_fraction = check_real(ones_fraction, "ones_fraction", low=0.0, high=1.0)
        self._setup()

    def _noise_users(self) -> float:
        return float(self.n)

    def _setup(self) -> None:
        eps, dlt = self.epsilon, self.delta
        if eps > 1.0:
            raise OutOfDomainError(f"{self.name} (Balcer–Cheu P^zsum) needs epsilon <= 1, got {eps!r}",
                                   parameter="epsilon")
        m = self._noise_users()
        need = 100.0 * math.log(2.0 / dlt) / eps**2
        if m < need:
            what = "gamma * n" if self.robust else "n"
            raise OutOfDomainError(f"{self.name} needs {what} >= 100 ln(2/delta)/epsilon^2 = {need:.6g}, got {m:.6g}",
                                   parameter="n")
        #: 1 - p: probability that a user does *not* add its noise message
        # sampled exactly: rounded up to the 2^-53 grid (never less noise than the theorem asks for)
        self.q_noise = sampled_blanket(50.0 * math.log(2.0 / dlt) / (eps**2 * m))
        #: probability of the extra "1" message
        self.p = 1.0 - self.q_noise

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_bits(values)
        z = rng.random(x.shape[0]) < self.p
        return _ones_messages(x, z)

    def aggregate(self, messages: Messages) -> np.ndarray:
        return _count_ones_messages(messages)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        k = float(s[0])
        c = k - n * self.p
        if self.truncate and k <= n:
            c = 0.0
        return scalar_estimate(c, self.variance(n), n, self.privacy(n), "count", p=self.p,
                               truncated=bool(self.truncate and k <= n))

    def variance(self, n: int | None = None) -> float:
        """``n p (1 - p)``: exact for the untruncated estimator (truncation only moves estimates
        with |y| <= n to 0, which happens w.p. ≈ 0 once c >> n (1 - p))."""
        n = self.n if n is None else n
        return n * self.p * (1.0 - self.p)

    def summarize(self, values: Any) -> np.ndarray:
        return _counts(values)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n0, n1 = _check_counts(data)
        return np.array([n1 + rng.binomial(n0 + n1, self.p)], dtype=np.int64)

    def exact_delta(self, eps: float, n: int | None = None) -> float:
        """Exact delta(eps) of the released message count |y| = c + Bin(n, p) for neighbouring
        counts c, c + 1 (all users honest). O(n)."""
        n = self.n if n is None else n
        pmf = stats.binom.pmf(np.arange(n + 1), n, self.p)
        return shift_hockey_stick(pmf, eps)

    def _privacy(self, n: int) -> PrivacyStatement:
        # the smoothness argument needs the noise Bin(n, 1-p) to have mean >= 50 ln(2/delta)/eps^2
        mean_noise = n * self.q_noise
        eps = math.sqrt(50.0 * math.log(2.0 / self.delta) / mean_noise)
        if eps > 1.0 or self.q_noise > 0.5:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"{self.name}: no guarantee at n={n}")
        return PrivacyStatement(max(eps, 0.0), self.delta, "shuffle",
                                note=f"{self.name}: Balcer–Cheu P^zsum, n(1-p) = {mean_noise:.6g} binomial noise")

    @property
    def messages_per_user(self) -> float:
        """Expected messages per user when a fraction ``ones_fraction`` holds 1: q + p."""
        return self.ones_fraction + self.p

    def expected_messages_per_user(self, q: float) -> float:
        """Expected messages per user when a fraction q of users hold 1."""
        return check_real(q, "q", low=0.0, high=1.0) + self.p

    @property
    def bits_per_message(self) -> float:
        return 1.0


class CntBN(Cnt2M):
    """Cnt_BN **[R]**: robust binomial counter — Balcer & Cheu's P^zsum with n replaced by gamma n.

    Reconstruction (BCJM SODA 2021's own randomizer was not read): ``p = 1 - 50 ln(2/delta) /
    (eps^2 gamma n)``, each user sends ``x + Ber(p)`` messages "1", the analyzer outputs
    ``|y| - n p`` (no truncation: with malicious users the 0 -> 0 guarantee is void).

    Privacy: (eps, delta, gamma)-robustly shuffle private — any gamma' n >= gamma n honest users
    contribute Bin(gamma' n, 1 - p) noise with mean >= 50 ln(2/delta)/eps^2, the smoothness
    condition of P^zsum; malicious users' messages are post-processing. Requires eps <= 1 and
    gamma n >= 100 ln(2/delta)/eps^2. No local DP. Variance (all honest): ``n p (1 - p)``.
    """

    name = "cnt_bn"
    robust = True
    truncate = False

    def __init__(self, epsilon: float, delta: float, n: int, *, gamma: float = 0.5,
                 ones_fraction: float = 0.5) -> None:
        self.gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True)
        super().__init__(epsilon, delta, n, ones_fraction=ones_fraction)

    def _noise_users(self) -> float:
        return self.gamma * self.n

    def _privacy(self, n: int) -> PrivacyStatement:
        honest_needed = self.gamma * self.n
        if n < honest_needed:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"cnt_bn: fewer than gamma*n users at n={n}")
        return PrivacyStatement(self.epsilon, self.delta, "shuffle", gamma=min(1.0, honest_needed / n),
                                note="cnt_bn [R]: robust P^zsum, guarantee holds when >= gamma n users are honest")


# =============================================================================== Cnt_SGM

class CntSGM(Protocol):
    """Cnt_SGM **[R]**: robust distributed symmetric-geometric counter over a sum-only channel.

    Each user draws X, Y i.i.d. Pólya NB(1/(gamma n), alpha = e^{-eps}), forms ``v = x + X - Y``
    and sends ``m`` additive shares of v mod q (split-and-mix, Ishai et al. 2006). The analyzer
    adds all shares mod q and maps the residue to a signed integer: ``c + Z`` with
    ``Z = NB(h/(gamma n)) - NB(h/(gamma n))`` from h honest users.

    Privacy: if h >= gamma n users are honest, Z is symmetric log-concave with
    P(Z = z)/P(Z = z + 1) <= e^eps, so the sum is eps-DP (spec §1.6, [D]); split-and-mix with
    security sigma adds (1 + e^eps) 2^-sigma to delta (survey Thm 9). Result:
    (eps, (1 + e^eps) 2^-sigma, gamma)-robust, **not pure**: sending the noise as unary messages
    would leak (see the spec's warning), the sum-only channel is what the reconstruction needs.
    sigma is chosen so that the extra delta is at most ``delta``.
    Variance (all honest): ``2 (1/gamma) alpha / (1 - alpha)^2``. No local DP.
    Split-and-mix is sized for, and its sigma evaluated among, the floor(gamma n) honest parties.
    Cost: m = O(1 + sigma / log(gamma n)) messages of log2 q bits per user; O(n m) encode/aggregate;
    O(1) exact simulation (sum of all shares = c + NB(1/gamma) - NB(1/gamma) mod q).
    """

    name = "cnt_sgm"
    model = "shuffle"
    input_kind = "bit"
    robust = True

    def __init__(self, epsilon: float, delta: float, n: int, *, gamma: float = 0.5,
                 wrap_probability: float = 1e-12) -> None:
        super().__init__(epsilon, delta, n)
        _need_delta(self.delta, "cnt_sgm (split-and-mix adds a statistical delta)")
        if self.n < 3:
            raise ValidationError("cnt_sgm needs n >= 3 users (split-and-mix)", parameter="n")
        self.gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True)
        beta = check_real(wrap_probability, "wrap_probability", low=0.0, high=0.5, low_open=True)
        if self.gamma * self.n < 1.0:
            raise ValidationError(f"cnt_sgm needs gamma * n >= 1, got {self.gamma * self.n!r}", parameter="gamma")
        self.alpha = math.exp(-self.epsilon)
        #: Pólya shape per user, 1/(gamma n)
        self.shape = 1.0 / (self.gamma * self.n)
        #: total shape when all n users are honest, 1/gamma
        self.total_shape = 1.0 / self.gamma
        self.sigma = split_and_mix_security_bits(self.epsilon, self.delta)
        tau = float(stats.nbinom.isf(beta / 2.0, self.total_shape, 1.0 - self.alpha))
        self.modulus = 1 << max(2, math.ceil(math.log2(2.0 * (self.n + tau + 1.0))))
        if self.modulus > 1 << 62:
            raise ValidationError("cnt_sgm: modulus would exceed 2^62; n is too large", parameter="n")
        #: honest parties the robust guarantee may rely on: split-and-mix is sized (and its
        #: security sigma evaluated) among floor(gamma n) parties, not n
        self.honest_parties = split_and_mix_honest_parties(self.gamma, self.n, "cnt_sgm")
        self.n_messages = split_and_mix_messages(self.honest_parties, math.log2(self.modulus), self.sigma)
        self._sm = SplitAndMix(self.modulus, self.n_messages)

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_bits(values)
        noise = simulate_polya(self.shape, self.alpha, x.shape[0], rng) - simulate_polya(self.shape, self.alpha,
                                                                                           x.shape[0], rng)
        shares = self._sm.simulate_encode(x + noise, rng)
        return {"share": shares.reshape(-1)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        if set(messages) - {"shuffler"} != {"share"}:
            raise ValidationError("cnt_sgm messages must have the single column 'share'", parameter="messages")
        return np.array([self._sm.aggregate(messages["share"])], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        c = float(self._sm.decode_signed(int(s[0]) % self.modulus))
        return scalar_estimate(c, self.variance(n), n, self.privacy(n), "count", modulus=self.modulus,
                               messages=self.n_messages)

    def variance(self, n: int | None = None) -> float:
        """All users honest: the noise is NB(R) - NB(R), R = n / (gamma * self.n): 2 R alpha/(1-alpha)^2."""
        n = self.n if n is None else n
        R = n * self.shape
        return R * discrete_laplace_variance(1.0 / self.epsilon)

    def summarize(self, values: Any) -> np.ndarray:
        return _counts(values)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n0, n1 = _check_counts(data)
        R = (n0 + n1) * self.shape
        z = int(simulate_polya(R, self.alpha, 1, rng)[0]) - int(simulate_polya(R, self.alpha, 1, rng)[0])
        return np.array([(n1 + z) % self.modulus], dtype=np.int64)

    def _privacy(self, n: int) -> PrivacyStatement:
        honest_needed = self.gamma * self.n
        if n < honest_needed or n < 3:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"cnt_sgm: fewer than gamma*n users at n={n}")
        # security of m shares among the floor(gamma self.n) honest parties the robust guarantee
        # assumes (BBGN CCS'20 bound solved for sigma), whatever the batch size n
        sigma = split_and_mix_sigma_at(self.n_messages, self.honest_parties, self.modulus, self.sigma,
                                       self.honest_parties)
        if sigma <= 0:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"cnt_sgm: split-and-mix insecure at n={n}")
        extra = split_and_mix_delta(self.epsilon, sigma)
        if extra >= 1.0:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"cnt_sgm: split-and-mix insecure at n={n}")
        return PrivacyStatement(self.epsilon, extra, "shuffle", gamma=min(1.0, honest_needed / n),
                                note=f"cnt_sgm [R]: distributed geometric (Pólya shares) + split-and-mix "
                                     f"(m={self.n_messages}, q=2^{int(math.log2(self.modulus))}, sigma={sigma:.4g})")

    @property
    def messages_per_user(self) -> float:
        return float(self.n_messages)

    @property
    def bits_per_message(self) -> float:
        return math.log2(self.modulus)


#: registry table (``cnt_pure`` deliberately absent: algorithm not recovered)
PROTOCOLS: dict[str, type[Protocol]] = {"cnt_rr": CntRR, "cnt_2m": Cnt2M, "cnt_bn": CntBN, "cnt_sgm": CntSGM}
