"""Membership-inference attacks on trained classifiers.

- **Loss threshold** (Yeom, Giacomelli, Fredrikson, Jha, CSF 2018): an example is called a member
  when the model's loss on it is small. The score is ``-loss``; Yeom et al.'s fixed threshold is
  the mean training loss, whose membership advantage ``TPR - FPR`` is reported as
  ``threshold_advantage``.
- **Shadow models** (Shokri, Stronati, Song, Shmatikov, S&P 2017): the attacker trains shadow
  models like the target on data from the same distribution, labels their outputs on their own
  training rows "in" and on held-out rows "out", and trains an attack classifier on those outputs.
  Here a single attack model sees class-agnostic features of the output (log-probability of the
  true label, largest probability, entropy), the simplification of Salem et al. (NDSS 2019) in
  place of one attack model per class.

Each attack returns the ROC AUC and the TPR at a low FPR (default 1e-3, Carlini et al. S&P 2022).
A TPR at FPR = 1e-3 is only meaningful with at least ~1000 non-members; ``low_fpr_resolved``
says whether the sample was large enough. Differential privacy bounds every such attack: an
eps-DP training algorithm has ``TPR <= e^eps FPR`` (and ``+ delta`` for (eps, delta)-DP), so the
AUC of a strongly private model is near 1/2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score, roc_curve

from ..core.errors import ValidationError
from ..core.validation import check_positive_int, check_probability

__all__ = ["AttackResult", "attack_metrics", "example_losses", "loss_threshold_attack", "shadow_model_attack"]


@dataclass(frozen=True)
class AttackResult:
    """Success of a membership-inference attack."""

    auc: float
    tpr_at_low_fpr: float
    low_fpr: float
    low_fpr_resolved: bool
    advantage: float
    n_members: int
    n_nonmembers: int
    threshold_advantage: float | None = None


def attack_metrics(member_scores: Any, nonmember_scores: Any, low_fpr: float = 1e-3) -> AttackResult:
    """AUC, TPR at FPR <= ``low_fpr`` and the best advantage ``max(TPR - FPR)`` of scores (higher = member)."""
    m = np.asarray(member_scores, dtype=float).ravel()
    o = np.asarray(nonmember_scores, dtype=float).ravel()
    if m.size == 0 or o.size == 0 or not (np.all(np.isfinite(m)) and np.all(np.isfinite(o))):
        raise ValidationError("member_scores and nonmember_scores must be non-empty arrays of finite reals",
                              parameter="member_scores")
    low_fpr = check_probability(low_fpr, "low_fpr", open_low=True)
    labels = np.concatenate([np.ones(m.size), np.zeros(o.size)])
    scores = np.concatenate([m, o])
    fpr, tpr, _ = roc_curve(labels, scores)
    tpr_low = float(np.max(tpr[fpr <= low_fpr])) if np.any(fpr <= low_fpr) else 0.0
    return AttackResult(float(roc_auc_score(labels, scores)), tpr_low, low_fpr, o.size * low_fpr >= 1.0,
                        float(np.max(tpr - fpr)), m.size, o.size)


def example_losses(model: Any, X: Any, y: Any) -> np.ndarray:
    """Per-example cross-entropy ``-log p(y|x)`` (probabilities clipped at 1e-12); models without
    ``predict_proba`` use the hinge loss of ``decision_function`` (binary, classes_[1] positive)."""
    y = np.asarray(y)
    classes = np.asarray(model.classes_)
    idx = np.searchsorted(classes, y)
    if np.any(idx >= len(classes)) or np.any(classes[np.minimum(idx, len(classes) - 1)] != y):
        raise ValidationError("y holds labels the model was not trained on", parameter="y")
    if hasattr(model, "predict_proba"):
        p = model.predict_proba(X)[np.arange(len(y)), idx]
        return -np.log(np.clip(p, 1e-12, 1.0))
    s = np.asarray(model.decision_function(X))
    if s.ndim != 1:
        raise ValidationError("models without predict_proba must be binary", parameter="model")
    return np.maximum(0.0, 1.0 - np.where(idx == 1, 1.0, -1.0) * s)


def loss_threshold_attack(model: Any, X_members: Any, y_members: Any, X_nonmembers: Any, y_nonmembers: Any,
                          low_fpr: float = 1e-3) -> AttackResult:
    """Yeom et al. (2018): score ``-loss``; also the advantage at the mean-training-loss threshold."""
    lm = example_losses(model, X_members, y_members)
    lo = example_losses(model, X_nonmembers, y_nonmembers)
    res = attack_metrics(-lm, -lo, low_fpr)
    tau = float(lm.mean())
    adv = float(np.mean(lm <= tau) - np.mean(lo <= tau))
    return AttackResult(res.auc, res.tpr_at_low_fpr, res.low_fpr, res.low_fpr_resolved, res.advantage,
                        res.n_members, res.n_nonmembers, threshold_advantage=adv)


def _attack_features(model: Any, X: Any, y: Any) -> np.ndarray:
    loss = example_losses(model, X, y)
    if hasattr(model, "predict_proba"):
        P = np.clip(model.predict_proba(X), 1e-12, 1.0)
        top = P.max(axis=1)
        ent = -(P * np.log(P)).sum(axis=1)
    else:
        s = np.abs(np.asarray(model.decision_function(X)))
        top, ent = s, -s
    return np.column_stack([-loss, np.log(top), ent])


def shadow_model_attack(make_model: Callable[[], Any], X_shadow: Any, y_shadow: Any, n_shadows: int,
                        target: Any, X_members: Any, y_members: Any, X_nonmembers: Any, y_nonmembers: Any,
                        rng: np.random.Generator, low_fpr: float = 1e-3) -> AttackResult:
    """Shokri et al. (2017) with ``n_shadows`` shadow models built by ``make_model()`` (a fresh
    unfitted estimator), each trained on a random half of a disjoint slice of the attacker's
    ``(X_shadow, y_shadow)`` and queried on both halves; the attack model is a logistic regression
    on the output features; it then scores the target's members and non-members."""
    n_shadows = check_positive_int(n_shadows, "n_shadows")
    X_shadow, y_shadow = np.asarray(X_shadow), np.asarray(y_shadow)
    if len(X_shadow) < 4 * n_shadows:
        raise ValidationError(f"X_shadow needs at least 4 rows per shadow model, got {len(X_shadow)} for "
                              f"{n_shadows}", parameter="X_shadow")
    feats, labels = [], []
    for part in np.array_split(rng.permutation(len(X_shadow)), n_shadows):
        half = len(part) // 2
        inn, out = part[:half], part[half:2 * half]
        shadow = make_model()
        shadow = clone(shadow).fit(X_shadow[inn], y_shadow[inn])
        keep_in = np.isin(y_shadow[inn], shadow.classes_)
        keep_out = np.isin(y_shadow[out], shadow.classes_)
        feats += [_attack_features(shadow, X_shadow[inn][keep_in], y_shadow[inn][keep_in]),
                  _attack_features(shadow, X_shadow[out][keep_out], y_shadow[out][keep_out])]
        labels += [np.ones(keep_in.sum()), np.zeros(keep_out.sum())]
    attack = LogisticRegression(max_iter=1000).fit(np.vstack(feats), np.concatenate(labels))
    sm = attack.decision_function(_attack_features(target, X_members, y_members))
    so = attack.decision_function(_attack_features(target, X_nonmembers, y_nonmembers))
    return attack_metrics(sm, so, low_fpr)
