"""Key-value mechanisms with padding-and-sampling: PCKV-UE, PCKV-GRR (Gu et al. USENIX Sec'20)
and HISKV's LRR_KV with OETL (Zhang, Xu, Fu, Meng, Journal of Computer Research and Development).

All three share one per-key structure: after padding-and-sampling to length
``ell`` over the extended domain [0, d + ell) and discretization of the value to x = ±1, the
report about key k is

    <k, x>  w.p. p1,    <k, -x>  w.p. q1,    <k, +1> / <k, -1> w.p. q2 each if k was not sampled.

PCKV-GRR: p1 = a p, q1 = a (1 - p), q2 = b / 2 (a single cell of the 2(d + ell) cells is sent);
PCKV-UE: the same per-coordinate probabilities, one trit per key (coordinates independent);
HISKV: GRR over the 2(d + ell) cells with p1 = e^eps t, q1 = c t, q2 = t.
So one estimator serves all: with n1 = #<k,+1>, n2 = #<k,-1>, n the number of reports,
π̂ = ((n1 + n2)/n - 2 q2)/(p1 + q1 - 2 q2), Δ̂ = (n1 - n2)/(n (p1 - q1)), f̂ = ell π̂, m̂ = Δ̂/π̂.

Exact sampling: every probability compared with ``Generator.random()`` (whose outputs are
``k / 2^53``) is on the 2^-53 grid, so it is drawn exactly; the ideal probabilities are rounded in
the safe direction and one of them is moved further until the exact worst-case ratio of the full
client path (:func:`padding_ratio`) is at most e^eps (:func:`~shuffledp.local.bits.calibrate_probability`).
Estimators, variances and ``probabilities`` use the sampled values; the privacy statement carries
the realised ``effective_epsilon <= epsilon``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_int_values, check_positive_int, check_probability, check_real
from ..base import DEFAULT_CHUNK, Reports
from ..bits import UNIFORM_PRECISION, calibrate_probability, grid_fraction
from ..grr import GeneralizedRandomizedResponse
from .base import KeyValueEstimate, KeyValueMechanism, _check_stat, _exp_neg, user_pairs
from .data import KeyValueData, as_keyvalue_data, discretize, discretize_probability, padding_sample

__all__ = ["PaddingSamplingKeyValue", "PCKVUE", "PCKVGRR", "HISKV", "OETL", "hiskv_cell_probabilities",
           "padding_ratio"]

#: one step of the grid of ``Generator.random()``
_STEP = Fraction(1, 1 << UNIFORM_PRECISION)


def padding_ratio(p1: Fraction, q1: Fraction, q2: Fraction, ell: int) -> Fraction:
    """Exact worst-case likelihood ratio of a padding-and-sampling report about one key (PCKV-GRR, HISKV).

    Given the sampled pair, a report <k, y> has probability p1 (pair <k, y>), q1 (pair <k, -y>) or
    q2 (any other pair). A user samples <k, y> with probability P_s and <k, -y> with P_f, where
    P_s, P_f >= 0 and P_s + P_f <= 1/ell (at most 1/max(l_u, ell) per real key, (1 - l_u/L)/ell per
    dummy), so Pr[<k, y>] = q2 + P_s (p1 - q2) + P_f (q1 - q2) ranges over the triangle with vertices
    q2, q2 + (p1 - q2)/ell, q2 + (q1 - q2)/ell: the ratio is max / min of these (attained on a large
    enough domain, an upper bound on any).
    """
    v = (q2, q2 + (p1 - q2) / ell, q2 + (q1 - q2) / ell)
    return max(v) / min(v)


def _ue_ratio(h: Fraction, p: Fraction) -> Fraction:
    """Exact worst-case ratio of PCKV-UE (a = 1/2, sampled key: x w.p. p/2, -x w.p. (1-p)/2, 0 w.p.
    1/2; other keys: +1, -1 w.p. h each, 0 w.p. 1 - 2h). Pr[y | S] = Φ(y) Σ P(k, x) Ψ(y_k; x) with
    Φ independent of S and Ψ in {p/(2h), (1-p)/(2h), (1/2)/(1 - 2h)}: the ratio is max Ψ / min Ψ."""
    psi = (p / (2 * h), (1 - p) / (2 * h), Fraction(1, 2) / (1 - 2 * h))
    return max(psi) / min(psi)


class PaddingSamplingKeyValue(KeyValueMechanism):
    """Shared client sampling, estimator and variance of PCKV-UE, PCKV-GRR and HISKV."""

    p1: float
    q1: float
    q2: float
    #: lower clip of n̂± in the corrected mean (PCKV code: 1 report; HISKV: 0)
    _count_floor: float = 1.0

    def __init__(self, epsilon: float, d: int, ell: int = 1) -> None:
        super().__init__(epsilon, d)
        self.ell = check_positive_int(ell, "ell")
        self.d_ext = self.d + self.ell

    # --- client ---------------------------------------------------------------------
    def sample_pairs(self, data: KeyValueData, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Padding-and-sampling, then discretization: (key in [0, d + ell), x = ±1)."""
        key, val = padding_sample(data, self.ell, rng)
        return key, discretize(val, rng)

    def _sample_distribution(self, x: Any) -> np.ndarray:
        """Pr[sampled key = k, x = +1], Pr[..., x = -1] for one user's set: shape (d_ext, 2)."""
        ks, vs = user_pairs(x)
        if ks.size and (ks.min() < 0 or ks.max() >= self.d or np.unique(ks).size != ks.size):
            raise ValidationError("user set has a key outside [0, d) or a repeated key", parameter="x")
        L = max(ks.size, self.ell)
        P = np.zeros((self.d_ext, 2))
        pp = discretize_probability(vs)  # the realised Pr[x = +1]
        P[ks, 0] = pp / L
        P[ks, 1] = (1 - pp) / L
        P[self.d:, :] = (1 - ks.size / L) / self.ell / 2
        return P

    # --- analyzer -------------------------------------------------------------------
    def _counts(self, stat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        c = stat[: 2 * self.d_ext].reshape(self.d_ext, 2)
        return c[: self.d, 0], c[: self.d, 1]

    def point_estimates(self, n1: np.ndarray, n2: np.ndarray, n: int | np.ndarray) -> dict[str, np.ndarray]:
        """Vectorised estimators (any leading axes): raw f̂, raw m̂ = Δ̂/π̂, clipped f̂, corrected m̂,
        and the unbiased value sum ell Δ̂ (estimates f_k m_k)."""
        p1, q1, q2, ell = self.p1, self.q1, self.q2, self.ell
        n = np.asarray(n, dtype=np.float64)
        if n.ndim:
            n = n.reshape(n.shape + (1,) * (np.ndim(n1) - n.ndim))
        pi = ((n1 + n2) / n - 2 * q2) / (p1 + q1 - 2 * q2)
        delta = (n1 - n2) / (n * (p1 - q1))
        f = ell * pi
        with np.errstate(divide="ignore", invalid="ignore"):
            m_raw = np.where(pi != 0, delta / pi, 0.0)
        # correction (PCKV Alg. 4 code / HISKV "with correction"): f in [1/n, 1], n̂± in [floor, N]
        fc = np.clip(f, 1.0 / n, 1.0)
        N = n * fc / ell
        det = (p1 - q2) ** 2 - (q1 - q2) ** 2
        r1, r2 = n1 - n * q2, n2 - n * q2
        h1 = ((p1 - q2) * r1 - (q1 - q2) * r2) / det
        h2 = ((p1 - q2) * r2 - (q1 - q2) * r1) / det
        lo = np.minimum(self._count_floor, N)
        h1, h2 = np.clip(h1, lo, N), np.clip(h2, lo, N)
        m_c = np.clip((h1 - h2) / N, -1.0, 1.0)
        return {"f": f, "m": m_raw, "f_clipped": np.clip(f, 0.0, 1.0), "m_clipped": m_c, "sum": ell * delta}

    def _estimate_counts(self, n1: np.ndarray, n2: np.ndarray, n: int) -> KeyValueEstimate:
        pe = self.point_estimates(n1, n2, n)
        priv = self.privacy()
        fcl = pe["f_clipped"]
        mcl = np.clip(np.nan_to_num(pe["m"]), -1, 1)
        freq = Estimate(pe["f"], np.sqrt(self.frequency_variance(n, fcl)), n, priv, "frequency")
        mean = Estimate(pe["m"], np.sqrt(self.mean_variance(n, fcl, mcl)), n, priv, "mean")
        sd_s = np.sqrt(np.maximum(self._sum_variance(n, fcl, mcl), 0.0))
        vsum = Estimate(pe["sum"], sd_s, n, priv, "sum")
        return KeyValueEstimate(freq, mean, fcl, pe["m_clipped"], vsum, {"ell": self.ell})

    def frequency_variance(self, n: int, f: Any = 0.0) -> Any:
        """Exact Var[f̂_k] over sampling and perturbation when every holder has l_u <= ell
        (PCKV Thm 4 of Gu et al. USENIX Security 2020, with its ell f term corrected, docs/keyvalue.md): ell² b'(1-b')/(n (a'-b')²) + ell f (1-a'-b')/(n (a'-b'))
        + (ell - 1) f / n, with a' = p1 + q1, b' = 2 q2."""
        n = self._check_n(n)
        a, b, ell = self.p1 + self.q1, 2 * self.q2, self.ell
        return ell**2 * b * (1 - b) / (n * (a - b) ** 2) + ell * f * (1 - a - b) / (n * (a - b)) \
            + (ell - 1) * f / n

    def simulate_statistic(self, sample_counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact per-key marginal simulation of the real keys' cell counts (n1, n2).

        ``sample_counts`` shape (..., d + 1, 2): per real key, #users who sampled it with x = +1 / -1;
        the last row's first entry is the number of reporting users. Returns (..., 2 (d + ell)) cell
        counts with the dummy-key cells left 0 (the estimator does not use them). For HISKV these
        are the LRR_KV cells only (no length histogram)."""
        return _simulate_cells(self, sample_counts, rng)

    def thm4_frequency_variance(self, n: int, f: float = 0.0) -> float:
        """PCKV's published Theorem 4 variance (omits the sampling term (ell - 1) f / n)."""
        return self.frequency_variance(n, f) - (self.ell - 1) * f / n

    def _sum_variance(self, n: int, f: np.ndarray, m: np.ndarray, m2: np.ndarray | None = None) -> np.ndarray:
        g1 = 1.0 / (n * (self.p1 - self.q1))
        B = (self.p1 - self.q1) / (2 * self.ell)
        m2 = m**2 if m2 is None else m2
        nh = n * f
        VD = n * 2 * self.q2 + nh * (self.p1 + self.q1 - 2 * self.q2) / self.ell - 4 * B**2 * nh * m2
        return (self.ell * g1) ** 2 * VD

    def mean_variance(self, n: int, f: Any, m: Any = 0.0, m2: Any = None) -> Any:
        """Delta-method variance of the raw mean estimator m̂_k = Δ̂/π̂, for holders with
        l_u <= ell, true frequency f, mean m and mean square value m2 (default m², constant values)."""
        n = self._check_n(n)
        f = np.asarray(f, dtype=np.float64)
        m = np.asarray(m, dtype=np.float64)
        p1, q1, q2, ell = self.p1, self.q1, self.q2, self.ell
        m2 = m * m if m2 is None else m2
        A = (p1 + q1 - 2 * q2) / (2 * ell)
        B = (p1 - q1) / (2 * ell)
        nh = n * f
        sh = 2 * q2 + 2 * A
        VD = nh * sh + (n - nh) * 2 * q2 - 4 * B**2 * nh * m2
        VS = nh * sh * (1 - sh) + (n - nh) * 2 * q2 * (1 - 2 * q2)
        VDS = 2 * B * (1 - sh) * nh * m
        g1 = 1 / (n * (p1 - q1))
        g2 = 1 / (n * (p1 + q1 - 2 * q2))
        pi = f / ell
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(f > 0, (g1**2 * VD - 2 * m * g1 * g2 * VDS + m * m * g2**2 * VS) / pi**2, np.inf)
        return float(v) if v.ndim == 0 else v

    def exact_frequency_moments(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        """Exact E[f̂_k] and Var[f̂_k] for a given population (truncation by ell included):
        ρ_u = b' + s_u(k)(a' - b'), s_u(k) = 1/max(l_u, ell)."""
        data = as_keyvalue_data(data, self.d)
        n = data.n
        a, b, ell = self.p1 + self.q1, 2 * self.q2, self.ell
        s = 1.0 / np.maximum(data.lengths, ell)
        s_pair = np.repeat(s, data.lengths)
        mean = ell * np.bincount(data.keys, weights=s_pair, minlength=self.d) / n
        rho = b + s_pair * (a - b)
        extra = np.bincount(data.keys, weights=rho * (1 - rho) - b * (1 - b), minlength=self.d)
        var = ell**2 * (n * b * (1 - b) + extra) / (n**2 * (a - b) ** 2)
        return mean, var


class PCKVGRR(PaddingSamplingKeyValue):
    """PCKV-GRR (Gu, Li, Cheng, Xiong, Cao, USENIX Security 2020).

    Client: padding-and-sampling to ``ell`` over [0, d + ell), discretize v -> x; w.p. a keep the
    key and send x w.p. p (else -x); w.p. 1 - a send a uniform other key of the extended domain
    with a uniform ±1. Optimal budget split (paper, Sec. 5): eps1 = ln[ell(e^eps - 1)/2 + 1],
    eps2 = ln[ell(e^eps - 1) + 1]; a = e^{eps1}/(e^{eps1} + d' - 1), p = e^{eps2}/(e^{eps2} + 1).
    Sampled: p rounded down to the 2^-53 grid (for ell = 1 lowered until p/(1-p) <= e^eps), a
    rounded down and lowered until the exact ratio :func:`padding_ratio` (p1 = a p, q1 = a (1 - p),
    q2 = (1 - a)/(2 (d' - 1))) is <= e^eps; the other key and the ±1 are exact uniform draws.

    Privacy: exactly ``effective_epsilon``-LDP (<= eps) for the whole client path (Thm 3 with the
    optimal split: the ratio is e^eps before rounding); note that for
    ell > 1 the per-pair GRR alone is *not* eps-LDP — the guarantee needs the sampling mixture,
    which :meth:`probabilities` includes. Estimators: unbiased frequency; improved mean
    (Alg. 4, 2x2 solve + clipping). Cost: O(n) encode/aggregate, ceil(log2 d') + 1 bits.
    """

    name = "pckv-grr"
    label = "PCKV-GRR"

    def __init__(self, epsilon: float, d: int, ell: int = 1) -> None:
        super().__init__(epsilon, d, ell)
        ell, dp = self.ell, self.d_ext
        x = ell * math.expm1(self.epsilon)  # ell (e^eps - 1); inf past the double range
        self.eps1 = math.log1p(x / 2)
        self.eps2 = math.log1p(x)
        a_ideal = 1.0 - (2 * dp - 2) / (x + 2 * dp)  # (x + 2)/(x + 2 d'), 1.0 rather than nan at x = inf
        p_ideal = 1.0 - 1.0 / (x + 2)  # (x + 1)/(x + 2)
        if ell == 1:  # the ratio is at least p/(1-p) (= e^eps ideally) whatever a is: meet it first
            p, _ = calibrate_probability(p_ideal, self.epsilon, lambda t: t / (1 - t), "down")
        else:  # as a -> 0 the ratio tends to 1
            p = min(1 - _STEP, max(_STEP, grid_fraction(p_ideal, UNIFORM_PRECISION, "down")))
        # a moves q2 = (1 - a)/(2 (d' - 1)), the smallest probability, by a relative step; the ratio
        # is non-decreasing in a
        a, self.effective_epsilon = calibrate_probability(
            a_ideal, self.epsilon, lambda t: padding_ratio(t * p, t * (1 - p), (1 - t) / (2 * (dp - 1)), ell), "down")
        #: exact sampled probabilities (a, p on the 2^-53 grid)
        self.a_exact, self.p_exact = a, p
        self.p1_exact, self.q1_exact, self.q2_exact = a * p, a * (1 - p), (1 - a) / (2 * (dp - 1))
        self.a, self.p = float(a), float(p)
        self.b = float((1 - a) / (dp - 1))
        self.p1, self.q1, self.q2 = float(self.p1_exact), float(self.q1_exact), float(self.q2_exact)

    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        data = self.check_data(values)
        key, x = self.sample_pairs(data, rng)
        n = data.n
        keep = rng.random(n) < self.a
        vflip = rng.random(n) >= self.p
        r = rng.integers(0, self.d_ext - 1, n)
        other = r + (r >= key)
        k_out = np.where(keep, key, other)
        y = np.where(keep, np.where(vflip, -x, x), np.where(rng.random(n) < 0.5, 1, -1))
        return {"k": k_out.astype(np.int64), "y": y.astype(np.int8)}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"k", "y"}:
            raise ValidationError("reports must have exactly the fields 'k' and 'y'", parameter="reports")
        k = check_int_values(reports["k"], self.d_ext, "k")
        y = np.asarray(reports["y"])
        if y.shape != k.shape or not np.isin(y, (-1, 1)).all():
            raise ValidationError("field 'y' must hold ±1, one per report", parameter="y")
        return {"k": k, "y": y.astype(np.int8)}

    def _cell_matrix_row(self, P: np.ndarray, k: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Pr[report (k, y)] given the sampled-pair distribution P (d_ext, 2)."""
        col = np.where(y > 0, 0, 1)
        same = P[k, col]
        flip = P[k, 1 - col]
        rest = 1.0 - same - flip
        return same * self.p1 + flip * self.q1 + rest * self.q2

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        P = self._sample_distribution(x)
        return self._cell_matrix_row(P, np.asarray(reports["k"]), np.asarray(reports["y"]))

    def aggregate(self, reports: Reports) -> np.ndarray:
        cell = 2 * reports["k"] + (reports["y"] < 0)
        return np.bincount(cell, minlength=2 * self.d_ext).astype(np.int64)

    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        n = self._check_n(n)
        n1, n2 = self._counts(_check_stat(statistic, 2 * self.d_ext, self.name))
        return self._estimate_counts(n1, n2, n)


class PCKVUE(PaddingSamplingKeyValue):
    """PCKV-UE (Gu et al., USENIX Security 2020): padding-and-sampling + unary encoding in trits.

    y[k] = x w.p. a p, -x w.p. a (1 - p), 0 w.p. 1 - a for the sampled key; every other key:
    ±1 w.p. b/2 each, 0 w.p. 1 - b. Optimal split: a = 1/2, b = 2/(e^eps + 3), p = e^eps/(e^eps + 1)
    (eps1 = ln[(e^eps + 1)/2], eps2 = eps). Sampled: b/2 rounded up to the 2^-53 grid, p rounded
    down to the 2^-52 grid (so a p and a (1 - p) are on the 2^-53 grid) and lowered until the exact
    ratio (max/min of p/b, (1-p)/b, (1/2)/(1-b)) is <= e^eps. Privacy: exactly
    ``effective_epsilon``-LDP, <= eps (Thm 2, App. A; checked exactly on the full client path).
    Cost: d + ell trits per report, O(n (d + ell)) encode and aggregate (chunked) — the aggregation
    term dominates.
    """

    name = "pckv-ue"
    label = "PCKV-UE"

    def __init__(self, epsilon: float, d: int, ell: int = 1) -> None:
        super().__init__(epsilon, d, ell)
        en = _exp_neg(self.epsilon)
        h = max(_STEP, grid_fraction(en / (1.0 + 3.0 * en), UNIFORM_PRECISION, "up"))  # b/2 = 1/(e^eps + 3)
        p, self.effective_epsilon = calibrate_probability(1.0 / (1.0 + en), self.epsilon, lambda t: _ue_ratio(h, t),
                                                          "down", precision=UNIFORM_PRECISION - 1)
        #: exact sampled probabilities (b/2 and a p = p/2 on the 2^-53 grid, a = 1/2)
        self.h_exact, self.p_exact = h, p
        self.a, self.b, self.p = 0.5, float(2 * h), float(p)
        self.eps1, self.eps2 = math.log1p(math.expm1(self.epsilon) / 2), self.epsilon
        self.p1, self.q1, self.q2 = float(p / 2), float((1 - p) / 2), float(h)

    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        data = self.check_data(values)
        key, x = self.sample_pairs(data, rng)
        n, dp = data.n, self.d_ext
        out = np.empty((n, dp), dtype=np.int8)
        for s in range(0, n, DEFAULT_CHUNK):  # chunks of users bound memory to chunk x d'
            e = min(n, s + DEFAULT_CHUNK)
            u = rng.random((e - s, dp))
            y = np.where(u < self.b / 2, 1, np.where(u < self.b, -1, 0)).astype(np.int8)
            rows = np.arange(e - s)
            uk = rng.random(e - s)
            xk = x[s:e]
            y[rows, key[s:e]] = np.where(uk < self.p1, xk, np.where(uk < self.a, -xk, 0))
            out[s:e] = y
        return {"y": out}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"y"}:
            raise ValidationError("reports must have exactly the field 'y'", parameter="reports")
        y = np.asarray(reports["y"])
        if y.ndim != 2 or y.shape[1] != self.d_ext or not np.isin(y, (-1, 0, 1)).all():
            raise ValidationError(f"field 'y' must be an (n, {self.d_ext}) array of -1/0/1", parameter="y")
        return {"y": y.astype(np.int8)}

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Pr[y | S] = Φ(y) Σ_{k,x} P(k,x) Ψ(y_k; x), Φ = Π_i P_other(y_i), Ψ = P_self/P_other."""
        P = self._sample_distribution(x)
        y = np.asarray(reports["y"]).astype(np.int64)
        other = np.where(y == 0, 1 - self.b, self.b / 2)
        log_phi = np.log(other).sum(axis=1)
        # P_self(y_k | x=+1): +1 -> a p, -1 -> a (1-p), 0 -> 1-a ; for x=-1 swap ±1
        self_plus = np.where(y == 1, self.p1, np.where(y == -1, self.q1, 1 - self.a))
        self_minus = np.where(y == 1, self.q1, np.where(y == -1, self.p1, 1 - self.a))
        mix = (self_plus / other) @ P[:, 0] + (self_minus / other) @ P[:, 1]
        return np.exp(log_phi) * mix

    def aggregate(self, reports: Reports) -> np.ndarray:
        y = reports["y"]
        out = np.zeros((self.d_ext, 2), dtype=np.int64)
        for s in range(0, y.shape[0], DEFAULT_CHUNK):
            c = y[s:s + DEFAULT_CHUNK]
            out[:, 0] += (c == 1).sum(axis=0)
            out[:, 1] += (c == -1).sum(axis=0)
        return out.reshape(-1)

    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        n = self._check_n(n)
        n1, n2 = self._counts(_check_stat(statistic, 2 * self.d_ext, self.name))
        return self._estimate_counts(n1, n2, n)


def _simulate_cells(mech: PaddingSamplingKeyValue, sample_counts: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray:
    c = np.asarray(sample_counts, dtype=np.int64)
    d = mech.d
    n = c[..., d, 0]
    sp, sm = c[..., :d, 0], c[..., :d, 1]
    rest = n[..., None] - sp - sm
    p1, q1, q2 = mech.p1, mech.q1, mech.q2
    out = rng.multinomial(sp, [p1, q1, 1 - p1 - q1])[..., :2]
    out += rng.multinomial(sm, [q1, p1, 1 - p1 - q1])[..., :2]
    out += rng.multinomial(rest, [q2, q2, 1 - 2 * q2])[..., :2]
    full = np.zeros((*c.shape[:-2], mech.d_ext, 2), dtype=np.int64)
    full[..., :d, :] = out
    return full.reshape(*c.shape[:-2], 2 * mech.d_ext)


def hiskv_cell_probabilities(epsilon: float, d_cells: int, c: float) -> tuple[float, float, float]:
    """HISKV's ideal eps-LDP cell probabilities: t = 1/(e^eps + c + d' - 2),
    p1 = e^eps t (same cell), q1 = c t (same key, flipped value), q2 = t (any other cell).
    (:class:`HISKV` samples them rounded to the 2^-53 grid and calibrated, see there.)"""
    e = math.exp(epsilon)
    t = 1.0 / (e + c + d_cells - 2)
    return e * t, c * t, t


class OETL:
    """OETL (from the HISKV paper): optimal estimation of the truncation length.

    A group of users reports its set length by GRR(eps) over {1, ..., L} (empty sets report 1,
    longer sets L). The collector debiases the length histogram, makes it consistent (the paper's
    unspecified "correction", [R]) and takes the smallest j whose estimated CDF reaches
    ``quantile`` (0.9 in the paper) as the truncation length ell. Privacy: eps-LDP (GRR).

    ``correction="norm-sub"`` (default): subtract one constant from all counts and clip at 0 so the
    total equals the number of reports (Wang et al. 2020, consistency post-processing);
    ``"clip"``: clip negatives to 0 only. "clip" leaves the positive noise of every empty bin in the
    CDF and pushes the percentile far to the right when L is large (measured: ell ≈ 270 instead of
    36 on the TalkingData-like set at eps = 1.6), hence the default.
    """

    def __init__(self, epsilon: float, max_length: int, quantile: float = 0.9, correction: str = "norm-sub") -> None:
        self.max_length = check_positive_int(max_length, "max_length", minimum=2)
        self.quantile = check_probability(quantile, "quantile", open_low=True)
        if correction not in ("norm-sub", "clip"):
            raise ValidationError(f"correction must be 'norm-sub' or 'clip', got {correction!r}",
                                  parameter="correction")
        self.correction = correction
        self.grr = GeneralizedRandomizedResponse(epsilon, self.max_length)

    def encode_lengths(self, lengths: np.ndarray) -> np.ndarray:
        return np.clip(np.asarray(lengths, dtype=np.int64), 1, self.max_length) - 1

    def randomize(self, lengths: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Reported length index in [0, L) (length = index + 1)."""
        return self.grr.randomize(self.encode_lengths(lengths), rng)["y"]

    def probabilities(self, y: np.ndarray, length: int) -> np.ndarray:
        return self.grr.probabilities({"y": y}, int(self.encode_lengths(np.array([length]))[0]))

    def truncation_length(self, histogram: np.ndarray) -> int:
        """ell from the aggregated length histogram (length L, counts of reported lengths)."""
        h = np.asarray(histogram, dtype=np.float64)
        m = h.sum()
        if m <= 0:
            return 1
        raw = (h - m * self.grr.q) / (self.grr.p - self.grr.q)
        c = np.clip(raw, 0.0, None) if self.correction == "clip" else _norm_sub(raw, m)
        if c.sum() <= 0:
            return 1
        cdf = np.cumsum(c) / c.sum()
        return int(np.searchsorted(cdf, self.quantile - 1e-12) + 1)


def _norm_sub(c: np.ndarray, total: float) -> np.ndarray:
    """max(c - delta, 0) with delta chosen so the result sums to ``total`` (vectorised, sort once)."""
    s = np.sort(c)[::-1]
    cums = np.cumsum(s)
    k = np.arange(1, s.size + 1)
    deltas = (cums - total) / k  # delta if the top-k entries stay positive
    ok = s > deltas
    kk = int(np.flatnonzero(ok)[-1]) if ok.any() else 0
    return np.clip(c - deltas[kk], 0.0, None)


class HISKV(PaddingSamplingKeyValue):
    """HISKV (张啸剑, 徐雅鑫, 付楠, 孟小峰, 计算机研究与发展 = Zhang, Xu, Fu, Meng, Journal of Computer
    Research and Development): LRR_KV + OETL.

    A ``beta`` fraction of users (chosen at random, each w.p. beta) reports its set length via
    OETL; the others run LRR_KV: padding-and-sampling to ``ell`` *without* splitting the budget,
    discretize the value, and perturb the cell <k, x> of the 2(d + ell)-cell histogram with the
    eps-LDP family p1 = e^eps t, q1 = c t, q2 = t, t = 1/(e^eps + c + 2(d + ell) - 2), c in [1, e^eps)
    (the paper's literal probabilities cannot be eps-LDP, see docs/keyvalue.md). c = 1 is plain GRR
    over the cells; c > 1 preserves keys more often (better frequencies, worse means).

    Sampled: q1 = c t rounded up to the 2^-53 grid, p1 rounded down and lowered until the exact
    :func:`padding_ratio` is <= e^eps, q2 = (1 - p1 - q1)/(2(d + ell) - 2) (an exact uniform draw of
    the other cell); beta rounded up to the grid (the law of ``random() < beta``).

    Privacy: exactly ``effective_epsilon``-LDP per user, <= eps (each user is in one group; the
    larger of the two randomizers' exact eps; checked exactly for the full client path including
    the group choice and padding-sampling).
    Cost: O(n) encode/aggregate; ceil(log2 2(d + ell)) bits per report. Frequency variance
    dominated by ell² b'(1 - b')/(n' (a' - b')²) with n' = (1 - beta) n.

    ``ell`` may be given (fixed truncation length) or fitted with :meth:`collect` (two-phase run).

    ``amplify=True`` (our extension, proven in docs/keyvalue.md and checked exactly): the cell
    family is used at eps' = ln(ell (e^eps - 1) + 1) >= eps, which the padding-and-sampling
    mixture brings back to eps on the full client path (a user's chance to sample any given pair
    is at most 1/ell). With c = 1 this coincides with PCKV-GRR's optimal allocation.
    """

    name = "hiskv"
    label = "HISKV"
    _count_floor = 0.0

    def __init__(self, epsilon: float, d: int, ell: int = 1, c: float = 1.0, beta: float = 0.1,
                 max_length: int | None = None, quantile: float = 0.9, amplify: bool = False,
                 length_correction: str = "norm-sub") -> None:
        super().__init__(epsilon, d, ell)
        self.amplify = bool(amplify)
        x = (self.ell if self.amplify else 1) * math.expm1(self.epsilon)  # e^{eps'} - 1 (inf past the doubles)
        self.cell_epsilon = math.log1p(x) if self.amplify else self.epsilon
        e = x + 1.0
        self.c = check_real(c, "c", low=1.0, high=e, high_open=True)
        beta = check_real(beta, "beta", low=0.0, high=1.0, high_open=True)
        #: Pr[random() < beta] exactly: beta rounded up to the 2^-53 grid
        self.beta = float(grid_fraction(beta, UNIFORM_PRECISION, "up"))
        self.max_length = self.d if max_length is None else check_positive_int(max_length, "max_length", minimum=2)
        self.quantile = quantile
        self.length_correction = length_correction
        self.oetl = OETL(self.epsilon, self.max_length, quantile, length_correction)
        D = 2 * self.d_ext
        t = 1.0 / (e + self.c + D - 2)
        q1 = max(_STEP, grid_fraction(self.c * t, UNIFORM_PRECISION, "up"))
        p1_ideal = min(1.0 - (self.c + D - 2) * t, float(1 - q1 - _STEP))  # e' t; q2 stays > 0
        ell_ = self.ell
        p1, eff = calibrate_probability(p1_ideal, self.epsilon,
                                        lambda u: padding_ratio(u, q1, (1 - u - q1) / (D - 2), ell_), "down")
        #: exact sampled probabilities (p1, p1 + q1 on the 2^-53 grid)
        self.p1_exact, self.q1_exact, self.q2_exact = p1, q1, (1 - p1 - q1) / (D - 2)
        self.p1, self.q1, self.q2 = float(p1), float(q1), float(self.q2_exact)
        #: LRR_KV's exact eps; the statement is the larger of it and OETL's (when beta > 0)
        self.lrr_epsilon = eff
        self.effective_epsilon = max(eff, self.oetl.grr.effective_epsilon) if self.beta > 0 else eff

    def with_length(self, ell: int) -> "HISKV":
        """The same mechanism with truncation length ``ell``."""
        return HISKV(self.epsilon, self.d, ell, self.c, self.beta, self.max_length, self.quantile, self.amplify,
                     self.length_correction)

    # --- client: full path (group choice, then OETL or LRR_KV) ----------------------------
    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        data = self.check_data(values)
        n = data.n
        oetl = rng.random(n) < self.beta
        length = self.oetl.randomize(data.lengths, rng)
        k, y = self._lrr(data, rng)
        return {"phase": np.where(oetl, 0, 1).astype(np.int8),
                "length": np.where(oetl, length, -1).astype(np.int64),
                "k": np.where(oetl, -1, k).astype(np.int64),
                "y": np.where(oetl, 0, y).astype(np.int8)}

    def _lrr(self, data: KeyValueData, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        key, x = self.sample_pairs(data, rng)
        cell = 2 * key + (x < 0)
        n, D = data.n, 2 * self.d_ext
        u = rng.random(n)
        r = rng.integers(0, D - 2, n)
        base = cell - cell % 2  # the pair of cells of the sampled key
        other = r + 2 * (r >= base)
        out = np.where(u < self.p1, cell, np.where(u < self.p1 + self.q1, cell ^ 1, other))
        return out // 2, np.where(out % 2 == 0, 1, -1)

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"phase", "length", "k", "y"}:
            raise ValidationError("reports must have fields 'phase', 'length', 'k', 'y'", parameter="reports")
        ph = check_int_values(reports["phase"], 2, "phase")
        ln, k, y = (np.asarray(reports[f]) for f in ("length", "k", "y"))
        lrr = ph == 1
        check_int_values(ln[~lrr], self.max_length, "length")
        check_int_values(k[lrr], self.d_ext, "k")
        if not np.isin(y[lrr], (-1, 1)).all():
            raise ValidationError("field 'y' must be ±1 on LRR_KV reports", parameter="y")
        return {"phase": ph.astype(np.int8), "length": ln.astype(np.int64), "k": k.astype(np.int64),
                "y": y.astype(np.int8)}

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        ph = np.asarray(reports["phase"])
        ks, _ = user_pairs(x)
        p_len = self.oetl.probabilities(np.maximum(np.asarray(reports["length"]), 0), ks.size)
        P = self._sample_distribution(x)
        k = np.clip(np.asarray(reports["k"]), 0, self.d_ext - 1)
        y = np.asarray(reports["y"])
        col = np.where(y > 0, 0, 1)
        same, flip = P[k, col], P[k, 1 - col]
        p_lrr = same * self.p1 + flip * self.q1 + (1 - same - flip) * self.q2
        return np.where(ph == 0, self.beta * p_len, (1 - self.beta) * p_lrr)

    # --- analyzer -------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """[2(d + ell) cell counts of LRR_KV reports, L length counts of OETL reports, #LRR reports]."""
        ph = reports["phase"]
        lrr = ph == 1
        cells = np.bincount(2 * reports["k"][lrr] + (reports["y"][lrr] < 0), minlength=2 * self.d_ext)
        lens = np.bincount(reports["length"][~lrr], minlength=self.max_length)
        return np.concatenate([cells, lens, [lrr.sum()]]).astype(np.int64)

    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        """Estimates from the LRR_KV reports (n' = their number, read from the statistic)."""
        self._check_n(n)
        s = _check_stat(statistic, 2 * self.d_ext + self.max_length + 1, self.name)
        n_lrr = int(s[-1])
        if n_lrr < 1:
            raise ValidationError("no LRR_KV report in the statistic", parameter="statistic")
        n1, n2 = self._counts(s)
        est = self._estimate_counts(n1, n2, n_lrr)
        est.extra["n_lrr"] = n_lrr
        est.extra["length_histogram"] = s[2 * self.d_ext: 2 * self.d_ext + self.max_length]
        return est

    def collect(self, data: Any, rng: np.random.Generator) -> tuple[KeyValueEstimate, "HISKV"]:
        """Two-phase protocol: OETL on a random beta fraction fixes ell, LRR_KV on the others.

        Returns the estimate and the mechanism with the fitted ell (``estimate.extra['ell']``)."""
        data = self.check_data(data)
        if self.beta <= 0:
            raise ValidationError("collect needs beta > 0 to estimate ell", parameter="beta")
        oetl = rng.random(data.n) < self.beta
        y = self.oetl.randomize(data.lengths[oetl], rng)
        ell = self.oetl.truncation_length(np.bincount(y, minlength=self.max_length))
        mech = self.with_length(ell)
        rest = np.flatnonzero(~oetl)
        sub = _take_users(data, rest)
        k, yy = mech._lrr(sub, rng)
        cells = np.bincount(2 * k + (yy < 0), minlength=2 * mech.d_ext)
        est = mech._estimate_counts(*mech._counts(cells.astype(np.float64)), max(sub.n, 1))
        est.extra["n_lrr"] = sub.n
        return est, mech

    def frequency_variance(self, n: int, f: Any = 0.0) -> Any:
        """Var[f̂] for ``n`` LRR_KV reports (the paper's n'), all holders with l_u <= ell."""
        return super().frequency_variance(n, f)

    @staticmethod
    def best_c(epsilon: float, d: int, ell: int, n: int, f: float, m: float,
               weight_frequency: float = 1.0, weight_mean: float = 1.0, grid: int = 64) -> float:
        """c in [1, e^eps) minimising w_f Var[f̂] + w_m Var[m̂] at the design point (f, m)."""
        e = math.exp(check_real(epsilon, "epsilon", low=0.0, low_open=True))
        cs = 1 + (e - 1) * np.linspace(0, 0.95, grid)
        cost = [weight_frequency * HISKV(epsilon, d, ell, float(c), 0.0).frequency_variance(n, f)
                + weight_mean * HISKV(epsilon, d, ell, float(c), 0.0).mean_variance(n, f, m)
                for c in cs]  # a small grid of candidate c
        return float(cs[int(np.argmin(cost))])

    def _privacy(self) -> PrivacyStatement:
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"HISKV: OETL (beta={self.beta:g}) or LRR_KV (ell={self.ell}, c={self.c:g}, "
                                     f"amplify={self.amplify}); "
                                     "parallel composition over disjoint users; exact eps of the sampled "
                                     f"probabilities <= requested {self.epsilon:g}")


def _take_users(data: KeyValueData, idx: np.ndarray) -> KeyValueData:
    lens = data.lengths[idx]
    offs = np.concatenate([[0], np.cumsum(lens)])
    pair_idx = np.repeat(data.offsets[idx], lens) + (np.arange(offs[-1]) - np.repeat(offs[:-1], lens))
    obj = object.__new__(KeyValueData)
    for name, val in (("keys", data.keys[pair_idx]), ("vals", data.vals[pair_idx]), ("offsets", offs),
                      ("d", data.d), ("allow_empty", data.allow_empty)):
        object.__setattr__(obj, name, val)
    return obj
