"""Robust split-and-mix protocols must be secure among the floor(gamma n) honest parties alone.

Regression: cnt_sgm at n = 10^4, eps = 0.9, delta = 1e-6, gamma = 0.5 sized its shares for n
parties and stated delta = 8.2e-7, but among the 5000 honest parties the shares give
sigma = 19.6 bits, i.e. delta = 4.3e-6 > target. rsum_dsg had the same sizing.
"""

import math

import pytest

from shuffledp.central.distributed import split_and_mix_delta
from shuffledp.shuffle import protocol
from shuffledp.shuffle._common import split_and_mix_sigma_at

GRID = [(n, eps, gamma) for n in (10**3, 10**4, 10**5, 10**6) for eps in (0.5, 0.9, 2.0)
        for gamma in (0.1, 0.5, 1.0)]


def _delta_among_honest(p, gamma: float) -> float:
    h = math.floor(gamma * p.n)
    # uncapped: design n above h, so the BBGN bound is evaluated among exactly h parties
    sigma = split_and_mix_sigma_at(p.n_messages, h, p.modulus, math.inf, h + 1)
    assert sigma > 0
    return split_and_mix_delta(p.epsilon, sigma)


@pytest.mark.parametrize("name", ["cnt_sgm", "rsum_dsg"])
@pytest.mark.parametrize("n,eps,gamma", GRID)
def test_delta_with_only_gamma_n_honest_parties_meets_the_statement(name, n, eps, gamma):
    delta = 1e-6
    p = protocol(name, epsilon=eps, delta=delta, n=n, gamma=gamma)
    st = p.privacy(n)
    assert _delta_among_honest(p, gamma) <= st.delta <= delta, (name, n, eps, gamma)
    assert st.eps <= eps
    # with more users present the guarantee (still relying on gamma*self.n honest ones) is no weaker
    assert p.privacy(2 * n).delta <= delta


def test_reviewer_example_cnt_sgm():
    p = protocol("cnt_sgm", epsilon=0.9, delta=1e-6, n=10**4, gamma=0.5)
    assert _delta_among_honest(p, 0.5) <= p.privacy().delta <= 1e-6


@pytest.mark.parametrize("name", ["cnt_sgm", "rsum_dsg"])
def test_too_few_honest_parties_is_refused(name):
    from shuffledp.core.errors import ValidationError

    with pytest.raises(ValidationError, match="honest parties"):
        protocol(name, epsilon=0.9, delta=1e-6, n=10, gamma=0.2)
