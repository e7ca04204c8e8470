"""A local-oracle task's minimum batch size and per-batch statement come from ``shuffledp.accounting``.

In process (no services): the accountant's numerical clone bound is the one in use, and the
minimum batch size is the smallest n meeting the target (task creation fails when unreachable).
"""

import math

import pytest

from shuffledp.accounting import min_users_for, shuffle_amplification
from shuffledp.core import ValidationError
from shuffledp.service import oracle_privacy as bridge

pytestmark = pytest.mark.timeout(60)


def test_merged_accountant_is_used():
    assert bridge.ACCOUNTANT == "shuffledp.accounting"
    eps, method = bridge.central_epsilon(2.0, 1000, 1e-8)
    assert method.startswith("shuffledp.accounting") and "clones" in method
    assert eps == shuffle_amplification(2.0, 1000, 1e-8, method="clones")


@pytest.mark.parametrize("eps0,eps_c,delta", [(2.0, 1.0, 1e-8), (4.0, 1.0, 1e-8), (1.0, 0.3, 1e-6)])
def test_min_batch_size_is_the_smallest_n_meeting_the_target(eps0, eps_c, delta):
    n = bridge.min_batch_size(eps0, eps_c, delta)
    assert n == min_users_for(eps0, eps_c, delta, method="clones")
    assert bridge.central_epsilon(eps0, n, delta)[0] <= eps_c
    assert bridge.central_epsilon(eps0, n - 1, delta)[0] > eps_c
    # the closed form (FMT21 Thm 3.1) is not even defined at the numerical bound's n
    with pytest.raises(ValidationError):
        assert shuffle_amplification(eps0, n, delta, method="clones_closed_form") > eps_c


def test_target_at_or_above_eps0_needs_one_report():
    assert bridge.min_batch_size(1.0, 1.0, 1e-6) == 1
    assert bridge.min_batch_size(1.0, 2.0, 1e-6) == 1


def test_unreachable_and_bad_targets_name_target_central():
    with pytest.raises(ValidationError, match="unreachable") as e:
        bridge.min_batch_size(8.0, 0.01, 1e-12, n_max=10**6)
    assert e.value.parameter == "target_central"
    for eps_c, delta in [(0.0, 1e-6), (-1.0, 1e-6), (1.0, 0.0), (1.0, 1.0)]:
        with pytest.raises(ValidationError) as e:
            bridge.min_batch_size(2.0, eps_c, delta)
        assert e.value.parameter == "target_central"
    with pytest.raises(ValidationError, match="without local randomization"):
        bridge.min_batch_size(math.inf, 1.0, 1e-6)


def test_no_amplification_claimed_without_local_noise_or_reports():
    assert bridge.central_epsilon(math.inf, 1000, 1e-6)[0] == math.inf
    assert bridge.central_epsilon(2.0, 0, 1e-6)[0] == 2.0
    assert bridge.central_epsilon(2.0, 1, 1e-6)[0] <= 2.0
