"""Membership inference and the empirical epsilon auditor."""

import math
import zlib

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from shuffledp.core.errors import ValidationError  # noqa: E402
from shuffledp.local.registry import FREQUENCY_ORACLES, MEAN_ORACLES, frequency_oracle, mean_oracle  # noqa: E402
from shuffledp.ml.audit import audit_local_randomizer, audit_training, clopper_pearson, epsilon_lower_bound  # noqa: E402
from shuffledp.ml.erm import DPLogisticRegression  # noqa: E402
from shuffledp.ml.membership_inference import attack_metrics, loss_threshold_attack, shadow_model_attack  # noqa: E402


@pytest.fixture(scope="module")
def overfit_data():
    X, y = make_classification(n_samples=1200, n_features=100, n_informative=10, flip_y=0.2, random_state=0)
    X = X / np.sqrt(100)
    return X[:150], y[:150], X[150:300], y[150:300], X[300:], y[300:]


def test_attack_metrics_known_values():
    r = attack_metrics([3, 4, 5, 6], [0, 1, 2, 3.5])
    assert r.auc == pytest.approx(15 / 16) and r.advantage == pytest.approx(0.75)
    assert not r.low_fpr_resolved
    rng = np.random.default_rng(0)
    r = attack_metrics(rng.normal(size=5000), rng.normal(size=5000))
    assert abs(r.auc - 0.5) < 0.03 and r.low_fpr_resolved and r.tpr_at_low_fpr < 0.01
    with pytest.raises(ValidationError):
        attack_metrics([], [1.0])


def test_mia_nonprivate_overfit_vs_strongly_private(overfit_data):
    Xm, ym, Xo, yo, Xs, ys = overfit_data
    target = LogisticRegression(C=1e4, max_iter=5000).fit(Xm, ym)
    assert target.score(Xm, ym) - target.score(Xo, yo) > 0.2  # overfit
    loss = loss_threshold_attack(target, Xm, ym, Xo, yo)
    assert loss.auc > 0.65 and loss.advantage > 0.3 and loss.threshold_advantage > 0.15  # 0.65: 4.5 SE above 1/2
    shadow = shadow_model_attack(lambda: LogisticRegression(C=1e4, max_iter=5000), Xs, ys, 3, target,
                                 Xm, ym, Xo, yo, np.random.default_rng(1))
    assert shadow.auc > 0.65
    private = DPLogisticRegression(0.1, data_norm=1.5, random_state=2).fit(Xm, ym)
    priv = loss_threshold_attack(private, Xm, ym, Xo, yo)
    # 150 vs 150: the AUC's standard error under no leakage is about 0.033
    assert abs(priv.auc - 0.5) < 0.1
    # eps-DP bounds the advantage of any attack by e^eps - 1 (Yeom et al. 2018, Thm 1), in expectation
    assert priv.advantage < (math.exp(0.1) - 1) + 0.15


def test_clopper_pearson_exact():
    lo, hi = clopper_pearson(0, 10, 0.05)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-9)
    lo, hi = clopper_pearson(10, 10, 0.05)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 10), rel=1e-9)
    with pytest.raises(ValidationError):
        clopper_pearson(3, 2, 0.05)


def test_lower_bound_of_randomized_response_is_close_and_valid():
    rng = np.random.default_rng(5)
    eps = 1.5
    p = math.exp(eps) / (1 + math.exp(eps))
    s0 = (rng.random(40000) > p).astype(float)  # binary RR on input 0: outputs 1 w.p. 1-p
    s1 = (rng.random(40000) < p).astype(float)
    r = epsilon_lower_bound(s0, s1, alpha=0.01)
    assert 1.3 < r.epsilon_lower <= eps
    with pytest.raises(ValidationError, match="alpha"):
        epsilon_lower_bound(s0, s1, alpha=0.0)


@pytest.mark.parametrize("name", sorted(FREQUENCY_ORACLES) + sorted(MEAN_ORACLES))
def test_auditor_never_exceeds_stated_epsilon_of_registered_randomizers(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    eps = 1.0
    if name in FREQUENCY_ORACLES:
        o, x0, x1 = frequency_oracle(name, eps, 8), 0, 1
    else:
        o, x0, x1 = mean_oracle(name, eps), -1.0, 1.0
    r = audit_local_randomizer(o, x0, x1, 20000, rng, alpha=1e-3)
    # the auditor sees one report: a longitudinal oracle's one-report guarantee (eps_1 <= eps_perm)
    # is the bound it must respect, and the stated eps (eps_perm) a looser one
    one_report = getattr(o, "epsilon_one", None)
    assert r.epsilon_lower <= o.privacy().eps
    assert one_report is None or r.epsilon_lower <= one_report
    if name != "rappor" and one_report is None:  # the others' likelihood-ratio test is near optimal
        assert r.epsilon_lower > 0.6


def test_auditor_catches_a_planted_bug():
    """A randomizer that claims eps = 1 but randomizes with eps = 2.5."""
    claimed = frequency_oracle("grr", 1.0, 8)
    real = frequency_oracle("grr", 2.5, 8)

    class Broken:
        randomize = staticmethod(real.randomize)
        probabilities = staticmethod(claimed.probabilities)

        def privacy(self):
            return claimed.privacy()

    r = audit_local_randomizer(Broken(), 0, 1, 20000, np.random.default_rng(9), alpha=1e-3)
    assert r.epsilon_lower > Broken().privacy().eps + 0.5


@pytest.mark.slow
def test_training_audit_dp_erm_and_a_broken_one():
    X, y = make_classification(n_samples=40, n_features=3, n_informative=2, n_redundant=0, random_state=1)
    X = X / np.linalg.norm(X, axis=1).max()
    canary = np.array([1.0, 0.0, 0.0])

    def fitter(eps):
        return lambda Xd, yd, g: DPLogisticRegression(eps, method="output", regularization=0.05,
                                                      random_state=g).fit(Xd, yd)

    def score(model):
        return float(model.decision_function(canary[None, :])[0])  # canary labelled 1: large margin = in

    honest = audit_training(fitter(1.0), X, y, canary, 1, score, 300, np.random.default_rng(2))
    assert honest.epsilon_lower <= 1.0
    # the same training run with 100x less noise, still claiming eps = 1
    broken = audit_training(fitter(100.0), X, y, canary, 1, score, 300, np.random.default_rng(3))
    assert broken.epsilon_lower > 1.0


def dpsgd_epsilon(sigma, q, T, delta, accountant="rdp"):
    from shuffledp.accounting import GaussianEvent, PldAccountant, PoissonSampledEvent, RdpAccountant, SelfComposedEvent
    acc = PldAccountant() if accountant == "pld" else RdpAccountant()
    return acc.compose(SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), T)).get_epsilon(delta)


@pytest.mark.slow
@pytest.mark.parametrize("sigma,q,T", [(0.8, 0.05, 100), (1.0, 0.1, 50)])
def test_dpsgd_gradient_canary_audit_respects_accountants_and_catches_undercounting(sigma, q, T):
    from shuffledp.ml.audit import audit_dpsgd_gradient_canary

    delta = 1e-3
    r = audit_dpsgd_gradient_canary(sigma, q, T, 100_000, np.random.default_rng(int(sigma * 100 + T)), delta=delta)
    pld = dpsgd_epsilon(sigma, q, T, delta, "pld")
    assert r.epsilon_lower <= pld <= dpsgd_epsilon(sigma, q, T, delta)
    assert r.epsilon_lower > 0.6 * pld  # the strongest canary comes close to the tight accountant
    # an accountant that charged for 1.6x the noise actually added would be caught
    assert r.epsilon_lower > dpsgd_epsilon(1.6 * sigma, q, T, delta)
