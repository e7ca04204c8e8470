"""Apple's Count Mean Sketch (CMS) and Hadamard Count Mean Sketch (HCMS).

Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine
Learning Journal 1(8), 2017 (algorithms A_client-CMS / sketch-CMS, A_client-HCMS / sketch-HCMS),
as reconstructed in seed 002 and spec A.7 (the paper text itself was not retrievable).

Hash family
-----------
The ``k`` public hash functions ``h_l : [d] -> [m]`` are **simple tabulation hashes** drawn from
``hash_seed`` (numpy PCG64): the input ``x`` is cut into ``c`` characters of ``b`` bits and
``h_l(x) = (T_l[0][x_0] + ... + T_l[c-1][x_{c-1}]) mod m`` with independent uniform table entries
in ``[m]``. Simple tabulation is exactly **3-wise independent** with uniform values (Patrascu and
Thorup 2012; the usual argument holds in any abelian group, here Z_m), and the ``k`` functions
have independent tables. Over the draw of the family therefore, for distinct ``x, x', x''``,
``Pr[h_l(x) = h_l(x')] = 1/m`` and ``Pr[h_l(x) = h_l(x') = h_l(x'')] = 1/m^2`` exactly, which is
all the seed's unbiasedness proof and the closed-form variance below use. Client and server
evaluate the same tables (one gather per character, vectorized over users). Apple's own hash
construction is not public [spec E.1]; this family is ours.

Estimator and the sketch-collision correction (seed 002 section 4)
---------------------------------------------------------------------
For item ``x`` let ``T(x) = (1/k) sum_l M[l, h_l(x)]`` be the sketch query. A user holding
``x'`` adds ``1{h_j(x') = h_j(x)}`` to ``E[T(x)]``, so ``E[T(x)] = f + (n - f)/m`` over the family
(``f`` the true count): other items' mass leaks into ``x``'s cells with the collision rate
``1/m``. The seed's correction ``f~ = m/(m-1) (T(x) - n/m)`` removes exactly that term, and we
return ``f~ / n`` (a fraction). It is unbiased **over the random choice of the hash family**;
for one *fixed* family the conditional mean is
``m/(m-1) (sum_x' n_x' pi_x' - n/m)`` with ``pi_x' = (1/k) #{l : h_l(x') = h_l(x)}``
(:meth:`conditional_moments`); its spread over families is the ``S2`` term of the variance.

``debias="exact"`` (opt-in, ``d <= 4096``, ``k m >= d``) removes the fixed-family bias as well:
``E[T | H] = Pi n`` with the family's collision matrix ``Pi[x, x'] = pi_x'(x)`` (``Pi = B B^T / k``,
``B`` the d x (k m) one-hot incidence of the hash values), so ``n~ = Pi^{-1} T`` is unbiased **for
this family**. Its exact variance given the family, with ``w = Pi^{-1} e_x``, is
``(c^2-1)/4 n (Pi^-1)_xx + (Pi^-1 C Pi^-1)_xx - n_x`` (CMS; ``C = B diag(B^T n) B^T / k``) and
``c^2 n (Pi^-1)_xx - n_x`` (HCMS, by Parseval). Cost: one d x d Cholesky at construction, O(d^3)
per estimate (stderr) for CMS.

Variance of one count (spec A.7, derived; over users and the family), ``A = (m/(m-1))^2``,
``S2 = sum_{x' != x} n_x'^2``:

- CMS  (``c = (e^{eps/2}+1)/(e^{eps/2}-1)``):
  ``A [n (c^2-1)/4 + (n-f)(1-1/k)(m-1)/m^2 + (1/k)(m-1)/m^2 S2]``
- HCMS (``c = (e^eps+1)/(e^eps-1)``):
  ``A [f (c^2-1) + (n-f)(c^2 - 1/m^2 - (1/k)(m-1)/m^2) + (1/k)(m-1)/m^2 S2]``

Sufficient statistics are integers, so merging is exact: CMS keeps the number of +1 bits per
(hash index, column) and the number of users per hash index (``(k, m+1)`` int64); HCMS keeps the
sum of the reported signs per (hash index, Hadamard row) (``(k, m)`` int64). The seed's
real-valued sketch ``M`` is a fixed linear function of them (:meth:`sketch`).
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_int_values, check_positive_int
from .base import DEFAULT_CHUNK, FrequencyOracle, Reports, check_n
from .bits import UNIFORM_PRECISION, calibrate_probability, dyadic
from .packed import bernoulli_packed_lazy
from .hadamard import fwht

__all__ = ["draw_hash_seed", "HashFamily", "TabulationHashFamily", "ExplicitHashFamily", "CountMeanSketch", "HadamardCountMeanSketch", "grouped_bit_sums"]

#: Largest domain the tabulation family accepts (inputs are cut into <= 4 characters of 8 bits).
MAX_DOMAIN = 1 << 32
#: Cells of a dense intermediate (hash indices x items) on the query path.
_CELLS = 1 << 22
_LANE = np.uint64(0x0101010101010101)
#: Largest domain for ``debias="exact"`` (a dense d x d inverse).
MAX_EXACT_D = 4096
_DEBIAS = ("family", "exact")


def draw_hash_seed() -> int:
    """A fresh hash-family seed from the operating system's CSPRNG: 53 random bits (an integer
    below ``2^53``, exact in every JSON reader), independent of any simulation generator."""
    return int.from_bytes(os.urandom(8), "big") >> 11


class HashFamily:
    """``k`` public hash functions ``h_l : [d] -> [m]``; subclasses define ``__call__(j, x)``."""

    k: int
    m: int
    d: int

    def __call__(self, j: Any, x: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def all_items(self) -> np.ndarray:
        """The ``(k, d)`` table of every ``h_l(x)`` (cached; only for ``k d <= 2^22``)."""
        if getattr(self, "_all", None) is None:
            if self.k * self.d > _CELLS:
                raise ValidationError("the full (k, d) hash table is too large; use query()", parameter="k")
            self._all = self(np.arange(self.k)[:, None], np.arange(self.d)[None, :])
        return self._all

    def query(self, G: np.ndarray) -> np.ndarray:
        """``sum_l G[l, h_l(x)]`` for every item ``x`` (float64), chunked over hash indices."""
        if self.k * self.d <= _CELLS:
            return np.take_along_axis(G, self.all_items(), axis=1).sum(axis=0, dtype=np.float64)
        items = np.arange(self.d, dtype=np.int64)
        out = np.zeros(self.d, dtype=np.float64)
        rows = max(1, _CELLS // self.d)
        for lo in range(0, self.k, rows):  # chunks of hash indices
            ls = np.arange(lo, min(self.k, lo + rows))
            H = self(ls[:, None], items[None, :])
            out += np.take_along_axis(G[lo:lo + ls.size], H, axis=1).sum(axis=0, dtype=np.float64)
        return out

    def collision_fractions(self, x: int) -> np.ndarray:
        """``pi_x'(H) = (1/k) #{l : h_l(x') = h_l(x)}`` for every ``x'`` (``pi_x = 1``)."""
        items = np.arange(self.d, dtype=np.int64)
        out = np.zeros(self.d, dtype=np.float64)
        rows = max(1, _CELLS // self.d)
        for lo in range(0, self.k, rows):  # chunks of hash indices
            ls = np.arange(lo, min(self.k, lo + rows))
            H = self(ls[:, None], items[None, :])
            out += (H == H[:, [x]]).sum(axis=0)
        return out / self.k


class TabulationHashFamily(HashFamily):
    """``k`` simple tabulation hash functions ``[d] -> [m]`` drawn from ``seed``.

    ``x`` (``< 2^w``, ``w = ceil(log2 d)``) is cut into ``c = ceil(w / 8)`` characters of
    ``b = ceil(w / c)`` bits; ``h_l(x) = sum_i T[l, i, char_i(x)] mod m``. Exactly 3-wise
    independent with uniform values over the draw of the tables. Memory ``4 k c 2^b`` bytes.
    """

    def __init__(self, k: int, m: int, d: int, seed: int) -> None:
        self.k, self.m, self.d = int(k), int(m), int(d)
        if self.d > MAX_DOMAIN:
            raise ValidationError(f"d must be <= 2^32 for the tabulation hash, got {self.d}", parameter="d")
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValidationError(f"hash_seed must be a non-negative integer, got {seed!r}", parameter="hash_seed")
        self.seed = int(seed)
        w = max(1, (self.d - 1).bit_length())
        self.chars = -(-w // 8)
        self.char_bits = -(-w // self.chars)
        width = 1 << self.char_bits
        dtype = np.int32 if self.m <= (1 << 31) // max(1, self.chars) else np.int64
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0xA991E, self.k, self.m, self.d]))
        self.tables = rng.integers(0, self.m, size=(self.k, self.chars, width), dtype=dtype)
        self._flat = self.tables.reshape(-1)
        self._all: np.ndarray | None = None

    def __call__(self, j: Any, x: Any) -> np.ndarray:
        """``h_j(x)`` (int64), ``j`` and ``x`` broadcast against each other."""
        j = np.asarray(j, dtype=np.int64)
        x = np.asarray(x, dtype=np.int64)
        width = 1 << self.char_bits
        base = j * (self.chars * width)
        mask = width - 1
        h = np.zeros(np.broadcast_shapes(j.shape, x.shape), dtype=np.int64)
        for i in range(self.chars):  # <= 4 characters, each a vectorized gather
            h += self._flat[base + (i * width) + ((x >> (i * self.char_bits)) & mask)]
        return h % self.m


class ExplicitHashFamily(HashFamily):
    """A hash family given as an explicit ``(k, d)`` table of values in ``[m]`` (e.g. another
    deployment's functions, or worked examples). Unbiasedness over families does not apply:
    use ``conditional_moments`` of the mechanism."""

    def __init__(self, table: Any, m: int) -> None:
        t = np.asarray(table)
        if t.ndim != 2 or not np.issubdtype(t.dtype, np.integer) or t.size == 0 or t.min() < 0 or t.max() >= m:
            raise ValidationError(f"hash_table must be a (k, d) integer array with values in [0, {m})",
                                  parameter="hash_table")
        self.table = t.astype(np.int64)
        self.k, self.d = t.shape
        self.m = int(m)
        self.seed = None
        self._all = self.table

    def __call__(self, j: Any, x: Any) -> np.ndarray:
        return self.table[np.asarray(j, dtype=np.int64), np.asarray(x, dtype=np.int64)]


def grouped_bit_sums(packed: np.ndarray, groups: np.ndarray, n_groups: int, n_bits: int,
                     chunk: int = DEFAULT_CHUNK) -> np.ndarray:
    """Number of ones per (group, bit column) of bit-packed rows: ``(n_groups, n_bits)`` int64.

    Rows are sorted by group; within a chunk, bit ``b`` of every byte is isolated 8 bytes at a
    time in uint64 words (``(w >> b) & 0x0101..01``) and summed over segments of at most 255
    rows of one group (each byte lane then holds a count <= 255, so lanes never carry).
    """
    packed = np.asarray(packed)
    groups = np.asarray(groups, dtype=np.int64)
    n, nb = packed.shape
    nw = -(-nb // 8)
    out = np.zeros((n_groups, nw * 64), dtype=np.int64)
    if n == 0:
        return out[:, :n_bits]
    if n and (int(groups.min()) < 0 or int(groups.max()) >= n_groups):
        raise ValidationError(f"groups must lie in [0, {n_groups})", parameter="groups")
    # numpy's stable sort is a radix sort for <= 16-bit integers (~10x faster than on int64)
    order = np.argsort(groups.astype(np.uint16) if n_groups <= (1 << 16) else groups, kind="stable")
    gs = groups[order]
    for lo in range(0, n, chunk):  # chunks of rows (sorted by group)
        idx = order[lo:lo + chunk]
        g = gs[lo:lo + chunk]
        r = g.size
        rows = np.zeros((r, nw * 8), dtype=np.uint8)
        rows[:, :nb] = packed[idx]
        W = rows.view(np.uint64)
        pos = np.arange(r)
        change = np.ones(r, dtype=bool)
        change[1:] = g[1:] != g[:-1]
        run_start = np.maximum.accumulate(np.where(change, pos, 0))
        starts = np.flatnonzero(change | ((pos - run_start) % 255 == 0))
        seg_group = g[starts]
        gfirst = np.flatnonzero(np.r_[True, seg_group[1:] != seg_group[:-1]])
        lanes = np.empty_like(W)
        for b in range(8):  # bit b of every byte
            np.right_shift(W, np.uint64(b), out=lanes)
            np.bitwise_and(lanes, _LANE, out=lanes)
            S = np.add.reduceat(lanes, starts, axis=0)
            cnt = S.view(np.uint8).reshape(starts.size, nw * 8).astype(np.int64)
            out[seg_group[gfirst], b::8] += np.add.reduceat(cnt, gfirst, axis=0)
    return out[:, :n_bits]


class _CountMeanSketchBase(FrequencyOracle):
    """Shared parameters, hash family, estimator and variance of CMS and HCMS."""

    name = ""

    def __init__(self, epsilon: float, d: int, k: int | None = None, m: int = 1024, hash_seed: int | None = None,
                 hash_table: Any = None, debias: str = "family") -> None:
        super().__init__(epsilon, d)
        if debias not in _DEBIAS:
            raise ValidationError(f"debias must be one of {_DEBIAS}, got {debias!r}", parameter="debias")
        self.debias = debias
        self.m = check_positive_int(m, "m", minimum=2)
        if hash_table is not None:
            family: HashFamily = ExplicitHashFamily(hash_table, self.m)
            if family.d != self.d or (k is not None and check_positive_int(k, "k") != family.k):
                raise ValidationError(f"hash_table must have shape (k, d={self.d}), got {family.table.shape}",
                                      parameter="hash_table")
            self.k = family.k
        else:
            self.k = check_positive_int(256 if k is None else k, "k")
        if self.k > (1 << 24) or self.m > (1 << 24):
            raise ValidationError(f"k and m must be <= 2^24, got k={self.k}, m={self.m}", parameter="k")
        if hash_table is None:
            family = TabulationHashFamily(self.k, self.m, self.d, draw_hash_seed() if hash_seed is None else hash_seed)
        self.family = family
        self.hash_seed = family.seed
        self.A = (self.m / (self.m - 1)) ** 2
        self._exact: dict[str, Any] | None = None
        if debias == "exact":
            if self.d > MAX_EXACT_D:
                raise ValidationError(f"debias='exact' needs d <= {MAX_EXACT_D} (a d x d solve), got {self.d}",
                                      parameter="debias")
            if self.k * self.m < self.d:
                raise ValidationError(f"debias='exact' needs k * m >= d (k={self.k}, m={self.m}, d={self.d})",
                                      parameter="debias")
            self._exact_state()  # fail now (singular family), not at the first estimate

    # --- exact (fixed-family) debiasing -----------------------------------------------
    def _exact_state(self) -> dict[str, Any]:
        """One-hot incidence ``B`` (d x k m), collision matrix ``Pi = B B^T / k`` and ``Pi^-1``."""
        if self._exact is None:
            from scipy import sparse

            d, k, m = self.d, self.k, self.m
            items = np.arange(d, dtype=np.int64)
            rows_per = max(1, _CELLS // d)
            cols = np.empty((k, d), dtype=np.int64)
            for lo in range(0, k, rows_per):  # chunks of hash indices
                ls = np.arange(lo, min(k, lo + rows_per))
                cols[lo:lo + ls.size] = ls[:, None] * m + self.family(ls[:, None], items[None, :])
            B = sparse.csr_matrix((np.ones(k * d), (np.tile(items, k), cols.ravel())), shape=(d, k * m))
            Pi = (B @ B.T).toarray() / k
            from scipy import linalg

            try:
                Pinv = linalg.cho_solve(linalg.cho_factor(Pi, lower=True), np.eye(d))
            except linalg.LinAlgError:
                raise ValidationError(f"debias='exact': the family's collision matrix is singular: some items "
                                      f"are not separated by the k = {k} hash functions; increase k or m",
                                      parameter="debias") from None
            if not np.all(np.isfinite(Pinv)) or np.diag(Pinv).max() > 1e12:
                raise ValidationError("debias='exact': the family's collision matrix is numerically singular; "
                                      "increase k or m", parameter="debias")
            self._exact = {"B": B, "cols": cols, "Pi": Pi, "Pinv": (Pinv + Pinv.T) / 2}
        return self._exact

    def collision_matrix(self) -> np.ndarray:
        """``Pi[x, x'] = (1/k) #{l : h_l(x) = h_l(x')}`` (``E[T] = Pi n`` for the sketch query ``T``)."""
        if self.d > MAX_EXACT_D:
            raise ValidationError(f"collision_matrix needs d <= {MAX_EXACT_D}", parameter="d")
        if self._exact is None and self.debias != "exact":
            from scipy import sparse

            H = self.family(np.arange(self.k)[:, None], np.arange(self.d)[None, :])
            B = sparse.csr_matrix((np.ones(H.size), (np.tile(np.arange(self.d), self.k),
                                                    (np.arange(self.k)[:, None] * self.m + H).ravel())),
                                  shape=(self.d, self.k * self.m))
            return (B @ B.T).toarray() / self.k
        return self._exact_state()["Pi"].copy()

    def _exact_count_variances(self, counts: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """Exact variance of every item's count estimate ``Pi^-1 T`` given the family and the counts."""
        raise NotImplementedError

    def _exact_variance_uniform_rest(self, n: int, f: float) -> float:  # pragma: no cover - abstract
        """Mean over items of the exact fixed-family variance when the item holds ``n f`` users and
        the other users are spread evenly over the other items."""
        raise NotImplementedError

    # --- analyzer ---------------------------------------------------------------------
    def _query(self, statistic: np.ndarray, n: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """Unbiased fractions ``m/(m-1) (T(x) - n/m) / n`` for every item (seed 002 section 2.2),
        or ``Pi^{-1} T / n`` with ``debias="exact"``.

        ``stderr`` is the closed-form standard deviation at the estimates clipped to [0, 1]
        (``S2``, or the counts of the exact formula, from the clipped estimates).
        """
        n = check_n(n)
        T = self._query(statistic, n)
        extra = {"k": self.k, "m": self.m, "hash_seed": self.hash_seed, "debias": self.debias}
        if self.debias == "exact":
            st = self._exact_state()
            f = st["Pinv"] @ T / n
            fc = np.clip(f, 0.0, 1.0)
            var = self._exact_count_variances(fc * n) / n**2
            return Estimate(f, np.sqrt(np.maximum(var, 0.0)), n, self.privacy(), "frequency", extra=extra)
        f = (self.m / (self.m - 1)) * (T - n / self.m) / n
        fc = np.clip(f, 0.0, 1.0)
        s2 = np.maximum(min(1.0, float(np.sum(fc**2))) - fc**2, 0.0)
        var = self._count_variance(n, fc * n, s2 * n * n) / n**2
        return Estimate(f, np.sqrt(np.maximum(var, 0.0)), n, self.privacy(), "frequency", extra=extra)

    def _count_variance(self, n: float, f: Any, s2: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def variance(self, n: int | None = None, value: float = 0.0, sum_sq: float | None = None) -> float:
        """Variance of one fraction estimate over users and the hash family.

        ``sum_sq`` is ``sum_{x' != x} f_x'^2`` over the *other* items (the hash-collision term);
        default ``(1 - value)^2 / (d - 1)``: the other users spread evenly over the other items.
        With ``debias="exact"``: the exact variance given this family, averaged over items, when the
        item holds ``n value`` users and the others are spread evenly (``sum_sq`` is not used).
        """
        n = check_n(n)
        if self.debias == "exact":
            return self._exact_variance_uniform_rest(n, value)
        if sum_sq is None:
            sum_sq = (1.0 - value) ** 2 / (self.d - 1)
        return float(self._count_variance(n, value * n, sum_sq * n * n)) / n**2

    def variances(self, n: int, freqs: Any) -> np.ndarray:
        """Variance of every item's fraction estimate for the true distribution ``freqs``
        (over the family; given the family with ``debias="exact"``)."""
        n = check_n(n)
        fr = np.asarray(freqs, dtype=np.float64)
        if fr.shape != (self.d,):
            raise ValidationError(f"freqs must have shape ({self.d},), got {fr.shape}", parameter="freqs")
        if self.debias == "exact":
            return self._exact_count_variances(fr * n) / n**2
        s2 = float(np.sum(fr**2)) - fr**2
        return self._count_variance(n, fr * n, s2 * n * n) / n**2

    def _conditional_per_user(self, pi: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def conditional_moments(self, true_counts: Any, x: int) -> tuple[float, float]:
        """Mean and variance of item ``x``'s fraction estimate **given this hash family**.

        Mean ``m/(m-1) (sum_x' n_x' pi_x' - n/m) / n``; variance ``A sum_u v(pi_u) / n^2`` with
        ``v(pi) = (c^2-1)/4 + pi (1 - pi)`` (CMS) or ``c^2 - pi^2`` (HCMS), ``pi`` from
        :meth:`TabulationHashFamily.collision_fractions`. Over a random family the mean is the
        true fraction and the variance averages to :meth:`variance`.
        """
        c = self.check_counts(true_counts)
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        n = int(c.sum())
        if self.debias == "exact":  # unbiased given the family; variance exact given the family
            return float(c[xv]) / n, float(self._exact_count_variances(c.astype(np.float64))[xv]) / n**2
        pi = self.family.collision_fractions(xv)
        mean = (self.m / (self.m - 1)) * (float(c @ pi) - n / self.m) / n
        var = self.A * float(c @ self._conditional_per_user(pi)) / n**2
        return mean, var

    # --- exact simulation --------------------------------------------------------------
    def _row_hash_counts(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``U[j, h]``: users whose hash index is ``j`` and whose ``h_j(x) = h``, ``(k, m)`` int64.

        Every user draws ``j`` uniformly and independently, so item ``x``'s ``n_x`` users split
        Multinomial(n_x, 1/k) over the hash indices; those in row ``j`` all hash to ``h_j(x)``.
        Cost O(k d) (items in chunks), independent of n.
        """
        k, m, d = self.k, self.m, self.d
        rows = np.arange(k, dtype=np.int64)
        pk = np.full(k, 1.0 / k)
        U = np.zeros(k * m, dtype=np.int64)
        per = max(1, _CELLS // k)
        for lo in range(0, d, per):  # chunks of items: (chunk, k) temporaries
            xs = np.arange(lo, min(d, lo + per), dtype=np.int64)
            split = rng.multinomial(counts[xs], pk)  # (chunk, k)
            cell = rows[None, :] * m + self.family(rows[None, :], xs[:, None])
            U += np.rint(np.bincount(cell.ravel(), weights=split.ravel().astype(np.float64),
                                     minlength=k * m)).astype(np.int64)
        return U.reshape(k, m)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(epsilon={self.epsilon:g}, d={self.d}, k={self.k}, m={self.m}, "
                f"hash_seed={self.hash_seed})")


class CountMeanSketch(_CountMeanSketchBase):
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

    Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", 2017; seed 002.
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
        ``"family"`` (default): the seed's estimator ``m/(m-1) (T - n/m)``, unbiased over the draw
        of the hash family, variance with the hash-collision term. ``"exact"``: ``Pi^{-1} T`` with the
        family's collision matrix, unbiased for this fixed family (``d <= 4096``, ``k m >= d``).
    """

    name = "cms"

    def __init__(self, epsilon: float, d: int, k: int | None = None, m: int = 1024, hash_seed: int | None = None,
                 precision: int | None = None, hash_table: Any = None, debias: str = "family") -> None:
        super().__init__(epsilon, d, k, m, hash_seed, hash_table, debias)
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
        out[:, :self.m] = grouped_bit_sums(reports["bits"], j, self.k, self.m)
        out[:, self.m] = np.bincount(j, minlength=self.k)
        return out

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
        """The seed's real-valued sketch ``M = sum_i k ((c/2) v~_i + 1/2)`` (rows by ``j``)."""
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
        return self.c * self.family.query(stat[:, :self.m]) - (self.c - 1) * n / 2

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


class HadamardCountMeanSketch(_CountMeanSketchBase):
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
    2017; seed 002. Variance: see the module docstring.
    Cost: O(n) encode, O(n) aggregate (a bincount), O(k m log m + k d) estimate;
    ``1 + ceil(log2 k) + log2 m`` bits per report. ``m`` must be a power of 2.

    Parameters
    ----------
    epsilon, d, k, m, hash_seed, hash_table, debias
        As :class:`CountMeanSketch` (``m`` a power of 2).
    """

    name = "hcms"

    def __init__(self, epsilon: float, d: int, k: int | None = None, m: int = 1024, hash_seed: int | None = None,
                 hash_table: Any = None, debias: str = "family") -> None:
        mm = check_positive_int(m, "m", minimum=2)
        if mm & (mm - 1):
            raise ValidationError(f"m must be a power of 2 for HCMS, got {mm}", parameter="m")
        super().__init__(epsilon, d, k, m, hash_seed, hash_table, debias)
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
        pos = np.bincount(cell[w > 0], minlength=self.k * self.m)
        tot = np.bincount(cell, minlength=self.k * self.m)
        return (2 * pos - tot).astype(np.int64).reshape(self.k, self.m)

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
        """The seed's sketch ``M = M_H H_m`` with ``M_H = k c (sum of signs)``."""
        stat = self._check_statistic(statistic).astype(np.int64)
        return self.k * self.c * fwht(stat, axis=1).astype(np.float64)

    def _query(self, statistic: np.ndarray, n: int) -> np.ndarray:
        stat = self._check_statistic(statistic).astype(np.int64)
        W = fwht(stat, axis=1)  # exact integers
        return self.c * self.family.query(W)

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
