"""Issue #3 contract for the mechanisms outside ``test_mechanisms.all_mechanisms()``.

"Each mechanism reports its PrivacyStatement and its noise variance" and "services never accept a
seed": ``test_mechanisms`` checks both for the additive mechanisms; this file covers
``PermuteAndFlip`` / ``ExponentialMechanism`` (statement; no additive noise, so its exact output law
stands in for a variance) and ``DistributedGeometricMechanism`` (statement, variance, and
``release`` refusing seeds, which was only tested for ``share``).
"""

import numpy as np
import pytest

from shuffledp.central import (DistributedGeometricMechanism, ExponentialMechanism, PermuteAndFlip,
                               discrete_laplace_variance)
from shuffledp.core import PrivacyStatement, ValidationError


@pytest.mark.parametrize("nb", ["replace_one", "add_remove_one"])
def test_permute_and_flip_statement(nb):
    m = PermuteAndFlip(0.7, 2.0, neighbouring=nb)
    st = m.privacy()
    assert isinstance(st, PrivacyStatement)
    assert (st.eps, st.delta, st.model, st.neighbouring) == (0.7, 0.0, "central", nb)
    assert ExponentialMechanism is PermuteAndFlip
    p = m.probabilities(np.array([0.0, 1.0, 3.0]))
    assert p.sum() == pytest.approx(1.0) and np.all(p > 0)


def test_distributed_geometric_statement_and_variance():
    m = DistributedGeometricMechanism(0.5, 10, sensitivity=2)
    st = m.privacy()
    assert isinstance(st, PrivacyStatement)
    assert (st.eps, st.delta, st.model, st.gamma) == (0.5, 0.0, "central", 1.0)
    # total noise of the honest parties is discrete Laplace with scale sensitivity / eps
    assert m.variance() == pytest.approx(discrete_laplace_variance(2 / 0.5))
    assert m.share_variance * m.parties == pytest.approx(m.variance())


def test_distributed_geometric_release_refuses_seed():
    m = DistributedGeometricMechanism(1.0, 3)
    x = np.array([1, 0, 1])
    for kwargs in ({"rng": np.random.default_rng(0)}, {"seed": 0}, {"rng": 42}):
        with pytest.raises(ValidationError, match="does not accept an rng or seed"):
            m.release(x, **kwargs)
        with pytest.raises(ValidationError, match="does not accept an rng or seed"):
            m.share(**kwargs)
    assert isinstance(m.release(x), int)
