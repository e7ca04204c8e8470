"""Reproduction of the experiments (§5, Figs. 7-15) of the shuffle-model survey by Wang and Meng.

For every figure the survey plots three things per method: the RMSE of the estimated total
(a count, the per-value counts of a histogram, or a sum), the analyzer's compute time and the
communication (messages and bits per user). We recompute all three for whatever protocols the
registry (:func:`shuffledp.shuffle.protocol`) can build, at the same central target
``(eps_c, delta = 1e-6)``:

* **RMSE** comes from :func:`shuffledp.pipeline.simulations`, the releases of the one
  encode -> shuffle -> analyze path: an exact sample of the analyzer's statistic
  (``protocol.simulate_statistic``, cost independent of n) followed by the protocol's own
  ``estimate``, repeated up to ``reps`` times. Protocols without an exact simulation make each
  release a full :func:`shuffledp.pipeline.run` instead (``pipeline_reps`` of them), but only
  when the whole run stays under ``pipeline_max_messages``; otherwise the RMSE is skipped, with
  the reason.
* **Analyzer time** is measured on a real encoded and shuffled batch of at most
  ``timing_max_messages`` messages (the first ``m`` users of the data set; shufflers' fake
  messages at their full size, delivered by :func:`shuffledp.pipeline.deliver`). When
  ``m < n`` it is extrapolated with a fixed + per-message model fitted on the batch and on its
  first quarter (best of ``timing_repeats`` each):
  ``t(n) = fixed + per_message * messages(n) + t_estimate``. Aggregation is a pass over the
  messages plus per-item work (a curator's noise for d items, a debiasing over d), which the
  fixed term absorbs. The batch size is in the CSV (``timing_messages``), the fit in
  ``analyzer_how``.
* **Communication**: messages per user measured on that real batch (so it depends on the data,
  e.g. Cnt_2M sends more when more users hold 1), bits per user = messages per user times the
  protocol's ``bits_per_message``, and the total message count at ``n`` including fakes.

Data (the survey's, our parameters where it gives none): counting ``x ~ Bernoulli(q)``;
histograms a normal law on ``[0, d)`` (mean ``(d - 1)/2``, sd ``d/6``, rounded and clipped);
sums a normal law clipped to ``[0, 1]`` (mean 0.5, sd 0.25). Baselines, as in the survey:
randomized response / k-RR / Harmony (LDP) and Laplace (CDP).

The grid is a list of independent tasks, one per (figure, swept value) (:class:`GridTask`), each
deriving its data and generators from the seed: :func:`run_survey` runs them in process or maps
them over an engine (:mod:`shuffledp.engines`, e.g. Dask) with the same rows. A point's
repetitions stop on a wall-clock budget unless :attr:`SurveyConfig.pinned` fixes their number.

The survey's qualitative claims and their evaluation on our data are in
:mod:`shuffledp.experiments.survey_claims`; the HTML report puts each figure beside them.
"""

from __future__ import annotations

import csv
import html
import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import pipeline
from ..core.errors import ShuffleDPError
from ..core.batch import n_rows, take_rows
from ..shuffle.base import Protocol

__all__ = ["FigureSpec", "SurveyConfig", "SkipPoint", "GridTask", "run_survey", "run_task", "grid_tasks",
           "measure_point", "make_data", "true_total", "build_protocol", "pinned_reps", "METHODS", "BASELINES",
           "LABELS", "ROW_FIELDS"]

#: shuffle protocols compared in each problem (the survey's lists)
METHODS: dict[str, list[str]] = {
    "counting": ["cnt_rr", "cnt_2m", "cnt_sgm", "cnt_bn"],
    "histogram": ["hist_kr", "hist_mm", "slh", "murs"],
    "sum": ["rsum_rr", "rsum_kr", "rsum_rm", "rsum_dsg"],
}
#: (LDP baseline, CDP baseline) per problem
BASELINES: dict[str, tuple[str, str]] = {
    "counting": ("ldp_rr", "cdp_laplace_count"),
    "histogram": ("ldp_krr", "cdp_laplace_hist"),
    "sum": ("ldp_harmony", "cdp_laplace_sum"),
}
LABELS: dict[str, str] = {
    "cnt_rr": "Cnt_RR", "cnt_2m": "Cnt_2M", "cnt_sgm": "Cnt_SGM", "cnt_bn": "Cnt_BN",
    "hist_kr": "Hist_KR", "hist_mm": "Hist_MM", "slh": "SLH", "murs": "MURS", "prhr": "PRHR (not in survey)",
    "rsum_rr": "RSum_RR", "rsum_kr": "RSum_KR", "rsum_rm": "RSum_RM", "rsum_dsg": "RSum_DSG",
    "ldp_rr": "LDP (RR)", "ldp_krr": "LDP (k-RR)", "ldp_harmony": "LDP (Harmony)",
    "cdp_laplace_count": "CDP (Laplace)", "cdp_laplace_hist": "CDP (Laplace)", "cdp_laplace_sum": "CDP (Laplace)",
}

ROW_FIELDS = ["figure", "problem", "x_name", "x", "method", "label", "model", "epsilon", "delta", "n", "q", "d",
              "status", "reason", "params", "rmse", "rmse_se", "rmse_theory", "reps", "rmse_how", "analyzer_s",
              "analyzer_how", "timing_messages", "messages_per_user", "bits_per_user", "total_messages",
              "fake_messages", "eps_achieved", "delta_achieved", "eps_local", "point_s"]

Factory = Callable[..., Protocol]
esc = html.escape


class SkipPoint(Exception):
    """A (method, setting) that cannot be measured; the message is the reason shown in the report."""


@dataclass
class FigureSpec:
    """One survey figure: a problem, the swept variable and its values (``method``: one setting)."""

    fig_id: str
    problem: str
    x_name: str  # "method" (Fig. 7), "epsilon", "n", "q" or "d"
    values: list
    title: str
    #: methods measured beyond the survey's list (shown, but not part of the claims' comparisons)
    extra: list[str] = field(default_factory=list)


def _figures(eps: list[float], ns_cnt: list[int], qs: list[float], ds: list[int], ns_hist: list[int],
             ns_sum: list[int]) -> list[FigureSpec]:
    return [
        FigureSpec("fig07a", "counting", "method", [None], "Fig. 7(a) counting: n=1e6, eps_c=0.9, q=0.5"),
        FigureSpec("fig07b", "histogram", "method", [None], "Fig. 7(b) histograms: n=1e6, eps_c=0.9, d=100",
                   extra=["prhr"]),
        FigureSpec("fig07c", "sum", "method", [None], "Fig. 7(c) sums: n=1e6, eps_c=0.9"),
        FigureSpec("fig08", "counting", "epsilon", eps, "Fig. 8 counting vs eps_c"),
        FigureSpec("fig09", "counting", "n", ns_cnt, "Fig. 9 counting vs n"),
        FigureSpec("fig10", "counting", "q", qs, "Fig. 10 counting vs q"),
        FigureSpec("fig11", "histogram", "epsilon", eps, "Fig. 11 histograms vs eps_c"),
        FigureSpec("fig12", "histogram", "d", ds, "Fig. 12 histograms vs d"),
        FigureSpec("fig13", "histogram", "n", ns_hist, "Fig. 13 histograms vs n"),
        FigureSpec("fig14", "sum", "epsilon", eps, "Fig. 14 sums vs eps_c"),
        FigureSpec("fig15", "sum", "n", ns_sum, "Fig. 15 sums vs n"),
    ]


@dataclass
class SurveyConfig:
    """Everything a survey run needs; :meth:`quick` and :meth:`full` are the CLI's presets."""

    mode: str = "quick"
    outdir: Path = Path("results/survey")
    seed: int = 2022
    delta: float = 1e-6
    base_epsilon: float = 0.9
    base_n: int = 1_000_000
    base_q: float = 0.5
    base_d: int = 100
    #: RMSE repetitions per point (exact simulation); the pipeline fallback uses ``pipeline_reps``
    reps: int = 100
    pipeline_reps: int = 5
    #: most messages in one analyzer-timing batch (bigger totals are scaled from it)
    timing_max_messages: int = 200_000
    #: most messages of one full pipeline run (the RMSE fallback without exact simulation)
    pipeline_max_messages: int = 2_000_000
    timing_repeats: int = 3
    #: soft wall-clock budget of one point's RMSE loop (stops early, at >= min_reps reps)
    point_budget_s: float = 5.0
    min_reps: int = 10
    target_rel_se: float = 0.05
    murs_fake_fraction: float = 0.01
    sum_precision: int = 10
    rsum_rm_messages: int = 3
    data_sd_fraction: float = 1.0 / 6.0
    sum_mean: float = 0.5
    sum_sd: float = 0.25
    figures: list[FigureSpec] = field(default_factory=list)
    methods: dict[str, list[str]] = field(default_factory=lambda: {k: list(v) for k, v in METHODS.items()})
    baselines: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(BASELINES))
    #: extra keyword arguments per method (merged over the defaults of :meth:`params_for`)
    extra_params: dict[str, dict] = field(default_factory=dict)
    #: alternative settings tried, in order, when a method refuses the target with its defaults
    #: (the survey: "parameters not mentioned take the setting that gives the best bound");
    #: the row's ``params`` and ``reason`` say which one was used
    fallback_params: dict[str, list[dict]] = field(default_factory=lambda: {
        "cnt_rr": [{"calibration": "lemma4.8"}, {"calibration": "clones"}],
    })
    #: repetitions pinned per point, ``{(fig_id, method, x as written in the CSV): reps}``
    #: (:func:`pinned_reps` reads them from an earlier run): a pinned point takes exactly that
    #: many releases whatever the clock, so the same seed reproduces that run's RMSE columns
    #: bit for bit (in process or on any engine); other points follow the time budget
    pinned: dict[tuple[str, str, str], int] = field(default_factory=dict)

    @classmethod
    def quick(cls, outdir: Path | str = Path("results/survey")) -> "SurveyConfig":
        eps = [0.1, 0.3, 0.5, 0.7, 0.9]
        return cls(mode="quick", outdir=Path(outdir), reps=60, timing_max_messages=100_000,
                   pipeline_max_messages=1_000_000, timing_repeats=2, point_budget_s=0.6, min_reps=8,
                   pipeline_reps=3,
                   figures=_figures(eps, [10**4, 10**5, 10**6], [0.1, 0.5, 0.9], [16, 128, 1024],
                                    [10**4, 10**5, 10**6], [10**4, 10**5, 10**6]))

    @classmethod
    def full(cls, outdir: Path | str = Path("results/survey")) -> "SurveyConfig":
        eps = [round(0.1 * i, 1) for i in range(1, 10)]
        qs = [round(0.1 * i, 1) for i in range(1, 10)]
        return cls(mode="full", outdir=Path(outdir), reps=200, timing_max_messages=500_000,
                   pipeline_max_messages=10_000_000, timing_repeats=3, point_budget_s=3.0, min_reps=12,
                   pipeline_reps=5,
                   figures=_figures(eps, [10**4, 10**5, 10**6, 10**7], qs, [2**k for k in range(4, 13)],
                                    [10**4, 10**5, 10**6], [10**4, 10**5, 10**6, 10**7]))

    def params_for(self, name: str, problem: str, d: int, n: int, q: float) -> dict[str, Any]:
        """Keyword arguments for a method's constructor (each one a parameter that method takes)."""
        p: dict[str, Any] = {}
        if problem == "histogram":
            p.update(d=d)
        if name == "cnt_rr":
            # the smallest lambda Cheu et al.'s own bound (Cor. 4.7) allows: the survey's "setting
            # that gives each method its best bound"; Lemma 4.8's closed form is a fallback
            p.update(calibration="corollary4.7")
        if name in ("cnt_2m", "cnt_bn"):
            p.update(ones_fraction=q)
        if name == "murs":
            p.update(n_fake=max(1, int(round(self.murs_fake_fraction * n))))
        if name in ("rsum_rr", "rsum_kr", "rsum_dsg"):
            p.update(precision=self.sum_precision)
        if name == "rsum_rm":
            p.update(messages=self.rsum_rm_messages)
        if name in ("hist_kr", "rsum_kr", "rsum_rm"):
            # the tightest proven blanket bound (closed form, Hoeffding, Bennett), like cnt_rr's
            # Cor. 4.7 above: the survey's "setting that gives each method its best bound"
            p.update(bound="best")
        p.update(self.extra_params.get(name, {}))
        return p

    def to_json(self) -> dict:
        out = asdict(self)
        out["outdir"] = str(self.outdir)
        out["pinned"] = len(self.pinned)  # how many points had their repetitions pinned
        return out


def pinned_reps(outdir: Path | str) -> dict[tuple[str, str, str], int]:
    """Each point's repetition count in an earlier run's ``figXX.csv`` files, for
    :attr:`SurveyConfig.pinned` (``--reps-from``): rerunning with the same seed and these counts
    gives that run's RMSE columns exactly."""
    outdir = Path(outdir)
    files = sorted(outdir.glob("fig*.csv"))
    if not files:
        raise ValueError(f"reps_from: no figXX.csv in {outdir}")
    out: dict[tuple[str, str, str], int] = {}
    for path in files:
        with open(path, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                if r.get("reps") not in (None, "", "0"):
                    out[(r["figure"], r["method"], r["x"])] = int(float(r["reps"]))
    return out


# ----------------------------------------------------------------------------------------- data
def make_data(problem: str, n: int, rng: np.random.Generator, *, q: float = 0.5, d: int = 100,
              sd_fraction: float = 1.0 / 6.0, sum_mean: float = 0.5, sum_sd: float = 0.25) -> np.ndarray:
    """The survey's synthetic data for ``n`` users.

    counting: bits ~ Bernoulli(q) (int8); histogram: normal on [0, d) (mean (d-1)/2, sd d *
    sd_fraction), rounded and clipped (int64); sum: normal(sum_mean, sum_sd) clipped to [0, 1].
    """
    if problem == "counting":
        return (rng.random(n) < q).astype(np.int8)
    if problem == "histogram":
        x = np.rint(rng.normal((d - 1) / 2.0, d * sd_fraction, size=n))
        return np.clip(x, 0, d - 1).astype(np.int64)
    if problem == "sum":
        return np.clip(rng.normal(sum_mean, sum_sd, size=n), 0.0, 1.0)
    raise ValueError(f"unknown problem {problem!r}")


def true_total(problem: str, values: np.ndarray, d: int) -> np.ndarray:
    """The estimand: number of ones, per-value counts, or the sum."""
    if problem == "counting":
        return np.array([float(np.count_nonzero(values))])
    if problem == "histogram":
        return np.bincount(values, minlength=d).astype(np.float64)
    return np.array([float(np.sum(values))])


# ------------------------------------------------------------------------------------- building
def _default_factory(name: str, **kw: Any) -> Protocol:
    from ..shuffle.registry import protocol

    return protocol(name, **kw)


def build_protocol(name: str, epsilon: float, delta: float, n: int, params: dict[str, Any],
                   factory: Factory | None = None) -> Protocol:
    """Build ``name`` at the central target with the keyword parameters ``params``.

    Raises :class:`SkipPoint` with a reason when the protocol is not implemented, does not take
    one of ``params`` (the registry names it), or refuses the target (e.g. out of its domain).
    """
    factory = factory or _default_factory
    if factory is _default_factory:
        from ..shuffle.registry import protocol_class

        try:
            protocol_class(name)
        except ShuffleDPError as e:
            raise SkipPoint(f"not available: {e}") from e
        except ImportError as e:
            raise SkipPoint(f"not importable: {e}") from e
    try:
        return factory(name, epsilon=epsilon, delta=delta, n=n, **params)
    except ShuffleDPError as e:
        raise SkipPoint(f"refuses eps_c={epsilon:g}, n={n:g}: {e}") from e
    except (ValueError, NotImplementedError) as e:
        raise SkipPoint(f"cannot be built at eps_c={epsilon:g}, n={n:g}: {e}") from e


# ------------------------------------------------------------------------------------ measuring
def _kw(d: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())


def _safe(fn: Callable[[], Any], default: Any = float("nan")) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - optional metadata; a failure must not lose the point
        return default


def _rmse(proto: Protocol, values: np.ndarray, truth: np.ndarray, cfg: SurveyConfig,
          rng: np.random.Generator, pinned: int | None = None) -> tuple[float, float, int, str]:
    """RMSE of the releases of :func:`shuffledp.pipeline.simulations` (and its s.e., reps, how).

    Exact statistic simulation: up to ``cfg.reps`` releases, fewer once ``cfg.point_budget_s`` is
    spent and the estimate is precise enough. Otherwise every release is a full pipeline run:
    ``cfg.pipeline_reps`` of them. ``pinned``: exactly that many releases, whatever the clock.
    """
    exact = proto.has_exact_simulation
    reps = pinned if pinned is not None else cfg.reps if exact else cfg.pipeline_reps
    timed = exact and pinned is None
    sq = []
    t0 = time.perf_counter()
    for est in itertools.islice(pipeline.simulations(proto, values, rng), reps):
        sq.append(float(np.mean((np.asarray(est.values, dtype=np.float64) - truth) ** 2)))
        if timed and time.perf_counter() - t0 > cfg.point_budget_s and _precise_enough(sq, cfg):
            break
    return (*_rmse_from(sq), "exact statistic simulation" if exact else "full pipeline runs")


def _precise_enough(sq: list[float], cfg: SurveyConfig) -> bool:
    """Stopping rule once the point's time budget is spent: ``min_reps`` repetitions, or at least
    3 whose RMSE has a relative standard error <= ``target_rel_se`` (histograms average the
    squared error over d bins, so a few repetitions already pin their RMSE down)."""
    if len(sq) >= cfg.min_reps:
        return True
    if len(sq) < 3:
        return False
    _, se, _ = _rmse_from(sq)
    rmse = math.sqrt(float(np.mean(sq)))
    return rmse > 0 and se / rmse <= cfg.target_rel_se


def _rmse_from(sq: list[float]) -> tuple[float, float, int]:
    a = np.asarray(sq)
    mse = float(a.mean())
    rmse = math.sqrt(mse)
    se_mse = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else float("nan")
    se = se_mse / (2.0 * rmse) if rmse > 0 else float("nan")
    return rmse, se, int(a.size)


def _best_time(proto: Protocol, batch: dict, repeats: int) -> tuple[float, Any]:
    best, stat = math.inf, None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        stat = proto.aggregate(batch)
        best = min(best, time.perf_counter() - t0)
    return best, stat


def _estimate_time(proto: Protocol, stat: Any, m: int, repeats: int) -> float:
    """Best time of ``estimate`` after one warm-up call (which fills the memoized privacy
    statement: accounting depends on n only, it is not per-data analyzer work); 0 if the
    n-calibrated estimator refuses m < n users."""
    try:
        proto.estimate(stat, m)
    except Exception:  # noqa: BLE001
        return 0.0
    best = math.inf
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        proto.estimate(stat, m)
        best = min(best, time.perf_counter() - t0)
    return best


def _timing(proto: Protocol, values: np.ndarray, n: int, cfg: SurveyConfig,
            rng: np.random.Generator) -> dict[str, Any]:
    """Analyzer time and communication from a real encoded (+ shuffled) batch of bounded size."""
    mpu_stated = _safe(lambda: float(proto.messages_per_user))
    per_user = mpu_stated if np.isfinite(mpu_stated) and mpu_stated > 0 else 1.0
    if per_user > cfg.timing_max_messages:
        raise SkipPoint(f"{per_user:.3g} expected messages per user exceed the timing batch cap "
                        f"{cfg.timing_max_messages:,}")
    m = int(min(n, max(1, cfg.timing_max_messages // max(1, math.ceil(per_user)))))
    sub = values[:m]
    msgs = proto.encode(sub, rng)
    user_msgs = n_rows(msgs)
    batch = pipeline.deliver(proto, msgs, rng)
    n_batch = n_rows(batch)
    fakes = n_batch - user_msgs
    t_full, stat = _best_time(proto, batch, cfg.timing_repeats)
    t_est = _estimate_time(proto, stat, m, cfg.timing_repeats)
    mpu = user_msgs / m
    total = mpu * n + fakes
    if m == n:
        how = "measured on the full batch"
        t_an = t_full + t_est
    else:
        # fixed + per-message cost, fitted on the batch and on its first quarter: aggregation is
        # a pass over the messages plus per-item work (e.g. a curator's noise for d items)
        k = max(1, n_batch // 4)
        t_quarter, _ = _best_time(proto, take_rows(batch, slice(0, k)), cfg.timing_repeats)
        per_msg = max((t_full - t_quarter) / max(n_batch - k, 1), 0.0)
        fixed = max(t_full - per_msg * n_batch, 0.0)
        t_an = fixed + per_msg * total + t_est
        how = (f"fixed {fixed:.3g} s + {per_msg * 1e9:.3g} ns/message, fitted on {k:,} and {n_batch:,} "
               f"messages, x{total / max(n_batch, 1):.3g} messages at n")
    bpm = _safe(lambda: float(proto.bits_per_message))
    return {"analyzer_s": t_an, "analyzer_how": how, "timing_messages": n_batch, "messages_per_user": mpu,
            "bits_per_user": mpu * bpm, "total_messages": total, "fake_messages": fakes}


def measure_point(name: str, problem: str, epsilon: float, n: int, values: np.ndarray, truth: np.ndarray,
                  cfg: SurveyConfig, rng: np.random.Generator, *, q: float = float("nan"), d: int = 0,
                  factory: Factory | None = None, pinned: int | None = None) -> dict[str, Any]:
    """One row: RMSE, analyzer time and communication of ``name`` at one setting.

    Never raises for a protocol's refusal or failure: the row then has ``status`` ``"skipped"``
    (or ``"partial"`` when only one of RMSE / timing could be measured) and a ``reason``.
    ``pinned``: the RMSE takes exactly that many releases (see :attr:`SurveyConfig.pinned`).
    """
    t_start = time.perf_counter()
    row: dict[str, Any] = {k: float("nan") for k in ROW_FIELDS}
    row.update(method=name, label=LABELS.get(name, name), problem=problem, epsilon=epsilon, delta=cfg.delta,
               n=n, q=q, d=d, status="ok", reason="", rmse_how="", analyzer_how="", model="", reps=0)
    reasons: list[str] = []
    base = cfg.params_for(name, problem, d, n, q)
    first_error = None
    proto = None
    for alt in [{}] + list(cfg.fallback_params.get(name, [])):
        try:
            proto = build_protocol(name, epsilon, cfg.delta, n, {**base, **alt}, factory=factory)
        except SkipPoint as e:
            first_error = first_error or str(e)
            continue
        if alt:
            reasons.append(f"built with {_kw(alt)} because the default refused: {first_error}")
        row["params"] = _kw({**base, **alt})
        break
    if proto is None:
        alts = cfg.fallback_params.get(name, [])
        tail = f" (also refused with {'; '.join(_kw(a) for a in alts)})" if alts else ""
        row.update(status="skipped", reason=f"{first_error}{tail}", point_s=time.perf_counter() - t_start)
        return row
    row["model"] = proto.model
    st = _safe(lambda: proto.privacy(n), None)
    if st is not None:
        row["eps_achieved"] = _safe(lambda: float(st.eps))
        row["delta_achieved"] = _safe(lambda: float(st.delta))
    lr = _safe(lambda: proto.local_randomizer, None)
    if lr is not None:
        row["eps_local"] = _safe(lambda: float(lr.epsilon))
    row["rmse_theory"] = _safe(lambda: math.sqrt(float(proto.variance(n))))
    # RMSE
    try:
        if not proto.has_exact_simulation:
            per_user = _safe(lambda: float(proto.messages_per_user), 1.0)
            total = per_user * n
            if total > cfg.pipeline_max_messages:
                raise SkipPoint(f"no exact simulation and a full run needs {total:.3g} messages "
                                f"(cap {cfg.pipeline_max_messages:.3g})")
        rmse, se, reps, how = _rmse(proto, values, truth, cfg, rng, pinned)
        row.update(rmse=rmse, rmse_se=se, reps=reps, rmse_how=how)
    except SkipPoint as e:
        reasons.append(f"RMSE skipped: {e}")
    except Exception as e:  # noqa: BLE001 - report a protocol failure instead of aborting the survey
        reasons.append(f"RMSE failed: {type(e).__name__}: {e}")
    # timing and communication
    try:
        row.update(_timing(proto, values, n, cfg, rng))
    except SkipPoint as e:
        reasons.append(f"timing skipped: {e}")
    except Exception as e:  # noqa: BLE001
        reasons.append(f"timing failed: {type(e).__name__}: {e}")
    measured = [not math.isnan(row["rmse"]), not math.isnan(row["analyzer_s"])]
    if not any(measured):
        row["status"] = "skipped"
    elif not all(measured):
        row["status"] = "partial"
    row["reason"] = "; ".join(reasons)
    row["point_s"] = time.perf_counter() - t_start
    return row


# ------------------------------------------------------------------------------------- figures
def _settings(fig: FigureSpec, x: Any, cfg: SurveyConfig) -> tuple[float, int, float, int]:
    eps, n, q, d = cfg.base_epsilon, cfg.base_n, cfg.base_q, cfg.base_d
    if fig.x_name == "epsilon":
        eps = float(x)
    elif fig.x_name == "n":
        n = int(x)
    elif fig.x_name == "q":
        q = float(x)
    elif fig.x_name == "d":
        d = int(x)
    return eps, n, q, d


def _figure_methods(fig: FigureSpec, cfg: SurveyConfig) -> list[str]:
    ldp, cdp = cfg.baselines[fig.problem]
    return list(cfg.methods[fig.problem]) + list(fig.extra) + [ldp, cdp]


@dataclass(frozen=True, eq=False)
class GridTask:
    """One swept value of one figure: every method's row there. Independent of every other task:
    its data and each method's generator come from seeds derived from ``(cfg.seed, figure, xi,
    method index)``, so a task gives the same rows in any process, in any order."""

    cfg: SurveyConfig
    fig: FigureSpec
    xi: int
    factory: Factory | None = None


def grid_tasks(cfg: SurveyConfig, factory: Factory | None = None) -> list[GridTask]:
    """Every (figure, swept value) of ``cfg``, in the order the CSVs list them."""
    return [GridTask(cfg, fig, xi, factory) for fig in cfg.figures for xi in range(len(fig.values))]


def run_task(task: GridTask, progress: Any = None, progress_task: Any = None) -> list[dict]:
    """The rows of one :class:`GridTask` (one per method, in the figure's method order)."""
    fig, cfg, xi = task.fig, task.cfg, task.xi
    x = fig.values[xi]
    eps, n, q, d = _settings(fig, x, cfg)
    ss = np.random.SeedSequence([cfg.seed, int(fig.fig_id[3:5]), ord(fig.fig_id[-1]), xi])
    data_rng = np.random.default_rng(ss.spawn(1)[0])
    values = make_data(fig.problem, n, data_rng, q=q, d=d, sd_fraction=cfg.data_sd_fraction,
                       sum_mean=cfg.sum_mean, sum_sd=cfg.sum_sd)
    truth = true_total(fig.problem, values, d)
    rows = []
    for mi, name in enumerate(_figure_methods(fig, cfg)):
        if progress is not None:
            progress.update(progress_task, description=f"{fig.fig_id} {LABELS.get(name, name)} {fig.x_name}={x}")
        rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, int(fig.fig_id[3:5]),
                                                            ord(fig.fig_id[-1]), xi, mi, 1]))
        x_csv = name if x is None else _fmt_csv(x)
        row = measure_point(name, fig.problem, eps, n, values, truth, cfg, rng, q=q,
                            d=d if fig.problem == "histogram" else 0, factory=task.factory,
                            pinned=cfg.pinned.get((fig.fig_id, name, str(x_csv))))
        row.update(figure=fig.fig_id, x_name=fig.x_name, x=name if x is None else x)
        rows.append(row)
        if progress is not None:
            progress.advance(progress_task)
    return rows


def run_figure(fig: FigureSpec, cfg: SurveyConfig, *, factory: Factory | None = None,
               progress: Any = None, task: Any = None) -> list[dict]:
    """All rows of one figure (each x value x each method)."""
    rows = []
    for xi in range(len(fig.values)):
        rows += run_task(GridTask(cfg, fig, xi, factory), progress, task)
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=ROW_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _fmt_csv(r.get(k)) for k in ROW_FIELDS})


def _fmt_csv(v: Any) -> Any:
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return "" if v is None else v


def read_csv(path: Path) -> list[dict]:
    """Rows of a figure CSV with numbers parsed (empty cells -> nan)."""
    num = {"epsilon", "delta", "n", "q", "d", "rmse", "rmse_se", "rmse_theory", "reps", "analyzer_s",
           "timing_messages", "messages_per_user", "bits_per_user", "total_messages", "fake_messages",
           "eps_achieved", "delta_achieved", "eps_local", "point_s"}
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            row: dict[str, Any] = dict(r)
            for k in num:
                row[k] = float(r[k]) if r.get(k) not in (None, "") else float("nan")
            if row["x_name"] != "method":
                row["x"] = float(row["x"])
            out.append(row)
    return out


#: (CSV column, axis label, log scale, file suffix): one PNG per panel, figXX.png is the RMSE
_METRICS = [("rmse", "RMSE of the estimated total", True, ""),
            ("analyzer_s", "analyzer time (s)", True, "_time"),
            ("messages_per_user", "messages per user", True, "_messages"),
            ("bits_per_user", "bits per user", True, "_bits")]


def figure_files(fig_id: str) -> list[str]:
    """The PNG files of one figure, one per panel (RMSE, analyzer time, messages/user, bits/user)."""
    return [f"{fig_id}{suffix}.png" for _, _, _, suffix in _METRICS]


def plot_figure(fig: FigureSpec, rows: list[dict], path: Path) -> bool:
    """One PNG per panel: ``path`` (RMSE, with +-2 standard-error bars or bands) and its siblings
    ``*_time``, ``*_messages``, ``*_bits`` (:func:`figure_files`); False if matplotlib is absent."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report_html import band, save_figure

    methods = list(dict.fromkeys(r["method"] for r in rows))
    for key, ylabel, logy, suffix in _METRICS:
        fig_, ax = plt.subplots(figsize=(6.4, 4.0))
        if fig.x_name == "method":
            labels, vals, errs = [], [], []
            for m in methods:
                v = [r for r in rows if r["method"] == m and not _isnan(r[key])]
                labels.append(LABELS.get(m, m))
                vals.append(v[0][key] if v else 0.0)
                se = v[0].get("rmse_se", float("nan")) if (v and key == "rmse") else float("nan")
                errs.append(2 * se if isinstance(se, float) and not math.isnan(se) else 0.0)
            colors = ["tab:gray" if m.startswith(("ldp_", "cdp_")) else "tab:blue" for m in methods]
            ax.bar(range(len(labels)), vals, color=colors,
                   yerr=errs if key == "rmse" else None, capsize=3 if key == "rmse" else 0)
            ax.set_xticks(range(len(labels)))
            ax.set_xticklabels(labels, rotation=40, ha="right", fontsize=10)
        else:
            for m in methods:
                pts = sorted((float(r["x"]), r[key], r.get("rmse_se", float("nan")) if key == "rmse" else None)
                             for r in rows if r["method"] == m and not _isnan(r[key]))
                if not pts:
                    continue
                style = "--" if m.startswith(("ldp_", "cdp_")) else "-"
                band(ax, [p[0] for p in pts], [p[1] for p in pts],
                     [p[2] for p in pts] if key == "rmse" else None, log=logy,
                     linestyle=style, marker="o", ms=4, label=LABELS.get(m, m))
            if fig.x_name in ("n", "d"):
                ax.set_xscale("log")
            ax.set_xlabel({"epsilon": "central epsilon eps_c"}.get(fig.x_name, fig.x_name), fontsize=11)
            ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        if logy and any(r[key] > 0 for r in rows if not _isnan(r[key])):
            ax.set_yscale("log")
        ax.set_ylabel(ylabel, fontsize=11)
        ax.tick_params(labelsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_title(f"{fig.title}: {ylabel}", fontsize=10)
        save_figure(fig_, path.with_name(f"{path.stem}{suffix}.png"), dpi=100)
        plt.close(fig_)
    return True


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


# --------------------------------------------------------------------------------------- report
_COLORS = {"agree": "#c8f7c5", "partly": "#fff3b0", "disagree": "#f7c5c5", "n/a": "#e0e0e0"}

_SWEPT = {"epsilon": "the central privacy target eps_c", "n": "the number of users n",
          "q": "the fraction q of users holding a 1", "d": "the domain size d", "method": "the method"}


def _how_to_read(fig: FigureSpec, rows: list[dict]) -> str:
    reps = [int(r["reps"]) for r in rows if not _isnan(r["reps"]) and r["reps"] > 0]
    rep_txt = f"{min(reps)}-{max(reps)}" if reps and min(reps) != max(reps) else (str(reps[0]) if reps else "no")
    what = {"counting": "the number of users holding a 1", "histogram": "the d per-value counts (RMSE over all "
            "values)", "sum": "the sum of the users' values in [0, 1]"}.get(fig.problem, "the estimated total")
    common = (f"The first panel is the root mean squared error of the estimate of {what}, from {rep_txt} "
              "independent releases per point; <b>the error bars (bar charts) or shaded bands (line plots) are "
              "+-2 standard errors of that RMSE estimate</b> (delta method: se(RMSE) = sd(squared errors) / "
              "(2 RMSE sqrt(R))), i.e. Monte Carlo noise, not the spread of single releases. The other panels "
              "are the analyzer's compute time (measured on a real batch, extrapolated to n), the messages each "
              "user sends and the bits each user sends. Every axis is logarithmic; lower is better on all four. "
              "All methods meet the same central target (eps_c, delta); the privacy statement each one actually "
              "achieves is listed below the figure.")
    if fig.x_name == "method":
        return (f"One setting, one bar per method (blue: shuffle protocols, grey: the local-model and central-"
                f"model baselines). {common}")
    return (f"Each line is a method, plotted against {_SWEPT.get(fig.x_name, fig.x_name)} (solid: shuffle protocols, dashed: "
            f"the local-model and central-model baselines); a missing point means the method was skipped there "
            f"(reasons under the figure). {common}")


def _fmt_pair(eps: float, delta: float) -> str:
    if _isnan(eps):
        return "not recorded"
    return f"({eps:.4g}, {delta:.3g})" if not _isnan(delta) else f"eps = {eps:.4g}"


def _privacy_rows(fig: FigureSpec, rows: list[dict]) -> list[tuple[str, str]]:
    """Per series: the privacy statement its protocol reports (``privacy(n)``), as recorded in the CSV."""
    out = []
    for m in dict.fromkeys(r["method"] for r in rows):
        mr = [r for r in rows if r["method"] == m and r["status"] != "skipped"]
        if not mr:
            out.append((LABELS.get(m, m), "skipped at every point (no protocol built)"))
            continue
        model = mr[0].get("model") or "?"
        kind = {"shuffle": "shuffle model: the shuffled messages of all n users are (eps, delta)-DP",
                "local": "local model: each user's report is (eps, delta)-DP on its own",
                "central": "central model: the curator's release is (eps, delta)-DP"}.get(model, f"{model} model")
        if fig.x_name == "method":
            r = mr[0]
            pts = f"{_fmt_pair(r['eps_achieved'], r['delta_achieved'])} at n = {r['n']:.3g}"
        else:
            pts = "; ".join(f"{fig.x_name}={r['x']:g}: {_fmt_pair(r['eps_achieved'], r['delta_achieved'])}"
                            for r in mr)
        loc = [r["eps_local"] for r in mr if not _isnan(r.get("eps_local", float("nan")))]
        tail = f"; local randomizer eps_0 = {min(loc):.3g}" + (f"..{max(loc):.3g}" if max(loc) != min(loc) else "") \
            if (loc and model == "shuffle") else ""
        out.append((LABELS.get(m, m), f"{kind}, (eps, delta) = {pts}{tail}"))
    return out


def write_report(cfg: SurveyConfig, all_rows: dict[str, list[dict]], verdicts: list, elapsed: dict[str, float],
                 total_s: float, pngs: dict[str, bool], note: str = "") -> Path:
    """``index.html`` in ``cfg.outdir``: each figure with how to read it, the survey's claims and our verdicts."""
    from .report_html import SOURCES, figure, write_page

    h = [f"<p>This page re-runs the experiments of {esc(SOURCES['survey'])} with this library's protocols. "
         "For each figure it measures, for every shuffle protocol the survey compared and for the local-model "
         "(LDP) and central-model (CDP) baselines, the error, the analyzer's compute time and the communication, "
         f"all at the same central target (eps_c, delta = {cfg.delta:g}). The survey's qualitative claims are "
         "then checked against these numbers.</p>",
         f"<p>Run: mode <b>{esc(cfg.mode)}</b>, random seed {cfg.seed}, RMSE from up to {cfg.reps} releases per "
         f"point (exact simulation of the analyzer's statistic), analyzer timed on real batches of at most "
         f"{cfg.timing_max_messages:,} messages and extrapolated to n with a fixed + per-message fit. "
         f"Total run time {total_s:.1f} s. Verdicts are computed from the data by "
         "<code>shuffledp.experiments.survey_claims</code> (thresholds listed there and in docs/survey.md); "
         "nothing is hard-coded.</p>"]
    if note:
        h.append(f"<p class='note'>{note}</p>")
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    h.append("<h2>Summary of the claims</h2><p>" + ", ".join(f"{k}: {c}" for k, c in sorted(counts.items()))
             + " (agree: the claim holds on every check; partly: on some; disagree: on none; n/a: not "
               "measurable here).</p>")
    h.append("<div class='wide'><table><tr><th>figure</th><th>survey claim</th><th>our run</th><th>evidence</th></tr>")
    for v in verdicts:
        h.append(f"<tr><td><a href='#{esc(v.figure)}'>{esc(v.figure)}</a></td><td>{esc(v.claim)}</td>"
                 f"<td style='background:{_COLORS.get(v.status, '#fff')}'>{esc(v.status)}</td>"
                 f"<td>{esc(v.evidence)}</td></tr>")
    h.append("</table></div>")
    for fig in cfg.figures:
        rows = all_rows.get(fig.fig_id, [])
        h.append(f"<h2 id='{esc(fig.fig_id)}'>{esc(fig.title)}</h2>")
        h.append(f"<p>Time for this figure: {elapsed.get(fig.fig_id, float('nan')):.1f} s. "
                 f"Data: <a href='{esc(fig.fig_id)}.csv'>{esc(fig.fig_id)}.csv</a></p>")
        if pngs.get(fig.fig_id):
            h.append(figure(cfg.outdir, figure_files(fig.fig_id), fig.title, _how_to_read(fig, rows),
                            privacy=_privacy_rows(fig, rows)))
        else:
            h.append("<p>(no PNG: matplotlib is not installed)</p>")
        h.append("<h3>The survey's claims about this figure</h3><div class='wide'><table><tr><th>survey claim</th>"
                 "<th>our run</th><th>evidence</th></tr>")
        for v in verdicts:
            if v.figure == fig.fig_id:
                zh = f"<br><small lang='zh'>{esc(v.quote)}</small>" if v.quote else ""
                h.append(f"<tr><td>{esc(v.claim)}{zh}</td><td style='background:{_COLORS.get(v.status, '#fff')}'>"
                         f"{esc(v.status)}</td><td>{esc(v.evidence)}</td></tr>")
        h.append("</table></div>")
        h.append(_numbers_table(fig, rows))
        skipped = [r for r in rows if r["status"] != "ok"]
        if skipped:
            h.append("<details><summary>" + f"{len(skipped)} skipped or partial points</summary><ul>")
            for r in skipped:
                h.append(f"<li>{esc(str(r['label']))} at {esc(fig.x_name)}={esc(str(r['x']))}: "
                         f"{esc(r['status'])}: {esc(str(r['reason']))}</li>")
            h.append("</ul></details>")
    return write_page(cfg.outdir / "index.html", "Shuffle-model survey experiments (Figs. 7-15), re-run", h)


def _numbers_table(fig: FigureSpec, rows: list[dict]) -> str:
    """RMSE +- se / analyzer time / messages per user of every method at every x, as an HTML table."""
    xs = list(dict.fromkeys(r["x"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    if fig.x_name == "method":
        xs = [None]
    out = ["<details><summary>numbers (RMSE ± standard error / analyzer s / messages per user)</summary>"
           "<div class='wide'><table><tr><th>method</th>"]
    out += [f"<th>{esc(fig.x_name)}={esc(str(x))}</th>" for x in xs if x is not None] or ["<th>value</th>"]
    out.append("</tr>")
    for m in methods:
        out.append(f"<tr><td>{esc(LABELS.get(m, m))}</td>")
        for x in xs:
            r = next((r for r in rows if r["method"] == m and (x is None or r["x"] == x)), None)
            if r is None or r["status"] == "skipped":
                out.append("<td>skipped</td>")
                continue
            rm = "-" if _isnan(r["rmse"]) else f"{r['rmse']:.3g}" + (
                "" if _isnan(r.get("rmse_se", float("nan"))) else f" ± {r['rmse_se']:.2g}")
            cell = " / ".join([rm] + ["-" if _isnan(r[k]) else f"{r[k]:.3g}" for k in ("analyzer_s",
                                                                                     "messages_per_user")])
            out.append(f"<td class='num'>{esc(cell)}</td>")
        out.append("</tr>")
    out.append("</table></div></details>")
    return "".join(out)


def rebuild_report(outdir: Path) -> Path:
    """Re-render ``outdir/index.html`` and the PNGs from the CSVs and ``run.json`` of an earlier run,
    without measuring anything (the claims are re-evaluated from the CSVs; ``claims.csv`` is left as is)."""
    from .survey_claims import evaluate_claims

    outdir = Path(outdir)
    run = json.loads((outdir / "run.json").read_text(encoding="utf-8"))
    c = run["config"]
    cfg = SurveyConfig.full(outdir) if c.get("mode") == "full" else SurveyConfig.quick(outdir)
    for k in ("seed", "delta", "reps", "timing_max_messages"):
        if k in c:
            setattr(cfg, k, c[k])
    cfg.figures = [FigureSpec(**{k: f[k] for k in ("fig_id", "problem", "x_name", "values", "title", "extra")})
                   for f in c["figures"]]
    cfg.figures = [f for f in cfg.figures if (outdir / f"{f.fig_id}.csv").exists()]
    all_rows = {f.fig_id: read_csv(outdir / f"{f.fig_id}.csv") for f in cfg.figures}
    pngs = {f.fig_id: plot_figure(f, all_rows[f.fig_id], outdir / f"{f.fig_id}.png") for f in cfg.figures}
    verdicts = evaluate_claims(all_rows)
    note = ""
    if any(not _isnan(r["rmse"]) and _isnan(r["rmse_se"]) for rows in all_rows.values() for r in rows):
        note = ("Some points of this run have no recorded standard error (rmse_se) and are drawn without an "
                "error bar (rerun with --full to record it).")
    return write_report(cfg, all_rows, verdicts, run.get("figure_s", {}), float(run.get("total_s", float("nan"))),
                        pngs, note)


def _timed_task(task: GridTask) -> tuple[list[dict], float]:
    """:func:`run_task` and its wall time (the function an engine maps over the grid)."""
    t0 = time.perf_counter()
    rows = run_task(task)
    return rows, time.perf_counter() - t0


def run_survey(cfg: SurveyConfig, console: Any = None, *, factory: Factory | None = None,
               progress_bar: bool = True, engine: Any = None) -> Path:
    """Run every figure of ``cfg``; write ``figXX.csv``/``.png``, ``claims.csv``, ``run.json`` and
    ``index.html`` into ``cfg.outdir``; return the report's path.

    ``factory(name, epsilon=, delta=, n=, **params)`` builds a protocol (default: the registry).

    ``engine``: a :class:`shuffledp.engines.Engine` other than the local one (e.g. Dask) runs the
    grid's :class:`GridTask` s on its workers, all at once (``factory`` must then be picklable);
    the rows are gathered and written in the same order. Each task carries its own seeds, so
    every column but the timings (``analyzer_s``, ``analyzer_how``, ``point_s``) is the local
    run's whenever each point takes as many repetitions: always with :attr:`SurveyConfig.pinned`,
    otherwise unless the wall-clock budget stops a point at a different count. A figure's time is
    then the sum of its tasks' times (worker time, not wall time).
    """
    if engine is not None and getattr(engine, "name", "local") != "local":
        return _run_survey_on(engine, cfg, console, factory=factory, progress_bar=progress_bar)
    cfg.outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    all_rows: dict[str, list[dict]] = {}
    elapsed: dict[str, float] = {}
    pngs: dict[str, bool] = {}
    total_points = sum(len(f.values) * len(_figure_methods(f, cfg)) for f in cfg.figures)
    progress = task = None
    if progress_bar:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description:<48}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=False)
        progress.start()
        task = progress.add_task("survey", total=total_points)
    try:
        for fig in cfg.figures:
            tf = time.perf_counter()
            rows = run_figure(fig, cfg, factory=factory, progress=progress, task=task)
            all_rows[fig.fig_id] = rows
            write_csv(cfg.outdir / f"{fig.fig_id}.csv", rows)
            pngs[fig.fig_id] = plot_figure(fig, rows, cfg.outdir / f"{fig.fig_id}.png")
            elapsed[fig.fig_id] = time.perf_counter() - tf
    finally:
        if progress is not None:
            progress.stop()
    return _finish(cfg, all_rows, elapsed, pngs, total_points, t0)


def _run_survey_on(engine: Any, cfg: SurveyConfig, console: Any, *, factory: Factory | None,
                   progress_bar: bool) -> Path:
    """:func:`run_survey` with the grid's tasks mapped over ``engine``'s workers."""
    cfg.outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tasks = grid_tasks(cfg, factory)
    total_points = sum(len(f.values) * len(_figure_methods(f, cfg)) for f in cfg.figures)
    status = None
    if progress_bar:
        from rich.console import Console

        status = (console or Console()).status(f"survey: {len(tasks)} tasks ({total_points} points) on "
                                               f"{engine.name}, {engine.workers} workers")
        status.start()
    # the biggest n first, so the longest tasks do not start last; gathered back in grid order
    order = sorted(range(len(tasks)), key=lambda i: -_settings(tasks[i].fig, tasks[i].fig.values[tasks[i].xi], cfg)[1])
    try:
        done = engine.map(_timed_task, [tasks[i] for i in order])
        results: list[Any] = [None] * len(tasks)
        for i, r in zip(order, done):
            results[i] = r
    finally:
        if status is not None:
            status.stop()
    all_rows: dict[str, list[dict]] = {f.fig_id: [] for f in cfg.figures}
    elapsed: dict[str, float] = {f.fig_id: 0.0 for f in cfg.figures}
    for task, (rows, seconds) in zip(tasks, results):
        all_rows[task.fig.fig_id] += rows
        elapsed[task.fig.fig_id] += seconds
    pngs = {}
    for fig in cfg.figures:
        write_csv(cfg.outdir / f"{fig.fig_id}.csv", all_rows[fig.fig_id])
        pngs[fig.fig_id] = plot_figure(fig, all_rows[fig.fig_id], cfg.outdir / f"{fig.fig_id}.png")
    return _finish(cfg, all_rows, elapsed, pngs, total_points, t0, engine=f"{engine.name} ({engine.workers} workers)")


def _finish(cfg: SurveyConfig, all_rows: dict[str, list[dict]], elapsed: dict[str, float], pngs: dict[str, bool],
            total_points: int, t0: float, engine: str = "local") -> Path:
    """Claims, ``run.json`` and the report of a finished grid."""
    from .survey_claims import claims_markdown, evaluate_claims, write_claims_csv

    verdicts = evaluate_claims(all_rows)
    write_claims_csv(cfg.outdir / "claims.csv", verdicts)
    (cfg.outdir / "claims.md").write_text(claims_markdown(verdicts), encoding="utf-8")
    total = time.perf_counter() - t0
    skipped = sorted({(r["method"], r["reason"].split(":")[0]) for rows in all_rows.values() for r in rows
                      if r["status"] == "skipped"})
    (cfg.outdir / "run.json").write_text(json.dumps({
        "config": cfg.to_json(), "engine": engine, "total_s": total, "figure_s": elapsed,
        "points": total_points, "skipped_methods": [list(s) for s in skipped],
        "verdicts": {s: sum(v.status == s for v in verdicts) for s in ("agree", "partly", "disagree", "n/a")},
    }, indent=1, default=str), encoding="utf-8")
    return write_report(cfg, all_rows, verdicts, elapsed, total, pngs)
