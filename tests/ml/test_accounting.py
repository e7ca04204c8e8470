"""The project's accountants inside Opacus: same numbers as the event API and as Opacus's own."""

import math

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("opacus")
from opacus.accountants import PRVAccountant, RDPAccountant, create_accountant  # noqa: E402
from opacus.accountants.utils import get_noise_multiplier  # noqa: E402

from shuffledp.accounting import (GaussianEvent, PldAccountant, PoissonSampledEvent, RdpAccountant,  # noqa: E402
                                  SelfComposedEvent)
from shuffledp.core.errors import ValidationError  # noqa: E402
from shuffledp.ml.accounting import (ShuffledpPldOpacusAccountant, ShuffledpRdpOpacusAccountant,  # noqa: E402
                                     dpsgd_epsilon, noise_multiplier_for)

# (noise multiplier, sample rate, steps, delta): used only here
POINTS = [(1.3, 0.015, 700, 1e-5), (0.9, 0.004, 2500, 1e-6), (2.7, 0.08, 120, 1e-5)]


@pytest.mark.parametrize("sigma,q,T,delta", POINTS)
def test_rdp_equals_opacus_rdp_and_event_api(sigma, q, T, delta):
    ours = ShuffledpRdpOpacusAccountant()
    for _ in range(T):
        ours.step(noise_multiplier=sigma, sample_rate=q)
    assert ours.history == [(sigma, q, T)] and len(ours) == T
    ev = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), T)
    via_events = RdpAccountant().compose(ev).get_epsilon(delta)
    assert ours.get_epsilon(delta) == via_events
    theirs = RDPAccountant()
    theirs.history = [(sigma, q, T)]
    eps_opacus = theirs.get_epsilon(delta)
    # same RDP curve and conversion (Balle et al. 2020); ours uses a finer order grid, so it may only
    # be smaller, and by little
    assert eps_opacus - 0.02 * eps_opacus <= via_events <= eps_opacus + 1e-9


@pytest.mark.parametrize("sigma,q,T,delta", POINTS[::2])
def test_pld_equals_opacus_prv_within_its_error(sigma, q, T, delta):
    ours = ShuffledpPldOpacusAccountant()
    ours.history = [(sigma, q, T)]
    ev = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), T)
    assert ours.get_epsilon(delta) == PldAccountant().compose(ev).get_epsilon(delta)
    prv = PRVAccountant()
    prv.history = [(sigma, q, T)]
    # Opacus's PRV returns an upper bound with eps_error 0.01 (and delta_error delta/1000)
    assert abs(ours.get_epsilon(delta) - prv.get_epsilon(delta)) <= 0.02
    assert ours.get_epsilon(delta) <= prv.get_epsilon(delta) + 1e-9


def test_registered_and_heterogeneous_history():
    acc = create_accountant("shuffledp-rdp")
    assert isinstance(acc, ShuffledpRdpOpacusAccountant)
    assert isinstance(create_accountant("shuffledp-pld"), ShuffledpPldOpacusAccountant)
    assert acc.get_epsilon(1e-5) == 0.0
    for s in (1.0, 1.0, 2.0, 2.0, 2.0, 1.0):
        acc.step(noise_multiplier=s, sample_rate=0.01)
    assert acc.history == [(1.0, 0.01, 2), (2.0, 0.01, 3), (1.0, 0.01, 1)] and len(acc) == 6
    expected = (RdpAccountant().compose(SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 3))
                .compose(SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(2.0)), 3)).get_epsilon(1e-5))
    assert acc.get_epsilon(1e-5) == pytest.approx(expected, rel=1e-12)
    state = acc.state_dict()
    other = ShuffledpRdpOpacusAccountant()
    other.load_state_dict(state)
    assert other.get_epsilon(1e-5) == acc.get_epsilon(1e-5)


# (target eps, delta, sample rate, steps): used only here
CALIBRATION = [(1.7, 1e-5, 0.03, 400), (3.5, 1e-6, 0.006, 1500), (0.9, 1e-5, 0.12, 40)]


@pytest.mark.parametrize("eps,delta,q,T", CALIBRATION)
def test_noise_multiplier_matches_opacus(eps, delta, q, T):
    sigma = noise_multiplier_for(eps, delta, q, T)
    sigma_opacus = get_noise_multiplier(target_epsilon=eps, target_delta=delta, sample_rate=q, steps=T,
                                        accountant="rdp")
    # both bisections stop within epsilon_tolerance = 0.01 of the target
    assert eps - 0.01 <= dpsgd_epsilon(sigma, q, T, delta) <= eps
    theirs = RDPAccountant()
    theirs.history = [(sigma, q, T)]
    assert theirs.get_epsilon(delta) <= eps + 0.01
    assert abs(sigma - sigma_opacus) <= 0.01 * sigma_opacus


def test_noise_multiplier_pld_and_errors():
    sigma = noise_multiplier_for(1.0, 1e-5, 0.05, 100, accountant="pld")
    assert 0.99 <= dpsgd_epsilon(sigma, 0.05, 100, 1e-5, "pld") <= 1.0
    # PLD is tighter than RDP, so it needs less noise
    assert sigma < noise_multiplier_for(1.0, 1e-5, 0.05, 100)
    for kw, p in [({"target_epsilon": -1.0}, "target_epsilon"), ({"delta": 0.0}, "delta"),
                  ({"sample_rate": 0.0}, "sample_rate"), ({"steps": 0}, "steps")]:
        args = {"target_epsilon": 1.0, "delta": 1e-5, "sample_rate": 0.01, "steps": 10} | kw
        with pytest.raises(ValidationError) as e:
            noise_multiplier_for(**args)
        assert e.value.parameter == p
    with pytest.raises(ValidationError, match="accountant"):
        noise_multiplier_for(1.0, 1e-5, 0.01, 10, accountant="moments")
    with pytest.raises(ValidationError, match="not reachable"):
        noise_multiplier_for(1e-9, 1e-12, 1.0, 10**6)


@pytest.mark.slow
def test_dpsgd_digits_mlp_reports_the_accountant_epsilon():
    pytest.importorskip("sklearn")
    import torch
    from opacus import PrivacyEngine
    from sklearn.datasets import load_digits
    from torch import nn

    torch.manual_seed(0)
    X, y = load_digits(return_X_y=True)
    Xt, yt = torch.tensor(X[:1400] / 16.0, dtype=torch.float32), torch.tensor(y[:1400])
    Xv, yv = torch.tensor(X[1400:] / 16.0, dtype=torch.float32), torch.tensor(y[1400:])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(Xt, yt), batch_size=50)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    engine = PrivacyEngine(accountant="shuffledp-rdp")
    model, opt, loader = engine.make_private_with_epsilon(module=model, optimizer=opt, data_loader=loader,
                                                          target_epsilon=2.0, target_delta=1e-5, epochs=4,
                                                          max_grad_norm=1.0)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(4):
        for xb, yb in loader:
            if len(xb) == 0:
                continue
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
    q = 1 / len(loader)
    steps = len(engine.accountant)
    assert steps == 4 * len(loader)
    reported = engine.get_epsilon(1e-5)
    independent = RdpAccountant().compose(
        SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(opt.noise_multiplier)), steps)).get_epsilon(1e-5)
    assert reported == independent
    assert 2.0 - 0.01 <= reported <= 2.0
    with torch.no_grad():
        acc = float((model(Xv).argmax(1) == yv).float().mean())
    assert acc > 0.6, acc
    assert math.isfinite(opt.noise_multiplier) and opt.noise_multiplier > 0.5
