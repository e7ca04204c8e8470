"""Heavy hitters over an unknown domain under local differential privacy.

- :class:`SequenceFragmentPuzzle` (``"sfp"``): Apple's SFP over CMS/HCMS (Apple, "Learning with
  Privacy at Scale", 2017).
- :class:`PrefixExtendingMethod` (``"pem"``): prefix extension over a registry frequency oracle
  (Wang, Li, Jha, TDSC 2019).
- :class:`TreeHist` (``"treehist"``): a pruned prefix tree over a registry frequency oracle
  (Bassily, Nissim, Stemmer, Thakurta, NeurIPS 2017).

Every mechanism randomizes a numpy array of words (or integers) in one vectorized call,
aggregates to a 1-d int64 statistic that adds over report batches, and estimates an
:class:`~shuffledp.core.Estimate` of kind ``"count"`` whose ``labels`` are the discovered items.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import ValidationError
from ._common import DEFAULT_ALPHABET, HeavyHitterMechanism, HexWordCodec, IntegerCodec, StringCodec, UniversalHash
from .prefix_extending import PrefixExtendingMethod
from .sequence_fragment_puzzle import SequenceFragmentPuzzle
from .treehist import TreeHist

__all__ = ["HEAVY_HITTERS", "heavy_hitter", "HeavyHitterMechanism", "SequenceFragmentPuzzle",
           "PrefixExtendingMethod", "TreeHist", "StringCodec", "IntegerCodec", "HexWordCodec", "UniversalHash", "DEFAULT_ALPHABET"]

#: name -> class
HEAVY_HITTERS: dict[str, type[HeavyHitterMechanism]] = {
    "sfp": SequenceFragmentPuzzle,
    "pem": PrefixExtendingMethod,
    "treehist": TreeHist,
}


def heavy_hitter(name: str, epsilon: float | None = None, **params: Any) -> HeavyHitterMechanism:
    """Build the heavy-hitter mechanism ``name`` (``"sfp"``, ``"pem"``, ``"treehist"``); parameters
    are checked against its constructor (an unknown one is a :class:`ValidationError` naming it)."""
    from ..registry import check_parameters

    if not isinstance(name, str) or name.lower() not in HEAVY_HITTERS:
        raise ValidationError(f"unknown heavy-hitter mechanism {name!r}; choose one of {sorted(HEAVY_HITTERS)}",
                              parameter="name")
    cls = HEAVY_HITTERS[name.lower()]
    given = dict(params)
    if epsilon is not None:
        given["epsilon"] = epsilon
    check_parameters(cls, given, f"heavy-hitter mechanism {name!r}")
    return cls(**given)
