"""Heavy hitters over an unknown domain: SFP, PEM and TreeHist in the local and shuffle models.

Data: Zipf-distributed synthetic words (a vocabulary of random lower-case words, Zipf(s) ranks),
and, when the ``wordfreq`` package is installed, real English word frequencies (its ``top_n_list``
restricted to words of a-z that fit the encoding, sampled by their frequencies; the data ship with
the package, nothing is downloaded).

Metrics of a run (``H_k`` the true top-``k``, ``O`` the output's first ``k`` items, ``r(v)`` the true
rank): precision ``|O ∩ H_k| / |O|``, recall ``|O ∩ H_k| / k``, F1; NCR
``sum_{v in O ∩ H_k} (k - r(v) + 1) / (k (k+1) / 2)``; the count error of the found items, the mean
of ``|c^(v) - c(v)| / c(v)`` over ``O ∩ H_k``; and the wall time of randomize + aggregate +
estimate.

Models: ``local`` (each report eps-LDP at the plotted eps) and ``shuffle`` (the protocols
``hh_sfp``/``hh_pem``/``hh_treehist`` at the central ``(eps, delta)``: the local epsilon is the
amplified one).
"""

from __future__ import annotations

import csv
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["HeavyHitterExperimentConfig", "run_heavy_hitter_experiment", "zipf_words", "wordfreq_words",
           "topk_metrics", "METHODS", "render_report_from_csv", "write_claims"]

METHODS = ("sfp", "pem", "treehist")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
_FIELDS = ["dataset", "model", "method", "epsilon", "delta", "local_epsilon", "n", "rep", "k", "precision",
           "recall", "f1", "ncr", "count_error", "found", "seconds"]


@dataclass
class HeavyHitterExperimentConfig:
    """What one run of the experiment does (:meth:`quick` and :meth:`full` are the two documented)."""

    out: Path
    ns: list[int] = field(default_factory=lambda: [20_000])
    local_eps: list[float] = field(default_factory=lambda: [4.0, 8.0])
    central_eps: list[float] = field(default_factory=lambda: [1.0])
    delta: float = 1e-6
    reps: int = 1
    k: int = 10
    max_length: int = 8
    vocabulary: int = 5000
    zipf: float = 1.1
    real_data: bool = True
    #: largest oracle domain of a PEM/TreeHist level (longer prefixes hashed into it)
    max_domain: int = 2048
    seed: int = 2026

    @classmethod
    def quick(cls, out: Path) -> "HeavyHitterExperimentConfig":
        return cls(out=out)

    @classmethod
    def full(cls, out: Path) -> "HeavyHitterExperimentConfig":
        return cls(out=out, ns=[100_000, 1_000_000], local_eps=[1.0, 2.0, 4.0, 8.0],
                   central_eps=[0.5, 1.0, 2.0], reps=1, max_domain=4096)


def zipf_words(n: int, vocabulary: int, s: float, max_length: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` users' words: a vocabulary of distinct random words of 3..max_length letters,
    rank ``r`` drawn with probability proportional to ``r^-s``."""
    letters = np.array(list(_ALPHABET))
    lengths = rng.integers(3, max_length + 1, size=3 * vocabulary)
    raw = rng.choice(letters, size=(3 * vocabulary, max_length))
    words = np.array(["".join(row[:L]) for row, L in zip(raw, lengths)])
    _, first = np.unique(words, return_index=True)
    vocab = words[np.sort(first)][:vocabulary]
    w = 1.0 / np.arange(1, vocab.size + 1) ** s
    return vocab[rng.choice(vocab.size, size=n, p=w / w.sum())]


def wordfreq_words(n: int, max_length: int, rng: np.random.Generator, top: int = 20_000) -> np.ndarray | None:
    """``n`` users' words sampled by the English frequencies of ``wordfreq`` (None when the package
    is not installed)."""
    try:
        import wordfreq
    except ImportError:
        return None
    words = [w for w in wordfreq.top_n_list("en", top) if 0 < len(w) <= max_length and set(w) <= set(_ALPHABET)]
    freqs = np.array([wordfreq.word_frequency(w, "en") for w in words])
    return np.array(words)[rng.choice(len(words), size=n, p=freqs / freqs.sum())]


def topk_metrics(labels: Any, values: Any, data: np.ndarray, k: int) -> dict[str, float]:
    """Precision, recall, F1, NCR and the count error of the output's first ``k`` items."""
    u, c = np.unique(data, return_counts=True)
    order = np.argsort(-c, kind="stable")[:k]
    rank = {str(u[i]): r + 1 for r, i in enumerate(order)}
    truth = dict(zip(u.tolist(), c.tolist()))
    out = [str(v) for v in list(labels)[:k]]
    est = dict(zip(out, list(values)[:k]))
    hits = [v for v in out if v in rank]
    precision = len(hits) / len(out) if out else 0.0
    recall = len(hits) / k
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    ncr = sum(k - rank[v] + 1 for v in hits) / (k * (k + 1) / 2)
    err = float(np.mean([abs(est[v] - truth[v]) / truth[v] for v in hits])) if hits else math.nan
    return {"precision": precision, "recall": recall, "f1": f1, "ncr": ncr, "count_error": err,
            "found": len(hits)}


def _build(method: str, model: str, eps: float, delta: float, n: int, k: int, max_length: int, seed: int,
           max_domain: int) -> Any:
    words = {"alphabet": _ALPHABET, "max_length": max_length}
    params = {"sfp": {"k": k}, "pem": {"k": k, "max_domain": max_domain},
              "treehist": {"k": k, "max_domain": max_domain}}[method]
    if model == "local":
        from ..local.heavy_hitters import heavy_hitter

        return heavy_hitter(method, eps, hash_seed=seed, **words, **params)
    from ..shuffle import protocol

    return protocol(f"hh_{method}", epsilon=eps, delta=delta, n=n, hash_seed=seed, **words, **params)


def _one_run(mech: Any, model: str, values: np.ndarray, rng: np.random.Generator) -> tuple[Any, float]:
    t = time.perf_counter()
    if model == "local":
        est = mech.estimate(mech.aggregate(mech.randomize(values, rng)), values.size)
    else:
        msgs = mech.encode(values, rng)
        perm = rng.permutation(values.size)
        est = mech.estimate(mech.aggregate({k: v[perm] for k, v in msgs.items()}), values.size)
    return est, time.perf_counter() - t


def run_heavy_hitter_experiment(cfg: HeavyHitterExperimentConfig, console: Any = None) -> Path:
    """Run the grid, write ``results.csv``, the figures and ``index.html`` into ``cfg.out``."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    say = console.print if console is not None else (lambda *a, **k: None)
    rows = []
    master = np.random.default_rng(cfg.seed)
    datasets = {"zipf": lambda n, g: zipf_words(n, cfg.vocabulary, cfg.zipf, cfg.max_length, g)}
    if cfg.real_data and wordfreq_words(10, cfg.max_length, np.random.default_rng(0)) is not None:
        datasets["wordfreq"] = lambda n, g: wordfreq_words(n, cfg.max_length, g)
    elif cfg.real_data:
        say("wordfreq is not installed: the real-word data set is skipped")
    for dname, make in datasets.items():
        for n in cfg.ns:
            for rep in range(cfg.reps):
                g = np.random.default_rng(master.integers(1 << 62))
                values = make(n, g)
                for model, grid in (("local", cfg.local_eps), ("shuffle", cfg.central_eps)):
                    for eps in grid:
                        for method in METHODS:
                            hs = int(g.integers(1 << 53))
                            mech = _build(method, model, eps, cfg.delta, n, cfg.k, cfg.max_length, hs, cfg.max_domain)
                            est, sec = _one_run(mech, model, values, g)
                            m = topk_metrics(est.labels, est.values, values, cfg.k)
                            local = (mech.privacy().eps if model == "local"
                                     else mech.local_randomizer.privacy().eps)
                            rows.append({"dataset": dname, "model": model, "method": method, "epsilon": eps,
                                         "delta": 0.0 if model == "local" else cfg.delta,
                                         "local_epsilon": round(local, 6), "n": n, "rep": rep, "k": cfg.k,
                                         **{key: (round(v, 6) if isinstance(v, float) else v)
                                            for key, v in m.items()}, "seconds": round(sec, 4)})
                            say(f"{dname} n={n} {model} eps={eps:g} {method}: F1={m['f1']:.2f} "
                                f"NCR={m['ncr']:.2f} ({sec:.1f}s)")
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=_FIELDS)
        w.writeheader()
        w.writerows(rows)
    return render_report(out, rows, cfg)


def write_claims(out: Path, rows: list[dict]) -> str:
    """Evaluate the papers' claims on ``rows``; write ``claims.csv`` and ``claims.md``; return the HTML table."""
    from .heavy_hitters_claims import claims_html, claims_markdown, evaluate_claims, write_claims_csv

    verdicts = evaluate_claims(rows)
    write_claims_csv(out / "claims.csv", verdicts)
    (out / "claims.md").write_text(claims_markdown(verdicts), encoding="utf-8")
    return claims_html(verdicts)


def render_report_from_csv(cfg: HeavyHitterExperimentConfig) -> Path:
    """Re-render the figures, the claims and ``index.html`` from ``cfg.out/results.csv`` without measuring."""
    from .heavy_hitters_claims import read_rows

    rows = read_rows(Path(cfg.out) / "results.csv")
    for r in rows:
        r["n"] = int(r["n"])
    cfg.ns = sorted({r["n"] for r in rows})
    return render_report(Path(cfg.out), rows, cfg)


def _mean(rows: list[dict], key: str) -> float:
    vals = [float(r[key]) for r in rows if not (isinstance(r[key], float) and math.isnan(r[key]))]
    return float(np.mean(vals)) if vals else math.nan


def render_report(out: Path, rows: list[dict], cfg: HeavyHitterExperimentConfig) -> Path:
    """The figures (F1 and NCR vs eps per data set, model and n) and ``index.html``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report_html import figure, save_figure, table, write_page

    pngs = []
    datasets = sorted({r["dataset"] for r in rows})
    for dname in datasets:
        for n in cfg.ns:
            fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
            for col, (model, metric) in enumerate([("local", "f1"), ("local", "ncr"), ("shuffle", "f1"),
                                                   ("shuffle", "ncr")]):
                ax = axes[col]
                for method in METHODS:
                    sel = [r for r in rows if r["dataset"] == dname and r["n"] == n and r["model"] == model
                           and r["method"] == method]
                    eps = sorted({r["epsilon"] for r in sel})
                    ax.plot(eps, [_mean([r for r in sel if r["epsilon"] == e], metric) for e in eps], marker="o",
                            label=method)
                ax.set_xlabel("local epsilon" if model == "local" else "central epsilon (delta=%g)" % cfg.delta)
                ax.set_ylabel(metric.upper())
                ax.set_ylim(-0.05, 1.05)
                ax.set_title(f"{dname}, n={n:g}, {model}")
                ax.grid(alpha=0.3)
            axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
            name = f"f1_ncr_{dname}_n{n}.png"
            save_figure(fig, out / name)
            plt.close(fig)
            pngs.append(name)
    header = ["dataset", "model", "method", "epsilon", "n", "F1", "NCR", "count error", "seconds"]
    keys = sorted({(r["dataset"], r["model"], r["method"], r["epsilon"], r["n"]) for r in rows})
    body = []
    for key in keys:
        sel = [r for r in rows if (r["dataset"], r["model"], r["method"], r["epsilon"], r["n"]) == key]
        body.append([*map(str, key), f"{_mean(sel, 'f1'):.2f}", f"{_mean(sel, 'ncr'):.2f}",
                     f"{_mean(sel, 'count_error'):.3f}", f"{_mean(sel, 'seconds'):.2f}"])
    how = ("<p>Each point is the mean over the repetitions of the top-k metric of one method at one epsilon; "
           "local panels: each report eps-LDP; shuffle panels: the central (eps, delta) target, reports at "
           "the amplified local epsilon (column local_epsilon of results.csv).</p>")
    parts = [f"<p>k = {cfg.k}; words of at most {cfg.max_length} letters a-z; Zipf({cfg.zipf}) over "
             f"{cfg.vocabulary} words; {cfg.reps} repetition(s); PEM/TreeHist levels over OLH with at most "
             f"{cfg.max_domain} items (longer prefixes hashed, 2 hash copies). Data: results.csv.</p>"]
    parts += [figure(out, p, p, how) for p in pngs]
    parts.append(table(header, body, numeric_from=3))
    parts.append(write_claims(out, rows))
    return write_page(out / "index.html", "Heavy hitters: SFP, PEM, TreeHist", parts)
