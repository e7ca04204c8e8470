"""The discrete-log progression method for local-hashing support counts equals the direct oracle."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.core import ValidationError
from shuffledp.local import _lh_progressions
from shuffledp.local._lh_progressions import (
    _BLOCK_OVERHEAD,
    _DENSE_RATIO,
    dense_block_rows,
    log_tables,
    primitive_root,
    support_counts_progressions,
)
from shuffledp.local.hashing import LocalHashing, OptimizedLocalHashing, is_prime, smallest_prime_at_least


def _reports(m, n, rng, extreme_a=False):
    r = m.randomize(rng.integers(0, m.d, n), rng)
    if extreme_a and n:  # multipliers a = 1 and a = P - 1 with extreme offsets b
        P = m.prime
        s = r["seed"].astype(np.int64)
        s[: n // 2] = rng.choice([0, P - 1], n // 2)  # a = 1, b in {0, P-1}
        s[n // 2:] = (P - 2) * P + rng.choice([0, P - 1], n - n // 2)  # a = P - 1
        r["seed"] = s.astype(np.uint64)
    return r


@settings(max_examples=80, deadline=None)
@given(d=st.integers(2, 400), g=st.integers(2, 500), extra=st.integers(0, 3), n=st.integers(0, 400),
       extreme=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_progressions_equal_direct(d, g, extra, n, extreme, seed):
    """Random (d, g, prime, n): d not a multiple of g, g >= P, tiny n, a in {1, P-1}."""
    rng = np.random.default_rng(seed)
    prime = smallest_prime_at_least(d)
    for _ in range(extra):
        prime = smallest_prime_at_least(prime + 1)
    m = LocalHashing(1.0, d, g, prime=prime)
    r = _reports(m, n, rng, extreme)
    np.testing.assert_array_equal(m.support_counts_progressions(r), m.support_counts_direct(r))


def _dense_reports(m, r, rows):
    """Which reports the block rule counts densely (blocks of ``rows`` consecutive offsets)."""
    s = r["seed"].astype(np.int64)
    P = m.prime
    powers, logs = log_tables(P)
    a = s // P + 1
    unit = m.g if m.g < P else 1
    off = (int(logs[unit]) - logs[a]) % (P - 1)
    sizes = np.where(r["y"] < P, (P - 1 - r["y"]) // m.g + 1, 0)
    blk = off // rows
    cells = np.bincount(blk, weights=sizes, minlength=-(-(P - 1) // rows))
    return (cells > _DENSE_RATIO * rows * P + _BLOCK_OVERHEAD)[blk] & (sizes > 0)


@pytest.mark.parametrize("d,g,n,rows", [(997, 2, 6000, None), (1000, 3, 9000, None), (300, 50, 40000, None),
                                        (2, 2, 5000, None), (997, 2, 9400, 5), (1000, 3, 10700, 7), (4093, 4, 12700, 64)])
def test_dense_blocks_equal_direct(d, g, n, rows, rng, monkeypatch):
    """Many reports per offset block: the coverage-row path, alone or mixed with enumeration
    (small blocks, so that some are dense and some are not, the last one partial)."""
    m = LocalHashing(1.0, d, g)
    r = m.randomize(rng.integers(0, d, n), rng)
    if rows is not None:
        monkeypatch.setattr(_lh_progressions, "dense_block_rows", lambda P: rows)
        dense = _dense_reports(m, r, rows)
        assert dense.any() and not dense.all()  # both paths are exercised
    elif d > 2:
        assert _dense_reports(m, r, dense_block_rows(m.prime)).any()
    np.testing.assert_array_equal(m.support_counts_progressions(r), m.support_counts_direct(r))


@settings(max_examples=60, deadline=None)
@given(d=st.integers(2, 300), g=st.integers(2, 400), n=st.integers(0, 3000), rows=st.integers(1, 12),
       overhead=st.sampled_from([0, 50, 10**12]), seed=st.integers(0, 2**32 - 1))
def test_block_split_equal_direct(d, g, n, rows, overhead, seed):
    """Every block size and threshold (all dense, mixed, all enumerated) gives the direct counts:
    wrapping intervals, partial last blocks, empty blocks, g >= P."""
    rng = np.random.default_rng(seed)
    m = LocalHashing(1.0, d, g)
    r = m.randomize(rng.integers(0, d, n), rng)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_lh_progressions, "dense_block_rows", lambda P: min(P - 1, rows))
        mp.setattr(_lh_progressions, "_BLOCK_OVERHEAD", overhead)
        got = m.support_counts_progressions(r)
    np.testing.assert_array_equal(got, m.support_counts_direct(r))


def test_large_domain_aggregate_uses_progressions_and_matches_direct(rng, monkeypatch):
    m = OptimizedLocalHashing(1.0, 65536)
    r = m.randomize(rng.integers(0, m.d, 300), rng)

    def refuse(*a, **k):
        raise AssertionError("aggregate at d = 65,536 must use the progression method")

    with monkeypatch.context() as mp:
        mp.setattr(m, "_support_grouped", refuse)
        mp.setattr(m, "support_counts_direct", refuse)
        got = m.aggregate(r)
    np.testing.assert_array_equal(got, m.support_counts_direct(r))
    np.testing.assert_array_equal(got, m.support_counts_progressions(r))


@pytest.mark.parametrize("prime", [2, 3, 5, 7, 11, 13, 1031, 65537])
def test_log_tables_are_inverse_permutations(prime):
    powers, logs = log_tables(prime)
    gamma = primitive_root(prime)
    assert powers.shape == (prime - 1,) and sorted(powers.tolist()) == list(range(1, prime))
    np.testing.assert_array_equal(logs[powers], np.arange(prime - 1))
    assert int(powers[1 % (prime - 1)]) == gamma % prime
    k = np.arange(prime - 1)
    np.testing.assert_array_equal(powers, [pow(gamma, int(e), prime) for e in k])


def test_primitive_root_has_full_order():
    for p in [q for q in range(3, 400) if is_prime(q)]:
        gamma = primitive_root(p)
        assert len({pow(gamma, e, p) for e in range(p - 1)}) == p - 1


def test_prime_above_table_limit_is_refused(rng):
    m = LocalHashing(1.0, 10, 4, prime=2147483647)
    r = m.randomize(rng.integers(0, 10, 5), rng)
    with pytest.raises(ValidationError, match="prime"):
        m.support_counts_progressions(r)
    np.testing.assert_array_equal(m.aggregate(r), m.support_counts_direct(r))  # dispatch avoids it


def test_progressions_raw_function_rejects_huge_prime():
    z = np.zeros(1, dtype=np.int64)
    with pytest.raises(ValueError, match="prime"):
        support_counts_progressions(z + 1, z, z, 2147483647, 2, 10)
