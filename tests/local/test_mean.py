import itertools
import math

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.local import MEAN_ORACLES, MeanOracle, concat_reports, mean_oracle, n_reports, take_reports
from shuffledp.local.mean import (
    DuchiMechanism,
    Harmony,
    HybridMechanism,
    PiecewiseMechanism,
)
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band

# (name, eps, dim): 1-D and multi-D; Duchi with odd and even dims; PM/HM with k = 1 and k > 1;
# HM below eps* (pure Duchi) and above.
CASES = [
    ("duchi", 0.5, 1), ("duchi", 1.0, 1), ("duchi", 4.0, 1),
    ("duchi", 1.0, 2), ("duchi", 1.0, 3), ("duchi", 1.0, 4), ("duchi", 2.0, 5), ("duchi", 0.7, 6),
    ("harmony", 1.0, 1), ("harmony", 1.0, 3), ("harmony", 3.0, 6),
    ("pm", 0.5, 1), ("pm", 1.0, 1), ("pm", 4.0, 1), ("pm", 1.0, 3), ("pm", 6.0, 3), ("pm", 5.0, 2),
    ("hm", 0.3, 1), ("hm", 1.0, 1), ("hm", 4.0, 1), ("hm", 1.0, 3), ("hm", 6.0, 3),
]
IDS = [f"{n}-eps{e:g}-d{d}" for n, e, d in CASES]


def _inputs(dim, rng, n_random=3):
    """-1, 0, 1 (all corners for small dim) and random points."""
    if dim == 1:
        return [-1.0, 0.0, 1.0, *rng.uniform(-1, 1, n_random)]
    corners = [np.array(c, dtype=float) for c in itertools.product([-1.0, 1.0], repeat=dim)]
    if len(corners) > 16:
        corners = corners[:: len(corners) // 16]
    return [np.zeros(dim), np.ones(dim), -np.ones(dim), *corners, *rng.uniform(-1, 1, (n_random, dim))]


def _population(dim, n, rng):
    """Heterogeneous users: values spread over [-1, 1] plus some exact extremes."""
    x = rng.uniform(-1, 1, (n, dim))
    x[: n // 10] = 1.0
    x[n // 10: n // 5] = -1.0
    return x[:, 0].copy() if dim == 1 else x


# ------------------------------------------------------------------------------------------------
# privacy
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,eps,dim", CASES, ids=IDS)
def test_exact_privacy_ratio(name, eps, dim, rng):
    m = mean_oracle(name, eps, dim=dim)
    inputs = _inputs(dim, rng)
    reports = sweep_reports(m, inputs, 300, rng)
    worst = worst_case_log_ratio(m, reports, inputs)
    assert worst <= eps + 1e-9
    # tight: the bound is attained (extreme inputs give reports at ratio exactly e^eps)
    assert worst == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("dim", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
def test_duchi_exhaustive_output_space(eps, dim, rng):
    """Over all 2^dim outputs: pmf sums to 1, E[B z] = t exactly, worst ratio exactly eps."""
    m = mean_oracle("duchi", eps, dim=dim)
    Z = np.array(list(itertools.product([-1, 1], repeat=dim)), dtype=np.int8)
    rep = {"z": Z[:, 0] if dim == 1 else Z}
    inputs = _inputs(dim, rng, 4)
    for x in inputs:
        p = m.probabilities(rep, x)
        assert p.min() > 0 and p.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose((m.B * Z * p[:, None]).sum(axis=0), np.atleast_1d(x), atol=1e-12)
        var = (m.B**2 * p).sum() - np.atleast_1d(x) ** 2
        np.testing.assert_allclose(var, m.variance(1, np.atleast_1d(x)), atol=1e-9)
    assert worst_case_log_ratio(m, rep, inputs) == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("dim", [2, 4, 6])
def test_printed_even_dim_duchi_is_not_private(dim):
    """Why the fix is needed: the printed algorithm with ties in both T+ and T- (the reading under
    which its B is unbiased) has worst-case ratio e^eps + 1 > e^eps (exact enumeration)."""
    eps = 1.0
    e = math.exp(eps)
    V = np.array(list(itertools.product([-1, 1], repeat=dim)))
    dots = V @ V.T  # z . v for every output z (rows) and corner input v (columns)
    n_plus = (dots[:, 0] >= 0).sum()
    n_minus = (dots[:, 0] <= 0).sum()
    P = e / (e + 1) * (dots >= 0) / n_plus + 1 / (e + 1) * (dots <= 0) / n_minus
    ratio = (P.max(axis=1) / P.min(axis=1)).max()
    assert ratio == pytest.approx(e + 1)
    # the fixed mechanism on the same inputs: exactly e^eps
    m = mean_oracle("duchi", eps, dim=dim)
    fixed = np.stack([m.probabilities({"z": V.astype(np.int8)}, v.astype(float)) for v in V], axis=1)
    assert (fixed.max(axis=1) / fixed.min(axis=1)).max() == pytest.approx(e)


def _pm_hm_moments(m, x, grid=200_001):
    """Total mass, mean, second moment of one coordinate's output law by exact piecewise integration."""
    C = m.C
    y = np.linspace(-C, C, grid)
    dens = m._coord_density(y, np.full_like(y, x))
    atoms = np.zeros_like(y, dtype=bool)
    extra = [0.0, 0.0, 0.0]
    if isinstance(m, HybridMechanism):
        atoms = np.abs(y) == m.C_duchi
        for a in (-m.C_duchi, m.C_duchi):
            w = float(m._coord_density(np.array([a]), np.array([x]))[0])
            extra = [extra[0] + w, extra[1] + w * a, extra[2] + w * a * a]
    dens = np.where(atoms, 0.0, dens)
    # density is piecewise constant: integrate with the breakpoints resolved by a fine grid (trapezoid)
    return [np.trapezoid(dens * y**k, y) + extra[k] for k in range(3)]


@pytest.mark.parametrize("cls,eps", [(PiecewiseMechanism, 0.5), (PiecewiseMechanism, 2 * math.log(3)),
                                     (HybridMechanism, 0.3), (HybridMechanism, 1.0), (HybridMechanism, 4.0)])
@pytest.mark.parametrize("x", [-1.0, -0.3, 0.0, 0.8, 1.0])
def test_pm_hm_density_is_normalized_unbiased_with_stated_variance(cls, eps, x):
    m = cls(eps)
    mass, mean, second = _pm_hm_moments(m, x)
    tol = 2e-4 * m.C**2
    assert mass == pytest.approx(1.0, abs=tol)
    assert mean == pytest.approx(x, abs=tol)
    assert second - x * x == pytest.approx(m.variance(1, x), abs=tol * 10)


# ------------------------------------------------------------------------------------------------
# worked examples (spec §B)
# ------------------------------------------------------------------------------------------------

def test_worked_examples():
    d = mean_oracle("duchi", math.log(3))
    assert d.B == pytest.approx(2.0)
    assert d.probabilities({"z": np.array([1])}, 0.5)[0] == pytest.approx(0.625)
    assert d.variance(1, 0.5) == pytest.approx(3.75)
    for dim, B in [(1, 2.163953), (2, 3.327907), (3, 4.327907), (4, 4.770542), (5, 5.770542)]:
        assert mean_oracle("duchi", 1.0, dim=dim).B == pytest.approx(B, abs=1e-6)
    assert mean_oracle("duchi", 1.0, dim=2).p_u == pytest.approx(0.475367, abs=1e-6)
    pm = mean_oracle("pm", 2 * math.log(3))
    assert pm.C == pytest.approx(2.0)
    y = np.array([0.3, -0.5])
    np.testing.assert_allclose(pm.probabilities({"t": y}, 0.5), [0.75, 0.75 / 9])
    assert pm.variance(1, 0.5) == pytest.approx(0.625)
    hm = mean_oracle("hm", 2 * math.log(3))
    assert hm.alpha == pytest.approx(2 / 3)
    assert hm.variance(1, 0.0) == pytest.approx(0.854167, abs=1e-6)
    assert hm.variance(1, 0.9) == pytest.approx(0.854167, abs=1e-6)  # t^2 terms cancel above eps*
    assert mean_oracle("hm", 0.5).alpha == 0.0
    assert mean_oracle("hm", 0.5).variance(1, 0.4) == pytest.approx(d_var(0.5, 0.4))
    h = mean_oracle("harmony", 1.0, dim=4)
    assert h.variance(1, 0.5) == pytest.approx(4 * h.C**2 - 0.25)
    assert mean_oracle("harmony", 1.0).variance(7, 0.3) == pytest.approx(mean_oracle("duchi", 1.0).variance(7, 0.3))


def d_var(eps, t):
    C = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    return C * C - t * t


@pytest.mark.parametrize("eps,dim,k", [(1.0, 5, 1), (2.4, 5, 1), (5.0, 5, 2), (12.0, 3, 3), (12.0, 10, 4)])
def test_multidim_pm_k_and_variance(eps, dim, k):
    m = mean_oracle("pm", eps, dim=dim)
    assert m.k == k and m.eps_coord == pytest.approx(eps / k)
    one = PiecewiseMechanism(eps / k)
    for t in (0.0, 0.6, -1.0):
        expect = dim / k * (one.variance(1, t) + t * t) - t * t
        assert m.variance(1, t) == pytest.approx(expect)
    assert mean_oracle("pm", eps, dim=dim, k=1).k == 1


# ------------------------------------------------------------------------------------------------
# unbiasedness and variance (R repetitions, vectorized: R * n users randomized at once)
# ------------------------------------------------------------------------------------------------

def _repetitions(m, x, R, rng):
    """R independent estimates from the same population x (n users): shape (R, dim), n."""
    n = x.shape[0]
    reports = m.randomize(np.concatenate([x] * R, axis=0), rng)
    ests = np.empty((R, m.dim))
    stderr = np.empty((R, m.dim))
    for r in range(R):
        e = m.estimate(m.aggregate(take_reports(reports, slice(r * n, (r + 1) * n))), n)
        ests[r], stderr[r] = e.values, e.stderr
    return ests, stderr


@pytest.mark.parametrize("name,eps,dim", CASES, ids=IDS)
def test_unbiased_and_variance(name, eps, dim, rng):
    R, n = 4000, 200 if dim == 1 else 100
    m = mean_oracle(name, eps, dim=dim)
    x = _population(dim, n, rng)
    ests, stderr = _repetitions(m, x, R, rng)
    xm = x.reshape(n, dim)
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    for j in sorted({0, dim - 1}):
        truth = xm[:, j].mean()
        rms = math.sqrt((xm[:, j] ** 2).mean())
        var = m.variance(n, rms)  # per-user variance is a + b t^2: RMS covers a heterogeneous population
        z = (ests[:, j].mean() - truth) / math.sqrt(var / R)
        assert abs(z) < mean_z_bound()
        assert lo <= ests[:, j].var(ddof=1) / var <= hi
        # reported stderr is conservative (up to the noise of the plugged-in estimate)
        assert np.median(stderr[:, j]) >= 0.99 * math.sqrt(var)


@pytest.mark.parametrize("name,eps", [("duchi", 1.0), ("pm", 1.0), ("hm", 3.0)])
def test_variance_depends_on_value(name, eps, rng):
    """Homogeneous populations at f = 0 and f = 1 have different variances, each matched."""
    R, n = 4000, 100
    m = mean_oracle(name, eps)
    lo, hi = variance_ratio_band(R)
    for f in (0.0, 1.0):
        ests, _ = _repetitions(m, np.full(n, f), R, rng)
        var = m.variance(n, f)
        assert abs(ests[:, 0].mean() - f) < mean_z_bound() * math.sqrt(var / R)
        assert lo <= ests[:, 0].var(ddof=1) / var <= hi
    if name != "hm":  # HM above eps* has the same variance for every t
        assert abs(m.variance(n, 1.0) / m.variance(n, 0.0) - 1) > 0.1


# ------------------------------------------------------------------------------------------------
# mergeability, reports, validation, registry
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,eps,dim", CASES, ids=IDS)
def test_mergeable(name, eps, dim, rng):
    m = mean_oracle(name, eps, dim=dim)
    r1 = m.randomize(_population(dim, 300, rng), rng)
    r2 = m.randomize(_population(dim, 170, rng), rng)
    both = concat_reports([r1, r2])
    assert n_reports(both) == 470
    a, b, ab = m.aggregate(r1), m.aggregate(r2), m.aggregate(both)
    assert ab.shape == (dim,)
    if name in ("duchi", "harmony"):
        assert np.issubdtype(ab.dtype, np.integer)
        np.testing.assert_array_equal(ab, a + b)
    else:
        np.testing.assert_allclose(ab, a + b, rtol=1e-12, atol=1e-9)
    e = m.estimate(ab, 470)
    assert e.kind == "mean" and e.values.shape == (dim,) and np.all(e.stderr > 0)
    # reports pass their own validation, and a shuffled batch aggregates the same
    m.validate_reports(both)
    perm = rng.permutation(470)
    np.testing.assert_allclose(m.aggregate(take_reports(both, perm)), ab, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("name", sorted(MEAN_ORACLES))
def test_report_range(name, rng):
    m = mean_oracle(name, 2.0)
    rep = m.randomize(rng.uniform(-1, 1, 5000), rng)
    if name == "duchi":
        assert set(np.unique(rep["z"])) == {-1, 1}
    elif name == "harmony":
        assert set(np.unique(rep["s"])) == {-1, 1} and np.all(rep["j"] == 0)
    else:
        assert np.all(np.abs(rep["t"]) <= m.C) and np.abs(rep["t"]).max() > 1.0


@pytest.mark.parametrize("name", sorted(MEAN_ORACLES))
@pytest.mark.parametrize("bad", [[0.0, np.nan], [1.5], [-1.01], [np.inf], ["a"], [True, False], [[0.1, 0.2]]])
def test_bad_values_1d(name, bad, rng):
    m = mean_oracle(name, 1.0)
    with pytest.raises(ValidationError):
        m.randomize(np.array(bad), rng)


@pytest.mark.parametrize("name", sorted(MEAN_ORACLES))
@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros((4, 2)), np.full((2, 3), 1.2), np.full((2, 3), np.nan)])
def test_bad_values_multidim(name, bad, rng):
    m = mean_oracle(name, 1.0, dim=3)
    with pytest.raises(ValidationError):
        m.randomize(bad, rng)
    with pytest.raises(ValidationError):
        m.probabilities(m.randomize(np.zeros((2, 3)), rng), bad[0] if bad.ndim == 2 else np.zeros(2))


@pytest.mark.parametrize("name", sorted(MEAN_ORACLES))
@pytest.mark.parametrize("eps,params", [(0, {}), (-1.0, {}), (float("nan"), {}), (float("inf"), {}),
                                        (800.0, {}), (1.0, {"dim": 0}), (1.0, {"dim": 2.5}), (1.0, {"dim": True})])
def test_bad_params(name, eps, params):
    with pytest.raises(ValidationError):
        mean_oracle(name, eps, **params)


def test_bad_k_and_estimate_args():
    with pytest.raises(ValidationError):
        mean_oracle("pm", 1.0, dim=2, k=3)
    with pytest.raises(ValidationError):
        mean_oracle("hm", 1.0, dim=2, k=0)
    m = mean_oracle("duchi", 1.0, dim=2)
    with pytest.raises(ValidationError):
        m.estimate(np.array([1, 2, 3]), 10)
    with pytest.raises(ValidationError):
        m.estimate(np.array([1, 2]), 0)
    with pytest.raises(ValidationError):
        m.variance(10, 1.5)
    with pytest.raises(ValidationError):
        m.variance(10, [0.1, 0.2, 0.3])


@pytest.mark.parametrize("name,reports", [
    ("duchi", {"z": np.array([1, 0])}), ("duchi", {"z": np.array([0.5])}), ("duchi", {"y": np.array([1])}),
    ("harmony", {"j": np.array([1]), "s": np.array([1])}), ("harmony", {"j": np.array([0]), "s": np.array([2])}),
    ("pm", {"t": np.array([100.0])}), ("pm", {"t": np.array([np.nan])}), ("hm", {"t": np.array([1])}),
])
def test_bad_reports(name, reports):
    with pytest.raises(ValidationError):
        mean_oracle(name, 1.0).validate_reports(reports)


def test_bad_multidim_reports(rng):
    m = mean_oracle("pm", 6.0, dim=3)  # k = 2
    good = m.randomize(np.zeros((4, 3)), rng)
    m.validate_reports(good)
    dup = {"j": np.array([[0, 0]] * 4), "t": good["t"]}
    with pytest.raises(ValidationError):
        m.validate_reports(dup)
    with pytest.raises(ValidationError):
        m.validate_reports({"j": good["j"] + 3, "t": good["t"]})


@pytest.mark.parametrize("name,cls", [("duchi", DuchiMechanism), ("harmony", Harmony),
                                      ("pm", PiecewiseMechanism), ("hm", HybridMechanism), ("PM", PiecewiseMechanism)])
def test_registry(name, cls):
    m = mean_oracle(name, 1.5, dim=2)
    assert type(m) is cls and isinstance(m, MeanOracle)
    assert m.dim == 2 and m.epsilon == 1.5
    assert m.privacy.eps == 1.5 and m.privacy.model == "local"
    assert "dim=2" in repr(m)
    assert mean_oracle(name, 1.5).dim == 1


def test_unknown_mean_oracle():
    with pytest.raises(ValidationError, match="unknown mean oracle"):
        mean_oracle("laplace", 1.0)


def test_run_convenience(rng):
    m = mean_oracle("hm", 2.0)
    x = rng.uniform(-1, 1, 20000)
    est = m.run(x, rng)
    assert abs(est.values[0] - x.mean()) < mean_z_bound() * math.sqrt(m.variance(20000, 1.0))


# ------------------------------------------------------------------ sampler vs stated density (KS)
def _cdf_from_density(mech, t, lo, hi, breaks):
    """CDF of the continuous part from ``mech.probabilities`` (piecewise constant between ``breaks``):
    the density is evaluated at each piece's midpoint and integrated exactly."""
    edges = np.unique(np.clip(np.asarray(breaks, dtype=np.float64), lo, hi))
    mids = (edges[:-1] + edges[1:]) / 2
    dens = np.asarray(mech.probabilities({"t": mids}, t), dtype=np.float64)
    mass = np.concatenate([[0.0], np.cumsum(dens * np.diff(edges))])

    def cdf(y):
        y = np.clip(np.asarray(y, dtype=np.float64), lo, hi)
        i = np.clip(np.searchsorted(edges, y, side="right") - 1, 0, mids.size - 1)
        return mass[i] + dens[i] * (y - edges[i])

    return cdf, float(mass[-1])


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("t", [-0.7, 0.0, 0.9])
def test_pm_sampler_matches_density_ks(eps, t, rng):
    from scipy import stats

    m = PiecewiseMechanism(eps)
    left = (m.C + 1) * 0.5 * t - (m.C - 1) * 0.5
    cdf, total = _cdf_from_density(m, t, -m.C, m.C, [-m.C, left, left + m.C - 1, m.C])
    assert total == pytest.approx(1.0, abs=1e-12)  # the stated density is a density
    y = m.randomize(np.full(50_000, t), rng)["t"]
    assert np.all(np.abs(y) <= m.C)
    assert stats.kstest(y, cdf).pvalue > 1e-4


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])  # 0.3 < eps*: pure Duchi (atoms only)
@pytest.mark.parametrize("t", [-0.7, 0.0, 0.9])
def test_hm_sampler_matches_density(eps, t, rng):
    """HM = atoms at +-C_D plus a PM part: atom frequencies by chi-square against probabilities(),
    the continuous part (outputs off the atoms) by KS against the normalised continuous density."""
    from scipy import stats

    m = HybridMechanism(eps)
    N = 60_000
    y = m.randomize(np.full(N, t), rng)["t"]
    atoms = np.array([-m.C_duchi, m.C_duchi])
    p_atoms = np.asarray(m.probabilities({"t": atoms}, t), dtype=np.float64)
    pm_c = PiecewiseMechanism(eps).C  # support of the PM part
    left = (pm_c + 1) * 0.5 * t - (pm_c - 1) * 0.5
    cdf, cont_mass = _cdf_from_density(m, t, -pm_c, pm_c, [-pm_c, left, left + pm_c - 1, pm_c])
    if m.alpha == 0.0:
        cont_mass = 0.0
    assert p_atoms.sum() + cont_mass == pytest.approx(1.0, abs=1e-12)  # atoms + density = a law
    on = np.isin(y, atoms)
    obs = np.array([np.sum(y == atoms[0]), np.sum(y == atoms[1]), np.sum(~on)])
    exp = np.array([p_atoms[0], p_atoms[1], cont_mass]) * N
    keep = exp > 0
    assert obs[~keep].sum() == 0
    assert stats.chisquare(obs[keep], exp[keep]).pvalue > 1e-4
    if m.alpha > 0:
        assert stats.kstest(y[~on], lambda v: cdf(v) / cont_mass).pvalue > 1e-4
