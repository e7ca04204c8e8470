"""Shuffle-model local randomizers sample their blanket probabilities exactly and state the exact
local eps of what they sample.

``rng.random(n) < g`` draws Bernoulli(ceil(g 2^53) / 2^53) (numpy's uniforms are k / 2^53). The
randomizers store ``g`` on the 2^-53 grid, so the stored value *is* the sampled one, and their
``epsilon`` must bound the exact eps of that value. The thresholds the client code compares with
are captured by a spy generator (see tests/local/test_exact_sampling.py).
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from shuffledp.shuffle import protocol

_CTX = Context(prec=50)


def _ln(r: Fraction) -> Decimal:
    return _CTX.ln(Decimal(r.numerator)) - _CTX.ln(Decimal(r.denominator))


def _krr_ln(k: int, g: float) -> Decimal:
    G = Fraction(g)
    return _ln(1 + k * (1 - G) / G)


class _Recorded(np.ndarray):
    thresholds: list = []

    def __lt__(self, other):  # noqa: D105
        if np.ndim(other) == 0:
            _Recorded.thresholds.append(float(other))
        return np.asarray(self) < other


class _SpyGenerator(np.random.Generator):
    def random(self, *args, **kwargs):  # noqa: D102
        return super().random(*args, **kwargs).view(_Recorded)


def _scalar_thresholds(mech, values) -> set[float]:
    _Recorded.thresholds = []
    mech.randomize(values, _SpyGenerator(np.random.PCG64(5)))
    return set(_Recorded.thresholds) - {0.5}  # 0.5: the fair coin, exact


def _on_grid(g: float) -> bool:
    return 0 < g <= 1 and Fraction(g).denominator <= 2**53


_CASES = {
    "cnt_rr": lambda: protocol("cnt_rr", epsilon=0.9, delta=1e-6, n=10**6),
    "cnt_rr_clones": lambda: protocol("cnt_rr", epsilon=0.9, delta=1e-6, n=10**5, calibration="clones"),
    "rsum_rr": lambda: protocol("rsum_rr", epsilon=0.9, delta=1e-6, n=10**6),
    "rsum_kr": lambda: protocol("rsum_kr", epsilon=0.9, delta=1e-6, n=10**6),
    "rsum_rm": lambda: protocol("rsum_rm", epsilon=1.0, delta=1e-8, n=10**4, messages=2, bound="bennett"),
    "range_count": lambda: protocol("range_count", epsilon=1.0, delta=1e-6, n=20000, d=8),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_blanket_sampled_exactly_and_local_eps_exact(name):
    p = _CASES[name]()
    mech = p.local_randomizer
    if name.startswith("cnt_rr"):
        blankets, ks, values = [mech.flip], [2], np.array([0, 1, 1])
        assert p.flip == mech.flip and p.eps_l == mech.epsilon
    elif name == "rsum_rr":
        blankets, ks, values = [mech.flip] * mech.r, [2] * mech.r, np.array([0.0, 0.37, 1.0])
        assert p.flip == mech.flip
    elif name == "rsum_kr":
        blankets, ks, values = [mech.gamma], [mech.k + 1], np.array([0.0, 0.37, 1.0])
        assert p.gamma == mech.gamma
    elif name == "rsum_rm":
        blankets, ks, values = list(p.gammas), list(p.K), np.array([0.0, 0.37, 1.0])
    else:
        blankets, ks, values = [float(v) for v in mech.lams], [int(k) for k in mech.ks], np.arange(8)
        np.testing.assert_array_equal(p.lams, mech.lams)
    assert all(_on_grid(g) for g in blankets), blankets  # the stored value is the sampled value
    # the client compares with exactly these values (plus the exact fair coin)
    assert _scalar_thresholds(mech, values) == set(blankets)
    exact = sum(_krr_ln(k, g) for k, g in zip(ks, blankets))
    assert exact <= Decimal(mech.epsilon) <= exact * (1 + Decimal(1e-13))


@pytest.mark.parametrize("name,kw", [("cnt_2m", {"n": 10**5}), ("cnt_bn", {"n": 10**5}),
                                     ("hist_mm", {"n": 10**6, "d": 4})])
def test_noise_probability_sampled_exactly(name, kw):
    """``x + Ber(p)`` messages: ``p = 1 - q`` with ``q`` on the grid, so ``rng.random() < p`` draws
    exactly the noise probability ``q`` the privacy statement is computed from."""
    p = protocol(name, epsilon=0.9, delta=1e-6, **kw)
    q = p.one_minus_p if name == "hist_mm" else p.q_noise
    assert _on_grid(q) and Fraction(p.p) + Fraction(q) == 1
    values = np.array([0, 1, 1]) if name != "hist_mm" else np.array([0, 3])
    _Recorded.thresholds = []
    p.encode(values, _SpyGenerator(np.random.PCG64(5)))
    assert set(_Recorded.thresholds) == {p.p}
    assert math.isfinite(p.privacy().eps)
