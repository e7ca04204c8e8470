"""Key-value mechanisms that sample one key uniformly from the whole domain: PrivKV, PrivKVM,
KVUE, KVOH and LDPKV-approx.

Each user draws j ~ U[0, d) and reports only about key j: her *input state* is
``z = 0`` (she does not hold j), ``1`` (holds j, discretized value +1) or ``2`` (value -1).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_int_values, check_positive_int, check_real
from ..base import Reports
from ..bits import UNIFORM_PRECISION, calibrate_probability
from .base import KeyValueEstimate, KeyValueMechanism, _check_stat, _column_ratio, _exp_neg, _nan_stderr, user_pairs
from .data import KeyValueData, discretize, discretize_probability, uniform_key_sample

__all__ = ["UniformSamplingKeyValue", "PrivKV", "PrivKVM", "KVUE", "KVOH", "LDPKVApprox"]


#: numpy's ``Generator.random()`` returns ``k / 2^53``
_SCALE = float(1 << 53)


def _inverse_mean_count(n: int, d: int) -> float:
    """E[1/N] for N ~ Binomial(n, 1/d) (second-order delta method; N = 0 has negligible mass)."""
    return d / n * (1.0 + (d - 1) / n)


class UniformSamplingKeyValue(KeyValueMechanism):
    """Common machinery of uniform-key-sampling mechanisms with a 3x3 state matrix ``M[z, s]``.

    Reports: ``j`` (sampled key, int64) and ``s`` (reported state: 0 = <0,0>, 1 = <1,+1>,
    2 = <1,-1>, int8). Statistic: ``bincount(3 j + s)`` (length 3 d).
    Frequency estimator: f̂ = (C/N - beta)/(alpha - beta) with C = #reports in states 1, 2 for
    key k, N = #users who sampled k, alpha/beta = Pr[state in {1,2}] for holders/non-holders.
    """

    def _matrix(self) -> np.ndarray:
        raise NotImplementedError

    # --- client -----------------------------------------------------------------------
    def input_states(self, data: KeyValueData, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        j, holds, val = uniform_key_sample(data, rng)
        x = discretize(val, rng)
        z = np.where(holds, np.where(x > 0, 1, 2), 0).astype(np.int8)
        return j, z

    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        data = self.check_data(values)
        j, z = self.input_states(data, rng)
        cum = np.cumsum(self._matrix(), axis=1)
        u = rng.random(data.n)
        s = (u[:, None] >= cum[z][:, :2]).sum(axis=1).astype(np.int8)
        return {"j": j.astype(np.int64), "s": s}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"j", "s"}:
            raise ValidationError("reports must have exactly the fields 'j' and 's'", parameter="reports")
        j = check_int_values(reports["j"], self.d, "j")
        s = check_int_values(reports["s"], 3, "s")
        if j.shape != s.shape:
            raise ValidationError("fields 'j' and 's' must have the same length", parameter="reports")
        return {"j": j, "s": s.astype(np.int8)}

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        ks, vs = user_pairs(x)
        j = np.asarray(reports["j"], dtype=np.int64)
        s = np.asarray(reports["s"], dtype=np.int64)
        M = self._matrix()
        value = np.zeros(self.d)
        held = np.zeros(self.d, bool)
        value[ks], held[ks] = vs, True
        pp = discretize_probability(value[j])
        p_held = pp * M[1, s] + (1.0 - pp) * M[2, s]
        return np.where(held[j], p_held, M[0, s]) / self.d

    # --- analyzer ---------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        return np.bincount(3 * reports["j"] + reports["s"], minlength=3 * self.d).astype(np.int64)

    def simulate_statistic(self, sample_counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact per-key simulation of the statistic from the sampling-stage counts.

        ``sample_counts`` has shape (..., d, 3): per key, [#users who sampled k and do not hold it,
        #holders who sampled k with discretized value +1, ... -1]. Returns shape (..., 3 d).
        """
        c = np.asarray(sample_counts, dtype=np.int64)
        M = self._matrix()
        out = np.zeros(c.shape, dtype=np.int64)
        for z in range(3):  # three input states, not a loop over users or keys
            out += rng.multinomial(c[..., z], M[z])
        return out.reshape(*c.shape[:-2], 3 * self.d)

    def _presence(self) -> tuple[float, float, float, float]:
        """(alpha, beta, var_holder, var_non_holder) of the per-sampler presence indicator."""
        M = self._matrix()
        a = M[1, 1] + M[1, 2]
        b = M[0, 1] + M[0, 2]
        return a, b, a * (1 - a), b * (1 - b)

    def _frequency(self, stat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        c = stat.reshape(*stat.shape[:-1], self.d, 3)
        N = c.sum(axis=-1)
        a, b, _, _ = self._presence()
        Ns = np.maximum(N, 1)
        f = np.where(N > 0, ((c[..., 1] + c[..., 2]) / Ns - b) / (a - b), 0.0)
        return f, N, c[..., 1], c[..., 2]

    def frequency_variance(self, n: int, f: Any = 0.0) -> Any:
        """Var[f̂_k] over key sampling, holder draw and perturbation (our derivation, docs/keyvalue.md):
        E[1/N]·[(f σ_h² + (1-f) σ_0²)/(α-β)² + f(1-f) n/(n-1)] - f(1-f)/(n-1), N ~ Bin(n, 1/d)."""
        n = self._check_n(n)
        a, b, vh, v0 = self._presence()
        inv = _inverse_mean_count(n, self.d)
        return inv * ((f * vh + (1 - f) * v0) / (a - b) ** 2 + f * (1 - f) * n / max(n - 1, 1)) \
            - f * (1 - f) / max(n - 1, 1)

    def _stderr_f(self, f: np.ndarray, n: int) -> np.ndarray:
        return np.sqrt(np.maximum(self.frequency_variance(n, np.clip(f, 0.0, 1.0)), 0.0))

    def _ab_estimates(self, stat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Unbiased per-key (A, B) = (#+1 holders, #-1 holders) among samplers, and N."""
        c = np.asarray(stat, dtype=np.float64).reshape(*np.shape(stat)[:-1], self.d, 3)
        N = c.sum(axis=-1)
        M = self._matrix()
        G = np.array([[M[1, 1] - M[0, 1], M[2, 1] - M[0, 1]], [M[1, 2] - M[0, 2], M[2, 2] - M[0, 2]]])
        Gi = np.linalg.inv(G)
        r1, r2 = c[..., 1] - N * M[0, 1], c[..., 2] - N * M[0, 2]
        return Gi[0, 0] * r1 + Gi[0, 1] * r2, Gi[1, 0] * r1 + Gi[1, 1] * r2, N


class _RatioMeanMixin(UniformSamplingKeyValue):
    """Mean from unbiased (A, B): raw (A - B)/(A + B); corrected: clip A, B to [0, N] first."""

    def point_estimates(self, stat: np.ndarray) -> dict[str, np.ndarray]:
        """Vectorised estimators over any leading axes of ``stat`` (shape (..., 3 d))."""
        A, B, N = self._ab_estimates(stat)
        return _ratio_point(A, B, N)

    def _ratio_estimate(self, stat: np.ndarray, n: int) -> KeyValueEstimate:
        pe = self.point_estimates(stat)
        d = self.d
        priv = self.privacy()
        freq = Estimate(pe["f"], self._stderr_f(pe["f"], n), n, priv, "frequency")
        mean = Estimate(pe["m"], _nan_stderr(d), n, priv, "mean")
        vsum = Estimate(pe["sum"], _nan_stderr(d), n, priv, "sum")
        return KeyValueEstimate(freq, mean, pe["f_clipped"], pe["m_clipped"], vsum, {"N": pe["N"]})


def _ratio_point(A: np.ndarray, B: np.ndarray, N: np.ndarray) -> dict[str, np.ndarray]:
    Ns = np.maximum(N, 1)
    f = np.where(N > 0, (A + B) / Ns, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        m_raw = np.where(np.abs(A + B) > 0, (A - B) / (A + B), 0.0)
        Ac, Bc = np.clip(A, 0, N), np.clip(B, 0, N)
        m_c = np.where(Ac + Bc > 0, (Ac - Bc) / np.maximum(Ac + Bc, 1e-300), 0.0)
    return {"f": f, "m": m_raw, "f_clipped": np.clip(f, 0, 1), "m_clipped": np.clip(m_c, -1, 1),
            "sum": np.where(N > 0, (A - B) / Ns, 0.0), "N": N}


class KVUE(_RatioMeanMixin, UniformSamplingKeyValue):
    """KVUE (Sun et al. 2019, arXiv 1907.05014): uniform key sampling + 3-state GRR.

    The state <presence, value> of the sampled key is reported by generalized randomized response
    over the 3 states: kept w.p. p ~ e^eps/(e^eps + 2), each other state q = (1 - p)/2. The sampled
    p is the ideal one rounded down to the 2^-52 grid (so p, q = (1-p)/2 and the cumulative
    thresholds p + q, 2q compared with ``random()`` are on the 2^-53 grid: sampled exactly) and
    lowered until 2p/(1-p) <= e^eps holds exactly (:func:`~shuffledp.local.bits.calibrate_probability`).

    Privacy: exactly ``effective_epsilon``-LDP, ``effective_epsilon = ln(2p/(1-p)) <= epsilon``
    (3-ary GRR; the sampling is independent of the data).
    Cost: O(n) encode and aggregate; ceil(log2 d) + 2 bits per report. Frequency variance is
    dominated by d·q(1-q)... / (n (p-q)^2): only ~n/d users report on each key.
    """

    name = "kvue"
    label = "KVUE"

    def __init__(self, epsilon: float, d: int) -> None:
        super().__init__(epsilon, d)
        p_ideal = 1.0 / (1.0 + 2.0 * _exp_neg(self.epsilon))
        p, self.effective_epsilon = calibrate_probability(p_ideal, self.epsilon, lambda t: 2 * t / (1 - t), "down",
                                                          precision=UNIFORM_PRECISION - 1)
        #: exact sampled probabilities (p on the 2^-52 grid, q = (1 - p)/2 on the 2^-53 grid)
        self.p_exact, self.q_exact = p, (1 - p) / 2
        self.p, self.q = float(p), float(self.q_exact)

    def _matrix(self) -> np.ndarray:
        M = np.full((3, 3), self.q)
        np.fill_diagonal(M, self.p)
        return M

    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        n = self._check_n(n)
        return self._ratio_estimate(_check_stat(statistic, 3 * self.d, self.name), n)


class LDPKVApprox(KVUE):
    """LDPKV-approx: our stand-in for LDPKV (Zhang, Fu, Meng; no public source found).

    Seed 004 describes LDPKV only as: uniform ("simple random") sampling over the whole key
    domain, the discretized key-value pair mapped to an output domain and perturbed with GRR,
    sparsity ignored. KVUE is the mechanism that matches that description, so this class *is*
    KVUE under another label ("LDPKV-approx (KVUE-equivalent)"); it does not claim fidelity to
    the unpublished original. Privacy eps-LDP; cost as KVUE.
    """

    name = "ldpkv"
    label = "LDPKV-approx"


class KVOH(UniformSamplingKeyValue):
    """KVOH (Sun et al. 2019): uniform key sampling + one-hot over 3 states + per-bit RR at eps/2.

    Bits are [absent, value -1, value +1]; each bit is kept w.p. p ~ e^{eps/2}/(e^{eps/2} + 1)
    (rounded down to the 2^-53 grid, sampled exactly by ``random() >= p`` for a flip, lowered until
    (p/(1-p))^2 <= e^eps holds exactly). Two bits differ between any two inputs, so the report is
    exactly ``effective_epsilon``-LDP, ``effective_epsilon = 2 ln(p/(1-p)) <= epsilon``.
    Decoder (the standard SUE debias of Wang, Blocki, Li, Jha, USENIX Security 2017 — the paper's own decoder was not available):
    Ĉ_s = (c_s - N q)/(p - q); f̂ = (Ĉ+ + Ĉ-)/N; m̂ = (Ĉ+ - Ĉ-)/(Ĉ+ + Ĉ-).
    Cost: O(n) encode and aggregate, ceil(log2 d) + 3 bits per report.
    """

    name = "kvoh"
    label = "KVOH"

    def __init__(self, epsilon: float, d: int) -> None:
        super().__init__(epsilon, d)
        p, self.effective_epsilon = calibrate_probability(1.0 / (1.0 + _exp_neg(self.epsilon / 2)), self.epsilon,
                                                          lambda t: (t / (1 - t)) ** 2, "down")
        self.p_exact = p
        self.p, self.q = float(p), float(1 - p)

    _ONEHOT = np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]], dtype=np.int8)  # z -> [absent, minus, plus]

    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        data = self.check_data(values)
        j, z = self.input_states(data, rng)
        onehot = self._ONEHOT[z]
        flip = rng.random((data.n, 3)) >= self.p
        return {"j": j.astype(np.int64), "bits": (onehot ^ flip).astype(np.int8)}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"j", "bits"}:
            raise ValidationError("reports must have exactly the fields 'j' and 'bits'", parameter="reports")
        j = check_int_values(reports["j"], self.d, "j")
        b = np.asarray(reports["bits"])
        if b.shape != (j.size, 3) or not np.isin(b, (0, 1)).all():
            raise ValidationError("field 'bits' must be an (n, 3) array of 0/1", parameter="bits")
        return {"j": j, "bits": b.astype(np.int8)}

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        ks, vs = user_pairs(x)
        j = np.asarray(reports["j"], dtype=np.int64)
        bits = np.asarray(reports["bits"], dtype=np.int8)

        def p_bits(z: int) -> np.ndarray:
            same = bits == self._ONEHOT[z]
            return np.prod(np.where(same, self.p, self.q), axis=1)

        value = np.zeros(self.d)
        held = np.zeros(self.d, bool)
        value[ks], held[ks] = vs, True
        pp = discretize_probability(value[j])
        return np.where(held[j], pp * p_bits(1) + (1 - pp) * p_bits(2), p_bits(0)) / self.d

    def aggregate(self, reports: Reports) -> np.ndarray:
        """Per key [N, c_absent, c_minus, c_plus] (length 4 d)."""
        j, b = reports["j"], reports["bits"].astype(np.int64)
        out = np.zeros((self.d, 4), dtype=np.int64)
        out[:, 0] = np.bincount(j, minlength=self.d)
        for col in range(3):  # three bit columns
            out[:, col + 1] = np.bincount(j, weights=b[:, col], minlength=self.d).astype(np.int64)
        return out.reshape(-1)

    def simulate_statistic(self, sample_counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        c = np.asarray(sample_counts, dtype=np.int64)
        N = c.sum(axis=-1)
        p, q = self.p, self.q
        out = np.zeros((*c.shape[:-1], 4), dtype=np.int64)
        out[..., 0] = N
        out[..., 1] = rng.binomial(c[..., 0], p) + rng.binomial(N - c[..., 0], q)
        out[..., 2] = rng.binomial(c[..., 2], p) + rng.binomial(N - c[..., 2], q)
        out[..., 3] = rng.binomial(c[..., 1], p) + rng.binomial(N - c[..., 1], q)
        return out.reshape(*c.shape[:-2], 4 * self.d)

    def _presence(self) -> tuple[float, float, float, float]:
        p, q = self.p, self.q
        return p + q, 2 * q, 2 * p * q, 2 * p * q  # sum of the two value bits

    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        n = self._check_n(n)
        pe = self.point_estimates(_check_stat(statistic, 4 * self.d, self.name))
        priv = self.privacy()
        freq = Estimate(pe["f"], self._stderr_f(pe["f"], n), n, priv, "frequency")
        mean = Estimate(pe["m"], _nan_stderr(self.d), n, priv, "mean")
        vsum = Estimate(pe["sum"], _nan_stderr(self.d), n, priv, "sum")
        return KeyValueEstimate(freq, mean, pe["f_clipped"], pe["m_clipped"], vsum, {"N": pe["N"]})

    def point_estimates(self, stat: np.ndarray) -> dict[str, np.ndarray]:
        """Vectorised estimators over any leading axes of ``stat`` (shape (..., 4 d))."""
        s = np.asarray(stat, dtype=np.float64).reshape(*np.shape(stat)[:-1], self.d, 4)
        N = s[..., 0]
        Cm = (s[..., 2] - N * self.q) / (self.p - self.q)
        Cp = (s[..., 3] - N * self.q) / (self.p - self.q)
        return _ratio_point(Cp, Cm, N)


class PrivKV(UniformSamplingKeyValue):
    """PrivKV (Ye, Hu, Meng, Zheng, IEEE S&P 2019): the Local Perturbation Protocol.

    A user samples j ~ U[0, d). Holder: discretize v, flip it w.p. 1 - p2 (value perturbation),
    report <1, v+> w.p. p1 else <0, 0>. Non-holder: a fake value v ~ U[-1, 1] is discretized
    and perturbed, reported w.p. 1 - p1, else <0, 0>. p_i ~ e^{eps_i}/(e^{eps_i} + 1), each rounded
    down to the 2^-53 grid and drawn with its own ``random() < p_i`` (exact; the fake value's sign
    is ``random() < 1/2``).

    Privacy: exactly ``effective_epsilon``-LDP, the ln of the exact worst-case ratio of the sampled
    (p1, p2), max(p1/(1-p1), p2/(1-p2), 2 p1 p2/(1-p1)) ~ max(e^{eps2}, e^{eps1}·2e^{eps2}/(e^{eps2} + 1)),
    which is below e^eps = e^{eps1 + eps2} (sequential composition); p2 is lowered further if that
    exact ratio would exceed e^eps. Default split eps1 = eps2 = eps/2.
    Estimators (the paper's): f̂ = (N'/N + p1 - 1)/(2 p1 - 1) (unbiased);
    m̂ = (n1* - n2*)/N' with n_i* = clip(((p2 - 1) N' + n_i)/(2 p2 - 1), 0, N') — *biased* towards
    0 because non-holders' fake values are mixed in (Ye, Hu, Meng, Zheng, "PrivKV: key-value data collection with local differential privacy",
    IEEE S&P 2019); this is why PrivKVM iterates.
    Cost: O(n) encode and aggregate, ceil(log2 d) + 2 bits.
    """

    name = "privkv"
    label = "PrivKV"

    def __init__(self, epsilon: float, d: int, key_fraction: float = 0.5) -> None:
        super().__init__(epsilon, d)
        self.key_fraction = check_real(key_fraction, "key_fraction", low=0.0, high=1.0, low_open=True,
                                       high_open=True)
        self.eps1 = self.epsilon * self.key_fraction
        self.eps2 = self.epsilon - self.eps1
        p1, _ = calibrate_probability(1.0 / (1.0 + _exp_neg(self.eps1)), self.eps1, lambda t: t / (1 - t), "down")
        p2, self.effective_epsilon = calibrate_probability(1.0 / (1.0 + _exp_neg(self.eps2)), self.epsilon,
                                                           lambda t: _privkv_ratio(p1, t), "down")
        #: exact sampled probabilities (on the 2^-53 grid)
        self.p1_exact, self.p2_exact = p1, p2
        self.p1, self.p2 = float(p1), float(p2)

    def fake_threshold(self, fake_mean: Any) -> np.ndarray:
        """Pr[a non-holder's fake value is reported +1] for the public fake mean(s): ideally
        (1 + m)/2 p2 + (1 - m)/2 (1 - p2) (discretize m, keep w.p. p2), as sampled: rounded up to the
        2^-53 grid (the law of ``random() <`` it) and kept within [1 - p2, p2], the range the
        privacy bound allows. PrivKV's fake values are uniform on [-1, 1]: m = 0 gives exactly 1/2."""
        m = np.asarray(fake_mean, dtype=np.float64)
        p2 = self.p2
        fp = (1 + m) / 2 * p2 + (1 - m) / 2 * (1 - p2)
        return np.clip(np.ceil(fp * _SCALE) / _SCALE, 1 - p2, p2)

    def _matrix(self, fake_mean: float = 0.0, p1: float | None = None) -> np.ndarray:
        p1 = self.p1 if p1 is None else p1
        p2 = self.p2
        fp = float(self.fake_threshold(fake_mean))  # fake reported as +1
        return np.array([[p1, (1 - p1) * fp, (1 - p1) * (1 - fp)],
                         [1 - p1, p1 * p2, p1 * (1 - p2)],
                         [1 - p1, p1 * (1 - p2), p1 * p2]])

    def _perturb(self, data: KeyValueData, p1: float, fake: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One round of the Local Perturbation Protocol: the key step ``random() < p1`` and the
        value step ``random() < p2`` (or the fake value's ``random() < fake_threshold``), each a
        threshold on the 2^-53 grid, so every probability is sampled exactly."""
        j, z = self.input_states(data, rng)
        fp = self.fake_threshold(fake[j])
        u1, u2 = rng.random(data.n), rng.random(data.n)
        s_hold = np.where(u1 < p1, np.where(u2 < self.p2, z, 3 - z), 0)
        s_non = np.where(u1 < p1, 0, np.where(u2 < fp, 1, 2))
        return j, np.where(z > 0, s_hold, s_non).astype(np.int8)

    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        data = self.check_data(values)
        j, s = self._perturb(data, self.p1, np.zeros(self.d), rng)
        return {"j": j.astype(np.int64), "s": s}

    def _mean_from_counts(self, n1: np.ndarray, n2: np.ndarray, p2: float,
                          previous: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        Np = n1 + n2
        Nps = np.maximum(Np, 1)
        raw = np.where(Np > 0, (n1 - n2) / ((2 * p2 - 1) * Nps), 0.0)
        a = np.clip(((p2 - 1) * Np + n1) / (2 * p2 - 1), 0, Np)
        b = np.clip(((p2 - 1) * Np + n2) / (2 * p2 - 1), 0, Np)
        prev = np.zeros(np.shape(n1)) if previous is None else previous
        corr = np.where(Np > 0, np.clip((a - b) / Nps, -1, 1), prev)
        return raw, corr

    def point_estimates(self, stat: np.ndarray, previous: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Vectorised estimators over any leading axes of ``stat`` (shape (..., 3 d))."""
        f, N, n1, n2 = self._frequency(np.asarray(stat, dtype=np.float64))
        raw, corr = self._mean_from_counts(n1, n2, self.p2, previous)
        return {"f": f, "m": raw, "f_clipped": np.clip(f, 0, 1), "m_clipped": corr, "N": N}

    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        n = self._check_n(n)
        stat = _check_stat(statistic, 3 * self.d, self.name)
        f, N, n1, n2 = self._frequency(stat)
        raw, corr = self._mean_from_counts(n1, n2, self.p2)
        priv = self.privacy()
        freq = Estimate(f, self._stderr_f(f, n), n, priv, "frequency")
        mean = Estimate(raw, _nan_stderr(self.d), n, priv, "mean", {"biased": True})
        return KeyValueEstimate(freq, mean, np.clip(f, 0, 1), corr, None, {"N": N})

    def _privacy(self) -> PrivacyStatement:
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"PrivKV: eps1={self.eps1:g} (key) + eps2={self.eps2:g} (value); exact eps "
                                     f"of the sampled p1={self.p1!r}, p2={self.p2!r} <= requested {self.epsilon:g}")


class PrivKVM(PrivKV):
    """PrivKVM (Ye et al. S&P'19): PrivKV iterated over ``rounds`` rounds with the same users.

    Non-holders' fake values in round r are drawn from the previous round's mean estimate, so
    E[m^(r)] = f m + (1 - f) m^(r-1) -> m (with p1 = 1/2 in rounds >= 2).
    Budget schedules: ``"pckv-code"`` (default; as in the PCKV authors' PrivKVM.m):
    round 1 key eps/2, every round value eps/(2c), rounds 2..c key budget 0 (p1 = 1/2);
    ``"even"``: every round eps1 = eps2 = eps/(2c). Total eps by sequential composition; exactly:
    each round's worst ratio over the public fake means (p1/(1-p1))·(p2/(1-p2)) for the sampled
    grid probabilities, multiplied over rounds, with p2 lowered until the product is <= e^eps
    (``effective_epsilon`` is its ln).
    Frequencies come from round 1. Communication c (ceil(log2 d) + 2) bits; cost O(c n).

    ``randomize`` uses the public per-round fake means ``fake_means`` (shape (c, d), default
    zeros) — exactly what the client sees; :meth:`collect` runs the adaptive protocol.
    """

    name = "privkvm"
    label = "PrivKVM"

    def __init__(self, epsilon: float, d: int, rounds: int = 3, schedule: str = "pckv-code") -> None:
        super().__init__(epsilon, d, 0.5)
        self.rounds = check_positive_int(rounds, "rounds")
        if schedule not in ("pckv-code", "even"):
            raise ValidationError(f"schedule must be 'pckv-code' or 'even', got {schedule!r}", parameter="schedule")
        self.schedule = schedule
        c = self.rounds
        e2 = self.epsilon / (2 * c)
        if schedule == "pckv-code":
            e1 = [self.epsilon / 2] + [0.0] * (c - 1)
        else:
            e1 = [e2] * c
        cache: dict[float, Fraction] = {0.0: Fraction(1, 2)}  # key budget 0: p1 = 1/2 exactly
        for x in e1:
            if x not in cache:
                cache[x] = calibrate_probability(1.0 / (1.0 + _exp_neg(x)), x, lambda t: t / (1 - t), "down")[0]
        p1s = [cache[x] for x in e1]
        p2, self.effective_epsilon = calibrate_probability(1.0 / (1.0 + _exp_neg(e2)), self.epsilon,
                                                           lambda t: _privkvm_ratio(p1s, t), "down")
        #: exact sampled probabilities (on the 2^-53 grid)
        self.round_p1_exact, self.p2_exact, self.p1_exact = p1s, p2, p1s[0]
        self.p2 = float(p2)
        self.round_p1 = np.array([float(x) for x in p1s])
        self.p1 = float(self.round_p1[0])
        self.fake_means = np.zeros((c, self.d))

    def _round_matrix(self, r: int, fake_mean: float) -> np.ndarray:
        return self._matrix(fake_mean, float(self.round_p1[r]))

    def _randomize_round(self, data: KeyValueData, r: int, fake: np.ndarray,
                         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        # fake value of a non-holder for key j: discretize(m) then perturb -> +1 w.p. fake_threshold(m)
        return self._perturb(data, float(self.round_p1[r]), fake, rng)

    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        data = self.check_data(values)
        js, ss = zip(*[self._randomize_round(data, r, self.fake_means[r], rng) for r in range(self.rounds)])
        return {"j": np.stack(js, axis=1), "s": np.stack(ss, axis=1)}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"j", "s"}:
            raise ValidationError("reports must have exactly the fields 'j' and 's'", parameter="reports")
        J, S = np.asarray(reports["j"]), np.asarray(reports["s"])
        if J.ndim != 2 or J.shape[1] != self.rounds or S.shape != J.shape:
            raise ValidationError(f"fields 'j' and 's' must be (n, {self.rounds}) arrays", parameter="reports")
        check_int_values(J.reshape(-1), self.d, "j")
        check_int_values(S.reshape(-1), 3, "s")
        return {"j": J.astype(np.int64), "s": S.astype(np.int8)}

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        ks, vs = user_pairs(x)
        J = np.asarray(reports["j"]).reshape(-1, self.rounds)
        S = np.asarray(reports["s"]).reshape(-1, self.rounds)
        value = np.zeros(self.d)
        held = np.zeros(self.d, bool)
        value[ks], held[ks] = vs, True
        out = np.ones(J.shape[0])
        for r in range(self.rounds):  # rounds (a handful), vectorized over reports
            j, s = J[:, r], S[:, r]
            p1, p2 = float(self.round_p1[r]), self.p2
            fp = self.fake_threshold(self.fake_means[r][j])
            p_non = np.where(s == 0, p1, (1 - p1) * np.where(s == 1, fp, 1 - fp))
            pp = discretize_probability(value[j])
            keep_plus = np.where(s == 1, p2, 1 - p2)  # prob of reporting +1/-1 given true +1
            p_hold = np.where(s == 0, 1 - p1, p1 * (pp * keep_plus + (1 - pp) * (1 - keep_plus)))
            out *= np.where(held[j], p_hold, p_non) / self.d
        return out

    def aggregate(self, reports: Reports) -> np.ndarray:
        J = np.asarray(reports["j"]).reshape(-1, self.rounds)
        S = np.asarray(reports["s"]).reshape(-1, self.rounds)
        r = np.arange(self.rounds)[None, :]
        return np.bincount((r * 3 * self.d + 3 * J + S).reshape(-1),
                           minlength=3 * self.d * self.rounds).astype(np.int64)

    def simulate_statistic(self, sample_counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError("PrivKVM is adaptive (round r's fake means come from round r-1's estimate): "
                                  "run it with collect(data, rng)")

    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        """Frequencies from round 1; means from the last round (its clipped estimate)."""
        n = self._check_n(n)
        stat = _check_stat(statistic, 3 * self.d * self.rounds, self.name).reshape(self.rounds, 3 * self.d)
        f, N, _, _ = self._frequency(stat[0])
        prev = np.zeros(self.d)
        raw = prev
        for r in range(self.rounds):  # a handful of rounds
            c = stat[r].reshape(self.d, 3)
            raw, prev = self._mean_from_counts(c[:, 1], c[:, 2], self.p2, prev)
        priv = self.privacy()
        freq = Estimate(f, self._stderr_f(f, n), n, priv, "frequency")
        mean = Estimate(raw, _nan_stderr(self.d), n, priv, "mean", {"biased": True})
        return KeyValueEstimate(freq, mean, np.clip(f, 0, 1), prev, None, {"N": N})

    def collect(self, data: Any, rng: np.random.Generator) -> KeyValueEstimate:
        """Run the adaptive protocol: round r's fake values come from round r-1's mean estimate."""
        data = self.check_data(data)
        stats = []
        prev = np.zeros(self.d)
        for r in range(self.rounds):
            self.fake_means[r] = prev
            j, s = self._randomize_round(data, r, prev, rng)
            st = np.bincount(3 * j + s, minlength=3 * self.d).astype(np.int64)
            stats.append(st)
            c = st.reshape(self.d, 3)
            _, prev = self._mean_from_counts(c[:, 1], c[:, 2], self.p2, prev)
        return self.estimate(np.concatenate(stats), data.n)

    def frequency_variance(self, n: int, f: Any = 0.0) -> Any:
        a, b = self.p1, 1 - self.p1
        n = self._check_n(n)
        inv = _inverse_mean_count(n, self.d)
        return inv * (a * (1 - a) / (a - b) ** 2 + f * (1 - f) * n / max(n - 1, 1)) - f * (1 - f) / max(n - 1, 1)

    def _privacy(self) -> PrivacyStatement:
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"PrivKVM: {self.rounds} rounds, schedule {self.schedule}, sequential "
                                     f"composition; exact eps of the sampled probabilities <= requested {self.epsilon:g}")


def _privkv_ratio(p1: Fraction, p2: Fraction) -> Fraction:
    """Exact worst-case ratio of PrivKV's report for sampled (p1, p2): the non-holder row (fake sign
    1/2) and the two holder rows (x = +1, -1; a holder's row is a mixture of them)."""
    return _column_ratio([[p1, (1 - p1) / 2, (1 - p1) / 2],
                          [1 - p1, p1 * p2, p1 * (1 - p2)],
                          [1 - p1, p1 * (1 - p2), p1 * p2]])


def _privkvm_ratio(p1s: list[Fraction], p2: Fraction) -> Fraction:
    """Exact worst-case ratio of PrivKVM's rounds (independent given the input: the product), each
    over every public fake mean (the fake +1 probability ranges over [1 - p2, p2])."""
    out = Fraction(1)
    for p1 in p1s:
        out *= _column_ratio([[p1, (1 - p1) * (1 - p2), (1 - p1) * p2],
                              [p1, (1 - p1) * p2, (1 - p1) * (1 - p2)],
                              [1 - p1, p1 * p2, p1 * (1 - p2)],
                              [1 - p1, p1 * (1 - p2), p1 * p2]])
    return out
