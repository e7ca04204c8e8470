"""Privacy verification of local randomizers.

:func:`worst_case_log_ratio` computes, for a batch of reports, the largest
``log(Pr[R(x)=y] / Pr[R(x')=y])`` over the given inputs, using each mechanism's exact
``probabilities`` (or densities). An eps-LDP randomizer must give at most eps for every
report it can produce; tests sweep reports produced from every input.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .base import LocalRandomizer, Reports

__all__ = ["worst_case_log_ratio", "sweep_reports"]


def worst_case_log_ratio(mech: LocalRandomizer, reports: Reports, inputs: Iterable[Any]) -> float:
    """max over reports y and inputs x, x' of log Pr[y|x] - log Pr[y|x'].

    Returns ``inf`` if some report has probability 0 under one input and > 0 under another.
    """
    probs = np.stack([np.asarray(mech.probabilities(reports, x), dtype=np.float64) for x in inputs])
    hi = probs.max(axis=0)
    lo = probs.min(axis=0)
    if np.any(hi <= 0):
        raise AssertionError("a produced report has probability 0 under every input")
    if np.any(lo <= 0):
        return float("inf")
    return float(np.max(np.log(hi) - np.log(lo)))


def sweep_reports(mech: LocalRandomizer, inputs: Iterable[Any], per_input: int,
                  rng: np.random.Generator) -> Reports:
    """Reports produced by ``per_input`` users holding each input (client path included)."""
    from ..core.batch import concat_rows

    return concat_rows([mech.randomize(np.repeat(np.asarray([x]), per_input, axis=0), rng)
                           for x in inputs])
