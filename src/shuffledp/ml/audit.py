"""Empirical privacy auditing: a statistically valid lower bound on epsilon from attack success.

If a mechanism M is (eps, delta)-DP then for neighbouring inputs D0, D1 and **any** test S,

    Pr[M(D1) in S] <= e^eps Pr[M(D0) in S] + delta   and
    Pr[M(D0) not in S] <= e^eps Pr[M(D1) not in S] + delta.

Running M many times on each input and counting how often the test fires gives TPR (on D1) and
FPR (on D0); one-sided Clopper-Pearson bounds at level alpha/2 each give, with probability at
least 1 - alpha,

    eps >= max( log((TPR_lo - delta) / FPR_hi), log((1 - FPR_hi - delta) / (1 - TPR_lo)) )

(Jagielski, Ullman, Oprea, NeurIPS 2020; Nasr et al., S&P 2021). The test's threshold is chosen
on a calibration half of the runs and the bound is computed on the other half only, so the choice
does not invalidate the intervals. A lower bound above the stated epsilon (at confidence 1 -
alpha) means the implementation does not meet its claim.

:func:`audit` is black-box: a vectorised sampler ``run(which, n, rng)`` that returns ``n`` outputs
of the mechanism on input ``which`` (0 or 1) and a scoring function (higher = "looks like D1").
:func:`audit_local_randomizer` audits a local randomizer on two inputs with the likelihood-ratio
test built from its ``probabilities`` (the audit's validity does not depend on those
probabilities being right: they only choose the test). :func:`audit_training` audits a training
algorithm with a canary record (one fit per run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy import stats

from ..core.errors import ValidationError
from ..core.validation import check_positive_int, check_probability, check_real

__all__ = ["AuditResult", "clopper_pearson", "epsilon_lower_bound", "audit", "audit_local_randomizer",
           "audit_training", "audit_dpsgd_gradient_canary"]


@dataclass(frozen=True)
class AuditResult:
    """An empirical lower bound on epsilon, valid with probability ``confidence``."""

    epsilon_lower: float
    confidence: float
    delta: float
    threshold: float
    tpr: float
    fpr: float
    tpr_lower: float
    fpr_upper: float
    n_evaluation: int


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided (1 - alpha) binomial interval for ``k`` successes in ``n`` trials; each side
    is a one-sided (1 - alpha/2) bound."""
    if n <= 0 or not (0 <= k <= n):
        raise ValidationError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}", parameter="n")
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def _bound(tp: int, n1: int, fp: int, n0: int, delta: float, alpha: float) -> tuple[float, float, float]:
    tpr_lo, _ = clopper_pearson(tp, n1, alpha)
    _, fpr_hi = clopper_pearson(fp, n0, alpha)
    cands = [0.0]
    if tpr_lo - delta > 0 and fpr_hi > 0:
        cands.append(math.log((tpr_lo - delta) / fpr_hi))
    if 1 - fpr_hi - delta > 0 and 1 - tpr_lo > 0:
        cands.append(math.log((1 - fpr_hi - delta) / (1 - tpr_lo)))
    return max(cands), tpr_lo, fpr_hi


def epsilon_lower_bound(scores_d0: Any, scores_d1: Any, *, delta: float = 0.0, alpha: float = 0.05,
                        calibration_fraction: float = 0.5, max_thresholds: int = 256) -> AuditResult:
    """Lower bound on epsilon from attack scores of runs on D0 and on D1 (higher = "D1").

    The first ``calibration_fraction`` of each array picks the threshold maximising the bound; the
    rest gives the bound, valid with probability >= 1 - alpha (the runs must be independent).
    """
    s0 = np.asarray(scores_d0, dtype=float).ravel()
    s1 = np.asarray(scores_d1, dtype=float).ravel()
    if s0.size < 4 or s1.size < 4 or np.any(np.isnan(s0)) or np.any(np.isnan(s1)):
        raise ValidationError("scores_d0 and scores_d1 need at least 4 non-NaN scores each", parameter="scores_d0")
    delta = check_real(delta, "delta", low=0.0, high=1.0, high_open=True)
    alpha = check_probability(alpha, "alpha", open_low=True, open_high=True)
    frac = check_real(calibration_fraction, "calibration_fraction", low=0.0, high=1.0, low_open=True, high_open=True)
    c0, c1 = int(s0.size * frac), int(s1.size * frac)
    cal0, ev0, cal1, ev1 = s0[:c0], s0[c0:], s1[:c1], s1[c1:]
    cands = np.unique(np.concatenate([cal0, cal1]))
    if cands.size > max_thresholds:
        cands = np.unique(np.quantile(cands, np.linspace(0, 1, max_thresholds)))
    sorted0, sorted1 = np.sort(cal0), np.sort(cal1)
    best_t, best = float(cands[0]), -1.0
    for t in cands:  # O(#thresholds log n): counts by binary search
        tp = c1 - int(np.searchsorted(sorted1, t, side="left"))
        fp = c0 - int(np.searchsorted(sorted0, t, side="left"))
        b, _, _ = _bound(tp, c1, fp, c0, delta, alpha)
        if b > best:
            best, best_t = b, float(t)
    tp, fp = int(np.sum(ev1 >= best_t)), int(np.sum(ev0 >= best_t))
    eps, tpr_lo, fpr_hi = _bound(tp, ev1.size, fp, ev0.size, delta, alpha)
    return AuditResult(eps, 1 - alpha, delta, best_t, tp / ev1.size, fp / ev0.size, tpr_lo, fpr_hi,
                       int(ev0.size + ev1.size))


def audit(run: Callable[[int, int, np.random.Generator], Any], score: Callable[[Any], np.ndarray], n_trials: int,
          rng: np.random.Generator, *, delta: float = 0.0, alpha: float = 0.05) -> AuditResult:
    """Black-box audit: ``run(which, n, rng)`` returns ``n`` independent outputs of the mechanism on
    the neighbouring input ``which`` in {0, 1}; ``score(outputs)`` one real per output."""
    n = check_positive_int(n_trials, "n_trials", minimum=8)
    s0 = np.asarray(score(run(0, n, rng)), dtype=float)
    s1 = np.asarray(score(run(1, n, rng)), dtype=float)
    return epsilon_lower_bound(s0, s1, delta=delta, alpha=alpha)


def audit_local_randomizer(oracle: Any, x0: Any, x1: Any, n_trials: int, rng: np.random.Generator, *,
                           alpha: float = 0.05) -> AuditResult:
    """Audit an eps-LDP randomizer on the inputs ``x0``, ``x1`` (one report per trial, vectorised).

    The test is the likelihood ratio ``log p(y|x1) - log p(y|x0)`` from ``oracle.probabilities``.
    """
    dtype = float if isinstance(x0, float) or isinstance(x1, float) else int

    def run(which: int, n: int, g: np.random.Generator) -> Any:
        return oracle.randomize(np.full(n, x1 if which else x0, dtype=dtype), g)

    def score(reports: Any) -> np.ndarray:
        p1 = np.asarray(oracle.probabilities(reports, x1), dtype=float)
        p0 = np.asarray(oracle.probabilities(reports, x0), dtype=float)
        return np.log(np.maximum(p1, 1e-300)) - np.log(np.maximum(p0, 1e-300))

    return audit(run, score, n_trials, rng, alpha=alpha)


def audit_training(fit: Callable[[np.ndarray, np.ndarray, np.random.Generator], Any], X: np.ndarray, y: np.ndarray,
                   canary_x: np.ndarray, canary_y: Any, score: Callable[[Any], float], n_trials: int,
                   rng: np.random.Generator, *, delta: float = 0.0, alpha: float = 0.05) -> AuditResult:
    """Audit a training algorithm with a canary (replace-one neighbours).

    D0 is ``(X, y)``; D1 replaces its last row by ``(canary_x, canary_y)``. Each trial fits a model
    by ``fit(X, y, rng)`` and scores it with ``score(model)`` (e.g. the margin on the canary).
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y)
    X1, y1 = X.copy(), y.copy()
    X1[-1], y1[-1] = canary_x, canary_y

    def run(which: int, n: int, g: np.random.Generator) -> np.ndarray:
        Xd, yd = (X1, y1) if which else (X, y)
        return np.array([score(fit(Xd, yd, g)) for _ in range(n)])  # one training run per trial

    return audit(run, lambda s: s, n_trials, rng, delta=delta, alpha=alpha)


def audit_dpsgd_gradient_canary(noise_multiplier: float, sample_rate: float, steps: int, n_trials: int,
                                rng: np.random.Generator, *, delta: float = 0.0, alpha: float = 0.05,
                                chunk: int = 20_000) -> AuditResult:
    """Audit the accounting of DP-SGD with the strongest canary (Nasr et al., S&P 2021).

    The canary's clipped gradient has norm C along a direction every other example's gradient is
    orthogonal to, and the adversary sees every noisy update. Along that direction, in units of C,
    step t releases ``B_t + N(0, sigma^2)`` in D1 (``B_t ~ Bernoulli(q)``: the canary was sampled)
    and ``N(0, sigma^2)`` in D0 -- exactly the Poisson-subsampled Gaussian composed ``steps`` times
    that the accountants bound. The test is the likelihood ratio
    ``sum_t log(1 - q + q exp((2 x_t - 1) / (2 sigma^2)))``. Vectorised over trials in chunks.
    """
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_open=True)
    q = check_probability(sample_rate, "sample_rate")
    T = check_positive_int(steps, "steps")
    n = check_positive_int(n_trials, "n_trials", minimum=8)

    def run(which: int, m: int, g: np.random.Generator) -> np.ndarray:
        out = np.empty(m)
        for start in range(0, m, chunk):  # O(chunk * steps) memory
            k = min(chunk, m - start)
            x = g.normal(scale=sigma, size=(k, T))
            if which:
                x += g.random((k, T)) < q
            out[start:start + k] = np.sum(np.logaddexp(math.log1p(-q), math.log(q) + (2 * x - 1) / (2 * sigma**2))
                                          if q < 1 else (2 * x - 1) / (2 * sigma**2), axis=1)
        return out

    return audit(run, lambda s: s, n, rng, delta=delta, alpha=alpha)
