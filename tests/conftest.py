#: the Dask / Spark fixtures (``dask_engine``, ``spark_engine``) and the ``engines`` marker, for every directory
pytest_plugins = ("tests.engine_fixtures",)

import numpy as np
import pytest
from scipy import stats


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def variance_ratio_band(R: int, alpha: float = 1e-4) -> tuple[float, float]:
    """Two-sided band for s^2 / sigma^2 from R repetitions of a near-Gaussian estimator.

    (R-1) s^2 / sigma^2 ~ chi2_{R-1}; the band holds with probability 1 - alpha.
    """
    lo = stats.chi2.ppf(alpha / 2, R - 1) / (R - 1)
    hi = stats.chi2.ppf(1 - alpha / 2, R - 1) / (R - 1)
    return lo, hi


def mean_z_bound(alpha: float = 1e-4) -> float:
    """|z| bound for a mean-zero test at level alpha (two-sided)."""
    return float(stats.norm.ppf(1 - alpha / 2))


@pytest.fixture
def restore_logging():
    """Whatever a test does to the process's logging (``serve`` calls ``dictConfig``, which binds
    handlers to the captured stderr and disables other loggers) ends with the test."""
    import logging

    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers]
    yield
    for lg, handlers, level, propagate, disabled in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate, lg.disabled = propagate, disabled
