"""Apple's Count Mean Sketch (CMS) frequency oracle.

Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), 2017 (algorithms A_client-CMS and sketch-CMS). The hash family, the estimator with
its collision correction and the closed-form variance are shared with HCMS and documented in
:mod:`shuffledp.local.sketch`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_int_values, check_positive_int
from .base import DEFAULT_CHUNK, FrequencyOracle, Reports
from .bits import dyadic
from .packed import bernoulli_packed_lazy
from .sketch import _CELLS, CountMeanSketchBase, grouped_bit_sums

__all__ = ["CountMeanSketch"]


class CountMeanSketch(CountMeanSketchBase):
    """Apple's Count Mean Sketch (CMS) frequency oracle.

    Client (A_client-CMS): draw ``j`` uniform in ``[k]``; ``v = -1^m`` with ``v[h_j(x)] = +1``;
    flip every coordinate independently with probability ``q = 1/(1 + e^{eps/2})``; send
    ``(j, v~)``. ``v~`` travels as ``m`` packed bits (bit 1 = +1, little-endian,
    :mod:`shuffledp.local.bits`), ``{"j": (n,) int64, "bits": (n, ceil(m/8)) uint8}``.

    Server (sketch-CMS): ``x = k ((c/2) v~ + 1/2)`` added to row ``j`` of ``M`` (k x m),
    ``c = (e^{eps/2}+1)/(e^{eps/2}-1) = 1/(1-2q)``; ``f~(x) = m/(m-1) ((1/k) sum_l M[l, h_l(x)] - n/m)``.

    Privacy: ``v(x)`` and ``v(x')`` differ in at most 2 coordinates, each flipped with ratio
    ``(1-q)/q``, so the report is ``2 ln((1-q)/q)``-LDP. ``q`` is rounded **up** to a dyadic
    value (fast bit-sliced sampling), so ``effective_epsilon = 2 ln((1-q)/q) <= epsilon``
    (checked in exact arithmetic) and the privacy statement carries it; ``c``, the estimator,
    variance and :meth:`probabilities` all use the rounded ``q``.

    Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", 2017.
    Variance: see the module docstring. Cost: O(n m / 64 * digits(q)) encode, O(n m / 8)
    aggregate (bit-sliced grouped sums), O(k d) query; ``m + ceil(log2 k)`` bits per report.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0.
    d : int
        Domain size, 2 <= d <= 2^32.
    k : int
        Number of hash functions (rows of the sketch), default 256.
    m : int
        Number of columns, >= 2, default 1024.
    hash_seed : int, optional
        Seed of the public hash family (shared by clients and server; ``self.hash_seed``). When
        omitted, a fresh seed is drawn from the operating system (:func:`draw_hash_seed`): the
        estimator is unbiased over the draw of the family, not for one fixed family, so a fixed
        default would make every deployment share the same (biased) family. Pass it to reproduce
        a simulation or to build the mechanism a task's configuration names.
    precision : int, optional
        Binary digits of the flip probability (default ``min(32, 14 + ceil(-log2 q))``).
    hash_table : array_like, optional
        An explicit ``(k, d)`` table of hash values in ``[m]`` replacing the tabulation family.
    debias : {"family", "exact"}
        ``"family"`` (default): the paper's estimator ``m/(m-1) (T - n/m)``, unbiased over the draw
        of the hash family, variance with the hash-collision term. ``"exact"``: ``Pi^{-1} T`` with the
        family's collision matrix, unbiased for this fixed family (``d <= 4096``, ``k m >= d``).
    device, device_fallback : str, bool
        Where :meth:`aggregate` (the ``n m`` report bits summed per hash index and column), the
        estimate's sketch query over the ``d`` items and the hash counts of :meth:`simulate_statistic`
        run: ``'cpu'`` (numpy, default), ``'torch-cpu'`` or ``'cuda[:N]'`` (PyTorch; integer sums,
        bit-identical statistics and estimates). ``device_fallback``: an unavailable CUDA device runs
        on the CPU instead of raising.
    """

    name = "cms"

    def __init__(self, epsilon: float, d: int, k: int | None = None, m: int = 1024, hash_seed: int | None = None,
                 precision: int | None = None, hash_table: Any = None, debias: str = "family", device: str = "cpu",
                 device_fallback: bool = False) -> None:
        super().__init__(epsilon, d, k, m, hash_seed, hash_table, debias, device, device_fallback)
        half = self.epsilon / 2.0
        q_ideal = 1.0 / (1.0 + math.exp(half)) if half < 700 else 0.0
        if precision is None:
            precision = min(32, 14 + (math.ceil(-math.log2(q_ideal)) if q_ideal > 0 else 32))
        self.precision = check_positive_int(precision, "precision", minimum=2)
        if self.precision > 32:
            raise ValidationError(f"precision must be an integer in [2, 32], got {self.precision}",
                                  parameter="precision")
        step = Fraction(1, 1 << self.precision)
        q = Fraction(dyadic(q_ideal, self.precision, "up"))
        q = max(q, step)
        # ((1-q)/q)^2 <= e^eps in exact arithmetic (2^-50 relative margin for float e^eps).
        bound = Fraction(math.exp(self.epsilon)) * (1 - Fraction(1, 1 << 50)) if self.epsilon < 700 else None
        while bound is not None and q < Fraction(1, 2) and ((1 - q) / q) ** 2 > bound:
            q += step
        if q >= Fraction(1, 2):
            raise ValidationError(f"epsilon={self.epsilon!r} is too small for the flip-probability grid "
                                  f"2^-{self.precision}", parameter="epsilon")
        self.q = float(q)
        ratio = (1 - q) / q
        self.effective_epsilon = min(self.epsilon,
                                     round_up(2 * (math.log(ratio.numerator) - math.log(ratio.denominator))))
        self.c = 1.0 / (1.0 - 2.0 * self.q)
        self.n_bytes = (self.m + 7) // 8

    def _privacy(self) -> PrivacyStatement:
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"CountMeanSketch: dyadic flip probability q={self.q!r} "
                                     f"(grid 2^-{self.precision}); requested eps {self.epsilon:g}")

    # --- client -----------------------------------------------------------------------
    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        x = self.check_values(values)
        n = x.shape[0]
        j = rng.integers(0, self.k, size=n, dtype=np.int64)
        bits = np.empty((n, self.n_bytes), dtype=np.uint8)
        for lo in range(0, n, DEFAULT_CHUNK):  # chunks of users bound the sampler's temporaries
            hi = min(n, lo + DEFAULT_CHUNK)
            bernoulli_packed_lazy(hi - lo, self.m, self.q, rng, out=bits[lo:hi])  # 1 = flipped
        # v~ bit = 1 (+1) iff (position is h_j(x)) XOR (flipped): toggle the hashed position.
        h = self.family(j, x)
        rows = np.arange(n)
        bits[rows, h >> 3] ^= (np.uint8(1) << (h & 7).astype(np.uint8)).astype(np.uint8)
        return {"j": j, "bits": bits}

    def validate_reports(self, reports: Reports) -> Reports:
        if not isinstance(reports, dict) or set(reports) != {"j", "bits"}:
            raise ValidationError("CMS reports must have exactly the fields 'j' and 'bits'", parameter="reports")
        j = check_int_values(reports["j"], self.k, "j")
        bits = np.asarray(reports["bits"])
        if bits.dtype != np.uint8 or bits.ndim != 2 or bits.shape != (j.shape[0], self.n_bytes):
            raise ValidationError(f"bits must be a uint8 array of shape (n, {self.n_bytes}) matching j",
                                  parameter="bits")
        rem = self.m % 8
        if rem and bits.size and np.any(bits[:, -1] >> np.uint8(rem)):
            raise ValidationError(f"bits has padding bits set past column {self.m}", parameter="bits")
        return {"j": j, "bits": bits}

    # --- analyzer ---------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """``(k, m+1)`` int64: +1 bits per (hash index, column), and users per hash index last."""
        j = np.asarray(reports["j"]).astype(np.int64, copy=False)
        out = np.empty((self.k, self.m + 1), dtype=np.int64)
        if self.device != "cpu":
            from ._device import grouped_bit_sums_device

            out[:, :self.m] = grouped_bit_sums_device(reports["bits"], j, self.k, self.m, self.device)
        else:
            out[:, :self.m] = grouped_bit_sums(reports["bits"], j, self.k, self.m)
        out[:, self.m] = np.bincount(j, minlength=self.k)
        return out

    def aggregate_groups(self, reports: Reports, groups: Any, n_groups: int) -> np.ndarray:
        """``(n_groups, k, m+1)`` int64: :meth:`aggregate` of the reports of every group
        (``groups[i]`` in ``[0, n_groups)`` the group of report ``i``), in one pass over the bits."""
        j = np.asarray(reports["j"]).astype(np.int64, copy=False)
        cell = np.asarray(groups, dtype=np.int64) * self.k + j
        out = np.empty((n_groups * self.k, self.m + 1), dtype=np.int64)
        out[:, :self.m] = grouped_bit_sums(reports["bits"], cell, n_groups * self.k, self.m)
        out[:, self.m] = np.bincount(cell, minlength=n_groups * self.k)
        return out.reshape(n_groups, self.k, self.m + 1)

    def _statistic_shape(self) -> tuple[int, ...]:
        return (self.k, self.m + 1)

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        """Shape ``(k, m+1)``; per row ``0 <= +1 bits <= users of the row``; ``n`` users in all."""
        stat = FrequencyOracle._check_statistic_for(self, statistic, n)
        if np.any(stat[:, :self.m] > stat[:, self.m:]):
            raise ValidationError("statistic: a (hash index, column) count exceeds the users of its hash index",
                                  parameter="statistic")
        return stat

    def sketch(self, statistic: np.ndarray) -> np.ndarray:
        """The paper's real-valued sketch ``M = sum_i k ((c/2) v~_i + 1/2)`` (rows by ``j``)."""
        stat = self._check_statistic(statistic).astype(np.float64)
        S, N = stat[:, :self.m], stat[:, self.m:]
        return self.k * ((self.c / 2) * (2 * S - N) + N / 2)

    def _recorded_users(self, statistic: np.ndarray) -> float:
        """The last column counts the reports of each hash index: it sums to n."""
        return float(np.sum(np.asarray(statistic)[:, self.m]))

    def _query(self, statistic: np.ndarray, n: int) -> np.ndarray:
        stat = self._check_statistic(statistic)
        total = int(stat[:, self.m].sum())
        if total != n:
            raise ValidationError(f"n={n} does not match the {total} reports in the statistic", parameter="n")
        # T(x) = (1/k) sum_l M[l, h_l(x)] = c sum_l S[l, h_l(x)] - (c - 1) n / 2
        return self.c * self._family_query(stat[:, :self.m]) - (self.c - 1) * n / 2

    def query_groups(self, statistics: Any, ns: Any) -> np.ndarray:
        """``T(x)`` of :meth:`_query` for every item under each of several statistics (``ns[g]``
        reports in ``statistics[g]``): ``(len(ns), d)``, the hash values computed once for all."""
        stats = [self._check_statistic(s) for s in statistics]
        for s, n in zip(stats, ns):
            if int(s[:, self.m].sum()) != int(n):
                raise ValidationError(f"n={n} does not match the {int(s[:, self.m].sum())} reports in the "
                                      f"statistic", parameter="n")
        if not stats:
            return np.zeros((0, self.d))
        S = np.stack([s[:, :self.m] for s in stats])
        return self.c * self.family.query_many(S) - (self.c - 1) * np.asarray(ns, dtype=np.float64)[:, None] / 2

    def _count_variance(self, n: float, f: Any, s2: Any) -> Any:
        m, k, c = self.m, self.k, self.c
        coll = (m - 1) / m**2
        return self.A * (n * (c * c - 1) / 4 + (n - np.asarray(f)) * (1 - 1 / k) * coll + coll / k * np.asarray(s2))

    def _conditional_per_user(self, pi: np.ndarray) -> np.ndarray:
        return (self.c**2 - 1) / 4 + pi * (1 - pi)

    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Exact sample of the ``(k, m+1)`` statistic from the true counts, O(k d + k m), independent of n.

        Users split over hash indices multinomially per item (:meth:`_row_hash_counts` gives
        ``U[j, l]``, the users of row ``j`` whose own position is ``l``; row ``j`` has
        ``N_j = sum_l U[j, l]`` users). Every bit of every report is an independent coin: the bit
        at the user's own position is +1 with probability ``1 - q``, every other bit with ``q``.
        So given ``U``, the +1 count of cell ``(j, l)`` is ``Bin(U[j, l], 1 - q) + Bin(N_j - U[j, l], q)``,
        independently over cells -- the law of ``aggregate(randomize(values))``.
        """
        c = self.check_counts(true_counts)
        U = self._row_hash_counts(c, rng)
        N = U.sum(axis=1)
        out = np.empty((self.k, self.m + 1), dtype=np.int64)
        out[:, :self.m] = rng.binomial(U, 1.0 - self.q) + rng.binomial(N[:, None] - U, self.q)
        out[:, self.m] = N
        return out

    def _exact_count_variances(self, counts: np.ndarray) -> np.ndarray:
        # Var[n~_x] = (c^2-1)/4 n Pinv_xx + (Pinv C Pinv)_xx - n_x, C = B diag(B^T counts) B^T / k
        st = self._exact_state()
        B, Pinv = st["B"], st["Pinv"]
        counts = np.asarray(counts, dtype=np.float64)
        cell = B.T @ counts
        C = (B.multiply(cell[None, :]).tocsr() @ B.T).toarray() / self.k
        b = np.einsum("ij,ij->i", Pinv @ C, Pinv)
        return (self.c**2 - 1) / 4 * counts.sum() * np.diag(Pinv) + b - counts

    def _exact_variance_uniform_rest(self, n: int, f: float) -> float:
        st = self._exact_state()
        if "g" not in st:
            B, Pinv, cols = st["B"], st["Pinv"], st["cols"]
            d, k, m = self.d, self.k, self.m
            st["b1"] = self._exact_count_variances(np.ones(d)) - (self.c**2 - 1) / 4 * d * np.diag(Pinv) + 1.0
            g = np.zeros(d)
            per = max(1, _CELLS // (d * m))
            items = np.arange(d)
            Bc = B.tocsc()
            for lo in range(0, k, per):  # chunks of hash indices: (Pinv B)[x, (j, h_j(x))]
                hi = min(k, lo + per)
                S = np.asarray((Bc[:, lo * m:hi * m].T @ Pinv).T)
                g += (S[items[None, :], cols[lo:hi] - lo * m] ** 2).sum(axis=0)
            st["g"] = g / k
        lam = n * (1 - f) / (self.d - 1)
        nx = n * f
        a = np.diag(st["Pinv"])
        var = (self.c**2 - 1) / 4 * n * a + lam * st["b1"] + (nx - lam) * st["g"] - nx
        return float(var.mean()) / n**2

    # --- privacy ----------------------------------------------------------------------
    def log_probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """``log Pr[j, v~ | x] = -log k + D log q + (m - D) log(1 - q)``, ``D`` the flipped bits."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        j = np.asarray(reports["j"]).astype(np.int64, copy=False)
        bits = np.asarray(reports["bits"])
        h = self.family(j, xv)
        at_h = ((bits[np.arange(j.shape[0]), h >> 3] >> (h & 7).astype(np.uint8)) & 1).astype(np.int64)
        ones = np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
        flipped = ones - at_h + (1 - at_h)  # every 1 off h was flipped; the bit at h was flipped iff 0
        return -math.log(self.k) + flipped * math.log(self.q) + (self.m - flipped) * math.log1p(-self.q)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[j, v~ | x]`` (underflows to 0 for m >~ 1000 at small eps: use :meth:`log_probabilities`)."""
        return np.exp(self.log_probabilities(reports, x))

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", effective_epsilon={self.effective_epsilon:.12g})"
