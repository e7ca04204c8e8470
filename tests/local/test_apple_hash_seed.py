"""CMS/HCMS draw their public hash family per construction unless a seed is given.

The estimators are unbiased over the draw of the family (not for one fixed family), so a fixed
default seed would give every deployment the same, fixed-family-biased sketch.
"""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.local import frequency_oracle
from shuffledp.local.count_mean_sketch import CountMeanSketch
from shuffledp.local.hadamard_count_mean_sketch import HadamardCountMeanSketch
from shuffledp.local.sketch import draw_hash_seed


@pytest.mark.parametrize("cls", [CountMeanSketch, HadamardCountMeanSketch])
def test_constructions_without_a_seed_draw_different_families(cls) -> None:
    a, b = cls(1.0, 1000, k=8, m=16), cls(1.0, 1000, k=8, m=16)
    assert isinstance(a.hash_seed, int) and 0 <= a.hash_seed < 2**53
    assert a.hash_seed != b.hash_seed   # 53 random bits each: equal with probability 2^-53
    assert not np.array_equal(a.family.all_items(), b.family.all_items())
    assert a.estimate(a.aggregate(a.randomize(np.arange(3), np.random.default_rng(0))), 3).extra["hash_seed"] \
        == a.hash_seed


@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_a_given_seed_reproduces_the_family_and_the_simulation(name: str) -> None:
    a = frequency_oracle(name, 1.0, 1000, k=8, m=16, hash_seed=12345)
    b = frequency_oracle(name, 1.0, 1000, k=8, m=16, hash_seed=12345)
    assert a.hash_seed == b.hash_seed == 12345
    np.testing.assert_array_equal(a.family.all_items(), b.family.all_items())
    x = np.arange(50) % 1000
    ea = a.estimate(a.aggregate(a.randomize(x, np.random.default_rng(7))), 50)
    eb = b.estimate(b.aggregate(b.randomize(x, np.random.default_rng(7))), 50)
    np.testing.assert_array_equal(ea.values, eb.values)
    # a rebuilt mechanism from the recorded seed is the same mechanism
    c = frequency_oracle(name, 1.0, 1000, k=8, m=16, hash_seed=a.hash_seed)
    np.testing.assert_array_equal(c.family.all_items(), a.family.all_items())


def test_draw_hash_seed_range() -> None:
    seeds = {draw_hash_seed() for _ in range(100)}
    assert len(seeds) == 100 and all(0 <= s < 2**53 for s in seeds)
