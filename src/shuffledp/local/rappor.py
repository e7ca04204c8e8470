"""Full RAPPOR (Erlingsson, Pihur, Korolova, CCS 2014): Bloom filter, cohorts, permanent and
instantaneous randomized response, regression decoding for a candidate set.

Client (one user, value ``v``, cohort ``c`` fixed per user)
-----------------------------------------------------------
1. Bloom filter ``B`` of ``k`` bits: ``B[H_t(c, v)] = 1`` for the ``h`` public hash functions
   ``H_t`` (``t < h``; two of them may coincide, then ``B`` has fewer than ``h`` ones).
2. Permanent randomized response (PRR), **memoized per (user, value)**:
   ``B'_i = 1`` w.p. ``f/2``, ``0`` w.p. ``f/2``, ``B_i`` w.p. ``1 - f``.
3. Instantaneous randomized response (IRR), fresh for every report:
   ``S_i = 1`` w.p. ``q`` if ``B'_i = 1`` and w.p. ``p`` if ``B'_i = 0``. The report is ``(c, S)``.

Per bit, ``q11 = P(S_i = 1 | B_i = 1) = q (1 - f/2) + p f/2`` and
``p01 = P(S_i = 1 | B_i = 0) = p (1 - f/2) + q f/2``.

Privacy
-------
* Longitudinal (any number of reports of the same value): the PRR output is
  ``eps_inf = 2 h ln((1 - f/2) / (f/2))``-LDP (two Bloom filters differ in at most ``2h`` bits).
  ``epsilon`` given to the constructor is this bound: ``f = 2 / (1 + e^{eps / (2h)})`` rounded
  **up** to the ``2^-20`` grid, so the realised ``epsilon_inf`` is ``<= epsilon``.
* One report: ``eps_1 = h |ln(q11 (1 - p01) / (p01 (1 - q11)))|`` (``<= eps_inf``).

Analyzer
--------
Statistic: an ``(m, k + 1)`` int64 array, per cohort ``j`` the ``k`` bit counts ``c_ji`` and, in
the last column, the cohort size ``N_j`` (mergeable by addition). Debiased Bloom-bit fractions
``y_ji = (c_ji - p01 N_j) / ((q11 - p01) N_j)`` satisfy ``E[y_j] = X_j r_j`` with ``X_j`` the
``k x M`` 0/1 design of cohort ``j`` over the candidate set and ``r_j`` the candidates' fractions
within cohort ``j`` (``E r_j = f`` since cohorts are data independent). Decoding:

* ``decode="ols"`` (default): ``f_hat = (X^T X)^{-1} X^T y`` over the stacked non-empty cohorts.
  Exactly unbiased when every item with positive frequency is a candidate (default: all ``d``
  items); otherwise omitted items bias the result (as in any regression).
* ``decode="nnls"``: non-negative least squares (:func:`scipy.optimize.nnls`), the constrained
  fit of ``google/rappor``'s ``decode.R`` (without its Lasso pre-selection); biased, reported
  with the OLS standard errors as an approximation.

Variance of the OLS estimate (derived in docs/local-rappor.md) has two parts:
``Var = sum_{ji} A_{s,ji}^2 [p01(1-p01) + (X_j f)_i kappa] m / (n Delta^2)`` (bit noise, given the
cohort assignment; ``kappa = q11(1-q11) - p01(1-p01)``, ``Delta = q11 - p01``) plus the cohort
sampling term ``(1/n) [m sum_j (B_j^2 f - (B_j f)^2) - f (1 - f)]`` with ``B_j = A_j X_j``
(first order in ``m / n``). ``Estimate.stderr`` evaluates both at the clipped estimate.

Source: Erlingsson, Pihur, Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving Ordinal
Response", CCS 2014; ``google/rappor`` (``client/python/rappor.py``, ``analysis/R/decode.R``).
Differences from the reference client: a vectorised 64-bit mixing hash replaces MD5, and the PRR
coins come from the caller's generator plus a memo table instead of HMAC-SHA256(secret, v).
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..core.validation import check_int_values, check_positive_int, check_probability
from .base import DEFAULT_CHUNK, FrequencyOracle, Reports, check_n
from .bits import bernoulli_packed, dyadic, packed_column_sums, unpack_rows

__all__ = ["Rappor", "rappor_f_for_epsilon", "bloom_hash"]

#: Grid of the PRR probability f (and of p, q): multiples of 2^-PRECISION.
PRECISION = 20
#: 50-digit arithmetic for the exact eps_inf <= epsilon check.
_DEC = Context(prec=50)

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array (a bijection with full avalanche)."""
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def bloom_hash(cohorts: Any, values: Any, h: int, k: int, seed: int = 0) -> np.ndarray:
    """Bloom positions ``H_t(c, v)`` for ``t < h``: an ``(n, h)`` int64 array in ``[0, k)``.

    ``H_t(c, v) = mix64(mix64(seed + golden) XOR (c << 32 | (v h + t))) mod k``; public,
    deterministic, vectorised. ``c < 2^31`` and ``v h + t < 2^32`` are required.
    """
    c = np.asarray(cohorts, dtype=np.int64).astype(np.uint64)
    v = np.asarray(values, dtype=np.int64).astype(np.uint64)
    s = _mix64(np.asarray([seed], dtype=np.uint64) + _GOLDEN)[0]
    t = np.arange(h, dtype=np.uint64)
    key = (c[:, None] << np.uint64(32)) | (v[:, None] * np.uint64(h) + t[None, :])
    return (_mix64(key ^ s) % np.uint64(k)).astype(np.int64)


def rappor_f_for_epsilon(epsilon: float, h: int, precision: int = PRECISION) -> float:
    """Smallest ``f`` on the ``2^-precision`` grid with ``2 h ln((1 - f/2) / (f/2)) <= epsilon``."""
    raw = 2.0 / (1.0 + math.exp(epsilon / (2.0 * h)))
    f = dyadic(min(1.0, raw), precision, "up")
    step = 2.0**-precision
    while f < 1.0 and not _eps_inf_within(f, h, epsilon):  # exact check (at most one step in practice)
        f = min(1.0, f + step)
    return f


def _eps_inf_within(f: float, h: int, epsilon: float) -> bool:
    """Whether ``2 h ln((1 - f/2)/(f/2)) <= epsilon`` for a dyadic ``f``, decided exactly.

    ``f = a / 2^K`` makes the ratio ``(2^(K+1) - a) / a`` an exact rational; its logarithm is taken
    to 50 significant digits (:mod:`decimal`) and compared with the exact binary value of
    ``epsilon``. ``ln`` of a rational other than 1 is transcendental, so it never equals a float, and
    50 digits decide every comparison a float can pose. No float logarithm decides it.
    """
    if f >= 1.0:
        return True
    if f <= 0.0:
        return False
    ratio = (2 - Fraction(f)) / Fraction(f)
    ln = _DEC.ln(Decimal(ratio.numerator)) - _DEC.ln(Decimal(ratio.denominator))
    return _DEC.multiply(2 * h, ln) <= Decimal(epsilon)


def _eps_inf(f: float, h: int) -> float:
    if f <= 0.0:
        return math.inf
    if f >= 1.0:
        return 0.0
    return 2.0 * h * math.log((1.0 - f / 2.0) / (f / 2.0))


class _PermanentMemo:
    """Client-side state: each user's cohort and the memoized PRR bits per (user, value).

    Stored as sorted key arrays so look-ups and inserts are vectorised (searchsorted).
    """

    def __init__(self) -> None:
        self.user_keys = np.zeros(0, dtype=np.int64)
        self.user_cohort = np.zeros(0, dtype=np.int64)
        self.keys = np.zeros(0, dtype=np.int64)
        self.prr: np.ndarray | None = None

    @staticmethod
    def _find(sorted_keys: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.searchsorted(sorted_keys, q)
        idx_c = np.minimum(idx, max(sorted_keys.size - 1, 0))
        found = (idx < sorted_keys.size) & (sorted_keys[idx_c] == q) if sorted_keys.size else np.zeros(q.size, bool)
        return idx_c, found

    def cohorts(self, users: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
        idx, found = self._find(self.user_keys, users)
        out = np.where(found, self.user_cohort[idx] if self.user_keys.size else 0, -1)
        if not found.all():
            new, inv = np.unique(users[~found], return_inverse=True)
            coh = rng.integers(0, m, size=new.size)
            out[~found] = coh[inv]
            keys = np.concatenate([self.user_keys, new])
            order = np.argsort(keys, kind="stable")
            self.user_keys = keys[order]
            self.user_cohort = np.concatenate([self.user_cohort, coh])[order]
        return out.astype(np.int64)

    def prr_bits(self, keys: np.ndarray, make: Any) -> np.ndarray:
        """Memoized PRR rows for ``keys``; ``make(unique_new_keys_index) -> packed rows``."""
        idx, found = self._find(self.keys, keys)
        if not found.all():
            new, first, inv = np.unique(keys[~found], return_index=True, return_inverse=True)
            rows = make(np.flatnonzero(~found)[first])
            all_keys = np.concatenate([self.keys, new])
            all_rows = rows if self.prr is None else np.concatenate([self.prr, rows])
            order = np.argsort(all_keys, kind="stable")
            self.keys, self.prr = all_keys[order], all_rows[order]
            idx, found = self._find(self.keys, keys)
        assert self.prr is not None
        return self.prr[idx]


class _Design:
    """Regression design over a candidate set and the non-empty cohorts, with cached factors."""

    def __init__(self, positions: np.ndarray, cands: np.ndarray, rows: np.ndarray, k: int, m: int) -> None:
        from scipy import linalg

        self.cands, self.rows, self.k, self.m = cands, rows, k, m
        M, mr = cands.size, rows.size
        pos = positions[rows][:, cands, :]  # (mr, M, h)
        self.pos = pos
        from scipy import sparse

        h = pos.shape[2]
        # distinct Bloom bits of each (cohort, candidate): a repeated hash sets the same bit once
        dup = np.zeros(pos.shape, dtype=bool)
        for t in range(1, h):  # h is a small constant
            dup[:, :, t] = (pos[:, :, :t] == pos[:, :, t:t + 1]).any(axis=2)
        jj = np.broadcast_to(np.arange(mr)[:, None, None], pos.shape)
        ss = np.broadcast_to(np.arange(M)[None, :, None], pos.shape)
        keep = ~dup
        Xs = sparse.csr_matrix((np.ones(int(keep.sum())), ((jj * k + pos)[keep], ss[keep])), shape=(mr * k, M))
        X = np.zeros((mr, k, M))
        X[jj[keep], pos[keep], ss[keep]] = 1.0
        self.X = X
        G = (Xs.T @ Xs).toarray()
        w = np.linalg.eigvalsh(G)
        if w[0] <= 1e-9 * max(w[-1], 1.0):
            raise ValidationError(
                f"the RAPPOR design over {M} candidates and {mr} non-empty cohorts of k={k} bits is rank "
                f"deficient (smallest eigenvalue {w[0]:.3g} of X^T X): increase k or m, or shrink the candidate set",
                parameter="candidates")
        self.Ginv = linalg.cho_solve(linalg.cho_factor(G), np.eye(M))
        self.A = np.ascontiguousarray(np.asarray(Xs @ self.Ginv).T).reshape(M, mr, k)  # f_hat = A . y
        self.A2 = self.A**2
        # Q[s, s'] = m sum_j B_j[s, s']^2 with B_j = A_j X_j: column s' of B_j is the sum of A_j's
        # columns at the distinct Bloom bits of s' (a gather, O(h M^2) per cohort)
        Q = np.zeros((M, M))
        for j in range(mr):  # loop over cohorts (m <= a few hundred)
            Aj = self.A[:, j, :]
            Bj = Aj[:, pos[j, :, 0]].copy()
            for t in range(1, h):
                Bj += Aj[:, pos[j, :, t]] * keep[j, :, t]
            Q += Bj * Bj
        self.Q = m * Q

    def item_coefficients(self) -> dict[str, np.ndarray]:
        """Per-candidate, distribution-free coefficients of :meth:`Rappor.variance` (cached)."""
        if getattr(self, "_coef", None) is None:
            X, A = self.X, self.A
            diagB = np.einsum("sjk,jks->sj", A, X)  # diag(B_j)
            rowB = np.einsum("sjk,jk->sj", A, X.sum(axis=2))  # B_j 1
            self._coef = {"Q_row": self.Q.sum(axis=1), "Q_diag": np.diag(self.Q).copy(),
                          "r2": (rowB**2).sum(axis=1), "rd": (rowB * diagB).sum(axis=1),
                          "d2": (diagB**2).sum(axis=1), "A2_sum": self.A2.sum(axis=(1, 2)),
                          "A2_T1": np.einsum("sjk,jk->s", self.A2, X.sum(axis=2)),
                          "A2_diag": np.einsum("sjk,jks->s", self.A2, X)}
        return self._coef

    def ols(self, y: np.ndarray) -> np.ndarray:
        return np.einsum("sjk,jk->s", self.A, y)

    def candidate_variances(self, f: np.ndarray, n: float, noise_w: np.ndarray) -> np.ndarray:
        """Per-candidate variance: bit noise (weights ``noise_w`` per (cohort, bit)) + cohort sampling."""
        v_noise = np.einsum("sjk,jk->s", self.A2, noise_w)
        Bf = np.einsum("sjk,jk->sj", self.A, np.einsum("jkm,m->jk", self.X, f))  # (B_j f)_s
        v_samp = (self.Q @ f - self.m * (Bf**2).sum(axis=1) - f * (1.0 - f)) / n
        return np.maximum(v_noise + v_samp, 0.0)


class Rappor(FrequencyOracle):
    """Full RAPPOR: Bloom filter (``k`` bits, ``h`` hashes), ``m`` cohorts, permanent RR ``f``
    (memoized per user and value), instantaneous RR ``(p, q)``; regression decoding.

    Privacy: ``epsilon`` is the longitudinal bound ``eps_inf = 2 h ln((1 - f/2) / (f/2))`` of the
    memoized PRR, which holds for any number of reports of one value; ``f`` is solved from it and
    rounded up to the ``2^-20`` grid (``self.epsilon_inf <= epsilon``). Each single report is also
    ``self.epsilon_one``-LDP, ``eps_1 = h |ln(q11 (1 - p01) / (p01 (1 - q11)))|``.
    Source: Erlingsson, Pihur, Korolova, CCS 2014; google/rappor.
    Cost: O(n k / 64 * (20 + digits(p) + digits(q))) random words to encode (bit-packed), O(n k)
    bit operations to aggregate, O(M^2 (m k + h m)) once per design to decode M candidates.

    Parameters
    ----------
    epsilon : float
        Longitudinal (PRR) privacy bound eps_inf, > 0.
    d : int
        Domain size (items ``0..d-1``).
    k : int, optional
        Bloom filter bits; default ``max(16, 8 ceil(4 d / (8 m)))`` so that ``m k >= 4 d`` and the
        OLS design over all items is well conditioned.
    h : int
        Hash functions per value (default 2, as google/rappor).
    m : int
        Cohorts (default 64, as google/rappor); each user gets a uniform cohort once.
    p, q : float
        IRR probabilities ``P(S=1|B'=0)``, ``P(S=1|B'=1)`` (default 0.5, 0.75 as google/rappor);
        rounded to the ``2^-20`` grid; ``p != q``. ``p=0, q=1`` disables the IRR.
    f : float, optional
        PRR probability; by default solved from ``epsilon``. If given (rounded up to the grid) its
        ``eps_inf`` must not exceed ``epsilon``.
    decode : {"ols", "nnls"}
        Default decoder of :meth:`estimate`.
    hash_seed : int
        Public seed of the Bloom hash functions.
    """

    name = "rappor"

    def __init__(self, epsilon: float, d: int, k: int | None = None, h: int = 2, m: int = 64,
                 p: float = 0.5, q: float = 0.75, f: float | None = None, decode: str = "ols",
                 hash_seed: int = 0) -> None:
        super().__init__(epsilon, d)
        self.h = check_positive_int(h, "h")
        self.m = check_positive_int(m, "m")
        if self.m >= 1 << 31:
            raise ValidationError(f"m must be < 2^31, got {self.m}", parameter="m")
        if self.d * self.h >= 1 << 32:
            raise ValidationError(f"d * h must be < 2^32, got {self.d * self.h}", parameter="d")
        if k is None:
            k = max(16, 8 * -(-4 * self.d // (8 * self.m)))
        self.k = check_positive_int(k, "k", minimum=2)
        self.hash_seed = check_positive_int(hash_seed, "hash_seed", minimum=0)
        if decode not in ("ols", "nnls"):
            raise ValidationError(f"decode must be 'ols' or 'nnls', got {decode!r}", parameter="decode")
        self.decode = decode
        self.p = dyadic(check_probability(p, "p"), PRECISION, "nearest")
        self.q = dyadic(check_probability(q, "q"), PRECISION, "nearest")
        if self.p == self.q:
            raise ValidationError(f"p and q must differ (after rounding to 2^-{PRECISION}), got p={p}, q={q}",
                                  parameter="q")
        if f is None:
            self.f = rappor_f_for_epsilon(self.epsilon, self.h)
        else:
            self.f = dyadic(check_probability(f, "f", open_low=True), PRECISION, "up")
            if not _eps_inf_within(self.f, self.h, self.epsilon):
                raise ValidationError(
                    f"f={f} gives eps_inf = 2h ln((1-f/2)/(f/2)) = {_eps_inf(self.f, self.h):.6g} > epsilon="
                    f"{self.epsilon}; use f >= {rappor_f_for_epsilon(self.epsilon, self.h):.6g} or omit f",
                    parameter="f")
        if self.f >= 1.0:
            raise ValidationError(f"epsilon={self.epsilon} is too small: f rounds to 1 and the reports carry "
                                  f"no information", parameter="epsilon")
        self.epsilon_inf = _eps_inf(self.f, self.h)
        half = self.f / 2.0
        self.q11 = self.q * (1.0 - half) + self.p * half
        self.p01 = self.p * (1.0 - half) + self.q * half
        self.delta = self.q11 - self.p01
        if self.p01 in (0.0, 1.0) or self.q11 in (0.0, 1.0):  # pragma: no cover - excluded by 0 < f < 1
            raise ValidationError("degenerate RAPPOR probabilities", parameter="f")
        self.epsilon_one = self.h * abs(math.log(self.q11 * (1.0 - self.p01) / (self.p01 * (1.0 - self.q11))))
        self.n_bytes = (self.k + 7) // 8
        self._memo = _PermanentMemo()
        self._positions: np.ndarray | None = None
        self._design_cache: tuple[bytes, _Design] | None = None

    # --- privacy statement -------------------------------------------------------------
    def _privacy(self) -> PrivacyStatement:
        """eps-LDP for every report sequence of one value (longitudinal PRR bound)."""
        return PrivacyStatement(self.epsilon, 0.0, "local", "replace_one",
                                note=f"Rappor: longitudinal eps_inf={self.epsilon_inf:.6g} <= {self.epsilon:g}; "
                                     f"one report eps_1={self.epsilon_one:.6g}")

    # --- hashing -----------------------------------------------------------------------
    def bloom_positions(self, cohorts: Any, values: Any) -> np.ndarray:
        """``(n, h)`` Bloom bit positions of each (cohort, value)."""
        return bloom_hash(cohorts, values, self.h, self.k, self.hash_seed)

    def _all_positions(self) -> np.ndarray:
        """``(m, d, h)`` table of every cohort's Bloom positions (server side)."""
        if self._positions is None:
            c = np.repeat(np.arange(self.m), self.d)
            v = np.tile(np.arange(self.d), self.m)
            self._positions = self.bloom_positions(c, v).reshape(self.m, self.d, self.h)
        return self._positions

    def bloom_packed(self, cohorts: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Packed Bloom filters ``(n, ceil(k/8))`` uint8."""
        n = cohorts.shape[0]
        out = np.zeros((n, self.n_bytes), dtype=np.uint8)
        pos = self.bloom_positions(cohorts, values)
        rows = np.arange(n)
        for t in range(self.h):  # h is a small constant; one bit per row per t: no index conflicts
            byte = pos[:, t] >> 3
            out[rows, byte] |= (np.uint8(1) << (pos[:, t] & 7).astype(np.uint8))
        return out

    # --- client ------------------------------------------------------------------------
    def _prr(self, bloom: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = bloom.shape[0]
        mask = bernoulli_packed(n, self.k, self.f, rng)
        coin = bernoulli_packed(n, self.k, 0.5, rng)
        return (bloom & ~mask) | (coin & mask)

    def _irr(self, prr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = prr.shape[0]
        qb = bernoulli_packed(n, self.k, self.q, rng)
        pb = bernoulli_packed(n, self.k, self.p, rng)
        return (prr & qb) | (~prr & pb)

    def permanent(self, values: Any, rng: np.random.Generator, cohorts: Any) -> np.ndarray:
        """Fresh (not memoized) PRR bits of ``values`` in ``cohorts``: packed ``(n, ceil(k/8))``."""
        x = self.check_values(values)
        c = check_int_values(cohorts, self.m, "cohorts")
        return self._prr(self.bloom_packed(c, x), rng)

    def randomize(self, values: Any, rng: np.random.Generator, users: Any = None) -> Reports:
        """One report per row: ``{"cohort": int64 (n,), "bits": uint8 (n, ceil(k/8))}``.

        ``users=None``: every row is a new user (fresh cohort and PRR; the simulation path).
        ``users`` (non-negative int64 ids, one per row): cohorts and PRR bits are memoized per user
        and per (user, value) across calls, as a deployed client does; only the IRR is fresh.
        """
        x = self.check_values(values)
        n = x.shape[0]
        if users is None:
            cohorts = rng.integers(0, self.m, size=n).astype(np.int64)
            bits = np.empty((n, self.n_bytes), dtype=np.uint8)
            for lo in range(0, n, DEFAULT_CHUNK):  # chunks of users bound the temporaries
                hi = min(n, lo + DEFAULT_CHUNK)
                bits[lo:hi] = self._irr(self._prr(self.bloom_packed(cohorts[lo:hi], x[lo:hi]), rng), rng)
            return {"cohort": cohorts, "bits": bits}
        u = check_int_values(users, (1 << 62) // self.d, "users")
        if u.shape != x.shape:
            raise ValidationError(f"users must have one id per value ({n}), got {u.shape[0]}", parameter="users")
        cohorts = self._memo.cohorts(u, self.m, rng)
        keys = u * self.d + x

        def make(rows: np.ndarray) -> np.ndarray:
            return self._prr(self.bloom_packed(cohorts[rows], x[rows]), rng)

        prr = self._memo.prr_bits(keys, make)
        return {"cohort": cohorts, "bits": self._irr(prr, rng)}

    def reset_memo(self) -> None:
        """Forget all memoized cohorts and PRR bits (a new population of clients)."""
        self._memo = _PermanentMemo()

    def validate_reports(self, reports: Reports) -> Reports:
        if not isinstance(reports, dict) or set(reports) != {"cohort", "bits"}:
            raise ValidationError("RAPPOR reports must have exactly the fields 'cohort' and 'bits'",
                                  parameter="reports")
        c = check_int_values(reports["cohort"], self.m, "cohort")
        b = np.asarray(reports["bits"])
        if b.dtype != np.uint8 or b.shape != (c.shape[0], self.n_bytes):
            raise ValidationError(f"bits must be a uint8 array of shape ({c.shape[0]}, {self.n_bytes})",
                                  parameter="bits")
        rem = self.k % 8
        if rem and b.size and np.any(b[:, -1] >> np.uint8(rem)):
            raise ValidationError(f"bits has ones beyond bit k={self.k}", parameter="bits")
        return {"cohort": c, "bits": b}

    # --- analyzer ----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """``(m, k + 1)`` int64: per cohort the ``k`` bit counts, then the cohort size."""
        c = np.asarray(reports["cohort"], dtype=np.int64)
        b = np.asarray(reports["bits"])
        out = np.zeros((self.m, self.k + 1), dtype=np.int64)
        sizes = np.bincount(c, minlength=self.m)
        out[:, self.k] = sizes
        order = np.argsort(c, kind="stable")
        sb = b[order]
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        for j in np.flatnonzero(sizes):  # loop over non-empty cohorts (m), not users
            out[j, : self.k] = packed_column_sums(sb[bounds[j]:bounds[j + 1]], self.k)
        return out

    def check_statistic(self, statistic: Any) -> np.ndarray:
        s = np.asarray(statistic)
        if s.shape != (self.m, self.k + 1) or not np.issubdtype(s.dtype, np.integer) or s.dtype == np.bool_:
            raise ValidationError(f"statistic must be an integer array of shape ({self.m}, {self.k + 1})",
                                  parameter="statistic")
        if s.size and (s.min() < 0 or np.any(s[:, : self.k] > s[:, self.k:])):
            raise ValidationError("statistic must have 0 <= bit count <= cohort size", parameter="statistic")
        return s.astype(np.int64)

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        return self.check_statistic(statistic)

    def _statistic_shape(self) -> tuple[int, ...]:
        return (self.m, self.k + 1)

    def _recorded_users(self, statistic: np.ndarray) -> float:
        """The last column holds the cohort sizes: it sums to n."""
        return float(np.sum(np.asarray(statistic)[:, self.k]))

    def _check_candidates(self, candidates: Any) -> np.ndarray:
        if candidates is None:
            return np.arange(self.d, dtype=np.int64)
        c = check_int_values(candidates, self.d, "candidates")
        if c.size == 0 or np.unique(c).size != c.size:
            raise ValidationError("candidates must be a non-empty set of distinct items", parameter="candidates")
        return c

    def design(self, candidates: Any = None, cohorts: Any = None) -> _Design:
        """The (cached) regression design over ``candidates`` and the given cohorts (default all)."""
        cands = self._check_candidates(candidates)
        rows = np.arange(self.m) if cohorts is None else np.asarray(cohorts, dtype=np.int64)
        key = cands.tobytes() + b"|" + rows.tobytes()
        if self._design_cache is None or self._design_cache[0] != key:
            self._design_cache = (key, _Design(self._all_positions(), cands, rows, self.k, self.m))
        return self._design_cache[1]

    def debiased_bits(self, statistic: Any) -> tuple[np.ndarray, np.ndarray]:
        """(non-empty cohort ids, debiased Bloom-bit fractions ``y`` of shape (m', k))."""
        s = self.check_statistic(statistic)
        N = s[:, self.k]
        rows = np.flatnonzero(N > 0)
        Nr = N[rows].astype(np.float64)[:, None]
        y = (s[rows, : self.k] - self.p01 * Nr) / (self.delta * Nr)
        return rows, y

    def estimate(self, statistic: np.ndarray, n: int, candidates: Any = None, decode: str | None = None) -> Estimate:
        """Fractions of users holding each candidate (default: every item, in order).

        ``values`` are OLS (unbiased when the candidates cover the support) or NNLS estimates;
        ``stderr`` is the OLS standard error including the cohort sampling term, evaluated at the
        estimate clipped to [0, 1]. ``extra`` holds ``candidates`` and ``decode``.
        """
        decode = self.decode if decode is None else decode
        if decode not in ("ols", "nnls"):
            raise ValidationError(f"decode must be 'ols' or 'nnls', got {decode!r}", parameter="decode")
        s = self.check_statistic(statistic)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 or int(n) != int(s[:, self.k].sum()):
            raise ValidationError(f"n must equal the number of reports in the statistic ({int(s[:, self.k].sum())}), "
                                  f"got {n!r}", parameter="n")
        rows, y = self.debiased_bits(s)
        D = self.design(candidates, rows)
        f_ols = D.ols(y)
        if decode == "nnls":
            from scipy.optimize import nnls

            vals = nnls(D.X.reshape(-1, D.cands.size), y.ravel(), maxiter=50 * D.cands.size)[0]
        else:
            vals = f_ols
        fc = np.clip(f_ols, 0.0, 1.0)
        N = s[rows, self.k].astype(np.float64)[:, None]
        T = np.clip(np.einsum("jkm,m->jk", D.X, fc), 0.0, 1.0)  # Bloom-bit fraction per cohort
        w = (self.p01 * (1 - self.p01) + T * self._kappa) / (self.delta**2 * N)
        var = D.candidate_variances(fc, float(n), w)
        return Estimate(vals, np.sqrt(var), int(n), self.privacy(), "frequency",
                        extra={"candidates": D.cands, "decode": decode, "mechanism": self.name})

    @property
    def _kappa(self) -> float:
        return self.q11 * (1 - self.q11) - self.p01 * (1 - self.p01)

    def variance_items(self, n: int, freqs: Any, candidates: Any = None) -> np.ndarray:
        """Per-candidate variance of the OLS fraction estimates for the true distribution ``freqs``
        (length ``d``; the candidates must cover its support), cohorts of size ``n / m``."""
        fr = np.asarray(freqs, dtype=np.float64)
        if fr.shape != (self.d,) or not np.all(np.isfinite(fr)) or fr.min() < 0 or fr.sum() > 1 + 1e-9:
            raise ValidationError(f"freqs must be {self.d} non-negative fractions summing to <= 1", parameter="freqs")
        if n < 1:
            raise ValidationError(f"n must be >= 1, got {n}", parameter="n")
        D = self.design(candidates)
        f = fr[D.cands]
        T = np.einsum("jkm,m->jk", D.X, f)
        w = (self.p01 * (1 - self.p01) + T * self._kappa) * self.m / (self.delta**2 * n)
        return D.candidate_variances(f, float(n), w)

    def variance(self, n: int | None = None, value: float = 0.0, item: int | None = None) -> float:
        """Variance of one item's OLS fraction estimate (all ``d`` items decoded) when that item has
        fraction ``value`` and the other ``d - 1`` share ``1 - value`` equally; averaged over the items
        unless ``item`` is given (the variance depends on the item's hash pattern)."""
        n = check_n(n)
        if not (0.0 <= value <= 1.0):
            raise ValidationError(f"value must lie in [0, 1], got {value}", parameter="value")
        if item is not None:
            it = int(check_int_values(np.asarray([item]), self.d, "item")[0])
            g = np.full(self.d, (1.0 - value) / (self.d - 1))
            g[it] = value
            return float(self.variance_items(n, g)[it])
        # average over items s of Var_s under g_s = u 1 + v e_s (u = (1-value)/(d-1), v = value - u): every
        # term is linear or quadratic in (u, v) with value-independent per-item coefficients (cached)
        D = self.design()
        c = D.item_coefficients()
        u = (1.0 - value) / (self.d - 1)
        v = value - u
        v_samp = (u * c["Q_row"] + v * c["Q_diag"]
                  - self.m * (u * u * c["r2"] + 2 * u * v * c["rd"] + v * v * c["d2"]) - value * (1 - value)) / n
        noise = self.m / (self.delta**2 * n) * (self.p01 * (1 - self.p01) * c["A2_sum"]
                                                 + self._kappa * (u * c["A2_T1"] + v * c["A2_diag"]))
        return float(np.mean(np.maximum(noise + v_samp, 0.0)))

    # --- privacy -----------------------------------------------------------------------
    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[(c, S) | x] = (1/m) prod_i P(S_i | B_i(c, x))`` for one report (PRR marginalised)."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        c = np.asarray(reports["cohort"], dtype=np.int64)
        S = unpack_rows(np.asarray(reports["bits"]), self.k).astype(bool)
        B = unpack_rows(self.bloom_packed(c, np.full(c.shape[0], xv)), self.k).astype(bool)
        logp = np.where(B, np.where(S, math.log(self.q11), math.log1p(-self.q11)),
                        np.where(S, math.log(self.p01), math.log1p(-self.p01))).sum(axis=1)
        return np.exp(logp) / self.m

    def permanent_probabilities(self, prr_bits: Any, cohorts: Any, x: Any) -> np.ndarray:
        """Exact ``Pr[B' | x, c] = prod_i (1 - f/2 if B'_i = B_i(c, x) else f/2)`` of the memoized PRR."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        c = check_int_values(cohorts, self.m, "cohorts")
        P = unpack_rows(np.asarray(prr_bits), self.k)
        B = unpack_rows(self.bloom_packed(c, np.full(c.shape[0], xv)), self.k)
        agree = (P == B).sum(axis=1)
        return np.exp(agree * math.log1p(-self.f / 2) + (self.k - agree) * math.log(self.f / 2))

    # --- exact simulation --------------------------------------------------------------
    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Exact sample of the ``(m, k+1)`` statistic in O(m d h + m k), independent of n.

        Cohorts: for each item its holders split Multinomial(n_s, 1/m). Given the split, bit ``i``
        of cohort ``j`` counts Binomial(T_ji, q11) + Binomial(N_j - T_ji, p01), independently over
        bits, where ``T_ji`` = holders in ``j`` whose Bloom filter has bit ``i`` (one report per user).
        """
        c = self.check_counts(true_counts)
        split = rng.multinomial(c, np.full(self.m, 1.0 / self.m))  # (d, m)
        pos = self._all_positions()  # (m, d, h)
        N = split.sum(axis=0)
        T = np.zeros((self.m, self.k), dtype=np.int64)
        # each item counts once per distinct Bloom bit: dedupe collisions of its h hashes
        dup = np.zeros(pos.shape, dtype=bool)
        for t in range(1, self.h):  # h is a small constant
            dup[:, :, t] = (pos[:, :, :t] == pos[:, :, t:t + 1]).any(axis=2)
        w = np.broadcast_to(split.T[:, :, None], pos.shape) * ~dup
        flat = (np.arange(self.m)[:, None, None] * self.k + pos).ravel()
        T = np.bincount(flat, weights=w.ravel().astype(np.float64), minlength=self.m * self.k)
        T = np.rint(T).astype(np.int64).reshape(self.m, self.k)
        out = np.zeros((self.m, self.k + 1), dtype=np.int64)
        out[:, : self.k] = rng.binomial(T, self.q11) + rng.binomial(N[:, None] - T, self.p01)
        out[:, self.k] = N
        return out

    def __repr__(self) -> str:
        return (f"Rappor(epsilon={self.epsilon:g}, d={self.d}, k={self.k}, h={self.h}, m={self.m}, "
                f"f={self.f:.6g}, p={self.p:g}, q={self.q:g})")
