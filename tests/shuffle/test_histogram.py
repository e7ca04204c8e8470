"""Shuffle-model histogram protocols: privacy (exact local ratios, amplification bounds, exact
shuffled-output divergence for k-RR), utility (unbiasedness, variance/MSE vs closed forms),
exact statistic simulation vs the message-level pipeline, worked examples, bad input."""

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from shuffledp import pipeline
from shuffledp.accounting import ShuffledBinaryRR, shuffle_amplification
from shuffledp.core import ValidationError
from shuffledp.core.errors import OutOfDomainError
from shuffledp.local.verify import worst_case_log_ratio
from shuffledp.shuffle import protocol, run_shufflers
from shuffledp.shuffle.histogram import _gf2_rank_probs, _parity, _random_subspaces, _span_nonzero
from tests.conftest import mean_z_bound, variance_ratio_band
from tests.shuffle._twosample import assert_same_law

EPS, DELTA, N, D = 0.9, 1e-6, 10**6, 100


# --------------------------------------------------------------------------- worked examples (spec §3-4)

def test_worked_examples():
    kr = protocol("hist_kr", EPS, DELTA, N, d=D, bound="closed_form")
    assert kr.gamma == pytest.approx(0.025077, abs=1e-6)
    assert kr.eps_l == pytest.approx(8.2658, abs=1e-4)
    assert kr.variance() == pytest.approx(263.77, abs=0.01)
    assert kr.variance(value=10**4) == pytest.approx(515.84, abs=0.01)

    mm = protocol("hist_mm", EPS, DELTA, N, d=D)
    assert mm.one_minus_p == pytest.approx(3.75353e-3, rel=1e-5)
    assert mm.variance() == pytest.approx(3739.4, abs=0.1)
    assert mm.messages_per_user == pytest.approx(100.62, abs=0.01)

    slh = protocol("slh", EPS, DELTA, N, d=D)
    assert slh.g == 1329 and slh.eps_l == pytest.approx(7.8860, abs=1e-4)
    assert slh.p_star == pytest.approx(0.66698, abs=1e-5)

    murs = protocol("murs", EPS, DELTA, N, d=D, n_fake=10**4, oracle="grr")
    assert murs.eps_l == pytest.approx(8.7847, abs=1e-4)
    assert math.exp(murs.eps_l) + D - 1 == pytest.approx(6632.75, abs=0.01)
    assert murs.variance() == pytest.approx(257.45, abs=0.01)
    olh = protocol("murs", EPS, DELTA, N, d=D, n_fake=10**4, oracle="olh")
    assert olh.g == 1343 and olh.eps_l == pytest.approx(7.926, abs=1e-3)
    assert protocol("murs", EPS, DELTA, N, d=D, n_fake=10**4).oracle_kind == "grr"  # auto: GRR smaller here

    prhr = protocol("prhr", EPS, DELTA, N, d=D)
    assert (prhr.B, prhr.tau, prhr.rho) == (128, 19, 348)
    assert prhr.rho0 == pytest.approx(663.15, abs=0.01)
    assert prhr.messages_per_user == 349 and prhr.bits_per_message == 152
    assert prhr.variance() == pytest.approx(665.7, abs=0.5)

    pucm = protocol("pucm", EPS, DELTA, N, d=D, public_seed=1)
    assert (pucm.tau, pucm.s) == (11, 2 * 10**6)
    assert pucm.gamma == pytest.approx(0.2273, abs=1e-4)
    assert pucm.messages_per_user == pytest.approx(5.0e6, rel=0.01)


# --------------------------------------------------------------------------- privacy: local randomizers

def _all_outputs(mech):
    if hasattr(mech, "n_seeds"):
        s, y = np.meshgrid(np.arange(mech.n_seeds), np.arange(mech.g), indexing="ij")
        return {"seed": s.ravel().astype(np.uint64), "y": y.ravel()}
    return {"y": np.arange(mech.d)}


@pytest.mark.parametrize("name,kw", [
    ("hist_kr", {}), ("hist_kr", {"bound": "bennett"}), ("slh", {}), ("slh", {"variant": "v1"}),
    ("murs", {"oracle": "grr"}), ("murs", {"oracle": "olh"}), ("murs", {"mode": "parallel", "shufflers": 3}),
])
def test_local_ratio_exact(name, kw):
    """Exhaustive over every output: max log ratio equals eps_l (exact LDP at eps_l)."""
    n, d = 2000, 5
    p = protocol(name, 1.0, 0.05, n, d=d, **kw)
    mech = p.local_randomizer
    if hasattr(mech, "n_seeds"):
        assert mech.n_seeds <= 10**4
    ratio = worst_case_log_ratio(mech, _all_outputs(mech), range(d))
    assert ratio == pytest.approx(p.eps_l, rel=1e-9)
    assert ratio <= p.eps_l + 1e-9


def test_multi_message_protocols_have_no_local_dp(rng):
    """Hist_MM, PRHR, PUCM: an input forces a message, so the local ratio is infinite."""
    mm = protocol("hist_mm", 2.0, 0.5, 2000, d=4)
    assert mm.local_randomizer is None
    msgs = [np.sort(mm.encode(np.array([0]), rng)["y"]) for _ in range(2000)]
    assert all(0 in m for m in msgs)                       # x = 0 always sends label 0
    assert any(0 not in np.sort(mm.encode(np.array([1]), rng)["y"]) for _ in range(2000))  # x = 1 may not
    pr = protocol("prhr", 1.0, 0.1, 256, d=4)
    assert pr.local_randomizer is None
    t = pr.encode(np.array([2]), rng)["t"][0].astype(np.int64)   # the real tuple lies in H_{row 3}
    assert (_parity(t & 3) == 0).all()


# --------------------------------------------------------------------------- privacy: central statements

def test_privacy_outside_theorem_is_local():
    kr = protocol("hist_kr", EPS, DELTA, 10**6, d=D, bound="closed_form")
    st = kr.privacy(10**5)  # Thm 3.1 would give eps > 1: only the local guarantee remains
    assert st.eps == kr.eps_l and st.delta == 0.0


@pytest.mark.parametrize("n", [9 * 10**5, 10**6, 3 * 10**6])
def test_privacy_matches_accounting(n):
    kr = protocol("hist_kr", EPS, DELTA, 10**6, d=D, bound="closed_form")
    assert kr.privacy().eps == pytest.approx(EPS, rel=1e-9) and kr.privacy().delta == DELTA
    ref = shuffle_amplification(kr.eps_l, n, DELTA, method="blanket", bound="closed_form", randomizer="krr", k=D)
    assert kr.privacy(n).eps == ref

    kb = protocol("hist_kr", 2.0, DELTA, 10**6, d=D, bound="bennett")
    refb = shuffle_amplification(kb.eps_l, n, DELTA, method="blanket", bound="bennett", randomizer="krr", k=D)
    assert kb.privacy(n).eps == refb
    assert kb.privacy().eps <= 2.0 * (1 + 1e-9)

    for variant, factor in (("optimal", 1.0), ("v1", 2.0)):
        s = protocol("slh", EPS, DELTA, 10**6, d=4096, variant=variant)
        ref = shuffle_amplification(s.eps_l, n, DELTA, method="blanket", bound="closed_form", randomizer="krr", k=s.g)
        assert s.privacy(n).eps == pytest.approx(factor * ref, rel=1e-11)
        assert s.privacy().eps <= EPS * (1 + 1e-9)

    # MURS without fakes is exactly the blanket of its oracle; with fakes, the blanket of an
    # equivalent k-RR (e^eps' + g - 1 = (n-1)/c) plus nothing else.
    m0 = protocol("murs", EPS, DELTA, 10**6, d=D, n_fake=0, oracle="grr")
    assert m0.eps_l == pytest.approx(kr.eps_l, rel=1e-12)
    ref = shuffle_amplification(m0.eps_l, n, DELTA, method="blanket", bound="closed_form", randomizer="krr", k=D)
    assert m0.privacy(n).eps == pytest.approx(ref, rel=1e-11)
    chain_eps_l = protocol("murs", EPS, DELTA, 10**6, d=D, n_fake=10**4, oracle="grr").eps_l
    assert chain_eps_l > kr.eps_l  # fakes let users add less noise
    for mode in ("chain", "parallel"):
        mf = protocol("murs", EPS, DELTA, 10**6, d=D, n_fake=10**4, mode=mode, oracle="grr")
        if mode == "parallel":  # a target hides only among the users of her own shuffler
            assert mf.eps_l < kr.eps_l
        c = mf.blanket(n)
        eps_eq = math.log((n - 1) / c - D + 1)
        ref = shuffle_amplification(eps_eq, n, DELTA, method="blanket", bound="closed_form", randomizer="krr", k=D)
        assert mf.privacy(n).eps == pytest.approx(ref, rel=1e-9)
        assert mf.privacy().eps == pytest.approx(EPS, rel=1e-9)


def test_privacy_other_protocols():
    mm = protocol("hist_mm", EPS, DELTA, N, d=D)
    assert mm.privacy().eps == pytest.approx(EPS, rel=1e-9) and mm.privacy().delta == DELTA
    assert mm.privacy(4 * N).eps == pytest.approx(EPS / 2, rel=1e-9)   # eps' ~ 1/sqrt(n (1-p))
    assert math.isinf(mm.privacy(1000).eps)                             # condition fails, no local DP
    pr = protocol("prhr", EPS, DELTA, N, d=D)
    assert 0.89 < pr.privacy().eps <= EPS
    rho_eff = pr.rho * N * 2.0**-pr.tau
    e = pr.privacy().eps
    assert 36 / e**2 * math.log(math.e / (e * DELTA)) <= rho_eff * (1 + 1e-9)
    pu = protocol("pucm", EPS, DELTA, N, d=D, public_seed=2)
    assert pu.privacy().eps == pytest.approx(EPS, rel=1e-9)
    # MURS collusion: only the honest shuffler's fakes (c = fakes/d)
    m = protocol("murs", EPS, DELTA, N, d=D, n_fake=8 * 10**4, shufflers=2, oracle="grr")
    assert m.privacy_collusion().eps == pytest.approx(math.sqrt(14 * math.log(2 / DELTA) / 400), rel=1e-9)
    m3 = protocol("murs", EPS, DELTA, N, d=D, n_fake=10**4, shufflers=2, oracle="grr")
    assert m3.privacy_collusion().eps == m3.eps_l  # 5000/100 = 50 per value: Thm 3.1 needs eps <= 1


def _krr_shuffled_laws(gamma, d, n, others_value):
    """Exact laws of the shuffled k-RR histogram (d = 3), the n-1 others all holding
    ``others_value``, for each target value: dense arrays over (a0, a1) (a2 implied). Enumerates
    every histogram."""
    m = n - 1
    p, q = 1 - gamma + gamma / d, gamma / d
    probs = np.full(d, q)
    probs[others_value] = p
    a = np.arange(n + 1, dtype=np.float64)
    a0, a1 = a[:, None], a[None, :]
    a2 = m - a0 - a1
    ok = a2 >= 0
    a2c = np.where(ok, a2, 0)
    logpmf = (special.gammaln(m + 1) - special.gammaln(a0 + 1) - special.gammaln(a1 + 1) - special.gammaln(a2c + 1)
              + a0 * np.log(probs[0]) + a1 * np.log(probs[1]) + a2c * np.log(probs[2]))
    M = np.where(ok, np.exp(logpmf), 0.0)          # others' histogram

    def law(v):
        rowp = np.full(d, q)
        rowp[v] = p
        out = np.zeros((n + 2, n + 2))
        out[:n + 1, :n + 1] += rowp[2] * M          # target sends 2: (a0, a1) unchanged
        out[1:n + 2, :n + 1] += rowp[0] * M         # sends 0
        out[:n + 1, 1:n + 2] += rowp[1] * M         # sends 1
        return out

    return [law(v) for v in range(d)]


def _krr_worst_delta(gamma, n, epsilons):
    """max over the others' (common) value and target pairs of the exact hockey-stick divergence."""
    worst = np.zeros(len(epsilons))
    for others in range(3):
        laws = _krr_shuffled_laws(gamma, 3, n, others)
        for x, x2 in itertools.permutations(range(3), 2):
            for i, e in enumerate(epsilons):
                worst[i] = max(worst[i], np.maximum(laws[x] - math.exp(e) * laws[x2], 0).sum())
    return worst


def test_krr_exact_shuffled_divergence():
    """Hist_KR at small n (d = 3, n = 1500, eps_l = 2.49): the exact hockey-stick divergence of
    the shuffled output, enumerated over every histogram, is below the target delta at the target
    eps = 1; the regime is not trivial (the exact eps at delta lies between 0.2 and 0.3)."""
    eps, delta, n = 1.0, 1e-3, 1500
    kr = protocol("hist_kr", eps, delta, n, d=3, bound="closed_form")
    assert kr.eps_l > 2.4
    d_target, d_03, d_02 = _krr_worst_delta(kr.gamma, n, [eps, 0.3, 0.2])
    assert d_target <= delta
    assert d_03 <= delta < d_02


def test_krr_binary_matches_exact_accountant():
    """d = 2 (binary RR): the exact shuffled eps (accounting.ShuffledBinaryRR, all configurations
    of the others) is below the target at n = 2000, eps_l = 2.88."""
    n, eps, delta = 2000, 1.0, 1e-3
    kr = protocol("hist_kr", eps, delta, n, d=2)
    assert kr.eps_l > 2.8
    exact = max(ShuffledBinaryRR(kr.eps_l, n, k).epsilon(delta) for k in (0, 500, 999))
    assert 0.1 < exact <= eps


# --------------------------------------------------------------------------- utility

def _cases():
    return [
        ("hist_kr", dict(d=20), 1.0, 1e-3, 20000),
        ("hist_mm", dict(d=10), 1.0, 1e-3, 20000),
        ("slh", dict(d=200), 1.0, 1e-3, 5000),
        ("murs", dict(d=20, oracle="grr"), 1.0, 1e-3, 20000),
        ("murs", dict(d=200, oracle="olh", mode="parallel", shufflers=2), 1.0, 1e-3, 8000),
        ("prhr", dict(d=12), 1.0, 1e-3, 20000),
    ]


def _counts(d, n, rng):
    w = np.exp(-0.5 * ((np.arange(d) - d / 2) / (d / 6)) ** 2)
    c = rng.multinomial(n, w / w.sum())
    c[1] += c[0]  # item 0 empty, total still n
    c[0] = 0
    return c


@pytest.mark.parametrize("name,kw,eps,delta,n", _cases(), ids=lambda v: str(v) if isinstance(v, str) else None)
def test_unbiased_and_mse_vs_closed_form(name, kw, eps, delta, n, rng):
    """Exact statistic simulation: mean error ~ 0 (z-test per bin) and the pooled MSE over bins
    matches the closed-form variance (chi-square band)."""
    p = protocol(name, eps, delta, n, **kw)
    c = _counts(p.d, n, rng)
    R = {"slh": 400, "prhr": 1500}.get(name, 400 if "olh" in kw.values() else 3000)
    est = np.array([p.estimate(p.simulate_statistic(c, rng), n).values for _ in range(R)])
    var = np.array([p.variance(n, ci) for ci in c])
    if name == "hist_mm":  # truncation: zero bins are exact, large bins unbiased with Var n p (1-p)
        assert (est[:, 0] == 0).all()
        big = c > n * p.one_minus_p + 8 * math.sqrt(p.variance(n))
        assert big.sum() >= 3
        est, c, var = est[:, big], c[big], var[big]
    z = (est.mean(axis=0) - c) / np.sqrt(var / R)
    assert np.abs(z).max() < mean_z_bound(1e-4 / len(c)) + 0.5
    ratio = ((est - c) ** 2).mean(axis=0) / var
    lo, hi = variance_ratio_band(R * len(c))
    # pooled over bins (independent draws per rep, bins weakly dependent): mean ratio within band
    assert lo - 0.02 <= ratio.mean() <= hi + 0.02, ratio.mean()


def test_pucm_error_matches_exact(rng):
    """PUCM is biased (min over rows, clip at 0): empirical bias and MSE match the exact
    computation, and the Lemma 4.8 bound holds at least 1 - beta of the time."""
    n, d = 20000, 16
    p = protocol("pucm", 4.0, 0.2, n, d=d, beta=0.3, public_seed=5)
    c = _counts(d, n, rng)
    R = 4000
    est = np.array([p.estimate(p.simulate_statistic(c, rng), n).values for _ in range(R)])
    bias, mse = p.exact_error(c)
    err = est - c
    assert np.all(np.abs(err.mean(axis=0) - bias) < 5 * err.std(axis=0) / math.sqrt(R) + 1e-9)
    ratio = (err**2).mean(axis=0) / mse
    assert 0.9 < ratio.mean() < 1.1
    bound = p.error_bound()
    assert (np.abs(err) <= bound).mean() >= 1 - p.beta
    assert p.variance() == pytest.approx(bound**2)


# --------------------------------------------------------------------------- simulation == pipeline

def _compare(a, b):
    """Same law per cell (mean, variance) and of the row sums: Welch / variance z-tests with
    estimated standard errors, Bonferroni over all of them at level 1e-4 (tests/shuffle/_twosample)."""
    assert_same_law(a, b)


@pytest.mark.parametrize("name,kw,eps,delta,n,R", [
    ("hist_kr", dict(d=6), 1.0, 0.05, 600, 2000),
    ("hist_mm", dict(d=5), 2.0, 0.5, 400, 2000),
    ("slh", dict(d=6), 1.0, 0.05, 600, 2000),
    ("murs", dict(d=6, oracle="grr", n_fake=40), 1.0, 0.05, 600, 2000),
    ("murs", dict(d=6, oracle="olh", n_fake=40, mode="parallel", shufflers=2), 1.0, 0.05, 600, 1000),
    ("prhr", dict(d=5), 1.0, 0.1, 256, 600),
    ("pucm", dict(d=5, beta=0.5, public_seed=7, tau=2, s=50), 8.0, 0.2, 200, 2000),
])
def test_simulate_statistic_matches_pipeline(name, kw, eps, delta, n, R, rng):
    p = protocol(name, eps, delta, n, **kw)
    x = rng.integers(0, p.d, n)
    x[: n // 3] = 1
    c = p.summarize(x)
    a = np.array([p.aggregate(run_shufflers(p, p.encode(x, rng), rng)) for _ in range(R)]).reshape(R, -1)
    b = np.array([p.simulate_statistic(c, rng) for _ in range(R)]).reshape(R, -1)
    _compare(a, b)
    # and the end-to-end estimate through pipeline.run / simulate agrees in the mean
    e1 = pipeline.run(p, x, rng)
    assert e1.values.shape == (p.d,) and e1.kind == "count" and e1.privacy == p.privacy(n)


def test_prhr_kernel_law_exact(rng):
    """The kernel of a tuple (the rows it counts for) has the law the joint sampler uses:
    enumeration of every tuple for L = 3, tau = 3 (blanket and real tuples)."""
    L, tau = 3, 3
    vecs = np.arange(1 << L)

    def kernel(tup):
        return frozenset(int(r) for r in range(1, 1 << L) if all(bin(a & r).count("1") % 2 == 0 for a in tup))

    # blanket: tuples uniform over [8]^3
    emp = {}
    for tup in itertools.product(vecs, repeat=tau):
        k = kernel(tup)
        emp[k] = emp.get(k, 0) + 1
    dims = np.zeros(L + 1)
    for k, cnt in emp.items():
        dims[int(math.log2(len(k) + 1))] += cnt
    assert np.allclose(dims / dims.sum(), _gf2_rank_probs(tau, L)[::-1])
    # given its dimension the kernel is uniform: every subspace of a dimension equally frequent
    for dim in range(1, L + 1):
        cnts = [cnt for k, cnt in emp.items() if len(k) + 1 == 2**dim]
        assert len(set(cnts)) == 1
    # sampler for dimension 2 (with and without a fixed vector) hits every subspace uniformly
    b = _span_nonzero(_random_subspaces(2, L, None, 7000, rng))
    subs = {}
    for row in map(frozenset, b.tolist()):
        subs[row] = subs.get(row, 0) + 1
    assert len(subs) == 7 and stats.chisquare(list(subs.values())).pvalue > 1e-4
    b = _span_nonzero(_random_subspaces(2, L, np.full(6000, 5), 6000, rng))
    subs = {}
    for row in map(frozenset, b.tolist()):
        assert 5 in row
        subs[row] = subs.get(row, 0) + 1
    assert len(subs) == 3 and stats.chisquare(list(subs.values())).pvalue > 1e-4
    # real tuples: uniform in H_x (x = 5): kernel dimension law is the chain in L - 1 dims
    Hx = [a for a in vecs if bin(a & 5).count("1") % 2 == 0]
    dims = np.zeros(L)
    for tup in itertools.product(Hx, repeat=tau):
        k = kernel(tup)
        assert 5 in k
        dims[int(math.log2(len(k) + 1)) - 1] += 1
    assert np.allclose(dims / dims.sum(), _gf2_rank_probs(tau, L - 1)[::-1])


def test_prhr_aggregate_matches_bruteforce(rng):
    p = protocol("prhr", 1.0, 0.1, 256, d=70)  # more than 64 rows: two mask words
    msgs = p.encode(rng.integers(0, 70, 256), rng)
    t = msgs["t"][:3000].astype(np.int64)
    rows = np.arange(1, 71)
    par = _parity(t[:, :, None] & rows[None, None, :])
    brute = (par == 0).all(axis=1).sum(axis=0)
    np.testing.assert_array_equal(p.aggregate({"t": msgs["t"][:3000]}), brute)


def test_simulate_fast_at_1e7(rng):
    import time

    n = 10**7
    c = rng.multinomial(n, np.full(D, 1 / D))
    for name, kw in [("hist_kr", {}), ("hist_mm", {}), ("murs", {"oracle": "grr", "n_fake": 10**4}),
                     ("prhr", {}), ("pucm", {"public_seed": 1})]:
        p = protocol(name, EPS, DELTA, n, d=D, **kw)
        t0 = time.perf_counter()
        est = p.estimate(p.simulate_statistic(c, rng), n)
        assert time.perf_counter() - t0 < 2.0
        assert np.isfinite(est.values).all()


def test_murs_fakes_in_pipeline(rng):
    p = protocol("murs", 1.0, 0.05, 3000, d=6, oracle="grr", n_fake=41, shufflers=3, mode="parallel")
    assert p.n_shufflers == 3 and list(p.fakes) == [14, 14, 13]
    x = rng.integers(0, 6, 3000)
    out = run_shufflers(p, p.encode(x, rng), rng)
    assert out["y"].shape[0] == 3000 + 41 and set(np.unique(out["shuffler"])) == {0, 1, 2}
    chain = protocol("murs", 1.0, 0.05, 3000, d=6, oracle="grr", n_fake=41, shufflers=3)
    assert chain.n_shufflers == 1 and chain.eps_l > p.eps_l
    assert run_shufflers(chain, chain.encode(x, rng), rng)["y"].shape[0] == 3041
    # fakes alone already form the blanket: users report the truth, no local DP
    t = protocol("murs", EPS, DELTA, 10**7, d=D)
    assert t.oracle_kind == "none" and t.local_randomizer is None
    assert t.privacy().eps < EPS and t.variance() == pytest.approx(10**5 * 0.01 * 0.99)


def test_mergeable(rng):
    p = protocol("hist_kr", 1.0, 1e-3, 20000, d=20)
    a, b = p.encode(rng.integers(0, 20, 500), rng), p.encode(rng.integers(0, 20, 300), rng)
    both = {"y": np.concatenate([a["y"], b["y"]])}
    np.testing.assert_array_equal(p.aggregate(both), p.aggregate(a) + p.aggregate(b))


# --------------------------------------------------------------------------- bad input / impossible targets

@pytest.mark.parametrize("name,eps,delta,n,kw", [
    ("hist_kr", 1.5, 1e-6, 10**6, dict(d=10, bound="closed_form")),  # Thm 3.1 needs eps <= 1
    ("hist_kr", 0.5, 1e-6, 10**4, dict(d=100, bound="closed_form")),  # gamma >= 1
    ("hist_kr", 0.5, 1e-6, 10**6, dict(d=10, bound="x")),
    ("hist_mm", 3.0, 1e-6, 10**6, dict(d=10)),          # eps/2 > 1
    ("hist_mm", 0.5, 1e-6, 10**4, dict(d=10)),          # n < 400 ln(4/delta)/eps^2
    ("slh", 0.5, 1e-6, 1000, dict(d=10)),               # m < 4
    ("slh", 0.5, 1e-6, 10**6, dict(d=10, variant="v2")),
    ("murs", 0.5, 1e-6, 2000, dict(d=100)),             # too few users
    ("murs", 0.5, 1e-6, 10**6, dict(d=10, mode="ring")),
    ("prhr", 1.5, 1e-6, 10**6, dict(d=10)),
    ("prhr", 0.5, 1e-6, 10**6, dict(d=10, tau=20, rho=1)),  # explicit params miss the target
    ("pucm", 0.5, 1e-6, 10**4, dict(d=10)),             # gamma > 1
    ("hist_kr", 0.5, 0.0, 10**6, dict(d=10)),           # approximate DP needs delta > 0
    ("hist_kr", 0.5, 1e-6, 10**6, dict(d=1)),
])
def test_impossible_targets(name, eps, delta, n, kw):
    with pytest.raises(ValidationError) as e:
        protocol(name, eps, delta, n, **kw)
    assert str(e.value)


def test_impossible_target_messages():
    with pytest.raises(OutOfDomainError, match="n >= "):
        protocol("hist_kr", 0.5, 1e-6, 10**4, d=100, bound="closed_form")
    with pytest.raises(OutOfDomainError, match="cannot supply the blanket"):
        protocol("murs", 0.5, 1e-6, 2000, d=100)


@pytest.mark.parametrize("name", ["hist_kr", "hist_mm", "slh", "murs", "prhr", "pucm"])
@pytest.mark.parametrize("bad", [[0, 10], [-1], [0.5], ["a"], [True], [[1, 2]]])
def test_bad_values(name, bad, rng):
    p = protocol(name, 1.0, 0.05, 20000, d=10, **({"tau": 2, "s": 30} if name == "pucm" else {}))
    with pytest.raises(ValidationError):
        p.encode(np.array(bad), rng)
    with pytest.raises(ValidationError):
        p.simulate_statistic(np.array([1, 2]), rng)


def test_bad_messages():
    p = protocol("hist_kr", 1.0, 0.05, 20000, d=10)
    with pytest.raises(ValidationError):
        p.aggregate({"y": np.array([0, 10])})
    with pytest.raises(ValidationError):
        p.aggregate({"z": np.array([0])})
    pr = protocol("prhr", 1.0, 0.1, 256, d=5)
    with pytest.raises(ValidationError):
        pr.aggregate({"t": np.zeros((3, pr.tau + 1), dtype=np.int64)})
    with pytest.raises(ValidationError):
        pr.aggregate({"t": np.full((3, pr.tau), 16, dtype=np.int64)})
