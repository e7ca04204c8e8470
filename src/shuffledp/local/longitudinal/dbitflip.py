"""dBitFlip: Microsoft's histogram collection with bucketization and memoization.

Ding, Kulkarni, Yekhanin, "Collecting Telemetry Data Privately", NeurIPS 2017, Section 2.2/3.

The domain ``[0, d)`` is bucketized into ``k`` buckets (``bucket(v) = floor(v k / d)``; ``k = d``
by default). At setup each user draws ``bits`` distinct buckets ``j_1 < ... < j_bits`` uniformly
without replacement, **once**. A report is ``[(j_p, b_p)]_{p <= bits}`` with
``P[b_p = 1] = p = e^{eps_b} / (e^{eps_b} + 1)`` if ``bucket(v) = j_p`` and ``q = 1 - p`` otherwise.

Privacy of one report: the sampled buckets do not depend on the data, and changing ``v`` changes
the law of at most two reported bits (of at most one when ``bits = 1``), each by the ratio
``p / q = e^{eps_b}``. The paper takes ``eps_b = eps / 2``, which is exact for ``bits >= 2``; for
``bits = 1`` only one bit can change, so ``eps_b = eps`` is used (same guarantee, less noise).

Memoization (the paper's Section 3): the response depends on ``v`` only through the *state*
``s = p`` if ``bucket(v) = j_p``, or ``s = none``; the client draws one response per state the
first time it occurs and re-sends it, with no fresh randomness. Every report about one state is
the same eps-LDP output: a user whose state never changes is eps-LDP over any number of rounds, a
user visiting ``s`` states loses at most ``min(s, bits + 1, k) eps``, and (as the paper says of
memoization) the collector sees *when* the state changed, but not from what or to what.
``epsilon_one = epsilon_perm``: there is no instantaneous layer.

Estimator (the paper's, with the sampled ``p``): ``h_hat(v) = (k / (n bits)) sum_{u: v in J_u}
(b_{u,v} - q) / (p - q)``, unbiased for the fraction of users in bucket ``v``, with variance
``(k / (n bits)) [ (h p(1-p) + (1-h) q(1-q)) / (p-q)^2 + h (1 - bits / k) ]`` (``bits = k`` is
SUE at ``eps``).

Sampled probability: ``p`` is rounded down to the ``2^-53`` grid until the exact ratio
``(p/q)^{min(bits, 2)} <= e^eps``; every formula uses it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, format_up
from ...core.validation import check_int_values, check_positive_int
from ..base import DEFAULT_CHUNK, FrequencyOracle, Reports, check_n
from ..bits import calibrate_probability
from .memo import LongitudinalMixin

__all__ = ["DBitFlip"]


class DBitFlip(LongitudinalMixin, FrequencyOracle):
    """dBitFlip histogram over ``buckets`` buckets with per-state memoization (module docstring).

    Privacy: each report is ``effective_epsilon``-LDP (``<= epsilon``); with memoization any
    number of reports while the state is unchanged are too, and a user visiting ``s`` states loses
    at most ``min(s, bits + 1, buckets) epsilon``; state changes are visible.
    Source: Ding, Kulkarni, Yekhanin, NeurIPS 2017 (dBitFlip, memoization).
    Cost: O(n bits) to draw the setup (O(n buckets) when bits^2 > buckets), encode and aggregate;
    ``bits (ceil(log2 buckets) + 1)`` bits per report.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    d : int
        Domain size, >= 2.
    buckets : int, optional
        Number of buckets ``k`` (2 <= k <= d); default ``d``. Estimates are per bucket.
    bits : int
        Buckets each user reports (1 <= bits <= buckets); default 1 (1BitFlip).
    """

    name = "dbitflip"
    answer_dtype = np.uint8

    def __init__(self, epsilon: float, d: int, buckets: int | None = None, bits: int = 1) -> None:
        super().__init__(epsilon, d)
        k = self.d if buckets is None else check_positive_int(buckets, "buckets", minimum=2)
        if k > self.d:
            raise ValidationError(f"buckets must be in [2, d={self.d}], got {k}", parameter="buckets")
        self.buckets = k
        self.bits = check_positive_int(bits, "bits")
        if self.bits > k:
            raise ValidationError(f"bits must be in [1, buckets={k}], got {bits}", parameter="bits")
        power = min(self.bits, 2)
        eps_b = self.epsilon / power
        e = math.exp(eps_b) if eps_b < 700 else math.inf
        p, self.effective_epsilon = calibrate_probability(e / (e + 1) if e < math.inf else 1.0, self.epsilon,
                                                          lambda t: (t / (1 - t)) ** power, "down")
        self._p = p
        self.p, self.q = float(p), float(1 - p)
        self.epsilon_perm = self.epsilon_one = self.effective_epsilon
        self.key_space = self.bits + 1
        self.setup_width = self.answer_width = self.bits
        self._log_subsets = math.lgamma(k + 1) - math.lgamma(self.bits + 1) - math.lgamma(k - self.bits + 1)

    def _privacy(self) -> PrivacyStatement:
        """``effective_epsilon``-LDP per report and for any number of memoized reports of one state."""
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"DBitFlip(buckets={self.buckets}, bits={self.bits}): eps_perm = eps_1 = "
                                     f"{format_up(self.effective_epsilon, 9)} (memoized per state, no fresh "
                                     f"randomness: state changes are visible); s states: "
                                     f"min(s, {min(self.bits + 1, self.buckets)}) eps")

    def bucket_of(self, values: Any) -> np.ndarray:
        """``floor(v buckets / d)`` of each value."""
        return (np.asarray(values, dtype=np.int64) * self.buckets) // self.d

    # --- client ------------------------------------------------------------------------
    def setup(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``bits`` distinct buckets per user, sorted, uniform without replacement: ``(n, bits)``.

        When ``bits^2 <= buckets`` rows of ``bits`` independent uniform buckets are redrawn until
        they hold no repeat (rejection keeps every ordered distinct tuple equally likely; a row is
        accepted with probability >= 1/2), O(n bits); otherwise the ``bits`` smallest of
        ``buckets`` uniform keys per user, O(n buckets) in chunks.
        """
        k, b = self.buckets, self.bits
        if b * b <= k:
            out = rng.integers(0, k, size=(n, b), dtype=np.int64)
            out.sort(axis=1)
            todo = np.flatnonzero((np.diff(out, axis=1) == 0).any(axis=1)) if b > 1 else np.zeros(0, dtype=np.int64)
            while todo.size:
                cand = np.sort(rng.integers(0, k, size=(todo.size, b), dtype=np.int64), axis=1)
                ok = ~(np.diff(cand, axis=1) == 0).any(axis=1)
                out[todo[ok]] = cand[ok]
                todo = todo[~ok]
            return out
        out = np.empty((n, b), dtype=np.int64)
        step = max(1, DEFAULT_CHUNK * 16 // k)
        for lo in range(0, n, step):  # chunks of users bound the (chunk, buckets) keys
            hi = min(n, lo + step)
            if b < k:
                sel = np.argpartition(rng.random((hi - lo, k)), b - 1, axis=1)[:, :b]
            else:
                sel = np.broadcast_to(np.arange(k), (hi - lo, k))
            out[lo:hi] = np.sort(sel, axis=1)
        return out

    def memo_keys(self, x: np.ndarray, setup: np.ndarray) -> np.ndarray:
        """The state: the position ``p`` with ``j_p = bucket(x)``, or ``bits`` when none."""
        match = np.asarray(setup) == self.bucket_of(x)[:, None]
        return np.where(match.any(axis=1), match.argmax(axis=1), self.bits).astype(np.int64)

    def permanent(self, keys: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One response per state: bit ``p`` ~ Bernoulli(p) if ``p`` is the state, else Bernoulli(q)."""
        keys = np.asarray(keys, dtype=np.int64)
        u = rng.random((keys.shape[0], self.bits))
        hit = np.arange(self.bits)[None, :] == keys[:, None]
        # P[b = 1] = p on the hit position, q = 1 - p elsewhere (u < p, resp. u >= p: both exact on the grid)
        return np.where(hit, u < self.p, u >= self.p).astype(np.uint8)

    def instantaneous(self, answers: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> Reports:
        """No fresh randomness: the report is the (memoized) response with its buckets."""
        return {"j": np.asarray(setup, dtype=np.int64), "b": np.asarray(answers, dtype=np.uint8)}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"j", "b"}:
            raise ValidationError("dBitFlip reports must have exactly the fields 'j' and 'b'", parameter="reports")
        j, b = np.asarray(reports["j"]), np.asarray(reports["b"])
        if j.ndim != 2 or j.shape[1] != self.bits or b.shape != j.shape:
            raise ValidationError(f"j and b must have shape (n, {self.bits})", parameter="reports")
        jj = check_int_values(j.reshape(-1), self.buckets, "j").reshape(j.shape)
        if self.bits > 1 and np.any(np.diff(jj, axis=1) <= 0):
            raise ValidationError("each report's buckets j must be strictly increasing", parameter="j")
        if not np.issubdtype(b.dtype, np.integer) or b.dtype == np.bool_ or np.any((b != 0) & (b != 1)):
            raise ValidationError("b must hold 0/1 integers", parameter="b")
        return {"j": jj, "b": b.astype(np.uint8)}

    # --- analyzer ----------------------------------------------------------------------
    def _statistic_shape(self) -> tuple[int, ...]:
        return (2, self.buckets)

    def aggregate(self, reports: Reports) -> np.ndarray:
        """``(2, buckets)`` int64: per bucket the ones reported for it, then how often it was sampled."""
        j = np.asarray(reports["j"], dtype=np.int64).reshape(-1)
        b = np.asarray(reports["b"]).reshape(-1).astype(np.int64)
        out = np.zeros((2, self.buckets), dtype=np.int64)
        out[0] = np.bincount(j, weights=b, minlength=self.buckets).astype(np.int64)
        out[1] = np.bincount(j, minlength=self.buckets)
        return out

    def _recorded_users(self, statistic: np.ndarray) -> float:
        """Every report samples ``bits`` buckets: the second row sums to ``n bits``."""
        return float(np.sum(np.asarray(statistic)[1])) / self.bits

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        s = self._check_statistic(statistic)
        if s.dtype == np.bool_ or not (np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)):
            raise ValidationError(f"statistic must be numeric counts, got dtype {s.dtype}", parameter="statistic")
        if not np.all(np.isfinite(s)) or s.min() < 0 or np.any(s[0] > s[1]) or s[1].max() > n:
            raise ValidationError(f"statistic must hold counts with 0 <= ones <= sampled <= n={n}",
                                  parameter="statistic")
        return s

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """Fractions of users per bucket (unbiased), standard errors at the clipped estimate."""
        s = np.asarray(statistic, dtype=np.float64)
        scale = self.buckets / (n * self.bits)
        h = scale * (s[0] - self.q * s[1]) / (self.p - self.q)
        var = self._variance(n, np.clip(h, 0.0, 1.0))
        return Estimate(h, np.sqrt(var), int(n), self.privacy(), "frequency",
                        extra={"mechanism": self.name, "buckets": self.buckets, "bits": self.bits})

    def _variance(self, n: int, h: Any) -> Any:
        p, q, k, b = self.p, self.q, self.buckets, self.bits
        return (k / (n * b)) * ((h * p * (1 - p) + (1 - h) * q * (1 - q)) / (p - q) ** 2 + h * (1 - b / k))

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Variance of one bucket's fraction estimate when the bucket holds fraction ``value``."""
        return float(self._variance(check_n(n), float(value)))

    # --- privacy -----------------------------------------------------------------------
    def _log_response(self, j: np.ndarray, b: np.ndarray, x: Any) -> np.ndarray:
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        hit = j == self.bucket_of(np.asarray([xv]))[0]
        one = np.where(hit, math.log(self.p), math.log(self.q))
        zero = np.where(hit, math.log(self.q), math.log(self.p))
        return np.where(b == 1, one, zero).sum(axis=1)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[(j, b) | x] = binom(buckets, bits)^-1 prod_p P(b_p | x)``."""
        j = np.asarray(reports["j"], dtype=np.int64)
        b = np.asarray(reports["b"])
        return np.exp(self._log_response(j, b, x) - self._log_subsets)

    def permanent_probabilities(self, answers: Any, x: Any, setup: Any) -> np.ndarray:
        """``Pr[b | x, j]`` of a memoized response given the user's buckets ``j``."""
        j = np.asarray(setup, dtype=np.int64).reshape(-1, self.bits)
        return np.exp(self._log_response(j, np.asarray(answers).reshape(-1, self.bits), x))

    def __repr__(self) -> str:
        return f"DBitFlip(epsilon={self.epsilon:g}, d={self.d}, buckets={self.buckets}, bits={self.bits})"
