"""Fast bit-packed Bernoulli sampling and column sums for unary-style encodings.

Unary encodings (SUE/OUE, RAPPOR's Bloom bits, Apple's CMS) report ``n x d`` bits. Drawing one
float per bit costs ~8 bytes of randomness and one comparison per bit; at n = 10^6, d = 1024
that is 10^9 floats. Here bits are produced **64 at a time** from fair random words:

For ``q = sum_{i=1..K} b_i 2^{-i}`` (a dyadic probability), define ``X_{K+1} = 0`` and
``X_i = W_i | X_{i+1}`` if ``b_i = 1`` else ``W_i & X_{i+1}``, where the ``W_i`` are independent
fair random words. Then ``Pr[X_i bit = 1] = b_i / 2 + Pr[X_{i+1} bit = 1] / 2``, so every bit of
``X_1`` is an independent Bernoulli(q). A probability that is not dyadic is first rounded to
``K = precision`` bits **in the direction the caller asks for** (mechanisms round so that the
privacy ratio can only shrink) and the mechanism then uses the rounded value everywhere
(estimator, variance, ``probabilities``): the privacy check stays exact.

Bits are packed little-endian (``np.packbits(..., bitorder="little")``): bit ``j`` of a row is
bit ``j % 8`` of byte ``j // 8``; padding bits past ``n_bits`` are zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import round_up
from .packed import random_words

__all__ = ["dyadic", "bernoulli_packed", "packed_column_sums", "set_bits", "packed_bits_at",
           "unpack_rows", "DEFAULT_PRECISION", "UNIFORM_PRECISION", "grid_fraction", "log_ratio_up",
           "calibrate_probability", "LOG_MARGIN"]

#: Bits of precision of a dyadic probability (rounding error <= 2^-16).
DEFAULT_PRECISION = 16

#: Binary digits of a threshold compared with ``Generator.random()``. numpy's doubles are
#: ``k / 2^53`` with ``k`` uniform on ``[0, 2^53)`` (the top 53 bits of one 64-bit output), so
#: ``rng.random(n) < t`` is Bernoulli(t) **exactly** for every ``t`` on the ``2^-53`` grid. For a
#: ``t`` off the grid it is Bernoulli(ceil(t 2^53) / 2^53), not Bernoulli(t).
UNIFORM_PRECISION = 53

#: Relative outward margin of :func:`log_ratio_up`: 16 times its worst float error (2^-53 from
#: forming ``ratio - 1``, one ulp from ``log1p``), far below any tolerance a statement is read at.
LOG_MARGIN = 2.0**-48

#: Relative margin below the float ``e^eps`` demanded of an exact ratio (``math.exp`` is within
#: one ulp, 2^-52 relative, of the true value).
_EXP_MARGIN = 1 - Fraction(1, 1 << 50)


def grid_fraction(q: float, precision: int = UNIFORM_PRECISION, direction: str = "up") -> Fraction:
    """``q`` in [0, 1] rounded to a multiple of ``2^-precision`` (``"up"`` or ``"down"``), exactly.

    ``precision`` may be up to 53 (:data:`UNIFORM_PRECISION`): the result is then a double that
    ``rng.random(n) < float(result)`` samples exactly.
    """
    if not (0.0 <= q <= 1.0) or not math.isfinite(q):
        raise ValidationError(f"probability must be in [0, 1], got {q}", parameter="q")
    if not 1 <= precision <= UNIFORM_PRECISION:
        raise ValidationError(f"precision must be in [1, {UNIFORM_PRECISION}], got {precision}",
                              parameter="precision")
    if direction not in ("up", "down"):
        raise ValidationError(f"direction must be 'up' or 'down', got {direction!r}", parameter="direction")
    scale = 1 << precision
    v = Fraction(q) * scale  # exact: q is a double
    m = math.ceil(v) if direction == "up" else math.floor(v)
    return Fraction(min(scale, max(0, m)), scale)


def log_ratio_up(ratio: Fraction) -> float:
    """An upper bound on ``ln(ratio)`` for an exact ``ratio >= 1``, float error rounded outward.

    ``log1p`` of the exactly formed ``ratio - 1`` (no cancellation for ratios near 1): its relative
    error is at most 2^-53 (rounding ``ratio - 1``; ``t / (1 + t) <= log1p(t)``) plus one ulp
    (``log1p``). :func:`shuffledp.core.privacy.round_up` moves it up by :data:`LOG_MARGIN` relative
    (16 times that) and one ulp.
    """
    if ratio < 1:
        raise ValidationError(f"a worst-case likelihood ratio must be >= 1, got {float(ratio)!r}",
                              parameter="ratio")
    return round_up(math.log1p(float(ratio - 1)), LOG_MARGIN)


def calibrate_probability(p_ideal: float, epsilon: float, ratio: Callable[[Fraction], Fraction],
                          direction: str, precision: int = UNIFORM_PRECISION,
                          parameter: str = "epsilon") -> tuple[Fraction, float]:
    """The probability a mechanism actually samples, and the exact eps that it realizes.

    A mechanism draws an event (keep the true value, flip a sign, ...) with probability ``p``
    whose ideal value ``p_ideal`` makes its worst-case likelihood ratio ``ratio(p)`` equal to
    ``e^epsilon``. A float ``p_ideal`` is not exactly that value, and ``rng.random() < p_ideal``
    does not sample it exactly either. This returns the dyadic ``p`` on the ``2^-precision`` grid
    closest to ``p_ideal`` in ``direction`` (the direction in which ``ratio`` does not increase)
    with ``ratio(p) <= e^epsilon`` checked in exact rational arithmetic (with a 2^-50 relative
    margin for the float ``e^epsilon``), clamped to the open interval ``(0, 1)``.

    Parameters
    ----------
    p_ideal : float
        The unrounded probability.
    epsilon : float
        The requested eps.
    ratio : callable
        ``ratio(p)``, the mechanism's exact worst-case likelihood ratio as a function of the exact
        probability ``p`` in (0, 1) (a :class:`~fractions.Fraction`); non-increasing as ``p`` moves in
        ``direction``.
    direction : {"up", "down"}
        Rounding direction of ``p``.
    precision : int
        Grid ``2^-precision``, at most 53 (the default: exact for ``rng.random() < float(p)``).
    parameter : str
        Parameter named in the error raised when ``epsilon`` is too small for the grid.

    Returns
    -------
    (p, effective_epsilon)
        ``p`` exact (``float(p)`` is the same number) and ``effective_epsilon =
        min(epsilon, ln ratio(p))`` rounded up: the mechanism that samples ``p`` is exactly
        ``ln ratio(p)``-LDP, and ``ln ratio(p) <= effective_epsilon <= epsilon``.

    Raises
    ------
    ValidationError
        When the rounded ``p`` has ``ratio(p) <= 1`` (``epsilon`` below the grid's resolution).
    """
    step = Fraction(1, 1 << precision)
    sign = 1 if direction == "up" else -1
    p = min(1 - step, max(step, grid_fraction(p_ideal, precision, direction)))
    e = math.exp(epsilon) if epsilon < 700.0 else math.inf
    bound = Fraction(e) * _EXP_MARGIN if e < math.inf else None

    def within(r: Fraction) -> bool:
        return r <= bound if bound is not None else log_ratio_up(r) < epsilon

    r = ratio(p)
    for _ in range(1 << 12):  # a few steps in practice: p_ideal is within a few ulps of the boundary
        # stop at the end of the open interval *in the direction of travel* only: a p clamped to
        # 1 - step may still step down (e^eps between 2^52 and 2^53 for p ~ e^eps/(e^eps+1))
        if within(r) or not (step <= p + sign * step <= 1 - step):
            break
        p += sign * step
        r = ratio(p)
    if not within(r):
        raise ValidationError(f"{parameter}={epsilon!r}: no probability on the grid 2^-{precision} near "
                              f"{p_ideal!r} meets the ratio e^{parameter}", parameter=parameter)
    if r <= 1:
        raise ValidationError(f"{parameter}={epsilon!r} is too small for the probability grid 2^-{precision} "
                              f"(the rounded probability {float(p)!r} has likelihood ratio {float(r)!r} <= 1)",
                              parameter=parameter)
    return p, min(epsilon, log_ratio_up(r))


def dyadic(q: float, precision: int = DEFAULT_PRECISION, direction: str = "up") -> float:
    """Round ``q`` in [0, 1] to a multiple of ``2^-precision`` (``"up"``, ``"down"`` or ``"nearest"``)."""
    if not (0.0 <= q <= 1.0) or not math.isfinite(q):
        raise ValidationError(f"probability must be in [0, 1], got {q}", parameter="q")
    if not 1 <= precision <= 32:
        raise ValidationError(f"precision must be in [1, 32], got {precision}", parameter="precision")
    scale = 1 << precision
    f = {"up": math.ceil, "down": math.floor, "nearest": round}[direction]
    return min(scale, max(0, int(f(q * scale)))) / scale


def _dyadic_digits(q: float) -> list[int]:
    """Binary digits b_1..b_K of a dyadic q in [0, 1) (K = position of the last 1, K <= 32)."""
    digits: list[int] = []
    x = q
    for _ in range(32):
        if x == 0.0:
            break
        x *= 2.0
        bit = int(x >= 1.0)
        digits.append(bit)
        x -= bit
    if x != 0.0:
        raise ValidationError(f"{q!r} is not a dyadic rational with <= 32 binary digits; round it with dyadic()",
                              parameter="q")
    return digits


def bernoulli_packed(n_rows: int, n_bits: int, q: float, rng: np.random.Generator) -> np.ndarray:
    """``(n_rows, ceil(n_bits / 8))`` uint8 array of packed independent Bernoulli(q) bits.

    ``q`` must be dyadic (use :func:`dyadic`); the cost is one random 64-bit word per 64 bits
    per binary digit of ``q``.
    """
    n_bytes = (n_bits + 7) // 8
    n_words = (n_bits + 63) // 64
    if q >= 1.0:
        out = np.full((n_rows, n_bytes), 0xFF, dtype=np.uint8)
    elif q <= 0.0:
        return np.zeros((n_rows, n_bytes), dtype=np.uint8)
    else:
        digits = _dyadic_digits(q)
        draw = random_words(rng)  # full 64-bit words for any bit generator (MT19937's raw is 32-bit)
        size = n_rows * n_words
        x = draw(size).astype(np.uint64, copy=False)  # digit b_K = 1 (last digit)
        for b in reversed(digits[:-1]):
            w = draw(size).astype(np.uint64, copy=False)
            if b:
                np.bitwise_or(x, w, out=x)
            else:
                np.bitwise_and(x, w, out=x)
        out = x.view(np.uint8).reshape(n_rows, n_words * 8)[:, :n_bytes]
        if np.little_endian is False:  # pragma: no cover - big-endian hosts
            out = x.byteswap().view(np.uint8).reshape(n_rows, n_words * 8)[:, :n_bytes]
        out = np.ascontiguousarray(out)
    rem = n_bits % 8
    if rem:
        out[:, -1] &= np.uint8((1 << rem) - 1)
    return out


def set_bits(packed: np.ndarray, positions: np.ndarray, bits: np.ndarray) -> None:
    """In place: set bit ``positions[i]`` of row ``i`` to ``bits[i]`` (0/1)."""
    rows = np.arange(packed.shape[0])
    byte = positions >> 3
    mask = (np.uint8(1) << (positions & 7).astype(np.uint8)).astype(np.uint8)
    cur = packed[rows, byte]
    packed[rows, byte] = np.where(np.asarray(bits, dtype=bool), cur | mask, cur & ~mask)


def packed_bits_at(packed: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Bit ``positions[i]`` of row ``i`` (uint8 0/1); ``positions`` may be (n,) or (n, m)."""
    positions = np.asarray(positions)
    rows = np.arange(packed.shape[0]).reshape((-1,) + (1,) * (positions.ndim - 1))
    return ((packed[rows, positions >> 3] >> (positions & 7).astype(np.uint8)) & 1).astype(np.uint8)


def unpack_rows(packed: np.ndarray, n_bits: int) -> np.ndarray:
    """Unpack to a ``(n_rows, n_bits)`` uint8 0/1 array (small batches only: n * d bytes)."""
    return np.unpackbits(packed, axis=1, count=n_bits, bitorder="little")


def packed_column_sums(packed: np.ndarray, n_bits: int, chunk: int = 1 << 14) -> np.ndarray:
    """Number of ones in each of the ``n_bits`` columns (int64), streaming over rows."""
    packed = np.asarray(packed)
    if packed.ndim != 2 or packed.dtype != np.uint8 or packed.shape[1] != (n_bits + 7) // 8:
        raise ValidationError(f"packed bits must be a uint8 array with {(n_bits + 7) // 8} columns",
                              parameter="reports")
    total = np.zeros(packed.shape[1] * 8, dtype=np.int64)
    # Sum byte-wise bit planes: for bit j, ((chunk >> j) & 1) summed over rows. uint32 holds any chunk.
    for start in range(0, packed.shape[0], chunk):
        block = packed[start:start + chunk]
        for j in range(8):
            total[j::8] += ((block >> np.uint8(j)) & np.uint8(1)).sum(axis=0, dtype=np.uint32)
    return total[:n_bits]
