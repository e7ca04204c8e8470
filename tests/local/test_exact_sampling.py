"""The stated eps of GRR, OLH/BLH, HR, HCMS and SS is the exact eps of what they sample.

Each of these mechanisms draws one biased event per report with ``rng.random(n) < t``. numpy's
``Generator.random()`` returns ``k / 2^53`` with ``k`` uniform on ``[0, 2^53)``, so that event has
probability exactly ``ceil(t 2^53) / 2^53`` -- not ``t`` unless ``t`` is on the 2^-53 grid. The
tests capture the threshold ``t`` the client code really compares with (a spy generator whose
``random`` returns an array recording the right-hand side of ``<``), compute the realized
probability in exact rational arithmetic, derive the mechanism's worst-case likelihood ratio from
its structure, and check ``ln ratio <= stated eps <= requested eps`` with 50-digit logarithms.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from shuffledp.local.hadamard_count_mean_sketch import HadamardCountMeanSketch
from shuffledp.local.bits import UNIFORM_PRECISION, calibrate_probability, grid_fraction, log_ratio_up
from shuffledp.local.grr import GeneralizedRandomizedResponse
from shuffledp.local.hadamard import HadamardResponse
from shuffledp.local.hashing import BinaryLocalHashing, OptimizedLocalHashing
from shuffledp.local.subset import SubsetSelection
from shuffledp.core.errors import ValidationError

_CTX = Context(prec=50)
_SCALE = 1 << 53


class _Recorded(np.ndarray):
    """An array of uniforms that records every threshold it is compared with by ``<``."""

    thresholds: list[float]

    def __lt__(self, other):  # noqa: D105
        _Recorded.thresholds.append(other)
        return np.asarray(self) < other


class _SpyGenerator(np.random.Generator):
    """A PCG64 generator whose ``random`` output records the thresholds it is compared with."""

    def random(self, *args, **kwargs):  # noqa: D102
        return super().random(*args, **kwargs).view(_Recorded)


def _captured_thresholds(mech, values) -> list:
    _Recorded.thresholds = []
    mech.randomize(np.asarray(values), _SpyGenerator(np.random.PCG64(7)))
    return list(_Recorded.thresholds)


def _realized(t) -> Fraction:
    """Exact Pr[U < t] for U = k / 2^53, k uniform on [0, 2^53) (numpy's ``random()``)."""
    t = np.asarray(t, dtype=np.float64)
    assert t.ndim == 0 or np.all(t == t.flat[0]), "one threshold for every user"
    k = math.ceil(Fraction(float(t.flat[0])) * _SCALE)
    return Fraction(min(_SCALE, max(0, k)), _SCALE)


def _ln(r: Fraction) -> Decimal:
    return _CTX.ln(Decimal(r.numerator)) - _CTX.ln(Decimal(r.denominator))


def _worst(a: Fraction, b: Fraction) -> Fraction:
    """max(a/b, b/a) for two positive probabilities of the same report under two inputs."""
    assert a > 0 and b > 0, "a report possible under one input has probability 0 under another"
    return max(a / b, b / a)


def _grr_like_ratio(p: Fraction, g: int) -> Fraction:
    return _worst(p, (1 - p) / (g - 1))


def _true_ratio(mech) -> Fraction:
    """Worst-case likelihood ratio of what ``mech.randomize`` really samples."""
    (t,) = _captured_thresholds(mech, [0, 1, 1, 0])
    p = _realized(t)
    if isinstance(mech, GeneralizedRandomizedResponse):
        return _grr_like_ratio(p, mech.d)  # keep w.p. p, else uniform on the d-1 others
    if isinstance(mech, (OptimizedLocalHashing, BinaryLocalHashing)):
        return _grr_like_ratio(p, mech.g)  # the seed is data independent; GRR on [g]
    if isinstance(mech, HadamardResponse):
        # uniform on [K] w.p. u, else uniform on C_x (b/2 outputs)
        inside = (1 - p) / Fraction(mech.block_size, 2) + p / mech.K
        return _worst(inside, p / mech.K)
    if isinstance(mech, HadamardCountMeanSketch):
        return _worst(1 - p, p)  # the sign is flipped w.p. p; (j, l) are data independent
    if isinstance(mech, SubsetSelection):
        d, w = mech.d, mech.omega  # x in S w.p. p, the rest uniform: C(d-1,w-1) or C(d-1,w) sets
        return _worst(p / math.comb(d - 1, w - 1), (1 - p) / math.comb(d - 1, w))
    raise AssertionError(type(mech))


_CASES = [
    *[(lambda e, d=d: GeneralizedRandomizedResponse(e, d), f"grr-d{d}") for d in (2, 7, 1000, 100_003)],
    (lambda e: OptimizedLocalHashing(e, 64), "olh"),
    (lambda e: BinaryLocalHashing(e, 64), "blh"),
    (lambda e: HadamardResponse(e, 100), "hr"),
    (lambda e: HadamardResponse(e, 1000, variant="high_privacy"), "hr-high"),
    (lambda e: HadamardCountMeanSketch(e, 100, k=4, m=16), "hcms"),
    (lambda e: SubsetSelection(e, 40), "ss"),
    (lambda e: SubsetSelection(e, 500, omega=3), "ss-w3"),
]
_EPS = (0.05, 0.3, 0.7, 1.0, 1.7, 2.9, 4.1, 6.0)


@pytest.mark.parametrize("make,label", _CASES, ids=[c[1] for c in _CASES])
@pytest.mark.parametrize("eps", _EPS)
def test_stated_eps_bounds_the_exact_ratio_of_what_is_sampled(make, label, eps):
    mech = make(eps)
    stated = mech.privacy().eps
    assert stated <= eps
    assert _ln(_true_ratio(mech)) <= Decimal(stated), (label, eps, stated)
    # the rounding costs nothing measurable: the stated eps stays within 1e-9 of the request
    assert stated >= eps * (1 - 1e-9)


@pytest.mark.parametrize("make,label", _CASES, ids=[c[1] for c in _CASES])
def test_sampled_probability_is_the_one_probabilities_and_the_estimator_use(make, label):
    """``rng.random() < t`` is exact (t on the 2^-53 grid) and ``probabilities`` reports that law."""
    mech = make(1.3)
    (t,) = _captured_thresholds(mech, [0, 1])
    p = _realized(t)
    assert Fraction(float(np.asarray(t).flat[0])) == p  # t is on the grid: sampled exactly
    if isinstance(mech, GeneralizedRandomizedResponse):
        np.testing.assert_array_equal(mech.probabilities({"y": np.array([0, 1])}, 0),
                                      [float(p), float((1 - p) / (mech.d - 1))])
    elif isinstance(mech, HadamardCountMeanSketch):
        assert mech.p_flip == float(p) and mech.c == float(1 / (1 - 2 * p))
    elif isinstance(mech, HadamardResponse):
        assert mech.c == float(p / mech.K)
        assert mech.p_in == float((1 - p) / Fraction(mech.block_size, 2) + p / mech.K)
    elif isinstance(mech, SubsetSelection):
        d, w = mech.d, mech.omega
        assert mech.p_star == float(p) and mech.q_star == float((p * (w - 1) + (1 - p) * w) / (d - 1))
    else:
        assert mech.p == float(p) and mech.q == float((1 - p) / (mech.g - 1))


def test_large_epsilon_never_rounds_the_keep_probability_to_one():
    """At eps = 50, e^eps/(e^eps+1) is 1.0 in floating point: ``random() < 1.0`` always keeps the
    true value (infinite eps). The sampled p stays below 1 and the stated eps is its exact eps."""
    for mech in (GeneralizedRandomizedResponse(50.0, 2), OptimizedLocalHashing(30.0, 10, g=3),
                 SubsetSelection(50.0, 10)):
        ratio = _true_ratio(mech)
        assert _ln(ratio) <= Decimal(mech.privacy().eps) <= Decimal(mech.epsilon)


def test_numpy_uniforms_are_multiples_of_2_pow_minus_53():
    """The premise of the exactness argument, for the default bit generator."""
    u = np.random.default_rng(3).random(10_000)
    k = u * _SCALE
    assert np.all(k == np.floor(k)) and np.all((k >= 0) & (k < _SCALE))


def test_grid_fraction_and_log_ratio_up():
    assert grid_fraction(0.1, 4, "up") == Fraction(2, 16)
    assert grid_fraction(0.1, 4, "down") == Fraction(1, 16)
    x = 1 / 3
    g = grid_fraction(x, UNIFORM_PRECISION, "down")
    assert float(g) == g and g <= Fraction(x) < g + Fraction(1, _SCALE)
    r = Fraction(7, 3)
    assert Decimal(log_ratio_up(r)) >= _ln(r)
    r = 1 + Fraction(1, 10**15)
    assert Decimal(log_ratio_up(r)) >= _ln(r)
    with pytest.raises(ValidationError):
        log_ratio_up(Fraction(1, 2))


def test_calibrate_probability_meets_the_bound_exactly():
    for eps in (1e-6, 0.01, 0.5, 3.0, 40.0):
        p, eff = calibrate_probability(math.exp(eps) / (math.exp(eps) + 9), eps, lambda t: t * 9 / (1 - t), "down")
        assert p.denominator <= _SCALE and 0 < p < 1
        assert _ln(p * 9 / (1 - p)) <= Decimal(eff) <= Decimal(eps)


def test_epsilon_below_the_grid_is_refused():
    with pytest.raises(ValidationError) as info:
        GeneralizedRandomizedResponse(1e-17, 2)
    assert info.value.parameter == "epsilon"


@pytest.mark.parametrize("h,m", [(1, 1997), (1, 8976), (2, 53_988), (3, 53_988)])
def test_rappor_f_check_is_exact(h, m):
    """RAPPOR's PRR bits are sampled exactly (dyadic f), and the longitudinal bound
    eps_inf = 2h ln((1-f/2)/(f/2)) <= epsilon is now decided exactly, not by a float logarithm
    that can land an ulp below the true value (the old guard accepted f with eps_inf > epsilon)."""
    from shuffledp.local.rappor import Rappor, rappor_f_for_epsilon

    f = m / 2**20
    r = (2 - Fraction(f)) / Fraction(f)
    true = _CTX.multiply(2 * h, _ln(r))
    below = float(true)
    if Decimal(below) > true:
        below = math.nextafter(below, 0.0)
    above = math.nextafter(below, math.inf)
    assert Decimal(below) < true < Decimal(above)
    with pytest.raises(ValidationError) as info:
        Rappor(below, 8, k=16, h=h, f=f)
    assert info.value.parameter == "f"
    assert Rappor(above, 8, k=16, h=h, f=f).f == f
    f_auto = rappor_f_for_epsilon(below, h)
    r_auto = (2 - Fraction(f_auto)) / Fraction(f_auto)
    assert f_auto > f and _CTX.multiply(2 * h, _ln(r_auto)) <= Decimal(below)


@pytest.mark.parametrize("eps", [36.5, 36.7])
def test_calibration_steps_down_from_the_top_of_the_grid(eps):
    """For e^eps between 2^52 and 2^53, p_ideal = e^eps/(e^eps+1) rounds to 1 - 2^-53, whose ratio
    2^53 - 1 exceeds e^eps; the calibration must step down from the clamp instead of stopping there
    (GRR(36.5, 2) raised 'no probability on the grid ... meets the ratio')."""
    mech = GeneralizedRandomizedResponse(eps, 2)
    assert _ln(_true_ratio(mech)) <= Decimal(mech.privacy().eps) <= Decimal(eps)
