"""One encode -> shuffle -> analyze path: privacy memoized in the Protocol base, and the
pipeline's repeated releases (``simulations``), transport step (``deliver``) and ``simulate``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from shuffledp import pipeline
from shuffledp.core.errors import ValidationError
from shuffledp.core.estimate import Estimate
from shuffledp.core.privacy import PrivacyStatement
from shuffledp.shuffle import protocol
from shuffledp.shuffle.base import Protocol
from shuffledp.shuffle.registry import available_protocols, protocol_class, protocol_parameters


class CountingPrivacy(Protocol):
    """Randomized response on bits whose accountant counts its calls."""

    name = "counting_privacy"
    model = "shuffle"

    def __init__(self, epsilon: float, delta: float, n: int) -> None:
        super().__init__(epsilon, delta, n)
        self.accountant_calls: list[int] = []

    def encode(self, values, rng):
        x = np.asarray(values, dtype=np.int64)
        flip = rng.random(x.size) < 0.5
        return {"y": np.where(flip, rng.integers(0, 2, x.size), x)}

    def aggregate(self, messages):
        return np.array([int(messages["y"].sum())])

    def estimate(self, statistic, n):
        return Estimate(np.array([2.0 * statistic[0] - n / 2]), 1.0, n, self.privacy(n), kind="count")

    def summarize(self, values):
        return np.bincount(np.asarray(values, dtype=np.int64), minlength=2)

    def simulate_statistic(self, data, rng):
        return np.array([rng.binomial(int(data[1]), 0.75) + rng.binomial(int(data[0]), 0.25)])

    def _privacy(self, n):
        self.accountant_calls.append(n)
        return PrivacyStatement(self.epsilon * (self.n / n) ** 0.5, self.delta, "shuffle")

    @property
    def messages_per_user(self):
        return 1.0

    @property
    def bits_per_message(self):
        return 1.0


def test_privacy_is_computed_once_per_n():
    p = CountingPrivacy(0.5, 1e-6, 100)
    first = p.privacy()
    assert p.privacy(100) is first and p.privacy(np.int64(100)) is first
    assert p.privacy(400).eps == pytest.approx(0.25)
    for _ in range(5):
        p.privacy(400)
        p.privacy()
    assert p.accountant_calls == [100, 400]
    with pytest.raises(ValidationError, match="n"):
        p.privacy(0)
    assert p.accountant_calls == [100, 400]


def test_releases_reuse_the_memoized_statement(rng):
    p = CountingPrivacy(0.5, 1e-6, 200)
    x = (rng.random(200) < 0.3).astype(np.int64)
    for est in itertools.islice(pipeline.simulations(p, x, rng), 20):
        assert est.privacy.eps == 0.5
    pipeline.run(p, x, rng)
    assert p.accountant_calls == [200]


def test_privacy_is_an_abstract_method_every_protocol_implements():
    assert "_privacy" in Protocol.__abstractmethods__
    for name in available_protocols():
        cls = protocol_class(name)
        assert not cls.__abstractmethods__ and cls._privacy is not Protocol._privacy, name


@pytest.mark.parametrize("name", available_protocols())
def test_one_variance_signature(name):
    """Every protocol's variance is ``variance(n=None, value=0.0)``: one coordinate's variance for n
    users when its true value is ``value`` (multi-attribute protocols add attribute_variance)."""
    import inspect

    params = inspect.signature(protocol_class(name).variance).parameters
    assert [(p.name, p.default) for p in params.values()] == [
        ("self", inspect.Parameter.empty), ("n", None), ("value", 0.0)], name


def test_registry_has_no_dangling_entries():
    """Every registry entry names a module that defines the protocol, one protocol per module
    (``uniformity`` holds the two testers); the unimplemented survey protocols are not entries."""
    from shuffledp.shuffle.registry import NOT_IMPLEMENTED, PROTOCOL_MODULES

    assert available_protocols() == list(PROTOCOL_MODULES)
    assert not set(NOT_IMPLEMENTED) & set(PROTOCOL_MODULES)
    per_module: dict[str, list[str]] = {}
    for name, module in PROTOCOL_MODULES.items():
        per_module.setdefault(module, []).append(name)
    assert {m: v for m, v in per_module.items() if len(v) > 1} == {"uniformity": ["put", "aut"]}


@pytest.mark.parametrize("name", available_protocols())
def test_no_registered_protocol_bypasses_the_memoized_privacy(name):
    cls = protocol_class(name)
    assert cls.privacy is Protocol.privacy, f"{name} overrides privacy(); implement _privacy(n) instead"


def test_simulations_summarize_once_and_match_simulate(rng, monkeypatch):
    p = protocol("cnt_2m", epsilon=0.9, delta=1e-6, n=5000)
    assert p.has_exact_simulation
    x = (rng.random(5000) < 0.4).astype(np.int8)
    calls = []
    real = type(p).summarize
    monkeypatch.setattr(type(p), "summarize", lambda self, v: calls.append(1) or real(self, v))
    many = [e.values[0] for e in itertools.islice(pipeline.simulations(p, x, 7), 5)]
    assert len(calls) == 1
    one = [pipeline.simulate(p, x, g).values[0] for g in [np.random.default_rng(7)]]
    assert one == many[:1]
    # each release is an independent draw (not one cached statistic)
    assert len(set(many)) > 1


def test_simulations_without_exact_simulation_are_full_runs(rng, monkeypatch):
    class NoSimulation(CountingPrivacy):
        simulate_statistic = Protocol.simulate_statistic

    p = NoSimulation(0.5, 1e-6, 300)
    assert not p.has_exact_simulation
    x = (rng.random(300) < 0.5).astype(np.int64)
    runs = []
    real = pipeline.run
    monkeypatch.setattr(pipeline, "run", lambda *a, **k: runs.append(1) or real(*a, **k))
    ests = list(itertools.islice(pipeline.simulations(p, x, rng), 3))
    assert len(runs) == 3 and all(e.n == 300 for e in ests)


def test_simulations_apply_the_batch_size_check(rng):
    p = protocol("cnt_2m", epsilon=0.9, delta=1e-6, n=10**4)
    with pytest.raises(ValidationError, match="calibrated for n=10000"):
        next(pipeline.simulations(p, np.zeros(5000, dtype=np.int8), rng))


def test_deliver_shuffles_only_in_the_shuffle_model(rng):
    local = protocol("ldp_rr", epsilon=1.0)
    msgs = local.encode(np.ones(50, dtype=np.int8), rng)
    assert pipeline.deliver(local, msgs, rng) is msgs
    murs = protocol("murs", epsilon=0.9, delta=1e-6, n=5000, d=8, n_fake=300)
    sent = murs.encode(rng.integers(0, 8, size=5000), rng)
    got = pipeline.deliver(murs, sent, rng)
    n_sent = len(next(iter(sent.values())))
    assert len(next(iter(got.values()))) > n_sent  # the shufflers' fake messages were added
    with pytest.raises(ValidationError, match="do not accept a seed"):
        pipeline.deliver(murs, sent, rng, production=True)


def test_registry_names_a_parameter_the_protocol_does_not_take():
    assert protocol_parameters("cnt_2m") == ("ones_fraction",)
    with pytest.raises(ValidationError, match="has no parameter 'd'") as exc:
        protocol("cnt_2m", epsilon=0.9, delta=1e-6, n=5000, d=7)
    assert exc.value.parameter == "d"
