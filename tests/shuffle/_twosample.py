"""Statistically sound two-sample checks that two samplers have the same law.

Used where a full encode -> shuffle -> aggregate run is compared with an exact simulation of the
statistic. Each comparison is a z-test with an *estimated* standard error; all tests of one call
share the level ``alpha`` (Bonferroni), so a correct implementation fails with probability at
most about ``alpha`` whatever the seed (no tolerance tuned to a random stream).

* means: Welch's z, ``(mean_a - mean_b) / sqrt(s_a^2/R_a + s_b^2/R_b)``;
* variances: ``(s_a^2 - s_b^2) / sqrt(V_a + V_b)`` with the asymptotic variance of a sample
  variance, ``V = (m4 - s^4 (R - 3)/(R - 1)) / R`` (m4 the sample fourth central moment), valid
  for any law with a finite fourth moment (the F test assumes normality);
* covariances of chosen column pairs: z on ``mean(u_a) - mean(u_b)`` with ``u`` the products
  of centred columns (standard error from the sample variance of ``u``).
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def _var_of_sample_variance(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    R = x.shape[0]
    c = x - x.mean(0)
    s2 = (c**2).sum(0) / (R - 1)
    m4 = (c**4).mean(0)
    v = np.maximum(m4 - s2**2 * (R - 3) / (R - 1), 0.0) / R
    return s2, v


def _cov_products(x: np.ndarray, pairs: list[tuple[int, int]]) -> np.ndarray:
    c = x - x.mean(0)
    return np.column_stack([c[:, i] * c[:, j] for i, j in pairs]) if pairs else np.zeros((x.shape[0], 0))


def assert_same_law(a: np.ndarray, b: np.ndarray, *, cov_pairs: list[tuple[int, int]] | None = None,
                    alpha: float = 1e-4) -> None:
    """Fail if samples ``a`` (R_a x k) and ``b`` (R_b x k) differ in any column's mean or variance,
    in the mean or variance of the row sums, or in the covariance of ``cov_pairs``."""
    a = np.asarray(a, dtype=np.float64).reshape(a.shape[0], -1)
    b = np.asarray(b, dtype=np.float64).reshape(b.shape[0], -1)
    assert a.shape[1] == b.shape[1]
    pairs = list(cov_pairs or [])
    # the row sum is a joint statistic (sensitive to the correlation between cells)
    a = np.column_stack([a, a.sum(1)])
    b = np.column_stack([b, b.sum(1)])
    Ra, Rb = a.shape[0], b.shape[0]

    zs: dict[str, np.ndarray] = {}
    degenerate = (a.var(0) == 0) & (b.var(0) == 0)
    assert np.array_equal(a.mean(0)[degenerate], b.mean(0)[degenerate]), "constant columns differ"
    live = ~degenerate
    se_mean = np.sqrt(a.var(0, ddof=1) / Ra + b.var(0, ddof=1) / Rb)
    zs["mean"] = (a.mean(0) - b.mean(0))[live] / se_mean[live]
    sa, va = _var_of_sample_variance(a)
    sb, vb = _var_of_sample_variance(b)
    se_var = np.sqrt(va + vb)
    assert np.all(se_var[live] > 0)
    zs["variance"] = (sa - sb)[live] / se_var[live]
    if pairs:
        ua, ub = _cov_products(a, pairs), _cov_products(b, pairs)
        se_cov = np.sqrt(ua.var(0, ddof=1) / Ra + ub.var(0, ddof=1) / Rb)
        zs["covariance"] = (ua.mean(0) * Ra / (Ra - 1) - ub.mean(0) * Rb / (Rb - 1)) / se_cov
    n_tests = sum(z.size for z in zs.values())
    bound = float(stats.norm.ppf(1.0 - alpha / (2.0 * n_tests)))
    for what, z in zs.items():
        assert np.all(np.abs(z) < bound), (what, np.round(z, 2).tolist(), round(bound, 3))
