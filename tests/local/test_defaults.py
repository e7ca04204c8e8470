"""Mechanisms with variants or tuning knobs pick, by default, the one with the smallest stated
variance at the given parameters, and say which they picked.

Frequency oracles are ranked by ``uniform_variance()`` (the mean variance of the items' estimates
when the true distribution is uniform), mean oracles by ``worst_variance()`` (values at -1 and 1).
"""

from __future__ import annotations

import math

import pytest

from shuffledp.local.hadamard import HadamardResponse
from shuffledp.local.hashing import LocalHashing, OptimizedLocalHashing
from shuffledp.local.mean import HybridMechanism, PiecewiseMechanism
from shuffledp.local.subset import SubsetSelection

EPS = [0.5, 1.0, 2.0, 4.0]
D = [16, 1024]
REL = 1e-12  # the default is one of the candidates: equal up to float noise at worst


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("d", D)
def test_hadamard_default_is_the_smaller_variance(eps, d):
    m = HadamardResponse(eps, d)
    v = m.uniform_variance()
    for variant in ("general", "high_privacy"):
        assert v <= HadamardResponse(eps, d, variant=variant).uniform_variance() * (1 + REL)
    assert m.variant is None and m.variant_used in ("general", "high_privacy")
    assert f"variant_used={m.variant_used!r}" in repr(m)


def test_hadamard_issue_case():
    """eps = 1, d = 1024: the general scheme's two blocks cost 1.54x the single block's variance."""
    m = HadamardResponse(1.0, 1024)
    general = HadamardResponse(1.0, 1024, variant="general")
    assert m.variant_used == "high_privacy" and m.blocks == 1
    assert general.uniform_variance() / m.uniform_variance() == pytest.approx(1.537, abs=1e-3)
    n = 10**6
    assert m.variance(n, 1 / 1024) <= general.variance(n, 1 / 1024, block_mass=1023 / 1024)


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("d", D)
def test_olh_default_g_is_the_smallest_variance(eps, d):
    m = OptimizedLocalHashing(eps, d)
    v = m.uniform_variance()
    for g in range(2, int(3 * math.exp(eps)) + 4):  # every g up to 3 (e^eps + 1)
        assert v <= LocalHashing(eps, d, g).uniform_variance() * (1 + REL), g
    assert m.g_chosen and f"g={m.g}" in repr(m)


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("d", D)
def test_subset_default_omega_is_the_smallest_variance(eps, d):
    m = SubsetSelection(eps, d)
    v = m.uniform_variance()
    for w in range(1, d):
        assert v <= SubsetSelection(eps, d, omega=w).uniform_variance() * (1 + REL), w
    assert m.omega_chosen and f"omega={m.omega}" in repr(m)


@pytest.mark.parametrize("cls", [PiecewiseMechanism, HybridMechanism])
@pytest.mark.parametrize("eps", EPS + [8.0, 12.0])
@pytest.mark.parametrize("dim", [4, 16])
def test_piecewise_default_k_is_the_smallest_worst_variance(cls, eps, dim):
    m = cls(eps, dim)
    v = m.worst_variance()
    for k in range(1, dim + 1):
        assert v <= cls(eps, dim, k=k).worst_variance() * (1 + REL), k
    assert m.k_chosen and f"k={m.k}" in repr(m)


def test_pure_variance_default_merit_is_the_uniform_point():
    m = SubsetSelection(1.0, 16)
    assert m.uniform_variance() == pytest.approx(m.variance(1, 1 / 16), rel=1e-15)
