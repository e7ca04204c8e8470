"""DP-GAN: the generator's statement is the discriminator's DP-SGD accounting; the noise is
N(0, (sigma C)^2) from the project's generator (cryptographic unless seeded)."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("opacus")
pytest.importorskip("sklearn")
import torch  # noqa: E402
from scipy import stats  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402

from shuffledp.accounting import GaussianEvent, PoissonSampledEvent, RdpAccountant, SelfComposedEvent  # noqa: E402
from shuffledp.core.errors import ValidationError  # noqa: E402
from shuffledp.core.rng import SECURE_BIT_GENERATORS  # noqa: E402
from shuffledp.ml import dp_gan  # noqa: E402
from shuffledp.ml.dp_gan import DPGAN, _NumpyNoiseDPOptimizer  # noqa: E402


def _rows(n: int = 600) -> np.ndarray:
    X, y = make_classification(n_samples=n, n_features=4, n_informative=3, n_redundant=0, random_state=0)
    return np.column_stack([np.clip(X / 4, -1, 1), 2 * y - 1])


@pytest.mark.slow
def test_dp_gan_statement_and_samples():
    gan = DPGAN(1.5, 1e-5, epochs=3, batch_size=60, hidden=16, conditional=True, seed=0)
    res = gan.fit(_rows())
    assert res.discriminator_steps == 30 and res.sample_rate == pytest.approx(0.1)  # one private step per iteration
    independent = RdpAccountant().compose(
        SelfComposedEvent(PoissonSampledEvent(1 / 10, GaussianEvent(res.noise_multiplier)), 30)).get_epsilon(1e-5)
    assert res.statement.eps == independent and 1.49 <= res.statement.eps <= 1.5
    assert res.statement.neighbouring == "add_remove_one" and "seeded simulation" in res.statement.note
    S = gan.sample(500)
    assert S.shape == (500, 5) and np.all(np.abs(S) <= 1.0) and set(np.unique(S[:, -1])) == {-1.0, 1.0}


def test_seeded_runs_reproduce_and_default_noise_is_cryptographic(monkeypatch):
    kw = dict(epochs=1, batch_size=30, hidden=8)  # q = 0.1, 10 steps (calibration is slow at large q)
    a, b = DPGAN(2.0, **kw, seed=4), DPGAN(2.0, **kw, seed=4)
    a.fit(_rows(300)), b.fit(_rows(300))
    assert np.array_equal(a.sample(20), b.sample(20))
    drawn = []
    real_as_generator = dp_gan.as_generator

    def spy(seed):
        g = real_as_generator(seed)
        drawn.append((seed, g))
        return g

    monkeypatch.setattr(dp_gan, "as_generator", spy)
    res = DPGAN(2.0, **kw).fit(_rows(300))
    assert drawn[0][0] is None and isinstance(drawn[0][1].bit_generator, SECURE_BIT_GENERATORS)
    assert "cryptographic" in res.statement.note


def test_noise_is_gaussian_with_std_sigma_times_clip():
    p = torch.nn.Parameter(torch.zeros(20000))
    opt = _NumpyNoiseDPOptimizer(torch.optim.SGD([p], lr=0.1), noise_multiplier=1.7, max_grad_norm=0.3,
                                 expected_batch_size=10, noise_rng=np.random.default_rng(5))
    p.summed_grad = torch.zeros(20000)
    opt.add_noise()
    z = p.grad.numpy().astype(float) / (1.7 * 0.3)
    assert stats.kstest(z, "norm").pvalue > 1e-3


def test_dp_gan_bad_input():
    with pytest.raises(ValidationError, match="epsilon"):
        DPGAN(0.0)
    for kwargs, name in [({"max_grad_norm": 0.0}, "max_grad_norm"), ({"label_prior": 0.0}, "label_prior"),
                         ({"seed": -1}, "seed"), ({"epochs": 0}, "epochs")]:
        with pytest.raises(ValidationError) as e:
            DPGAN(1.0, **kwargs)
        assert e.value.parameter == name
    with pytest.raises(ValidationError) as e:
        DPGAN(1.0).fit(np.full((10, 2), 2.0))
    assert e.value.parameter == "X"
    with pytest.raises(ValidationError) as e:
        DPGAN(1.0, conditional=True).fit(np.zeros((10, 3)))
    assert e.value.parameter == "X"


def test_real_rows_are_clipped_per_example_and_every_step_noised(monkeypatch):
    # Spy on the noise step: the summed real-row gradient must be a sum of per-example gradients of
    # norm <= C (so its norm is <= C * batch), and every one of the planned steps must reach it.
    seen = []
    original = _NumpyNoiseDPOptimizer.add_noise

    def spy(self):
        batch = self.params[0].grad_sample.shape[0]
        per_example = torch.cat([p.grad_sample.reshape(batch, -1) for p in self.params], 1).norm(dim=1)
        total = torch.cat([p.summed_grad.reshape(-1) for p in self.params]).norm()
        seen.append((batch, float(per_example.max()) if batch else 0.0, float(total)))
        original(self)

    monkeypatch.setattr(_NumpyNoiseDPOptimizer, "add_noise", spy)
    res = DPGAN(2.0, epochs=1, batch_size=30, hidden=8, max_grad_norm=0.05, seed=1).fit(_rows(300))
    assert len(seen) == res.discriminator_steps == 10
    assert any(raw > 0.05 for _, raw, _ in seen)  # clipping is active at this C
    for batch, _, total in seen:
        assert total <= 0.05 * batch * (1 + 1e-5)
