"""Multi-value protocols: attribute fragmenting and sample-one (input: an (n, k) int array)."""

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from shuffledp import pipeline
from shuffledp.accounting import basic_composition, shuffle_amplification
from shuffledp.core import ValidationError
from shuffledp.local.verify import worst_case_log_ratio
from shuffledp.shuffle import protocol, run_shufflers
from shuffledp.shuffle.multi_attribute import split_attributes
from tests.conftest import mean_z_bound, variance_ratio_band
from tests.shuffle._twosample import assert_same_law


def _data(n, dims, rng):
    cols = []
    for d in dims:
        w = np.exp(-0.5 * ((np.arange(d) - d / 3) / (d / 5)) ** 2)
        cols.append(rng.choice(d, size=n, p=w / w.sum()))
    x = np.column_stack(cols)
    x[: n // 4, 1] = x[: n // 4, 0] % dims[1]  # correlated attributes (matters for sample_one's joint law)
    return x


def test_parameters():
    n, eps, delta = 10**6, 0.9, 1e-6
    f = protocol("fragmenting", eps, delta, n, d=[100, 10, 50])
    assert f.k == 3 and f.n_shufflers == 3
    assert [p.d for p in f.parts] == [100, 10, 50]
    assert all(p.epsilon == pytest.approx(0.3) and p.delta == pytest.approx(delta / 3) for p in f.parts)
    kr = protocol("hist_kr", 0.3, delta / 3, n, d=100)
    assert f.parts[0].eps_l == pytest.approx(kr.eps_l) and f.variance() == pytest.approx(kr.variance())
    assert f.messages_per_user == 3 and f.bits_per_user == 7 + 4 + 6

    s = protocol("sample_one", eps, delta, n, d=100, k=3)
    c_req = max(14 * math.log(2 / delta) / eps**2, 27 / eps)
    assert s.gamma[0] == pytest.approx(3 * 100 * c_req / (n - 1))
    assert s.eps_l == pytest.approx(math.log1p(100 * (1 - s.gamma[0]) / s.gamma[0]))
    assert s.privacy().eps == pytest.approx(eps, rel=1e-9)
    # zero cell: k^2 n q/k (1 - q/k) / (p-q)^2 ~ k^2 * 14 ln(2/delta)/eps^2 / (1-gamma)^2
    assert s.variance() == pytest.approx(9 * c_req / (1 - s.gamma[0]) ** 2, rel=1e-3)


def test_variance_is_the_worst_attribute_and_attribute_is_checked():
    n, eps, delta = 10**6, 0.9, 1e-6
    for p in (protocol("fragmenting", eps, delta, n, d=[10, 100, 50]),
              protocol("sample_one", eps, delta, n, d=[10, 100])):
        per = [p.attribute_variance(n, 7.0, a) for a in range(p.k)]
        assert p.variance(n, 7.0) == max(per) and per[1] == max(per)  # the largest domain is the worst
        for bad in (-1, p.k, 1.0, True):
            with pytest.raises(ValidationError) as e:
                p.attribute_variance(n, 0.0, bad)
            assert e.value.parameter == "attribute"


# --------------------------------------------------------------------------- privacy

def test_local_ratio_exact():
    d, k = 3, 2
    f = protocol("fragmenting", 1.0, 0.05, 4000, d=d, k=k)
    mech = f.local_randomizer
    ys = np.array(list(itertools.product(range(d), repeat=k)))
    reports = {"0:y": ys[:, 0], "1:y": ys[:, 1]}
    inputs = [np.array(v) for v in itertools.product(range(d), repeat=k)]
    r = worst_case_log_ratio(mech, reports, inputs)
    assert r == pytest.approx(sum(p.eps_l for p in f.parts), rel=1e-12)

    s = protocol("sample_one", 1.0, 0.05, 4000, d=[3, 4])
    cells = [(a, y) for a, da in enumerate(s.dims) for y in range(da)]
    reports = {"attr": np.array([c[0] for c in cells]), "y": np.array([c[1] for c in cells])}
    inputs = [np.array(v) for v in itertools.product(range(3), range(4))]
    assert worst_case_log_ratio(s.local_randomizer, reports, inputs) == pytest.approx(s.eps_l, rel=1e-12)
    probs = sum(s.local_randomizer.probabilities(reports, np.array([1, 2])))
    assert probs == pytest.approx(1.0)


@pytest.mark.parametrize("n", [10**6, 2 * 10**6])
def test_privacy_matches_accounting(n):
    eps, delta = 0.9, 1e-6
    f = protocol("fragmenting", eps, delta, 10**6, d=[100, 20], bound="closed_form")
    refs = [(shuffle_amplification(p.eps_l, n, delta / 2, method="blanket", bound="closed_form", randomizer="krr",
                                   k=p.d), delta / 2) for p in f.parts]
    e, dl = basic_composition(refs)
    assert f.privacy(n).eps == pytest.approx(e, rel=1e-11) and f.privacy(n).delta == pytest.approx(dl)
    assert f.privacy().eps <= eps * (1 + 1e-9)

    s = protocol("sample_one", eps, delta, 10**6, d=[100, 20])
    a = 0  # the larger domain is the binding one
    K = s.k * s.dims[a]
    eps_eq = math.log1p(K * (1 - s.gamma[a]) / s.gamma[a])
    ref = shuffle_amplification(eps_eq, n, delta, method="blanket", bound="closed_form", randomizer="krr", k=K)
    assert s.privacy(n).eps == pytest.approx(ref, rel=1e-9)


def test_sample_one_privacy_uses_both_blanket_terms():
    """privacy(n) is max(sqrt(14 ln(2/delta)/c), 27/c) (BBGN19 Thm 3.1 needs both): at delta = 0.5
    the 27/c term binds, and the sqrt term alone would understate eps (0.85 instead of 1)."""
    eps, delta, n = 1.0, 0.5, 10**5
    s = protocol("sample_one", eps, delta, n, d=[10, 5])
    c = s.blanket(n)
    assert c == pytest.approx(27.0, rel=1e-9)
    sqrt_term = math.sqrt(14 * math.log(2 / delta) / c)
    assert sqrt_term < 0.86
    assert max(sqrt_term, 27 / c) <= s.privacy(n).eps == pytest.approx(27 / c, rel=1e-11)  # rounded up
    assert s.privacy(n).delta == delta
    # fewer users: the blanket bound would exceed 1 (outside Thm 3.1), so only the local guarantee
    st = s.privacy(n // 2)
    assert st.eps == s.eps_l and st.delta == 0.0


def _exact_delta_grouped(row_x, row_x2, pi, m, eps):
    """Exact hockey-stick divergence between the shuffled histograms (m i.i.d. others with cell
    law ``pi`` plus a target with row ``row_x`` vs ``row_x2``), using
    ``P_x(h) = Mult_{m+1}(h; pi) * sum_w row_x(w) h_w / ((m+1) pi_w)``, so the divergence is
    ``E[max(sum_w c_w h_w, 0)] / (m+1)`` with ``c_w = (row_x(w) - e^eps row_x2(w)) / pi_w``; cells
    with equal c_w are merged. Returns None when more than 3 groups remain (not enumerated)."""
    c = (row_x - math.exp(eps) * row_x2) / pi
    keys, inv = np.unique(np.round(c, 12), return_inverse=True)
    if keys.size > 3:
        return None
    gp = np.bincount(inv, weights=pi, minlength=keys.size)
    N = m + 1
    if keys.size == 1:
        return max(keys[0] * N, 0.0) / N
    if keys.size == 2:
        h = np.arange(N + 1)
        pmf = stats.binom.pmf(h, N, gp[0])
        return float((pmf * np.maximum(keys[0] * h + keys[1] * (N - h), 0)).sum() / N)
    h = np.arange(N + 1, dtype=np.float64)
    h0, h1 = h[:, None], h[None, :]
    h2 = N - h0 - h1
    ok = h2 >= 0
    h2c = np.where(ok, h2, 0)
    lp = (special.gammaln(N + 1) - special.gammaln(h0 + 1) - special.gammaln(h1 + 1) - special.gammaln(h2c + 1)
          + h0 * np.log(gp[0]) + h1 * np.log(gp[1]) + h2c * np.log(gp[2]))
    val = np.maximum(keys[0] * h0 + keys[1] * h1 + keys[2] * h2c, 0)
    return float(np.where(ok, np.exp(lp) * val, 0.0).sum() / N)


def _binom_table(N, r):
    """pmf[t, x] of Bin(t, r) for t, x in [0, N] (zero for x > t)."""
    lg = special.gammaln(np.arange(N + 2))
    t, x = np.arange(N + 1)[:, None], np.arange(N + 1)[None, :]
    ok = x <= t
    xm = np.where(ok, x, 0)
    lp = lg[t + 1] - lg[xm + 1] - lg[np.where(ok, t - x, 0) + 1] + xm * np.log(r) + np.where(ok, t - x, 0) * np.log1p(-r)
    return np.exp(np.where(ok, lp, -np.inf))


def _exact_delta_two_attributes(row_x, row_x2, pi, m, eps):
    """Same divergence for k = 2, d = 2 (cells (0,0), (0,1), (1,0), (1,1)) without merging: condition
    on T = number of the m+1 multinomial draws in attribute 0; given T the two within-attribute
    counts U ~ Bin(T, r0), V ~ Bin(N-T, r1) are independent, and E[max(K_T + a U + b V, 0)] is
    summed over (T, U) with prefix sums over V (O(m^2) per call, vectorised)."""
    c = (row_x - math.exp(eps) * row_x2) / pi
    N = m + 1
    pa = pi[0] + pi[1]
    a_, b_ = c[0] - c[1], c[2] - c[3]
    T = np.arange(N + 1)
    pt = stats.binom.pmf(T, N, pa)
    PU = _binom_table(N, pi[0] / pa)                 # [T, u]
    PV = _binom_table(N, pi[2] / (1 - pa))[::-1]     # [T, v] = Bin(N - T, r1)
    v = np.arange(N + 1)
    cp = np.concatenate([np.zeros((N + 1, 1)), np.cumsum(PV, axis=1)], axis=1)          # P(V < j)
    cvp = np.concatenate([np.zeros((N + 1, 1)), np.cumsum(PV * v, axis=1)], axis=1)     # E[V; V < j]
    base = (c[1] * T + c[3] * (N - T))[:, None] + a_ * v[None, :]                        # [T, u]
    rows = np.broadcast_to(T[:, None], base.shape)
    if b_ == 0:
        inner = np.maximum(base, 0.0)
    elif b_ > 0:  # v >= -base / b
        j = np.clip(np.ceil(-base / b_ - 1e-12), 0, N + 1).astype(int)
        inner = base * (cp[:, -1:] - cp[rows, j]) + b_ * (cvp[:, -1:] - cvp[rows, j])
    else:         # v <= -base / b
        j = np.clip(np.floor(-base / b_ + 1e-12) + 1, 0, N + 1).astype(int)
        inner = base * cp[rows, j] + b_ * cvp[rows, j]
    return float((pt[:, None] * PU * inner).sum() / N)


def test_sample_one_exact_shuffled_divergence():
    """k = 2 attributes, d = 2, n = 1200 (eps_a = 1.53 > eps = 1): the exact divergence of the
    shuffled output at the target eps is below delta for every neighbour pair and every common
    vector of the others (all 48 triples, exact sums over every histogram);
    the regime is non-trivial (exact delta at eps = 0.05 exceeds the target: the exact eps lies
    in (0.07, 0.1), the blanket bound is loose by > 10x)."""
    eps, delta, n = 1.0, 1e-3, 1200
    s = protocol("sample_one", eps, delta, n, d=2, k=2)
    assert s.eps_l > 1.5
    vecs = list(itertools.product(range(2), repeat=2))
    reports = {"attr": np.array([0, 0, 1, 1]), "y": np.array([0, 1, 0, 1])}
    row = {v: s.local_randomizer.probabilities(reports, np.array(v)) for v in vecs}
    done, worst, worst_low = 0, 0.0, 0.0
    for others in vecs:
        for x, x2 in itertools.permutations(vecs, 2):
            dl = _exact_delta_grouped(row[x], row[x2], row[others], n - 1, eps)
            if dl is None:  # four distinct coefficients: the conditioned O(n^2) sum
                dl = _exact_delta_two_attributes(row[x], row[x2], row[others], n - 1, eps)
            else:
                worst_low = max(worst_low, _exact_delta_grouped(row[x], row[x2], row[others], n - 1, 0.05))
            done += 1
            worst = max(worst, dl)
    assert done == 48  # every (others, x, x') triple
    assert worst <= delta < worst_low


def test_grouped_divergence_matches_bruteforce():
    """The grouped formula equals a brute-force sum over every 4-cell histogram (small m)."""
    m, eps = 25, 0.7
    pi = np.array([0.4, 0.1, 0.25, 0.25])
    rx, rx2 = np.array([0.4, 0.1, 0.25, 0.25]), np.array([0.1, 0.4, 0.25, 0.25])
    P = {}
    Q = {}
    for h in itertools.product(range(m + 2), repeat=3):
        h = np.array(h + (m + 1 - sum(h),))
        if h[3] < 0:
            continue
        base = math.exp(special.gammaln(m + 2) - special.gammaln(h + 1).sum() + (h * np.log(pi)).sum())
        P[tuple(h)] = base * (rx * h / pi).sum() / (m + 1)
        Q[tuple(h)] = base * (rx2 * h / pi).sum() / (m + 1)
    assert sum(P.values()) == pytest.approx(1.0)
    brute = sum(max(P[h] - math.exp(eps) * Q[h], 0) for h in P)
    got = _exact_delta_grouped(rx, rx2, pi, m, eps)  # cells 2 and 3 share c_w: 3 groups
    assert got is not None and got == pytest.approx(brute, rel=1e-9)
    assert _exact_delta_two_attributes(rx, rx2, pi, m, eps) == pytest.approx(brute, rel=1e-9)
    # and a 4-group case against brute force
    pi4, r4, r4b = np.array([0.3, 0.2, 0.35, 0.15]), np.array([0.35, 0.15, 0.3, 0.2]), np.array([0.2, 0.3, 0.15, 0.35])
    assert _exact_delta_grouped(r4, r4b, pi4, m, eps) is None
    P4, Q4 = [], []
    for h in itertools.product(range(m + 2), repeat=3):
        h = np.array(h + (m + 1 - sum(h),))
        if h[3] < 0:
            continue
        base = math.exp(special.gammaln(m + 2) - special.gammaln(h + 1).sum() + (h * np.log(pi4)).sum())
        P4.append(base * (r4 * h / pi4).sum() / (m + 1))
        Q4.append(base * (r4b * h / pi4).sum() / (m + 1))
    brute4 = float(np.maximum(np.array(P4) - math.exp(eps) * np.array(Q4), 0).sum())
    assert _exact_delta_two_attributes(r4, r4b, pi4, m, eps) == pytest.approx(brute4, rel=1e-9)


# --------------------------------------------------------------------------- utility

@pytest.mark.parametrize("name,kw", [
    ("fragmenting", dict(d=[12, 6])),
    ("fragmenting", dict(d=[12, 6], inner="murs", oracle="grr", n_fake=200)),
    ("sample_one", dict(d=[12, 6])),
])
def test_unbiased_and_mse(name, kw, rng):
    n, eps, delta, R = 40000, 1.0, 1e-3, 2000
    p = protocol(name, eps, delta, n, **kw)
    x = _data(n, p.dims, rng)
    data = p.summarize(x)
    truth = np.concatenate([np.bincount(x[:, a], minlength=da) for a, da in enumerate(p.dims)])
    est = np.array([p.estimate(p.simulate_statistic(data, rng), n).values for _ in range(R)])
    var = np.concatenate([[p.attribute_variance(n, c, a) for c in ca]
                          for a, ca in enumerate(split_attributes(truth, p.dims))])
    z = (est.mean(0) - truth) / np.sqrt(var / R)
    assert np.abs(z).max() < mean_z_bound(1e-4 / truth.size) + 0.5
    ratio = ((est - truth) ** 2).mean(0) / var
    lo, hi = variance_ratio_band(R * truth.size)
    assert lo - 0.02 <= ratio.mean() <= hi + 0.02, ratio.mean()


@pytest.mark.parametrize("name,kw", [
    ("fragmenting", dict(d=[5, 3])),
    ("fragmenting", dict(d=[5, 3], inner="murs", oracle="grr", n_fake=30)),
    ("sample_one", dict(d=[5, 3])),
])
def test_simulate_matches_pipeline(name, kw, rng):
    n, R = 3000, 1000
    p = protocol(name, 1.0, 0.05, n, **kw)
    x = _data(n, p.dims, rng)
    a = np.array([p.aggregate(run_shufflers(p, p.encode(x, rng), rng)) for _ in range(R)])
    b = np.array([p.simulate_statistic(p.summarize(x), rng) for _ in range(R)])
    # per-cell means and variances, row sums, and the cross-attribute covariance (sample_one
    # couples attributes through the sampling): z-tests with estimated standard errors,
    # Bonferroni at level 1e-4 (tests/shuffle/_twosample)
    assert_same_law(a, b, cov_pairs=[(0, p.dims[0]), (1, p.dims[0] + 1)])
    est = pipeline.run(p, x, rng)
    assert est.values.shape == (sum(p.dims),) and list(est.extra["offsets"]) == [0, 5, 8]
    assert est.privacy == p.privacy(n)


def test_fragmenting_routes_attributes(rng):
    f = protocol("fragmenting", 1.0, 0.05, 3000, d=[5, 3], inner="murs", oracle="grr", n_fake=30)
    x = _data(3000, f.dims, rng)
    out = run_shufflers(f, f.encode(x, rng), rng)
    assert np.bincount(out["shuffler"]).tolist() == [3030, 3030]  # users + that attribute's 30 fakes
    assert out["y"][out["shuffler"] == 1].max() < 3


def test_simulate_fast_at_1e7(rng):
    import time

    n = 10**7
    x_rows = np.column_stack([rng.integers(0, 100, 10**5), rng.integers(0, 20, 10**5)])
    for name in ("fragmenting", "sample_one"):
        p = protocol(name, 0.9, 1e-6, n, d=[100, 20])
        data = p.summarize(x_rows)
        if name == "sample_one":
            data[:, -1] *= 100   # 10^7 users over 10^5 row types
        else:
            data = data * 100
        t0 = time.perf_counter()
        est = p.estimate(p.simulate_statistic(data, rng), n)
        assert time.perf_counter() - t0 < 2.0 and np.isfinite(est.values).all()


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("bad", [np.array([1, 2]), np.array([[0, 5]]), np.array([[-1, 0]]),
                                 np.array([[0.0, 1.0]]), np.array([[True, False]]), np.array([[0, 1, 2]])])
@pytest.mark.parametrize("name", ["fragmenting", "sample_one"])
def test_bad_values(name, bad, rng):
    p = protocol(name, 1.0, 0.05, 4000, d=[4, 5])
    with pytest.raises(ValidationError):
        p.encode(bad, rng)


@pytest.mark.parametrize("name,eps,n,kw", [
    ("fragmenting", 0.9, 10**6, dict(d=10)),                       # k missing
    ("fragmenting", 0.9, 10**6, dict(d=[10, 1])),                  # domain < 2
    ("fragmenting", 0.9, 10**6, dict(d=[10, 10], k=3)),            # k mismatch
    ("fragmenting", 0.9, 10**6, dict(d=[10, 10], inner="cnt_rr")),  # not a histogram protocol
    ("fragmenting", 0.9, 10**6, dict(d=[10, 10], inner="murs", mode="parallel")),
    ("fragmenting", 0.9, 2000, dict(d=[100, 100], bound="closed_form")),  # inner target impossible
    ("sample_one", 1.5, 10**6, dict(d=[10, 10])),                  # Thm 3.1 needs eps <= 1
    ("sample_one", 0.9, 10**4, dict(d=[100, 100])),                # gamma >= 1
    ("sample_one", 0.9, 10**6, dict(d="ab")),
])
def test_impossible(name, eps, n, kw):
    with pytest.raises(ValidationError):
        protocol(name, eps, 1e-6, n, **kw)


def test_bad_messages():
    s = protocol("sample_one", 1.0, 0.05, 4000, d=[4, 5])
    with pytest.raises(ValidationError):
        s.aggregate({"attr": np.array([2]), "y": np.array([0])})
    with pytest.raises(ValidationError):
        s.aggregate({"attr": np.array([0]), "y": np.array([4])})
    f = protocol("fragmenting", 1.0, 0.05, 4000, d=[4, 5])
    with pytest.raises(ValidationError):
        f.aggregate({"y": np.array([0])})
    with pytest.raises(ValidationError):
        f.estimate(np.zeros(3), 4000)


@pytest.mark.parametrize("inner,eps,kw", [("hist_mm", 4.0, {}), ("slh", 1.0, {}), ("murs", 1.0, {}),
                                          ("prhr", 1.0, {}), ("pucm", 4.0, {"tau": 2, "s": 40})])
def test_fragmenting_any_inner(inner, eps, kw, rng):
    """Every histogram protocol works as the per-attribute protocol (message level and simulated)."""
    n = 3000
    f = protocol("fragmenting", eps, 0.1, n, d=[5, 3], inner=inner, **kw)
    x = _data(n, f.dims, rng)
    truth = np.concatenate([np.bincount(x[:, a], minlength=da) for a, da in enumerate(f.dims)])
    for est in (pipeline.run(f, x, rng), pipeline.simulate(f, x, rng)):
        assert est.values.shape == (8,)
        assert np.all(np.abs(est.values - truth) < 6 * np.sqrt([f.attribute_variance(n, c, int(a >= 5))
                                                                 for a, c in enumerate(truth)]) + 1)
    assert f.privacy().eps <= eps * (1 + 1e-9) and f.privacy().delta == pytest.approx(0.1)


@pytest.mark.parametrize("name,kw", [
    ("fragmenting", dict(d=[100, 20])), ("fragmenting", dict(d=[7, 7, 7], inner="slh")),
    ("sample_one", dict(d=[100, 20])), ("sample_one", dict(d=[7, 7, 7])),
    ("murs", dict(d=100, oracle="olh")), ("murs", dict(d=100, mode="parallel", shufflers=3)),
    ("slh", dict(d=100, variant="v1")),
])
def test_privacy_meets_the_central_target(name, kw):
    """Regression sweep (as tests/shuffle/test_targets_met.py, for the variants and multi-value
    protocols): at eps = 1 a calibration landing 1 ulp above the target would fall outside
    Thm 3.1's domain and silently degrade to the local guarantee."""
    built = 0
    for eps in (0.1, 0.5, 0.9, 1.0):
        for n in (10**4, 10**5, 10**6, 10**7):
            try:
                p = protocol(name, eps, 1e-6, n, **kw)
            except ValidationError:
                continue
            built += 1
            st = p.privacy(n)
            assert st.eps <= eps * (1 + 1e-9) and st.delta <= 1e-6 * (1 + 1e-9), (eps, n, str(st))
    assert built >= 4
