"""BinomialMechanism checks a caller-given number of trials above the exact-sum cap against the survey bound."""

from __future__ import annotations

import pytest

from shuffledp.central import BinomialMechanism
from shuffledp.central.calibration import binomial_trials_survey
from shuffledp.core import ValidationError


def test_binomial_given_trials_above_exact_cap_must_meet_the_survey_bound():
    """``trials=`` above the exact-check cap (2e7) was accepted with no check at all: with
    eps = 0.001, delta = 1e-10 and N = 20_000_002 the mechanism stated (0.001, 1e-10)-DP while the
    exact hockey-stick delta of Bin(N, 1/2) shifted by 1 at eps = 0.001 is 1.97e-6 (computed by
    the audit with the same O(N) sum binomial_delta uses, without its cap)."""
    with pytest.raises(ValidationError) as err:
        BinomialMechanism(0.001, 1e-10, trials=20_000_002)
    assert err.value.parameter == "trials"


def test_binomial_given_trials_above_cap_at_the_survey_bound_is_accepted():
    n = binomial_trials_survey(0.001, 1e-10)
    assert n > 20_000_000
    m = BinomialMechanism(0.001, 1e-10, trials=n)
    assert m.trials == n and m.exact_delta is None
    assert (m.privacy().eps, m.privacy().delta) == (0.001, 1e-10)
