"""Central mechanisms: calibration reference values, privacy on the grid, utility, seeds, validation."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from shuffledp.central import (
    BinomialMechanism,
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    PermuteAndFlip,
    analytic_gaussian_sigma,
    binomial_delta,
    binomial_minimal_trials,
    binomial_trials_survey,
    classic_gaussian_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_epsilon,
    discrete_gaussian_sigma,
    fixed_point_encode,
    gaussian_delta,
    gaussian_epsilon,
)
from shuffledp.central.calibration import _dg_tail_bounds, _dg_tail_exact
from shuffledp.core import OutOfDomainError, PrivacyStatement, ValidationError
from tests.central._stats import binned_chi2_pvalue, variance_z
from tests.conftest import mean_z_bound


def all_mechanisms():
    return [
        DiscreteLaplaceMechanism(1.0),
        LaplaceMechanism(1.0, 2.0),
        GaussianMechanism(1.0, 1e-5, 1.0),
        GaussianMechanism(0.5, 1e-5, 1.0, calibration="classic"),
        DiscreteGaussianMechanism(1.0, 1e-5, 2),
        BinomialMechanism(1.0, 1e-6),
    ]


# ---------------------------------------------------------------- reference values ----------

@pytest.mark.parametrize("eps,delta,sigma", [(1, 1e-5, 3.7306), (0.5, 1e-5, 7.0318), (0.1, 1e-6, 36.305),
                                             (2, 1e-5, 1.9938), (5, 1e-5, 0.8919)])
def test_analytic_gaussian_reference(eps, delta, sigma):
    s = analytic_gaussian_sigma(eps, delta)
    assert s == pytest.approx(sigma, abs=1e-4 * max(1, sigma / 10))
    assert gaussian_delta(s, eps, 1.0) <= delta  # the returned end satisfies the condition
    assert gaussian_delta(s * (1 - 1e-9), eps, 1.0) > delta * (1 - 1e-6)  # and is (nearly) the smallest
    assert analytic_gaussian_sigma(eps, delta, 3.0) == pytest.approx(3 * s, rel=1e-10)


def test_classic_gaussian_reference():
    assert classic_gaussian_sigma(0.5, 1e-5) == pytest.approx(9.6896, abs=1e-4)
    assert classic_gaussian_sigma(0.1, 1e-6) == pytest.approx(52.988, abs=1e-3)
    with pytest.raises(OutOfDomainError, match="epsilon < 1"):
        classic_gaussian_sigma(1.0, 1e-5)
    with pytest.raises(OutOfDomainError):
        GaussianMechanism(2.0, 1e-5, calibration="classic")


def test_gaussian_epsilon_reference():
    assert gaussian_epsilon(1.0, 1e-5) == pytest.approx(4.377178, abs=1e-6)


@pytest.mark.parametrize("sigma,eps", [(1, 4.4302), (2, 2.0113), (5, 0.7266)])
def test_discrete_gaussian_epsilon_reference(sigma, eps):
    # spec accounting §1.3 G (exact PLD), sensitivity 1, delta 1e-5
    assert discrete_gaussian_epsilon(sigma, 1e-5) == pytest.approx(eps, abs=1e-4)


def test_discrete_gaussian_tail_bounds_bracket_exact():
    for sigma, thr in [(50.0, 120.3), (900.0, 2500.5), (3000.0, -10.5), (3000.0, 8000.2)]:
        lo, hi = _dg_tail_bounds(sigma, thr)
        ex = _dg_tail_exact(sigma, thr)
        assert lo <= ex * (1 + 1e-10) and ex <= hi * (1 + 1e-10)
    # exact summation and the bound agree across the switch at sigma = 1e4
    a = discrete_gaussian_delta(9999.0, 3e-4, 1)
    b = discrete_gaussian_delta(10001.0, 3e-4, 1)
    assert a > b > 0 and b == pytest.approx(a, rel=5e-3)


def test_binomial_reference():
    assert binomial_trials_survey(1.0, 1e-6) == 366
    assert binomial_delta(366, 1.0) == pytest.approx(1.9e-21, rel=0.02)
    assert binomial_minimal_trials(1.0, 1e-6) == 80
    assert binomial_minimal_trials(0.5, 1e-6) == 268
    assert binomial_delta(80, 1.0) <= 1e-6 < binomial_delta(78, 1.0)
    m = BinomialMechanism(1.0, 1e-6)
    assert m.trials == 366 and m.variance() == 366 / 4
    assert BinomialMechanism(1.0, 1e-6, calibration="minimal").trials == 80
    with pytest.raises(ValidationError, match="exact delta"):
        BinomialMechanism(1.0, 1e-6, trials=40)
    assert m.trials_per_party(7) * 7 >= 366 and m.trials_per_party(7) % 2 == 0


def test_discrete_gaussian_calibration():
    s = discrete_gaussian_sigma(1.0, 1e-5)
    assert discrete_gaussian_delta(s, 1.0, 1) <= 1e-5 < discrete_gaussian_delta(s * (1 - 1e-6), 1.0, 1)
    m = DiscreteGaussianMechanism(1.0, 1e-5)
    assert m.sigma == s and m.exact_delta <= 1e-5 and m.rho == pytest.approx(1 / (2 * s * s))
    f = DiscreteGaussianMechanism.from_sigma(2.0, 1e-5)
    assert f.epsilon == pytest.approx(2.0113, abs=1e-4) and f.sigma == 2.0
    with pytest.raises(ValidationError, match="sigma"):
        DiscreteGaussianMechanism(1.0, 1e-5, sigma=1.0)


# ---------------------------------------------------------------- privacy statements --------

def test_privacy_statements_and_variance():
    for m in all_mechanisms():
        st = m.privacy()
        assert isinstance(st, PrivacyStatement) and st.model == "central"
        assert st.eps == m.epsilon
        assert m.variance() > 0
    assert DiscreteLaplaceMechanism(1.0).privacy().pure
    assert GeometricMechanism is DiscreteLaplaceMechanism
    assert GaussianMechanism(1.0, 1e-5).privacy().delta == 1e-5
    assert DiscreteLaplaceMechanism(1.0, neighbouring="add_remove_one").privacy().neighbouring == "add_remove_one"


def test_gaussian_grid_calibration():
    m = GaussianMechanism(1.0, 1e-5, 1.0)
    assert m.sigma == pytest.approx(3.7306, abs=1e-4)
    assert m.sigma >= analytic_gaussian_sigma(1.0, 1e-5)  # never below the continuous calibration
    assert m.exact_delta <= 1e-5
    assert m.variance() == pytest.approx(m.sigma**2, rel=1e-12)
    # a coarse grid: the rounded-up grid sensitivity costs noise, and the guarantee is still exact
    c = GaussianMechanism(1.0, 1e-5, 1.0, granularity_exponent=-1)
    assert c.grid_sensitivity == 3 and c.exact_delta <= 1e-5
    assert c.sigma > m.sigma


# ---------------------------------------------------------------- grid privacy proof check ---

@pytest.mark.parametrize("sens,k", [(1.0, -3), (0.3, -2), (2.5, 0), (1.0, -40)])
def test_grid_codes_of_neighbours_within_grid_sensitivity(sens, k, rng):
    """Rounding to the grid moves |f - f'| <= Delta to codes at distance <= floor(Delta/g) + 1."""
    m = LaplaceMechanism(1.0, sens, granularity_exponent=k)
    g = Fraction(2) ** k
    f = rng.uniform(-10, 10, 3000)
    fp = f + rng.uniform(-1, 1, 3000) * sens
    # adversarial pairs: exactly Delta apart, sitting just off grid half-points
    base = np.array([float((j + Fraction(1, 2)) * g) for j in range(-50, 50)])
    f = np.concatenate([f, np.nextafter(base, -np.inf), base])
    fp = np.concatenate([fp, np.nextafter(base, -np.inf) + sens, base + sens])
    keep = np.abs(np.array([Fraction(a) - Fraction(b) for a, b in zip(f, fp)])) <= Fraction(sens)
    c = np.array(m._codes(f[keep])[0], dtype=object)
    cp = np.array(m._codes(fp[keep])[0], dtype=object)
    worst = max(abs(int(a) - int(b)) for a, b in zip(c, cp))
    assert worst <= m.grid_sensitivity
    # the release's privacy loss at the worst pair is eps * worst / grid_sensitivity <= eps
    z = np.arange(-20, 21)
    ratio = np.abs(np.log(m.noise_pmf_grid(z) / m.noise_pmf_grid(z - worst))).max()
    assert ratio <= m.epsilon * (1 + 1e-12)


def test_release_is_on_the_grid():
    """The Mironov defence: every output is (integer) * 2^k whatever the input, so no output is
    reachable from one input and not from another (both supports are the whole grid)."""
    m = LaplaceMechanism(1.0, 1.0)
    g = m.granularity
    for x in (0.0, 1.0, 0.3, -123.456):
        out = m.release(np.full(20, x))
        assert np.all(out / g == np.round(out / g))
    gm = GaussianMechanism(1.0, 1e-5)
    out = gm.release(np.full(20, 0.3), per_coordinate=True)
    assert np.all(out / gm.granularity == np.round(out / gm.granularity))
    # numpy's float Laplace has no such structure (spec §2.2): its outputs are off any coarse grid
    y = np.random.default_rng(0).laplace(0.3, 1.0, 20)
    assert not np.all(y / g == np.round(y / g))


def test_fixed_point_sum():
    codes = fixed_point_encode([0.5, 2.0, -1.0, 0.25, np.float64(0.1)], 0.0, 1.0, -2)
    np.testing.assert_array_equal(codes, [2, 4, 0, 1, 0])
    m = LaplaceMechanism(1.0, 1.0, granularity_exponent=-20)
    assert m._sum_codes([0.5, 2.0, -1.0], 0.0, 1.0) == 3 * 2**19
    with pytest.raises(ValidationError, match="sensitivity"):
        m.release_sum([0.5], 0.0, 2.0)
    out = m.release_sum(np.full(1000, 0.7), 0.0, 1.0)
    assert abs(out - 700.0) < 60  # Laplace(1) tail P(|Z| > 60) ~ e^-60
    am = LaplaceMechanism(1.0, 1.0, neighbouring="add_remove_one")
    am.release_sum([0.2, -0.9], -1.0, 1.0)
    with pytest.raises(ValidationError):
        LaplaceMechanism(1.0, 1.0).release_sum([0.2], -1.0, 1.0)  # replace-one range 2 > 1
    with pytest.raises(ValidationError):
        fixed_point_encode([np.nan], 0.0, 1.0, -2)


# ---------------------------------------------------------------- utility (simulation) -------

@pytest.mark.parametrize("mech", all_mechanisms(), ids=lambda m: repr(m))
def test_simulate_unbiased_and_variance(mech, rng):
    R = 200_000
    integer = isinstance(mech, (DiscreteLaplaceMechanism, DiscreteGaussianMechanism, BinomialMechanism))
    truth = 17 if integer else 3.25
    x = np.full(R, truth, dtype=np.int64 if integer else np.float64)
    out = mech.simulate(x, rng).astype(np.float64)
    err = out - truth
    z = err.mean() / math.sqrt(mech.variance() / R)
    assert abs(z) < mean_z_bound()
    zv, width = variance_z(err, mech.variance())
    assert abs(zv) < mean_z_bound() and width < 0.1


def test_production_release_law_matches_pmf():
    m = DiscreteLaplaceMechanism(0.7, 2)
    out = m.release(np.full(20_000, 5, dtype=np.int64)) - 5
    support = np.arange(-120, 121)
    assert binned_chi2_pvalue(out, support, m.noise_pmf(support)) > 1e-6
    d = DiscreteGaussianMechanism(1.0, 1e-5)
    out = d.release(np.zeros(8000, dtype=np.int64), per_coordinate=True)
    support = np.arange(-40, 41)
    assert binned_chi2_pvalue(out, support, d.noise_pmf(support)) > 1e-6
    b = BinomialMechanism(1.0, 1e-6, calibration="minimal")
    out = b.release(np.zeros(8000, dtype=np.int64), per_coordinate=True)
    support = np.arange(-40, 41)
    assert binned_chi2_pvalue(out, support, b.noise_pmf(support)) > 1e-6


def test_release_shapes_and_types():
    assert isinstance(DiscreteLaplaceMechanism(1.0).release(3), int)
    assert isinstance(LaplaceMechanism(1.0).release(0.5), float)
    assert DiscreteGaussianMechanism(1.0, 1e-5).release(np.arange(4), per_coordinate=True).shape == (4,)
    assert BinomialMechanism(1.0, 1e-6).release(np.arange(3), per_coordinate=True).dtype == np.int64


@pytest.mark.parametrize("mech", [GaussianMechanism(1.0, 1e-5), DiscreteGaussianMechanism(1.0, 1e-5),
                                  BinomialMechanism(1.0, 1e-6)])
def test_gaussian_type_vector_release_needs_per_coordinate(mech):
    """Their delta is a one-dimensional computation: a vector is refused unless the caller says each
    coordinate is its own scalar query."""
    x = np.zeros(3, dtype=np.int64) if not isinstance(mech, GaussianMechanism) else np.zeros(3)
    with pytest.raises(ValidationError, match="per_coordinate=True"):
        mech.release(x)
    assert np.shape(mech.release(x[:1])) == (1,)  # a length-1 vector is a scalar query


def test_laplace_vector_release_pays_for_rounding_every_coordinate():
    """Reviewer's counterexample: g = 1, Delta = 1; [0.49]*3 and [0.51]*3 (L1 distance 0.06) snap to
    codes [0,0,0] and [1,1,1] (L1 distance 3). The noise must be calibrated to floor(Delta/g) + dim = 4
    grid units, not the scalar 2, so the worst-case ratio stays <= e^eps."""
    from fractions import Fraction

    import shuffledp.central.mechanisms as mm

    m = LaplaceMechanism(1.0, 1.0, granularity_exponent=0)
    assert m.grid_sensitivity == 2
    seen = []
    orig = mm.exact.discrete_laplace
    try:
        mm.exact.discrete_laplace = lambda scale: seen.append(scale) or 0
        out = m.release(np.array([0.49, 0.49, 0.49]))
        m.release(0.49)
    finally:
        mm.exact.discrete_laplace = orig
    assert seen[:3] == [Fraction(4)] * 3 and seen[3] == Fraction(2)
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0])
    # exact worst-case log-ratio of the product of discrete Laplace(scale 4) over codes differing by 3
    assert 3 / 4 <= m.epsilon


# ---------------------------------------------------------------- seeds are refused ----------

@pytest.mark.parametrize("mech", all_mechanisms() + [PermuteAndFlip(1.0)], ids=lambda m: repr(m))
def test_release_refuses_seed(mech):
    value = [1.0, 2.0] if isinstance(mech, PermuteAndFlip) else (
        np.arange(2) if isinstance(mech, (DiscreteLaplaceMechanism, DiscreteGaussianMechanism, BinomialMechanism))
        else np.array([0.5, 0.25]))
    for kwargs in ({"rng": np.random.default_rng(0)}, {"seed": 0}, {"rng": 42}):
        with pytest.raises(ValidationError, match="does not accept an rng or seed"):
            mech.release(value, **kwargs)
    mech.release(value[:1] if isinstance(value, np.ndarray) else value)  # and works without


def test_simulate_needs_generator():
    with pytest.raises(ValidationError, match="Generator"):
        DiscreteLaplaceMechanism(1.0).simulate([1, 2], 0)


# ---------------------------------------------------------------- bad input ------------------

BAD_EPS = [0, -1.0, float("nan"), float("inf"), "1", None, True]
BAD_DELTA = [0.0, 1.0, -0.1, 1.5, float("nan")]
BAD_SENS = [0, -1, float("nan")]


@pytest.mark.parametrize("eps", BAD_EPS)
def test_bad_epsilon(eps):
    for make in (lambda: DiscreteLaplaceMechanism(eps), lambda: LaplaceMechanism(eps),
                 lambda: GaussianMechanism(eps, 1e-5), lambda: DiscreteGaussianMechanism(eps, 1e-5),
                 lambda: BinomialMechanism(eps, 1e-5), lambda: PermuteAndFlip(eps),
                 lambda: analytic_gaussian_sigma(eps, 1e-5)):
        with pytest.raises(ValidationError) as e:
            make()
        assert e.value.parameter == "epsilon" and "> 0" in str(e.value)


@pytest.mark.parametrize("delta", BAD_DELTA)
def test_bad_delta(delta):
    for make in (lambda: GaussianMechanism(1.0, delta), lambda: DiscreteGaussianMechanism(1.0, delta),
                 lambda: BinomialMechanism(1.0, delta), lambda: analytic_gaussian_sigma(1.0, delta)):
        with pytest.raises(ValidationError) as e:
            make()
        assert e.value.parameter == "delta" and "(0, 1)" in str(e.value)


@pytest.mark.parametrize("sens", BAD_SENS)
def test_bad_sensitivity(sens):
    for make in (lambda: DiscreteLaplaceMechanism(1.0, sens), lambda: LaplaceMechanism(1.0, sens),
                 lambda: GaussianMechanism(1.0, 1e-5, sens), lambda: DiscreteGaussianMechanism(1.0, 1e-5, sens),
                 lambda: BinomialMechanism(1.0, 1e-5, sens), lambda: PermuteAndFlip(1.0, sens)):
        with pytest.raises(ValidationError) as e:
            make()
        assert e.value.parameter == "sensitivity"


def test_bad_other_parameters():
    with pytest.raises(ValidationError, match="integer"):
        DiscreteLaplaceMechanism(1.0, 1.5)
    with pytest.raises(ValidationError, match="calibration"):
        GaussianMechanism(1.0, 1e-5, calibration="fast")
    with pytest.raises(ValidationError, match="neighbouring"):
        DiscreteLaplaceMechanism(1.0, neighbouring="swap")
    with pytest.raises(ValidationError, match="granularity_exponent"):
        LaplaceMechanism(1.0, granularity_exponent=0.5)
    with pytest.raises(ValidationError, match="integers"):
        DiscreteLaplaceMechanism(1.0).release(1.5)
    with pytest.raises(ValidationError, match="finite"):
        LaplaceMechanism(1.0).release(float("nan"))
    with pytest.raises(ValidationError, match="trials must be even"):
        BinomialMechanism(1.0, 1e-6, trials=401)


# ---------------------------------------------------------------- permute-and-flip -----------

def _brute_force_pf(p):
    d = len(p)
    out = np.zeros(d)
    for perm in itertools.permutations(range(d)):
        stay = 1.0
        for r in perm:
            out[r] += stay * p[r] / math.factorial(d)
            stay *= 1 - p[r]
    return out


@pytest.mark.parametrize("u", [[0.0, 1.0, 2.0, 5.0], [3.0, 3.0, 0.0, -1.0, 2.5], [1.0]])
def test_pf_probabilities_exact(u):
    m = PermuteAndFlip(1.3, 1.0)
    p = m.probabilities(u)
    np.testing.assert_allclose(p, _brute_force_pf(m.flip_probabilities(u)), rtol=1e-12, atol=1e-15)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("monotonic", [False, True])
def test_pf_privacy(monotonic, rng):
    eps, sens = 0.8, 2.0
    m = PermuteAndFlip(eps, sens, monotonic=monotonic)
    worst = 0.0
    for _ in range(300):
        d = int(rng.integers(2, 7))
        u = rng.uniform(-5, 5, d)
        if monotonic:
            # neighbours move every utility in the same direction (by at most Delta)
            v = u + rng.choice([-1.0, 1.0]) * rng.choice([0.0, sens, rng.uniform(0, sens)], size=d)
        else:
            v = u + rng.choice([-1.0, 1.0, rng.uniform(-1, 1)], size=d) * sens
        worst = max(worst, float(np.abs(np.log(m.probabilities(u) / m.probabilities(v))).max()))
    assert worst <= eps + 1e-9
    assert worst > 0.5 * eps  # the check is not vacuous


def test_pf_never_worse_than_exponential_mechanism(rng):
    eps = 1.0
    m = ExponentialMechanism(eps)
    for _ in range(50):
        u = rng.uniform(0, 10, 6)
        w = np.exp(eps * (u - u.max()) / 2)
        em = float((w / w.sum() * u).sum())
        assert m.expected_utility(u) >= em - 1e-12


def test_pf_simulate_and_release_match_probabilities(rng):
    m = PermuteAndFlip(1.0)
    u = np.array([0.0, 1.0, 2.0, 4.0, 0.5])
    p = m.probabilities(u)
    sim = m.simulate(u, 100_000, rng)
    assert binned_chi2_pvalue(sim, np.arange(5), p) > 1e-3
    rel = np.array([m.release(u) for _ in range(4000)])
    assert binned_chi2_pvalue(rel, np.arange(5), p) > 1e-6


def test_pf_bad_utilities():
    m = PermuteAndFlip(1.0)
    for bad in ([], [[1.0, 2.0]], [np.nan, 1.0], ["a"]):
        with pytest.raises(ValidationError, match="utilities"):
            m.release(bad)
