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

import numpy as np

from ..core.errors import ValidationError
from .packed import random_words

__all__ = ["dyadic", "bernoulli_packed", "packed_column_sums", "set_bits", "packed_bits_at",
           "unpack_rows", "DEFAULT_PRECISION"]

#: Bits of precision of a dyadic probability (rounding error <= 2^-16).
DEFAULT_PRECISION = 16


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
