"""DP-GAN: the generator's statement is the discriminator's DP-SGD accounting."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("opacus")
pytest.importorskip("sklearn")
from sklearn.datasets import make_classification  # noqa: E402

from shuffledp.accounting import GaussianEvent, PoissonSampledEvent, RdpAccountant, SelfComposedEvent  # noqa: E402
from shuffledp.core.errors import ValidationError  # noqa: E402
from shuffledp.ml.dp_gan import DPGAN  # noqa: E402


@pytest.mark.slow
def test_dp_gan_statement_and_samples():
    X, y = make_classification(n_samples=600, n_features=4, n_informative=3, n_redundant=0, random_state=0)
    rows = np.column_stack([np.clip(X / 4, -1, 1), 2 * y - 1])
    gan = DPGAN(1.5, 1e-5, epochs=3, batch_size=60, seed=0)
    res = gan.fit(rows)
    assert res.discriminator_steps == 2 * 3 * 10
    independent = RdpAccountant().compose(
        SelfComposedEvent(PoissonSampledEvent(1 / 10, GaussianEvent(res.noise_multiplier)), 60)).get_epsilon(1e-5)
    assert res.statement.eps == independent and 1.49 <= res.statement.eps <= 1.5
    assert res.statement.neighbouring == "add_remove_one"
    S = gan.sample(500)
    assert S.shape == (500, 5) and np.all(np.abs(S) <= 1.0)


def test_dp_gan_bad_input():
    with pytest.raises(ValidationError, match="epsilon"):
        DPGAN(0.0)
    with pytest.raises(ValidationError, match="X"):
        DPGAN(1.0).fit(np.full((10, 2), 2.0))
