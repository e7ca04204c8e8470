"""Faster bit-packed primitives for unary encodings: a lazy exact Bernoulli sampler and SWAR column sums.

Complements :mod:`shuffledp.local.bits` (same packing: little-endian bit order, bit ``j`` of a row
is bit ``j % 8`` of byte ``j // 8``, padding bits past ``n_bits`` are zero).

Lazy Bernoulli sampling (most significant digit first)
-------------------------------------------------------
A bit is ``1{U < q}`` for a uniform ``U = 0.u_1 u_2 ...`` in binary and a dyadic
``q = 0.b_1 b_2 ... b_K``. Compare digit by digit: at the first ``i`` with ``u_i != b_i`` the bit is
decided (``1`` iff ``u_i < b_i``, i.e. ``b_i = 1, u_i = 0``); if the first ``K`` digits all agree
then ``U >= q`` and the bit is ``0``. Hence ``Pr[bit = 1] = q`` *exactly*, and bits fed by
independent fair digits are independent. 64 bits are processed at a time: one fair 64-bit word
per digit gives the ``u_i`` of 64 bits, and a word ``u`` marks the still-undecided bits.

A bit is still undecided after ``k`` digits with probability ``2^-k``, so after the first few
digits only the (few) words with an undecided bit are kept (compaction) and the later digits cost
almost nothing. The expected number of random words per 64 output bits is
``sum_k Pr[word undecided after k digits] = sum_k 1 - (1 - 2^-k)^64 ~ 7.4`` with compaction after
every digit; the schedule used (8 digits on every word, then compaction every 2 digits, which is
faster in numpy) draws about 8.6. Either way it is independent of ``K`` (versus ``K`` words for the least-significant-first construction of
:func:`shuffledp.local.bits.bernoulli_packed`). This lets the mechanisms use fine grids
(``2^-24`` or finer) for the rounded probabilities at no cost.

SWAR column sums
----------------
Column sums of a packed ``(n, bytes)`` matrix: view rows as 64-bit words; for ``j`` in 0..3,
``(w >> j) & 0x1111...`` isolates every 4th bit in its own 4-bit field, so 15 rows add without
carries between fields; splitting the nibble fields into byte lanes (``& 0x0F0F...``) lets 17 such
partial sums add without overflow (``15 * 17 = 255``). Four passes over the data count all 64
columns of a word (the plain method needs eight passes over bytes).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import randomgen

from ..core.errors import ValidationError

__all__ = [
    "dyadic_digits",
    "bernoulli_packed_lazy",
    "packed_column_sums_swar",
    "pack_rows",
    "popcount_rows",
    "random_words",
    "MAX_DIGITS",
]

#: Most binary digits a probability given to :func:`bernoulli_packed_lazy` may have.
MAX_DIGITS = 64

#: Digits processed on every word before undecided words are compacted.
_FULL_DIGITS = 8
#: Compact the undecided words again every this many digits.
_COMPACT_EVERY = 2
#: Words per block of the sampler (temporaries of 128 KB that stay in the L2 cache: about 1.4x faster
#: than 512 KB blocks on the development machine).
_BLOCK_WORDS = 1 << 14

_M1 = np.uint64(0x1111111111111111)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def dyadic_digits(q: float, max_digits: int = MAX_DIGITS) -> list[int]:
    """Binary digits ``b_1..b_K`` of ``q`` in [0, 1] (``K`` = position of the last 1; ``[]`` for 0).

    Raises :class:`ValidationError` unless ``q`` is a dyadic rational with at most ``max_digits``
    digits (``q = 1`` is not representable as ``0.b_1 b_2 ...`` and is handled by the callers).
    """
    if not isinstance(q, (float, int)) or not (0.0 <= q < 1.0):
        raise ValidationError(f"probability must lie in [0, 1), got {q!r}", parameter="q")
    fr = Fraction(q)
    den = fr.denominator
    k = den.bit_length() - 1
    if den != 1 << k or k > max_digits:
        raise ValidationError(f"{q!r} is not a dyadic rational with <= {max_digits} binary digits",
                              parameter="q")
    m = fr.numerator
    return [(m >> (k - 1 - i)) & 1 for i in range(k)]


#: Bit generators whose ``random_raw`` returns full 64-bit words (MT19937's returns 32-bit values),
#: including the cryptographic ones of :func:`shuffledp.core.rng.secure_rng` (randomgen's counter modes).
_RAW64 = (np.random.PCG64, np.random.PCG64DXSM, np.random.SFC64, np.random.Philox,
          randomgen.AESCounter, randomgen.ChaCha)


def random_words(rng: np.random.Generator):
    """A function ``size -> uint64 array`` of independent uniform 64-bit words drawn from ``rng``.

    Uses the bit generator's raw output where it is 64 bits wide (fastest), otherwise
    ``rng.integers`` over the full uint64 range (any bit generator, e.g. MT19937).
    """
    bitgen = rng.bit_generator
    if type(bitgen) in _RAW64:
        return bitgen.random_raw
    return lambda size: rng.integers(0, 0xFFFFFFFFFFFFFFFF, size=size, dtype=np.uint64, endpoint=True)


def _lazy_head(n_words: int, head: list[int], draw, out: np.ndarray) -> np.ndarray:
    """The first digits ``head`` on every word: ``out`` (``n_words`` uint64) receives the bits
    decided 1, and the returned words mark the bits still undecided (``U`` agrees with ``q`` on
    every digit so far).

    Invariant: ``r`` (decided ones) and ``u`` (undecided) are disjoint bit sets, so for a digit
    ``b = 1`` the update ``r |= u & ~w; u &= w`` equals ``v = u & w; r ^= u ^ v; u = v``.
    """
    r = out
    w = draw(n_words)
    r_zero = not head[0]  # no bit decided 1 yet: ``r`` is written (not updated) at the first digit 1
    if head[0]:  # U < 1/2 decides 1; the rest stay undecided
        np.invert(w, out=r)
        u = w
    else:  # U >= 1/2 decides 0
        u = np.invert(w, out=w)
    for b in head[1:]:
        w = draw(n_words)
        np.bitwise_and(w, u, out=w)  # still undecided after this digit if b = 1 ...
        if b:  # ... and u & ~w = u ^ (u & w) are decided 1
            if r_zero:
                np.bitwise_xor(u, w, out=r)
                r_zero = False
            else:
                np.bitwise_xor(r, u, out=r)
                np.bitwise_xor(r, w, out=r)
            u = w
        else:  # undecided bits with u_i = 1 > b_i = 0 become 0: u &= ~w
            np.bitwise_xor(u, w, out=u)
    if r_zero:
        r[...] = 0
    return u


def _lazy_tail(r: np.ndarray, idx: np.ndarray, us: np.ndarray, tail: list[int], draw) -> None:
    """The remaining digits ``tail`` on the words ``r[idx]`` whose undecided bits are ``us``
    (compacted: only words with an undecided bit, again every :data:`_COMPACT_EVERY` digits)."""
    rs = np.zeros(us.shape, dtype=np.uint64)
    for j, b in enumerate(tail):
        if j and j % _COMPACT_EVERY == 0:
            r[idx] |= rs
            keep = (us != 0).nonzero()[0]  # (a boolean mask: several times faster than on the words)
            idx, us = idx[keep], us[keep]
            rs = np.zeros(us.shape, dtype=np.uint64)
        if idx.size == 0:
            return
        w = draw(idx.size)
        if b:
            rs |= us & ~w
            us &= w
        else:
            us &= ~w
    r[idx] |= rs  # bits still undecided after all digits: U >= q, they stay 0


def _lazy_words(n_words: int, digits: list[int], draw, out: np.ndarray) -> None:
    """Fill ``out`` (``n_words`` uint64) with independent Bernoulli(0.digits) bits, in place:
    :func:`_lazy_head` on the first :data:`_FULL_DIGITS` digits, :func:`_lazy_tail` on the rest."""
    head, tail = digits[:_FULL_DIGITS], digits[_FULL_DIGITS:]
    u = _lazy_head(n_words, head, draw, out)
    if tail:
        idx = (u != 0).nonzero()[0]
        _lazy_tail(out, idx, u[idx], tail, draw)


def bernoulli_packed_lazy(n_rows: int, n_bits: int, q: float, rng: np.random.Generator,
                          out: np.ndarray | None = None) -> np.ndarray:
    """``(n_rows, ceil(n_bits / 8))`` uint8 packed independent Bernoulli(q) bits (exact for dyadic q).

    ``q`` must be a dyadic rational with at most :data:`MAX_DIGITS` binary digits (or exactly 0
    or 1). The expected cost is about 8.6 random 64-bit words per 64 bits (7.4 with ideal
    compaction) whatever the number of digits (see the module docstring). ``out``, if given, is filled in place and returned.
    """
    n_rows, n_bits = int(n_rows), int(n_bits)
    n_bytes = (n_bits + 7) // 8
    if out is None:
        out = np.empty((n_rows, n_bytes), dtype=np.uint8)
    elif out.shape != (n_rows, n_bytes) or out.dtype != np.uint8:
        raise ValidationError(f"out must be a uint8 array of shape {(n_rows, n_bytes)}", parameter="out")
    if q == 1.0:
        out[...] = 0xFF
    elif q == 0.0 or n_rows == 0:
        out[...] = 0
        return out
    else:
        digits = dyadic_digits(q)
        n_words_row = (n_bits + 63) // 64
        direct = n_bytes == n_words_row * 8 and out.flags.c_contiguous and np.little_endian
        draw = random_words(rng)
        rows_per = max(1, _BLOCK_WORDS // n_words_row)
        if direct:
            flat = out.reshape(-1).view(np.uint64)
            for lo in range(0, n_rows, rows_per):  # blocks of rows (bounded temporaries)
                hi = min(n_rows, lo + rows_per)
                _lazy_words((hi - lo) * n_words_row, digits, draw, flat[lo * n_words_row:hi * n_words_row])
        else:
            buf = np.empty(rows_per * n_words_row, dtype=np.uint64)
            for lo in range(0, n_rows, rows_per):  # blocks of rows (bounded temporaries)
                hi = min(n_rows, lo + rows_per)
                nw = (hi - lo) * n_words_row
                _lazy_words(nw, digits, draw, buf[:nw])
                words = buf[:nw].byteswap() if not np.little_endian else buf[:nw]  # pragma: no branch
                out[lo:hi] = words.view(np.uint8).reshape(hi - lo, n_words_row * 8)[:, :n_bytes]
    rem = n_bits % 8
    if rem:
        out[:, -1] &= np.uint8((1 << rem) - 1)
    return out


def packed_column_sums_swar(packed: np.ndarray, n_bits: int, block_rows: int = 255 * 16) -> np.ndarray:
    """Number of ones in each of the ``n_bits`` columns (int64), SWAR over 64-bit words.

    Same result as :func:`shuffledp.local.bits.packed_column_sums` (about twice as fast);
    memory is O(``block_rows`` x row bytes) beyond the input.
    """
    packed = np.asarray(packed)
    n_bytes = (n_bits + 7) // 8
    if packed.ndim != 2 or packed.dtype != np.uint8 or packed.shape[1] != n_bytes:
        raise ValidationError(f"packed bits must be a 2-D uint8 array with {n_bytes} columns",
                              parameter="reports")
    n = packed.shape[0]
    W = (n_bytes + 7) // 8
    block_rows = max(255, (int(block_rows) // 255) * 255)
    lo_tot = np.zeros((4, W * 8), dtype=np.int64)
    hi_tot = np.zeros((4, W * 8), dtype=np.int64)
    t = np.empty(block_rows * W, dtype=np.uint64)
    for start in range(0, n, block_rows):  # blocks of rows
        blk = packed[start:start + block_rows]
        r = blk.shape[0]
        if n_bytes % 8 or r % 255 or not blk.flags.c_contiguous or not np.little_endian:
            rr = -(-r // 255) * 255  # zero rows and zero bytes add nothing
            tmp = np.zeros((rr, W * 8), dtype=np.uint8)
            tmp[:r, :n_bytes] = blk
            blk = tmp
        words = blk.view(np.uint64) if np.little_endian else blk.view("<u8").astype(np.uint64)
        g = words.shape[0] // 255
        tt = t[:words.size].reshape(words.shape)
        for j in range(4):
            np.right_shift(words, np.uint64(j), out=tt)
            np.bitwise_and(tt, _M1, out=tt)  # bit 4k + j of the word in field k (4 bits)
            s15 = tt.reshape(g * 17, 15, W).sum(axis=1, dtype=np.uint64)  # fields <= 15
            lo = (s15 & _M4).reshape(g, 17, W).sum(axis=1, dtype=np.uint64)  # byte lanes <= 255
            hi = ((s15 >> np.uint64(4)) & _M4).reshape(g, 17, W).sum(axis=1, dtype=np.uint64)
            lo_tot[j] += lo.view(np.uint8).sum(axis=0, dtype=np.int64)  # lane b: bit j of byte b
            hi_tot[j] += hi.view(np.uint8).sum(axis=0, dtype=np.int64)  # lane b: bit 4 + j of byte b
    total = np.empty(W * 64, dtype=np.int64)
    for j in range(4):
        total[j::8] = lo_tot[j]
        total[4 + j::8] = hi_tot[j]
    return total[:n_bits]


def pack_rows(bits: np.ndarray) -> np.ndarray:
    """Pack an ``(n, n_bits)`` 0/1 array into ``(n, ceil(n_bits / 8))`` uint8 rows (inverse of unpack)."""
    b = np.asarray(bits)
    if b.ndim != 2 or not (np.issubdtype(b.dtype, np.integer) or b.dtype == np.bool_):
        raise ValidationError("bits must be a 2-D array of 0/1 integers", parameter="bits")
    if b.size and (b.min() < 0 or b.max() > 1):
        raise ValidationError("bits must contain only 0 and 1", parameter="bits")
    return np.packbits(b.astype(np.uint8, copy=False), axis=1, bitorder="little")


def popcount_rows(packed: np.ndarray) -> np.ndarray:
    """Number of ones in each packed row (int64); padding bits must be zero."""
    p = np.asarray(packed, dtype=np.uint8)
    return _POP8[p].sum(axis=1, dtype=np.int64)

