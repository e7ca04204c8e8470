"""The hash family, estimator and variance shared by Apple's Count Mean Sketch (CMS,
:mod:`shuffledp.local.count_mean_sketch`) and Hadamard Count Mean Sketch (HCMS,
:mod:`shuffledp.local.hadamard_count_mean_sketch`).

Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine
Learning Journal 1(8), 2017 (algorithms A_client-CMS / sketch-CMS, A_client-HCMS / sketch-HCMS),
(the algorithms as published there; the hash family and the variance below are ours).

Hash family
-----------
The ``k`` public hash functions ``h_l : [d] -> [m]`` are **simple tabulation hashes** drawn from
``hash_seed`` (numpy PCG64): the input ``x`` is cut into ``c`` characters of ``b`` bits and
``h_l(x) = (T_l[0][x_0] + ... + T_l[c-1][x_{c-1}]) mod m`` with independent uniform table entries
in ``[m]``. Simple tabulation is exactly **3-wise independent** with uniform values (Patrascu and
Thorup 2012; the usual argument holds in any abelian group, here Z_m), and the ``k`` functions
have independent tables. Over the draw of the family therefore, for distinct ``x, x', x''``,
``Pr[h_l(x) = h_l(x')] = 1/m`` and ``Pr[h_l(x) = h_l(x') = h_l(x'')] = 1/m^2`` exactly, which is
all the paper's unbiasedness argument and the closed-form variance below use. Client and server
evaluate the same tables (one gather per character, vectorized over users). Apple's own hash
construction is not public; this family is ours.

Estimator and the sketch-collision correction
---------------------------------------------
For item ``x`` let ``T(x) = (1/k) sum_l M[l, h_l(x)]`` be the sketch query. A user holding
``x'`` adds ``1{h_j(x') = h_j(x)}`` to ``E[T(x)]``, so ``E[T(x)] = f + (n - f)/m`` over the family
(``f`` the true count): other items' mass leaks into ``x``'s cells with the collision rate
``1/m``. The paper's correction ``f~ = m/(m-1) (T(x) - n/m)`` removes exactly that term, and we
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

Variance of one count (derived here; over users and the family), ``A = (m/(m-1))^2``,
``S2 = sum_{x' != x} n_x'^2``:

- CMS  (``c = (e^{eps/2}+1)/(e^{eps/2}-1)``):
  ``A [n (c^2-1)/4 + (n-f)(1-1/k)(m-1)/m^2 + (1/k)(m-1)/m^2 S2]``
- HCMS (``c = (e^eps+1)/(e^eps-1)``):
  ``A [f (c^2-1) + (n-f)(c^2 - 1/m^2 - (1/k)(m-1)/m^2) + (1/k)(m-1)/m^2 S2]``

Sufficient statistics are integers, so merging is exact: CMS keeps the number of +1 bits per
(hash index, column) and the number of users per hash index (``(k, m+1)`` int64); HCMS keeps the
sum of the reported signs per (hash index, Hadamard row) (``(k, m)`` int64). The paper's
real-valued sketch ``M`` is a fixed linear function of them (:meth:`sketch`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.validation import check_int_values, check_positive_int
from .base import FrequencyOracle, check_n

__all__ = ["draw_hash_seed", "HashFamily", "TabulationHashFamily", "ExplicitHashFamily", "grouped_bit_sums", "CountMeanSketchBase",
           "MAX_DOMAIN", "MAX_EXACT_D"]

#: Largest domain the tabulation family accepts (inputs are cut into <= 4 characters of 8 bits).
MAX_DOMAIN = 1 << 32
#: Cells of a dense intermediate (hash indices x items) on the query path.
_CELLS = 1 << 22
#: Rows per block of :func:`grouped_bit_sums` (byte-lane counts <= 255) and rows per chunk.
_BLOCK = 255
_GBS_CHUNK = 64 * _BLOCK
_NIBBLE = np.uint64(0x1111111111111111)
_LOW4 = np.uint64(0x0F0F0F0F0F0F0F0F)
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

    def rows_all_items(self, rows: np.ndarray) -> np.ndarray:
        """``h_l(x)`` for the hash indices ``rows`` and every item: ``(len(rows), d)`` integers."""
        return self(np.asarray(rows, dtype=np.int64)[:, None], np.arange(self.d, dtype=np.int64)[None, :])

    def query(self, G: np.ndarray) -> np.ndarray:
        """``sum_l G[l, h_l(x)]`` for every item ``x`` (float64), chunked over hash indices."""
        if self.k * self.d <= _CELLS:
            return np.take_along_axis(G, self.all_items(), axis=1).sum(axis=0, dtype=np.float64)
        return self.query_many(np.asarray(G)[None])[0]

    def query_many(self, Gs: np.ndarray) -> np.ndarray:
        """``sum_l Gs[g, l, h_l(x)]`` for every matrix ``g`` and item ``x``: ``(len(Gs), d)`` float64.

        The hash values are computed once for all the matrices (chunks of hash indices). For
        non-negative integer matrices whose per-item sums fit side by side in 63 bits (each
        below ``2^b``, ``b`` the bit length of ``sum_l max_c Gs[g, l, c]``, the largest sum any item
        can have), the matrices are packed into one int64 matrix ``sum_g Gs[g] << (g b)``: one
        gather sums all of them exactly (a field never carries into the next).
        """
        Gs = np.asarray(Gs)
        n_g = Gs.shape[0]
        out = np.zeros((n_g, self.d), dtype=np.float64)
        if n_g == 0:
            return out
        packed, width = None, 0
        if np.issubdtype(Gs.dtype, np.integer) and Gs.size and int(Gs.min()) >= 0:
            width = max(1, max(int(v) for v in Gs.max(axis=2).sum(axis=1)).bit_length())
            if n_g > 1 and n_g * width <= 63:
                shifts = (width * np.arange(n_g, dtype=np.int64))[:, None, None]
                packed = (Gs.astype(np.int64) << shifts).sum(axis=0)
        rows = max(1, _CELLS // self.d)
        for lo in range(0, self.k, rows):  # chunks of hash indices
            hi = min(self.k, lo + rows)
            H = self.rows_all_items(np.arange(lo, hi))
            if packed is not None:
                tot = np.take_along_axis(packed[lo:hi], H, axis=1).sum(axis=0)
                mask = (1 << width) - 1
                for g in range(n_g):  # unpack the fields
                    out[g] += (tot >> (g * width)) & mask
            else:
                for g in range(n_g):  # one gather per matrix
                    out[g] += np.take_along_axis(Gs[g, lo:hi], H, axis=1).sum(axis=0, dtype=np.float64)
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

    def rows_all_items(self, rows: np.ndarray) -> np.ndarray:
        """``h_l(x)`` for the hash indices ``rows`` and every item, ``(len(rows), d)``: when the
        character grid ``2^(c b)`` is at most twice ``d``, as sums of the tables broadcast over
        the grid (no per-item gathers); otherwise by :meth:`__call__`."""
        rows = np.asarray(rows, dtype=np.int64)
        width = 1 << self.char_bits
        if width ** self.chars > 2 * self.d:
            return super().rows_all_items(rows)
        T = self.tables[rows]  # (r, chars, width)
        acc = T[:, self.chars - 1]
        for i in range(self.chars - 2, -1, -1):  # most significant character first (C order)
            acc = acc[..., None] + T[:, i].reshape((rows.size,) + (1,) * (self.chars - 1 - i) + (width,))
        acc = acc.reshape(rows.size, -1)[:, :self.d]
        return acc & (self.m - 1) if self.m & (self.m - 1) == 0 else acc % self.m

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
                     chunk: int = _GBS_CHUNK) -> np.ndarray:
    """Number of ones per (group, bit column) of bit-packed rows: ``(n_groups, n_bits)`` int64.

    SWAR over 64-bit words, exact integer counts. The rows of every group are laid out in blocks
    of 255 rows (the last block of a group padded with zero rows, which add nothing). In a block,
    for ``j`` in 0..3, ``(w >> j) & 0x1111..1`` isolates bits ``j`` and ``j + 4`` of every byte in
    their own 4-bit fields: 15 rows add without carries between fields (<= 15; rows ``i*17 + r``,
    ``i < 15``, into partial sum ``r``), splitting the fields into byte lanes (``& 0x0F0F..0F``)
    lets the 17 partial sums of the block add without overflow (``15 * 17 = 255``). Four passes over the data count all 64 columns of a
    word (eight with one byte lane per bit); the blocks of a group are then added in int64.
    ``chunk`` rows (whole blocks, at least one) are processed at a time.
    """
    packed = np.asarray(packed)
    groups = np.asarray(groups, dtype=np.int64)
    n, nb = packed.shape
    nw = -(-nb // 8)
    out = np.zeros((n_groups, nw * 64), dtype=np.int64)
    if n == 0:
        return out[:, :n_bits]
    if int(groups.min()) < 0 or int(groups.max()) >= n_groups:
        raise ValidationError(f"groups must lie in [0, {n_groups})", parameter="groups")
    # numpy's stable sort is a radix sort for <= 16-bit integers (~10x faster than on int64)
    order = np.argsort(groups.astype(np.uint16) if n_groups <= (1 << 16) else groups, kind="stable")
    counts = np.bincount(groups, minlength=n_groups)
    blocks = -(-counts // _BLOCK)
    first_block = np.cumsum(blocks) - blocks
    n_blocks = int(blocks.sum())
    gs = groups[order]
    # padded slot of every row: its group's first block, then its rank in the group
    slot = first_block[gs] * _BLOCK + (np.arange(n) - (np.cumsum(counts) - counts)[gs])
    src = np.full(n_blocks * _BLOCK, n, dtype=np.int64)  # n marks a padding row
    src[slot] = order
    block_group = np.repeat(np.arange(n_groups), blocks)
    per = max(1, int(chunk) // _BLOCK)  # blocks per chunk
    rows_buf = np.empty((per * _BLOCK, nw * 8), dtype=np.uint8)
    direct = nb == nw * 8
    if not direct:
        rows_buf[:, nb:] = 0
        gather_buf = np.empty((per * _BLOCK, nb), dtype=np.uint8)
    t_buf = np.empty(per * _BLOCK * nw, dtype=np.uint64)
    for b0 in range(0, n_blocks, per):  # chunks of whole blocks
        b1 = min(n_blocks, b0 + per)
        nbk = b1 - b0
        s = src[b0 * _BLOCK:b1 * _BLOCK]
        pad = s == n
        rows = rows_buf[:nbk * _BLOCK]
        # np.take into a preallocated buffer: several times faster than fancy indexing and a copy
        if direct:
            np.take(packed, np.where(pad, 0, s), axis=0, out=rows)
        else:
            np.take(packed, np.where(pad, 0, s), axis=0, out=gather_buf[:rows.shape[0]])
            rows[:, :nb] = gather_buf[:rows.shape[0]]
        rows[pad] = 0
        W = rows.view(np.uint64)  # (nbk * 255, nw); padding bytes past nb are zero
        t = t_buf[:W.size].reshape(W.shape)
        bg = block_group[b0:b1]
        gfirst = np.flatnonzero(np.r_[True, bg[1:] != bg[:-1]])
        for j in range(4):  # bits j and j + 4 of every byte
            np.right_shift(W, np.uint64(j), out=t)
            np.bitwise_and(t, _NIBBLE, out=t)
            # a block's rows i*17 + r (i < 15) add into slab r: 15 rows, fields <= 15 (contiguous
            # slabs of 17 rows: about 5x faster in numpy than sums of 15 consecutive rows)
            s15 = t.reshape(nbk, 15, 17 * nw).sum(axis=1, dtype=np.uint64)
            lo = (s15 & _LOW4).reshape(nbk, 17, nw).sum(axis=1, dtype=np.uint64)  # byte lanes <= 255
            hi = ((s15 >> np.uint64(4)) & _LOW4).reshape(nbk, 17, nw).sum(axis=1, dtype=np.uint64)
            for shift, lanes in ((j, lo), (4 + j, hi)):  # lane b: bit ``shift`` of byte b
                cnt = lanes.view(np.uint8).reshape(nbk, nw * 8).astype(np.int64)
                out[bg[gfirst], shift::8] += np.add.reduceat(cnt, gfirst, axis=0)
    return out[:, :n_bits]


class CountMeanSketchBase(FrequencyOracle):
    """Shared parameters, hash family, estimator and variance of CMS and HCMS."""

    name = ""

    accepts_device = True

    def __init__(self, epsilon: float, d: int, k: int | None = None, m: int = 1024, hash_seed: int | None = None,
                 hash_table: Any = None, debias: str = "family", device: str = "cpu",
                 device_fallback: bool = False) -> None:
        super().__init__(epsilon, d)
        from ._device import resolve_device

        self.device = resolve_device(device, bool(device_fallback))
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

    def _family_query(self, G: np.ndarray) -> np.ndarray:
        """``sum_l G[l, h_l(x)]`` for every item (float64) of an integer ``(k, m)`` matrix, on
        :attr:`device`: the device sums int64 and converts once, which is bit-identical to numpy's
        float64 sum of the same integers (every partial sum is an integer of magnitude at most ``n``)."""
        if self.device == "cpu":
            return self.family.query(G)
        from ._device import table_query_device

        return table_query_device(G, self.family, self.device).astype(np.float64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """Unbiased fractions ``m/(m-1) (T(x) - n/m) / n`` for every item (sketch-CMS of the paper),
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
        Ut, h = None, None
        if self.device != "cpu":  # the hash evaluations and the scatter on the device, same draws
            from ._device import hash_on_device, row_hash_counts_add, torch_device, torch_module

            Ut = torch_module().zeros(k * m, dtype=torch_module().int64, device=torch_device(self.device))
            h = hash_on_device(self.family, self.device)
        per = max(1, _CELLS // k)
        for lo in range(0, d, per):  # chunks of items: (chunk, k) temporaries
            xs = np.arange(lo, min(d, lo + per), dtype=np.int64)
            split = rng.multinomial(counts[xs], pk)  # (chunk, k)
            if Ut is not None:
                row_hash_counts_add(Ut, h, xs, split, m)
                continue
            cell = rows[None, :] * m + self.family(rows[None, :], xs[:, None])
            U += np.rint(np.bincount(cell.ravel(), weights=split.ravel().astype(np.float64),
                                     minlength=k * m)).astype(np.int64)
        if Ut is not None:
            U = Ut.cpu().numpy()
        return U.reshape(k, m)

    def __repr__(self) -> str:
        dev = "" if self.device == "cpu" else f", device={self.device!r}"
        return (f"{type(self).__name__}(epsilon={self.epsilon:g}, d={self.d}, k={self.k}, m={self.m}, "
                f"hash_seed={self.hash_seed}{dev})")
