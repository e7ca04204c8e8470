"""PATE: aggregators and their RDP analysis, cross-checked against the formulas of the papers."""

import math

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402

from shuffledp.accounting.rdp import rdp_pure, rdp_to_epsilon  # noqa: E402
from shuffledp.core.errors import ValidationError  # noqa: E402
from shuffledp.ml.pate import (NO_ANSWER, PATE, confident_gnmax, gnmax, lnmax, log_q_gnmax,  # noqa: E402
                               partition_indices, q_lnmax, rdp_gnmax_data_dependent, rdp_gnmax_data_independent,
                               rdp_lnmax_data_dependent, rdp_threshold_data_independent, teacher_votes)

ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 32.0])


def test_data_independent_curves():
    assert np.allclose(rdp_gnmax_data_independent(ORDERS, 40.0), ORDERS / 1600.0, rtol=1e-15)
    assert np.allclose(rdp_threshold_data_independent(ORDERS, 150.0), ORDERS / (2 * 150.0**2), rtol=1e-15)


def _theorem6_plain(lam, q, mu1, e1, mu2, e2):
    """Theorem 6 of Papernot et al. (2018) in plain arithmetic (no logs)."""
    A = (1 - q) / (1 - (q * math.exp(e2)) ** ((mu2 - 1) / mu2))
    B = math.exp(e1) / q ** (1 / (mu1 - 1))
    return math.log((1 - q) * A ** (lam - 1) + q * B ** (lam - 1)) / (lam - 1)


@pytest.mark.parametrize("counts,sigma", [([180, 40, 20, 10], 40.0), ([90, 5, 3, 2], 20.0), ([230, 10, 5, 5], 50.0)])
def test_gnmax_data_dependent_equals_theorem6_and_prop7(counts, sigma):
    c = np.array([counts])
    # Prop. 7: q <= sum_{i != i*} erfc((n* - n_i) / (2 sigma)) / 2
    q = sum(0.5 * math.erfc((counts[0] - n) / (2 * sigma)) for n in counts[1:])
    assert math.exp(log_q_gnmax(c, sigma)[0]) == pytest.approx(q, rel=1e-10)
    mu2 = sigma * math.sqrt(math.log(1 / q))
    mu1 = mu2 + 1
    e1, e2 = mu1 / sigma**2, mu2 / sigma**2
    # the theorem's conditions hold at these vote histograms
    assert q <= math.exp((mu2 - 1) * e2) / (mu1 / (mu1 - 1) * mu2 / (mu2 - 1)) ** mu2 and q * math.exp(e2) < 1
    got = rdp_gnmax_data_dependent(ORDERS, c, sigma)[0]
    for lam, g in zip(ORDERS, got):
        indep = lam / sigma**2
        if lam < mu1:
            assert g == pytest.approx(min(indep, _theorem6_plain(lam, q, mu1, e1, mu2, e2)), rel=1e-9)
        else:
            assert g == indep
    # a clear plurality: below the data-independent cost
    assert got[3] < ORDERS[3] / sigma**2 and np.all(got <= ORDERS / sigma**2)


def test_gnmax_weak_consensus_falls_back_to_data_independent():
    c = np.array([[30, 29, 28, 13]])
    assert np.array_equal(rdp_gnmax_data_dependent(ORDERS, c, 40.0)[0], ORDERS / 1600.0)


def test_lnmax_data_dependent_equals_2017_theorems():
    counts, g = [120, 20, 10], 0.1
    q = sum((2 + g * (120 - n)) / (4 * math.exp(g * (120 - n))) for n in (20, 10))
    assert q_lnmax(np.array([counts]), g)[0] == pytest.approx(q, rel=1e-12)
    assert q < (math.exp(2 * g) - 1) / (math.exp(4 * g) - 1)
    got = rdp_lnmax_data_dependent(ORDERS, np.array([counts]), g)[0]
    for lam, v in zip(ORDERS, got):
        l = lam - 1
        moment = math.log((1 - q) * ((1 - q) / (1 - math.exp(2 * g) * q)) ** l + q * math.exp(2 * g * l))
        pure = float(rdp_pure(np.array([lam]), 2 * g)[0])  # the data-independent curve of 2g-DP
        assert v == pytest.approx(min(moment / l, pure), rel=1e-9)


def test_gnmax_error_rate_is_below_the_prop7_bound():
    rng = np.random.default_rng(3)
    c = np.tile([60, 35, 5], (40000, 1))
    sigma = 15.0
    wrong = np.mean(gnmax(c, sigma, rng) != 0)
    q = math.exp(log_q_gnmax(c[:1], sigma)[0])
    # a one-sided binomial test that the rate does not exceed the bound
    assert wrong <= q + 4.5 * math.sqrt(q * (1 - q) / len(c))
    assert wrong > 0.5 * q  # the union bound is nearly tight with one close runner-up


def test_lnmax_and_confident_gnmax_behaviour():
    rng = np.random.default_rng(4)
    c = np.array([[50, 0, 0]] * 2000 + [[20, 15, 15]] * 2000)
    assert np.all(lnmax(c[:2000], 1.0, rng) == 0)
    out = confident_gnmax(c, threshold=35, sigma_threshold=5.0, sigma=5.0, rng=rng)
    assert np.mean(out[:2000] != NO_ANSWER) > 0.99 and np.mean(out[2000:] == NO_ANSWER) > 0.99


def test_votes_and_partition():
    rng = np.random.default_rng(0)
    parts = partition_indices(103, 10, rng)
    allidx = np.concatenate(parts)
    assert sorted(allidx.tolist()) == list(range(103)) and {len(p) for p in parts} == {10, 11}

    class Fixed:
        def __init__(self, v):
            self.v = v

        def predict(self, X):
            return np.full(len(X), self.v)

    votes = teacher_votes([Fixed("b"), Fixed("a"), Fixed("b")], np.zeros((4, 2)), np.array(["a", "b", "c"]))
    assert votes.tolist() == [[1, 2, 0]] * 4


@pytest.fixture(scope="module")
def split():
    X, y = make_classification(n_samples=9000, n_features=12, n_informative=8, n_redundant=0, n_classes=4,
                               n_clusters_per_class=1, class_sep=1.5, random_state=0)
    return X[:6000], y[:6000], X[6000:6400], y[6000:6400], X[6400:], y[6400:]


@pytest.mark.parametrize("agg,kw", [("gnmax", {"sigma": 10.0}), ("lnmax", {"gamma": 0.1}),
                                    ("confident_gnmax", {"sigma": 10.0, "threshold": 45.0, "sigma_threshold": 20.0})])
def test_pate_end_to_end(split, agg, kw):
    Xp, yp, Xq, yq, Xt, yt = split
    pate = PATE(LinearDiscriminantAnalysis(), LinearDiscriminantAnalysis(), 60, aggregator=agg, delta=1e-5,
                random_state=1, **kw)
    rep = pate.fit(Xp, yp, Xq, y_public=yq, X_test=Xt, y_test=yt)
    a = pate.orders
    if agg == "gnmax":
        expected = rdp_to_epsilon(a, rep.n_answered * a / kw["sigma"] ** 2, 1e-5)[0]
        assert rep.n_answered == len(Xq)
    elif agg == "confident_gnmax":
        expected = rdp_to_epsilon(a, len(Xq) * a / (2 * 20.0**2) + rep.n_answered * a / 100.0, 1e-5)[0]
        assert 0 < rep.n_answered < len(Xq)
        assert rep.label_accuracy > 0.9  # confident answers are mostly right
    else:
        expected = rdp_to_epsilon(a, len(Xq) * rdp_pure(a, 0.2), 1e-5)[0]
    assert rep.statement.eps == expected
    assert (rep.statement.delta, rep.statement.neighbouring) == (1e-5, "replace_one")
    assert rep.epsilon_data_dependent <= rep.statement.eps
    assert rep.student_accuracy > 0.75
    assert pate.public_labels_.shape == (len(Xq),)
    # the smooth-sensitivity release of the data-dependent cost (GNMax family only)
    if agg == "lnmax":
        assert rep.release is None and rep.epsilon_released is None and "LNMax" in rep.release_note
        return
    rel = rep.release
    assert rel is not None and rep.release_note == ""
    order = rdp_to_epsilon(a, rep.rdp_data_independent, 1e-5)[1]  # default: the data-independent optimum
    assert (rel.order, rel.beta, rel.sigma_ss) == (order, 0.3 / order, 3.0)
    from shuffledp.ml.pate_smooth_sensitivity import rdp_gnmax_at_q, rdp_gnss
    answered = pate.public_labels_ != None  # noqa: E711
    counts = teacher_votes(pate.teachers_, Xq[answered], pate.classes_)
    assert rel.rdp_data_dependent == pytest.approx(rdp_gnmax_at_q(log_q_gnmax(counts, kw["sigma"]), kw["sigma"],
                                                                  order).sum(), rel=1e-12)
    fixed = 0.0 if agg == "gnmax" else len(Xq) * order / (2 * 20.0**2)
    assert rel.rdp_fixed == pytest.approx(fixed, rel=1e-12)
    assert rep.epsilon_released == rdp_to_epsilon(np.array([order]), np.array(
        [max(rel.rdp_noisy, 0.0) + fixed + rdp_gnss([order], rel.beta, 3.0)[0]]), 1e-5)[0]
    # the formal guarantee of everything published: labels plus the release
    with_release = rdp_to_epsilon(a, rep.rdp_data_independent + rdp_gnss(a, rel.beta, 3.0), 1e-5)[0]
    assert rep.statement_with_release.eps == with_release > rep.statement.eps


def test_pate_bad_input():
    X = np.zeros((10, 2))
    y = np.arange(10) % 2
    with pytest.raises(ValidationError, match="aggregator"):
        PATE(LinearDiscriminantAnalysis(), LinearDiscriminantAnalysis(), 2, aggregator="max")
    with pytest.raises(ValidationError, match="sigma"):
        PATE(LinearDiscriminantAnalysis(), LinearDiscriminantAnalysis(), 2, sigma=0.0)
    with pytest.raises(ValidationError, match="n_teachers"):
        PATE(LinearDiscriminantAnalysis(), LinearDiscriminantAnalysis(), 11, random_state=0).fit(X, y, X)
    with pytest.raises(ValidationError, match="counts"):
        gnmax(np.array([1, 2, 3]), 1.0, np.random.default_rng(0))


def test_vectorised_gnmax_bound_equals_scalar_theorem6():
    from shuffledp.ml.pate import rdp_theorem6
    rng = np.random.default_rng(8)
    counts = np.vstack([rng.multinomial(200, p) for p in rng.dirichlet(np.full(5, 0.3), size=300)])
    sigma = 25.0
    got = rdp_gnmax_data_dependent(ORDERS, counts, sigma)
    for row, lq in zip(got, log_q_gnmax(counts, sigma)):
        mu2 = sigma * math.sqrt(-lq)
        ref = np.minimum(ORDERS / sigma**2, rdp_theorem6(ORDERS, float(lq), mu2 + 1, (mu2 + 1) / sigma**2, mu2,
                                                         mu2 / sigma**2))
        assert np.allclose(row, ref, rtol=1e-12, atol=0)
    assert np.any(got < ORDERS / sigma**2)  # the data-dependent bound is active on some queries
