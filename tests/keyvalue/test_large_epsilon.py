"""Key-value mechanisms at large epsilon (audit of shuffledp.local.keyvalue).

The key-value mechanisms sample probabilities such as ``e^eps / (e^eps + 1)`` computed in double
precision with ``rng.random() < p`` (outcomes ``k / 2^53``). The complementary probability
(about ``e^-eps``) is then only known to an absolute ``2^-53``, so the realised likelihood ratio is
off by a relative ``~ e^eps 2^-53``: on ``main`` PCKV-GRR/UE at eps = 36 are ln-ratio 36.044-LDP while
stating 36, and at eps >= 37 (PrivKV(M) at eps >= ~74) ``p`` rounds to 1.0 and a report reveals
the pair exactly (infinite ratio) under a statement of eps. A mechanism must either refuse such
an eps with a ValidationError naming ``epsilon`` or meet its statement exactly.
"""

import math

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.local.keyvalue import keyvalue_mechanism
from shuffledp.local.verify import worst_case_log_ratio
from tests.keyvalue.test_privacy import CASES, D, INPUTS, all_reports

_CASES = [(n, {k: v for k, v in p.items() if k != "c_frac"}) for n, p in CASES]


def _worst(m):
    if m.name == "privkvm":  # worst case: public fake means at the extremes
        m.fake_means[:] = np.array([1.0, -1.0, 0.3])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        probs = np.stack([m.probabilities(all_reports(m), x) for x in INPUTS])
        hi, lo = probs.max(axis=0), probs.min(axis=0)
        live = hi > 0
        return math.inf if np.any(lo[live] <= 0) else float(np.max(np.log(hi[live]) - np.log(lo[live])))


@pytest.mark.parametrize("eps", [36.0, 40.0, 80.0, 800.0])
@pytest.mark.parametrize("name,params", _CASES)
def test_large_epsilon_refused_or_met(name, params, eps):
    try:
        m = keyvalue_mechanism(name, eps, D, **params)
    except ValidationError as e:
        assert e.parameter == "epsilon"
        return
    stated = m.privacy().eps
    assert stated <= eps
    assert _worst(m) <= stated + 1e-9, (name, params, eps)


@pytest.mark.parametrize("eps", [16.0, 700.0])
@pytest.mark.parametrize("name,params", _CASES)
def test_largest_accepted_epsilon_still_met(name, params, eps):
    """The cap was 16 while probabilities were sampled off the grid; with exact (calibrated) sampling
    it is 700, as for the mean oracles (the exact check is tests/keyvalue/test_exact_sampling.py)."""
    m = keyvalue_mechanism(name, eps, D, **params)
    assert m.privacy().eps <= eps
    assert _worst(m) <= m.privacy().eps + 1e-9


def test_rappor_harmony_keeps_its_exact_large_epsilon():
    """RAPPOR+Harmony rounds q up to the 2^-20 grid (exact at any eps <= 700): not capped."""
    m = keyvalue_mechanism("rappor-harmony", 80.0, D)
    assert m.privacy().eps == 80.0
