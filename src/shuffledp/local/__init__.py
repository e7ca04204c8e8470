"""Local differential privacy: eps-LDP randomizers and their unbiased estimators.

Entry points: :func:`frequency_oracle` and :func:`mean_oracle` build a mechanism by its
registry name. Every mechanism implements the contract in :mod:`shuffledp.local.base`.
"""

from ..core.batch import Columns, concat_rows, n_rows, take_rows
from .base import FrequencyOracle, LocalRandomizer, MeanOracle, Reports
from .grr import GeneralizedRandomizedResponse
from .registry import FREQUENCY_ORACLES, MEAN_ORACLES, frequency_oracle, mean_oracle

__all__ = [
    "FrequencyOracle",
    "LocalRandomizer",
    "MeanOracle",
    "Reports",
    "Columns",
    "concat_rows",
    "n_rows",
    "take_rows",
    "GeneralizedRandomizedResponse",
    "FREQUENCY_ORACLES",
    "MEAN_ORACLES",
    "frequency_oracle",
    "mean_oracle",
]
