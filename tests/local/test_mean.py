import itertools
import math

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.local import MEAN_ORACLES, MeanOracle, concat_rows, mean_oracle, n_rows, take_rows
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


def _grid_moments(m, x):
    """Total mass, mean and second moment of one coordinate's output law, summed exactly over the
    finite output set (``output_grid``) with the stated pmf."""
    g = m.output_grid()
    p = np.asarray(m.probabilities({"t": g}, x), dtype=np.float64)
    return p, float(p.sum()), float((p * g).sum()), float((p * g * g).sum())


@pytest.mark.parametrize("cls,eps", [(PiecewiseMechanism, 0.5), (PiecewiseMechanism, 2 * math.log(3)),
                                     (PiecewiseMechanism, 8.0), (HybridMechanism, 0.3), (HybridMechanism, 1.0),
                                     (HybridMechanism, 4.0)])
@pytest.mark.parametrize("x", [-1.0, -0.3, 0.0, 0.1234, 0.8, 1.0])
def test_pm_hm_pmf_is_normalized_unbiased_with_stated_variance(cls, eps, x):
    """Exact enumeration of the output grid: the pmf is a law with full support, mean x and the
    closed-form variance (inputs on and off the input grid)."""
    m = cls(eps)
    p, mass, mean, second = _grid_moments(m, x)
    assert p.min() > 0  # every grid value is possible under every input
    assert mass == pytest.approx(1.0, abs=1e-12)
    assert mean == pytest.approx(x, abs=1e-12 * m.C)
    assert second - mean * mean == pytest.approx(m.variance(1, x), rel=1e-9)


@pytest.mark.parametrize("cls", [PiecewiseMechanism, HybridMechanism])
@pytest.mark.parametrize("eps", [0.7, 1.0, 3.0])  # HM above eps* (below it there is no PM part)
def test_snapping_variance_term(cls, eps):
    """Off the input grid the variance exceeds a + b t^2 by B0 Δ^2 λ(1-λ) <= snap_variance_bound."""
    m = cls(eps, grid_size=64)  # a coarse grid makes the term visible
    a, b = m._unit_variance_coefficients()
    pm = m._pm
    mid = 2 * (3 + 0.5) / pm.M - 1  # halfway between input grid points 3 and 4: λ = 1/2
    for t, extra in [(2 * 3 / pm.M - 1, 0.0), (mid, m.snap_variance_bound())]:
        _, _, mean, second = _grid_moments(m, t)
        assert mean == pytest.approx(t, abs=1e-12 * m.C)
        assert second - mean * mean == pytest.approx(a + b * t * t + extra, rel=1e-9)
    assert m.snap_variance_bound() > 0


def _continuous_pm_variance(eps, t):
    z = math.exp(eps / 2)
    return t * t / (z - 1) + (z + 3) / (3 * (z - 1) ** 2)


@pytest.mark.parametrize("eps", [0.1, 0.5, 2.0, 6.0, 10.0])
@pytest.mark.parametrize("K", [256, 4096])
def test_grid_pm_tends_to_continuous_pm(eps, K):
    """The grid PM's range is within 2/K and its variance within O(1/w) = O(e^{eps/2}/K) of the
    continuous PM's (w ~ K/(e^{eps/2} + 1) cells in the high band)."""
    m = PiecewiseMechanism(eps, grid_size=K)
    z = math.exp(eps / 2)
    assert m.C == pytest.approx((z + 1) / (z - 1), rel=2 / K)
    for t in (0.0, 0.5, 1.0):
        assert m.variance(1, t) == pytest.approx(_continuous_pm_variance(eps, t), rel=2 / m._pm.w)


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
    # PM and HM run on a grid of K = 4096 values: the paper's numbers hold up to O(1/K)
    pm = mean_oracle("pm", 2 * math.log(3))
    assert pm.C == pytest.approx(2.0, rel=1e-3)
    g = pm.output_grid()
    y = g[[np.argmin(np.abs(g - 0.3)), np.argmin(np.abs(g - (-0.5)))]]
    cell = g[1] - g[0]
    # pmf / cell width = the paper's density 0.75 (high band) and 0.75 / 9 (elsewhere)
    np.testing.assert_allclose(pm.probabilities({"t": y}, 0.5) / cell, [0.75, 0.75 / 9], rtol=1e-3)
    assert pm.variance(1, 0.5) == pytest.approx(0.625, rel=1e-3)
    hm = mean_oracle("hm", 2 * math.log(3))
    assert hm.alpha == pytest.approx(2 / 3, abs=2.0**-32)
    assert hm.variance(1, 0.0) == pytest.approx(0.854167, rel=1e-3)
    assert hm.variance(1, 0.9) == pytest.approx(0.854167, rel=1e-3)  # t^2 terms cancel above eps* (up to O(1/K))
    assert mean_oracle("hm", 0.5).alpha == 0.0
    assert mean_oracle("hm", 0.5).variance(1, 0.4) == pytest.approx(d_var(0.5, 0.4))
    h = mean_oracle("harmony", 1.0, dim=4)
    assert h.variance(1, 0.5) == pytest.approx(4 * h.C**2 - 0.25)
    assert mean_oracle("harmony", 1.0).variance(7, 0.3) == pytest.approx(mean_oracle("duchi", 1.0).variance(7, 0.3))


def d_var(eps, t):
    C = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    return C * C - t * t


@pytest.mark.parametrize("eps,dim,k", [(1.0, 5, 1), (2.4, 5, 1), (5.0, 5, 2), (12.0, 3, 3), (12.0, 10, 5)])
def test_multidim_pm_k_and_variance(eps, dim, k):
    # default k: the smallest worst-case variance (Wang et al.'s floor(eps / 2.5) = 4 at eps = 12, dim = 10)
    m = mean_oracle("pm", eps, dim=dim)
    assert m.k == k and m.k_chosen and m.eps_coord == pytest.approx(eps / k)
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
        e = m.estimate(m.aggregate(take_rows(reports, slice(r * n, (r + 1) * n))), n)
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
    both = concat_rows([r1, r2])
    assert n_rows(both) == 470
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
    np.testing.assert_allclose(m.aggregate(take_rows(both, perm)), ab, rtol=1e-12, atol=1e-9)


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
    assert m.privacy().eps <= 1.5 and m.privacy().eps == pytest.approx(1.5, rel=1e-9) and m.privacy().model == "local"
    assert m.privacy().eps == m.effective_epsilon
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


# ------------------------------------------------------------------ sampler vs stated pmf (chi-square)
@pytest.mark.parametrize("cls", [PiecewiseMechanism, HybridMechanism])
@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])  # HM at 0.3 < eps*: pure Duchi (atoms only)
@pytest.mark.parametrize("t", [-0.7, 0.0, 0.1234, 1.0])
def test_pm_hm_sampler_matches_pmf(cls, eps, t, rng):
    """Counts of every output value (coarse grid, K = 64) against ``probabilities``."""
    from scipy import stats

    m = cls(eps, grid_size=64)
    g = m.output_grid()
    N = 100_000
    y = m.randomize(np.full(N, t), rng)["t"]
    idx = np.searchsorted(g, y)
    assert np.all(g[np.minimum(idx, g.size - 1)] == y)  # every output is a grid value
    obs = np.bincount(idx, minlength=g.size)
    p = np.asarray(m.probabilities({"t": g}, t), dtype=np.float64)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    keep = p > 0
    assert obs[~keep].sum() == 0
    assert stats.chisquare(obs[keep], p[keep] / p[keep].sum() * N).pvalue > 1e-4


@pytest.mark.parametrize("dim", [1, 2, 3, 4])
def test_duchi_sampler_matches_pmf(dim, rng):
    """The d-D Duchi sampler (rejection from uniform sign vectors) against the exhaustive pmf."""
    from scipy import stats

    m = mean_oracle("duchi", 1.0, dim=dim)
    x = np.linspace(-0.8, 0.6, dim) if dim > 1 else 0.35
    N = 80_000
    z = m.randomize(np.tile(np.atleast_1d(x), (N, 1)) if dim > 1 else np.full(N, x), rng)["z"].reshape(N, dim)
    code = ((z > 0).astype(np.int64) << np.arange(dim)).sum(axis=1)
    obs = np.bincount(code, minlength=2**dim)
    Z = np.array([[1 if (c >> i) & 1 else -1 for i in range(dim)] for c in range(2**dim)], dtype=np.int8)
    p = m.probabilities({"z": Z[:, 0] if dim == 1 else Z}, x)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert stats.chisquare(obs, p * N).pvalue > 1e-4


# ------------------------------------------------------------------ finite, input-independent outputs
def _bit_pattern_counts(y):
    """Counts of events defined by the float bit patterns of reports: for every binade of |y| and
    every value of the last 4 mantissa bits, one event; plus (Mironov-style) "y in [0.25, 0.5)
    with an odd last bit at 2^-54 resolution"."""
    y = np.asarray(y, dtype=np.float64).ravel()
    binade = np.frexp(np.abs(y))[1].astype(np.int64)
    low = (y.view(np.uint64) & np.uint64(15)).astype(np.int64)
    keys, counts = np.unique((binade + 2000) * 16 + low, return_counts=True)
    out = dict(zip(keys.tolist(), counts.tolist()))
    odd = (np.round(y * 2.0**54).astype(np.int64) & 1) == 1
    out["odd_2^-54_in_[0.25,0.5)"] = int(np.sum((y >= .25) & (y < .5) & odd))
    return out


def assert_counts_consistent_with_ldp(counts_a, counts_b, eps, slack=6.0):
    """For every event: P_a >= e^-eps P_b and P_b >= e^-eps P_a, tested on binomial counts with a
    ``slack``-sigma margin on each side (an event absent from one batch has count 0)."""
    for key in set(counts_a) | set(counts_b):
        ca, cb = counts_a.get(key, 0), counts_b.get(key, 0)
        for c1, c2 in ((ca, cb), (cb, ca)):
            assert c1 + slack * math.sqrt(c1 + 1) >= math.exp(-eps) * (c2 - slack * math.sqrt(c2)), (key, ca, cb)


@pytest.mark.parametrize("name", ["pm", "hm"])
@pytest.mark.parametrize("eps", [0.37, 1.0, 2.9])
def test_low_bit_patterns_do_not_identify_the_input(name, eps):
    """Events defined by the low bits of the float report have probabilities within e^eps under
    different inputs. (The continuous sampler left(t) + (C-1) u made such events impossible under
    one input and likely under another: at eps = 2.9, 0 against ~31000 odd 2^-54 bits in
    [0.25, 0.5) for inputs 0.1234 and 0.5; at eps = 0.37, 0 against ~1400 reports in [0.125, 0.25)
    with low mantissa bits 1000. HM at 0.37 < eps* is pure Duchi: two atoms.)"""
    m = mean_oracle(name, eps)
    rng = np.random.default_rng(1)
    n = 400_000
    counts = {x: _bit_pattern_counts(m.randomize(np.full(n, x), rng)["t"]) for x in (0.1234, 0.5, -0.4321)}
    for x1, x2 in ((0.1234, 0.5), (0.1234, -0.4321), (0.5, -0.4321)):
        assert_counts_consistent_with_ldp(counts[x1], counts[x2], eps)


@pytest.mark.parametrize("name", ["pm", "hm"])
@pytest.mark.parametrize("eps,dim", [(0.37, 1), (2.9, 1), (8.0, 1), (6.0, 3)])
def test_reports_lie_on_the_fixed_output_grid(name, eps, dim, rng):
    """Values produced from very different inputs are all values of ``output_grid()``, which is
    the same for every instance; an off-grid value is rejected by ``validate_reports``."""
    m = mean_oracle(name, eps, dim=dim)
    g = m.output_grid()
    np.testing.assert_array_equal(g, mean_oracle(name, eps, dim=dim).output_grid())
    assert np.all(np.diff(g) > 0) and g[-1] == m.C
    for x in (-1.0, -0.4321, 0.1234, 0.5, 1.0):
        vals = np.full(20_000, x) if dim == 1 else np.full((20_000, dim), x)
        rep = m.randomize(vals, rng)
        assert np.all(np.isin(rep["t"], g))
        m.validate_reports(rep)
    rep = m.randomize(np.zeros(4) if dim == 1 else np.zeros((4, dim)), rng)
    rep["t"] = rep["t"].copy()
    rep["t"].flat[0] = np.nextafter(rep["t"].flat[0], np.inf)
    with pytest.raises(ValidationError, match="output grid"):
        m.validate_reports(rep)


@pytest.mark.parametrize("name", sorted(MEAN_ORACLES))
@pytest.mark.parametrize("eps,dim", [(0.01, 1), (0.37, 1), (2.9, 1), (6.0, 3), (12.0, 10), (60.0, 1)])
def test_effective_epsilon_is_exact_and_within_request(name, eps, dim):
    """The integer ratios H / L, raised to the number of coordinates one user reports, stay below
    e^eps in exact arithmetic; ``effective_epsilon`` (stated in ``privacy``) is their log rounded up."""
    from fractions import Fraction

    m = mean_oracle(name, eps, dim=dim)
    if name in ("duchi", "harmony"):
        ratios, power = [(m._H, m._L)], 1
    else:
        ratios, power = [(m._HD, m._LD)] if name == "hm" else [], m.k
        if m._pm is not None:
            ratios.append((m._pm.H, m._pm.L))
    for H, L in ratios:
        assert isinstance(H, int) and isinstance(L, int) and 0 < L < H <= 2**53
        assert Fraction(H, L) ** power < Fraction(math.exp(eps)) * (1 - Fraction(1, 2**50))
    exact = power * max(math.log(H / L) for H, L in ratios)
    assert exact <= m.effective_epsilon <= eps
    assert m.privacy().eps == m.effective_epsilon and m.privacy().delta == 0.0
    if eps <= 12.0:
        assert m.effective_epsilon == pytest.approx(eps, rel=1e-9)
    else:  # integers <= 2^53 cap the ratio: the statement is the smaller, true eps
        assert m.effective_epsilon == pytest.approx(exact, rel=1e-9)


def test_large_epsilon_states_the_capped_ratio(rng):
    m = mean_oracle("pm", 60.0)
    assert m.effective_epsilon < 60.0
    worst = worst_case_log_ratio(m, sweep_reports(m, [-1.0, 1.0], 2000, rng), [-1.0, 1.0])
    assert worst <= m.effective_epsilon + 1e-9


def test_exp_ratio_below():
    from fractions import Fraction

    from shuffledp.local.mean import exp_ratio_below

    for eps, power, cap in [(1e-6, 1, 2**53), (0.37, 1, 2**53), (2.9, 3, 2**41), (700.0, 1, 2**53)]:
        H, L = exp_ratio_below(eps, cap, power=power)
        assert Fraction(H, L) ** power < Fraction(math.exp(eps))
        assert H <= cap
        if eps < 30:
            # below eps by the 2^-50 safety margin and the 1/L granularity, no more
            assert power * math.log1p((H - L) / L) == pytest.approx(eps, abs=power * 2.0 / L + 2.0**-49)
    with pytest.raises(ValidationError) as info:
        exp_ratio_below(1e-17)
    assert info.value.parameter == "epsilon"


@pytest.mark.parametrize("bad", [8, 2**21, 2.5, True])
def test_bad_grid_size(bad):
    with pytest.raises(ValidationError) as info:
        mean_oracle("pm", 1.0, grid_size=bad)
    assert info.value.parameter == "grid_size"
