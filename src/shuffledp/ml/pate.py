"""PATE: private aggregation of teacher ensembles (Papernot et al., ICLR 2017 and ICLR 2018).

The private data is split into ``n_teachers`` disjoint partitions by a data-independent random
assignment of row indices, one model per partition. For a public query x, ``n_j(x)`` is the number
of teachers predicting class j. Replacing one private record changes at most one teacher, hence one
vote: two counts move by one (L1 sensitivity 2, L2 sensitivity sqrt(2)); the maximum count moves by
at most one. Neighbouring relation: replace-one (the partition of indices stays fixed).

Aggregators
-----------
- **LNMax** (2017): ``argmax_j n_j + Lap(1/gamma)``; ``2 gamma``-DP per query.
- **GNMax** (2018): ``argmax_j n_j + N(0, sigma^2)``; ``(lambda, lambda / sigma^2)``-RDP per
  query (data-independent, Gaussian with L2 sensitivity sqrt(2)).
- **Confident-GNMax** (2018, Algorithm 1): answer only if ``max_j n_j + N(0, sigma1^2) >= T``,
  then with GNMax(sigma2); otherwise the answer is "no label" (``-1`` here). The check is a
  Gaussian on a sensitivity-1 quantity: ``(lambda, lambda / (2 sigma1^2))``-RDP per query, paid
  by every query; GNMax is paid only by the answered ones.

Data-dependent analysis
-----------------------
- GNMax (2018, Prop. 7): ``q = Pr[M(D) != i*] <= sum_{i != i*} (1/2) erfc((n_i* - n_i)/(2 sigma))``
  (capped at ``1 - 1/m``). Theorem 6 then bounds the order-lambda RDP by
  ``1/(lambda-1) log((1-q) A^{lambda-1} + q B^{lambda-1})`` with
  ``A = (1-q) / (1 - (q e^{eps2})^{(mu2-1)/mu2})`` and ``B = e^{eps1} / q^{1/(mu1-1)}``, given
  ``(mu_i, eps_i)``-RDP at two higher orders; for GNMax ``mu2 = sigma sqrt(log(1/q))``,
  ``mu1 = mu2 + 1``, ``eps_i = mu_i / sigma^2``. Valid when ``lambda < mu1``, ``mu2 > 1``,
  ``q e^{eps2} < 1`` and ``q <= e^{(mu2-1) eps2} / (mu1/(mu1-1) * mu2/(mu2-1))^{mu2}``; elsewhere
  the data-independent bound is used (the minimum of two valid bounds is valid).
- LNMax (2017, Theorems 2 and 3): ``q <= sum_{j != j*} (2 + gamma d_j) / (4 exp(gamma d_j))`` with
  ``d_j = n_j* - n_j``; for ``q < (e^{2gamma}-1)/(e^{4gamma}-1)`` the log-moment of order l is at
  most ``log((1-q)((1-q)/(1-e^{2gamma} q))^l + q e^{2 gamma l})``, i.e. the RDP at order
  ``lambda = l + 1`` is that divided by ``l``.

Data-dependent epsilons depend on the private votes: they are a privacy cost *conditioned on the
data*, and publishing them is itself not differentially private. :class:`PateReport` therefore
carries the data-independent :class:`~shuffledp.core.privacy.PrivacyStatement` as the guarantee, the
raw data-dependent epsilon for analysis only (not releasable), and, for GNMax and Confident-GNMax, a
release of the data-dependent cost through smooth sensitivity (2018, Sec. 4.2; module
:mod:`shuffledp.ml.pate_smooth_sensitivity`) whose epsilon may be published, together with the
data-independent statement that covers the labels *and* that release.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import special, stats
from sklearn.base import clone

from ..accounting.rdp import DEFAULT_ORDERS, rdp_pure, rdp_to_epsilon
from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.rng import as_generator
from ..core.validation import check_delta, check_positive_int, check_real
from .pate_smooth_sensitivity import SmoothSensitivityRelease, rdp_gnss, release_gnmax_cost

__all__ = [
    "NO_ANSWER", "partition_indices", "train_teachers", "teacher_votes", "lnmax", "gnmax", "confident_gnmax",
    "rdp_gnmax_data_independent", "rdp_lnmax_data_independent", "rdp_threshold_data_independent",
    "log_q_gnmax", "q_lnmax", "rdp_theorem6", "rdp_gnmax_data_dependent", "rdp_lnmax_data_dependent",
    "PateReport", "PATE",
]

#: Label of a query Confident-GNMax declined to answer.
NO_ANSWER = -1
Aggregator = Literal["lnmax", "gnmax", "confident_gnmax"]


# --------------------------------------------------------------------------- teachers


def partition_indices(n: int, n_teachers: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A uniformly random split of ``range(n)`` into ``n_teachers`` disjoint parts of near-equal size."""
    n = check_positive_int(n, "n")
    k = check_positive_int(n_teachers, "n_teachers")
    if k > n:
        raise ValidationError(f"n_teachers must be <= the number of private rows {n}, got {k}", parameter="n_teachers")
    return [np.sort(p) for p in np.array_split(rng.permutation(n), k)]


def train_teachers(estimator: Any, X: np.ndarray, y: np.ndarray, n_teachers: int,
                   rng: np.random.Generator) -> list[Any]:
    """One clone of ``estimator`` per disjoint partition of ``(X, y)``.

    A partition that holds a single class gets a constant predictor for that class.
    """
    X, y = np.asarray(X), np.asarray(y)
    teachers = []
    for idx in partition_indices(len(X), n_teachers, rng):
        ys = y[idx]
        if np.unique(ys).size < 2:
            teachers.append(_Constant(ys[0]))
        else:
            teachers.append(clone(estimator).fit(X[idx], ys))
    return teachers


class _Constant:
    def __init__(self, label: Any) -> None:
        self.label = label

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), self.label)


def teacher_votes(teachers: list[Any], X: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Vote histogram ``counts[i, j]`` = number of teachers predicting ``classes[j]`` on query ``i``."""
    classes = np.asarray(classes)
    preds = np.stack([np.searchsorted(classes, t.predict(X)) for t in teachers])  # (teachers, queries)
    Q, m = preds.shape[1], len(classes)
    flat = (preds + m * np.arange(Q)[None, :]).ravel()
    return np.bincount(flat, minlength=Q * m).reshape(Q, m)


# --------------------------------------------------------------------------- aggregators


def _counts(counts: Any) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim != 2 or c.shape[1] < 2 or not np.issubdtype(c.dtype, np.number) or np.any(c < 0):
        raise ValidationError("counts must be a (queries, classes>=2) array of non-negative vote counts",
                              parameter="counts")
    return c.astype(float)


def lnmax(counts: Any, gamma: float, rng: np.random.Generator) -> np.ndarray:
    """LNMax: ``argmax_j n_j + Lap(1/gamma)`` per query (index into the classes). ``2 gamma``-DP each."""
    c = _counts(counts)
    g = check_real(gamma, "gamma", low=0.0, low_open=True)
    return np.argmax(c + rng.laplace(scale=1.0 / g, size=c.shape), axis=1)


def gnmax(counts: Any, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """GNMax: ``argmax_j n_j + N(0, sigma^2)`` per query. ``(lambda, lambda/sigma^2)``-RDP each."""
    c = _counts(counts)
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    return np.argmax(c + rng.normal(scale=s, size=c.shape), axis=1)


def confident_gnmax(counts: Any, threshold: float, sigma_threshold: float, sigma: float,
                    rng: np.random.Generator) -> np.ndarray:
    """Confident-GNMax (Papernot et al. 2018, Alg. 1): GNMax(sigma) where
    ``max_j n_j + N(0, sigma_threshold^2) >= threshold``, :data:`NO_ANSWER` elsewhere."""
    c = _counts(counts)
    t = check_real(threshold, "threshold")
    s1 = check_real(sigma_threshold, "sigma_threshold", low=0.0, low_open=True)
    ans = gnmax(c, sigma, rng)
    keep = c.max(axis=1) + rng.normal(scale=s1, size=len(c)) >= t
    return np.where(keep, ans, NO_ANSWER)


# --------------------------------------------------------------------------- RDP analysis


def _orders(orders: Any) -> np.ndarray:
    a = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=float)
    if a.ndim != 1 or a.size == 0 or np.any(~np.isfinite(a)) or np.any(a <= 1):
        raise ValidationError("orders must be a non-empty 1-D array of finite reals > 1", parameter="orders")
    return a


def rdp_gnmax_data_independent(orders: Any, sigma: float) -> np.ndarray:
    """GNMax per query: ``lambda / sigma^2`` (Gaussian, L2 sensitivity sqrt(2))."""
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    return _orders(orders) / s**2


def rdp_threshold_data_independent(orders: Any, sigma_threshold: float) -> np.ndarray:
    """Confident-GNMax's check per query: ``lambda / (2 sigma1^2)`` (Gaussian, sensitivity 1)."""
    s = check_real(sigma_threshold, "sigma_threshold", low=0.0, low_open=True)
    return _orders(orders) / (2.0 * s**2)


def rdp_lnmax_data_independent(orders: Any, gamma: float) -> np.ndarray:
    """LNMax per query: the RDP curve of a pure ``2 gamma``-DP mechanism (Bun-Steinke 2016, Prop. 3.3)."""
    g = check_real(gamma, "gamma", low=0.0, low_open=True)
    return rdp_pure(_orders(orders), 2.0 * g)


def log_q_gnmax(counts: Any, sigma: float) -> np.ndarray:
    """log of the bound on ``Pr[GNMax != argmax]`` per query (2018, Prop. 7), capped at ``log(1 - 1/m)``.

    ``q <= sum_{i != i*} Pr[N(0, 2 sigma^2) >= n_i* - n_i] = sum (1/2) erfc((n_i* - n_i) / (2 sigma))``.
    """
    c = _counts(counts)
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    top = np.argmax(c, axis=1)
    gaps = c[np.arange(len(c)), top][:, None] - c
    logsf = stats.norm.logsf(gaps, scale=math.sqrt(2.0) * s)
    logsf[np.arange(len(c)), top] = -np.inf
    logq = special.logsumexp(logsf, axis=1)
    return np.minimum(logq, math.log1p(-1.0 / c.shape[1]))


def q_lnmax(counts: Any, gamma: float) -> np.ndarray:
    """Bound on ``Pr[LNMax != argmax]`` per query (2017, Theorem 3), capped at 1:
    ``sum_{j != j*} (2 + gamma d_j) / (4 exp(gamma d_j))``, ``d_j = n_j* - n_j``."""
    c = _counts(counts)
    g = check_real(gamma, "gamma", low=0.0, low_open=True)
    top = np.argmax(c, axis=1)
    d = c[np.arange(len(c)), top][:, None] - c
    terms = (2.0 + g * d) / (4.0 * np.exp(g * d))
    terms[np.arange(len(c)), top] = 0.0
    return np.minimum(terms.sum(axis=1), 1.0)


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x < 0."""
    x = np.asarray(x, dtype=float)
    return np.where(x > -0.693, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def rdp_theorem6(orders: Any, logq: float, mu1: float, eps1: float, mu2: float, eps2: float) -> np.ndarray:
    """Papernot et al. (2018), Theorem 6: data-dependent RDP at ``orders`` from a bound ``q`` on the
    probability of not returning the likely outcome and RDP guarantees ``(mu1, eps1)``, ``(mu2, eps2)``.

    Returns ``inf`` at orders where the theorem's conditions do not hold.
    """
    a = _orders(orders)
    out = np.full_like(a, np.inf)
    if not (mu2 > 1 and mu1 > 1) or logq >= 0:
        return out
    if np.isneginf(logq):
        return np.zeros_like(a)
    cond_q = logq <= (mu2 - 1) * eps2 - mu2 * (math.log(mu1 / (mu1 - 1)) + math.log(mu2 / (mu2 - 1)))
    if not (cond_q and logq + eps2 < 0):
        return out
    ok = a < mu1  # the theorem needs lambda <= mu1; strict, as in the authors' code
    log1q = float(_log1mexp(logq))
    log_A = log1q - float(_log1mexp((logq + eps2) * (1.0 - 1.0 / mu2)))
    log_B = eps1 - logq / (mu1 - 1.0)
    s = np.logaddexp(log1q + (a - 1) * log_A, logq + (a - 1) * log_B) / (a - 1)
    out[ok] = s[ok]
    return out


def rdp_gnmax_data_dependent(orders: Any, counts: Any, sigma: float) -> np.ndarray:
    """Per-query data-dependent RDP of GNMax, shape (queries, orders): the minimum of Theorem 6 (with
    ``mu2 = sigma sqrt(log 1/q)``, ``mu1 = mu2 + 1``, ``eps_i = mu_i / sigma^2``) and ``lambda/sigma^2``.

    Vectorised over queries and orders (the same arithmetic as :func:`rdp_theorem6`).
    """
    a = _orders(orders)[None, :]
    s = check_real(sigma, "sigma", low=0.0, low_open=True)
    indep = a / s**2
    logq = log_q_gnmax(counts, s)[:, None]                      # (Q, 1), <= log(1 - 1/m) < 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mu2 = s * np.sqrt(-logq)
        mu1 = mu2 + 1.0
        eps1, eps2 = mu1 / s**2, mu2 / s**2
        cond = ((mu2 > 1.0) & (logq + eps2 < 0)
                & (logq <= (mu2 - 1) * eps2 - mu2 * (np.log(mu1 / (mu1 - 1)) + np.log(mu2 / (mu2 - 1)))))
        log1q = _log1mexp(logq)
        log_A = log1q - _log1mexp(np.minimum((logq + eps2) * (1.0 - 1.0 / mu2), -1e-300))
        log_B = eps1 - logq / (mu1 - 1.0)
        dd = np.logaddexp(log1q + (a - 1) * log_A, logq + (a - 1) * log_B) / (a - 1)
    ok = cond & (a < mu1) & np.isfinite(dd)
    out = np.where(ok, np.minimum(indep, dd), indep)
    return np.where(np.isneginf(logq), 0.0, out)


def rdp_lnmax_data_dependent(orders: Any, counts: Any, gamma: float) -> np.ndarray:
    """Per-query data-dependent RDP of LNMax, shape (queries, orders): the 2017 Theorem 2 bound with q
    of Theorem 3 where ``q < (e^{2g}-1)/(e^{4g}-1)``, capped by the data-independent curve."""
    a = _orders(orders)
    g = check_real(gamma, "gamma", low=0.0, low_open=True)
    indep = rdp_lnmax_data_independent(a, g)
    q = q_lnmax(counts, g)[:, None]
    l = (a - 1.0)[None, :]
    valid = q < math.expm1(2 * g) / math.expm1(4 * g)
    with np.errstate(divide="ignore", invalid="ignore"):
        qs = np.where(valid, q, 0.5 * math.expm1(2 * g) / math.expm1(4 * g))
        log_moment = np.logaddexp(np.log1p(-qs) + l * (np.log1p(-qs) - np.log1p(-math.exp(2 * g) * qs)),
                                  np.log(np.maximum(qs, 1e-300)) + 2 * g * l)
        log_moment = np.where(qs == 0, 0.0, log_moment)
    dd = np.where(valid, np.maximum(log_moment, 0.0) / l, np.inf)
    return np.minimum(indep[None, :], dd)


# --------------------------------------------------------------------------- end to end


@dataclass
class PateReport:
    """Privacy and utility of one PATE run.

    ``statement`` is the data-independent guarantee of the labels (a DP statement).
    ``epsilon_data_dependent`` is the data-dependent cost at the same delta: a function of the private
    votes, **not releasable**. ``release`` (GNMax and Confident-GNMax) is the smooth-sensitivity
    release of the data-dependent cost at one order: its ``epsilon_released`` may be published, and
    ``statement_with_release`` is the data-independent guarantee of the labels together with that
    release. ``release_note`` says why there is no release (LNMax, nothing answered, conditions C5-C6
    failing at the chosen order).
    """

    aggregator: str
    n_teachers: int
    n_queries: int
    n_answered: int
    label_accuracy: float | None
    statement: PrivacyStatement
    epsilon_data_dependent: float
    student_accuracy: float | None = None
    rdp_data_independent: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    rdp_data_dependent: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    release: SmoothSensitivityRelease | None = None
    statement_with_release: PrivacyStatement | None = None
    release_note: str = ""

    @property
    def epsilon_released(self) -> float | None:
        """The publishable (noisy) data-dependent epsilon, or None without a release."""
        return None if self.release is None else self.release.epsilon_released


class PATE:
    """Teachers on disjoint partitions, a noisy aggregator and a student on the answered public queries.

    Parameters
    ----------
    teacher, student : scikit-learn classifiers (cloned).
    n_teachers : int
    aggregator : {"gnmax", "confident_gnmax", "lnmax"}
    sigma : float
        GNMax noise (``gnmax`` and ``confident_gnmax``).
    gamma : float
        LNMax inverse noise scale (``lnmax``).
    threshold, sigma_threshold : float
        Confident-GNMax's check.
    delta : float
        Delta of the reported (eps, delta) statement.
    release_order : float, optional
        Rényi order of the smooth-sensitivity release of the data-dependent cost (GNMax,
        Confident-GNMax). Default: the order that minimises the data-independent epsilon of the
        answered queries (a function of public outputs only).
    release_beta : float, optional
        Smoothness beta of that release; default ``0.3 / release_order``.
    release_sigma : float
        Noise multiplier sigma_s of that release (noise ``SS_beta * N(0, sigma_s^2)``).
    orders : array, optional
        RDP orders (default :data:`~shuffledp.accounting.rdp.DEFAULT_ORDERS`).
    random_state : None, int or Generator
        None: cryptographic noise and partition; a seed is for simulation only.
    """

    def __init__(self, teacher: Any, student: Any, n_teachers: int, *, aggregator: Aggregator = "gnmax",
                 sigma: float = 40.0, gamma: float = 0.05, threshold: float = 0.0, sigma_threshold: float = 1.0,
                 delta: float = 1e-5, release_order: float | None = None, release_beta: float | None = None,
                 release_sigma: float = 3.0, orders: Any = None, random_state: Any = None) -> None:
        if aggregator not in ("lnmax", "gnmax", "confident_gnmax"):
            raise ValidationError(f"aggregator must be 'lnmax', 'gnmax' or 'confident_gnmax', got {aggregator!r}",
                                  parameter="aggregator")
        self.teacher, self.student = teacher, student
        self.n_teachers = check_positive_int(n_teachers, "n_teachers")
        self.aggregator = aggregator
        self.sigma = check_real(sigma, "sigma", low=0.0, low_open=True)
        self.gamma = check_real(gamma, "gamma", low=0.0, low_open=True)
        self.threshold = check_real(threshold, "threshold")
        self.sigma_threshold = check_real(sigma_threshold, "sigma_threshold", low=0.0, low_open=True)
        self.delta = check_delta(delta)
        self.release_order = None if release_order is None else check_real(release_order, "release_order", low=1.0,
                                                                             low_open=True)
        self.release_beta = None if release_beta is None else check_real(release_beta, "release_beta", low=0.0,
                                                                          low_open=True)
        self.release_sigma = check_real(release_sigma, "release_sigma", low=0.0, low_open=True)
        self.orders = _orders(orders)
        self.rng = as_generator(random_state)

    def fit(self, X_private: Any, y_private: Any, X_public: Any, *, y_public: Any = None,
            X_test: Any = None, y_test: Any = None) -> PateReport:
        """Train the teachers, label ``X_public`` with the aggregator, train the student, account.

        ``y_public`` (if given) only measures the accuracy of the released labels; ``X_test,
        y_test`` (if given) the student's accuracy. Neither is used in training.
        """
        X_private, y_private, X_public = np.asarray(X_private), np.asarray(y_private), np.asarray(X_public)
        if len(X_private) != len(y_private):
            raise ValidationError("X_private and y_private must have the same number of rows", parameter="y_private")
        self.classes_ = np.unique(y_private)
        self.teachers_ = train_teachers(self.teacher, X_private, y_private, self.n_teachers, self.rng)
        counts = teacher_votes(self.teachers_, X_public, self.classes_)
        a = self.orders
        Q = len(counts)
        if self.aggregator == "lnmax":
            idx = lnmax(counts, self.gamma, self.rng)
            answered = np.ones(Q, bool)
            per_indep = rdp_lnmax_data_independent(a, self.gamma)
            per_dd = rdp_lnmax_data_dependent(a, counts, self.gamma)
            fixed = np.zeros_like(a)
        else:
            if self.aggregator == "gnmax":
                idx = gnmax(counts, self.sigma, self.rng)
                fixed = np.zeros_like(a)
            else:
                idx = confident_gnmax(counts, self.threshold, self.sigma_threshold, self.sigma, self.rng)
                fixed = Q * rdp_threshold_data_independent(a, self.sigma_threshold)
            answered = idx != NO_ANSWER
            per_indep = rdp_gnmax_data_independent(a, self.sigma)
            per_dd = rdp_gnmax_data_dependent(a, counts[answered], self.sigma)
        n_ans = int(answered.sum())
        rdp_indep = fixed + n_ans * per_indep
        rdp_dd = fixed + (per_dd[answered] if self.aggregator == "lnmax" else per_dd).sum(axis=0)
        eps_indep, _ = rdp_to_epsilon(a, rdp_indep, self.delta)
        eps_dd, _ = rdp_to_epsilon(a, np.minimum(rdp_dd, rdp_indep), self.delta)
        labels = self.classes_[idx[answered]]
        self.public_labels_ = np.full(Q, None, dtype=object)
        self.public_labels_[answered] = labels
        label_acc = None
        if y_public is not None and n_ans:
            label_acc = float(np.mean(labels == np.asarray(y_public)[answered]))
        self.student_ = None
        student_acc = None
        if n_ans and np.unique(labels).size >= 2:
            self.student_ = clone(self.student).fit(X_public[answered], labels)
            if X_test is not None and y_test is not None:
                student_acc = float(self.student_.score(X_test, y_test))
        agg = {"lnmax": f"LNMax gamma={self.gamma:g} (Papernot et al. 2017)",
               "gnmax": f"GNMax sigma={self.sigma:g} (Papernot et al. 2018)",
               "confident_gnmax": f"Confident-GNMax T={self.threshold:g} sigma1={self.sigma_threshold:g} "
                                  f"sigma2={self.sigma:g} (Papernot et al. 2018)"}[self.aggregator]
        statement = PrivacyStatement(eps_indep, self.delta, model="central", neighbouring="replace_one",
                                     note=f"PATE, {self.n_teachers} teachers, {agg}, {n_ans}/{Q} queries answered, "
                                          f"data-independent RDP")
        release, with_release, note = self._release(counts[answered], rdp_indep, agg, n_ans, Q)
        self.report_ = PateReport(self.aggregator, self.n_teachers, Q, n_ans, label_acc, statement, eps_dd,
                                  student_acc, rdp_indep, rdp_dd, release, with_release, note)
        return self.report_

    def _release(self, counts: np.ndarray, rdp_indep: np.ndarray, agg: str, n_ans: int,
                 Q: int) -> tuple[SmoothSensitivityRelease | None, PrivacyStatement | None, str]:
        """Smooth-sensitivity release of the data-dependent cost (GNMax family only)."""
        if self.aggregator == "lnmax":
            return None, None, "no smooth-sensitivity analysis for LNMax (Papernot et al. 2018 cover GNMax)"
        if n_ans == 0:
            return None, None, "no query answered: nothing data-dependent to release"
        order = self.release_order
        if order is None:
            _, order = rdp_to_epsilon(self.orders, rdp_indep, self.delta)
        beta = self.release_beta if self.release_beta is not None else 0.3 / order
        fixed = 0.0 if self.aggregator == "gnmax" else Q * order / (2.0 * self.sigma_threshold**2)
        try:
            rel = release_gnmax_cost(counts, self.sigma, order, beta, self.release_sigma, self.delta, self.rng, fixed)
        except ValidationError as e:
            return None, None, str(e)
        eps, _ = rdp_to_epsilon(self.orders, rdp_indep + rdp_gnss(self.orders, beta, self.release_sigma), self.delta)
        st = PrivacyStatement(eps, self.delta, model="central", neighbouring="replace_one",
                              note=f"PATE, {self.n_teachers} teachers, {agg}, {n_ans}/{Q} queries answered, "
                                   f"data-independent RDP of the labels plus the smooth-sensitivity release of the "
                                   f"data-dependent cost (order {order:g}, beta {beta:g}, sigma_s "
                                   f"{self.release_sigma:g}); the released data-dependent epsilon is "
                                   f"{rel.epsilon_released:g}")
        return rel, st, ""
