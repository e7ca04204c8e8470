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
