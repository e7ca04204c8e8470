"""Chi-square goodness-of-fit helper for integer samplers."""

from __future__ import annotations

import numpy as np
from scipy import stats


def binned_chi2_pvalue(samples, support, probs, min_expected: float = 5.0) -> float:
    """p-value of a chi-square test of integer ``samples`` against ``probs`` on ``support``.

    Samples outside the support are counted in the extreme bins (whose probability receives the
    missing mass); neighbouring bins are merged until each expected count is >= min_expected.
    """
    samples = np.asarray(samples, dtype=np.int64)
    support = np.asarray(support, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64).copy()
    n = samples.size
    missing = max(0.0, 1.0 - probs.sum())
    probs[0] += missing / 2
    probs[-1] += missing / 2
    idx = np.clip(samples - support[0], 0, support.size - 1)
    obs = np.bincount(idx, minlength=support.size).astype(np.float64)
    exp = probs * n
    mo, me, co, ce = [], [], 0.0, 0.0
    for o, e in zip(obs, exp):
        co += o
        ce += e
        if ce >= min_expected:
            mo.append(co)
            me.append(ce)
            co, ce = 0.0, 0.0
    if ce > 0 or co > 0:
        mo[-1] += co
        me[-1] += ce
    mo, me = np.array(mo), np.array(me)
    me *= mo.sum() / me.sum()
    return float(stats.chisquare(mo, me).pvalue)


def variance_z(x, var: float) -> tuple[float, float]:
    """z statistic of the sample variance of ``x`` against ``var``, valid for any finite-kurtosis
    law: Var(s^2) ~ (mu4 - sigma^4)/R. (``variance_ratio_band`` assumes Gaussian data, which is
    too narrow for Laplace-like or Pólya noise: excess kurtosis 3 and more.) Also returns the
    relative half-width of the acceptance band at |z| < 4, to check the test has power."""
    x = np.asarray(x, dtype=np.float64)
    R = x.size
    c = x - x.mean()
    s2 = float((c * c).sum() / (R - 1))
    m4 = float((c**4).mean())
    se = np.sqrt(max(m4 - s2 * s2, 0.0) / R)
    return (s2 - var) / se, 4.0 * se / var
