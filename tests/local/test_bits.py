import numpy as np
import pytest

from shuffledp.core.errors import ValidationError
from shuffledp.local.bits import (bernoulli_packed, dyadic, packed_bits_at, packed_column_sums, set_bits,
                                  unpack_rows)
from tests.conftest import mean_z_bound


@pytest.mark.parametrize("q", [0.5, 0.25, dyadic(1 / (np.e + 1)), dyadic(0.01), dyadic(0.93)])
def test_bernoulli_packed_rate_and_independence(q, rng):
    n, d = 4000, 200
    bits = unpack_rows(bernoulli_packed(n, d, q, rng), d).astype(np.float64)
    m = bits.size
    z = (bits.mean() - q) / np.sqrt(q * (1 - q) / m)
    assert abs(z) < mean_z_bound()
    # every column has rate q (max |z| over d columns, Bonferroni)
    zc = (bits.mean(axis=0) - q) / np.sqrt(q * (1 - q) / n)
    assert np.abs(zc).max() < mean_z_bound(1e-4 / d)
    # adjacent bits (inside and across words) are uncorrelated
    for j in (0, 7, 63):
        prod = (bits[:, j] * bits[:, j + 1]).mean()
        sd = np.sqrt(q * q * (1 - q * q) / n)
        assert abs(prod - q * q) < mean_z_bound() * sd


def test_padding_bits_are_zero_and_shapes(rng):
    p = bernoulli_packed(10, 13, 1.0, rng)
    assert p.shape == (10, 2) and (p[:, 1] == 0b11111).all() and (p[:, 0] == 0xFF).all()
    assert not bernoulli_packed(3, 9, 0.0, rng).any()


def test_column_sums_match_unpacked(rng):
    p = bernoulli_packed(3000, 77, 0.375, rng)
    np.testing.assert_array_equal(packed_column_sums(p, 77, chunk=1000), unpack_rows(p, 77).sum(axis=0))


def test_set_and_read_bits(rng):
    p = bernoulli_packed(6, 20, 0.5, rng)
    pos = np.array([0, 7, 8, 19, 3, 12])
    val = np.array([1, 0, 1, 1, 0, 0])
    before = unpack_rows(p, 20).copy()
    set_bits(p, pos, val)
    after = unpack_rows(p, 20)
    np.testing.assert_array_equal(packed_bits_at(p, pos), val)
    before[np.arange(6), pos] = val
    np.testing.assert_array_equal(after, before)


def test_dyadic_rounding_and_errors():
    q = 1 / (np.e + 1)
    assert dyadic(q, 8, "up") >= q >= dyadic(q, 8, "down")
    assert dyadic(q, 8, "up") * 256 == int(dyadic(q, 8, "up") * 256)
    with pytest.raises(ValidationError):
        dyadic(1.5)
    with pytest.raises(ValidationError):
        bernoulli_packed(2, 8, 0.1, np.random.default_rng(0))  # 0.1 is not dyadic
    with pytest.raises(ValidationError):
        packed_column_sums(np.zeros((2, 3), dtype=np.uint8), 8)


def test_bernoulli_packed_is_unbiased_with_a_32_bit_generator():
    """MT19937's random_raw yields 32-bit values; the sampler must still fill all 64 bits of a word."""
    from shuffledp.local.bits import bernoulli_packed, dyadic

    rng = np.random.Generator(np.random.MT19937(5))
    q = dyadic(0.25, 20)
    bits = np.unpackbits(bernoulli_packed(20_000, 64, q, rng), axis=1)
    col = bits.mean(axis=0)  # each of the 64 bit positions: mean q, sd sqrt(q(1-q)/20000) = 0.0031
    assert np.all(np.abs(col - q) < 6 * np.sqrt(q * (1 - q) / 20_000)), col
