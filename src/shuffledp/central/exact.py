"""Exact integer samplers fed by the operating system's randomness.

Every sampler here draws only uniform integers (``randbelow``) and compares them with rational
numbers held as :class:`fractions.Fraction` or Python ints. No ``exp``, ``log`` or float
comparison decides anything, so the output distribution is *exactly* the stated one and the
floating-point attack of Mironov (CCS 2012) does not apply.

Algorithms (Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020, arXiv 2004.00010, section 5):

- :func:`bernoulli_exp` — Bernoulli(exp(-gamma)) for rational gamma >= 0 (CKS Algorithm 1).
- :func:`geometric_exp` — P(G = g) = (1 - e^-gamma) e^(-gamma g), g >= 0, with the "U + tV"
  trick of CKS Algorithm 2 (O(1) expected Bernoulli draws for any gamma).
- :func:`discrete_laplace` — P(Z = z) proportional to exp(-|z| / scale) (CKS Algorithm 2).
- :func:`discrete_gaussian` — P(Z = z) proportional to exp(-z^2 / (2 sigma^2)) (CKS Algorithm 3).
- :func:`symmetric_binomial` — Binomial(N, 1/2) as the popcount of N uniform bits.
- :func:`polya` — Pólya / negative binomial NB(r, alpha) for rational 0 < r <= 1 and
  alpha = exp(-gamma): a geometric proposal accepted with the exact rational probability
  C(g + r - 1, g), with the runs of rejected rounds skipped in one exact Bernoulli draw (our own
  construction; proof in ``docs/central.md``).

The randomness source is ``os.urandom`` (the same CSPRNG as :mod:`secrets`), buffered per thread. The ``source``
argument of the low-level functions exists for the library's own tests, which feed a seeded
:class:`random.Random` to check the *algorithm* reproducibly; public release paths never take it
from a caller (see :func:`shuffledp.central.mechanisms.refuse_seed`).

Timing: the loops run a random number of times, so wall-clock time leaks information about the
noise magnitude (Jin et al., S&P 2022). Draw noise off the request path or pad to a fixed time
budget where an adversary can time the release.
"""

from __future__ import annotations

import math
import os
import random
import threading
from fractions import Fraction
from numbers import Rational
from typing import Protocol

__all__ = [
    "RandomSource",
    "system_source",
    "to_fraction",
    "bernoulli",
    "bernoulli_exp",
    "geometric_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "symmetric_binomial",
    "polya",
]


class RandomSource(Protocol):
    """What the exact samplers need: uniform integers and uniform bits."""

    def randbelow(self, n: int) -> int: ...  # pragma: no cover - protocol

    def getrandbits(self, k: int) -> int: ...  # pragma: no cover - protocol


class _SystemSource:
    """OS randomness (``os.urandom``) served from a small per-thread buffer.

    ``randbelow(n)`` is exact: draw ``n.bit_length()`` uniform bits, retry while >= n.
    Buffering 4 KiB of ``os.urandom`` per refill makes a draw ~2x cheaper than
    :class:`secrets.SystemRandom` (one syscall per draw). Safety: each thread has its own buffer
    (no two threads can consume the same bytes), and every buffer is dropped in a forked child
    (``os.register_at_fork``), so parent and child never reuse the same randomness.
    """

    _CHUNK = 4096

    def __init__(self) -> None:
        self._local = threading.local()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._local = threading.local()

    def getrandbits(self, k: int) -> int:
        if k <= 0:
            return 0
        nbytes = (k + 7) >> 3
        loc = self._local
        buf = getattr(loc, "buf", b"")
        pos = getattr(loc, "pos", 0)
        if pos + nbytes > len(buf):
            buf = os.urandom(max(self._CHUNK, nbytes))
            pos = 0
            loc.buf = buf
        loc.pos = pos + nbytes
        return int.from_bytes(buf[pos:pos + nbytes], "little") >> ((nbytes << 3) - k)

    def randbelow(self, n: int) -> int:
        k = n.bit_length()
        r = self.getrandbits(k)
        while r >= n:
            r = self.getrandbits(k)
        return r


class _SeededSource:
    """A seeded :class:`random.Random` wrapper, for testing the algorithms reproducibly only."""

    __slots__ = ("_r",)

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self._r.randrange(n)

    def getrandbits(self, k: int) -> int:
        return self._r.getrandbits(k) if k > 0 else 0


_SYSTEM = _SystemSource()


def system_source() -> RandomSource:
    """The process-wide OS-backed source used by every release path."""
    return _SYSTEM


def _test_source(seed: int) -> RandomSource:
    """A reproducible source for the library's own algorithm tests (not a public API)."""
    return _SeededSource(seed)


def to_fraction(x: float | int | Fraction, name: str = "value") -> Fraction:
    """Exact rational value of a finite float/int/Fraction (a float converts without rounding)."""
    from ..core.errors import ValidationError

    if isinstance(x, bool):
        raise ValidationError(f"{name} must be a number, got {x!r}", parameter=name)
    if isinstance(x, Rational):
        return Fraction(x)
    try:
        xf = float(x)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a number, got {x!r}", parameter=name) from None
    if not math.isfinite(xf):
        raise ValidationError(f"{name} must be finite, got {x!r}", parameter=name)
    return Fraction(xf)


# --------------------------------------------------------------------------------------------
# Bernoulli draws
# --------------------------------------------------------------------------------------------

def bernoulli(p: Fraction, source: RandomSource = _SYSTEM) -> bool:
    """Bernoulli(p) for rational p in [0, 1]: one uniform integer below the denominator."""
    return source.randbelow(p.denominator) < p.numerator


def _bexp_unit(num: int, den: int, source: RandomSource) -> bool:
    """Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS20 Algorithm 1, first branch).

    Draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until the first failure at K; return
    whether K is odd. P(K odd) = sum_k (-gamma)^k / k! = exp(-gamma). Integers only.
    """
    k = 1
    while source.randbelow(den * k) < num:
        k += 1
    return k & 1 == 1


def _bexp(num: int, den: int, source: RandomSource) -> bool:
    """Bernoulli(exp(-num/den)) for integers num >= 0, den >= 1 (CKS20 Algorithm 1)."""
    if num <= den:
        return _bexp_unit(num, den, source)
    whole = num // den
    for _ in range(whole):
        if not _bexp_unit(1, 1, source):
            return False
    return _bexp_unit(num - whole * den, den, source)


def bernoulli_exp(gamma: Fraction, source: RandomSource = _SYSTEM) -> bool:
    """Bernoulli(exp(-gamma)) for rational gamma >= 0, exactly (CKS20 Algorithm 1).

    For gamma > 1 it multiplies floor(gamma) independent Bernoulli(exp(-1)) draws (stopping at
    the first failure) with one Bernoulli(exp(-(gamma - floor(gamma)))).
    Expected cost: O(1) uniform draws for any gamma.
    """
    return _bexp(gamma.numerator, gamma.denominator, source)


# --------------------------------------------------------------------------------------------
# Geometric, discrete Laplace, discrete Gaussian
# --------------------------------------------------------------------------------------------

def _geometric_unit_step(t: int, source: RandomSource) -> int:
    """X >= 0 with P(X = x) proportional to exp(-x / t), for a positive integer t.

    CKS20 Algorithm 2 (inner part): U uniform on {0..t-1} accepted with probability
    exp(-U / t), plus t * V with V ~ Geometric(exp(-1)).
    """
    while True:
        u = source.randbelow(t)
        if _bexp(u, t, source):
            break
    v = 0
    while _bexp_unit(1, 1, source):
        v += 1
    return u + t * v


def _geometric(s: int, t: int, source: RandomSource) -> int:
    return _geometric_unit_step(t, source) // s


def geometric_exp(gamma: Fraction, source: RandomSource = _SYSTEM) -> int:
    """G >= 0 with P(G = g) = (1 - e^-gamma) e^(-gamma g), gamma > 0 rational, exactly.

    Writing gamma = s / t, a geometric variable with parameter exp(-1/t) divided (floor) by s
    is geometric with parameter exp(-s/t) (CKS20 Algorithm 2). Expected O(1) draws.
    """
    return _geometric(gamma.numerator, gamma.denominator, source)


def _discrete_laplace(s: int, t: int, source: RandomSource) -> int:
    """Discrete Laplace with scale t/s (integers)."""
    while True:
        y = _geometric_unit_step(t, source) // s
        negative = source.getrandbits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_laplace(scale: Fraction, source: RandomSource = _SYSTEM) -> int:
    """Z in the integers with P(Z = z) = (1 - a)/(1 + a) a^|z|, a = exp(-1/scale), exactly.

    CKS20 Algorithm 2: a geometric magnitude with a random sign, rejecting "negative zero"
    so that 0 is not counted twice. ``scale`` is a positive rational t/s.
    """
    return _discrete_laplace(scale.denominator, scale.numerator, source)


def discrete_gaussian(sigma2: Fraction, source: RandomSource = _SYSTEM) -> int:
    """Z in the integers with P(Z = z) proportional to exp(-z^2 / (2 sigma2)), exactly.

    CKS20 Algorithm 3: propose Y ~ discrete Laplace with scale t = floor(sigma) + 1 and accept
    with probability exp(-(|Y| - sigma2/t)^2 / (2 sigma2)). Expected < ~2.5 proposals.
    ``sigma2`` (the variance parameter sigma^2 = a/b) is a positive rational; the acceptance
    exponent is the integer ratio (|Y| b t - a)^2 / (2 a b t^2).
    """
    a, b = sigma2.numerator, sigma2.denominator
    t = math.isqrt(a // b) + 1  # floor(sqrt(sigma2)) + 1, exactly
    den = 2 * a * b * t * t
    bt = b * t
    while True:
        y = _discrete_laplace(1, t, source)
        d = abs(y) * bt - a
        if _bexp(d * d, den, source):
            return y


def symmetric_binomial(trials: int, source: RandomSource = _SYSTEM) -> int:
    """Binomial(trials, 1/2), exactly: the number of ones among ``trials`` uniform bits."""
    return source.getrandbits(trials).bit_count() if trials > 0 else 0


#: bits of the fixed-point bounds :func:`_bernoulli_power` compares a uniform with first
_POW_BITS = 128


def _bernoulli_ratio(p: int, q: int, source: RandomSource) -> bool:
    """Bernoulli(p / q) for integers 0 <= p < q: a uniform real, 64 bits at a time, against the
    binary expansion of p / q (exact; expected 64 bits of randomness whatever the size of q)."""
    while True:
        t, p = divmod(p << 64, q)
        u = source.getrandbits(64)
        if u != t:
            return u < t
        if p == 0:  # p / q ends here; the uniform is >= it with probability 1
            return False


def _bernoulli_power(a: int, b: int, g: int, source: RandomSource) -> bool:
    """Bernoulli((a / b)^g) for integers 0 <= a < b and g >= 1, exactly.

    A uniform U = (u + U') / 2^K (u = K random bits, K = :data:`_POW_BITS`) is compared with
    fixed-point bounds lo <= (a/b)^g 2^K <= hi, computed by repeated squaring rounded down for lo
    and up for hi; only when lo <= u < hi (probability (hi - lo) / 2^K, about g 2^-K) does it fall
    back to the exact comparison U' < (a^g 2^K - u b^g) / b^g. So the cost is O(log g)
    multiplications of 2K-bit integers and K random bits, not the g log2(b) bits of a^g and b^g.
    """
    k = _POW_BITS
    x_lo, rem = divmod(a << k, b)
    x_hi = x_lo + (1 if rem else 0)
    lo = hi = 1 << k
    e = g
    while True:
        if e & 1:
            lo = (lo * x_lo) >> k
            hi = -((-hi * x_hi) >> k)  # ceiling
        e >>= 1
        if not e:
            break
        x_lo = (x_lo * x_lo) >> k
        x_hi = -((-x_hi * x_hi) >> k)
    u = source.getrandbits(k)
    if u < lo:  # U < (u + 1) / 2^K <= lo / 2^K <= (a/b)^g
        return True
    if u >= hi:  # U >= u / 2^K >= (a/b)^g
        return False
    num, den = a ** g, b ** g
    v = (num << k) - u * den  # U < (a/b)^g  iff  U' < v / den
    if v <= 0:
        return False
    if v >= den:
        return True
    return _bernoulli_ratio(v, den, source)


def polya(r: Fraction, gamma: Fraction, source: RandomSource = _SYSTEM) -> int:
    """Pólya / negative binomial NB(r, alpha), alpha = exp(-gamma), for rational 0 < r <= 1.

    P(X = x) = Gamma(x + r) / (x! Gamma(r)) alpha^x (1 - alpha)^r.

    Exact rejection sampler (our construction; proof in ``docs/central.md``). The plain form:
    propose G ~ Geometric with P(G = g) = (1 - alpha) alpha^g and accept with probability
    C(g + r - 1, g) = prod_{j=1..g} (j - 1 + r) / j, which is <= 1 because r <= 1 and is drawn
    as g independent rational Bernoulli factors (stopping at the first failure); accepted values
    have pmf proportional to alpha^g C(g + r - 1, g), i.e. NB(r, alpha). Drawing the j = 1 factor
    (probability r) first, a round either returns 0 (G = 0, probability 1 - alpha), or passes the
    j = 1 factor (probability alpha r) and goes on to G's magnitude and the other factors, or
    restarts (probability alpha (1 - r)): about 1/gamma rounds for small gamma and r = 1/n.

    This implementation skips the restarting rounds in one step: the number H of rounds with
    G >= 1 before the first G = 0 is Geometric(alpha) (:func:`geometric_exp`, O(1) expected draws
    for any gamma), each of them independently passes the j = 1 factor with probability r, so
    "a G = 0 round comes first" is Bernoulli((1 - r)^H) (:func:`_bernoulli_power`, exact); else
    the first passing round continues as above (G = 1 + Geometric(alpha), factors j = 2..G), and
    a rejection there restarts the whole procedure. The output law is that of the plain form;
    the expected cost is O(1) draws for the protocols' r = 1/(gamma n) whatever gamma (e.g.
    ~30 us at gamma = 0.01 instead of ~300 us with the round-by-round loop).
    """
    rn, rd = r.numerator, r.denominator
    gs, gt = gamma.numerator, gamma.denominator
    while True:
        # H = 0 (the first round has G = 0) with probability 1 - alpha: return 0
        if not _bexp(gs, gt, source):
            return 0
        h = 1 + _geometric(gs, gt, source)  # memoryless: H | H >= 1 is 1 + Geometric(alpha)
        if _bernoulli_power(rd - rn, rd, h, source):  # none of the H rounds passes the j = 1 factor
            return 0
        g = 1 + _geometric(gs, gt, source)  # the first passing round's G (>= 1)
        ok = True
        # factor (j - 1 + r)/j = ((j - 1) rd + rn) / (j rd), j = 2..g
        for j in range(2, g + 1):
            if source.randbelow(j * rd) >= (j - 1) * rd + rn:
                ok = False
                break
        if ok:
            return g
