"""Distributed noise and secure summation: Pólya shares (distributed geometric) and
split-and-mix (IKOS) additive shares.

These are the building blocks the shuffle-model sum protocols (RSum_DSG) and services use:
each of n parties adds a Pólya difference to its own value and splits the result into m
uniformly random shares mod q; the analyzer adds all shares mod q and sees only
sum(values) + SG(alpha), a two-sided geometric (discrete Laplace) total noise.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.validation import check_epsilon, check_positive_int, check_real
from . import exact
from .base import CentralMechanism, check_integer_values, refuse_seed
from .calibration import check_sensitivity
from .distributions import discrete_laplace_variance, simulate_polya

__all__ = [
    "sample_polya",
    "DistributedGeometricMechanism",
    "SplitAndMix",
    "split_and_mix_messages",
    "split_and_mix_delta",
    "split_and_mix_security_bits",
]


def sample_polya(r: float | Fraction, gamma: float | Fraction, size: int | None = None) -> int | np.ndarray:
    """Exact Pólya NB(r, alpha), alpha = exp(-gamma), rational 0 < r <= 1, from the OS.

    P(X = x) = Gamma(x + r)/(x! Gamma(r)) alpha^x (1 - alpha)^r. See
    :func:`shuffledp.central.exact.polya` for the algorithm: O(1) expected uniform draws per
    sample whatever gamma (it skips the rounds its rejection loop would spend on small gamma).
    ``r`` and ``gamma`` are taken exactly (a float converts without rounding). This is the production sampler of the Pólya shares that clients add in
    ``cnt_sgm``, ``rsum_dsg`` and the ``sgm`` one-hot counters (``distinct``, ``put``) whenever
    their encoder runs on a secure generator (:func:`shuffledp.core.rng.is_secure_generator`).
    A bad parameter raises one :class:`ValidationError` naming it (``r``, ``gamma``, ``size``).
    """
    rr = exact.to_fraction(r, "r")
    gg = exact.to_fraction(gamma, "gamma")
    if not (0 < rr <= 1):
        raise ValidationError(f"r must lie in (0, 1], got {r!r}", parameter="r")
    if gg <= 0:
        raise ValidationError(f"gamma must be > 0, got {gamma!r}", parameter="gamma")
    src = exact.system_source()
    if size is None:
        return exact.polya(rr, gg, src)
    n = check_positive_int(size, "size", minimum=0)
    return np.array([exact.polya(rr, gg, src) for _ in range(n)], dtype=np.int64)


class DistributedGeometricMechanism(CentralMechanism):
    """Distributed geometric noise via Pólya differences (survey Thm 8; Goryczka & Xiong 2017;
    Balle, Bell, Gascón, Nissim 2019/2020).

    Each of n parties adds X_i - Y_i with X_i, Y_i iid Pólya(1/n, alpha), alpha = exp(-eps/Delta).
    Pólya laws are infinitely divisible (a sum of n iid Pólya(1/n, alpha) is Pólya(1, alpha),
    a geometric), so the total noise is X - Y with X, Y geometric: the two-sided geometric /
    discrete Laplace with P(z) = (1 - alpha)/(1 + alpha) alpha^|z|.

    Privacy: the *sum* of all parties' noisy values is pure eps-DP for an integer sum with
    sensitivity Delta (survey Thm 7) — provided the sum is all the adversary sees (a secure
    aggregation such as :class:`SplitAndMix` under a shuffler; then add its statistical delta).
    With ``honest_fraction`` gamma < 1 each party uses Pólya(1/(gamma n), alpha) so the honest
    parties' shares alone already sum to the full noise (robust shuffle privacy); the statement
    then carries ``gamma``.
    Exactness: production shares use the exact Pólya sampler (rational r = 1/(gamma n) and
    rational eps/Delta; OS randomness).
    Cost: per share two exact Pólya draws of O(1) expected uniform draws each whatever
    Delta/eps (:func:`~shuffledp.central.exact.polya` skips its rejected rounds), ~10-30
    microseconds each in pure Python; analyzer: nothing.
    Variance: of the total noise 2 alpha/(1 - alpha)^2 (:meth:`variance`), of one party's share
    2 r alpha/(1 - alpha)^2 (:attr:`share_variance`).
    """

    name = "distributed_geometric"

    def __init__(self, epsilon: float, parties: int, sensitivity: int = 1, *, honest_fraction: float = 1.0,
                 neighbouring: str = "replace_one") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.parties = check_positive_int(parties, "parties")
        self.sensitivity = check_sensitivity(sensitivity, integer=True)
        self.honest_fraction = check_real(honest_fraction, "honest_fraction", low=0.0, high=1.0, low_open=True)
        if neighbouring not in ("replace_one", "add_remove_one"):
            raise ValidationError(f"neighbouring must be 'replace_one' or 'add_remove_one', got {neighbouring!r}",
                                  parameter="neighbouring")
        self.neighbouring = neighbouring
        honest = Fraction(self.honest_fraction) * self.parties
        if honest < 1:
            raise ValidationError(f"honest_fraction * parties must be >= 1, got {float(honest)!r}",
                                  parameter="honest_fraction")
        #: exact Pólya shape r = 1 / (gamma n)
        self.shape = 1 / honest
        #: exact gamma = eps / Delta with alpha = exp(-gamma)
        self.rate = Fraction(self.epsilon) / self.sensitivity
        self.alpha = math.exp(-self.epsilon / self.sensitivity)

    def _privacy(self) -> PrivacyStatement:
        return PrivacyStatement(self.epsilon, 0.0, "central", self.neighbouring,  # type: ignore[arg-type]
                                gamma=self.honest_fraction,
                                note=f"DistributedGeometric(parties={self.parties}, sensitivity={self.sensitivity}): "
                                     "guarantee of the aggregated sum only")

    def _variance(self) -> float:
        """Variance of the total noise when every party adds its share: 2a/(1 - a)^2 / gamma."""
        return discrete_laplace_variance(self.sensitivity / self.epsilon) / self.honest_fraction

    @property
    def share_variance(self) -> float:
        """Variance of one party's share X - Y: 2 r a/(1 - a)^2."""
        a = self.alpha
        return 2.0 * float(self.shape) * a / (1.0 - a) ** 2

    def share(self, *, rng: object = None, seed: object = None) -> int:
        """One party's noise share X - Y (exact Pólya draws from the OS; seeds refused)."""
        refuse_seed(rng, seed)
        return exact.polya(self.shape, self.rate) - exact.polya(self.shape, self.rate)

    def simulate_shares(self, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """``size`` shares with numpy's negative binomial (float sampler; simulation only)."""
        rng = self._check_generator(rng)
        r = float(self.shape)
        return simulate_polya(r, self.alpha, size, rng) - simulate_polya(r, self.alpha, size, rng)

    def release(self, true_value: Any, *, rng: object = None, seed: object = None) -> int:
        """Run the protocol in one process: ``true_value`` holds the parties' integer values
        (length ``parties``); each adds its exact share; returns the noisy sum."""
        refuse_seed(rng, seed)
        x, _ = check_integer_values(true_value, "true_value")
        if x.size != self.parties:
            raise ValidationError(f"true_value must hold one value per party ({self.parties}), got {x.size}",
                                  parameter="true_value")
        return int(x.astype(object).sum()) + sum(self.share() for _ in range(self.parties))

    def simulate(self, true_values: Any, rng: np.random.Generator) -> np.ndarray:
        """Simulated noisy sums: ``true_values`` has shape (R, parties) (or (parties,)); each row
        is one run of the protocol. Returns R noisy sums."""
        rng = self._check_generator(rng)
        x = np.asarray(true_values)
        if x.ndim == 1:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != self.parties or not np.issubdtype(x.dtype, np.integer):
            raise ValidationError(f"true_values must be integers of shape (R, {self.parties})", parameter="true_values")
        return x.sum(axis=1) + self.simulate_shares(x.shape, rng).sum(axis=1)

    def __repr__(self) -> str:
        return f"DistributedGeometricMechanism(epsilon={self.epsilon:g}, parties={self.parties})"


# --------------------------------------------------------------------------------------------
# Split-and-mix (IKOS)
# --------------------------------------------------------------------------------------------

_MAX_MODULUS = 1 << 62


def split_and_mix_messages(n: int, modulus_bits: float, sigma: float) -> int:
    """Messages per party for sigma-secure split-and-mix (Balle, Bell, Gascón, Nissim CCS'20):

    m = max(3, ceil((2 sigma + log2 q) / (log2 n - log2 e) + 1)).

    Test vectors (n, log2 q, sigma) -> m: (1e4, 32, 40) -> 11; (1e4, 45.29, 40) -> 12;
    (1e4, 21, 22) -> 7; (1e6, 40, 40) -> 8; (1e3, 20, 30) -> 11.
    """
    n = check_positive_int(n, "n", minimum=3)
    bits = check_real(modulus_bits, "modulus_bits", low=1.0)
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    denom = math.log2(n) - math.log2(math.e)
    if denom <= 0:
        raise ValidationError("split-and-mix needs n > e (log2 n > log2 e)", parameter="n")
    return max(3, math.ceil((2.0 * s + bits) / denom + 1.0))


def split_and_mix_delta(epsilon: float, sigma: float) -> float:
    """Extra delta of replacing an exact secure sum by sigma-secure split-and-mix:
    (1 + e^eps) 2^-sigma (BBGN 2019 "DP from statistical distance", survey Thm 9)."""
    eps = check_epsilon(epsilon)
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    return (1.0 + math.exp(eps)) * 2.0 ** (-s)


def split_and_mix_security_bits(epsilon: float, extra_delta: float) -> int:
    """Smallest integer sigma with (1 + e^eps) 2^-sigma <= extra_delta."""
    from ..core.validation import check_delta

    eps = check_epsilon(epsilon)
    d = check_delta(extra_delta, "extra_delta")
    return math.ceil(math.log2((1.0 + math.exp(eps)) / d))


def _uniform_mod(q: int, size: int) -> np.ndarray:
    """``size`` uniform integers in [0, q) from os.urandom (rejection of the top partial block)."""
    limit = (1 << 64) - ((1 << 64) % q)  # multiple of q
    out = np.empty(size, dtype=np.uint64)
    filled = 0
    while filled < size:
        need = size - filled
        m = need + need // 8 + 8
        words = np.frombuffer(os.urandom(8 * m), dtype=np.uint64)
        if limit < (1 << 64):
            words = words[words < np.uint64(limit)]
        take = words[:need]
        out[filled:filled + take.size] = take % np.uint64(q)
        filled += take.size
    return out.astype(np.int64)


def _sum_mod(a: np.ndarray, q: int) -> int:
    """Exact sum of non-negative int64 values < 2^62 modulo q (split into 31-bit halves so the
    int64 partial sums cannot overflow for up to 2^32 entries)."""
    a = a.reshape(-1)
    lo = int((a & 0x7FFFFFFF).sum(dtype=np.int64))
    hi = int((a >> 31).sum(dtype=np.int64))
    return (lo + (hi << 31)) % q


class SplitAndMix:
    """Split-and-mix additive sharing over Z_q (Ishai, Kushilevitz, Ostrovsky, Sahai, FOCS 2006).

    Encoder: x in Z_q becomes m shares y_1..y_{m-1} iid uniform on Z_q and
    y_m = x - sum_{j<m} y_j mod q. Analyzer: the sum of all received shares mod q.
    Under a shuffler, for m from :func:`split_and_mix_messages`, the shuffled multiset of n m
    shares is 2^-sigma-close to one that depends only on sum(x) mod q (BBGN CCS'20), which adds
    (1 + e^eps) 2^-sigma to delta (:func:`split_and_mix_delta`). It is a secure-sum primitive,
    not a DP mechanism by itself: noise comes from e.g. :class:`DistributedGeometricMechanism`.

    Production :meth:`encode` draws shares from ``os.urandom`` (a numpy PCG64 stream would let an
    observer of enough shares predict the rest); :meth:`simulate_encode` takes a seeded Generator.
    Cost: O(n m) encode (vectorized), O(n m) aggregate (one pass); m log2 q bits per party.

    Parameters
    ----------
    modulus : int
        q, 2 <= q <= 2^62. Must exceed 2 (max |noisy sum|) so :meth:`decode_signed` never wraps.
    messages : int
        m >= 1 shares per party.
    """

    def __init__(self, modulus: int, messages: int) -> None:
        self.modulus = check_positive_int(modulus, "modulus", minimum=2)
        if self.modulus > _MAX_MODULUS:
            raise ValidationError(f"modulus must be <= 2^62, got {self.modulus}", parameter="modulus")
        self.messages = check_positive_int(messages, "messages")

    @classmethod
    def for_parties(cls, parties: int, modulus: int, sigma: float) -> "SplitAndMix":
        """The instance with the BBGN message count for ``parties`` parties and security sigma."""
        q = check_positive_int(modulus, "modulus", minimum=2)
        return cls(q, split_and_mix_messages(parties, math.log2(q), sigma))

    def _check_values(self, values: Any) -> np.ndarray:
        x = np.asarray(values)
        if x.ndim == 0:
            x = x.reshape(1)
        if x.ndim != 1 or x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.integer):
            raise ValidationError("values must be a 1-D array of integers", parameter="values")
        return np.mod(x.astype(np.int64), self.modulus)

    def _split(self, x: np.ndarray, rand: np.ndarray) -> np.ndarray:
        q = self.modulus
        shares = np.empty((x.size, self.messages), dtype=np.int64)
        if self.messages > 1:
            shares[:, :-1] = rand
            acc = np.zeros(x.size, dtype=np.int64)
            for j in range(self.messages - 1):  # m - 1 vector steps (no per-user loop)
                acc = (acc + rand[:, j]) % q
            shares[:, -1] = (x - acc) % q
        else:
            shares[:, 0] = x
        return shares

    def encode(self, values: Any, *, rng: object = None, seed: object = None) -> np.ndarray:
        """Shares of each value, shape (n, m), uniform from ``os.urandom`` (seeds refused).

        Values are integers, reduced mod q (a negative noisy value -v becomes q - v).
        """
        refuse_seed(rng, seed)
        x = self._check_values(values)
        k = self.messages - 1
        rand = _uniform_mod(self.modulus, x.size * k).reshape(x.size, k)
        return self._split(x, rand)

    def simulate_encode(self, values: Any, rng: np.random.Generator) -> np.ndarray:
        """Shares drawn with a caller's Generator (simulation only)."""
        if not isinstance(rng, np.random.Generator):
            raise ValidationError("simulate_encode() needs an explicit numpy Generator", parameter="rng")
        x = self._check_values(values)
        rand = rng.integers(0, self.modulus, size=(x.size, self.messages - 1), dtype=np.int64)
        return self._split(x, rand)

    def validate_shares(self, shares: Any) -> np.ndarray:
        """Received shares: integers in [0, q) (any shape; the shuffled multiset is flat)."""
        a = np.asarray(shares)
        if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
            raise ValidationError("shares must be integers", parameter="shares")
        if a.size and (a.min() < 0 or a.max() >= self.modulus):
            raise ValidationError(f"shares must lie in [0, {self.modulus})", parameter="shares")
        return a.astype(np.int64, copy=False)

    def aggregate(self, shares: Any) -> int:
        """Sum of all shares mod q (mergeable: combine partial aggregates with :meth:`merge`)."""
        return _sum_mod(self.validate_shares(shares), self.modulus)

    def merge(self, *partials: int) -> int:
        """Combine partial aggregates of disjoint share batches."""
        return sum(int(p) for p in partials) % self.modulus

    def decode_signed(self, total: int) -> int:
        """Map a residue to the signed integer in [-q/2, q/2)."""
        t = int(total) % self.modulus
        return t - self.modulus if t >= (self.modulus + 1) // 2 else t

    def __repr__(self) -> str:
        return f"SplitAndMix(modulus={self.modulus}, messages={self.messages})"
