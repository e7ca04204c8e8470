"""Lazy exact Bernoulli sampler, SWAR column sums and pack/unpack (shuffledp.local.packed)."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from shuffledp.core.errors import ValidationError
from shuffledp.local.bits import packed_column_sums, unpack_rows
from shuffledp.local.packed import (
    bernoulli_packed_lazy,
    dyadic_digits,
    pack_rows,
    packed_column_sums_swar,
    popcount_rows,
)
from tests.conftest import mean_z_bound


class _ListBitGen:
    """Stand-in bit generator: random_raw returns the next prescribed words."""

    def __init__(self, words):
        self.words = list(words)
        self.used = 0

    def random_raw(self, size):
        out = np.array(self.words[self.used:self.used + size], dtype=np.uint64)
        assert out.size == size, "sampler asked for more words than prescribed"
        self.used += size
        return out


class _FakeRng:
    """Not a known 64-bit raw generator, so the sampler draws words through ``integers``."""

    def __init__(self, words):
        self.bit_generator = _ListBitGen(words)

    def integers(self, low, high, size, dtype, endpoint):
        assert (low, high, dtype, endpoint) == (0, 2**64 - 1, np.uint64, True)
        return self.bit_generator.random_raw(size)


@pytest.mark.parametrize("q", [Fraction(1, 2), Fraction(1, 4), Fraction(3, 8), Fraction(5, 16), Fraction(13, 32),
                               Fraction(1, 64), Fraction(63, 64), Fraction(37, 64)])
def test_lazy_sampler_is_exact_by_enumeration(q):
    """Bit j of digit word i is the i-th binary digit of U_j. With <= 6 digits, the 64 bits of one
    word see all 64 digit strings, so the sampler must output exactly 1{U_j < q}: q * 64 ones."""
    k = len(dyadic_digits(float(q)))
    assert k <= 6
    words = []
    for i in range(k):  # word i, bit j = digit i+1 of the 6-digit string j (most significant first)
        words.append(sum(((j >> (5 - i)) & 1) << j for j in range(64)))
    rng = _FakeRng(words)
    out = bernoulli_packed_lazy(1, 64, float(q), rng)
    assert rng.bit_generator.used == k
    bits = unpack_rows(out, 64)[0]
    expected = np.array([Fraction(j, 64) < q for j in range(64)], dtype=np.uint8)  # U_j's first 6 digits = j
    np.testing.assert_array_equal(bits, expected)
    assert bits.sum() == q * 64


@pytest.mark.parametrize("q", [0.5, 0.25, float(Fraction(round(0.2689414 * 2**26), 2**26)),
                               float(Fraction(round(0.01 * 2**40), 2**40)), float(Fraction(12345, 2**14)),
                               float(Fraction(1, 2**30) + Fraction(1, 2))])
@pytest.mark.parametrize("n_bits", [64, 100, 13])
def test_lazy_sampler_rate_and_independence(q, n_bits, rng):
    n = 6000
    bits = unpack_rows(bernoulli_packed_lazy(n, n_bits, q, rng), n_bits).astype(np.float64)
    z = (bits.mean() - q) / np.sqrt(q * (1 - q) / bits.size)
    assert abs(z) < mean_z_bound()
    zc = (bits.mean(axis=0) - q) / np.sqrt(q * (1 - q) / n)
    assert np.abs(zc).max() < mean_z_bound(1e-4 / n_bits)
    for j in {0, 7, n_bits - 2}:  # neighbouring bits (inside a byte, across bytes/words)
        prod = (bits[:, j] * bits[:, j + 1]).mean()
        assert abs(prod - q * q) < mean_z_bound(1e-5) * np.sqrt(q * q * (1 - q * q) / n)


@pytest.mark.parametrize("bitgen", [np.random.MT19937, np.random.Philox, np.random.SFC64])
def test_lazy_sampler_any_bit_generator(bitgen):
    """MT19937's random_raw is 32 bits wide: words must come from integers() there (all 64 bits fair)."""
    q = 0.3125
    g = np.random.Generator(bitgen(11))
    bits = unpack_rows(bernoulli_packed_lazy(4000, 128, q, g), 128).astype(np.float64)
    zc = (bits.mean(axis=0) - q) / np.sqrt(q * (1 - q) / bits.shape[0])
    assert np.abs(zc).max() < mean_z_bound(1e-4 / 128)


def test_lazy_sampler_joint_law_chisquare(rng):
    """Pairs of bits (same word) have the product law (chi-square on the 4 cells)."""
    q = 0.375
    b = unpack_rows(bernoulli_packed_lazy(40000, 64, q, rng), 64)
    cells = np.bincount(2 * b[:, 3] + b[:, 40], minlength=4)
    probs = np.array([(1 - q) ** 2, (1 - q) * q, q * (1 - q), q * q])
    assert stats.chisquare(cells, probs * cells.sum()).pvalue > 1e-4


def test_lazy_sampler_edge_cases_and_errors(rng):
    assert (bernoulli_packed_lazy(5, 13, 1.0, rng) == np.array([0xFF, 0x1F], dtype=np.uint8)).all()
    assert not bernoulli_packed_lazy(5, 13, 0.0, rng).any()
    assert bernoulli_packed_lazy(0, 13, 0.5, rng).shape == (0, 2)
    out = np.empty((3, 2), dtype=np.uint8)
    assert bernoulli_packed_lazy(3, 13, 0.5, rng, out=out) is out
    with pytest.raises(ValidationError):
        bernoulli_packed_lazy(3, 13, 1e-30, rng)  # a float, but with more than 64 binary digits
    assert len(dyadic_digits(0.1)) == 55  # the float 0.1 is dyadic: sampled exactly
    with pytest.raises(ValidationError):
        bernoulli_packed_lazy(3, 13, 0.5, rng, out=np.empty((3, 3), dtype=np.uint8))
    with pytest.raises(ValidationError):
        dyadic_digits(1.5)
    assert dyadic_digits(0.625) == [1, 0, 1] and dyadic_digits(0.0) == []
    # same seed, same bits
    a = bernoulli_packed_lazy(50, 300, 0.3125, np.random.default_rng(5))
    b = bernoulli_packed_lazy(50, 300, 0.3125, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 700), n_bits=st.integers(1, 200), block=st.integers(1, 600), seed=st.integers(0, 2**32 - 1))
def test_swar_column_sums_match_unpacked(n, n_bits, block, seed):
    r = np.random.default_rng(seed)
    packed = pack_rows(r.integers(0, 2, (n, n_bits)))
    expect = unpack_rows(packed, n_bits).sum(axis=0, dtype=np.int64)
    np.testing.assert_array_equal(packed_column_sums_swar(packed, n_bits, block_rows=block), expect)


def test_swar_all_ones_no_overflow_and_noncontiguous(rng):
    n, d = 5000, 130
    ones = np.full((n, (d + 7) // 8), 0xFF, dtype=np.uint8)
    ones[:, -1] = 0b11
    np.testing.assert_array_equal(packed_column_sums_swar(ones, d), np.full(d, n))
    p = bernoulli_packed_lazy(2 * n, 256, 0.5, rng)
    view = p[::2]  # not contiguous
    np.testing.assert_array_equal(packed_column_sums_swar(view, 256), packed_column_sums(np.ascontiguousarray(view), 256))
    with pytest.raises(ValidationError):
        packed_column_sums_swar(np.zeros((2, 3), dtype=np.uint8), 8)
    with pytest.raises(ValidationError):
        packed_column_sums_swar(np.zeros((2, 1), dtype=np.int64), 8)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), n_bits=st.integers(1, 150), seed=st.integers(0, 2**32 - 1))
def test_pack_unpack_roundtrip(n, n_bits, seed):
    r = np.random.default_rng(seed)
    bits = r.integers(0, 2, (n, n_bits)).astype(np.uint8)
    packed = pack_rows(bits)
    assert packed.shape == (n, (n_bits + 7) // 8) and packed.dtype == np.uint8
    np.testing.assert_array_equal(unpack_rows(packed, n_bits), bits)
    np.testing.assert_array_equal(pack_rows(unpack_rows(packed, n_bits)), packed)
    np.testing.assert_array_equal(popcount_rows(packed), bits.sum(axis=1))
    if n_bits % 8 and n:
        assert not (packed[:, -1] >> (n_bits % 8)).any()  # padding bits zero


def test_pack_rows_rejects_non_bits():
    with pytest.raises(ValidationError):
        pack_rows(np.array([[0, 2]]))
    with pytest.raises(ValidationError):
        pack_rows(np.array([0, 1]))
    with pytest.raises(ValidationError):
        pack_rows(np.array([[0.0, 1.0]]))


def test_lazy_sampler_word_budget():
    """About 8.6 random words per 64 bits whatever the number of digits (LSB-first needs one per digit)."""
    from shuffledp.local import packed

    bg = np.random.PCG64(3)
    drawn = []

    def draw(size):
        drawn.append(size)
        return bg.random_raw(size)

    for k in (12, 30, 48):
        q = float(Fraction(round(0.2689414 * 2**k) | 1, 2**k))  # exactly k digits
        assert len(dyadic_digits(q)) == k
        drawn.clear()
        out = np.empty(1 << 18, dtype=np.uint64)
        packed._lazy_words(out.size, dyadic_digits(q), draw, out)
        assert 8.3 < sum(drawn) / out.size < 8.9
        ones = np.unpackbits(out.view(np.uint8)).mean()
        assert abs(ones - q) < mean_z_bound() * np.sqrt(q * (1 - q) / (64 * out.size))
