"""Duchi and Harmony ``probabilities`` at large eps (audit of shuffledp.local.mean).

Both sample exactly with integers (keep iff ``U < H`` with ``U`` uniform on ``[0, H + L)``), so a
report's probability is ``L / (H + L)`` at the extreme input. ``probabilities`` formed it as
``1.0 - p_plus`` in floats, which cancels once ``L / (H + L)`` is below ~``2^-53`` relative to 1:
at eps = 25 the checker read 25.0000038 against a realised 25, and from eps ~ 37 (``L = 1``,
``H = 2^53``) it read an infinite ratio. The pmf must be the realised law at every accepted eps.
"""

from fractions import Fraction

import numpy as np
import pytest

from shuffledp.local.mean import DuchiMechanism, Harmony
from shuffledp.local.verify import worst_case_log_ratio

INPUTS = [-1.0, -0.4, 0.0, 0.7, 1.0]


@pytest.mark.parametrize("eps", [2.0, 25.0, 40.0, 700.0])
def test_duchi_one_dim_pmf_is_the_realised_law(eps):
    m = DuchiMechanism(eps)
    reports = {"z": np.array([1, -1], dtype=np.int8)}
    assert worst_case_log_ratio(m, reports, INPUTS) <= m.effective_epsilon + 1e-9
    H, L = m._H, m._L
    np.testing.assert_allclose(m.probabilities(reports, -1.0), [float(Fraction(L, H + L)), float(Fraction(H, H + L))], rtol=1e-15, atol=0)
    np.testing.assert_allclose(m.probabilities(reports, 1.0), [float(Fraction(H, H + L)), float(Fraction(L, H + L))], rtol=1e-15, atol=0)


@pytest.mark.parametrize("eps", [2.0, 25.0, 40.0, 700.0])
@pytest.mark.parametrize("dim", [1, 3])
def test_harmony_pmf_is_the_realised_law(eps, dim):
    m = Harmony(eps, dim=dim)
    j, s = np.repeat(np.arange(dim), 2), np.tile(np.array([1, -1], dtype=np.int8), dim)
    reports = {"j": j, "s": s}
    inputs = [np.full(dim, v) for v in INPUTS] if dim > 1 else INPUTS
    assert worst_case_log_ratio(m, reports, inputs) <= m.effective_epsilon + 1e-9
    H, L = m._H, m._L
    low = m.probabilities(reports, inputs[0])
    np.testing.assert_allclose(low[:2] * dim, [float(Fraction(L, H + L)), float(Fraction(H, H + L))], rtol=1e-15, atol=0)


@pytest.mark.parametrize("eps", [2.0, 25.0, 40.0, 700.0])
def test_hybrid_duchi_atoms_pmf_within_statement(eps):
    from shuffledp.local.mean import HybridMechanism

    m = HybridMechanism(eps, grid_size=16)
    grid = m.output_grid()
    reachable = np.max([m.probabilities({"t": grid}, x) for x in INPUTS], axis=0) > 0  # alpha = 1: no Duchi atoms
    reports = {"t": grid[reachable]}
    assert worst_case_log_ratio(m, reports, INPUTS) <= m.effective_epsilon + 1e-9


@pytest.mark.parametrize("eps", [25.0, 60.0, 700.0])
def test_rappor_harmony_pmf_within_statement(eps):
    """RAPPOR+Harmony uses Harmony's per-sign law (its value part at eps2 = eps / 2)."""
    import itertools

    from shuffledp.local.keyvalue import RapporHarmony

    m = RapporHarmony(eps, 3)
    rows = list(itertools.product(itertools.product((0, 1), repeat=3), (1, -1)))
    bits = np.packbits(np.array([r[0] for r in rows], dtype=np.uint8), axis=1, bitorder="little")
    reports = {"bits": bits, "s": np.array([r[1] for r in rows], dtype=np.int8)}
    inputs = [(), ((0, 1.0),), ((0, -1.0),), ((1, 0.0),), ((0, 1.0), (1, -1.0))]
    with np.errstate(under="ignore"):
        assert worst_case_log_ratio(m, reports, inputs) <= m.privacy().eps + 1e-9
