"""Registry: build a protocol from its survey name and its central target.

``protocol(name, epsilon=eps_c, delta=..., n=..., **params)``. Each protocol module exports a
``PROTOCOLS`` dict (name -> class); modules load lazily.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from ..core.errors import ValidationError
from ..local.registry import check_parameters, constructor_parameters
from .base import Protocol

__all__ = ["PROTOCOL_MODULES", "NOT_IMPLEMENTED", "protocol", "protocol_class", "protocol_parameters",
           "available_protocols"]

#: registry name -> module (relative to shuffledp.shuffle) that defines it in ``PROTOCOLS``;
#: one protocol per module (``uniformity`` holds the two testers ``put`` and ``aut``)
PROTOCOL_MODULES: dict[str, str] = {
    # counting (bits)
    "cnt_rr": "counting.randomized_response", "cnt_2m": "counting.two_message", "cnt_bn": "counting.binomial",
    "cnt_sgm": "counting.split_and_mix",
    # histograms (ints in [0, d))
    "hist_kr": "histogram.kr", "hist_mm": "histogram.mm", "slh": "histogram.slh", "murs": "histogram.murs",
    "prhr": "histogram.prhr", "pucm": "histogram.pucm",
    # multi-value (an (n, k) int array)
    "fragmenting": "fragmenting", "sample_one": "sample_one",
    # sums (floats in [0, 1])
    "rsum_rr": "sums.rsum_rr", "rsum_kr": "sums.rsum_kr", "rsum_rm": "sums.rsum_rm", "rsum_dsg": "sums.rsum_dsg",
    # other statistics
    "distinct": "distinct", "range_count": "range_count", "put": "uniformity", "aut": "uniformity",
    # heavy hitters over a large or unknown domain (ints in [0, d), or words)
    "hh_sfp": "heavy_hitters.sfp", "hh_pem": "heavy_hitters.pem", "hh_treehist": "heavy_hitters.treehist",
    # baselines in the local and central models (the survey's comparisons)
    "ldp_rr": "baselines.ldp_rr", "ldp_krr": "baselines.ldp_krr", "ldp_harmony": "baselines.ldp_harmony",
    "ldp_oracle": "baselines.ldp_oracle", "cdp_laplace_count": "baselines.cdp_laplace_count",
    "cdp_laplace_hist": "baselines.cdp_laplace_hist", "cdp_laplace_sum": "baselines.cdp_laplace_sum",
}

_PURE_PAPER = ("Ghazi, Golowich, Kumar, Manurangsi, Pagh, Velingker, \"Pure Differentially Private Summation from "
               "Anonymous Messages\", ITC 2020")

#: survey protocols that are deliberately not implemented, with the reason
NOT_IMPLEMENTED: dict[str, str] = {
    "cnt_pure": f"the paper's protocol text ({_PURE_PAPER}, arXiv 2002.01919 §3) is unavailable",
    "rsum_pure": f"it is built on cnt_pure, whose protocol text ({_PURE_PAPER}) is unavailable",
}


def protocol_class(name: str) -> type[Protocol]:
    """The class registered as ``name``."""
    key = name.lower() if isinstance(name, str) else name
    if key in NOT_IMPLEMENTED:
        raise ValidationError(f"protocol {name!r} is not implemented: {NOT_IMPLEMENTED[key]}", parameter="name")
    if key not in PROTOCOL_MODULES:
        raise ValidationError(f"unknown protocol {name!r}; choose one of {sorted(PROTOCOL_MODULES)}",
                              parameter="name")
    module = importlib.import_module(f"{__package__}.{PROTOCOL_MODULES[key]}")
    table = getattr(module, "PROTOCOLS", {})
    if key not in table:
        raise ValidationError(f"protocol {name!r} is not implemented in shuffledp.shuffle.{PROTOCOL_MODULES[key]}",
                              parameter="name")
    return table[key]


def protocol_parameters(name: str) -> tuple[str, ...] | None:
    """The keyword parameters protocol ``name`` takes besides ``epsilon``, ``delta`` and ``n``.

    ``None`` when its constructor passes any further keywords on (e.g. to an inner protocol),
    which then validates them.
    """
    params, takes_any = constructor_parameters(protocol_class(name))
    if takes_any:
        return None
    return tuple(p.name for p in params if p.name not in ("epsilon", "delta", "n")
                 and p.kind is not inspect.Parameter.POSITIONAL_ONLY)


def protocol(name: str, epsilon: float | None = None, delta: float = 1e-6, n: int | None = None,
             **params: Any) -> Protocol:
    """Build protocol ``name`` achieving central (epsilon, delta)-DP for ``n`` users.

    ``n`` is required for shuffle-model protocols: their calibration (amplification by
    shuffling, noise spread over the other users) depends on it, and a silent default would
    promise a guarantee that a smaller batch does not get. Local and central baselines, whose
    guarantee does not depend on ``n``, may omit it.

    Parameters are checked against the class's constructor first: a misspelled keyword
    (``eps=``) is a :class:`ValidationError` naming it and the closest accepted name, a missing
    required one (``d`` of a histogram protocol) a :class:`ValidationError` naming it.
    """
    cls = protocol_class(name)
    given: dict[str, Any] = {"delta": delta, **params}
    if epsilon is not None:
        given["epsilon"] = epsilon
    if n is None:
        if cls.model == "shuffle":
            raise ValidationError(f"protocol {name!r} is calibrated for a number of users: pass n=", parameter="n")
    else:
        given["n"] = n
    check_parameters(cls, given, f"protocol {name!r}")
    return cls(**given)


def available_protocols() -> list[str]:
    """Registry names whose module is importable and defines them."""
    out = []
    for name in PROTOCOL_MODULES:
        try:
            protocol_class(name)
        except (ValidationError, ImportError):
            continue
        out.append(name)
    return out
