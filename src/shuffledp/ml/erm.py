"""Differentially private empirical risk minimisation (linear classifiers).

Chaudhuri, Monteleoni, Sarwate, "Differentially private empirical risk minimization", JMLR 12
(2011). With data ``z_i`` of L2 norm at most 1, labels ``y_i`` in {-1, +1}, a convex loss ``l``
with ``|l'| <= 1`` and ``|l''| <= c`` and the regularised objective

    J(w) = (1/n) sum_i l(y_i w.z_i) + (Lambda/2) ||w||^2,

- **output perturbation** (Algorithm 1, Theorem 6 / Corollary 8): ``w* = argmin J`` has L2
  sensitivity ``2/(n Lambda)`` under replacement of one example; release ``w* + b`` with ``b``
  drawn from the density proportional to ``exp(-(n Lambda eps / 2) ||b||)``. eps-DP.
- **objective perturbation** (Algorithm 2, Theorem 9 / Corollary 11 for logistic regression and
  Corollary 12 for the Huber SVM): the paper's ``eps' = eps - log(1 + 2c/(n Lambda) + c^2/(n^2 Lambda^2))``
  is used with a tighter determinant bound, ``eps' = eps - log(1 + c/(n Lambda))``
  (:func:`objective_perturbation_parameters`, which proves it); if ``eps' > 0`` then ``Delta = 0``,
  else ``Delta = c/(n (e^{eps/2} - 1)) - Lambda`` and ``eps' = eps/2``; draw ``b`` with density
  proportional to ``exp(-(eps'/2) ||b||)`` and release ``argmin J(w) + (1/n) b.w + (Delta/2) ||w||^2``.
  eps-DP.

A density proportional to ``exp(-beta ||b||)`` in R^d is sampled as a uniform direction times a
norm drawn from Gamma(shape d, scale 1/beta). Both guarantees are pure eps-DP for the
replace-one neighbouring relation, assume the optimiser returns the exact minimiser (we solve to
a gradient norm of 1e-10 with L-BFGS) and ignore floating-point effects of the noise sampler.

Data norm: every row is clipped to L2 norm ``data_norm`` and divided by it (a data-independent
map); with an intercept the constant feature ``t = intercept_scaling`` is appended and the vector
divided by ``sqrt(1 + t^2)``, so the norm bound 1 of the theorems holds. ``data_norm`` must be chosen without looking at the
private data. Several classes: one-vs-rest, each of the K binary problems gets eps/K (basic
composition, all K problems see every record).

``regularization="auto"`` picks Lambda from (eps, n, d) alone (:func:`auto_regularization`) and,
when ``n eps / d < 4``, releases instead the constant predictor of a class drawn by the
exponential mechanism on the class counts (McSherry and Talwar 2007; eps-DP, replace-one).

Noise comes from :func:`shuffledp.core.rng.secure_rng` (a cryptographic generator) unless a seed
or generator is passed as ``random_state``, which is meant for simulation only.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from scipy import optimize, special
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.rng import as_generator
from ..core.validation import check_epsilon, check_real

__all__ = ["DPLogisticRegression", "DPLinearSVC", "objective_perturbation_parameters", "sample_norm_noise",
           "auto_regularization", "majority_class_probabilities", "logistic_loss", "huber_loss",
           "AUTO_CONSTANT_PREDICTOR_THRESHOLD"]

Method = Literal["objective", "output"]


# --------------------------------------------------------------------------- losses


def logistic_loss(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logistic loss ``log(1 + e^{-m})`` of margins ``m`` and its derivative; ``|l'| <= 1``, ``l'' <= 1/4``."""
    return np.logaddexp(0.0, -m), -special.expit(-m)


def huber_loss(m: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
    """Huber hinge loss of Chaudhuri et al. (2011), eq. (7), and its derivative.

    ``0`` for ``m > 1 + h``; ``(1 + h - m)^2 / (4h)`` for ``|1 - m| <= h``; ``1 - m`` for ``m < 1 - h``.
    ``|l'| <= 1`` and ``|l''| <= 1/(2h)``.
    """
    val = np.where(m > 1 + h, 0.0, np.where(m < 1 - h, 1.0 - m, (1 + h - m) ** 2 / (4 * h)))
    der = np.where(m > 1 + h, 0.0, np.where(m < 1 - h, -1.0, -(1 + h - m) / (2 * h)))
    return val, der


# --------------------------------------------------------------------------- noise and constants


def sample_norm_noise(dim: int, beta: float, rng: np.random.Generator) -> np.ndarray:
    """One draw from the density on R^dim proportional to ``exp(-beta ||b||_2)``.

    In polar coordinates the norm has density proportional to ``r^{dim-1} e^{-beta r}``, i.e.
    Gamma(shape ``dim``, scale ``1/beta``), independent of the direction, which is uniform on the
    sphere (a normalised standard Gaussian vector).
    """
    direction = rng.standard_normal(dim)
    nrm = float(np.linalg.norm(direction))
    while nrm == 0.0:  # probability zero; keeps the direction well defined
        direction = rng.standard_normal(dim)
        nrm = float(np.linalg.norm(direction))
    return direction / nrm * rng.gamma(shape=dim, scale=1.0 / beta)


def objective_perturbation_parameters(epsilon: float, n: int, regularization: float, curvature: float,
                                      bound: Literal["rank_one", "chaudhuri"] = "rank_one") -> tuple[float, float]:
    """``(eps', Delta)`` of Algorithm 2 of Chaudhuri et al. (2011); the noise vector has density
    proportional to ``exp(-(eps'/2) ||b||)``.

    ``bound="chaudhuri"``: the paper's constants, ``eps' = eps - log(1 + 2c/(n L) + c^2/(n L)^2)``;
    if that is not positive, ``Delta = c/(n (e^{eps/4} - 1)) - L`` and ``eps' = eps/2``.

    ``bound="rank_one"`` (default): ``eps' = eps - log(1 + c/(n L))`` and ``Delta = 0`` when that is
    at least ``eps/2``; otherwise ``Delta = c/(n (e^{eps/2} - 1)) - L > 0`` and ``eps' = eps/2`` (the
    paper switches only when ``eps'`` would be <= 0, which leaves arbitrarily little ``eps'`` and hence
    arbitrarily large noise just above the switch; both choices are valid for every ``Delta >= 0``
    with ``eps' = eps - log(1 + c/(n (L + Delta)))``, and the switch depends on (eps, n, L, c) only).
    Same proof as Theorem 9 with one step tightened. The output density is ``nu(b(w)) |det J(w)|`` with ``J = B + a x x^T``, where
    ``a = l''(y w.x)`` in ``[0, c]`` belongs to the replaced row ``x`` and ``B >= n (L + Delta) I``
    collects the shared rows and the regulariser. By the matrix determinant lemma
    ``det(B + a x x^T) = det(B) (1 + a x^T B^{-1} x)``, so for neighbours with rows ``x`` and ``x2``
    the ratio of determinants is ``(1 + a x^T B^{-1} x) / (1 + a2 x2^T B^{-1} x2) <= 1 + c/(n (L + Delta))``
    (``||x|| <= 1``, ``a2 >= 0``); the paper bounds it by ``(1 + c/(n L))^2``. The ratio of noise
    densities is at most ``e^{eps'}`` as in the paper (``||b(D) - b(D')|| <= 2``), so the privacy loss
    is at most ``eps' + log(1 + c/(n (L + Delta))) <= eps``. ``tests/ml/test_erm.py`` computes this
    density ratio exactly at adversarial outputs and neighbours.
    """
    eps = check_epsilon(epsilon)
    lam = check_real(regularization, "regularization", low=0.0, low_open=True)
    c = check_real(curvature, "curvature", low=0.0, low_open=True)
    if n < 1:
        raise ValidationError(f"n must be >= 1, got {n!r}", parameter="n")
    if bound not in ("rank_one", "chaudhuri"):
        raise ValidationError(f"bound must be 'rank_one' or 'chaudhuri', got {bound!r}", parameter="bound")
    x = c / (n * lam)
    if bound == "chaudhuri":
        eps_prime = eps - math.log1p(2 * x + x * x)
        if eps_prime > 0:
            return eps_prime, 0.0
        return eps / 2.0, c / (n * math.expm1(eps / 4.0)) - lam
    if math.log1p(x) <= eps / 2.0:
        return eps - math.log1p(x), 0.0
    return eps / 2.0, c / (n * math.expm1(eps / 2.0)) - lam


#: Constants ``a`` of :func:`auto_regularization`, tuned on public synthetic data (see its docstring).
AUTO_REGULARIZATION_CONSTANT = {"objective": 0.3, "output": 1.0}


def auto_regularization(epsilon: float, n: int, dim: int, method: Method = "objective") -> float:
    """Data-independent regularisation ``Lambda(eps, n, d) = a d / (n eps min(eps, 1))``.

    A function of the privacy parameter, the number of rows ``n`` (public under the replace-one
    relation, where neighbours have the same size) and the dimension ``d`` of the scaled feature
    vector (the intercept's constant feature included) only; it never looks at the data, so using
    it leaves the guarantee of Algorithms 1 and 2 of Chaudhuri et al. (2011) unchanged.

    Reasoning (Chaudhuri et al. 2011, Section 6, Theorems 15-18). With ``J`` Lambda-strongly convex,
    the noise moves the released vector by about ``||b|| / (n Lambda)`` with ``E||b|| = 2d/eps'``
    (objective perturbation) or ``2d/(n Lambda eps)`` (output perturbation), i.e. by ``2d/(n Lambda
    eps)`` in both cases, while the regularisation bias grows with ``Lambda``; balancing the two as in
    the excess-risk bounds (Theorem 18 takes ``Lambda`` proportional to ``d / (n eps)`` up to the norm of
    the reference predictor and logarithms) gives ``Lambda = a d / (n eps)``. When ``eps < 1`` the
    noise dominates: for large ``Lambda`` the unperturbed minimiser is about ``-grad L(0) / Lambda``
    and the noise shift is also proportional to ``1/Lambda``, so their ratio no longer depends on
    ``Lambda`` while ``eps'`` of Algorithm 2 approaches ``eps``; heavier regularisation then costs
    nothing in signal, hence the extra factor ``1/eps``. With this rule
    ``c/(n Lambda) = c eps min(eps, 1) / (a d)``, so Algorithm 2 keeps ``eps' >= eps (1 - 2c/(a d))``
    and never needs the ``Delta`` branch for ``d >= 2`` and ``c <= 1/4``.

    The constants ``a = 0.3`` (objective) and ``a = 1`` (output) were chosen on public synthetic
    data only (scikit-learn ``make_classification``, 569 rows, 30 standardised features, class
    separations 1.5 / 2 / 2.5, 70/30 split, rows clipped to norm 6, ``a`` in {0.1, 0.3, 1, 3, 10, 30},
    eps from 0.05 to 20): the best ``a`` was the same across eps >= 1 (0.3 and 1), and larger
    values were as good or better below eps = 1, which the ``min(eps, 1)`` term reflects.

    Parameters
    ----------
    epsilon : float
        Privacy parameter of the binary problem (> 0); for one-vs-rest with K classes, eps/K.
    n : int
        Number of training rows (>= 1).
    dim : int
        Dimension of the scaled feature vector (>= 1), counting the intercept's constant feature.
    method : {"objective", "output"}

    Returns
    -------
    float
        ``Lambda > 0``.
    """
    eps = check_epsilon(epsilon)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValidationError(f"n must be an integer >= 1, got {n!r}", parameter="n")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValidationError(f"dim must be an integer >= 1, got {dim!r}", parameter="dim")
    if method not in AUTO_REGULARIZATION_CONSTANT:
        raise ValidationError(f"method must be 'objective' or 'output', got {method!r}", parameter="method")
    return AUTO_REGULARIZATION_CONSTANT[method] * int(dim) / (int(n) * eps * min(eps, 1.0))


#: With ``regularization="auto"``, fit the eps-DP constant predictor when ``n eps / d`` is below this.
AUTO_CONSTANT_PREDICTOR_THRESHOLD = 4.0


def majority_class_probabilities(counts: np.ndarray, epsilon: float) -> np.ndarray:
    """Output distribution of the exponential mechanism choosing a class by its count.

    ``Pr[k] proportional to exp(eps n_k / 2)`` (McSherry and Talwar 2007). Replacing one record changes
    each count by at most 1 (utility sensitivity 1), so every probability changes by a factor at most
    ``e^eps``: eps-DP for the replace-one relation. Releasing the constant predictor "always class k"
    is post-processing of this choice.
    """
    eps = check_epsilon(epsilon)
    c = np.asarray(counts, dtype=float)
    if c.ndim != 1 or c.size < 1 or np.any(c < 0):
        raise ValidationError("counts must be a non-empty 1-d array of non-negative counts", parameter="counts")
    logits = 0.5 * eps * (c - c.max())
    p = np.exp(logits)
    return p / p.sum()


# --------------------------------------------------------------------------- estimators


class _DPLinearClassifier(ClassifierMixin, BaseEstimator):
    """Shared fitting code; subclasses define the loss, its curvature bound and ``__init__``."""

    def _loss(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _curvature(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_params(self) -> None:
        check_epsilon(self.epsilon)
        if self.method not in ("objective", "output"):
            raise ValidationError(f"method must be 'objective' or 'output', got {self.method!r}", parameter="method")
        if not (isinstance(self.regularization, str) and self.regularization == "auto"):
            check_real(self.regularization, "regularization", low=0.0, low_open=True)
        check_real(self.data_norm, "data_norm", low=0.0, low_open=True)
        check_real(self.intercept_scaling, "intercept_scaling", low=0.0, low_open=True)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValidationError(f"fit_intercept must be a bool, got {self.fit_intercept!r}",
                                  parameter="fit_intercept")

    def _features(self, X: np.ndarray) -> np.ndarray:
        """Rows clipped to ``data_norm``, scaled to norm <= 1 (with the constant feature if any)."""
        R = float(self.data_norm)
        norms = np.linalg.norm(X, axis=1)
        scale = np.minimum(1.0, R / np.maximum(norms, 1e-300)) / R
        Z = X * scale[:, None]
        if self.fit_intercept:
            t = float(self.intercept_scaling)
            Z = np.hstack([Z, np.full((Z.shape[0], 1), t)]) / math.sqrt(1.0 + t * t)
        return Z

    def _minimise(self, Z: np.ndarray, y: np.ndarray, lam: float, linear: np.ndarray | None) -> np.ndarray:
        """argmin (1/n) sum l(y_i w.z_i) + (lam/2)||w||^2 + linear.w (strongly convex: unique)."""
        n, d = Z.shape
        lin = np.zeros(d) if linear is None else linear

        def f(w: np.ndarray) -> tuple[float, np.ndarray]:
            m = y * (Z @ w)
            val, der = self._loss(m)
            obj = val.mean() + 0.5 * lam * w @ w + lin @ w
            grad = Z.T @ (der * y) / n + lam * w + lin
            return float(obj), grad

        res = optimize.minimize(f, np.zeros(d), jac=True, method="L-BFGS-B",
                                options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 10_000})
        return res.x

    def _fit_binary(self, Z: np.ndarray, y: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
        n, d = Z.shape
        lam = (auto_regularization(eps, n, d, self.method) if isinstance(self.regularization, str)
               else float(self.regularization))
        self.regularization_ = lam
        if self.method == "output":
            w = self._minimise(Z, y, lam, None)
            return w + sample_norm_noise(d, n * lam * eps / 2.0, rng)
        eps_prime, Delta = objective_perturbation_parameters(eps, n, lam, self._curvature())
        b = sample_norm_noise(d, eps_prime / 2.0, rng)
        return self._minimise(Z, y, lam + Delta, b / n)

    def fit(self, X: Any, y: Any) -> "_DPLinearClassifier":
        """Fit on ``X`` (n, d) and labels ``y``; the fitted model is ``epsilon``-DP (see ``privacy_``)."""
        self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        K = len(self.classes_)
        if K < 2:
            raise ValueError(f"y must contain samples of at least 2 classes; got 1 class: {self.classes_[0]!r}")
        rng = as_generator(self.random_state)
        problems = [self.classes_[1]] if K == 2 else list(self.classes_)
        eps_each = float(self.epsilon) / len(problems)
        d = X.shape[1]
        d_scaled = d + int(bool(self.fit_intercept))
        self.constant_predictor_ = (isinstance(self.regularization, str)
                                    and len(y) * eps_each / d_scaled < AUTO_CONSTANT_PREDICTOR_THRESHOLD)
        if self.constant_predictor_:
            counts = np.array([np.sum(y == c) for c in self.classes_])
            k = int(rng.choice(K, p=majority_class_probabilities(counts, float(self.epsilon))))
            self.regularization_ = None
            self.coef_ = np.zeros((len(problems), d))
            self.intercept_ = (np.array([1.0 if k == 1 else -1.0]) if K == 2
                               else np.where(np.arange(K) == k, 1.0, -1.0))
            self.privacy_ = PrivacyStatement(float(self.epsilon), 0.0, model="central", neighbouring="replace_one",
                                             note=f"{type(self).__name__}: constant predictor, class chosen by the "
                                                  f"exponential mechanism on class counts (regularization='auto' "
                                                  f"with n eps/d < {AUTO_CONSTANT_PREDICTOR_THRESHOLD:g})")
            return self
        Z = self._features(X)
        W = np.vstack([self._fit_binary(Z, np.where(y == c, 1.0, -1.0), eps_each, rng) for c in problems])
        if self.fit_intercept:
            t = float(self.intercept_scaling)
            self.coef_ = W[:, :d] / (float(self.data_norm) * math.sqrt(1.0 + t * t))
            self.intercept_ = W[:, d] * t / math.sqrt(1.0 + t * t)
        else:
            self.coef_ = W / float(self.data_norm)
            self.intercept_ = np.zeros(W.shape[0])
        how = ("objective perturbation (Chaudhuri et al. 2011, Alg. 2, rank-one Jacobian bound)"
               if self.method == "objective"
               else "output perturbation (Chaudhuri et al. 2011, Alg. 1)")
        split = "" if len(problems) == 1 else f"; one-vs-rest, {len(problems)} problems at eps/{len(problems)} each"
        self.privacy_ = PrivacyStatement(float(self.epsilon), 0.0, model="central", neighbouring="replace_one",
                                         note=f"{type(self).__name__}: {how}, rows clipped to L2 norm "
                                              f"{float(self.data_norm):g}{split}")
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """``clip(x) . coef + intercept`` (rows clipped to ``data_norm`` as in training)."""
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        R = float(self.data_norm)
        norms = np.linalg.norm(X, axis=1)
        Xc = X * np.minimum(1.0, R / np.maximum(norms, 1e-300))[:, None]
        scores = Xc @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X: Any) -> np.ndarray:
        s = self.decision_function(X)
        if s.ndim == 1:
            return self.classes_[(s > 0).astype(int)]
        return self.classes_[np.argmax(s, axis=1)]


class DPLogisticRegression(_DPLinearClassifier):
    """eps-DP L2-regularised logistic regression (Chaudhuri, Monteleoni, Sarwate, JMLR 2011).

    Parameters
    ----------
    epsilon : float
        Privacy parameter (> 0) of the fitted model: pure eps-DP, replace-one neighbours.
    method : {"objective", "output"}
        Objective perturbation (Algorithm 2, curvature bound c = 1/4) or output perturbation
        (Algorithm 1, sensitivity ``2/(n regularization)``).
    regularization : float or "auto"
        Lambda > 0 in ``(1/n) sum l + (Lambda/2) ||w||^2`` (on the scaled features), or ``"auto"``:
        the data-independent rule :func:`auto_regularization` of (eps per binary problem, n, d).
        With ``"auto"`` and ``n eps / d < 4`` (eps per binary problem, ``d`` counting the intercept)
        the model is instead the constant predictor of a class chosen by the exponential mechanism
        on the class counts (:func:`majority_class_probabilities`, eps-DP with the whole eps): in
        that regime the noise of Algorithms 1 and 2 dominates the signal for any Lambda (the ratio
        of the shift ``-grad/Lambda`` to the noise ``2d/(n Lambda eps)`` no longer depends on
        Lambda), and on the public synthetic data used for :func:`auto_regularization` DP-ERM was
        below the majority rate at ``n eps / d = 2.6`` and at it at ``6.4``; 4 is their geometric
        mean. The rule depends on (eps, n, d) only.
    data_norm : float
        Rows are clipped to this L2 norm (choose it without looking at the private data).
    fit_intercept : bool
        Append a constant feature (regularised like the others).
    intercept_scaling : float
        Value ``t > 0`` of that constant feature next to the clipped row divided by ``data_norm``;
        the augmented row is divided by ``sqrt(1 + t^2)`` so that its norm is at most 1. Smaller
        ``t`` leaves more of the norm budget to the features and regularises the intercept more.
        Data-independent (choose it without the private data).
    random_state : None, int or numpy Generator
        ``None`` (default): noise from a cryptographic generator. An int or generator: seeded
        noise, for simulation only.

    Attributes
    ----------
    coef_, intercept_, classes_ : as in scikit-learn.
    regularization_ : float or None
        The Lambda used (the value of the rule when ``regularization="auto"``); None for the
        constant predictor.
    constant_predictor_ : bool
        True when ``"auto"`` chose the constant predictor (``coef_`` is zero, ``intercept_`` +-1).
    privacy_ : PrivacyStatement
        The guarantee of the fitted model.
    """

    def __init__(self, epsilon: float = 1.0, *, method: Method = "objective", regularization: float | str = 0.01,
                 data_norm: float = 1.0, fit_intercept: bool = True, intercept_scaling: float = 1.0,
                 random_state: Any = None) -> None:
        self.epsilon = epsilon
        self.method = method
        self.regularization = regularization
        self.data_norm = data_norm
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.random_state = random_state

    def _loss(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return logistic_loss(m)

    def _curvature(self) -> float:
        return 0.25

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities: the logistic of the score (binary); one-vs-rest scores normalised (several)."""
        s = self.decision_function(X)
        if s.ndim == 1:
            p1 = special.expit(s)
            return np.column_stack([1.0 - p1, p1])
        p = special.expit(s)
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        return np.log(self.predict_proba(X))


class DPLinearSVC(_DPLinearClassifier):
    """eps-DP linear SVM with the Huber hinge loss (Chaudhuri et al. 2011, eq. (7), Corollary 12).

    Same parameters as :class:`DPLogisticRegression` plus ``huber_h`` (> 0, the width of the
    quadratic part; curvature bound ``c = 1/(2 huber_h)``). No ``predict_proba``.
    """

    def __init__(self, epsilon: float = 1.0, *, method: Method = "objective", regularization: float | str = 0.01,
                 huber_h: float = 0.5, data_norm: float = 1.0, fit_intercept: bool = True,
                 intercept_scaling: float = 1.0, random_state: Any = None) -> None:
        self.epsilon = epsilon
        self.method = method
        self.regularization = regularization
        self.huber_h = huber_h
        self.data_norm = data_norm
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.random_state = random_state

    def _check_params(self) -> None:
        super()._check_params()
        check_real(self.huber_h, "huber_h", low=0.0, low_open=True)

    def _loss(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return huber_loss(m, float(self.huber_h))

    def _curvature(self) -> float:
        return 1.0 / (2.0 * float(self.huber_h))
