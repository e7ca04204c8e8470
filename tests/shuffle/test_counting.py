"""Shuffle-model counting protocols: privacy (local ratio, accounting, exact enumeration), spec
worked examples, unbiasedness and variance, simulate == pipeline in law, bad input."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from shuffledp import pipeline
from shuffledp.accounting import shuffle_statement, shuffled_binary_rr_epsilon
from shuffledp.core.errors import OutOfDomainError, ValidationError
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from shuffledp.shuffle import protocol
from shuffledp.shuffle.counting import Cnt2M, CntBN, CntRR, CntSGM, cheu_corollary47_epsilon
from tests.conftest import mean_z_bound, variance_ratio_band

N6, EPS, DELTA = 10**6, 0.9, 1e-6


# ----------------------------------------------------------------------------- spec worked examples

def test_cnt_rr_worked_example_lemma48():
    p = protocol("cnt_rr", epsilon=EPS, delta=DELTA, n=N6, calibration="lemma4.8")
    assert p.lam == pytest.approx(1201.1303, abs=1e-4)
    assert p.flip == pytest.approx(1.20113e-3, rel=1e-5)
    assert p.eps_l == pytest.approx(7.4170, abs=1e-4)
    assert p.variance() == pytest.approx(601.649, abs=1e-3)
    assert math.sqrt(p.variance()) == pytest.approx(24.53, abs=5e-3)
    # Cor. 4.7 at the Lemma 4.8 lambda: the lemma is conservative
    assert p.paper_epsilon() == pytest.approx(0.69178, abs=1e-5)


def test_cnt_rr_worked_example_corollary47():
    p = protocol("cnt_rr", epsilon=EPS, delta=DELTA, n=N6, calibration="corollary4.7")
    assert p.lam == pytest.approx(747.08, abs=0.01)
    assert p.variance() == pytest.approx(373.96, abs=0.01)
    assert cheu_corollary47_epsilon(p.lam, N6, DELTA) <= EPS
    assert p.eps_l == pytest.approx(7.892, abs=1e-3)


def test_cnt_2m_worked_example():
    p = protocol("cnt_2m", epsilon=EPS, delta=DELTA, n=N6)
    assert 1 - p.p == pytest.approx(8.9560e-4, rel=1e-4)
    assert p.variance() == pytest.approx(894.79, abs=0.01)
    assert p.messages_per_user == pytest.approx(1.4991, abs=1e-4)
    assert p.expected_messages_per_user(0.9) == pytest.approx(0.9 + p.p)


def test_cnt_bn_worked_example():
    p = protocol("cnt_bn", epsilon=EPS, delta=DELTA, n=N6, gamma=0.5)
    assert 1 - p.p == pytest.approx(1.7912e-3, rel=1e-4)
    assert p.variance() == pytest.approx(1788.0, abs=0.1)
    st = p.privacy()
    assert (st.eps, st.delta, st.gamma) == (EPS, DELTA, 0.5)


def test_cnt_sgm_worked_example():
    p = protocol("cnt_sgm", epsilon=EPS, delta=DELTA, n=N6, gamma=0.5)
    assert p.alpha == pytest.approx(0.40657, abs=1e-5)
    assert p.shape == pytest.approx(2e-6)
    assert p.variance() == pytest.approx(4.618, abs=1e-3)
    st = p.privacy()
    assert st.eps == EPS and 0 < st.delta <= DELTA and st.gamma == 0.5
    assert not st.pure  # split-and-mix adds a statistical delta
    assert p.modulus > 2 * N6  # the signed sum never wraps in practice


# ----------------------------------------------------------------------------- privacy

def test_cnt_rr_local_ratio_exact(rng):
    for kw in ({}, {"calibration": "corollary4.7"}, {"calibration": "clones"}):
        p = protocol("cnt_rr", epsilon=EPS, delta=DELTA, n=N6, **kw)
        mech = p.local_randomizer
        reports = sweep_reports(mech, [0, 1], 2000, rng)
        assert set(np.unique(reports["y"])) == {0, 1}
        ratio = worst_case_log_ratio(mech, reports, [0, 1])
        # eps_l is the exact eps of the sampled flip, rounded up (by 2^-48 relative)
        assert ratio <= p.eps_l and ratio == pytest.approx(p.eps_l, rel=1e-12)
        assert ratio == pytest.approx(math.log(2 * N6 / p.lam - 1), rel=1e-12)
        flip = Fraction(p.flip)  # sampled exactly by rng.random() < flip: on the 2^-53 grid
        assert flip.denominator <= 2**53 and Fraction(p.eps_l) >= Fraction(math.log((2 - flip) / flip))


@pytest.mark.parametrize("acc", ["clones", "cheu2019"])
def test_cnt_rr_privacy_equals_accounting(acc):
    for kw in ({}, {"calibration": "corollary4.7"}, {"calibration": "clones"}):
        p = CntRR(EPS, DELTA, N6, accounting=acc, **kw)
        opts = {"randomizer": "binary_rr"} if acc == "clones" else {}
        st = p.privacy()
        try:
            ref = shuffle_statement(p.eps_l, N6, DELTA, acc, **opts)
        except OutOfDomainError:  # Cheu's closed form cannot certify the clones calibration
            assert kw == {"calibration": "clones"} and (st.eps, st.delta) == (p.eps_l, 0.0)
            continue
        assert (st.eps, st.delta, st.model) == (ref.eps, ref.delta, "shuffle")
        assert st.eps <= EPS * (1 + 1e-9)


def _exact_rr_delta_enumerated(flip: float, n: int, others_ones: int, eps: float) -> float:
    """Exact delta(eps) of the shuffled output of n binary-RR reports by enumerating every report
    vector (2^n of them): user 0 holds 1 vs 0, the others hold fixed bits."""
    keep = 1 - flip / 2
    others = np.array([1] * others_ones + [0] * (n - 1 - others_ones))
    out = {0: np.zeros(n + 1), 1: np.zeros(n + 1)}
    for b in (0, 1):
        data = np.concatenate([[b], others])
        for y in itertools.product((0, 1), repeat=n):
            y = np.array(y)
            prob = np.prod(np.where(y == data, keep, 1 - keep))
            out[b][y.sum()] += prob
    E = math.exp(eps)
    return max(np.maximum(out[1] - E * out[0], 0).sum(), np.maximum(out[0] - E * out[1], 0).sum())


def test_cnt_rr_small_n_enumeration():
    """Binary RR at small n: the reported (eps, delta) holds for the exact shuffled output."""
    n, eps, delta = 10, 2.0, 0.05
    p = CntRR(eps, delta, n, calibration="clones")
    st = p.privacy()
    assert st.eps <= eps * (1 + 1e-9)
    for k in range(n):
        assert _exact_rr_delta_enumerated(p.flip, n, k, st.eps) <= st.delta
    # the accounting module's exact curve agrees with the enumeration (and the bound is above it)
    exact_eps = shuffled_binary_rr_epsilon(p.eps_l, n, delta)
    assert exact_eps <= st.eps
    k_worst = 0
    assert _exact_rr_delta_enumerated(p.flip, n, k_worst, exact_eps) == pytest.approx(delta, rel=1e-6)


def _rr_count_pmfs(flip: float, n: int, others_ones: int, width: int = 4000):
    """pmfs of the number of ones when user 0 holds 1 / 0, others fixed (truncated convolution)."""
    a = others_ones
    b = n - 1 - others_ones
    k = np.arange(width)
    down = stats.binom.pmf(k, a, flip / 2)   # ones of the others that flipped to 0
    up = stats.binom.pmf(k, b, flip / 2)     # zeros of the others that flipped to 1
    # ones among others = a - down + up: index shift by a
    conv = np.convolve(down[::-1], up)       # index j <-> up - down = j - (width - 1)
    lost = stats.binom.sf(width - 1, a, flip / 2) + stats.binom.sf(width - 1, b, flip / 2)  # truncated mass
    s = np.concatenate([[0.0], conv, [0.0]])
    keep = 1 - flip / 2
    P = keep * s[:-1] + (1 - keep) * s[1:]   # user 0 holds 1 (one more one)
    Q = (1 - keep) * s[:-1] + keep * s[1:]
    return P, Q, lost


def test_cnt_rr_lemma48_exact_divergence_n1e5():
    n = 10**5
    p = protocol("cnt_rr", epsilon=EPS, delta=DELTA, n=n, calibration="lemma4.8")
    st = p.privacy()
    for k in (0, n // 2, n - 1):
        P, Q, lost = _rr_count_pmfs(p.flip, n, k)
        assert lost < 1e-30
        for e in (st.eps, EPS):
            E = math.exp(e)
            d = max(np.maximum(P - E * Q, 0).sum(), np.maximum(Q - E * P, 0).sum()) + lost
            assert d <= DELTA
    # the spec's exact check: delta(0.9) is astronomically small (3.9e-65 at k = 0)
    P, Q, _ = _rr_count_pmfs(p.flip, n, 0)
    assert np.maximum(P - math.exp(EPS) * Q, 0).sum() < 1e-60


def test_cnt_2m_exact_privacy_and_no_local_dp():
    n = 10**5
    p = protocol("cnt_2m", epsilon=EPS, delta=DELTA, n=n)
    st = p.privacy()
    # the noise probability is rounded up to the 2^-53 grid, so the statement is a hair below EPS
    assert EPS * (1 - 1e-12) <= st.eps <= EPS and st.delta == DELTA
    assert p.exact_delta(st.eps) <= DELTA
    assert p.exact_delta(EPS) < 1e-80            # spec: 3.1e-93
    # the sampled noise probability 1 - p (rng.random() < p, p on the grid) is the q_noise the
    # statement is computed from, exactly
    assert Fraction(p.p) + Fraction(p.q_noise) == 1 and Fraction(p.p).denominator <= 2**53
    assert p.local_randomizer is None
    # no local DP: a user holding 1 sends >= 1 message, so "0 messages" has ratio infinity
    assert p.p < 1
    pmf1 = {1: 1 - p.p, 2: p.p}
    pmf0 = {0: 1 - p.p, 1: p.p}
    assert pmf1.get(0, 0.0) == 0.0 and pmf0[0] > 0


def test_cnt_bn_exact_privacy_with_only_gamma_honest():
    n = 10**5
    p = protocol("cnt_bn", epsilon=EPS, delta=DELTA, n=n, gamma=0.5)
    honest = int(p.gamma * n)
    pmf = stats.binom.pmf(np.arange(honest + 1), honest, p.p)
    from shuffledp.shuffle._common import shift_hockey_stick

    assert shift_hockey_stick(pmf, EPS) <= DELTA


def test_cnt_sgm_noise_ratio_with_only_gamma_honest():
    """With exactly gamma*n honest users the total noise is NB(1) - NB(1) = discrete Laplace:
    P(z)/P(z+1) <= e^eps everywhere; with more honest users (r > 1) too (log-concave)."""
    from shuffledp.central.distributions import polya_pmf

    p = protocol("cnt_sgm", epsilon=EPS, delta=DELTA, n=1000, gamma=0.5)
    for honest in (500, 700, 1000):
        r = honest * p.shape
        k = np.arange(0, 400)
        f = polya_pmf(k, r, p.alpha)
        z = np.convolve(f, f[::-1])              # law of X - Y on -399..399
        z = z[100:-100]                          # away from the truncation edges (|z| < 300)
        lr = np.abs(np.diff(np.log(z)))
        assert lr.max() <= EPS + 1e-9


@pytest.mark.parametrize("name", ["cnt_2m", "cnt_bn", "cnt_sgm"])
def test_no_local_randomizer(name):
    assert protocol(name, epsilon=EPS, delta=DELTA, n=N6).local_randomizer is None


# ----------------------------------------------------------------------------- utility

CASES = [("cnt_rr", {"calibration": "lemma4.8"}, 24.53), ("cnt_2m", {}, 29.91), ("cnt_bn", {"gamma": 0.5}, 42.28),
         ("cnt_sgm", {"gamma": 0.5}, 2.15)]


@pytest.mark.parametrize("name,kw,sd", CASES)
def test_unbiased_and_variance_n1e6(name, kw, sd, rng):
    """R exact simulations at n = 1e6, q = 0.5: mean within z bound, variance in the chi2 band."""
    p = protocol(name, epsilon=EPS, delta=DELTA, n=N6, **kw)
    assert math.sqrt(p.variance()) == pytest.approx(sd, abs=0.01)
    c = N6 // 2
    data = np.array([N6 - c, c])
    R = 4000
    est = np.array([p.estimate(p.simulate_statistic(data, rng), N6).values[0] for _ in range(R)])
    lo, hi = variance_ratio_band(R)
    ratio = est.var(ddof=1) / p.variance()
    assert lo < ratio < hi, ratio
    z = (est.mean() - c) / math.sqrt(p.variance() / R)
    assert abs(z) < mean_z_bound(), z


def test_simulation_is_instant_at_1e7(rng):
    import time

    for name, kw, _ in CASES:
        p = protocol(name, epsilon=0.5, delta=DELTA, n=10**7, **kw)
        t = time.perf_counter()
        for _ in range(100):
            p.simulate_statistic(np.array([5 * 10**6, 5 * 10**6]), rng)
        assert time.perf_counter() - t < 1.0, name


def test_cnt_2m_truncation_zero_input(rng):
    p = protocol("cnt_2m", epsilon=EPS, delta=DELTA, n=10**4)
    zeros = np.zeros(10**4, dtype=np.int64)
    for _ in range(20):
        assert pipeline.run(p, zeros, rng).values[0] == 0.0
        assert pipeline.simulate(p, zeros, rng).values[0] == 0.0


SMALL = [("cnt_rr", {"calibration": "clones"}), ("cnt_2m", {}), ("cnt_bn", {}), ("cnt_sgm", {})]


@pytest.mark.parametrize("name,kw", SMALL)
def test_simulate_matches_pipeline_in_law(name, kw):
    """Full encode -> shuffle -> aggregate runs and exact simulations have the same law
    (two-sample KS on the estimates, and both unbiased)."""
    n, R = 4000, 300
    rng = np.random.default_rng(7)
    x = (rng.random(n) < 0.6).astype(np.int64)
    p = protocol(name, epsilon=EPS, delta=DELTA, n=n, **kw)
    run = np.array([pipeline.run(p, x, rng).values[0] for _ in range(R)])
    sim = np.array([pipeline.simulate(p, x, rng).values[0] for _ in range(R)])
    assert stats.ks_2samp(run, sim).pvalue > 1e-3
    for arr in (run, sim):
        assert abs(arr.mean() - x.sum()) / math.sqrt(p.variance() / R) < mean_z_bound()


@pytest.mark.parametrize("name,kw", SMALL)
def test_aggregate_is_mergeable(name, kw, rng):
    n = 4000
    p = protocol(name, epsilon=EPS, delta=DELTA, n=n, **kw)
    msgs = p.encode((rng.random(n) < 0.3).astype(int), rng)
    k = len(next(iter(msgs.values())))
    a = p.aggregate({c: v[: k // 3] for c, v in msgs.items()})
    b = p.aggregate({c: v[k // 3:] for c, v in msgs.items()})
    whole = p.aggregate(msgs)
    assert p.estimate(a + b, n).values[0] == p.estimate(whole, n).values[0]


def test_estimate_carries_privacy_and_stderr(rng):
    p = protocol("cnt_rr", epsilon=EPS, delta=DELTA, n=N6)
    e = pipeline.simulate(p, np.array([0, 1] * (N6 // 2)), rng)
    assert e.kind == "count" and e.privacy == p.privacy()
    assert e.stderr[0] == pytest.approx(math.sqrt(p.variance()))


# ----------------------------------------------------------------------------- bad input

def test_cnt_pure_not_implemented():
    with pytest.raises(ValidationError, match="not implemented: the paper's protocol text .* is unavailable") as e:
        protocol("cnt_pure", epsilon=0.01, delta=DELTA, n=10**7)
    assert e.value.parameter == "name"


def test_impossible_targets():
    with pytest.raises(OutOfDomainError, match="epsilon < 1"):
        protocol("cnt_rr", epsilon=1.0, delta=DELTA, n=N6, calibration="lemma4.8")
    with pytest.raises(OutOfDomainError, match="sqrt\\(3456"):
        protocol("cnt_rr", epsilon=0.1, delta=DELTA, n=10**5, calibration="lemma4.8")
    with pytest.raises(OutOfDomainError, match="14 ln"):
        protocol("cnt_rr", epsilon=0.9, delta=DELTA, n=100, calibration="lemma4.8")
    with pytest.raises(OutOfDomainError, match="100 ln"):
        protocol("cnt_2m", epsilon=0.5, delta=DELTA, n=5000)
    with pytest.raises(OutOfDomainError, match="gamma \\* n"):
        protocol("cnt_bn", epsilon=0.9, delta=DELTA, n=3000, gamma=0.5)
    with pytest.raises(OutOfDomainError, match="epsilon <= 1"):
        protocol("cnt_2m", epsilon=1.5, delta=DELTA, n=N6)
    for name in ("cnt_rr", "cnt_2m", "cnt_bn", "cnt_sgm"):
        with pytest.raises(ValidationError, match="delta"):
            protocol(name, epsilon=0.9, delta=0.0, n=N6)
        with pytest.raises(ValidationError, match="epsilon"):
            protocol(name, epsilon=-1.0, delta=DELTA, n=N6)
        with pytest.raises(ValidationError, match="n must"):
            protocol(name, epsilon=0.9, delta=DELTA, n=0)
    with pytest.raises(ValidationError, match="gamma"):
        protocol("cnt_sgm", epsilon=0.9, delta=DELTA, n=N6, gamma=0.0)
    with pytest.raises(ValidationError, match="calibration"):
        protocol("cnt_rr", epsilon=0.9, delta=DELTA, n=N6, calibration="nope")


@pytest.mark.parametrize("name,kw", SMALL)
def test_bad_values_and_messages(name, kw, rng):
    p = protocol(name, epsilon=EPS, delta=DELTA, n=4000, **kw)
    for bad in ([0, 2, 1], [0.0, 1.0], ["a"], np.zeros((2, 2), dtype=int), [-1, 0]):
        with pytest.raises(ValidationError):
            p.encode(bad, rng)
    assert p.aggregate(p.encode(np.array([True, False]), rng)).shape == (1,)
    with pytest.raises(ValidationError):
        p.aggregate({"bogus": np.ones(3, dtype=np.int64)})
    with pytest.raises(ValidationError):
        p.estimate(np.array([1, 2]), 4000)
    with pytest.raises(ValidationError):
        p.simulate_statistic(np.array([1, 2, 3]), rng)
    with pytest.raises(ValidationError):
        p.summarize([0.5])


def test_bad_message_contents(rng):
    with pytest.raises(ValidationError, match="bits"):
        CntRR(EPS, DELTA, N6).aggregate({"y": np.array([0, 2])})
    with pytest.raises(ValidationError, match="bit 1"):
        Cnt2M(EPS, DELTA, N6).aggregate({"one": np.array([1, 0])})
    with pytest.raises(ValidationError):
        CntSGM(EPS, DELTA, N6).aggregate({"share": np.array([-1])})
    assert CntBN(EPS, DELTA, N6).aggregate({}).tolist() == [0]
