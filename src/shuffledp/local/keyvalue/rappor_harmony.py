"""RAPPOR + Harmony: the key-value baseline of HISKV ("RAPPOR for keys, Harmony for values").

The HISKV paper (Zhang, Xu, Fu, Meng, Journal of Computer Research and Development) compares
against RAPPOR and Harmony without saying how they were combined on key-value sets; this is our
reconstruction [R] (docs/keyvalue.md):

1. Padding-and-sampling to ``ell`` (as PCKV / HISKV; Gu, Li, Cheng, Xiong, Cao, USENIX Security 2020): one pair ``<k, v>``; a dummy key
   (probability ``1 - l_u / max(l_u, ell)``) has value 0.
2. Key: basic one-time RAPPOR = symmetric unary encoding over the ``d`` real keys (a dummy key is
   the all-zero vector), every bit flipped with probability ``q = 1/(e^{eps1/2} + 1)`` (rounded
   up to the ``2^-20`` grid; ``p = 1 - q``).
3. Value: Harmony (1-D, :class:`shuffledp.local.mean.Harmony`) at ``eps2`` on ``v``: ``s = ±1``
   with ``P(s = +1) = 1/2 + v (r - 1)/(2 r + 2)``; ``E[s] = v / C``, ``C = (r + 1)/(r - 1)``, where
   ``r = H / L < e^{eps2}`` is Harmony's integer ratio (its choices are integer comparisons; see
   :mod:`shuffledp.local.mean`).

Budget: ``eps1 = key_fraction * eps``, ``eps2 = eps - eps1`` (default ``eps/2`` each, sequential
composition, as PrivKV's split). Privacy: for every sampled pair the report's probability lies in a
band of ratio ``e^{eps1} e^{eps2}`` (two bits of the unary vector, one RR), and the sampling
mixture keeps it there, so the full client path is eps-LDP (checked exactly).

Estimators (per key ``k``; ``c_k`` = #reports with bit ``k`` set, ``t_k`` = sum of ``s`` over
those reports, ``T`` = sum of all ``s``): ``f_hat = ell (c_k/n - q)/(p - q)`` (unbiased when all
holders have ``l_u <= ell``); ``sum_hat = ell C (t_k - q T)/(n (p - q))`` unbiased for ``f_k m_k``
(the value report is independent of the key bits given the sampled pair, so
``E[t_k - q T] = (p - q) E[sum of sampled k's discretized values] / C``); ``m_hat = sum_hat / f_hat``
(ratio; corrected: ``clip(sum_hat / clip(f_hat, 1/n, 1), -1, 1)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int, check_real
from ..base import DEFAULT_CHUNK, Reports
from ..bits import bernoulli_packed, dyadic, packed_column_sums, unpack_rows
from ..mean import Harmony
from .base import KeyValueEstimate, KeyValueMechanism, _check_stat, user_pairs
from .data import padding_sample

__all__ = ["RapporHarmony"]


class RapporHarmony(KeyValueMechanism):
    """RAPPOR (basic one-time, unary) on the sampled key + Harmony on its value; budget split.

    Privacy: eps-LDP on the full client path (padding-and-sampling, unary encoding at eps1,
    Harmony at eps2, eps1 + eps2 = eps). Source: the baseline of the HISKV paper, built from
    Erlingsson et al. CCS'14 (RAPPOR), Nguyen et al. 2016 (Harmony) and Gu et al. USENIX Sec'20
    (padding-and-sampling); the combination is our reconstruction.
    Cost: O(n d / 64) random words to encode (bit-packed), O(n d) bit operations to aggregate;
    d bits + 1 bit per report.

    Parameters
    ----------
    epsilon : float
        Total privacy budget.
    d : int
        Key domain size.
    ell : int
        Padding-and-sampling length (the experiments use PCKV's, the 90th percentile of lengths).
    key_fraction : float
        Share of eps spent on the key (default 0.5).

    Reports: ``{"bits": uint8 (n, ceil(d/8)) packed unary vector, "s": int8 ±1}``.
    Statistic: int64 ``[c_0..c_{d-1}, t_0..t_{d-1}, T]`` (length ``2 d + 1``), mergeable by +.
    """

    name = "rappor-harmony"
    label = "RAPPOR+Harmony"
    #: exact at any eps: q is rounded up to the 2^-20 grid and Harmony uses integer ratios
    MAX_EPSILON = 700.0

    def __init__(self, epsilon: float, d: int, ell: int = 1, key_fraction: float = 0.5) -> None:
        super().__init__(epsilon, d)
        self.ell = check_positive_int(ell, "ell")
        self.key_fraction = check_real(key_fraction, "key_fraction", low=0.0, high=1.0, low_open=True,
                                       high_open=True)
        if self.epsilon > 700:
            raise ValidationError(f"epsilon must be <= 700, got {self.epsilon}", parameter="epsilon")
        self.eps1 = self.epsilon * self.key_fraction
        self.eps2 = self.epsilon - self.eps1
        self.q = dyadic(1.0 / (math.exp(self.eps1 / 2.0) + 1.0), 20, "up")
        if self.q >= 0.5:
            raise ValidationError(f"epsilon * key_fraction = {self.eps1:g} is too small for the 2^-20 grid",
                                  parameter="epsilon")
        self.p = 1.0 - self.q
        self.harmony = Harmony(self.eps2)
        self.C = self.harmony.C
        self.n_bytes = (self.d + 7) // 8

    def _privacy(self) -> PrivacyStatement:
        return PrivacyStatement(self.epsilon, 0.0, "local", "replace_one",
                                note=f"RAPPOR+Harmony: key eps1={self.eps1:g} (unary, realised "
                                     f"{2 * math.log(self.p / self.q):.6g}) + value eps2={self.eps2:g} "
                                     f"(Harmony, realised {self.harmony.effective_epsilon:.12g})")

    # --- client -----------------------------------------------------------------------
    def _randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        data = self.check_data(values)
        key, val = padding_sample(data, self.ell, rng)
        n = data.n
        bits = np.zeros((n, self.n_bytes), dtype=np.uint8)
        real = np.flatnonzero(key < self.d)
        bits[real, key[real] >> 3] = (np.uint8(1) << (key[real] & 7).astype(np.uint8))
        for lo in range(0, n, DEFAULT_CHUNK):  # chunks bound the random-word temporaries
            hi = min(n, lo + DEFAULT_CHUNK)
            bits[lo:hi] ^= bernoulli_packed(hi - lo, self.d, self.q, rng)
        s = self.harmony.randomize(val, rng)["s"]
        return {"bits": bits, "s": s.astype(np.int8)}

    def validate_reports(self, reports: Reports) -> Reports:
        if not isinstance(reports, dict) or set(reports) != {"bits", "s"}:
            raise ValidationError("reports must have exactly the fields 'bits' and 's'", parameter="reports")
        b = np.asarray(reports["bits"])
        s = np.asarray(reports["s"])
        if b.dtype != np.uint8 or b.ndim != 2 or b.shape[1] != self.n_bytes:
            raise ValidationError(f"bits must be a uint8 array with {self.n_bytes} columns", parameter="bits")
        if s.shape != (b.shape[0],) or not np.issubdtype(s.dtype, np.integer) or not np.all(np.abs(s) == 1):
            raise ValidationError("s must hold ±1, one per report", parameter="s")
        rem = self.d % 8
        if rem and b.size and np.any(b[:, -1] >> np.uint8(rem)):
            raise ValidationError(f"bits has ones beyond bit d={self.d}", parameter="bits")
        return {"bits": b, "s": s.astype(np.int8)}

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact Pr[(bits, s) | S]: mixture over the padding-and-sampling of one pair."""
        ks, vs = user_pairs(x)
        if ks.size and (ks.min() < 0 or ks.max() >= self.d or np.unique(ks).size != ks.size):
            raise ValidationError("user set has a key outside [0, d) or a repeated key", parameter="x")
        if vs.size and (not np.all(np.isfinite(vs)) or np.abs(vs).max() > 1):
            raise ValidationError("user set has a value outside [-1, 1]", parameter="x")
        Y = unpack_rows(np.asarray(reports["bits"]), self.d).astype(bool)
        s = np.asarray(reports["s"], dtype=np.float64)
        ones = Y.sum(axis=1)
        phi = np.exp(ones * math.log(self.q) + (self.d - ones) * math.log1p(-self.q))  # all-zero vector
        L = max(ks.size, self.ell)
        # Harmony's exact law of s given the sampled value (dummy key: value 0)
        h0 = self.harmony.sign_probability
        mix = (1 - ks.size / L) * np.where(s > 0, float(h0(0.0, 1)), float(h0(0.0, -1)))
        if ks.size:
            ratio = np.where(Y[:, ks], self.p / self.q, (1 - self.p) / (1 - self.q))  # (n, l)
            hs = np.where(s[:, None] > 0, self.harmony.sign_probability(vs, 1)[None, :],
                          self.harmony.sign_probability(vs, -1)[None, :])
            mix = mix + (ratio * hs).sum(axis=1) / L
        return phi * mix

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        b = np.asarray(reports["bits"])
        s = np.asarray(reports["s"])
        c = packed_column_sums(b, self.d)
        t = packed_column_sums(b[s > 0], self.d) - packed_column_sums(b[s < 0], self.d)
        return np.concatenate([c, t, [int(s.astype(np.int64).sum())]]).astype(np.int64)

    def point_estimates(self, c: np.ndarray, t: np.ndarray, T: Any, n: Any) -> dict[str, np.ndarray]:
        """Vectorised estimators (any leading axes; ``T`` and ``n`` broadcast): raw f̂, raw m̂,
        clipped f̂, corrected m̂, and the unbiased value sum ``sum`` (estimates f_k m_k)."""
        c = np.asarray(c, dtype=np.float64)
        t = np.asarray(t, dtype=np.float64)
        n = np.asarray(n, dtype=np.float64)
        T = np.asarray(T, dtype=np.float64)
        if n.ndim:
            n = n.reshape(n.shape + (1,) * (c.ndim - n.ndim))
        if T.ndim and T.ndim < c.ndim:
            T = T.reshape(T.shape + (1,) * (c.ndim - T.ndim))
        p, q, ell = self.p, self.q, self.ell
        f = ell * (c / n - q) / (p - q)
        vsum = ell * self.C * (t - q * T) / (n * (p - q))
        with np.errstate(divide="ignore", invalid="ignore"):
            m_raw = np.where(f != 0, vsum / f, 0.0)
        fc = np.clip(f, 1.0 / n, 1.0)
        m_c = np.clip(vsum / fc, -1.0, 1.0)
        return {"f": f, "m": m_raw, "f_clipped": np.clip(f, 0.0, 1.0), "m_clipped": m_c, "sum": vsum}

    def _estimate(self, statistic: np.ndarray, n: int) -> KeyValueEstimate:
        n = self._check_n(n)
        st = _check_stat(statistic, 2 * self.d + 1, self.name)
        d = self.d
        c, t, T = st[:d], st[d:2 * d], st[2 * d]
        if np.any(c < 0) or np.any(c > n) or np.any(np.abs(t) > c) or abs(T) > n:
            raise ValidationError("statistic is inconsistent with n reports", parameter="statistic")
        pe = self.point_estimates(c, t, T, n)
        priv = self.privacy()
        fcl = pe["f_clipped"]
        mcl = np.clip(np.nan_to_num(pe["m"]), -1, 1)
        freq = Estimate(pe["f"], np.sqrt(self.frequency_variance(n, fcl)), n, priv, "frequency")
        mean = Estimate(pe["m"], np.sqrt(self.mean_variance(n, fcl, mcl, tbar=T / n)), n, priv, "mean")
        vsum = Estimate(pe["sum"], np.sqrt(np.maximum(self.sum_variance(n, fcl, mcl**2), 0.0)), n, priv, "sum")
        return KeyValueEstimate(freq, mean, fcl, pe["m_clipped"], vsum,
                                {"ell": self.ell, "eps1": self.eps1, "eps2": self.eps2})

    # --- variances (all holders with l_u <= ell; derivations in docs/keyvalue.md) --------
    def frequency_variance(self, n: int, f: Any = 0.0) -> Any:
        """Exact Var[f̂_k] over sampling and perturbation:
        ell² q(1-q)/(n (p-q)²) + ell f (1-2q)/(n (p-q)) - f/n."""
        n = self._check_n(n)
        p, q, ell = self.p, self.q, self.ell
        f = np.asarray(f, dtype=np.float64)
        v = ell**2 * q * (1 - q) / (n * (p - q) ** 2) + ell * f * (1 - 2 * q) / (n * (p - q)) - f / n
        return float(v) if v.ndim == 0 else v

    def sum_variance(self, n: int, f: Any, m2: Any) -> Any:
        """Exact Var of the value-sum estimate (of f_k m_k), ``m2`` = holders' mean of v²:
        ell² C² q(1-q)/(n (p-q)²) + ell C² f (1-2q)/(n (p-q)) - f m2 / n."""
        n = self._check_n(n)
        p, q, ell, C = self.p, self.q, self.ell, self.C
        f = np.asarray(f, dtype=np.float64)
        v = ell**2 * C**2 * q * (1 - q) / (n * (p - q) ** 2) + ell * C**2 * f * (1 - 2 * q) / (n * (p - q)) \
            - f * np.asarray(m2, dtype=np.float64) / n
        return float(v) if v.ndim == 0 else v

    def mean_variance(self, n: int, f: Any, m: Any = 0.0, m2: Any = None, tbar: float = 0.0) -> Any:
        """Delta-method variance of m̂ = sum_hat / f̂ (``tbar`` = E[T]/n, the mean reported sign)."""
        n = self._check_n(n)
        p, q, ell, C = self.p, self.q, self.ell, self.C
        f = np.asarray(f, dtype=np.float64)
        m = np.asarray(m, dtype=np.float64)
        m2 = m * m if m2 is None else np.asarray(m2, dtype=np.float64)
        cov = ell * f * m * (1 - 2 * q) / (n * (p - q)) + ell**2 * C * q * (1 - q) * tbar / (n * (p - q) ** 2) \
            - f * m / n
        num = self.sum_variance(n, f, m2) - 2 * m * cov + m * m * self.frequency_variance(n, f)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(f > 0, num / f**2, np.inf)
        return float(v) if v.ndim == 0 else v

    # --- exact per-key simulation ----------------------------------------------------------
    def simulate_statistic(self, sample_counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact per-key marginal law of (c_k, t_k, T) from the sampling-stage counts.

        ``sample_counts`` shape (..., d + 1, 2) as :func:`shuffledp.experiments.kvsim.sampling_counts_padding`
        (per real key #users who sampled it with x = +1 / -1; row d: [n, 0]). Users who sampled a
        dummy have x = ±1 uniformly (drawn here). Returns shape (..., d, 3): per key ``[c_k, t_k, T_k]``
        where ``T_k`` is the total sign sum jointly distributed with that key's (c_k, t_k); keys
        are independent given the sampling stage (cross-key correlations are not reproduced).
        """
        cnt = np.asarray(sample_counts, dtype=np.int64)
        d = self.d
        n = cnt[..., d, 0]
        A, B = cnt[..., :d, 0], cnt[..., :d, 1]
        real = (A + B).sum(axis=-1)
        dummy_plus = rng.binomial(n - real, 0.5)
        Gp = A.sum(axis=-1) + dummy_plus
        Gm = n - Gp
        Cg = Gp[..., None] - A  # others with x = +1
        Dg = Gm[..., None] - B  # others with x = -1
        pe = self.harmony.p_keep
        p, q = self.p, self.q

        def cells(bit_p: float, plus: float) -> list[float]:  # (bit 1, s +), (1, -), (0, +), (0, -)
            return [bit_p * plus, bit_p * (1 - plus), (1 - bit_p) * plus, (1 - bit_p) * (1 - plus)]

        out = (rng.multinomial(A, cells(p, pe)) + rng.multinomial(B, cells(p, 1 - pe))
               + rng.multinomial(Cg, cells(q, pe)) + rng.multinomial(Dg, cells(q, 1 - pe)))
        c = out[..., 0] + out[..., 1]
        t = out[..., 0] - out[..., 1]
        T = out[..., 0] - out[..., 1] + out[..., 2] - out[..., 3]
        return np.stack([c, t, T], axis=-1)

    def __repr__(self) -> str:
        return f"RapporHarmony(epsilon={self.epsilon:g}, d={self.d}, ell={self.ell}, key_fraction={self.key_fraction:g})"
