"""Helpers shared by the shuffle-model counting and summation protocols.

Input validation for bits and values in [0, 1], randomized rounding (fixed-point encoding with
precision p), the count-level samplers that make ``simulate_statistic`` exact, the blanket
(k-ary RR) arithmetic, and small exact local randomizers used by the privacy tests.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..core.validation import check_real_values
from ..local.bits import UNIFORM_PRECISION, grid_fraction, log_ratio_up

__all__ = [
    "need_delta",
    "check_true_counts",
    "check_int_statistic",
    "check_bits",
    "check_unit_values",
    "check_statistic",
    "randomized_rounding",
    "rounding_parts",
    "krr_sum_given_levels",
    "krr_report_variance",
    "uniform_sum",
    "scalar_estimate",
    "BinaryRRRandomizer",
    "rr_flip_for_krr",
    "sampled_blanket",
    "krr_local_epsilon",
    "split_and_mix_honest_parties",
]


# ----------------------------------------------------------------------------- inputs

def split_and_mix_honest_parties(gamma: float, n: int, name: str) -> int:
    """``floor(gamma n)``: the honest parties a robust split-and-mix guarantee may rely on, so the
    shares are sized (and their security evaluated) among them, not among all ``n`` users."""
    h = math.floor(gamma * n)
    if h < 3:
        raise ValidationError(f"{name} needs floor(gamma * n) >= 3 honest parties for split-and-mix, got {h}",
                              parameter="gamma")
    return h


def split_and_mix_sigma_at(n_messages: int, n: int, modulus: int, design_sigma: float, design_n: int) -> float:
    """Statistical security (bits) of split-and-mix with ``n_messages`` shares per user among ``n``
    users over Z_modulus (survey Thm 9 / IKOS: sigma = ((m - 1)(log2 n - log2 e) - log2 q) / 2),
    capped at the design value when ``n`` is at least the design ``n``. <= 0 means insecure."""
    sigma = ((n_messages - 1) * (math.log2(n) - math.log2(math.e)) - math.log2(modulus)) / 2.0
    return min(sigma, float(design_sigma)) if n >= design_n else sigma


def need_delta(delta: float, name: str) -> None:
    """Refuse delta = 0 for an (eps, delta) protocol (ValidationError naming ``delta``)."""
    if not delta:
        raise ValidationError(f"{name} is an (eps, delta) protocol: delta must lie in (0, 1), got 0",
                              parameter="delta")


def check_true_counts(data: Any, d: int) -> np.ndarray:
    """The true counts a protocol's exact simulation starts from: ``d`` non-negative integers (int64)."""
    c = np.asarray(data)
    if c.shape != (d,) or c.dtype == np.bool_ or not np.issubdtype(c.dtype, np.integer) or (c.size and c.min() < 0):
        raise ValidationError(f"data must be the true counts: {d} non-negative integers", parameter="data")
    return c.astype(np.int64)


def check_int_statistic(statistic: Any, length: int) -> np.ndarray:
    """A protocol's integer statistic of shape ``(length,)`` (int64)."""
    s = np.asarray(statistic)
    if s.shape != (length,) or s.dtype == np.bool_ or not np.issubdtype(s.dtype, np.integer):
        raise ValidationError(f"statistic must be an integer array of shape ({length},), got {s.shape} {s.dtype}",
                              parameter="statistic")
    return s.astype(np.int64)



def check_bits(values: Any, name: str = "values") -> np.ndarray:
    """Users' bits: a 1-D array of 0/1 (ints or bools). Returns int64.

    Floats (even 0.0/1.0) and strings are refused so a mistyped column never becomes data.
    """
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValidationError(f"{name} must be a 1-D array of bits, got shape {arr.shape}", parameter=name)
    if arr.dtype == np.bool_:
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        if arr.size == 0 and arr.dtype == np.float64:
            return arr.astype(np.int64)
        raise ValidationError(f"{name} must be bits (0/1 integers or bools), got dtype {arr.dtype}", parameter=name)
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        bad = arr.min() if arr.min() < 0 else arr.max()
        raise ValidationError(f"{name} must be bits in {{0, 1}}, found {int(bad)}", parameter=name)
    return arr.astype(np.int64, copy=False)


def check_unit_values(values: Any, name: str = "values") -> np.ndarray:
    """Users' reals in [0, 1] (1-D, finite). Returns float64."""
    return check_real_values(values, 0.0, 1.0, name)


def check_statistic(statistic: Any, length: int, name: str = "statistic") -> np.ndarray:
    """A protocol's aggregate: integer array of the given length."""
    s = np.asarray(statistic)
    if s.shape != (length,) or not (np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)):
        raise ValidationError(f"{name} must be a numeric array of shape ({length},), got shape {s.shape}",
                              parameter=name)
    return s


# ----------------------------------------------------------------------------- simulation

def simulation_parts(owner: Any, data: Any, compute: Callable[[Any], Any]) -> Any:
    """``compute(data)`` (validation included), kept on ``owner`` for the next call on the same summary.

    An exact simulation repeats on one summary; the parts that do not depend on the randomness
    (validation, a rounding's floors and fractions, fixed digits) are then computed once per
    summary instead of once per release, and the random draws, hence every release, are
    unchanged. Only a read-only array that owns its memory (what the sum protocols' ``summarize``
    returns) is remembered, by identity, so its values cannot change behind the memo; any other
    input is recomputed on each call. One summary is kept per owner.
    """
    memo = owner.__dict__.get("_simulation_memo")
    if memo is not None and memo[0]() is data:
        return memo[1]
    parts = compute(data)
    if isinstance(data, np.ndarray) and not data.flags.writeable and data.base is None:
        owner.__dict__["_simulation_memo"] = (weakref.ref(data), parts)
    return parts


def read_only_copy(values: np.ndarray) -> np.ndarray:
    """A read-only float64 copy that owns its memory (a summary :func:`simulation_parts` may keep)."""
    x = np.array(values, dtype=np.float64, copy=True)
    x.flags.writeable = False
    return x


# ----------------------------------------------------------------------------- rounding

def rounding_parts(x: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """``floor(x p)`` (int64, capped at p) and the fractional part ``r = x p - floor`` in [0, 1)."""
    t = np.asarray(x, dtype=np.float64) * p
    lo = np.minimum(np.floor(t), p).astype(np.int64)
    r = np.clip(t - lo, 0.0, 1.0)
    r = np.where(lo == p, 0.0, r)
    return lo, r


def randomized_rounding(x: np.ndarray, p: int, rng: np.random.Generator) -> np.ndarray:
    """Fixed-point encoding with randomized rounding (Balle et al. 2019, Lemma 1.1):

    ``fe_p(x) = floor(x p) + Ber(x p - floor(x p))`` in {0, ..., p}; ``E[fe_p(x)] = x p``,
    ``Var = r (1 - r)`` with ``r = frac(x p)``. Vectorized: one uniform draw per user.
    """
    lo, r = rounding_parts(x, p)
    return lo + (rng.random(lo.shape[0]) < r)


# ----------------------------------------------------------------------------- k-ary RR with a blanket

def rr_flip_for_krr(k: int, eps_l: float) -> float:
    """Blanket probability gamma of k-ary RR at eps_l: ``k / (e^eps_l + k - 1)`` (BBGN19 Lemma 5.1)."""
    return k / (math.exp(eps_l) + k - 1.0)


def sampled_blanket(gamma: float) -> float:
    """The blanket probability that ``rng.random(n) < gamma`` really draws, made explicit.

    numpy's uniforms are ``k / 2^53``, so the comparison is Bernoulli(``ceil(gamma 2^53) / 2^53``).
    Randomizers store that value (``gamma`` rounded **up** to the ``2^-53`` grid: more blanket,
    never less), sample it exactly and compute their eps, estimators and variances from it.
    """
    return float(grid_fraction(float(gamma), UNIFORM_PRECISION, "up"))


def krr_local_epsilon(k: int, gamma: float) -> float:
    """Exact eps of k-ary RR with blanket ``gamma`` (keep w.p. ``1 - gamma``, else uniform on ``k``
    values): ``ln(1 + k (1 - gamma)/gamma)`` in exact arithmetic, rounded up. Binary RR with flip
    probability ``f`` is ``k = 2``, ``gamma = f``."""
    g = Fraction(float(gamma))
    if not 0 < g <= 1:
        raise ValidationError(f"blanket probability must lie in (0, 1], got {gamma!r}", parameter="gamma")
    return log_ratio_up(1 + k * (1 - g) / g)


def uniform_sum(count: int | np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray | int:
    """Exact sum of ``count`` i.i.d. uniform draws on {0, ..., k-1}: a multinomial over the k values
    (cost O(k), independent of ``count``)."""
    c = np.asarray(count, dtype=np.int64)
    if c.ndim == 0:
        return int(rng.multinomial(int(c), np.full(k, 1.0 / k)) @ np.arange(k, dtype=np.int64))
    draws = rng.multinomial(c, np.full(k, 1.0 / k))
    return draws @ np.arange(k, dtype=np.int64)


def krr_sum_given_levels(level_counts: np.ndarray, k: int, gamma: float, rng: np.random.Generator) -> int:
    """Exact law of the sum of the reports of k-ary RR with blanket gamma (each user keeps its value
    w.p. 1 - gamma, else reports a uniform value of {0..k-1}), given how many users hold each value.

    Kept counts per value are independent Binomial(m_v, 1 - gamma); the replaced users' reports are
    a multinomial over the k values. Cost O(k).
    """
    m = np.asarray(level_counts, dtype=np.int64)
    kept = rng.binomial(m, 1.0 - gamma)
    replaced = int(m.sum() - kept.sum())
    return int(kept @ np.arange(m.size, dtype=np.int64)) + int(uniform_sum(replaced, k, rng))


def krr_report_variance(mean_d: np.ndarray, mean_d2: np.ndarray, k: int, gamma: float) -> np.ndarray:
    """Exact Var(y) of one user's k-RR report (blanket gamma over {0..k-1}) when the encoded value d
    is itself random with E[d] = mean_d, E[d^2] = mean_d2 (randomized rounding)."""
    mu_u = (k - 1) / 2.0
    eu2 = (k - 1) * (2 * k - 1) / 6.0
    mean_y = (1.0 - gamma) * mean_d + gamma * mu_u
    return (1.0 - gamma) * mean_d2 + gamma * eu2 - mean_y**2


# ----------------------------------------------------------------------------- estimates

def scalar_estimate(value: float, variance: float, n: int, privacy: PrivacyStatement, kind: str,
                    **extra: Any) -> Estimate:
    """One estimated total with its standard error."""
    return Estimate(values=np.array([value], dtype=np.float64), stderr=np.array([math.sqrt(max(variance, 0.0))]),
                    n=int(n), privacy=privacy, kind=kind, extra=dict(extra))


# ----------------------------------------------------------------------------- exact local randomizers

class BinaryRRRandomizer:
    """Binary randomized response with flip probability ``flip``: with probability ``flip`` the report
    is a fair coin, else the true bit (Cheu et al. 2019, Alg. 1). eps_l = ln((1 - flip/2)/(flip/2)).

    ``flip`` is stored as :func:`sampled_blanket` of the argument (the probability the sampler
    realizes exactly) and ``epsilon`` is the exact eps_l of that value, rounded up.

    Exposes ``epsilon`` and ``probabilities(reports, x)`` for the exact ratio check
    (:func:`shuffledp.local.verify.worst_case_log_ratio`).
    """

    def __init__(self, flip: float) -> None:
        if not (0.0 < flip <= 1.0):
            raise ValidationError(f"flip probability must lie in (0, 1], got {flip!r}", parameter="flip")
        self.flip = sampled_blanket(flip)
        self.epsilon = krr_local_epsilon(2, self.flip)

    def randomize(self, values: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
        x = check_bits(values)
        coin = rng.random(x.shape[0]) < self.flip  # exact: flip is on the 2^-53 grid
        y = np.where(coin, rng.random(x.shape[0]) < 0.5, x.astype(bool))
        return {"y": y.astype(np.int8)}

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        y = np.asarray(reports["y"]).astype(np.int64)
        return np.where(y == int(x), 1.0 - self.flip / 2.0, self.flip / 2.0)


# ----------------------------------------------------------------------------- exact central checks

def shift_hockey_stick(pmf: np.ndarray, eps: float) -> float:
    """Exact delta(eps) between a noise law on consecutive integers and the same law shifted by one.

    ``max_dir sum_y max(0, P(y) - e^eps Q(y))`` with P = pmf, Q = pmf shifted by +1 (and back).
    This is the exact privacy curve of releasing ``c + noise`` for a count c with sensitivity 1,
    e.g. the message count of Balcer–Cheu's P^zsum (noise Bin(n, p)).
    """
    a = np.concatenate([np.asarray(pmf, dtype=np.float64), [0.0]])
    b = np.concatenate([[0.0], np.asarray(pmf, dtype=np.float64)])
    E = math.exp(eps)
    d1 = math.fsum(np.maximum(a - E * b, 0.0).tolist())
    d2 = math.fsum(np.maximum(b - E * a, 0.0).tolist())
    return max(d1, d2)
