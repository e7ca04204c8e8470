"""One shuffled batch of eps0-LDP reports: its central epsilon and the smallest batch meeting a target.

The numerical clone bound is the one in use (a local-oracle service task's per-batch statement
and minimum batch size), and the minimum batch is the smallest n meeting the target.
"""

import math

import pytest

from shuffledp.accounting import group_privacy, group_privacy_or_none, min_users_for, shuffle_amplification
from shuffledp.accounting.shuffle import min_batch_for_target, shuffled_batch_epsilon
from shuffledp.core import ValidationError

pytestmark = pytest.mark.timeout(60)


def test_merged_accountant_is_used():
    eps, method = shuffled_batch_epsilon(2.0, 1000, 1e-8)
    assert method.startswith("shuffledp.accounting") and "clones" in method
    assert eps == shuffle_amplification(2.0, 1000, 1e-8, method="clones")


@pytest.mark.parametrize("eps0,eps_c,delta", [(2.0, 1.0, 1e-8), (4.0, 1.0, 1e-8), (1.0, 0.3, 1e-6)])
def test_min_batch_size_is_the_smallest_n_meeting_the_target(eps0, eps_c, delta):
    n = min_batch_for_target(eps0, eps_c, delta)
    assert n == min_users_for(eps0, eps_c, delta, method="clones")
    assert shuffled_batch_epsilon(eps0, n, delta)[0] <= eps_c
    assert shuffled_batch_epsilon(eps0, n - 1, delta)[0] > eps_c
    # the closed form (FMT21 Thm 3.1) is not even defined at the numerical bound's n
    with pytest.raises(ValidationError):
        assert shuffle_amplification(eps0, n, delta, method="clones_closed_form") > eps_c


def test_target_at_or_above_eps0_needs_one_report():
    assert min_batch_for_target(1.0, 1.0, 1e-6) == 1
    assert min_batch_for_target(1.0, 2.0, 1e-6) == 1


def test_unreachable_and_bad_targets_name_target_central():
    with pytest.raises(ValidationError, match="unreachable") as e:
        min_batch_for_target(8.0, 0.01, 1e-12, n_max=10**6)
    assert e.value.parameter == "target_central"
    for eps_c, delta in [(0.0, 1e-6), (-1.0, 1e-6), (1.0, 0.0), (1.0, 1.0)]:
        with pytest.raises(ValidationError) as e:
            min_batch_for_target(2.0, eps_c, delta)
        assert e.value.parameter == "target_central"
    with pytest.raises(ValidationError, match="without local randomization"):
        min_batch_for_target(math.inf, 1.0, 1e-6)


def test_no_amplification_claimed_without_local_noise_or_reports():
    assert shuffled_batch_epsilon(math.inf, 1000, 1e-6)[0] == math.inf
    assert shuffled_batch_epsilon(2.0, 0, 1e-6)[0] == 2.0
    assert shuffled_batch_epsilon(2.0, 1, 1e-6)[0] <= 2.0


def test_group_privacy_or_none():
    assert group_privacy_or_none(0.5, 1e-6, 3) == (group_privacy((0.5, 1e-6), 3).eps, group_privacy((0.5, 1e-6), 3).delta)
    assert group_privacy_or_none(2.0, 0.1, 5) is None           # 5 e^8 0.1 >= 1: no guarantee
    assert group_privacy_or_none(math.inf, 0.0, 2) == (math.inf, 0.0)
    assert group_privacy_or_none(math.inf, 1e-9, 2) is None
