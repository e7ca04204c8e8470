"""Local differential privacy: eps-LDP randomizers and their unbiased estimators.

Entry points: :func:`frequency_oracle` and :func:`mean_oracle` build a mechanism by its
registry name. Every mechanism implements the contract in :mod:`shuffledp.local.base`.
"""

from .base import FrequencyOracle, LocalRandomizer, MeanOracle, Reports, concat_reports, n_reports, take_reports
from .grr import GeneralizedRandomizedResponse
from .registry import FREQUENCY_ORACLES, MEAN_ORACLES, frequency_oracle, mean_oracle

__all__ = [
    "FrequencyOracle",
    "LocalRandomizer",
    "MeanOracle",
    "Reports",
    "concat_reports",
    "n_reports",
    "take_reports",
    "GeneralizedRandomizedResponse",
    "FREQUENCY_ORACLES",
    "MEAN_ORACLES",
    "frequency_oracle",
    "mean_oracle",
]
