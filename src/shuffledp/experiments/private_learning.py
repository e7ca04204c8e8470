"""Private learning experiment: accuracy, membership inference and audits against epsilon.

Tables (CSV) and figures (PNG) with an ``index.html``, written to ``results/private_learning``:

- ``erm_accuracy.csv``: test accuracy of DP logistic regression (objective and output
  perturbation, Chaudhuri et al. 2011, ``regularization="auto"``) on scikit-learn's breast-cancer
  data against eps, mean and standard error over repetitions on one fixed split; IBM's diffprivlib
  ``LogisticRegression`` (objective perturbation through its ``Vector`` mechanism) on the same
  split, with its fixed ``C`` and with our rule, when its own venv (``.venv-dpl`` with
  scikit-learn < 1.6, or ``SHUFFLEDP_DIFFPRIVLIB_PYTHON``) is found.
- ``pate.csv``: PATE (GNMax, Confident-GNMax, LNMax) privacy (data-independent statement, the
  data-dependent cost (not releasable), its smooth-sensitivity release (``eps_released``) and the
  data-independent statement covering labels plus release) and student accuracy.
- ``dpsgd.csv``: DP-SGD with Opacus on digits (small MLP), epsilon from the project's RDP
  accountant registered in Opacus (``--full`` only unless torch is quick to load).
- ``dpsgd_audit.csv``: lower bound from the strongest (gradient) canary on the subsampled Gaussian
  composed over DP-SGD's steps, next to the PLD and RDP accountants' epsilons.
- ``gan.csv`` / ``gan_tstr.png``: DP-GAN (DP-SGD discriminator) and PATE-GAN (teacher
  discriminators, noisy votes) train-on-synthetic / test-on-real accuracy against eps, next to
  the model trained on the real rows.
- ``mia.csv``: loss-threshold membership-inference AUC and TPR at FPR = 1e-3 against eps for DP
  logistic regression, next to the non-private (overfit) model.
- ``audit.csv``: empirical lower bound on eps (Clopper-Pearson, 95 %) from a label-flipped canary
  on DP logistic regression (output perturbation) against the stated eps.

Run: ``python -m shuffledp.experiments.private_learning [--quick|--full] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["run", "erm_accuracy", "pate_table", "dpsgd_table", "gan_table", "dpsgd_audit_table", "mia_table", "audit_table", "DIFFPRIVLIB_PYTHON"]

#: Python of the venv holding diffprivlib 0.6.6 and scikit-learn < 1.6 (diffprivlib fails to import on >= 1.6).
def _diffprivlib_python() -> Path:
    env = os.environ.get("SHUFFLEDP_DIFFPRIVLIB_PYTHON")
    if env:
        return Path(env)
    cands = [Path(__file__).resolve().parents[3] / ".venv-dpl" / "bin" / "python",  # checkout root
             Path(sys.executable).parents[2] / ".venv-dpl" / "bin" / "python"]      # next to the running venv
    return next((c for c in cands if c.exists()), cands[0])


DIFFPRIVLIB_PYTHON = _diffprivlib_python()
ERM_REGULARIZATION = "auto"  # Lambda(eps, n, d) of shuffledp.ml.erm.auto_regularization: data-independent
ERM_FIXED_REGULARIZATION = 0.01  # the fixed Lambda of earlier runs, kept for diffprivlib's default row
ERM_DATA_NORM = 6.0  # standardised breast-cancer rows: chosen a priori (30 features, unit variance)
#: The intercept's constant feature 1/data_norm, i.e. rows [x, 1] / sqrt(R^2 + 1): chosen on public
#: synthetic data (docs/private-learning.md), better than 1 at every eps there.
ERM_INTERCEPT_SCALING = 1.0 / ERM_DATA_NORM

_DPL_SCRIPT = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from diffprivlib.models import LogisticRegression
d = np.load(sys.argv[1])
cfg = json.loads(sys.argv[2])
out = {}
for eps, C in zip(cfg["eps"], cfg["C"]):
    acc = []
    for r in range(cfg["repeats"]):
        m = LogisticRegression(epsilon=eps, data_norm=cfg["data_norm"], C=C, random_state=r)
        m.fit(d["Xtr"], d["ytr"])
        acc.append(float(m.score(d["Xte"], d["yte"])))
    out[str(eps)] = acc
print(json.dumps(out))
"""


def _split(seed: int = 0) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    sc = StandardScaler().fit(Xtr)  # the scaler's means/variances are not privatised (stated in the report)
    return sc.transform(Xtr), sc.transform(Xte), ytr, yte


def _mean_se(a: list[float]) -> tuple[float, float]:
    x = np.asarray(a, dtype=float)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else float("nan")


def _diffprivlib_accuracy(split: tuple[np.ndarray, ...], eps_grid: list[float], Cs: list[float],
                          repeats: int) -> dict[str, list[float]] | None:
    """diffprivlib's LogisticRegression (objective perturbation, its ``Vector`` mechanism) in its own venv."""
    Xtr, Xte, ytr, yte = split
    with tempfile.TemporaryDirectory() as td:
        f = Path(td) / "split.npz"
        np.savez(f, Xtr=Xtr, Xte=Xte, ytr=ytr, yte=yte)
        cfg = {"eps": eps_grid, "repeats": repeats, "data_norm": ERM_DATA_NORM, "C": Cs}
        res = subprocess.run([str(DIFFPRIVLIB_PYTHON), "-c", _DPL_SCRIPT, str(f), json.dumps(cfg)],
                             capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        print(f"diffprivlib run failed: {res.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


def erm_accuracy(eps_grid: list[float], repeats: int, seed: int = 0) -> list[dict]:
    """Accuracy vs eps of DP logistic regression (objective, output) and diffprivlib if available.

    Ours uses ``regularization="auto"`` (a function of eps, n and d only). diffprivlib is run twice:
    with the fixed ``C = 1/(n 0.01)`` of earlier runs and with the same rule translated to its
    parametrisation (it penalises the unscaled weights of rows of norm ``sqrt(R^2 + 1)``, so our
    Lambda on the scaled problem is its ``Lambda (R^2 + 1)``: ``C = 1/(n Lambda (R^2 + 1))``).
    """
    from sklearn.linear_model import LogisticRegression

    from ..ml.erm import AUTO_CONSTANT_PREDICTOR_THRESHOLD, DPLogisticRegression, auto_regularization

    split = _split(seed)
    Xtr, Xte, ytr, yte = split
    n, d = Xtr.shape
    rows = []
    base = LogisticRegression(C=1.0 / (n * ERM_FIXED_REGULARIZATION), max_iter=2000).fit(Xtr, ytr).score(Xte, yte)
    rows.append({"method": "non-private", "eps": "inf", "accuracy": base, "se": 0.0, "repeats": 1,
                 "regularization": ERM_FIXED_REGULARIZATION})
    for method in ("objective", "output"):
        for eps in eps_grid:
            acc = [DPLogisticRegression(eps, method=method, regularization=ERM_REGULARIZATION, data_norm=ERM_DATA_NORM,
                                        intercept_scaling=ERM_INTERCEPT_SCALING,
                                        random_state=seed * 10_000 + r).fit(Xtr, ytr).score(Xte, yte)
                   for r in range(repeats)]
            m, se = _mean_se(acc)
            constant = n * eps / (d + 1) < AUTO_CONSTANT_PREDICTOR_THRESHOLD  # what "auto" does (binary task)
            rows.append({"method": f"shuffledp {method}", "eps": eps, "accuracy": m, "se": se, "repeats": repeats,
                         "regularization": "constant predictor" if constant
                         else auto_regularization(eps, n, d + 1, method)})
    if DIFFPRIVLIB_PYTHON.exists():
        lam_rule = [auto_regularization(eps, n, d + 1, "objective") for eps in eps_grid]
        configs = [("diffprivlib 0.6.6 (C = 1/(n 0.01))", [1.0 / (n * ERM_FIXED_REGULARIZATION)] * len(eps_grid),
                    [ERM_FIXED_REGULARIZATION / (ERM_DATA_NORM ** 2 + 1)] * len(eps_grid)),
                   ("diffprivlib 0.6.6 (C from our rule)", [1.0 / (n * lam * (ERM_DATA_NORM ** 2 + 1)) for lam in lam_rule],
                    lam_rule)]
        for label, Cs, lams in configs:
            accs = _diffprivlib_accuracy(split, eps_grid, Cs, repeats)
            if accs is None:
                continue
            for eps, lam in zip(eps_grid, lams):
                m, se = _mean_se(accs[str(eps)])
                rows.append({"method": label, "eps": eps, "accuracy": m, "se": se, "repeats": repeats,
                             "regularization": lam})
    return rows


def pate_table(quick: bool, seed: int = 0) -> list[dict]:
    """PATE on a 4-class synthetic task (LDA teachers and student)."""
    from sklearn.datasets import make_classification
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as LDA

    from ..ml.pate import PATE

    X, y = make_classification(n_samples=12000, n_features=12, n_informative=8, n_redundant=0, n_classes=4,
                               n_clusters_per_class=1, class_sep=1.5, random_state=seed)
    Xp, yp, Xq, yq, Xt, yt = X[:8000], y[:8000], X[8000:8500], y[8000:8500], X[8500:], y[8500:]
    configs = [("gnmax", {"sigma": s}) for s in ((10.0, 20.0) if quick else (5.0, 10.0, 20.0, 40.0))]
    configs += [("confident_gnmax", {"sigma": 10.0, "threshold": 60.0, "sigma_threshold": 30.0}),
                ("lnmax", {"gamma": 0.1})]
    rows = []
    for agg, kw in configs:
        rep = PATE(LDA(), LDA(), 80, aggregator=agg, delta=1e-5, random_state=seed, **kw).fit(
            Xp, yp, Xq, y_public=yq, X_test=Xt, y_test=yt)
        rows.append({"aggregator": agg, "params": " ".join(f"{k}={v:g}" for k, v in kw.items()), "teachers": 80,
                     "queries": rep.n_queries, "answered": rep.n_answered,
                     "eps_data_independent": rep.statement.eps, "eps_data_dependent": rep.epsilon_data_dependent,
                     "eps_released": rep.epsilon_released,
                     "eps_with_release": None if rep.statement_with_release is None else rep.statement_with_release.eps,
                     "release_order": None if rep.release is None else rep.release.order,
                     "delta": 1e-5, "label_accuracy": rep.label_accuracy, "student_accuracy": rep.student_accuracy})
    nonpriv = LDA().fit(Xp, yp).score(Xt, yt)
    rows.append({"aggregator": "non-private (all private data)", "params": "", "teachers": 0, "queries": 0,
                 "answered": 0, "eps_data_independent": float("inf"), "eps_data_dependent": float("inf"),
                 "eps_released": None, "eps_with_release": None, "release_order": None, "delta": 0.0, "label_accuracy": None, "student_accuracy": nonpriv})
    return rows


def dpsgd_table(eps_grid: list[float], epochs: int, seed: int = 0) -> list[dict]:
    """DP-SGD (Opacus, the project's RDP accountant) on digits with a 64-32-10 MLP."""
    import torch
    from opacus import PrivacyEngine
    from sklearn.datasets import load_digits
    from torch import nn

    import shuffledp.ml.accounting  # noqa: F401  (registers "shuffledp-rdp")

    torch.set_num_threads(1)  # small networks: threads only contend on a shared machine

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(X))
    tr, te = perm[:1400], perm[1400:]
    Xt = torch.tensor(X[tr] / 16.0, dtype=torch.float32)
    yt = torch.tensor(y[tr])
    Xv = torch.tensor(X[te] / 16.0, dtype=torch.float32)
    yv = torch.tensor(y[te])
    rows = []
    for eps in eps_grid:
        torch.manual_seed(seed)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(Xt, yt), batch_size=50)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        engine = PrivacyEngine(accountant="shuffledp-rdp")
        model, opt, loader = engine.make_private_with_epsilon(module=model, optimizer=opt, data_loader=loader,
                                                              target_epsilon=eps, target_delta=1e-5, epochs=epochs,
                                                              max_grad_norm=1.0)
        loss_fn = nn.CrossEntropyLoss()
        for _ in range(epochs):
            for xb, yb in loader:
                if len(xb) == 0:
                    continue
                opt.zero_grad()
                loss_fn(model(xb), yb).backward()
                opt.step()
        with torch.no_grad():
            acc = float((model(Xv).argmax(1) == yv).float().mean())
        rows.append({"target_eps": eps, "reported_eps": engine.get_epsilon(1e-5), "delta": 1e-5,
                     "noise_multiplier": opt.noise_multiplier, "steps": len(engine.accountant), "accuracy": acc})
    return rows


#: PATE-GAN settings of the experiment: 200 teachers of 10 rows, GNMax sigma = 50 (a quarter of the
#: teachers), the module's other defaults. Compared with 100 teachers / sigma = 25 on public
#: make_classification data (random_state 11-13, not the reported 0); see docs/private-learning.md.
PATE_GAN_TEACHERS, PATE_GAN_SIGMA = 200, 50.0


def _tstr(S: np.ndarray, Xte: np.ndarray, yte: np.ndarray) -> tuple[float, float]:
    """Train-on-synthetic (label = sign of the last column) / test-on-real accuracy and the positive rate."""
    from sklearn.linear_model import LogisticRegression

    ys = (S[:, -1] > 0).astype(int)
    acc = LogisticRegression().fit(S[:, :-1], ys).score(Xte, yte) if np.unique(ys).size == 2 else float("nan")
    return float(acc), float(ys.mean())


def gan_table(eps_grid: list[float], repeats: int, seed: int = 0, dp_gan_epochs: int | None = None) -> list[dict]:
    """DP-GAN and PATE-GAN utility: train on synthetic, test on real (logistic regression), against eps.

    Both generate the 4 features conditionally on a +-1 label drawn with probability 1/2 (a fixed,
    data-independent prior). Each (method, eps) is run ``repeats`` times (seeds ``seed*1000 + r``,
    simulation randomness); mean and standard error. An eps too small for one PATE-GAN iteration
    gives a row with ``tstr_accuracy`` NaN and ``runs`` 0. ``dp_gan_epochs`` (default: DPGAN's)
    only shortens DP-GAN for tests.
    """
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    import torch

    from ..core.errors import ValidationError
    from ..ml.dp_gan import DPGAN
    from ..ml.pate_gan import PateGAN

    torch.set_num_threads(1)  # small networks: threads only contend on a shared machine
    X, y = make_classification(n_samples=3000, n_features=4, n_informative=3, n_redundant=0, class_sep=1.5,
                               random_state=seed)
    X = np.clip(X / 4.0, -1.0, 1.0)  # a fixed, data-independent map into [-1, 1]
    Xtr, ytr, Xte, yte = X[:2000], y[:2000], X[2000:], y[2000:]
    rows = np.column_stack([Xtr, 2 * ytr - 1])
    out = [{"method": "non-private (real rows)", "target_eps": "inf", "eps": "inf", "delta": 0.0,
            "tstr_accuracy": LogisticRegression().fit(Xtr, ytr).score(Xte, yte), "se": 0.0, "runs": 1,
            "synthetic_positive_rate": float(ytr.mean()), "detail": ""}]
    dp_kw = {} if dp_gan_epochs is None else {"epochs": dp_gan_epochs}
    makers = {"DP-GAN": lambda eps, r: DPGAN(eps, 1e-5, conditional=True, seed=seed * 1000 + r, **dp_kw),
              "PATE-GAN": lambda eps, r: PateGAN(eps, 1e-5, n_teachers=PATE_GAN_TEACHERS, sigma=PATE_GAN_SIGMA,
                                                 conditional=True, random_state=seed * 1000 + r)}
    for method, make in makers.items():
        for eps in eps_grid:
            accs, pos, stated, detail = [], [], float("nan"), ""
            for r in range(repeats):
                gan = make(eps, r)
                try:
                    res = gan.fit(rows)
                except ValidationError as e:
                    if e.parameter != "epsilon":
                        raise
                    detail = "budget below one iteration"
                    break
                stated = res.statement.eps
                detail = (f"sigma={res.noise_multiplier:.3g}, {res.discriminator_steps} steps" if method == "DP-GAN"
                          else f"{res.n_queries} queries, {res.iterations} iterations")
                a, p = _tstr(gan.sample(2000), Xte, yte)
                accs.append(a), pos.append(p)
            m, se = _mean_se(accs) if accs else (float("nan"), float("nan"))
            out.append({"method": method, "target_eps": eps, "eps": stated, "delta": 1e-5, "tstr_accuracy": m, "se": se,
                        "runs": len(accs), "synthetic_positive_rate": float(np.mean(pos)) if pos else float("nan"),
                        "detail": detail})
    return out


def mia_table(eps_grid: list[float], repeats: int, seed: int = 0) -> list[dict]:
    """Loss-threshold MIA AUC against eps, on an overfitting task (150 members, 100 features, 20 % label noise)."""
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    from ..ml.erm import DPLogisticRegression
    from ..ml.membership_inference import loss_threshold_attack

    X, y = make_classification(n_samples=2300, n_features=100, n_informative=10, flip_y=0.2, random_state=seed)
    X = X / math.sqrt(100)
    Xm, ym, Xo, yo = X[:150], y[:150], X[300:2300], y[300:2300]  # 2000 non-members resolve FPR = 1e-3
    rows = []
    target = LogisticRegression(C=1e4, max_iter=5000).fit(Xm, ym)
    r = loss_threshold_attack(target, Xm, ym, Xo, yo)
    rows.append({"model": "non-private LR (C=1e4)", "eps": "inf", "auc": r.auc, "auc_se": 0.0,
                 "tpr_at_fpr_1e-3": r.tpr_at_low_fpr, "advantage": r.advantage, "train_acc": target.score(Xm, ym),
                 "test_acc": target.score(Xo, yo)})
    for eps in eps_grid:
        aucs, tprs, advs, tr, te = [], [], [], [], []
        for k in range(repeats):
            m = DPLogisticRegression(eps, data_norm=1.5, regularization=0.01, random_state=seed * 1000 + k).fit(Xm, ym)
            r = loss_threshold_attack(m, Xm, ym, Xo, yo)
            aucs.append(r.auc), tprs.append(r.tpr_at_low_fpr), advs.append(r.advantage)
            tr.append(m.score(Xm, ym)), te.append(m.score(Xo, yo))
        a, se = _mean_se(aucs)
        rows.append({"model": "DPLogisticRegression (objective)", "eps": eps, "auc": a, "auc_se": se,
                     "tpr_at_fpr_1e-3": float(np.mean(tprs)), "advantage": float(np.mean(advs)),
                     "train_acc": float(np.mean(tr)), "test_acc": float(np.mean(te))})
    return rows


def audit_table(eps_grid: list[float], n_trials: int, seed: int = 0) -> list[dict]:
    """Empirical eps lower bound (95 %) of DP-ERM output perturbation against the stated eps.

    Neighbours: the last row is a canary ``x = e_1`` labelled 0 in D0 and 1 in D1. The released
    model is ``w*(D) + b``; the minimisers ``w*(D0)``, ``w*(D1)`` are computed once by the estimator
    and the noise ``b`` is drawn ``n_trials`` times per side (vectorised), the test being the
    projection of the release on ``w*(D1) - w*(D0)``.
    """
    from sklearn.datasets import make_classification

    from ..ml.audit import audit
    from ..ml.erm import DPLogisticRegression

    X, y = make_classification(n_samples=40, n_features=3, n_informative=2, n_redundant=0, random_state=seed + 1)
    X = X / np.linalg.norm(X, axis=1).max()
    X[-1] = [1.0, 0.0, 0.0]
    lam = 0.05
    rows = []
    for eps in eps_grid:
        est = DPLogisticRegression(eps, method="output", regularization=lam)
        Z = est._features(X)
        w = [est._minimise(Z, np.where(np.r_[y[:-1], label] == 1, 1.0, -1.0), lam, None) for label in (0, 1)]
        u = (w[1] - w[0]) / np.linalg.norm(w[1] - w[0])
        beta = len(X) * lam * eps / 2.0  # noise density prop. to exp(-beta ||b||)

        def run(which: int, n: int, g: np.random.Generator) -> np.ndarray:
            d = g.standard_normal((n, Z.shape[1]))
            b = d / np.linalg.norm(d, axis=1, keepdims=True) * g.gamma(Z.shape[1], 1.0 / beta, size=n)[:, None]
            return w[which][None, :] + b

        res = audit(run, lambda W: W @ u, n_trials, np.random.default_rng(seed + int(eps * 1000)))
        rows.append({"stated_eps": eps, "eps_lower_bound": res.epsilon_lower, "confidence": res.confidence,
                     "tpr": res.tpr, "fpr": res.fpr, "trials_per_side": n_trials,
                     "sensitivity_used": float(np.linalg.norm(w[1] - w[0])), "sensitivity_bound": 2 / (len(X) * lam)})
    return rows


def dpsgd_audit_table(points: list[tuple[float, float, int]], n_trials: int, delta: float = 1e-3,
                      seed: int = 0) -> list[dict]:
    """Strongest-canary audit of DP-SGD accounting against the RDP and PLD accountants' epsilons."""
    from ..accounting import GaussianEvent, PldAccountant, PoissonSampledEvent, RdpAccountant, SelfComposedEvent
    from ..ml.audit import audit_dpsgd_gradient_canary

    rows = []
    for sigma, q, T in points:
        ev = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), T)
        r = audit_dpsgd_gradient_canary(sigma, q, T, n_trials, np.random.default_rng(seed + T), delta=delta)
        rows.append({"noise_multiplier": sigma, "sample_rate": q, "steps": T, "delta": delta,
                     "eps_lower_bound": r.epsilon_lower, "eps_pld": PldAccountant().compose(ev).get_epsilon(delta),
                     "eps_rdp": RdpAccountant().compose(ev).get_epsilon(delta), "trials_per_side": n_trials})
    return rows


def _write_csv(rows: list[dict], path: Path) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _figures(res: dict, outdir: Path) -> list[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return []
    from .report_html import save_figure

    names: list[str] = []

    def finish(fig: Any, ax: Any, name: str) -> None:
        """Legend outside the axes, save as ``name`` in ``outdir`` and record it."""
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
        save_figure(fig, outdir / name)
        plt.close(fig)
        names.append(name)

    if res.get("erm"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for method in dict.fromkeys(r["method"] for r in res["erm"] if r["eps"] != "inf"):
            rs = [r for r in res["erm"] if r["method"] == method]
            ax.errorbar([r["eps"] for r in rs], [r["accuracy"] for r in rs], yerr=[2 * r["se"] for r in rs],
                        marker="o", label=method, capsize=3)
        base = [r for r in res["erm"] if r["eps"] == "inf"][0]["accuracy"]
        ax.axhline(base, color="grey", ls="--", label="non-private")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon (pure DP)")
        ax.set_ylabel("test accuracy (breast cancer)")
        finish(fig, ax, "erm_accuracy.png")
    if res.get("mia"):
        fig, ax = plt.subplots(figsize=(6, 4))
        rs = [r for r in res["mia"] if r["eps"] != "inf"]
        ax.errorbar([r["eps"] for r in rs], [r["auc"] for r in rs], yerr=[2 * r["auc_se"] for r in rs], marker="o",
                    label="DP logistic regression", capsize=3)
        ax.axhline(res["mia"][0]["auc"], color="red", ls="--", label="non-private (overfit)")
        ax.axhline(0.5, color="grey", ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("loss-threshold MIA AUC")
        finish(fig, ax, "mia_auc.png")
    if res.get("audit"):
        fig, ax = plt.subplots(figsize=(5, 4))
        e = [r["stated_eps"] for r in res["audit"]]
        ax.plot(e, e, color="grey", ls="--", label="stated eps")
        ax.plot(e, [r["eps_lower_bound"] for r in res["audit"]], marker="o", label="empirical lower bound (95 %)")
        ax.set_xlabel("stated epsilon")
        ax.set_ylabel("epsilon")
        finish(fig, ax, "audit.png")
    if res.get("gan"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for method in ("DP-GAN", "PATE-GAN"):
            rs = [r for r in res["gan"] if r["method"] == method and r["runs"] > 0]
            ax.errorbar([r["target_eps"] for r in rs], [r["tstr_accuracy"] for r in rs],
                        yerr=[2 * r["se"] if r["runs"] > 1 else 0.0 for r in rs], marker="o", label=method, capsize=3)
        ax.axhline(res["gan"][0]["tstr_accuracy"], color="grey", ls="--", label="trained on real rows")
        ax.axhline(0.5, color="grey", ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon (delta = 1e-5)")
        ax.set_ylabel("train-on-synthetic accuracy")
        finish(fig, ax, "gan_tstr.png")
    return names


def _html(res: dict, outdir: Path, figs: list[str]) -> Path:
    from .report_html import figure, table, write_page

    def f(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v))

    parts = ["<p>Private learning on datasets that ship with scikit-learn. All models are trained on this "
             "machine's CPU; means over repetitions with standard errors.</p>"]
    sections = [("erm", "Accuracy vs epsilon: DP-ERM", "erm_accuracy.png",
                 "Each point: mean test accuracy over the repetitions at that eps, bars 2 standard errors; dashed: "
                 "non-private logistic regression with the same regularisation."),
                ("mia", "Membership inference vs epsilon", "mia_auc.png",
                 "AUC of the loss-threshold attack on 150 members vs 2000 non-members: 0.5 is guessing."),
                ("audit", "Empirical lower bound vs stated epsilon", "audit.png",
                 "A valid implementation keeps the lower bound (95 % confidence) under the dashed diagonal."),
                ("dpsgd_audit", "DP-SGD accounting audited with the strongest canary", None, ""),
                ("pate", "PATE", None, ""), ("dpsgd", "DP-SGD (Opacus, shuffledp-rdp accountant)", None, ""),
                ("gan", "DP-GAN and PATE-GAN: train on synthetic, test on real", "gan_tstr.png",
                 "Logistic regression trained on 2000 synthetic rows, accuracy on 1000 real test rows; mean over "
                 "the runs, bars 2 standard errors; dashed: trained on the real rows.")]
    for key, title, png, how in sections:
        rows = res.get(key) or []
        if not rows:
            continue
        parts.append(f"<h2>{title}</h2>")
        if png and png in figs:
            parts.append(figure(outdir, png, title, how))
        parts.append(table(list(rows[0]), [[f(r[k]) for k in rows[0]] for r in rows]))
    return write_page(outdir / "index.html", "Private learning", parts)


def run(outdir: str | Path = "results/private_learning", quick: bool = True, seed: int = 0,
        with_dpsgd: bool | None = None) -> dict:
    """Run every part; ``quick`` uses small grids (well under a minute on two cores plus torch's import)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        from threadpoolctl import threadpool_limits
        limiter: Any = threadpool_limits(1)  # BLAS thread oversubscription slows L-BFGS many-fold on small problems
    except ImportError:  # pragma: no cover
        limiter = None
    eps_grid = [0.1, 0.3, 1.0, 3.0, 10.0] if quick else [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0]
    res: dict[str, Any] = {"quick": quick, "seed": seed}
    res["erm"] = erm_accuracy(eps_grid, 10 if quick else 50, seed)
    res["pate"] = pate_table(quick, seed)
    res["mia"] = mia_table([0.1, 1.0, 10.0, 100.0] if quick else [0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0], 3 if quick else 10,
                           seed)
    res["audit"] = audit_table([0.5, 1.0, 2.0, 4.0, 8.0] if quick else [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
                               100_000 if quick else 1_000_000, seed)
    res["dpsgd_audit"] = dpsgd_audit_table([(0.8, 0.05, 100), (1.0, 0.1, 50), (0.6, 0.02, 200)],
                                           100_000 if quick else 1_000_000, seed=seed)
    if with_dpsgd if with_dpsgd is not None else not quick:
        try:
            res["dpsgd"] = dpsgd_table([1.0, 4.0] if quick else [0.5, 1.0, 2.0, 4.0, 8.0], 3 if quick else 10, seed)
        except ImportError as e:  # torch/opacus not installed
            print(f"DP-SGD skipped: {e}", file=sys.stderr)
        try:
            res["gan"] = gan_table([1.0, 10.0] if quick else [0.5, 1.0, 2.0, 5.0, 10.0], 2 if quick else 3, seed)
        except ImportError as e:
            print(f"DP-GAN skipped: {e}", file=sys.stderr)
    for key in ("erm", "pate", "mia", "audit", "dpsgd_audit", "dpsgd", "gan"):
        if res.get(key):
            _write_csv(res[key], outdir / f"{key}.csv" if key != "erm" else outdir / "erm_accuracy.csv")
    figs = _figures(res, outdir)
    _html(res, outdir, figs)
    if limiter is not None:
        limiter.restore_original_limits()
    res["seconds"] = time.time() - t0
    (outdir / "run.json").write_text(json.dumps({"quick": quick, "seed": seed, "seconds": res["seconds"]}))
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", default=True)
    g.add_argument("--full", action="store_true")
    p.add_argument("--out", default=None)
    p.add_argument("--dpsgd", action="store_true", help="include DP-SGD in --quick")
    a = p.parse_args(argv)
    quick = not a.full
    out = a.out or ("results/private_learning-quick" if quick else "results/private_learning")
    res = run(out, quick=quick, with_dpsgd=True if a.dpsgd else None)
    print(f"wrote {out} in {res['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
