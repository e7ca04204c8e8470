"""``bound="best"``: blanket-calibrated protocols take the tightest proven bound.

Every bound offered (BBGN19 Thm 3.1 closed form, numeric Hoeffding, numeric Bennett) is a proven
(eps, delta) guarantee, so picking the one that allows the largest local epsilon keeps the
guarantee and can only lower the error. Checked: the choice is the argmax, the statement meets the
target exactly (no tolerance), and the variance is no larger than under any single bound.
"""

import pytest

from shuffledp.core.errors import OutOfDomainError, ValidationError
from shuffledp.shuffle.registry import protocol

DELTA = 1e-6


@pytest.mark.parametrize("eps,n,d", [(0.9, 10**6, 100), (0.5, 10**5, 16), (2.0, 10**6, 100), (0.9, 10**6, 4096)])
def test_hist_kr_best_is_the_argmax_and_meets_the_target(eps, n, d):
    best = protocol("hist_kr", epsilon=eps, delta=DELTA, n=n, d=d, bound="best")
    single = {}
    for b in ("closed_form", "hoeffding", "bennett"):
        try:
            single[b] = protocol("hist_kr", epsilon=eps, delta=DELTA, n=n, d=d, bound=b)
        except OutOfDomainError:
            assert b == "closed_form"
    assert best.bound in single
    assert best.eps_l == max(p.eps_l for p in single.values())
    assert best.variance(n, 0.0) <= min(p.variance(n, 0.0) for p in single.values())
    st = best.privacy(n)
    assert st.eps <= eps and st.delta <= DELTA, repr(st.eps)
    assert best.bound in st.note


def test_hist_kr_best_beats_closed_form_at_the_survey_setting():
    """Fig 7(b) setting: the numeric bound allows a larger eps_l, so a smaller RMSE (docs/survey.md)."""
    cf = protocol("hist_kr", epsilon=0.9, delta=DELTA, n=10**6, d=100, bound="closed_form")
    best = protocol("hist_kr", epsilon=0.9, delta=DELTA, n=10**6, d=100, bound="best")
    assert best.bound != "closed_form" and best.eps_l > cf.eps_l
    assert best.variance(10**6, 0.0) < 0.7 * cf.variance(10**6, 0.0)


@pytest.mark.parametrize("name,kw", [("rsum_kr", {}), ("rsum_kr", {"precision": 10}), ("rsum_rm", {}),
                                     ("rsum_rm", {"messages": 3})])
@pytest.mark.parametrize("eps,n", [(0.9, 10**5), (0.9, 10**6), (0.3, 10**6)])
def test_sums_best_meets_target_and_is_no_worse(name, kw, eps, n):
    try:
        best = protocol(name, epsilon=eps, delta=DELTA, n=n, bound="best", **kw)
    except OutOfDomainError:
        pytest.skip("target unreachable at this n")
    st = best.privacy(n)
    assert st.eps <= eps and st.delta <= DELTA, repr(st.eps)
    for b in ("closed_form", "bennett"):
        try:
            other = protocol(name, epsilon=eps, delta=DELTA, n=n, bound=b, **kw)
        except OutOfDomainError:
            continue
        if getattr(other, "k", None) == getattr(best, "k", None) and getattr(other, "K", None) == getattr(best, "K", None):
            assert best.variance(n) <= other.variance(n) * (1 + 1e-12), b


def test_rsum_rm_best_picks_per_level():
    p = protocol("rsum_rm", epsilon=0.9, delta=DELTA, n=10**6, bound="best", precisions=[4, 4, 8])
    assert len(p.level_bounds) == 3 and set(p.level_bounds) <= {"closed_form", "bennett"}
    for K, g, b in zip(p.K, p.gammas, p.level_bounds):
        assert b in p.privacy(p.n).note


def test_unknown_bound_is_a_clear_error():
    with pytest.raises(ValidationError, match="bound must be"):
        protocol("hist_kr", epsilon=0.9, delta=DELTA, n=10**6, d=100, bound="tightest")
    with pytest.raises(ValidationError, match="bound must be"):
        protocol("rsum_kr", epsilon=0.9, delta=DELTA, n=10**6, bound="tightest")


# ----------------------------------------------------------------------------- library defaults

#: every protocol with a calibration option: (keyword, the single options, fixed parameters)
CALIBRATION_OPTIONS = {
    "cnt_rr": ("calibration", ("lemma4.8", "corollary4.7", "clones"), {}),
    "hist_kr": ("bound", ("closed_form", "hoeffding", "bennett"), {"d": 100}),
    "rsum_kr": ("bound", ("closed_form", "bennett"), {}),
    "rsum_rm": ("bound", ("closed_form", "bennett"), {}),
    "rsum_rr": ("accounting", ("cheu_cor47", "cheu2019", "clones", "cheu_thm54"), {}),
    "range_count": ("accounting", ("blanket", "clones", "closed_form"), {"d": 64}),
}
GRID = [(eps, n) for eps in (0.1, 0.5, 1.0, 2.0) for n in (10**3, 10**4, 10**5, 10**6)]


@pytest.mark.parametrize("name", [
    "cnt_rr", "hist_kr", "rsum_kr", "rsum_rm",
    pytest.param("rsum_rr", marks=pytest.mark.slow), pytest.param("range_count", marks=pytest.mark.slow),
])
def test_default_calibration_works_wherever_one_does_and_is_the_tightest(name):
    """The library default never refuses a target some calibration reaches, meets the target, and
    has the smallest variance of all the calibrations (each method gets its best bound)."""
    key, options, kw = CALIBRATION_OPTIONS[name]
    for eps, n in GRID:
        variances = {}
        for o in options:
            try:
                variances[o] = protocol(name, epsilon=eps, delta=DELTA, n=n, **kw, **{key: o}).variance()
            except OutOfDomainError:
                pass
        if not variances:
            with pytest.raises(OutOfDomainError):
                protocol(name, epsilon=eps, delta=DELTA, n=n, **kw)
            continue
        p = protocol(name, epsilon=eps, delta=DELTA, n=n, **kw)
        st = p.privacy()
        assert st.eps <= eps and st.delta <= DELTA, (eps, n, st)
        assert p.variance() <= min(variances.values()) * (1 + 1e-9), (eps, n, p.variance(), variances)
        if name != "range_count":  # its default is a single bound, the tightest on this grid
            assert p.bound_used in p.privacy().note or name == "rsum_rm", (eps, n, p.bound_used)
            assert min(variances, key=variances.get) in p.bound_used


def test_cnt_rr_default_reaches_targets_outside_lemma_48():
    """protocol("cnt_rr", epsilon=0.5, delta=1e-6, n=1e5) refused with Lemma 4.8 (eps below its
    sqrt(3456 ln(4/delta)/n) floor); the default now takes the clone bound, which reaches it."""
    p = protocol("cnt_rr", epsilon=0.5, delta=1e-6, n=10**5)
    assert p.bound_used == "clones" and p.calibration == "best"
    assert p.privacy().eps <= 0.5 and p.privacy().delta <= 1e-6
    with pytest.raises(OutOfDomainError, match="3456"):
        protocol("cnt_rr", epsilon=0.5, delta=1e-6, n=10**5, calibration="lemma4.8")
    # with the Cheu et al. accounting only a calibration it certifies is taken
    q = protocol("cnt_rr", epsilon=0.5, delta=1e-6, n=10**6, accounting="cheu2019")
    assert q.bound_used != "clones" and q.privacy().eps <= 0.5
