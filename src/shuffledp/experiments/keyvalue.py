"""Reproduction of the HISKV paper's (Zhang, Xu, Fu, Meng) experiments: MSE of key frequencies and means vs eps, and
relative error of the top-N keys, for HISKV, PCKV-GRR, PCKV-UE, PrivKV, KVOH, KVUE, LDPKV-approx and the
RAPPOR+Harmony baseline (RAPPOR/unary encoding for the sampled key, Harmony for its value).

Method (fast and exact per key): for every run, the data-dependent sampling stage (which key each
user reports about, and her discretized value) is drawn per user, exactly
(:mod:`shuffledp.experiments.kvsim`); the perturbation is then drawn per key from its exact
multinomial law (``simulate_statistic``). Every key's estimate thus has exactly the distribution
it has on the full client path; cross-key correlations are not reproduced (they do not change the
expected per-key errors). Sampling draws are shared by mechanisms with the same sampling step
within a run (paired comparison); perturbations are independent.

Errors use the published post-processing: frequencies clipped to [0, 1], the mechanisms' corrected
means (in [-1, 1]).
"""

from __future__ import annotations

import csv
import html
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..local.grr import GeneralizedRandomizedResponse
from ..local.keyvalue import HISKV, RapporHarmony, keyvalue_mechanism
from .kvdata import dataset_spec, generate
from .kvsim import SortedPairs, sampling_counts_padding

__all__ = ["KeyValueExperimentConfig", "run_keyvalue_experiment", "MECHANISMS", "EPSILONS", "TOPS", "figure_cells",
           "figure_rows", "most_accurate_claim", "read_results", "rebuild_report", "PRIVACY"]

MECHANISMS = ["hiskv", "hiskv-amp", "hiskv-bestc", "pckv-grr", "pckv-ue", "privkv", "kvoh", "kvue", "ldpkv", "rappor-harmony"]
LABELS = {"hiskv": "HISKV", "hiskv-amp": "HISKV-amp (ours)", "hiskv-bestc": "HISKV (best c for freq.)", "pckv-grr": "PCKV-GRR", "pckv-ue": "PCKV-UE", "privkv": "PrivKV", "kvoh": "KVOH",
          "kvue": "KVUE", "ldpkv": "LDPKV-approx", "rappor-harmony": "RAPPOR+Harmony"}
EPSILONS = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2]
TOPS = [10, 20, 30, 40, 50]
DATASET_ORDER = ["talkingdata", "jdata", "gauss", "lnr"]
#: the HISKV variants whose claims are checked against the baselines (the other mechanisms)
HISKV_VARIANTS = ("hiskv", "hiskv-amp", "hiskv-bestc")
#: public design point for HISKV.best_c (a fixed constant, never the data's f or m: choosing c from the
#: data would leak). With weight_mean = 0 best_c minimises Var[f̂] only, i.e. the c most favourable to
#: HISKV in the frequency and relative-error figures; with best_c's default equal weights it returns
#: c = 1 (the plain "HISKV" series) at every eps, d and ell we use.
BESTC_DESIGN = {"f": 0.1, "m": 0.0, "weight_frequency": 1.0, "weight_mean": 0.0}


@dataclass
class KeyValueExperimentConfig:
    runs: int = 500
    datasets: list[str] = field(default_factory=lambda: list(DATASET_ORDER))
    n_override: dict[str, int] = field(default_factory=dict)
    epsilons: list[float] = field(default_factory=lambda: list(EPSILONS))
    beta: float = 0.1
    hiskv_c: float = 1.0
    #: OETL length domain {1..L}: the paper uses L = d, which is hopeless at these sizes (ell ≈ d);
    #: a public bound of 64 is our [R] choice (sets longer than 64 report 64)
    oetl_max_length: int = 64
    re_epsilon: float = 1.6
    seed: int = 2026
    outdir: Path = Path("results/keyvalue")

    @classmethod
    def quick(cls, outdir: Path) -> "KeyValueExperimentConfig":
        return cls(runs=30, n_override={"gauss": 100_000, "lnr": 100_000}, outdir=outdir)

    @classmethod
    def full(cls, outdir: Path) -> "KeyValueExperimentConfig":
        return cls(runs=500, outdir=outdir)


def _errors(f_hat: np.ndarray, m_hat: np.ndarray, f: np.ndarray, m: np.ndarray, order: np.ndarray) -> dict:
    """Per top-N: MSE_f, MSE_m, RE averaged over runs (f_hat, m_hat shape (R, d)), then their
    standard errors over the R independent runs: sd of the per-run values (each run's mean over the
    N keys) / sqrt(R). The three estimates are computed exactly as before the standard errors existed
    (one mean over the (R, N) block), so the same seed gives the same numbers."""
    out = {}
    R = f_hat.shape[0]

    def se(per_run: np.ndarray) -> float:
        return float(per_run.std(ddof=1) / math.sqrt(R)) if R > 1 else float("nan")

    for N in TOPS:
        X = order[:N]
        sq_f, sq_m = (f_hat[:, X] - f[X]) ** 2, (m_hat[:, X] - m[X]) ** 2
        rel = np.abs(f_hat[:, X] - f[X]) / f[X]
        out[N] = (float(np.mean(sq_f)), float(np.mean(sq_m)), float(np.mean(rel)),
                  se(sq_f.mean(axis=1)), se(sq_m.mean(axis=1)), se(rel.mean(axis=1)))
    return out


def _dataset_rows(name: str, cfg: KeyValueExperimentConfig, progress, task) -> tuple[list[dict], dict]:
    rng = np.random.default_rng([cfg.seed, DATASET_ORDER.index(name) if name in DATASET_ORDER else 9])
    over = {"n": cfg.n_override[name]} if name in cfg.n_override else {}
    spec = dataset_spec(name, **over)
    data = generate(name, seed=cfg.seed, **over)
    n, d, R = data.n, data.d, cfg.runs
    f, m = data.true_frequency(), data.true_mean()
    order = np.argsort(-f)
    lens = data.lengths
    ell_pckv = int(max(1, np.ceil(np.quantile(lens, 0.9))))
    L = min(d, cfg.oetl_max_length)  # OETL length domain {1..L}
    sp = SortedPairs(data)
    U = np.zeros((R, d, 3), np.int64)
    P = np.zeros((R, d + 1, 2), np.int64)
    H = {eps: np.zeros((R, d + 1, 2), np.int64) for eps in cfg.epsilons}
    ells = {eps: np.zeros(R, np.int64) for eps in cfg.epsilons}
    grrs = {eps: GeneralizedRandomizedResponse(eps, L) for eps in cfg.epsilons}
    for r in range(R):  # runs: each run's sampling stage is O(n), vectorised over users
        U[r] = sp.sample(rng)
        P[r] = sampling_counts_padding(data, ell_pckv, rng)
        group = rng.random(n) < cfg.beta
        hist = np.bincount(np.clip(lens[group], 1, L) - 1, minlength=L)
        uni = (rng.random(n), rng.random(n))
        cache: dict[int, np.ndarray] = {}
        for eps in cfg.epsilons:
            ell = HISKV(eps, d, beta=cfg.beta, max_length=L).oetl.truncation_length(
                grrs[eps].simulate_statistic(hist, rng))
            if ell not in cache:
                cache[ell] = sampling_counts_padding(data, ell, rng, mask=~group, uniforms=uni)
            H[eps][r], ells[eps][r] = cache[ell], ell
        progress.advance(task)
    rows = []
    bestc = {eps: np.zeros(R) for eps in cfg.epsilons}
    for eps in cfg.epsilons:
        for mech_name in MECHANISMS:
            if mech_name in HISKV_VARIANTS:
                f_hat = np.zeros((R, d))
                m_hat = np.zeros((R, d))
                for ell in np.unique(ells[eps]):  # a few distinct fitted ell values
                    idx = np.flatnonzero(ells[eps] == ell)
                    if mech_name == "hiskv-bestc":
                        # c from public parameters only: eps, d, the OETL-fitted ell (post-processing of
                        # the eps-LDP OETL reports), the public n' = (1 - beta) n and a fixed design point
                        c = HISKV.best_c(eps, d, int(ell), max(1, round((1 - cfg.beta) * n)), **BESTC_DESIGN)
                        bestc[eps][idx] = c
                    else:
                        c = min(cfg.hiskv_c, math.exp(eps) * 0.999)
                    mech = HISKV(eps, d, ell=int(ell), c=c, beta=cfg.beta,
                                 max_length=L, amplify=mech_name == "hiskv-amp")
                    st = mech.simulate_statistic(H[eps][idx], rng).reshape(idx.size, -1, 2)
                    pe = mech.point_estimates(st[:, :d, 0], st[:, :d, 1], H[eps][idx, d, 0])
                    f_hat[idx], m_hat[idx] = pe["f_clipped"], pe["m_clipped"]
                ell_used = float(ells[eps].mean())
            elif mech_name in ("pckv-grr", "pckv-ue"):
                mech = keyvalue_mechanism(mech_name, eps, d, ell=ell_pckv)
                st = mech.simulate_statistic(P, rng).reshape(R, -1, 2)
                pe = mech.point_estimates(st[:, :d, 0], st[:, :d, 1], n)
                f_hat, m_hat = pe["f_clipped"], pe["m_clipped"]
                ell_used = float(ell_pckv)
            elif mech_name == "rappor-harmony":  # same padding-sampling stage (ell) as PCKV: paired
                mech = RapporHarmony(eps, d, ell=ell_pckv)
                st = mech.simulate_statistic(P, rng)  # (R, d, 3): per key c_k, t_k, T_k
                pe = mech.point_estimates(st[..., 0], st[..., 1], st[..., 2], n)
                f_hat, m_hat = pe["f_clipped"], pe["m_clipped"]
                ell_used = float(ell_pckv)
            else:
                mech = keyvalue_mechanism(mech_name, eps, d)
                pe = mech.point_estimates(mech.simulate_statistic(U, rng))
                f_hat, m_hat = pe["f_clipped"], pe["m_clipped"]
                ell_used = float("nan")
            for N, (mf, mm, re, mf_se, mm_se, re_se) in _errors(f_hat, m_hat, f, m, order).items():
                rows.append({"dataset": name, "mechanism": mech_name, "epsilon": eps, "top_n": N, "mse_frequency": mf,
                             "mse_mean": mm, "relative_error": re, "runs": R, "n": n, "d": d, "ell": ell_used,
                             "mse_frequency_se": mf_se, "mse_mean_se": mm_se, "relative_error_se": re_se})
    info = {"label": spec.label, "n": n, "d": d, "mean_len": float(lens.mean()), "p90_len": ell_pckv,
            "hiskv_ell": {eps: float(ells[eps].mean()) for eps in cfg.epsilons},
            "hiskv_bestc": {eps: float(bestc[eps].mean()) for eps in cfg.epsilons}}
    return rows, info


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _cell(v):
    """A CSV cell: nan (a value the run did not record) as an empty cell."""
    return "" if isinstance(v, float) and math.isnan(v) else v


def _lookup(rows, ds, mech, eps, N, key):
    for r in rows:
        if r["dataset"] == ds and r["mechanism"] == mech and r["epsilon"] == eps and r["top_n"] == N:
            return r[key]
    return float("nan")


def figure_cells(fig_id: str, cfg: KeyValueExperimentConfig) -> list[tuple[float, int]]:
    """The (eps, top-N) points a figure plots: the MSE figures show top-50 against eps, the
    relative-error figure shows top-10..top-50 at ``cfg.re_epsilon``. Plots, figure CSVs and the
    claim verdicts about a figure all use exactly these points."""
    if fig_id == "fig_relative_error_topn":
        return [(cfg.re_epsilon, N) for N in TOPS]
    if fig_id in ("fig_mse_frequency", "fig_mse_mean"):
        return [(e, 50) for e in cfg.epsilons]
    raise ValueError(f"unknown figure {fig_id!r}")


def figure_rows(rows: list[dict], fig_id: str, cfg: KeyValueExperimentConfig) -> list[dict]:
    """The result rows a figure shows (its CSV)."""
    cells = set(figure_cells(fig_id, cfg))
    return [r for r in rows if (r["epsilon"], r["top_n"]) in cells and r["dataset"] in cfg.datasets]


#: each series' privacy guarantee, for every plotted eps (checked exactly, for every report, by
#: tests/keyvalue/test_privacy.py); the whole set of a user's key-value pairs is the protected input
PRIVACY = {
    "hiskv": "eps-LDP per user (local model): a beta fraction of users report their set length with GRR "
             "(OETL) at eps, the others one key-value cell at eps with HISKV's cell family",
    "hiskv-amp": "eps-LDP per user (local model): as HISKV, but the cell family runs at "
                 "eps' = ln(ell (e^eps - 1) + 1), which padding-and-sampling to ell brings back to eps",
    "hiskv-bestc": "eps-LDP per user (local model): HISKV with c chosen from public parameters only",
    "pckv-grr": "eps-LDP per user (local model): padding-and-sampling to ell, then GRR over key-value cells",
    "pckv-ue": "eps-LDP per user (local model): padding-and-sampling to ell, then unary encoding of the cell",
    "privkv": "eps-LDP per user (local model): eps/2 for the key bit, eps/2 for the value (the exact "
              "composed loss is lower)",
    "kvoh": "eps-LDP per user (local model): uniform key sampling, one-hot style perturbation",
    "kvue": "eps-LDP per user (local model): uniform key sampling, unary encoding of the (key, value) cell",
    "ldpkv": "eps-LDP per user (local model): uniform key sampling + GRR on the discretized pair (= KVUE)",
    "rappor-harmony": "eps-LDP per user (local model): padding-and-sampling to ell, RAPPOR on the key at "
                      "eps/2 and Harmony on its value at eps/2",
}


def _privacy_rows(eps_text: str) -> list[tuple[str, str]]:
    return [(LABELS[m], f"{PRIVACY[m]}; eps = {eps_text}") for m in MECHANISMS]


_FIGS = (("fig_mse_frequency", "mse_frequency", "MSE of frequencies (top-50 keys)"),
         ("fig_mse_mean", "mse_mean", "MSE of means (top-50 keys)"),
         ("fig_relative_error_topn", "relative_error", "relative error of frequencies"))


def _plots(rows: list[dict], cfg: KeyValueExperimentConfig, infos: dict) -> list[str]:
    """One PNG per figure: a grid of panels (one per dataset), each Monte Carlo curve with a band of
    +-2 standard errors where the rows record them, the legend below the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report_html import band, save_figure

    files = []
    for fig_id, key, ylabel in _FIGS:
        frows = figure_rows(rows, fig_id, cfg)
        cells = figure_cells(fig_id, cfg)
        k = len(cfg.datasets)
        ncols = min(2, k)
        nrows = math.ceil(k / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(5.0 * ncols, 3.8 * nrows), squeeze=False)
        for ax in axes.flat[k:]:
            ax.set_visible(False)
        for ax, ds in zip(axes.flat, cfg.datasets):
            for mech in MECHANISMS:
                xs = [N if fig_id == "fig_relative_error_topn" else e for e, N in cells]
                ys = [_lookup(frows, ds, mech, e, N, key) for e, N in cells]
                se = [_lookup(frows, ds, mech, e, N, key + "_se") for e, N in cells]
                band(ax, xs, ys, se, log=True, marker="o", ms=3.5, label=LABELS[mech],
                     linestyle="--" if mech == "rappor-harmony" else "-")
            if fig_id != "fig_relative_error_topn":
                ax.set_xscale("log", base=2)
                ax.set_xticks(cfg.epsilons)
                ax.set_xticklabels([f"{e:g}" for e in cfg.epsilons])
                ax.minorticks_off()
                ax.set_xlabel("epsilon (per-user LDP budget)", fontsize=10)
            else:
                ax.set_xlabel("top-N most frequent keys", fontsize=10)
            ax.set_yscale("log")
            ax.grid(True, which="major", alpha=0.3)
            ax.tick_params(labelsize=9)
            ax.set_title(infos.get(ds, {}).get("label", ds), fontsize=10)
            ax.set_ylabel(ylabel if fig_id != "fig_relative_error_topn" else f"{ylabel} (eps={cfg.re_epsilon:g})",
                          fontsize=10)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.tight_layout()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=9,
                   frameon=False)
        save_figure(fig, cfg.outdir / f"{fig_id}.png", dpi=100)
        plt.close(fig)
        cols = ("dataset", "mechanism", "epsilon") + (("top_n",) if fig_id == "fig_relative_error_topn" else ()) \
            + (key, key + "_se", "runs")
        _write_csv(cfg.outdir / f"{fig_id}.csv", [{c: _cell(r.get(c, "")) for c in cols} for r in frows])
        files.append(fig_id)
    return files


def most_accurate_claim(frows: list[dict], fig_id: str, key: str, hv: str, cfg: KeyValueExperimentConfig) -> str:
    """Verdict on "HISKV is the most accurate mechanism" for one figure, computed on exactly the
    figure's points (``figure_cells``): per (dataset, plotted point), is ``hv`` the lowest among
    itself and the baselines (the non-HISKV mechanisms)? ``frows`` must be the figure's rows."""
    cells = figure_cells(fig_id, cfg)
    others = [mch for mch in MECHANISMS if mch not in HISKV_VARIANTS]
    best, total, losses = 0, 0, []
    for ds in cfg.datasets:
        for eps, N in cells:
            vals = {mch: _lookup(frows, ds, mch, eps, N, key) for mch in others + [hv]}
            if any(math.isnan(v) for v in vals.values()):
                raise ValueError(f"{fig_id}: missing value for {ds} eps={eps:g} top-{N}")
            winner = min(vals, key=vals.get)
            total += 1
            best += winner == hv
            if winner != hv:
                losses.append(f"{ds} eps={eps:g} top-{N}: best {LABELS[winner]} "
                              f"({vals[hv] / vals[winner]:.2f}× lower than {LABELS[hv]})")
    v = "supported" if best == total else ("partly supported" if best > 0 else "NOT supported")
    if fig_id == "fig_relative_error_topn":
        where = f"top-{cells[0][1]}..top-{cells[-1][1]} at eps={cells[0][0]:g}"
        unit = "(dataset, top-N)"
    else:
        where = f"top-{cells[0][1]}, eps={cells[0][0]:g}..{cells[-1][0]:g}"
        unit = "(dataset, eps)"
    return (f"Paper: HISKV is the most accurate mechanism. Ours ({key}, {where}, as plotted): {LABELS[hv]} best "
            f"among {LABELS[hv]} and the baselines in {best}/{total} {unit} cells → {v}."
            + (" Exceptions: " + "; ".join(losses[:6]) + (" …" if len(losses) > 6 else "") if losses else ""))


def _claims(rows: list[dict], cfg: KeyValueExperimentConfig) -> dict[str, list[str]]:
    """Per figure: the paper's claims and what our data says (all numbers computed here)."""
    out: dict[str, list[str]] = {"fig_mse_frequency": [], "fig_mse_mean": [], "fig_relative_error_topn": []}
    eps_c = 1.6 if 1.6 in cfg.epsilons else cfg.epsilons[-1]
    ds0 = "talkingdata" if "talkingdata" in cfg.datasets else cfg.datasets[0]

    def verdict(ratio: float, claimed: float) -> str:
        if not ratio > 1:
            return "NOT supported"
        return "supported" if claimed / 2 <= ratio <= claimed * 2 else "direction supported, size differs"

    for hv in HISKV_VARIANTS:
        for other, claimed in (("pckv-grr", 4.0), ("privkv", 3.0), ("kvoh", 3.0)):
            ratio = _lookup(rows, ds0, other, eps_c, 50, "mse_frequency") / _lookup(rows, ds0, hv, eps_c, 50,
                                                                                      "mse_frequency")
            out["fig_mse_frequency"].append(
                f"Paper: HISKV ≈{claimed:g}× more accurate than {LABELS[other]} at eps={eps_c:g} on TalkingData. "
                f"Ours ({ds0}, frequency MSE, top-50): {LABELS[other]}/{LABELS[hv]} = {ratio:.2f}× → "
                f"{verdict(ratio, claimed)}.")
    rh = "rappor-harmony"
    if rh in MECHANISMS:
        for fig_id, key in (("fig_mse_frequency", "mse_frequency"), ("fig_mse_mean", "mse_mean")):
            parts = []
            for other in ("pckv-grr", "hiskv", "ldpkv"):
                ratio = _lookup(rows, ds0, rh, eps_c, 50, key) / _lookup(rows, ds0, other, eps_c, 50, key)
                parts.append(f"{LABELS[rh]}/{LABELS[other]} = {ratio:.2f}×")
            out[fig_id].append(f"Baseline RAPPOR+Harmony ({ds0}, eps={eps_c:g}, {key}, top-50; >1 means the "
                               f"baseline is worse): " + ", ".join(parts) + ".")
        for ds in ("lnr", "gauss"):
            if ds not in cfg.datasets:
                continue
            cells = [(_lookup(rows, ds, rh, e, 50, k) / _lookup(rows, ds, "ldpkv", e, 50, k))
                     for e in cfg.epsilons for k in ("mse_frequency", "mse_mean")]
            wins = sum(c > 1 for c in cells)
            out["fig_mse_frequency"].append(
                f"Paper (citing its ref. [4]): LDPKV beats RAPPOR and Harmony on {ds.upper()}. Ours: LDPKV-approx "
                f"has lower MSE than RAPPOR+Harmony in {wins}/{len(cells)} (eps, frequency/mean) cells "
                f"(median ratio {np.median(cells):.2f}×) → "
                + ("supported" if wins == len(cells) else "partly supported" if wins else "NOT supported") + ".")
    for fig_id, key in (("fig_mse_frequency", "mse_frequency"), ("fig_mse_mean", "mse_mean"),
                        ("fig_relative_error_topn", "relative_error")):
        frows = figure_rows(rows, fig_id, cfg)
        for hv in HISKV_VARIANTS:
            out[fig_id].append(most_accurate_claim(frows, fig_id, key, hv, cfg))
        if fig_id == "fig_relative_error_topn":
            continue  # this figure does not vary eps
        mono, cnt = 0, 0
        for ds in cfg.datasets:
            for mch in MECHANISMS:
                series = [_lookup(frows, ds, mch, e, N, key) for e, N in figure_cells(fig_id, cfg)]
                cnt += 1
                mono += all(b <= a * 1.05 for a, b in zip(series, series[1:]))
        out[fig_id].append(f"Errors fall as eps grows: {mono}/{cnt} (dataset, mechanism) curves non-increasing "
                           f"(5% tolerance for Monte-Carlo noise).")
    grow, cnt = 0, 0
    for ds in cfg.datasets:
        for mch in MECHANISMS:
            s = [_lookup(rows, ds, mch, cfg.re_epsilon, N, "relative_error") for N in TOPS]
            cnt += 1
            grow += s[-1] > s[0]
    out["fig_relative_error_topn"].append(f"Relative error grows from top-10 to top-50 (less frequent keys): "
                                          f"{grow}/{cnt} curves at eps={cfg.re_epsilon:g}.")
    return out


def _baselines_note() -> str:
    return ("RAPPOR+Harmony is our reconstruction of the paper's RAPPOR and Harmony baselines (the paper does "
            "not say how they were combined): padding-and-sampling to PCKV's ell, basic one-time RAPPOR "
            "(symmetric unary encoding over the d keys) on the sampled key at eps/2 and Harmony on its value "
            "at eps/2; frequencies from the debiased bit counts, means from the sign sums over reports with the "
            "key's bit set (docs/keyvalue.md).")


_HOW = {
    "fig_mse_frequency": "One panel per dataset. Each line is a mechanism: the mean squared error of its estimated "
                         "key frequencies (fraction of users holding the key, clipped to [0, 1]), averaged over the "
                         "50 most frequent keys and over the runs, against the privacy budget eps (log scales). "
                         "Lower is better; every curve should fall as eps grows.",
    "fig_mse_mean": "One panel per dataset. Each line is a mechanism: the mean squared error of its estimated per-key "
                    "mean values (in [-1, 1]), averaged over the 50 most frequent keys and over the runs, against "
                    "eps (log scales). Lower is better.",
    "fig_relative_error_topn": "One panel per dataset. Each line is a mechanism at one eps: the mean relative error "
                               "|f̂ - f| / f of the frequencies of the N most frequent keys, for N = 10..50 (log "
                               "y scale). Lower is better; it grows with N because rarer keys are harder.",
}


def _report(rows, cfg, infos, claims, files, elapsed, note: str = "") -> Path:
    from .report_html import SOURCES, figure, table, write_page

    esc = html.escape
    has_se = any(not math.isnan(float(r.get("mse_frequency_se", float("nan")))) for r in rows)
    band_txt = (" <b>Shaded bands: +-2 standard errors of each plotted mean over the runs</b> (sd of the per-run "
                "values / sqrt(runs)): the Monte Carlo uncertainty of the curve, not the spread of one release. "
                "Curves whose bands overlap are not distinguishable with this many runs.") if has_se else (
        " <b>No error bands:</b> this run's CSV predates the recorded standard errors (rerun with --full).")
    wall = f"wall time {elapsed:.0f} s" if elapsed == elapsed else "wall time not recorded"
    h = [f"<p>This page re-runs the experiments of {esc(SOURCES['hiskv'])}: the error of key frequencies and "
         "per-key means as the privacy budget eps grows, and the relative error of the top-N keys, for HISKV and the "
         "key-value mechanisms it is compared with.</p>",
         f"<p>Run: {cfg.runs} runs per point; eps ∈ {cfg.epsilons}; beta = {cfg.beta}; HISKV c = {cfg.hiskv_c}; "
         f"HISKV (best c for freq.): c = HISKV.best_c(eps, d, OETL's ell, (1 - beta) n, {esc(str(BESTC_DESIGN))}) "
         "(public parameters only; best_c's default equal weights give c = 1, i.e. the HISKV series); "
         f"random seed {cfg.seed}; {wall}. Errors use clipped frequencies and the mechanisms' "
         "corrected means. Method: exact per-user sampling stage + exact per-key perturbation law "
         "(see <code>shuffledp.experiments.keyvalue</code>).</p>",
         "<p><b>Caveats.</b> TalkingData and JData are <i>stand-ins</i> generated with the published counts "
         "(users, keys, mean pairs), not the real data; the GAUSS and LNR recipes are reconstructed. LDPKV is "
         "LDPKV-approx (KVUE-equivalent; no public source). HISKV uses our eps-LDP cell family "
         "(p1 = e^eps t, q1 = c t, q2 = t), because the paper's literal probabilities are not eps-LDP "
         "(docs/keyvalue.md); HISKV-amp is our extension (same family at eps' = ln(ell(e^eps - 1) + 1), "
         "eps-LDP thanks to padding-and-sampling; at c = 1 it equals PCKV-GRR's cell probabilities, so it "
         "differs from PCKV-GRR only by OETL's ell and the beta users spent on it). OETL uses the length "
         f"domain {{1..{cfg.oetl_max_length}}} and norm-sub consistency. PCKV uses ell = the true 90th "
         "percentile of set lengths (no privacy cost charged for it, as in the PCKV paper's experiments). "
         + esc(_baselines_note()) + "</p>"]
    if note:
        h.append(f"<p class='note'>{esc(note)}</p>")
    h.append("<h2>Datasets</h2><ul>")
    for ds in cfg.datasets:
        i = infos.get(ds, {})
        parts = [f"{esc(i.get('label', ds))}: n = {i['n']:,}, d = {i['d']}"]
        if "mean_len" in i:
            parts.append(f"mean pairs/user {i['mean_len']:.2f}")
        if "p90_len" in i:
            parts.append(f"90th percentile of set lengths (PCKV's ell) {i['p90_len']}")
        if i.get("hiskv_ell"):
            parts.append("HISKV's OETL ell (mean over runs) " + ", ".join(
                f"eps={float(e):g}: {float(v):.1f}" for e, v in i["hiskv_ell"].items()))
        if i.get("hiskv_bestc"):
            parts.append("best-c series' c (mean over runs) " + ", ".join(
                f"eps={float(e):g}: {float(v):.2f}" for e, v in i["hiskv_bestc"].items()))
        h.append("<li>" + "; ".join(parts) + "</li>")
    h.append("</ul>")
    titles = {"fig_mse_frequency": "Frequency MSE against eps (top-50 keys)",
              "fig_mse_mean": "Mean-value MSE against eps (top-50 keys)",
              "fig_relative_error_topn": f"Relative error of the top-N keys at eps = {cfg.re_epsilon:g}"}
    for fid in files:
        eps_text = (f"{cfg.re_epsilon:g} (the same for every series)" if fid == "fig_relative_error_topn"
                    else "the x-axis value (the same for every series at each x)")
        h.append(f"<h2 id='{fid}'>{esc(titles[fid])}</h2>")
        h.append(figure(cfg.outdir, f"{fid}.png", titles[fid], _HOW[fid] + band_txt,
                        caption=f"Data: <a href='{fid}.csv'>{fid}.csv</a> ({cfg.runs} runs per point).",
                        privacy=_privacy_rows(eps_text)))
        h.append("<h3>The paper's claims, checked on these numbers</h3><ul>")
        h.extend(f"<li>{esc(c)}</li>" for c in claims.get(fid, []))
        h.append("</ul>")
    if 1.6 in cfg.epsilons:
        h.append("<h2>Table: frequency MSE / mean MSE, top-50 keys, eps = 1.6</h2>")
        h.append(table(["mechanism"] + [infos.get(ds, {}).get("label", ds) for ds in cfg.datasets],
                       [[LABELS[mch]] + [f"{_lookup(rows, ds, mch, 1.6, 50, 'mse_frequency'):.2e} / "
                                         f"{_lookup(rows, ds, mch, 1.6, 50, 'mse_mean'):.2e}" for ds in cfg.datasets]
                        for mch in MECHANISMS]))
    return write_page(cfg.outdir / "index.html", "Key-value LDP: the HISKV paper's experiments, re-run", h)


def _config_json(cfg: KeyValueExperimentConfig) -> dict:
    return {"runs": cfg.runs, "datasets": cfg.datasets, "n_override": cfg.n_override, "epsilons": cfg.epsilons,
            "beta": cfg.beta, "hiskv_c": cfg.hiskv_c, "oetl_max_length": cfg.oetl_max_length,
            "re_epsilon": cfg.re_epsilon, "seed": cfg.seed}


_NUMERIC = {"epsilon": float, "top_n": int, "mse_frequency": float, "mse_mean": float, "relative_error": float,
            "runs": int, "n": int, "d": int, "ell": float, "mse_frequency_se": float, "mse_mean_se": float,
            "relative_error_se": float}


def read_results(path: Path) -> list[dict]:
    """Rows of ``all_results.csv`` with numbers parsed; standard-error columns absent in older runs read as nan."""
    out = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            row: dict = dict(r)
            for k, typ in _NUMERIC.items():
                v = r.get(k)
                row[k] = typ(float(v)) if v not in (None, "") else float("nan")
            out.append(row)
    return out


def rebuild_report(outdir: Path) -> Path:
    """Re-render ``outdir``'s PNGs, figure CSVs and ``index.html`` from ``all_results.csv`` (and ``run.json``
    when the run wrote one), without simulating anything."""
    outdir = Path(outdir)
    rows = read_results(outdir / "all_results.csv")
    run_path = outdir / "run.json"
    meta = json.loads(run_path.read_text(encoding="utf-8")) if run_path.exists() else {}
    cfg = KeyValueExperimentConfig(outdir=outdir)
    for k, v in meta.get("config", {}).items():
        setattr(cfg, k, v)
    if not meta:
        cfg.datasets = [d for d in DATASET_ORDER if any(r["dataset"] == d for r in rows)] + sorted(
            {r["dataset"] for r in rows} - set(DATASET_ORDER))
        cfg.epsilons = sorted({r["epsilon"] for r in rows})
        cfg.runs = int(rows[0]["runs"])
    infos = meta.get("infos") or {}
    note = ""
    if not infos:
        note = ("Re-rendered from all_results.csv of a run that wrote no run.json: the mean set length, the "
                "best-c series' c and the wall time were not recorded and are omitted.")
        for ds in cfg.datasets:
            dr = [r for r in rows if r["dataset"] == ds]
            lab = _safe_label(ds, dr[0]["n"])
            infos[ds] = {"label": lab, "n": dr[0]["n"], "d": dr[0]["d"],
                         "p90_len": int(next(r["ell"] for r in dr if r["mechanism"] == "pckv-grr")),
                         "hiskv_ell": {e: next(r["ell"] for r in dr if r["mechanism"] == "hiskv" and r["epsilon"] == e)
                                       for e in cfg.epsilons}}
    if all(math.isnan(r["mse_frequency_se"]) for r in rows):
        note += (" This run's CSV has no standard-error columns (mse_frequency_se, mse_mean_se, relative_error_se): "
                 "the curves are drawn without error bands; rerun with --full to record them.")
    files = _plots(rows, cfg, infos)
    return _report(rows, cfg, infos, _claims(rows, cfg), files, float(meta.get("wall_s", float("nan"))),
                   note.strip())


def _safe_label(ds: str, n: int) -> str:
    try:
        return dataset_spec(ds, n=n).label
    except Exception:  # noqa: BLE001 - a label is cosmetic
        return ds


def run_keyvalue_experiment(cfg: KeyValueExperimentConfig, console=None) -> Path:
    """Run every dataset, write CSVs, PNGs, ``run.json`` and index.html into ``cfg.outdir``; return the report path."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    cfg.outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows: list[dict] = []
    infos = {}
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} runs"),
                  TimeElapsedColumn(), console=console) as progress:
        for ds in cfg.datasets:
            task = progress.add_task(f"{ds}: sampling + estimation", total=cfg.runs)
            r, info = _dataset_rows(ds, cfg, progress, task)
            rows.extend(r)
            infos[ds] = info
    _write_csv(cfg.outdir / "all_results.csv", rows)
    elapsed = time.perf_counter() - t0
    (cfg.outdir / "run.json").write_text(json.dumps({"config": _config_json(cfg), "infos": infos, "wall_s": elapsed},
                                                    indent=1), encoding="utf-8")
    files = _plots(rows, cfg, infos)
    claims = _claims(rows, cfg)
    return _report(rows, cfg, infos, claims, files, elapsed)
