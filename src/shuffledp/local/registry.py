"""Registry: build a local mechanism by its short name.

Frequency oracles: grr, sue, oue, rappor, blh, olh, hr, ss, cms, hcms.
Mean oracles: duchi, harmony, pm, hm.
Modules register lazily so importing :mod:`shuffledp.local` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..core.errors import ValidationError
from .base import FrequencyOracle, MeanOracle

__all__ = ["FREQUENCY_ORACLES", "MEAN_ORACLES", "frequency_oracle", "mean_oracle"]

#: name -> "module:ClassName" (relative to shuffledp.local)
FREQUENCY_ORACLES: dict[str, str] = {
    "grr": "grr:GeneralizedRandomizedResponse",
    "sue": "unary:SymmetricUnaryEncoding",
    "oue": "unary:OptimizedUnaryEncoding",
    "rappor": "rappor:Rappor",
    "blh": "hashing:BinaryLocalHashing",
    "olh": "hashing:OptimizedLocalHashing",
    "hr": "hadamard:HadamardResponse",
    "ss": "subset:SubsetSelection",
    "cms": "apple:CountMeanSketch",
    "hcms": "apple:HadamardCountMeanSketch",
}

MEAN_ORACLES: dict[str, str] = {
    "duchi": "mean:DuchiMechanism",
    "harmony": "mean:Harmony",
    "pm": "mean:PiecewiseMechanism",
    "hm": "mean:HybridMechanism",
}


def _load(table: dict[str, str], name: str, kind: str) -> type:
    if not isinstance(name, str) or name.lower() not in table:
        raise ValidationError(f"unknown {kind} {name!r}; choose one of {sorted(table)}", parameter="name")
    mod, cls = table[name.lower()].split(":")
    return getattr(importlib.import_module(f"{__package__}.{mod}"), cls)


def frequency_oracle(name: str, epsilon: float, d: int, **params: Any) -> FrequencyOracle:
    """Build the eps-LDP frequency oracle ``name`` over the domain [0, d)."""
    return _load(FREQUENCY_ORACLES, name, "frequency oracle")(epsilon, d, **params)


def mean_oracle(name: str, epsilon: float, **params: Any) -> MeanOracle:
    """Build the eps-LDP mean oracle ``name`` for values in [-1, 1]."""
    return _load(MEAN_ORACLES, name, "mean oracle")(epsilon, **params)
