"""Shuffle amplification: spec test vectors, validity domains, monotonicity, the exact lower bound,
inverse round trips."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.accounting import (METHODS, ShuffledBinaryRR, local_epsilon_for, min_users_for, shuffle_amplification,
                                  shuffle_amplification_delta, shuffle_statement, shuffled_binary_rr_epsilon)
from shuffledp.core import OutOfDomainError, ValidationError

D9 = 1e-9


# ----------------------------------------------------------------------------- spec §7 test vectors

def test_vectors_theorem1():
    assert shuffle_amplification(0.3, 100_000, D9, "erlingsson2019") == pytest.approx(0.0518241, abs=1e-7)
    assert local_epsilon_for(0.1, 10_000, D9, "erlingsson2019") == pytest.approx(0.1831, abs=1e-4)


def test_vectors_theorem3():
    assert shuffle_amplification(1.0, 100_000, D9, "cheu2019", form="exact") == pytest.approx(0.1146888, abs=1e-7)
    assert local_epsilon_for(0.5, 100_000, D9, "cheu2019", form="exact") == pytest.approx(4.243781, abs=1e-6)
    with pytest.raises(OutOfDomainError, match="lambda"):
        local_epsilon_for(0.1, 10_000, D9, "cheu2019", form="exact")  # lambda = 7.08 > 1
    # Cor. 4.7's factor (1 - s/n) makes small targets reachable with almost every user randomizing
    e0 = local_epsilon_for(0.1, 10_000, D9, "cheu2019")
    assert 0 < e0 < 1 and shuffle_amplification(e0, 10_000, D9, "cheu2019") <= 0.1 + 1e-9


def test_vectors_theorem4():
    kw = dict(bound="closed_form", randomizer="krr", k=2)
    assert local_epsilon_for(0.5, 100_000, D9, "blanket", **kw) == pytest.approx(4.411340, abs=1e-6)
    # lambda(0.5, 1e5) = 0.02398662  <=> eps_l = ln(1 + 2(1-lambda)/lambda)
    lam = 0.02398662
    assert local_epsilon_for(0.5, 100_000, D9, "blanket", **kw) == pytest.approx(math.log1p(2 * (1 - lam) / lam),
                                                                                   abs=1e-6)
    with pytest.raises(OutOfDomainError):
        local_epsilon_for(0.1, 10_000, D9, "blanket", **kw)


def test_vectors_blanket_numeric():
    # BBGN19 generic converse, delta=1e-9: Hoeffding 0.6245 / 2.7049, Bennett 0.3728 / 3.6970
    assert local_epsilon_for(0.1, 10_000, D9, "blanket") == pytest.approx(0.6245, abs=1e-4)
    assert local_epsilon_for(0.1, 10**7, D9, "blanket") == pytest.approx(2.7049, abs=1e-4)
    assert local_epsilon_for(0.1, 10_000, D9, "blanket", bound="bennett") == pytest.approx(0.3728, abs=1e-4)
    assert local_epsilon_for(0.1, 10**7, D9, "blanket", bound="bennett") == pytest.approx(3.6970, abs=1e-4)


def test_vectors_clones():
    # FMT21 exact (n=1e5, eps0=4, delta=1e-6) = 0.169770 inside the official code's [0.167539, 0.172791]
    e = shuffle_amplification(4.0, 100_000, 1e-6)
    assert e == pytest.approx(0.169770, abs=2e-6)
    assert 0.167539 <= e <= 0.172791
    assert shuffle_amplification(4.0, 100_000, 1e-6, randomizer="binary_rr") == pytest.approx(0.118153, abs=2e-6)
    assert shuffle_amplification(4.0, 100_000, 1e-6, "clones_closed_form", variant="code") == \
        pytest.approx(0.537804, abs=2e-6)
    assert shuffle_amplification(4.0, 100_000, 1e-6, "clones_closed_form") == pytest.approx(0.5346, abs=1e-4)


# spec §2.4 grid (delta = 1e-6): (eps0, n) -> (Bennett generic, Hoeffding generic, Bennett RR k=2, clones, strong)
GRID = {(1.0, 1000): (0.6149, 0.5804, 0.1801, 0.1824, 0.1487),
        (2.0, 10_000): (0.5175, 1.0171, 0.1349, 0.1550, 0.1144),
        (4.0, 100_000): (2.2085, 4.0, 0.1387, 0.1698, 0.1182),
        (8.0, 1_000_000): (8.0, 8.0, 0.3643, 0.4445, 0.3037)}


@pytest.mark.parametrize("key", sorted(GRID))
def test_reference_grid(key):
    eps0, n = key
    want = GRID[key]
    got = (shuffle_amplification(eps0, n, 1e-6, "blanket", bound="bennett"),
           shuffle_amplification(eps0, n, 1e-6, "blanket"),
           shuffle_amplification(eps0, n, 1e-6, "blanket", bound="bennett", randomizer="krr", k=2),
           shuffle_amplification(eps0, n, 1e-6, "clones"),
           shuffle_amplification(eps0, n, 1e-6, "clones", randomizer="binary_rr"))
    assert got == pytest.approx(want, abs=1.5e-4)


# ----------------------------------------------------------------------------- domains and bad input

@pytest.mark.parametrize("method,kw,args", [
    ("erlingsson2019", {}, (0.6, 10_000, D9)),         # eps0 >= 0.5
    ("erlingsson2019", {}, (0.3, 500, D9)),            # n <= 1000
    ("erlingsson2019", {}, (0.3, 10_000, 0.05)),       # delta >= 0.01
    ("cheu2019", {}, (5.0, 10_000, D9)),               # lambda < 14 ln(4/delta)/n
    ("cheu2019", {"form": "eq7"}, (4.0, 10_000, D9)),
    ("blanket", {"bound": "closed_form", "randomizer": "krr"}, (4.0, 10_000, D9)),  # eps_c > 1
    ("clones_closed_form", {}, (4.0, 1000, 1e-6)),
])
def test_out_of_domain(method, kw, args):
    with pytest.raises(OutOfDomainError):
        shuffle_amplification(*args, method=method, **kw)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("args,param", [((0.0, 1000, 1e-6), "eps0"), ((-1.0, 1000, 1e-6), "eps0"),
                                        ((float("inf"), 1000, 1e-6), "eps0"), ((1.0, 0, 1e-6), "n"),
                                        ((1.0, 10.5, 1e-6), "n"), ((1.0, 1000, 0.0), "delta"),
                                        ((1.0, 1000, 1.0), "delta"), ((1.0, 1000, -0.1), "delta")])
def test_bad_input(method, args, param):
    kw = {"bound": "closed_form", "randomizer": "krr"} if method == "blanket" else {}
    with pytest.raises(ValidationError, match=param):
        shuffle_amplification(*args, method=method, **kw)


def test_bad_method_and_options():
    with pytest.raises(ValidationError, match="method"):
        shuffle_amplification(1.0, 1000, 1e-6, method="magic")
    with pytest.raises(ValidationError, match="bound"):
        shuffle_amplification(1.0, 1000, 1e-6, method="blanket", bound="chernoff")
    with pytest.raises(ValidationError, match="variant"):
        shuffle_amplification(1.0, 1000, 1e-6, method="clones", variant="paper")
    with pytest.raises(ValidationError, match="randomizer"):
        shuffle_amplification(1.0, 1000, 1e-6, method="blanket", bound="closed_form")
    with pytest.raises(ValidationError, match="eps_c"):
        local_epsilon_for(0.0, 1000, 1e-6)
    with pytest.raises(ValidationError, match="n"):
        local_epsilon_for(0.5, 0, 1e-6)
    with pytest.raises(ValidationError, match="eps_c"):
        min_users_for(1.0, -0.5, 1e-6)


# ----------------------------------------------------------------------------- exact lower bound

def _brute_force_curve(eps0, n, others_ones):
    """All 2^n report vectors enumerated; the shuffled view is the number of ones."""
    p = math.exp(eps0) / (math.exp(eps0) + 1)
    data0 = [0] + [1] * others_ones + [0] * (n - 1 - others_ones)
    data1 = [1] + data0[1:]
    P = np.zeros(n + 1)
    Q = np.zeros(n + 1)
    for y in itertools.product((0, 1), repeat=n):
        pr1 = math.prod(p if yi == xi else 1 - p for yi, xi in zip(y, data1))
        pr0 = math.prod(p if yi == xi else 1 - p for yi, xi in zip(y, data0))
        P[sum(y)] += pr1
        Q[sum(y)] += pr0
    return P, Q


@pytest.mark.parametrize("n,ones", [(1, 0), (4, 0), (6, 2), (9, 4)])
def test_exact_curve_matches_enumeration(n, ones):
    eps0 = 1.1
    P, Q = _brute_force_curve(eps0, n, ones)
    c = ShuffledBinaryRR(eps0, n, ones)
    for eps in (0.0, 0.2, 0.7, 1.0):
        E = math.exp(eps)
        want = max(np.maximum(P - E * Q, 0).sum(), np.maximum(Q - E * P, 0).sum())
        assert c.delta(eps) == pytest.approx(want, rel=1e-10, abs=1e-15)
    for d in (1e-3, 1e-2, 0.1):
        e = c.epsilon(d)
        assert c.delta(e) == pytest.approx(d, rel=1e-8) or (e == 0.0 and c.delta(0.0) <= d)
        assert c.delta(e * (1 - 1e-6) - 1e-12) >= d * (1 - 1e-9) or e == 0.0  # smallest such eps


@pytest.mark.parametrize("n", [60, 200, 1500])
@pytest.mark.parametrize("eps0", [0.3, 1.0, 2.5])
def test_bounds_never_below_exact_lower_bound(n, eps0):
    delta = 1e-6
    lb = shuffled_binary_rr_epsilon(eps0, n, delta)
    checks = [("clones", {}), ("clones", {"randomizer": "binary_rr"}), ("blanket", {}),
              ("blanket", {"bound": "bennett"}), ("blanket", {"bound": "bennett", "randomizer": "krr", "k": 2}),
              ("blanket", {"bound": "closed_form", "randomizer": "krr", "k": 2}), ("cheu2019", {}),
              ("cheu2019", {"form": "eq7"}), ("clones_closed_form", {}), ("clones_closed_form", {"variant": "code"}),
              ("erlingsson2019", {})]
    seen = 0
    for method, kw in checks:
        try:
            ub = shuffle_amplification(eps0, n, delta, method, **kw)
        except OutOfDomainError:
            continue
        seen += 1
        assert ub >= lb, (method, kw, ub, lb)
    assert seen >= 5
    # the tight binary-RR clone bound is close to the truth (sandwich)
    assert shuffle_amplification(eps0, n, delta, randomizer="binary_rr") <= 1.35 * lb + 1e-3


def test_erlingsson_above_lower_bound_in_its_domain():
    for eps0 in (0.1, 0.45):
        lb = shuffled_binary_rr_epsilon(eps0, 1200, 1e-3)
        assert shuffle_amplification(eps0, 1200, 1e-3, "erlingsson2019") >= lb


# ----------------------------------------------------------------------------- monotonicity and inverses

NUMERIC = [("clones", {}), ("clones", {"randomizer": "binary_rr"}), ("blanket", {}), ("blanket", {"bound": "bennett"})]


@settings(max_examples=25, deadline=None)
@given(eps0=st.floats(0.05, 6.0), n=st.integers(2, 20_000), f=st.floats(1.01, 3.0), mi=st.integers(0, 3))
def test_monotone_in_n_and_eps0(eps0, n, f, mi):
    method, kw = NUMERIC[mi]
    delta = 1e-6
    base = shuffle_amplification(eps0, n, delta, method, **kw)
    more_users = shuffle_amplification(eps0, int(n * f) + 1, delta, method, **kw)
    larger_eps0 = shuffle_amplification(eps0 * f, n, delta, method, **kw)
    tol = 1e-9 * base + 1e-12
    assert more_users <= base + tol
    assert larger_eps0 >= base - tol
    assert base <= eps0 * (1 + 1e-11)


@settings(max_examples=20, deadline=None)
@given(eps0=st.floats(0.2, 5.0), n=st.integers(1000, 200_000), mi=st.integers(0, 3))
def test_inverse_round_trip(eps0, n, mi):
    method, kw = NUMERIC[mi]
    delta = 1e-7
    eps_c = shuffle_amplification(eps0, n, delta, method, **kw)
    e0 = local_epsilon_for(eps_c, n, delta, method, **kw)
    assert shuffle_amplification(e0, n, delta, method, **kw) <= eps_c  # exactly: no tolerance
    if eps_c < eps0 * (1 - 1e-6):  # amplification happened: the inverse recovers eps0
        assert e0 >= eps0 * (1 - 1e-6)


@pytest.mark.parametrize("method,kw,eps_c,n", [("erlingsson2019", {}, 0.05, 100_000), ("cheu2019", {}, 0.5, 100_000),
                                                ("cheu2019", {"form": "eq7"}, 0.5, 100_000),
                                                ("blanket", {"bound": "closed_form", "randomizer": "krr", "k": 10},
                                                 0.5, 100_000),
                                                ("clones_closed_form", {}, 0.3, 100_000)])
def test_closed_form_inverse_round_trip(method, kw, eps_c, n):
    e0 = local_epsilon_for(eps_c, n, D9, method, **kw)
    assert shuffle_amplification(e0, n, D9, method, **kw) == pytest.approx(eps_c, rel=1e-9)
    assert shuffle_amplification(e0, n, D9, method, **kw) <= eps_c  # exactly: no tolerance


CLOSED = [("erlingsson2019", {}), ("cheu2019", {}), ("cheu2019", {"form": "exact"}), ("cheu2019", {"form": "eq7"}),
          ("blanket", {"bound": "closed_form", "randomizer": "krr", "k": 10}), ("clones_closed_form", {}),
          ("clones_closed_form", {"variant": "code"})]
SWEEP = [(m, kw, ec, n) for (m, kw) in NUMERIC + CLOSED for ec in (0.1, 0.5, 0.9) for n in (10**4, 10**5, 10**6)]


@pytest.mark.parametrize("delta", [1e-6, D9])
def test_inverse_never_overshoots_sweep(delta):
    """Review: in 63 swept cases shuffle_amplification(local_epsilon_for(eps_c)) exceeded eps_c by
    1e-12..1e-10 relative (target 0.5, n = 1e5 -> 0.50000000004). The inverse now checks its answer
    with the forward function exactly as it computes and rounds it: never above eps_c, no tolerance."""
    checked = 0
    for method, kw, eps_c, n in SWEEP:
        try:
            e0 = local_epsilon_for(eps_c, n, delta, method, **kw)
        except OutOfDomainError:
            assert (method, kw) in CLOSED  # only closed forms have a domain ("None" in the survey tables)
            continue
        checked += 1
        assert shuffle_amplification(e0, n, delta, method, **kw) <= eps_c, (method, kw, eps_c, n)
        assert e0 >= eps_c * (1 - 1e-11) or (method, kw) in CLOSED  # numeric: no amplification is always valid
    assert checked >= 45  # every numeric case plus most closed-form ones are in domain


def test_inverse_without_amplification_stays_below_target():
    # n = 2 users and the blanket bound: (almost) no amplification, so the forward is round_up(eps0);
    # the inverse must step below eps_c by that rounding margin instead of returning eps_c itself
    e0 = local_epsilon_for(0.5, 2, 1e-6, "blanket")
    assert 0.5 * (1 - 1e-11) <= e0 < 0.5
    assert shuffle_amplification(e0, 2, 1e-6, "blanket") <= 0.5


def test_min_users_for():
    n = min_users_for(4.0, 0.5, 1e-6)
    assert shuffle_amplification(4.0, n, 1e-6) <= 0.5 < shuffle_amplification(4.0, n - 1, 1e-6)
    n3 = min_users_for(1.0, 0.2, D9, "cheu2019")
    assert shuffle_amplification(1.0, n3, D9, "cheu2019") <= 0.2
    try:
        assert shuffle_amplification(1.0, n3 - 1, D9, "cheu2019") > 0.2
    except OutOfDomainError:
        pass  # n3 - 1 users are outside Cheu et al.'s domain: also "not enough"
    assert min_users_for(1.0, 2.0, 1e-6) == 1


def test_delta_form_and_statement():
    d = shuffle_amplification_delta(0.169770 * 1.001, 4.0, 100_000)
    assert d <= 1e-6
    s = shuffle_statement(4.0, 100_000, 1e-6)
    assert s.model == "shuffle" and s.neighbouring == "replace_one" and s.eps == shuffle_amplification(4.0, 100_000, 1e-6)
    with pytest.raises(ValidationError, match="method"):
        shuffle_amplification_delta(0.1, 1.0, 1000, "cheu2019")


def test_clone_block_coarsening_is_conservative_and_tight():
    from shuffledp.accounting.shuffle import _bisect_eps, _CloneDelta

    for n, eps0 in [(10**6, 1.0), (10**7, 4.0)]:
        p = math.exp(-eps0)
        full = _bisect_eps(_CloneDelta(eps0, n, p, 1e-9, max_points=10**6), eps0, 1e-9)
        coarse = _bisect_eps(_CloneDelta(eps0, n, p, 1e-9, max_points=100), eps0, 1e-9)
        assert full <= coarse <= full * (1 + 1e-4)


def test_cheu2019_default_is_the_papers_corollary_4_7():
    """Cheu et al. 2019 Cor. 4.7 (read in the paper): at n=1e6, delta=1e-6 and the Lemma 4.8
    lambda = 1201.1303 expected randomizers, eps* = 0.69178; the survey's printed form gives 0.636."""
    import math

    n, delta, lam = 10**6, 1e-6, 1201.1303
    eps0 = math.log(2.0 * n / lam - 1.0)
    assert shuffle_amplification(eps0, n, delta, "cheu2019") == pytest.approx(0.69178, abs=2e-5)
    assert shuffle_amplification(eps0, n, delta, "cheu2019", form="exact") == pytest.approx(0.636, abs=1e-3)
    # the proven bound is never below the exact shuffled-RR epsilon (clones with binary RR is an upper bound
    # close to exact; Cor. 4.7 must not undercut it)
    assert shuffle_amplification(eps0, n, delta, "cheu2019") >= shuffle_amplification(
        eps0, n, delta, "clones", randomizer="binary_rr")
    # converse round trip
    e0 = local_epsilon_for(0.69178, n, delta, "cheu2019")
    assert e0 <= eps0 + 1e-6
    assert shuffle_amplification(e0, n, delta, "cheu2019") <= 0.69178 + 1e-5


def test_cheu2019_corollary_4_7_domain_is_enforced():
    from shuffledp.core import OutOfDomainError

    with pytest.raises(OutOfDomainError, match="14 ln"):
        shuffle_amplification(12.0, 10_000, D9, "cheu2019")  # n*flip far below 14 ln(4/delta)


def test_min_users_for_surfaces_the_theorems_domain_error():
    """Review: min_users_for(1.0, 0.1, 1e-9, "erlingsson2019") said "no n <= 2^50 reaches eps_c" though
    the cause is eps0 >= 1/2, outside EFMRTT19's domain at every n."""
    with pytest.raises(OutOfDomainError, match=r"eps0 < 0.5") as e:
        min_users_for(1.0, 0.1, D9, "erlingsson2019")
    assert e.value.parameter == "eps0"
    assert "reaches" not in str(e.value)
    with pytest.raises(OutOfDomainError, match=r"delta < 0.01") as e:
        min_users_for(0.4, 0.1, 0.05, "erlingsson2019")
    assert e.value.parameter == "delta"
    # inside the domain the search still works, and n-dependent domain limits are just "not enough users"
    n = min_users_for(0.4, 0.1, D9, "erlingsson2019")
    assert n > 1000 and shuffle_amplification(0.4, n, D9, "erlingsson2019") <= 0.1
    assert shuffle_amplification(0.4, n - 1, D9, "erlingsson2019") > 0.1  # n is the smallest
    n_cf = min_users_for(1.0, 0.1, D9, "clones_closed_form")  # domain eps0 <= ln(n/(16 ln(2/delta))) grows with n
    assert shuffle_amplification(1.0, n_cf, D9, "clones_closed_form") <= 0.1


@pytest.mark.parametrize("fn", [lambda **kw: shuffle_amplification(1.0, 1000, 1e-6, "blanket", **kw),
                                lambda **kw: local_epsilon_for(0.5, 1000, 1e-6, "blanket", **kw),
                                lambda **kw: min_users_for(1.0, 0.5, 1e-6, "blanket", **kw)])
@pytest.mark.parametrize("opts", [{"k": 5}, {"k": 2}, {"k": 5, "randomizer": "generic"},
                                  {"k": 5, "bound": "bennett"}])
def test_blanket_k_refused_for_generic_randomizer(fn, opts):
    """Review: the blanket k option was silently ignored when randomizer="generic"."""
    with pytest.raises(ValidationError, match="randomizer='krr'") as e:
        fn(**opts)
    assert e.value.parameter == "k"


def test_blanket_k_used_with_krr():
    a = shuffle_amplification(1.0, 1000, 1e-6, "blanket", randomizer="krr", k=2)
    b = shuffle_amplification(1.0, 1000, 1e-6, "blanket", randomizer="krr", k=50)
    assert a != b
