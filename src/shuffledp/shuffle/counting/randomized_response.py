"""``cnt_rr`` (Cnt_RR): shuffled binary randomized response.

Cheu, Smith, Ullman, Zeber, Zhilyaev, "Distributed Differential Privacy via Shuffling",
EUROCRYPT 2019, Alg. 1, with the calibrations of their Lemma 4.8 and Corollary 4.7 and the
accounting module's numeric clone bound (Feldman, McMillan, Talwar, FOCS 2021).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from scipy import optimize

from ...accounting.shuffle import shuffle_statement
from ...core.errors import OutOfDomainError, ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int
from .._common import BinaryRRRandomizer, check_statistic, need_delta, scalar_estimate
from ..base import Messages, Protocol
from ._base import _check_counts, _counts

__all__ = ["cheu_corollary47_epsilon", "cheu_lemma48_lambda", "CntRR", "PROTOCOLS"]


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
                               "calibration='clones' or 'best'", parameter="epsilon")
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

    - ``"best"`` (default): of the three below, those that apply at (eps, delta, n) and whose
      guarantee, as :meth:`privacy` states it, meets the target, the one with the smallest lambda,
      i.e. the smallest variance (the variance increases with the flip probability). Every
      option is a proven bound, so this is the tightest valid calibration: it works wherever one
      of them does. With the default ``accounting="clones"`` it is ``"clones"`` (about 10x less
      variance than Cor. 4.7 and Lemma 4.8 at eps in [0.1, 2], n in [1e3, 1e6]);
    - ``"lemma4.8"`` (the survey's choice): Cheu Lemma 4.8's closed form (needs eps < 1 and
      eps > sqrt(3456 ln(4/delta)/n));
    - ``"corollary4.7"``: the smallest lambda with Cheu Cor. 4.7's eps*(lambda) <= eps (numeric);
    - ``"clones"``: the largest eps_l whose shuffled binary RR the accounting module certifies at
      (eps, delta) (:func:`shuffledp.accounting.local_epsilon_for`, method ``clones``,
      randomizer ``binary_rr``; Feldman, McMillan, Talwar, FOCS 2021): far less noise, any eps.

    ``bound_used`` names the calibration used (``"best"`` resolved).
    :meth:`privacy` reports the accounting module's bound for the chosen eps_l
    (``accounting="clones"`` with ``randomizer="binary_rr"`` by default, or ``"cheu2019"``).
    Cost: O(n) encode and aggregate; 1 message of 1 bit per user; O(1) exact simulation.
    """

    name = "cnt_rr"
    one_message_per_user = True
    model = "shuffle"
    input_kind = "bit"

    CALIBRATIONS = ("lemma4.8", "corollary4.7", "clones")

    def __init__(self, epsilon: float, delta: float, n: int, *,
                 calibration: Literal["best", "lemma4.8", "corollary4.7", "clones"] = "best",
                 accounting: Literal["clones", "cheu2019"] = "clones") -> None:
        super().__init__(epsilon, delta, n)
        need_delta(self.delta, "cnt_rr")
        if calibration not in ("best", *self.CALIBRATIONS):
            raise ValidationError("calibration must be 'best', 'lemma4.8', 'corollary4.7' or 'clones', got "
                                  f"{calibration!r}", parameter="calibration")
        if accounting not in ("clones", "cheu2019"):
            raise ValidationError(f"accounting must be 'clones' or 'cheu2019', got {accounting!r}",
                                  parameter="accounting")
        self.calibration = calibration
        self.accounting = accounting
        if calibration == "best":
            lam, used = self._best_lambda()
        else:
            lam, used = self._lambda(calibration), calibration
        #: the calibration used ("best" resolves to the one giving the smallest lambda)
        self.bound_used = used
        #: expected number of randomizing users (Cheu's lambda)
        self.lam = float(lam)
        #: flip probability lambda / n
        self.randomizer = BinaryRRRandomizer(self.lam / self.n)
        #: flip probability lambda / n as sampled (rounded up to the 2^-53 grid)
        self.flip = self.randomizer.flip
        self.lam = self.flip * self.n
        #: local epsilon of one report, ln(2n/lambda - 1)
        self.eps_l = self.randomizer.epsilon

    def _lambda(self, calibration: str) -> float:
        """Cheu's lambda for ``calibration`` (OutOfDomainError where it does not apply)."""
        n_, eps, dlt = self.n, self.epsilon, self.delta
        if calibration == "lemma4.8":
            lam = cheu_lemma48_lambda(eps, dlt, n_)
        elif calibration == "corollary4.7":
            lam = self._invert_corollary47(eps, dlt, n_)
        else:
            from ...accounting.shuffle import local_epsilon_for

            # aim a hair below the target: the round trip eps0 -> lambda -> eps_l and the forward
            # bound's outward rounding otherwise state eps = target * (1 + 1e-10) at n = 4000
            e0 = local_epsilon_for(eps * (1.0 - 1e-9), n_, dlt, method="clones", randomizer="binary_rr")
            lam = n_ * 2.0 / (math.exp(e0) + 1.0)
        if not (0.0 < lam < n_):
            raise OutOfDomainError(f"cnt_rr: calibrated lambda = {lam:.6g} is outside (0, n={n_})", parameter="epsilon")
        return lam

    def _best_lambda(self) -> tuple[float, str]:
        """The smallest lambda among the calibrations that apply and whose stated guarantee meets
        the target (OutOfDomainError naming every calibration's reason when none does)."""
        best: tuple[float, str] | None = None
        why = []
        for c in self.CALIBRATIONS:
            try:
                lam = self._lambda(c)
            except OutOfDomainError as e:
                why.append(f"{c}: {e}")
                continue
            st = self._statement(BinaryRRRandomizer(lam / self.n).epsilon, self.n)
            if st is None or st.eps > self.epsilon or st.delta > self.delta:
                why.append(f"{c}: the {self.accounting} accounting does not certify its eps_l at the target")
                continue
            if best is None or lam < best[0]:
                best = (lam, c)
        if best is None:
            raise OutOfDomainError(f"cnt_rr: no calibration reaches epsilon={self.epsilon!r}, delta={self.delta!r} "
                                   f"at n={self.n} ({'; '.join(why)})", parameter="epsilon")
        return best

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

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Exact, data independent (``value`` is ignored): ``n (flip/2)(1 - flip/2) / (1 - flip)^2``
        (= (lambda/2)(1 - lambda/2n)/(1 - lambda/n)^2 at the calibrated n)."""
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
    def _statement(self, eps_l: float, n: int) -> PrivacyStatement | None:
        """The accounting module's statement for shuffled binary RR at ``eps_l`` (None out of its domain)."""
        opts: dict[str, Any] = {"randomizer": "binary_rr"} if self.accounting == "clones" else {}
        try:
            return shuffle_statement(eps_l, n, self.delta, self.accounting, **opts)  # type: ignore[arg-type]
        except OutOfDomainError:
            return None

    def _privacy(self, n: int) -> PrivacyStatement:
        st = self._statement(self.eps_l, n)
        if st is None:
            return PrivacyStatement(self.eps_l, 0.0, "shuffle",
                                    note=f"cnt_rr: {self.accounting} bound out of domain at n={n}; local eps_l only")
        return PrivacyStatement(st.eps, st.delta, "shuffle",
                                note=f"cnt_rr (Cheu et al. 2019, {self.bound_used}): {st.note}")

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


PROTOCOLS: dict[str, type[Protocol]] = {"cnt_rr": CntRR}
