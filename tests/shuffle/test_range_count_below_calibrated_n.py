"""range_count states a guarantee below its calibrated n: a level whose bound does not apply contributes its local eps."""

from __future__ import annotations

import math

from shuffledp.shuffle.range_count import RangeCount


def test_range_count_closed_form_privacy_below_calibrated_n_falls_back_to_local():
    """Every other protocol states its local guarantee where its amplification bound does not
    apply; range_count with accounting='closed_form' raised OutOfDomainError from privacy(n)
    (hence from estimate) once a level's BBGN19 Thm 3.1 bound exceeded 1 at a smaller n."""
    p = RangeCount(1.0, 1e-6, 200_000, d=8, accounting="closed_form")
    assert p.privacy(200_000).eps <= 1.0
    st = p.privacy(20_000)
    assert math.isfinite(st.eps)
    assert p.privacy(200_000).eps < st.eps <= p.randomizer.epsilon * (1 + 1e-9)
