"""Accountants print their type, settings, composed events and accumulated totals."""

from __future__ import annotations

import pytest

from shuffledp.accounting import (
    AdvancedCompositionAccountant,
    BasicCompositionAccountant,
    GaussianEvent,
    LaplaceEvent,
    PldAccountant,
    PureDpEvent,
    RdpAccountant,
    ZCdpAccountant,
)

ACCOUNTANTS = [BasicCompositionAccountant, AdvancedCompositionAccountant, RdpAccountant, ZCdpAccountant,
               PldAccountant]


@pytest.mark.parametrize("cls", ACCOUNTANTS)
def test_repr_shows_type_and_events(cls):
    acc = cls()
    empty = repr(acc)
    assert empty.startswith(cls.__name__ + "(") and " at 0x" not in empty and "compositions=0" in empty
    acc.compose(GaussianEvent(sigma=2.0), 3).compose(LaplaceEvent(0.5))
    text = repr(acc)
    assert "compositions=4" in text and "GaussianEvent(sigma=2.0" in text and "x3" in text
    assert "LaplaceEvent(scale=0.5" in text and "neighbouring='add_remove_one'" in text


def test_repr_shows_totals_and_elides_long_ledgers():
    acc = BasicCompositionAccountant()
    for eps in (0.1, 0.2, 0.3, 0.4, 0.5):
        acc.compose(PureDpEvent(eps))
    text = repr(acc)
    assert "fixed_epsilon=1.5" in text and "... 2 more" in text and "PureDpEvent(epsilon=0.4" not in text
    z = ZCdpAccountant().compose(GaussianEvent(sigma=1.0), 2)
    assert "rho=1" in repr(z)
    r = RdpAccountant().compose(PureDpEvent(0.25), 2)
    assert "pure_eps=0.5" in repr(r) and "conversion='improved'" in repr(r)
