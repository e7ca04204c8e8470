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
  C(g + r - 1, g) (our own construction; proof in ``docs/central.md``).

The randomness source is a :class:`secrets.SystemRandom` (``os.urandom``). The ``source``
argument of the low-level functions exists for the library's own tests, which feed a seeded
:class:`random.Random` to check the *algorithm* reproducibly; public release paths never take it
from a caller (see :func:`shuffledp.central.mechanisms.refuse_seed`).

Timing: the loops run a random number of times, so wall-clock time leaks information about the
noise magnitude (Jin et al., S&P 2022). Draw noise off the request path or pad to a fixed time
budget where an adversary can time the release.
"""

from __future__ import annotations

import math
import random
import secrets
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
    """``secrets``-backed source (``os.urandom``); the only source used on release paths."""

    __slots__ = ("_sr",)

    def __init__(self) -> None:
        self._sr = secrets.SystemRandom()

    def randbelow(self, n: int) -> int:
        return self._sr._randbelow(n)  # uniform on [0, n) by rejection on getrandbits

    def getrandbits(self, k: int) -> int:
        return self._sr.getrandbits(k) if k > 0 else 0


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


def _bernoulli_exp_unit(gamma: Fraction, source: RandomSource) -> bool:
    """Bernoulli(exp(-gamma)) for 0 <= gamma <= 1 (CKS20 Algorithm 1, first branch).

    Draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until the first failure at K; return
    whether K is odd. P(K odd) = sum_k (-gamma)^k / k! = exp(-gamma).
    """
    num, den = gamma.numerator, gamma.denominator
    k = 1
    while source.randbelow(den * k) < num:
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma: Fraction, source: RandomSource = _SYSTEM) -> bool:
    """Bernoulli(exp(-gamma)) for rational gamma >= 0, exactly (CKS20 Algorithm 1).

    For gamma > 1 it multiplies floor(gamma) independent Bernoulli(exp(-1)) draws (stopping at
    the first failure) with one Bernoulli(exp(-(gamma - floor(gamma)))).
    Expected cost: O(1) uniform draws (at most ~e + 1/(1 - e^-1) for any gamma).
    """
    if gamma <= 1:
        return _bernoulli_exp_unit(gamma, source)
    whole = gamma.numerator // gamma.denominator
    one = Fraction(1)
    for _ in range(whole):
        if not _bernoulli_exp_unit(one, source):
            return False
    return _bernoulli_exp_unit(gamma - whole, source)


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
        if bernoulli_exp(Fraction(u, t), source):
            break
    v = 0
    one = Fraction(1)
    while _bernoulli_exp_unit(one, source):
        v += 1
    return u + t * v


def geometric_exp(gamma: Fraction, source: RandomSource = _SYSTEM) -> int:
    """G >= 0 with P(G = g) = (1 - e^-gamma) e^(-gamma g), gamma > 0 rational, exactly.

    Writing gamma = s / t, a geometric variable with parameter exp(-1/t) divided (floor) by s
    is geometric with parameter exp(-s/t) (CKS20 Algorithm 2). Expected O(1) draws.
    """
    s, t = gamma.numerator, gamma.denominator
    return _geometric_unit_step(t, source) // s


def discrete_laplace(scale: Fraction, source: RandomSource = _SYSTEM) -> int:
    """Z in the integers with P(Z = z) = (1 - a)/(1 + a) a^|z|, a = exp(-1/scale), exactly.

    CKS20 Algorithm 2: a geometric magnitude with a random sign, rejecting "negative zero"
    so that 0 is not counted twice. ``scale`` is a positive rational.
    """
    inv = 1 / scale  # gamma = 1/scale = s/t
    while True:
        y = geometric_exp(inv, source)
        negative = source.getrandbits(1) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(sigma2: Fraction, source: RandomSource = _SYSTEM) -> int:
    """Z in the integers with P(Z = z) proportional to exp(-z^2 / (2 sigma2)), exactly.

    CKS20 Algorithm 3: propose Y ~ discrete Laplace with scale t = floor(sigma) + 1 and accept
    with probability exp(-(|Y| - sigma2/t)^2 / (2 sigma2)). Expected < ~2.5 proposals.
    ``sigma2`` (the variance parameter sigma^2) is a positive rational.
    """
    # t = floor(sqrt(sigma2)) + 1, computed exactly with integer square roots
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    scale = Fraction(t)
    shift = sigma2 / t
    two_s2 = 2 * sigma2
    while True:
        y = discrete_laplace(scale, source)
        d = abs(y) - shift
        if bernoulli_exp(d * d / two_s2, source):
            return y


def symmetric_binomial(trials: int, source: RandomSource = _SYSTEM) -> int:
    """Binomial(trials, 1/2), exactly: the number of ones among ``trials`` uniform bits."""
    return source.getrandbits(trials).bit_count() if trials > 0 else 0


def polya(r: Fraction, gamma: Fraction, source: RandomSource = _SYSTEM) -> int:
    """Pólya / negative binomial NB(r, alpha), alpha = exp(-gamma), for rational 0 < r <= 1.

    P(X = x) = Gamma(x + r) / (x! Gamma(r)) alpha^x (1 - alpha)^r.

    Exact rejection sampler (our construction): propose G ~ Geometric with
    P(G = g) = (1 - alpha) alpha^g (:func:`geometric_exp`) and accept with probability
    C(g + r - 1, g) = prod_{j=1..g} (j - 1 + r) / j, which is <= 1 because r <= 1 and is drawn as
    g independent rational Bernoulli factors (stopping at the first failure). Accepted values
    have pmf proportional to alpha^g C(g + r - 1, g), i.e. NB(r, alpha). Acceptance rate
    (1 - alpha)^(1 - r), so the expected number of proposals is (1 - alpha)^(r - 1)
    (about 1/gamma for small gamma and r = 1/n).
    """
    rn, rd = r.numerator, r.denominator
    while True:
        g = geometric_exp(gamma, source)
        ok = True
        # factor (j - 1 + r)/j = ((j - 1) rd + rn) / (j rd)
        for j in range(1, g + 1):
            if source.randbelow(j * rd) >= (j - 1) * rd + rn:
                ok = False
                break
        if ok:
            return g
