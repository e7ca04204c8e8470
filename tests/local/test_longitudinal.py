"""Longitudinal oracles (L-GRR, L-OUE, LOLOHA, dBitFlip, 1BitMean): exact privacy of one report and
of the memoized permanent answer, the client path's law, unbiasedness and variance, memo reuse,
bad input."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from shuffledp.core.errors import ValidationError
from shuffledp.core.privacy import format_up
from shuffledp.local import frequency_oracle
from shuffledp.local.longitudinal import (
    LOLOHA,
    DBitFlip,
    LongitudinalGRR,
    LongitudinalOUE,
    Memo,
    OneBitMean,
    irr_epsilon,
    optimal_g,
    transcript_epsilon,
)
from shuffledp.local.verify import worst_case_log_ratio

EXACT_TOL = 1e-9


def _all_bit_rows(n_bits):
    rows = np.array(list(itertools.product([0, 1], repeat=n_bits)), dtype=np.uint8)
    return np.packbits(rows, axis=1, bitorder="little")


def _log_ratio(probs):
    """max over outputs and input pairs of ln P[y|x] - ln P[y|x'] for a (inputs, outputs) table."""
    probs = np.asarray(probs, dtype=np.float64)
    assert np.all(probs > 0)
    return float(np.max(np.log(probs.max(axis=0)) - np.log(probs.min(axis=0))))


# ----------------------------------------------------------------------------- published test vectors

def test_l_grr_l_oue_loloha_match_the_published_parameters():
    """Spec/test vectors at eps_perm = 2, eps_1 = 1 (Arcolezi et al.'s code expressions)."""
    assert irr_epsilon(2.0, 1.0) == pytest.approx(1.407606, abs=1e-6)
    m = LongitudinalGRR(2.0, 4, epsilon_one=1.0)
    assert (m.p1, m.q1, m.p2, m.q2) == pytest.approx((0.711235, 0.096255, 0.576640, 0.141120), abs=1e-6)
    assert m.sigma0 * (1 - m.sigma0) / (m.sigma1 - m.sigma0) ** 2 == pytest.approx(2.084551, abs=1e-5)
    o = LongitudinalOUE(2.0, 4, epsilon_one=1.0)
    assert (o.p1, o.q1, o.p2, o.q2) == pytest.approx((0.5, 0.119203, 0.5, 0.080937), abs=1e-6)
    assert o.sigma0 * (1 - o.sigma0) / (o.sigma1 - o.sigma0) ** 2 == pytest.approx(4.467197, abs=1e-5)
    b = LOLOHA(2.0, 8, epsilon_one=1.0, g=2)
    assert (b.p1, b.p2, b.q2) == pytest.approx((0.880797, 0.803388, 0.196612), abs=1e-6)
    t = LOLOHA(2.0, 8, epsilon_one=1.0, g=3)
    assert (t.p1, t.p2, t.q2) == pytest.approx((0.786986, 0.671386, 0.164307), abs=1e-6)
    for (e, a), g_star in {(2, .4): 2.489, (3, .6): 5.184, (4, .4): 5.097, (5, .6): 16.746}.items():
        assert optimal_g(e, a * e) == pytest.approx(g_star, abs=1e-3)
    assert LOLOHA(5.0, 64, epsilon_one=3.0).g == 17 and LOLOHA(1.0, 64, epsilon_one=0.5).g == 2


@pytest.mark.parametrize("k,expected", [(3, 0.948), (10, 0.699)])
def test_l_grr_one_report_loss_is_below_eps_1_for_k_above_2(k, expected):
    """The papers' IRR makes one report exactly eps_1 only for k = 2; the statement carries the exact loss."""
    assert LongitudinalGRR(2.0, 2, 1.0).epsilon_one == pytest.approx(1.0, abs=1e-9)
    assert LongitudinalGRR(2.0, k, 1.0).epsilon_one == pytest.approx(expected, abs=1e-3)


# ----------------------------------------------------------------------------- exact privacy: one report

@pytest.mark.parametrize("eps,eps1,d", [(2.0, 1.0, 2), (2.0, 1.0, 5), (0.5, 0.1, 4), (6.0, 5.5, 3)])
def test_l_grr_one_report_and_permanent_exact(eps, eps1, d):
    m = LongitudinalGRR(eps, d, eps1)
    ys = {"y": np.arange(d)}
    one = np.stack([m.probabilities(ys, x) for x in range(d)])
    np.testing.assert_allclose(one.sum(axis=1), 1.0, rtol=1e-12)
    assert _log_ratio(one) <= m.epsilon_one + EXACT_TOL and m.epsilon_one <= eps1
    assert _log_ratio(one) >= m.epsilon_one - 1e-9  # the stated eps_1 is the exact loss
    # exact rational check of the sampled probabilities
    c = m.chain
    assert c.sigma1 / c.sigma0 <= Fraction(math.exp(eps1)) and c.p1 / c.q1 <= Fraction(math.exp(eps))
    perm = np.stack([m.permanent_probabilities(np.arange(d), x) for x in range(d)])
    np.testing.assert_allclose(perm.sum(axis=1), 1.0, rtol=1e-12)
    assert m.epsilon_perm - 1e-9 <= _log_ratio(perm) <= m.epsilon_perm + EXACT_TOL and m.epsilon_perm <= eps
    assert m.privacy().eps == m.epsilon_perm and f"eps_1={format_up(m.epsilon_one, 9)}" in m.privacy().note


@pytest.mark.parametrize("eps,eps1,d", [(2.0, 1.0, 4), (1.0, 0.3, 5), (4.0, 3.0, 3)])
def test_l_oue_one_report_and_permanent_exact(eps, eps1, d):
    m = LongitudinalOUE(eps, d, eps1)
    outs = {"bits": _all_bit_rows(d)}
    one = np.stack([m.probabilities(outs, x) for x in range(d)])
    np.testing.assert_allclose(one.sum(axis=1), 1.0, rtol=1e-12)
    assert eps1 - 1e-6 <= _log_ratio(one) <= m.epsilon_one + EXACT_TOL and m.epsilon_one <= eps1
    perm = np.stack([m.permanent_probabilities(outs["bits"], x) for x in range(d)])
    np.testing.assert_allclose(perm.sum(axis=1), 1.0, rtol=1e-12)
    assert eps - 1e-6 <= _log_ratio(perm) <= m.epsilon_perm + EXACT_TOL and m.epsilon_perm <= eps


@pytest.mark.parametrize("g", [2, 3, 4])
def test_loloha_one_report_and_permanent_exact_over_every_seed(g):
    eps, eps1, d = 2.0, 0.8, 5
    m = LOLOHA(eps, d, eps1, g=g)
    assert m.prime == 5 and m.n_seeds == 20
    seeds, ys = np.meshgrid(np.arange(m.n_seeds), np.arange(g), indexing="ij")
    outs = {"seed": seeds.ravel().astype(np.uint64), "y": ys.ravel()}
    one = np.stack([m.probabilities(outs, x) for x in range(d)])
    np.testing.assert_allclose(one.sum(axis=1), 1.0, rtol=1e-12)
    assert _log_ratio(one) <= m.epsilon_one + EXACT_TOL and m.epsilon_one <= eps1
    if g == 2:
        assert m.epsilon_one == pytest.approx(eps1, abs=1e-9)
    else:  # below eps_1 for g > 2 (0.750 at g = 3 in the reference analysis)
        assert m.epsilon_one < eps1 - 0.01
    if g == 3:
        assert m.epsilon_one == pytest.approx(0.750, abs=1e-3)
    # permanent: for every seed, every memoized answer B in [g], ratio over x at most e^eps_perm
    worst = 0.0
    for s in range(m.n_seeds):
        setup = np.full(g, s)
        perm = np.stack([m.permanent_probabilities(np.arange(g), x, setup) for x in range(d)])
        np.testing.assert_allclose(perm.sum(axis=1), 1.0, rtol=1e-12)
        worst = max(worst, _log_ratio(perm))
    assert eps - 1e-9 <= worst <= m.epsilon_perm + EXACT_TOL


@pytest.mark.parametrize("bits", [1, 2, 4])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_dbitflip_exact_over_every_report(bits, eps):
    k = 4
    m = DBitFlip(eps, 8, buckets=k, bits=bits)
    subsets = np.array(list(itertools.combinations(range(k), bits)))
    patterns = np.array(list(itertools.product([0, 1], repeat=bits)), dtype=np.uint8)
    j = np.repeat(subsets, len(patterns), axis=0)
    b = np.tile(patterns, (len(subsets), 1))
    one = np.stack([m.probabilities({"j": j, "b": b}, x) for x in range(8)])
    np.testing.assert_allclose(one.sum(axis=1), 1.0, rtol=1e-12)
    worst = _log_ratio(one)
    assert eps - 1e-9 <= worst <= m.effective_epsilon + EXACT_TOL and m.effective_epsilon <= eps
    perm = np.stack([m.permanent_probabilities(b, x, j) for x in range(8)])
    assert _log_ratio(perm) <= m.epsilon_perm + EXACT_TOL
    # bucketization: values in one bucket have identical laws
    np.testing.assert_array_equal(one[0], one[1])
    assert m.privacy().eps == m.effective_epsilon and m.epsilon_one == m.epsilon_perm


@pytest.mark.parametrize("eps,levels,gamma", [(1.0, 16, 0.0), (0.3, 5, 0.0), (2.0, 8, 0.1), (4.0, 1, 0.25)])
def test_one_bit_mean_exact(eps, levels, gamma):
    m = OneBitMean(eps, levels=levels, gamma=gamma)
    xs = [-1.0, -0.731, -0.2, 0.0, 1 / 3, 0.5, 0.999, 1.0]
    outs = {"b": np.array([0, 1], dtype=np.uint8)}
    assert worst_case_log_ratio(m, outs, xs) <= m.epsilon_one + EXACT_TOL
    assert m.epsilon_one <= m.effective_epsilon <= eps
    # the extreme inputs attain the stated loss
    assert worst_case_log_ratio(m, outs, [-1.0, 1.0]) == pytest.approx(m.epsilon_one, abs=1e-9)
    if gamma == 0:
        assert m.effective_epsilon == pytest.approx(eps, rel=1e-9)
    else:  # output perturbation: eps_1 = ln[(gamma + (1-2gamma)(1-pi0)) / (gamma + (1-2gamma) pi0)] < eps
        pi0 = m.pi0
        want = math.log((gamma + (1 - 2 * gamma) * (1 - pi0)) / (gamma + (1 - 2 * gamma) * pi0))
        assert m.epsilon_one == pytest.approx(want, rel=1e-12) and m.epsilon_one < m.effective_epsilon
    # exact: pi_j on the 2^-53 grid and (1 - pi_0) / pi_0 <= e^eps in rational arithmetic
    pi = np.array([Fraction(float(v)) for v in m.pi])
    assert all((v * 2**53).denominator == 1 for v in pi)
    assert (1 - pi[0]) / pi[0] <= Fraction(math.exp(eps)) and pi[-1] == 1 - pi[0]
    # permanent layer: memoized bit of every level, any alpha
    alphas = np.array([0, 1, 2**52, 2**53 - 1])
    perm = np.stack([m.permanent_probabilities(np.array([0, 1, 0, 1, 0, 1, 0, 1]), x, np.repeat(alphas, 2))
                     for x in xs])
    assert _log_ratio(perm) <= m.epsilon_perm + EXACT_TOL


# ----------------------------------------------------------------------------- the client path's law

def _binomial_ok(count, n, p, z=6.0):
    return abs(count - n * p) <= z * math.sqrt(n * p * (1 - p)) + 1


def test_client_path_draws_the_stated_laws():
    """Reports (fresh users) and memoized answers follow probabilities / permanent_probabilities."""
    rng = np.random.default_rng(3)
    N = 60_000
    m = LongitudinalGRR(2.0, 5, 0.7)
    y = m.randomize(np.full(N, 2), rng)["y"]
    for v in range(5):
        assert _binomial_ok(int(np.sum(y == v)), N, m.sigma1 if v == 2 else m.sigma0)
    o = LongitudinalOUE(1.5, 6, 0.6)
    bits = np.unpackbits(o.randomize(np.full(N, 4), rng)["bits"], axis=1, count=6, bitorder="little")
    for v in range(6):
        assert _binomial_ok(int(bits[:, v].sum()), N, o.sigma1 if v == 4 else o.sigma0)
    perm = np.unpackbits(o.permanent(np.full(N, 4), np.zeros((N, 0)), rng), axis=1, count=6, bitorder="little")
    assert _binomial_ok(int(perm[:, 4].sum()), N, 0.5) and _binomial_ok(int(perm[:, 0].sum()), N, o.q1)
    lo = LOLOHA(2.0, 7, 1.0, g=3)
    r = lo.randomize(np.full(N, 6), rng)
    hit = r["y"] == lo.hash(r["seed"].astype(np.int64), 6)
    assert _binomial_ok(int(hit.sum()), N, lo.sigma1)
    other = r["y"] == lo.hash(r["seed"].astype(np.int64), 1)  # support of another item: q*
    assert _binomial_ok(int(other.sum()), N, lo.q_star)
    db = DBitFlip(1.0, 6, bits=2)
    r = db.randomize(np.full(N, 3), rng)
    sampled = r["j"] == 3
    assert _binomial_ok(int(sampled.any(axis=1).sum()), N, 2 / 6)
    assert _binomial_ok(int(r["b"][sampled].sum()), int(sampled.sum()), db.p)
    assert _binomial_ok(int(r["b"][~sampled].sum()), int((~sampled).sum()), db.q)
    ob = OneBitMean(1.0, levels=4, gamma=0.05)
    x = 0.3  # u = 0.65, u K = 2.6: level 3 w.p. 0.6, level 2 w.p. 0.4
    keys = ob.memo_keys(np.full(N, x), ob.setup(N, rng))
    assert set(np.unique(keys)) == {2, 3} and _binomial_ok(int((keys == 3).sum()), N, 0.6)
    b = ob.randomize(np.full(N, x), rng)["b"]
    assert _binomial_ok(int(b.sum()), N, float(ob.probabilities({"b": np.array([1])}, x)[0]))


# ----------------------------------------------------------------------------- unbiasedness and variance

def _chi2_band(R, alpha=1e-6):
    return stats.chi2.ppf(alpha, R - 1) / (R - 1), stats.chi2.isf(alpha, R - 1) / (R - 1)


FREQ_CASES = [
    ("l_grr", dict(epsilon_one=0.8)),
    ("l_oue", dict(epsilon_one=1.0)),
    ("loloha", dict(epsilon_one=1.0, g=3)),
    ("loloha", dict(epsilon_one=0.5, g=2)),
    ("dbitflip", dict(bits=2)),
]


@pytest.mark.parametrize("name,params", FREQ_CASES)
def test_frequency_unbiased_and_variance_matches_closed_form(name, params):
    """R independent collections of n users: mean of the estimates within 5 standard errors of the
    truth, and the empirical variance within the chi-square band (alpha = 1e-6) of the closed form."""
    d, n, R = 6, 2000, 1000
    m = frequency_oracle(name, 2.0, d, **params)
    truth = np.array([0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    x = np.repeat(np.arange(d), (truth * n).astype(int))
    rng = np.random.default_rng(17)
    est = np.empty((R, d))
    for r in range(R):  # one collection per repetition (vectorized over the n users)
        est[r] = m.estimate(m.aggregate(m.randomize(x, rng)), n).values
    var = np.array([m.variance(n, f) for f in truth])
    z = (est.mean(axis=0) - truth) / np.sqrt(var / R)
    assert np.all(np.abs(z) < 5), z
    lo, hi = _chi2_band(R)
    ratio = est.var(axis=0, ddof=1) / var
    assert np.all((lo < ratio) & (ratio < hi)), (ratio, lo, hi)


def test_one_bit_mean_unbiased_and_variance_matches_closed_form():
    n, R = 2000, 1000
    rng = np.random.default_rng(19)
    for x, gamma in ((0.3, 0.0), (-0.77, 0.1)):  # off the rounding grid: alpha-rounding is random
        m = OneBitMean(1.0, levels=8, gamma=gamma)
        est = np.array([m.estimate(m.aggregate(m.randomize(np.full(n, x), rng)), n).values[0] for _ in range(R)])
        var = m.variance(n, x)
        assert abs(est.mean() - x) < 5 * math.sqrt(var / R)
        lo, hi = _chi2_band(R)
        assert lo < est.var(ddof=1) / var < hi


def test_memoized_rounds_are_unbiased_each_round():
    """Users keep their memo across rounds while values change: every round's estimate is unbiased
    (a reused permanent answer has the same law as a fresh one)."""
    d, n, R = 4, 1500, 120
    m = LongitudinalGRR(2.0, d, 1.0)
    rng = np.random.default_rng(23)
    truth2 = np.array([0.1, 0.2, 0.3, 0.4])
    est = np.empty((R, d))
    users = np.arange(n)
    x1 = np.repeat(np.arange(d), n // d)
    x2 = np.repeat(np.arange(d), (truth2 * n).astype(int))
    for r in range(R):
        memo = Memo()
        m.randomize(x1, rng, users=users, memo=memo)  # round 1 fills the memo
        est[r] = m.estimate(m.aggregate(m.randomize(x2, rng, users=users, memo=memo)), n).values
        assert memo.entries() == n + int(np.sum(x1 != x2))
    var = np.array([m.variance(n, f) for f in truth2])
    assert np.all(np.abs(est.mean(axis=0) - truth2) < 5 * np.sqrt(var / R))


# ----------------------------------------------------------------------------- memoization

ALL = [lambda: LongitudinalGRR(2.0, 6, 1.0), lambda: LongitudinalOUE(2.0, 20, 1.0),
       lambda: LOLOHA(2.0, 6, 1.0, g=3), lambda: DBitFlip(1.0, 6, bits=2), lambda: OneBitMean(1.0, levels=4)]


def _values(m, n, rng):
    return rng.uniform(-1, 1, n) if isinstance(m, OneBitMean) else rng.integers(0, m.d, n)


@pytest.mark.parametrize("make", ALL)
def test_memo_reuses_the_permanent_answer(make):
    m = make()
    rng = np.random.default_rng(5)
    users = np.arange(50)
    x = _values(m, 50, rng)
    memo = Memo()
    m.randomize(x, rng, users=users, memo=memo)
    setup = memo.setup(users, lambda k: pytest.fail("setup redrawn"))
    keys = m.memo_keys(m.check_values(x), setup)
    first = memo.answers(users, keys, lambda rows: pytest.fail("answer redrawn")).copy()
    for _ in range(3):  # later rounds with the same values: no new setup, no new answer
        m.randomize(x, rng, users=users, memo=memo)
        np.testing.assert_array_equal(memo.setup(users, lambda k: pytest.fail("setup redrawn")), setup)
        np.testing.assert_array_equal(memo.answers(users, keys, lambda rows: pytest.fail("redrawn")), first)
    assert memo.entries() == np.unique(np.stack([users, keys]), axis=1).shape[1]
    # the mechanism's own memo is used when none is given, and is separate
    m.randomize(x, rng, users=users)
    assert m.memo.entries() == memo.entries()
    m.reset_memo()
    assert m.memo.entries() == 0


def test_memoized_reports_without_fresh_randomness_repeat_exactly():
    """dBitFlip and 1BitMean (gamma = 0) re-send the memoized response: identical reports."""
    rng = np.random.default_rng(6)
    users = np.arange(200)
    for m in (DBitFlip(1.0, 8, bits=3), OneBitMean(1.0, levels=4)):
        x = _values(m, 200, rng)
        a = m.randomize(x, rng, users=users)
        b = m.randomize(x, rng, users=users)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_memo_answers_are_independent_across_users_and_fresh_without_users():
    m = LongitudinalGRR(1.0, 8, 0.5)
    rng = np.random.default_rng(8)
    memo = Memo()
    n = 4000
    m.randomize(np.zeros(n, dtype=np.int64), rng, users=np.arange(n), memo=memo)
    ans = memo.answers(np.arange(n), np.zeros(n, dtype=np.int64), lambda r: pytest.fail("redrawn"))[:, 0]
    assert _binomial_ok(int(np.sum(ans == 0)), n, m.p1)


def test_memo_refuses_another_layout_and_memo_without_users():
    rng = np.random.default_rng(9)
    memo = Memo()
    LongitudinalGRR(1.0, 4, 0.5).randomize(np.array([1]), rng, users=np.array([0]), memo=memo)
    with pytest.raises(ValidationError) as e:
        LongitudinalOUE(1.0, 4, 0.5).randomize(np.array([1]), rng, users=np.array([0]), memo=memo)
    assert e.value.parameter == "memo"
    with pytest.raises(ValidationError) as e:
        LongitudinalGRR(1.0, 4, 0.5).randomize(np.array([1]), rng, memo=Memo())
    assert e.value.parameter == "memo"
    with pytest.raises(ValidationError) as e:
        LongitudinalGRR(1.0, 4, 0.5).randomize(np.array([1]), rng, users=np.array([0]), memo={})
    assert e.value.parameter == "memo"


@pytest.mark.parametrize("eps,eps1,d", [(2.0, 1.0, 2), (2.0, 1.0, 5), (3.0, 0.2, 4), (4.0, 1.0, 3), (1.0, 0.3, 2)])
def test_r_reports_of_one_value_are_within_key_epsilon_exactly(eps, eps1, d):
    """The joint law of r reports sharing one permanent answer, over every output sequence: its loss
    is at most key_epsilon(r) = min(eps_perm, r eps_irr) (eps_1 for r = 1) and at most eps_perm."""
    m = LongitudinalGRR(eps, d, eps1)
    P1 = np.full((d, d), m.q1)
    np.fill_diagonal(P1, m.p1)   # P(B | x)
    P2 = np.full((d, d), m.q2)
    np.fill_diagonal(P2, m.p2)   # P(y | B)
    for r in (1, 2, 3, 4):
        seqs = np.array(list(itertools.product(range(d), repeat=r)))
        joint = P1 @ np.prod(P2[:, seqs], axis=2)   # (x, sequence)
        assert joint.sum(axis=1) == pytest.approx(np.ones(d))
        loss = _log_ratio(joint)
        assert loss <= m.transcript_epsilon([r]) + EXACT_TOL <= m.epsilon_perm + 2 * EXACT_TOL
        if (eps, eps1, d) == (3.0, 0.2, 4) and r == 2:
            assert loss > 2 * m.epsilon_one + 1e-3   # r eps_1 would understate the loss (0.3709 > 0.3687)


def test_one_bit_mean_r_reports_with_output_perturbation_within_key_epsilon():
    m = OneBitMean(2.0, levels=4, gamma=0.15)
    xs = [-1.0, -0.3, 0.0, 0.55, 1.0]
    pb = np.array([float(m.probabilities({"b": np.array([1])}, x)[0]) for x in xs])  # marginal P[b=1]
    g = m.gamma
    pB = (pb - g) / (1 - 2 * g)   # P[B = 1 | x] of the memoized bit (alpha marginalized)
    for r in (1, 2, 3, 6):
        ones = np.arange(r + 1)   # a sequence's law depends on its number of ones only
        f1 = (1 - g) ** ones * g ** (r - ones)
        f0 = g ** ones * (1 - g) ** (r - ones)
        joint = pB[:, None] * f1[None, :] + (1 - pB[:, None]) * f0[None, :]
        assert _log_ratio(joint) <= m.transcript_epsilon([r]) + EXACT_TOL


def test_longitudinal_budget_accounting():
    m = LOLOHA(2.0, 100, 1.0, g=3)
    assert m.longitudinal_epsilon(1) == m.epsilon_perm
    assert m.longitudinal_epsilon(50) == 3 * m.epsilon_perm  # at most g hashed values
    assert LongitudinalGRR(2.0, 5, 1.0).longitudinal_epsilon(9) == pytest.approx(5 * 2.0)
    assert transcript_epsilon([1, 10, 0], 2.0, 0.5) == pytest.approx(0.5 + 2.0)
    assert transcript_epsilon([1, 3, 100], 2.0, 0.5, 0.6) == pytest.approx(0.5 + 1.8 + 2.0)
    g = LongitudinalGRR(2.0, 16, 0.5)
    assert g.transcript_epsilon([1]) == pytest.approx(g.epsilon_one)
    assert g.transcript_epsilon([2]) == pytest.approx(min(g.epsilon_perm, 2 * g.epsilon_irr))
    assert LongitudinalOUE(2.0, 8, 1.0).transcript_epsilon([2]) == pytest.approx(2.0)  # bit vector: eps_perm
    assert DBitFlip(1.0, 10, bits=1).longitudinal_epsilon(7) == pytest.approx(2 * 1.0)
    with pytest.raises(ValidationError):
        transcript_epsilon([-1], 2.0, 0.5)


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("build,param", [
    (lambda: LongitudinalGRR(1.0, 4, epsilon_one=1.0), "epsilon_one"),
    (lambda: LongitudinalGRR(1.0, 4, epsilon_one=2.0), "epsilon_one"),
    (lambda: LongitudinalOUE(1.0, 4, epsilon_one=0.0), "epsilon_one"),
    (lambda: LongitudinalOUE(float("nan"), 4), "epsilon"),
    (lambda: LongitudinalOUE(4.0, 4, epsilon_one=3.9), "epsilon_one"),  # beyond the chain's reach with p2 = 1/2
    (lambda: LOLOHA(1.0, 4, g=1), "g"),
    (lambda: LOLOHA(1.0, 1), "d"),
    (lambda: LOLOHA(31.0, 4), "epsilon"),
    (lambda: DBitFlip(1.0, 4, buckets=5), "buckets"),
    (lambda: DBitFlip(1.0, 4, buckets=1), "buckets"),
    (lambda: DBitFlip(1.0, 4, bits=5), "bits"),
    (lambda: DBitFlip(1.0, 4, bits=0), "bits"),
    (lambda: OneBitMean(1.0, levels=0), "levels"),
    (lambda: OneBitMean(1.0, gamma=0.5), "gamma"),
    (lambda: OneBitMean(1.0, gamma=-0.1), "gamma"),
    (lambda: OneBitMean(1.0, dim=2), "dim"),
    (lambda: OneBitMean(0.0), "epsilon"),
])
def test_bad_parameters_name_the_parameter(build, param):
    with pytest.raises(ValidationError) as e:
        build()
    assert e.value.parameter == param, str(e.value)


@pytest.mark.parametrize("make", ALL)
def test_bad_values_and_users_are_refused(make):
    m = make()
    rng = np.random.default_rng(0)
    bad = [np.array([1.5]), np.array([np.nan])] if isinstance(m, OneBitMean) else [np.array([m.d]), np.array([-1]),
                                                                                     np.array([0.5])]
    for b in bad:
        with pytest.raises(ValidationError):
            m.randomize(b, rng)
    x = _values(m, 3, rng)
    for users in (np.array([0, 1]), np.array([0, -1, 2]), np.array([0.5, 1, 2])):
        with pytest.raises(ValidationError) as e:
            m.randomize(x, rng, users=users)
        assert e.value.parameter == "users"
    assert m.memo.entries() == 0  # nothing memoized by a refused call


def test_bad_reports_and_statistics_are_refused():
    m = DBitFlip(1.0, 6, bits=2)
    with pytest.raises(ValidationError):
        m.validate_reports({"j": np.array([[1, 1]]), "b": np.array([[0, 1]], dtype=np.uint8)})  # repeated bucket
    with pytest.raises(ValidationError):
        m.validate_reports({"j": np.array([[0, 1]]), "b": np.array([[0, 2]], dtype=np.uint8)})
    stat = m.aggregate(m.randomize(np.arange(6), 0))
    bad = stat.copy()
    bad[0, 0] = bad[1, 0] + 1
    with pytest.raises(ValidationError) as e:
        m.estimate(bad, 6)
    assert e.value.parameter == "statistic"
    o = OneBitMean(1.0)
    with pytest.raises(ValidationError) as e:
        o.estimate(np.array([11]), 10)
    assert e.value.parameter == "statistic"
    with pytest.raises(ValidationError):
        o.validate_reports({"b": np.array([0, 2])})


# ----------------------------------------------------------------------------- properties (hypothesis)

_PROP = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_MECHS = [LongitudinalGRR(1.5, 5, 0.7), LongitudinalOUE(1.5, 9, 0.7), LOLOHA(1.5, 5, 0.7, g=3),
          DBitFlip(1.5, 5, bits=2), OneBitMean(1.5, levels=3, gamma=0.05)]


@pytest.mark.parametrize("i", range(len(_MECHS)))
@_PROP
@given(rounds=st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4)), min_size=1, max_size=12),
                       min_size=1, max_size=4),
       seed=st.integers(0, 2**32 - 1))
def test_memoized_rounds_property(i, rounds, seed):
    """Any sequence of rounds of (user, value) reports: every report validates and is possible under
    its value; a (user, memo key) pair keeps one permanent answer; the memo has one entry per pair."""
    m = _MECHS[i]
    rng = np.random.default_rng(seed)
    memo = Memo()
    seen: dict[tuple[int, int], bytes] = {}
    for batch in rounds:
        users = np.array([u for u, _ in batch], dtype=np.int64)
        raw = np.array([v for _, v in batch])
        x = (raw / 2.0 - 1.0) if isinstance(m, OneBitMean) else raw
        reports = m.randomize(x, rng, users=users, memo=memo)
        m.validate_reports(reports)
        for row, v in enumerate(x):
            one = {k: a[row:row + 1] for k, a in reports.items()}
            assert float(m.probabilities(one, v)[0]) > 0
        setup = memo.setup(users, lambda k: pytest.fail("setup redrawn"))
        keys = m.memo_keys(m.check_values(x), setup)
        assert np.all((keys >= 0) & (keys < m.key_space))
        answers = memo.answers(users, keys, lambda rows: pytest.fail("redrawn"))
        for u, k, a in zip(users.tolist(), keys.tolist(), answers):
            assert seen.setdefault((u, k), a.tobytes()) == a.tobytes()
    assert memo.entries() == len(seen)


@_PROP
@given(x=st.floats(-1.0, 1.0), a=st.integers(0, 2**53 - 1))
def test_alpha_rounding_goes_to_a_neighbouring_level(x, a):
    m = OneBitMean(1.0, levels=7)
    j = int(m.memo_keys(np.array([x]), np.array([[a]]))[0])
    u = (x + 1) / 2 * 7
    assert math.floor(u) <= j <= min(7, math.floor(u) + 1)
    if float(u).is_integer():
        assert j == int(u)


@pytest.mark.parametrize("buckets,bits", [(16, 3), (5, 3), (6, 6)])
def test_dbitflip_setup_is_a_uniform_subset(buckets, bits):
    """Both samplers (rejection for bits^2 <= buckets, sorted keys otherwise) give every subset
    probability 1 / binom(buckets, bits): chi-square goodness of fit at alpha = 1e-6."""
    m = DBitFlip(1.0, buckets, bits=bits)
    n = 60_000
    j = m.setup(n, np.random.default_rng(41))
    assert j.shape == (n, bits) and np.all(np.diff(j, axis=1) > 0) and j.min() >= 0 and j.max() < buckets
    code = (j * buckets ** np.arange(bits)).sum(axis=1)
    _, counts = np.unique(code, return_counts=True)
    cells = math.comb(buckets, bits)
    assert counts.size == cells
    if cells > 1:
        chi2 = ((counts - n / cells) ** 2 / (n / cells)).sum()
        assert chi2 < stats.chi2.isf(1e-6, cells - 1)
