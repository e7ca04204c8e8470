"""A shuffle protocol calibrated for n users must not silently run on a batch of another size.

Regression: ``protocol("cnt_2m", epsilon=0.9)`` (n silently 10^6) ran on 5000 users and
released with (inf, 0)-DP; ``hist_kr`` built for 10^6 users and run on 10^4 fell back to its
local eps_l = 8.27. Both returned an estimate without an error.
"""

import numpy as np
import pytest

from shuffledp import pipeline
from shuffledp.core.errors import ValidationError
from shuffledp.core.privacy import PrivacyStatement
from shuffledp.shuffle import protocol


def test_registry_requires_n_for_shuffle_protocols():
    with pytest.raises(ValidationError, match="n="):
        protocol("cnt_2m", epsilon=0.9)
    with pytest.raises(ValidationError, match="n="):
        protocol("hist_kr", epsilon=0.9, delta=1e-6, d=10)


def test_registry_allows_omitting_n_for_local_and_central_baselines():
    assert protocol("ldp_rr", epsilon=0.9).privacy().eps <= 0.9
    assert protocol("cdp_laplace_count", epsilon=0.9).privacy().eps <= 0.9


@pytest.mark.parametrize("entry", [pipeline.run, pipeline.simulate])
def test_fewer_users_than_calibrated_is_refused(entry, rng):
    p = protocol("cnt_2m", epsilon=0.9, delta=1e-6, n=10**4)
    with pytest.raises(ValidationError, match="calibrated for n=10000"):
        entry(p, (rng.random(5000) < 0.5).astype(np.int64), rng)
    kr = protocol("hist_kr", epsilon=0.9, delta=1e-6, n=10**6, d=10)
    with pytest.raises(ValidationError, match="calibrated for n=1000000"):
        entry(kr, rng.integers(0, 10, size=10**4), rng)


@pytest.mark.parametrize("entry", [pipeline.run, pipeline.simulate])
@pytest.mark.parametrize("name,kw", [("cnt_rr", {"calibration": "clones"}), ("cnt_2m", {}), ("hist_kr", {"d": 10})])
def test_calibrated_and_larger_batches_release_with_at_most_the_target(entry, name, kw, rng):
    n = 4000 if name != "hist_kr" else 20000
    kw = dict(kw)
    d = kw.get("d", 2)
    p = protocol(name, epsilon=0.9, delta=1e-6, n=n, **kw)
    for m in (n, 2 * n):
        x = rng.integers(0, d, size=m)
        est = entry(p, x, rng)
        assert est.n == m
        assert est.privacy == p.privacy(m)
        assert est.privacy.eps <= 0.9 and est.privacy.delta <= 1e-6


@pytest.mark.parametrize("entry", [pipeline.run, pipeline.simulate])
def test_release_weaker_than_target_is_refused(entry, rng):
    """Even at n_users >= protocol.n, a statement weaker than the target is never released."""
    p = protocol("cnt_rr", epsilon=0.9, delta=1e-6, n=4000, calibration="clones")
    p.privacy = lambda n=None: PrivacyStatement(0.95, 1e-6, "shuffle")  # type: ignore[method-assign]
    with pytest.raises(ValidationError, match="weaker than the target"):
        entry(p, (rng.random(4000) < 0.5).astype(np.int64), rng)
    p.privacy = lambda n=None: PrivacyStatement(0.9, 2e-6, "shuffle")  # type: ignore[method-assign]
    with pytest.raises(ValidationError, match="weaker than the target"):
        entry(p, (rng.random(4000) < 0.5).astype(np.int64), rng)
