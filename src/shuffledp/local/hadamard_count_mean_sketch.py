"""Apple's Hadamard Count Mean Sketch (HCMS) frequency oracle.

Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), 2017 (algorithms A_client-HCMS and sketch-HCMS). The hash family, the estimator with
its collision correction and the closed-form variance are shared with CMS and documented in
:mod:`shuffledp.local.sketch`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.validation import check_int_values, check_positive_int
from ._device import bincount_device, fwht_device
from .base import Reports
from .bits import UNIFORM_PRECISION, calibrate_probability
from .hadamard import fwht
from .sketch import CountMeanSketchBase

__all__ = ["HadamardCountMeanSketch"]


class HadamardCountMeanSketch(CountMeanSketchBase):
    """Apple's Hadamard Count Mean Sketch (HCMS) frequency oracle.

    Client (A_client-HCMS): draw ``j`` uniform in ``[k]`` and ``l`` uniform in ``[m]``;
    ``w = H_m[l, h_j(x)]`` (Sylvester Hadamard, ``(-1)^popcount(l & h)``); flip ``w`` with
    probability ``1/(1 + e^eps)``; send ``{"j", "l", "w"}`` (``w`` int8 in {-1, +1}).

    Server (sketch-HCMS): ``M_H[j, l] += k c w`` with ``c = (e^eps+1)/(e^eps-1)``;
    ``M = M_H H_m`` (one fast Walsh-Hadamard transform per row, no 1/m factor); the query is
    CMS's: ``f~(x) = m/(m-1) ((1/k) sum_l M[l, h_l(x)] - n/m)``.

    Privacy: ``(j, l)`` is independent of ``x``; ``w`` is randomized response with ratio
    ``(1-p)/p``. The flip probability ``p`` is ``1/(1 + e^eps)`` rounded **up** to the ``2^-53``
    grid (``rng.random() < p`` draws it exactly), raised further until ``(1-p)/p <= e^eps`` holds
    exactly, so the report is exactly ``effective_epsilon``-LDP with ``effective_epsilon =
    ln((1-p)/p) <= epsilon`` (rounded up), the eps the privacy statement carries; ``c = 1/(1-2p)``,
    the estimator, variance and :meth:`probabilities` use the sampled ``p``.
    Source: Apple Differential Privacy Team, "Learning with Privacy at Scale",
    2017. Variance: see :mod:`shuffledp.local.sketch`.
    Cost: O(n) encode, O(n) aggregate (a bincount), O(k m log m + k d) estimate;
    ``1 + ceil(log2 k) + log2 m`` bits per report. ``m`` must be a power of 2.

    Parameters
    ----------
    epsilon, d, k, m, hash_seed, hash_table, debias
        As :class:`CountMeanSketch` (``m`` a power of 2).
    device, device_fallback : str, bool
        Where :meth:`aggregate` (sign sums per cell), the estimate's ``k`` Walsh-Hadamard
        transforms and sketch query over the ``d`` items, and the hash counts of
        :meth:`simulate_statistic` run: ``'cpu'`` (numpy, default), ``'torch-cpu'`` or
        ``'cuda[:N]'`` (PyTorch). All int64 on the device (the float steps after the query stay
        on numpy): statistics and estimates are bit-identical. ``device_fallback``: an
        unavailable CUDA device runs on the CPU instead of raising.
    """

    name = "hcms"

    def __init__(self, epsilon: float, d: int, k: int | None = None, m: int = 1024, hash_seed: int | None = None,
                 hash_table: Any = None, debias: str = "family", device: str = "cpu",
                 device_fallback: bool = False) -> None:
        mm = check_positive_int(m, "m", minimum=2)
        if mm & (mm - 1):
            raise ValidationError(f"m must be a power of 2 for HCMS, got {mm}", parameter="m")
        super().__init__(epsilon, d, k, m, hash_seed, hash_table, debias, device, device_fallback)
        e = math.exp(self.epsilon) if self.epsilon < 700 else math.inf
        p, self.effective_epsilon = calibrate_probability(1.0 / (1.0 + e), self.epsilon, lambda t: (1 - t) / t, "up")
        #: exact flip probability (a double on the 2^-53 grid)
        self.p_flip_exact = p
        self.p_flip = float(p)
        self.c = float(1 / (1 - 2 * p))  # = (e_eff + 1)/(e_eff - 1), e_eff = (1-p)/p

    def _privacy(self) -> PrivacyStatement:
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"HadamardCountMeanSketch: flip probability p={self.p_flip!r} on the grid "
                                     f"2^-{UNIFORM_PRECISION}; exact eps of the sampled p <= requested {self.epsilon:g}")

    # --- client -----------------------------------------------------------------------
    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        x = self.check_values(values)
        n = x.shape[0]
        j = rng.integers(0, self.k, size=n, dtype=np.int64)
        l = rng.integers(0, self.m, size=n, dtype=np.int64)
        h = self.family(j, x)
        sign = 1 - 2 * (np.bitwise_count(l & h) & 1).astype(np.int8)
        flip = rng.random(n) < self.p_flip  # exact Bernoulli(p): p is on the 2^-53 grid
        w = np.where(flip, -sign, sign).astype(np.int8)
        return {"j": j, "l": l, "w": w}

    def validate_reports(self, reports: Reports) -> Reports:
        if not isinstance(reports, dict) or set(reports) != {"j", "l", "w"}:
            raise ValidationError("HCMS reports must have exactly the fields 'j', 'l' and 'w'", parameter="reports")
        j = check_int_values(reports["j"], self.k, "j")
        l = check_int_values(reports["l"], self.m, "l")
        w = np.asarray(reports["w"])
        if w.dtype == np.bool_ or not np.issubdtype(w.dtype, np.integer) or w.shape != j.shape \
                or not np.all((w == 1) | (w == -1)):
            raise ValidationError("w must be integers in {-1, +1}, one per report", parameter="w")
        if l.shape != j.shape:
            raise ValidationError("j and l must have the same length", parameter="reports")
        return {"j": j, "l": l, "w": w.astype(np.int8)}

    # --- analyzer ---------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """``(k, m)`` int64: sum of the reported signs per (hash index, Hadamard row)."""
        j = np.asarray(reports["j"]).astype(np.int64, copy=False)
        l = np.asarray(reports["l"]).astype(np.int64, copy=False)
        w = np.asarray(reports["w"])
        cell = j * self.m + l
        if self.device != "cpu":
            return bincount_device(cell, self.k * self.m, self.device, weights=w).reshape(self.k, self.m)
        pos = np.bincount(cell[w > 0], minlength=self.k * self.m)
        tot = np.bincount(cell, minlength=self.k * self.m)
        return (2 * pos - tot).astype(np.int64).reshape(self.k, self.m)

    def aggregate_groups(self, reports: Reports, groups: Any, n_groups: int) -> np.ndarray:
        """``(n_groups, k, m)`` int64: :meth:`aggregate` of the reports of every group
        (``groups[i]`` in ``[0, n_groups)`` the group of report ``i``)."""
        j = np.asarray(reports["j"]).astype(np.int64, copy=False)
        l = np.asarray(reports["l"]).astype(np.int64, copy=False)
        w = np.asarray(reports["w"])
        cell = (np.asarray(groups, dtype=np.int64) * self.k + j) * self.m + l
        size = n_groups * self.k * self.m
        pos = np.bincount(cell[w > 0], minlength=size)
        tot = np.bincount(cell, minlength=size)
        return (2 * pos - tot).astype(np.int64).reshape(n_groups, self.k, self.m)

    def _statistic_shape(self) -> tuple[int, ...]:
        return (self.k, self.m)

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        """Shape ``(k, m)`` of finite sign sums; every user adds +-1 to one cell, so sum |cell| <= n."""
        stat = self._check_statistic(statistic)
        if stat.dtype == np.bool_ or not (np.issubdtype(stat.dtype, np.integer) or np.issubdtype(stat.dtype, np.floating)) \
                or not np.all(np.isfinite(stat)):
            raise ValidationError("statistic must be finite sign sums", parameter="statistic")
        if np.abs(stat.astype(np.float64)).sum() > n:
            raise ValidationError(f"statistic: the sign sums exceed the n={n} reports (sum |cell| > n)",
                                  parameter="statistic")
        return stat

    def sketch(self, statistic: np.ndarray) -> np.ndarray:
        """The paper's sketch ``M = M_H H_m`` with ``M_H = k c (sum of signs)``."""
        stat = self._check_statistic(statistic).astype(np.int64)
        return self.k * self.c * fwht(stat, axis=1).astype(np.float64)

    def _query(self, statistic: np.ndarray, n: int) -> np.ndarray:
        stat = self._check_statistic(statistic).astype(np.int64)
        W = fwht(stat, axis=1) if self.device == "cpu" else fwht_device(stat, self.device)  # exact integers
        return self.c * self._family_query(W)

    def query_groups(self, statistics: Any, ns: Any) -> np.ndarray:
        """``T(x)`` of :meth:`_query` for every item under each of several statistics:
        ``(len(ns), d)``, the hash values computed once for all."""
        W = [fwht(self._check_statistic(s).astype(np.int64), axis=1) for s in statistics]
        if not W:
            return np.zeros((0, self.d))
        return self.c * self.family.query_many(np.stack(W))

    def _count_variance(self, n: float, f: Any, s2: Any) -> Any:
        m, k, c = self.m, self.k, self.c
        coll = (m - 1) / m**2
        f = np.asarray(f)
        return self.A * (f * (c * c - 1) + (n - f) * (c * c - 1 / m**2 - coll / k) + coll / k * np.asarray(s2))

    def _conditional_per_user(self, pi: np.ndarray) -> np.ndarray:
        return self.c**2 - pi**2

    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Exact sample of the ``(k, m)`` sign sums from the true counts, O(k d + k m log m), independent of n.

        ``U[j, h]`` (:meth:`_row_hash_counts`): users of row ``j`` whose hash is ``h``. Each draws
        ``l`` uniform in ``[m]`` -- ``log2 m`` independent fair bits ``l_t`` -- and has true sign
        ``H[l, h] = prod_t (-1)^(l_t h_t)``. The bits are resolved one at a time, lowest first: the
        state of a user after ``t`` bits is (``l mod 2^t``, ``h >> t``, sign so far), ``2m`` states
        per row at every step, and each state's count splits Binomial(., 1/2) on ``l_t`` (the
        sign flips when ``l_t = h_t = 1``). After the last bit the state is (``l``, sign): ``A[j, l]``
        users with true sign +1 and ``B[j, l]`` with -1 in cell ``(j, l)``. Each report's sign is
        flipped independently with probability ``p`` (the sampled flip probability), so the cell's +1 count is
        ``Bin(A, 1-p) + Bin(B, p)`` and its sign sum ``2 (+1 count) - (A + B)``.
        """
        c = self.check_counts(true_counts)
        k, m = self.k, self.m
        U = self._row_hash_counts(c, rng)
        cnt = np.zeros((k, 1, m, 2), dtype=np.int64)  # (row, l mod 2^t, h >> t, sign so far: 0 = +1)
        cnt[:, 0, :, 0] = U
        P = 1
        while P < m:  # log2 m steps, one bit of l each
            c5 = cnt.reshape(k, P, m // (2 * P), 2, 2)  # (row, l low bits, h >> (t+1), h_t, sign)
            c0 = rng.binomial(c5, 0.5)  # l_t = 0
            c1 = c5 - c0  # l_t = 1: the sign flips when h_t = 1
            new0 = c0.sum(axis=3)
            new1 = c1[:, :, :, 0, :] + c1[:, :, :, 1, ::-1]
            cnt = np.concatenate([new0, new1], axis=1)  # index l_t 2^t + (l mod 2^t)
            P *= 2
        A, B = cnt[:, :, 0, 0], cnt[:, :, 0, 1]
        plus = rng.binomial(A, 1.0 - self.p_flip) + rng.binomial(B, self.p_flip)
        return (2 * plus - (A + B)).astype(np.int64)

    def _exact_count_variances(self, counts: np.ndarray) -> np.ndarray:
        # per user E[(w.T_i)^2] = c^2 w^T Pi w = c^2 Pinv_xx (Parseval), mean 1{x_i = x}
        counts = np.asarray(counts, dtype=np.float64)
        return self.c**2 * counts.sum() * np.diag(self._exact_state()["Pinv"]) - counts

    def _exact_variance_uniform_rest(self, n: int, f: float) -> float:
        a = np.diag(self._exact_state()["Pinv"])
        return float(self.c**2 * n * a.mean() - n * f) / n**2

    # --- privacy ----------------------------------------------------------------------
    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[j, l, w | x] = (1/(k m)) (1 - p if w = H[l, h_j(x)] else p)``, ``p`` the sampled flip probability."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        j = np.asarray(reports["j"]).astype(np.int64, copy=False)
        l = np.asarray(reports["l"]).astype(np.int64, copy=False)
        w = np.asarray(reports["w"]).astype(np.int64)
        sign = 1 - 2 * (np.bitwise_count(l & self.family(j, xv)) & 1).astype(np.int64)
        return np.where(w == sign, 1.0 - self.p_flip, self.p_flip) / (self.k * self.m)
