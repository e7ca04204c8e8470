"""Shuffle-model summation protocols: spec worked examples, exact local ratios, privacy(n) vs the
accounting module, unbiasedness and exact variance, simulate == pipeline in law, bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from shuffledp import pipeline
from shuffledp.accounting import basic_composition, group_privacy, shuffle_statement
from shuffledp.central import split_and_mix_delta
from shuffledp.core.errors import OutOfDomainError, ValidationError
from shuffledp.local.verify import worst_case_log_ratio
from shuffledp.shuffle import protocol
from shuffledp.shuffle._common import krr_local_epsilon
from shuffledp.shuffle.sums import RSumDSG, RSumKR, RSumRM, RSumRR
from tests.conftest import mean_z_bound, variance_ratio_band

EPS, DELTA = 0.9, 1e-6


def _normal_data(n: int, seed: int = 11) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(0.5, 0.2, n), 0.0, 1.0)


# ----------------------------------------------------------------------------- spec worked examples

def test_rsum_kr_worked_examples():
    p = protocol("rsum_kr", epsilon=1.0, delta=1e-6, n=10**4, bound="closed_form")
    assert p.k == 4 and p.gamma == pytest.approx(0.10157, abs=1e-5)
    assert p.variance() == pytest.approx(508.1, abs=0.1)
    p = protocol("rsum_kr", epsilon=1.0, delta=1e-6, n=10**5, bound="closed_form")
    assert p.k == 9 and p.gamma == pytest.approx(0.02031, abs=1e-5)
    assert p.variance() == pytest.approx(948.5, abs=0.2)
    p = protocol("rsum_kr", epsilon=1.0, delta=1e-8, n=10**4, precision=21, bound="bennett")
    assert p.gamma == pytest.approx(0.152061, abs=1e-6)
    assert p.variance() == pytest.approx(641.4, abs=0.1)


def test_rsum_kr_worst_case_variance_is_the_max_over_inputs():
    p = RSumKR(1.0, 1e-6, 10**6, precision=20)
    x = np.linspace(0, 1, 100001)
    per_user = [p.sum_variance(np.array([v])) for v in x[::97]]
    assert max(per_user) * 10**6 <= p.variance() * (1 + 1e-9)
    assert max(per_user) * 10**6 == pytest.approx(p.variance(), rel=1e-4)


def test_rsum_rm_worked_examples():
    p = protocol("rsum_rm", epsilon=1.0, delta=1e-8, n=10**4, messages=2, bound="bennett")
    assert p.p == [3, 9] and p.K == [3, 10]
    assert p.gammas == pytest.approx([0.074667, 0.190731], abs=1e-6)
    p = protocol("rsum_rm", epsilon=1.0, delta=1e-10, n=10**5, messages=2, bound="closed_form")
    assert p.p == [4, 47]
    assert p.gammas == pytest.approx([0.05468, 0.65621], abs=1e-5)
    p = protocol("rsum_rm", epsilon=1.0, delta=1e-12, n=10**6, bound="closed_form")  # m = round(log3 log2 n) = 3
    assert p.m == 3 and p.p == [2, 5, 99]
    assert p.gammas == pytest.approx([0.00741, 0.01854, 0.37073], abs=1e-5)


def test_rsum_rm_closed_form_caps_last_level():
    """Spec pitfall 1: n=1e4, eps=1, delta=1e-8, m=2 gives p=[3,9] and gamma_2 > 1 with the closed
    form; the closed-form bound caps p_m so that K_m = p_m + 1 stays below p_max."""
    p = protocol("rsum_rm", epsilon=1.0, delta=1e-8, n=10**4, messages=2, bound="closed_form")
    assert p.p == [3, 8] and max(p.gammas) < 1
    with pytest.raises(OutOfDomainError, match="gamma"):
        protocol("rsum_rm", epsilon=1.0, delta=1e-8, n=10**4, precisions=[3, 9], bound="closed_form")


def test_rsum_dsg_worked_example():
    p = protocol("rsum_dsg", epsilon=1.0, delta=1e-6, n=10**4)
    assert p.precision == 100 and p.alpha == pytest.approx(0.990050, abs=1e-6)
    assert p.sigma == 22 and p.modulus == 2**21 and p.n_messages == 7
    assert p.variance() == pytest.approx(2.25, abs=1e-3)
    st = p.privacy()
    assert st.eps == 1.0 and 0 < st.delta <= 1e-6 and st.gamma == 1.0


def test_rsum_rr_worked_example():
    """The spec's calibration (survey Thm 3 form over n r virtual users)."""
    p = protocol("rsum_rr", epsilon=1.0, delta=1e-6, n=10**6, accounting="cheu2019")
    assert p.r == 1000 and p.flip == pytest.approx(0.7395, abs=1e-4)
    assert p.variance() == pytest.approx(3434, abs=1)
    with pytest.raises(OutOfDomainError, match="virtual users"):
        protocol("rsum_rr", epsilon=1.0, delta=1e-6, n=10**5, accounting="cheu2019")


def test_rsum_rr_cheu_corollary47():
    from shuffledp.shuffle.counting import cheu_corollary47_epsilon

    n = 10**6
    p = protocol("rsum_rr", epsilon=EPS, delta=DELTA, n=n, accounting="cheu_cor47")
    assert p.accounting == p.bound_used == "cheu_cor47" and p.r == 900
    N = n * p.r
    e_bit = cheu_corollary47_epsilon(p.flip * N, N, p.delta_bit)
    assert e_bit == pytest.approx(EPS / p.r, rel=1e-9)
    st = p.privacy()
    g = group_privacy((e_bit, p.delta_bit), p.r)
    assert (st.eps, st.delta) == (g.eps, g.delta)
    assert st.eps <= EPS * (1 + 1e-9) and st.delta <= DELTA
    # less noise than the survey-form calibration at r = 900
    assert p.variance() < RSumRR(EPS, DELTA, n, accounting="cheu2019").variance()


# ----------------------------------------------------------------------------- privacy

def test_rsum_rr_local_ratio_exact():
    p = RSumRR(EPS, DELTA, 10**6, precision=4)
    reports = {"y": np.array(list(itertools.product((0, 1), repeat=4)), dtype=np.int8)}
    inputs = np.linspace(0, 1, 17)
    ratio = worst_case_log_ratio(p.local_randomizer, reports, inputs)
    assert ratio == pytest.approx(p.local_randomizer.epsilon, rel=1e-9)
    assert ratio == pytest.approx(4 * math.log(2 / p.flip - 1), rel=1e-9)
    # probabilities of every report sum to one for any input
    for x in (0.0, 0.3, 1.0):
        assert p.local_randomizer.probabilities(reports, x).sum() == pytest.approx(1.0)


def test_rsum_kr_local_ratio_exact():
    p = protocol("rsum_kr", epsilon=EPS, delta=DELTA, n=10**6)
    reports = {"y": np.arange(p.k + 1)}
    ratio = worst_case_log_ratio(p.local_randomizer, reports, np.linspace(0, 1, 8 * p.k + 1))
    assert ratio == pytest.approx(p.eps_l, rel=1e-12)
    assert p.local_randomizer.probabilities(reports, 0.37).sum() == pytest.approx(1.0)


def test_rsum_rm_local_ratio_exact():
    p = protocol("rsum_rm", epsilon=1.0, delta=1e-8, n=10**4, messages=2, bound="bennett")
    reports = {"y": np.array(list(itertools.product(range(p.K[0]), range(p.K[1]))))}
    ratio = worst_case_log_ratio(p.local_randomizer, reports, np.linspace(0, 1, 109))
    expect = sum(math.log1p(K * (1 - g) / g) for K, g in zip(p.K, p.gammas))
    assert ratio == pytest.approx(expect, rel=1e-9)
    assert p.local_randomizer.probabilities(reports, 0.61).sum() == pytest.approx(1.0)


def test_local_randomizers_match_their_probabilities(rng):
    """Empirical report frequencies of the client path agree with ``probabilities`` (chi-square)."""
    for p, x in ((RSumKR(EPS, DELTA, 10**5, precision=5), 0.43),
                 (protocol("rsum_rm", epsilon=1.0, delta=1e-8, n=10**4, messages=2, bound="bennett"), 0.43)):
        mech = p.local_randomizer
        reps = mech.randomize(np.full(40000, x), rng)["y"]
        reps = reps.reshape(reps.shape[0], -1)
        uniq, cnt = np.unique(reps, axis=0, return_counts=True)
        probs = mech.probabilities({"y": uniq.squeeze(-1) if uniq.shape[1] == 1 else uniq}, x)
        assert probs.sum() == pytest.approx(1.0, abs=1e-9)  # every possible report was seen
        assert stats.chisquare(cnt, probs * cnt.sum()).pvalue > 1e-4


def test_privacy_equals_accounting():
    n = 10**6
    kr = protocol("rsum_kr", epsilon=EPS, delta=DELTA, n=n, bound="closed_form")
    ref = shuffle_statement(kr.eps_l, n, DELTA, "blanket", bound="closed_form", randomizer="krr", k=kr.k + 1)
    assert (kr.privacy().eps, kr.privacy().delta) == (ref.eps, ref.delta)
    assert kr.privacy().eps == pytest.approx(EPS, rel=1e-9)

    rm = protocol("rsum_rm", epsilon=EPS, delta=DELTA, n=n, bound="closed_form")
    # each level's eps_l is the exact eps of its sampled blanket probability (rounded up)
    parts = [shuffle_statement(krr_local_epsilon(K, g), n, DELTA / rm.m, "blanket", bound="closed_form",
                               randomizer="krr", k=K) for K, g in zip(rm.K, rm.gammas)]
    assert (rm.privacy().eps, rm.privacy().delta) == basic_composition([(s.eps, s.delta) for s in parts])
    assert rm.privacy().eps == pytest.approx(EPS, rel=1e-9) and rm.privacy().delta <= DELTA * (1 + 1e-12)

    rr = protocol("rsum_rr", epsilon=EPS, delta=DELTA, n=n, accounting="cheu2019")
    g = group_privacy(shuffle_statement(rr.eps_l_bit, n * rr.r, rr.delta_bit, "cheu2019", form="exact"), rr.r)
    assert (rr.privacy().eps, rr.privacy().delta) == (g.eps, g.delta)
    assert rr.privacy().eps <= EPS * (1 + 1e-9) and rr.privacy().delta <= DELTA

    dsg = protocol("rsum_dsg", epsilon=EPS, delta=DELTA, n=n)
    assert dsg.privacy().delta == split_and_mix_delta(EPS, dsg.sigma) <= DELTA
    assert dsg.privacy().eps == EPS


def test_rsum_rr_clones_accounting_is_tighter():
    a = RSumRR(EPS, DELTA, 10**6, precision=10, accounting="cheu2019")
    b = RSumRR(EPS, DELTA, 10**6, precision=10, accounting="clones")
    assert b.flip < a.flip and b.variance() < a.variance()
    assert b.privacy().eps <= EPS * (1 + 1e-9)


def test_rsum_dsg_noise_is_eps_dp_for_sensitivity_p():
    """Integer sum noise with all honest users is SG(alpha = e^{-eps/p}): shifting by the
    sensitivity p changes every probability by at most e^eps."""
    from shuffledp.central.distributions import polya_pmf

    p = RSumDSG(EPS, DELTA, 400, precision=20, gamma=0.5)
    for honest in (200, 400):
        r = honest * p.shape
        f = polya_pmf(np.arange(3000), r, p.alpha)
        z = np.convolve(f, f[::-1])[1000:-1000]
        lr = np.abs(np.log(z[p.precision:]) - np.log(z[:-p.precision]))
        assert lr.max() <= EPS + 1e-9


# ----------------------------------------------------------------------------- utility

def _sims(p, x, R, rng):
    return np.array([p.estimate(p.simulate_statistic(x, rng), x.shape[0]).values[0] for _ in range(R)])


UTIL = [("rsum_rr", {"precision": 10}), ("rsum_kr", {}), ("rsum_rm", {}), ("rsum_dsg", {}),
        ("rsum_kr", {"precision": 10, "bound": "bennett"}), ("rsum_dsg", {"gamma": 0.5})]


@pytest.mark.parametrize("name,kw", UTIL)
def test_unbiased_and_exact_variance_n1e5(name, kw, rng):
    n, R = 10**5, 1000
    x = _normal_data(n)
    p = protocol(name, epsilon=EPS, delta=DELTA, n=n, **kw)
    est = _sims(p, x, R, rng)
    var = p.sum_variance(x)
    assert var <= p.variance() * (1 + 1e-12)  # the data's variance is below the worst case
    lo, hi = variance_ratio_band(R)
    assert lo < est.var(ddof=1) / var < hi
    assert abs(est.mean() - x.sum()) / math.sqrt(var / R) < mean_z_bound()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rsum_rr", "rsum_kr", "rsum_rm", "rsum_dsg"])
def test_rmse_matches_closed_form_n1e6(name, rng):
    """Survey setting n = 1e6, eps = 0.9, delta = 1e-6, normal data clipped to [0, 1]."""
    n, R = 10**6, 300
    x = _normal_data(n)
    p = protocol(name, epsilon=EPS, delta=DELTA, n=n)
    est = _sims(p, x, R, rng)
    mse = np.mean((est - x.sum()) ** 2)
    lo, hi = variance_ratio_band(R + 1)
    assert lo < mse / p.sum_variance(x) < hi


def test_extreme_inputs_unbiased(rng):
    n, R = 20000, 400
    for x in (np.zeros(n), np.ones(n), np.full(n, 0.5)):
        for p in (RSumRM(1.0, 1e-8, n, messages=2, bound="bennett"), RSumKR(1.0, 1e-6, n),
                  RSumDSG(1.0, 1e-6, n), RSumRR(1.0, 1e-6, n, precision=3)):
            est = _sims(p, x, R, rng)
            assert abs(est.mean() - x.sum()) / math.sqrt(p.sum_variance(x) / R) < mean_z_bound(), (p, x[0])


LAW = [("rsum_rr", {"precision": 4}), ("rsum_kr", {}), ("rsum_rm", {"bound": "bennett"}), ("rsum_dsg", {})]


@pytest.mark.parametrize("name,kw", LAW)
def test_simulate_matches_pipeline_in_law(name, kw):
    n, R = 20000, 200
    rng = np.random.default_rng(5)
    x = _normal_data(n, seed=3)
    p = protocol(name, epsilon=EPS, delta=DELTA, n=n, **kw)
    run = np.array([pipeline.run(p, x, rng).values[0] for _ in range(R)])
    sim = np.array([pipeline.simulate(p, x, rng).values[0] for _ in range(R)])
    assert stats.ks_2samp(run, sim).pvalue > 1e-3
    sd = math.sqrt(p.sum_variance(x) / R)
    for arr in (run, sim):
        assert abs(arr.mean() - x.sum()) / sd < mean_z_bound()


@pytest.mark.parametrize("name,kw", LAW)
def test_aggregate_is_mergeable_and_estimate_fields(name, kw, rng):
    n = 20000
    p = protocol(name, epsilon=EPS, delta=DELTA, n=n, **kw)
    msgs = p.encode(_normal_data(n), rng)
    k = len(next(iter(msgs.values())))
    a = p.aggregate({c: v[: k // 2] for c, v in msgs.items()})
    b = p.aggregate({c: v[k // 2:] for c, v in msgs.items()})
    e = p.estimate(a + b, n)
    assert e.values[0] == p.estimate(p.aggregate(msgs), n).values[0]
    assert e.kind == "sum" and e.privacy == p.privacy() and e.stderr[0] == pytest.approx(math.sqrt(p.variance(n)))
    assert p.bits_per_user == pytest.approx(p.messages_per_user * p.bits_per_message)


# ----------------------------------------------------------------------------- bad input

def test_rsum_pure_not_implemented():
    with pytest.raises(ValidationError, match="not implemented: it is built on cnt_pure"):
        protocol("rsum_pure", epsilon=0.01, delta=DELTA, n=10**7)


def test_impossible_targets():
    with pytest.raises(OutOfDomainError, match="epsilon <= 1"):
        protocol("rsum_kr", epsilon=1.5, delta=DELTA, n=10**6, bound="closed_form")
    assert protocol("rsum_kr", epsilon=1.5, delta=DELTA, n=10**6, bound="bennett").privacy().eps <= 1.5 * (1 + 1e-9)
    with pytest.raises(OutOfDomainError, match="gamma"):
        protocol("rsum_kr", epsilon=0.5, delta=DELTA, n=10**4, precision=50, bound="closed_form")
    assert protocol("rsum_kr", epsilon=0.5, delta=DELTA, n=10**4, precision=50).bound_used == "bennett"
    with pytest.raises(OutOfDomainError):
        protocol("rsum_kr", epsilon=0.1, delta=DELTA, n=100)
    with pytest.raises(OutOfDomainError, match="too small"):
        protocol("rsum_rm", epsilon=0.5, delta=DELTA, n=2000)
    with pytest.raises(ValidationError, match="messages must equal"):
        protocol("rsum_rm", epsilon=0.5, delta=DELTA, n=10**6, messages=3, precisions=[4, 4])
    for name in ("rsum_rr", "rsum_kr", "rsum_rm", "rsum_dsg"):
        with pytest.raises(ValidationError, match="delta"):
            protocol(name, epsilon=0.9, delta=0.0, n=10**6)
        with pytest.raises(ValidationError, match="epsilon"):
            protocol(name, epsilon=float("nan"), delta=DELTA, n=10**6)
    with pytest.raises(ValidationError, match="precision"):
        protocol("rsum_dsg", epsilon=0.9, delta=DELTA, n=10**6, precision=0)
    with pytest.raises(ValidationError, match="bound"):
        protocol("rsum_kr", epsilon=0.9, delta=DELTA, n=10**6, bound="hoeffding")


@pytest.mark.parametrize("name,kw", LAW)
def test_bad_values_and_messages(name, kw, rng):
    p = protocol(name, epsilon=EPS, delta=DELTA, n=20000, **kw)
    for bad in ([0.5, 1.2], [-0.1], [float("nan")], ["a"], np.zeros((2, 2))):
        with pytest.raises(ValidationError):
            p.encode(bad, rng)
        with pytest.raises(ValidationError):
            p.summarize(bad)
    with pytest.raises(ValidationError):
        p.aggregate({"bogus": np.ones(3, dtype=np.int64)})
    with pytest.raises(ValidationError):
        p.estimate(np.zeros(7), 20000)


def test_bad_message_contents():
    with pytest.raises(ValidationError):
        RSumRR(EPS, DELTA, 10**6, precision=4).aggregate({"y": np.array([0, 2])})
    kr = RSumKR(EPS, DELTA, 10**6)
    with pytest.raises(ValidationError):
        kr.aggregate({"y": np.array([kr.k + 1])})
    rm = RSumRM(1.0, 1e-8, 10**4, messages=2, bound="bennett")
    with pytest.raises(ValidationError, match="domain"):
        rm.aggregate({"level": np.array([0]), "y": np.array([3])})   # level 0 has K = 3 values
    with pytest.raises(ValidationError):
        rm.aggregate({"level": np.array([2]), "y": np.array([0])})
    assert rm.aggregate({"level": np.array([1]), "y": np.array([9])}).tolist() == [0, 9]
    with pytest.raises(ValidationError):
        RSumDSG(EPS, DELTA, 10**4).aggregate({"share": np.array([2**40])})


def test_rsum_rr_paper_thm54_calibration(rng):
    """Cheu et al. Thm 5.4: r copies of the n-user bit-sum protocol at eps/sqrt(8 r ln(2/delta)),
    delta/(2r), composed by advanced composition (accounting module)."""
    from shuffledp.accounting import advanced_composition
    from shuffledp.shuffle.counting import cheu_corollary47_epsilon

    n = 10**6
    p = RSumRR(EPS, DELTA, n, precision=10, accounting="cheu_thm54")
    assert p.eps_bit == pytest.approx(EPS / math.sqrt(80 * math.log(2 / DELTA)))
    assert cheu_corollary47_epsilon(p.flip * n, n, DELTA / 20) <= p.eps_bit * (1 + 1e-9)
    st = p.privacy()
    e_copy = cheu_corollary47_epsilon(p.flip * n, n, DELTA / 20)
    assert st.eps == advanced_composition([e_copy] * 10, DELTA / 2) and st.eps <= EPS
    assert st.delta == pytest.approx(DELTA)
    # the paper's calibration is valid but noisier than the group-privacy default
    assert p.variance() > RSumRR(EPS, DELTA, n, precision=10).variance()
    assert p.variance() > RSumRR(EPS, DELTA, n, precision=10, accounting="cheu2019").variance()
    x = _normal_data(n)
    est = _sims(p, x, 100, rng)
    assert abs(est.mean() - x.sum()) / math.sqrt(p.sum_variance(x) / 100) < mean_z_bound()
