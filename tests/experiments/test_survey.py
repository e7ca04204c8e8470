"""The survey reproduction (Figs. 7-15): end to end on toy protocols, skipping, claim logic.

The toy protocols below follow the :class:`shuffledp.shuffle.base.Protocol` contract, so these
tests do not depend on which real protocols are merged; the real ones are exercised by the
committed ``results/survey`` run.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from shuffledp.core.errors import OutOfDomainError
from shuffledp.core.estimate import Estimate
from shuffledp.core.privacy import PrivacyStatement
from shuffledp.experiments import survey_claims as sc
from shuffledp.experiments.survey import (FigureSpec, SkipPoint, SurveyConfig, build_protocol, make_data,
                                          measure_point, read_csv, run_survey, true_total)
from shuffledp.shuffle.base import Protocol


# ----------------------------------------------------------------------------- toy protocols
class _ToyBase(Protocol):
    """Binary randomized response with flip probability ``f`` (a shuffle counter)."""

    name = "toy"
    model = "shuffle"
    input_kind = "bit"
    scale = 1.0

    def __init__(self, epsilon: float, delta: float, n: int, *, ones_fraction: float = 0.5,
                 **real_params: object) -> None:
        """``real_params``: parameters the survey passes to the real protocol the toy stands in for
        (e.g. Cnt_RR's ``calibration``); recorded, not used."""
        super().__init__(epsilon, delta, n)
        self.flip = min(0.9, self.scale / (1.0 + 20.0 * epsilon))
        self.ones_fraction = ones_fraction
        self.real_params = real_params

    def encode(self, values, rng):
        x = np.asarray(values).astype(np.int8)
        flip = rng.random(x.size) < self.flip
        return {"y": np.where(flip, rng.integers(0, 2, x.size), x).astype(np.int8)}

    def aggregate(self, messages):
        return np.array([int(messages["y"].sum())]) if messages else np.zeros(1, dtype=np.int64)

    def estimate(self, statistic, n):
        c = (float(statistic[0]) - n * self.flip / 2) / (1 - self.flip)
        return Estimate(np.array([c]), math.sqrt(self.variance(n)), n, self.privacy(n), kind="count")

    def variance(self, n=None):
        n = self.n if n is None else n
        f = self.flip
        return n * (f / 2) * (1 - f / 2) / (1 - f) ** 2

    def _privacy(self, n):
        return PrivacyStatement(self.epsilon, self.delta, "shuffle")

    @property
    def messages_per_user(self):
        return 1.0

    @property
    def bits_per_message(self):
        return 1.0


class ToyRR(_ToyBase):
    def summarize(self, values):
        return np.bincount(np.asarray(values, dtype=np.int64), minlength=2)

    def simulate_statistic(self, data, rng):
        n0, n1 = (int(v) for v in data)
        return np.array([rng.binomial(n1, 1 - self.flip / 2) + rng.binomial(n0, self.flip / 2)])


class ToyAccurate(ToyRR):
    scale = 0.05


class ToyLocal(ToyRR):
    model = "local"
    scale = 10.0


class ToyNoSim(_ToyBase):
    """No exact simulation: the survey must fall back to full pipeline runs."""


class ToyRefuses(ToyRR):
    def __init__(self, epsilon, delta, n, **kw):
        if epsilon < 0.5:
            raise OutOfDomainError(f"toy needs epsilon >= 0.5, got {epsilon}", parameter="epsilon")
        super().__init__(epsilon, delta, n, **kw)


class ToyHuge(_ToyBase):
    """Too many messages per user for the timing cap and no simulation: fully skipped."""

    @property
    def messages_per_user(self):
        return 1e9


class ToyCentral(ToyRR):
    """Central Laplace counter: the statistic already carries the curator's noise."""

    model = "central"

    def encode(self, values, rng):
        return {"x": np.asarray(values).astype(np.int8)}

    def aggregate(self, messages):
        return np.array([float(messages["x"].sum())]) if messages else np.zeros(1)

    def estimate(self, statistic, n):
        return Estimate(np.array([float(statistic[0])]), math.sqrt(2) / self.epsilon, n, self.privacy(n),
                        kind="count")

    def simulate_statistic(self, data, rng):
        return np.array([float(data[1]) + rng.laplace(0, 1 / self.epsilon)])


CLASSES = {"cnt_rr": ToyRR, "cnt_sgm": ToyAccurate, "cnt_2m": ToyNoSim, "cnt_bn": ToyRefuses,
           "cnt_huge": ToyHuge, "ldp_rr": ToyLocal, "cdp_laplace_count": ToyCentral}


def factory(name, **kw):
    return CLASSES[name](**kw)


def tiny_config(out: Path) -> SurveyConfig:
    cfg = SurveyConfig(mode="tiny", outdir=out, base_n=20_000, reps=40, min_reps=40, timing_max_messages=5_000,
                       pipeline_max_messages=50_000, pipeline_reps=3, timing_repeats=1, point_budget_s=30.0)
    cfg.methods = {"counting": ["cnt_rr", "cnt_2m", "cnt_sgm", "cnt_bn", "cnt_huge"]}
    cfg.figures = [FigureSpec("fig07a", "counting", "method", [None], "Fig. 7(a) tiny"),
                   FigureSpec("fig08", "counting", "epsilon", [0.2, 0.9], "Fig. 8 tiny"),
                   FigureSpec("fig09", "counting", "n", [2_000, 20_000], "Fig. 9 tiny")]
    return cfg


# ------------------------------------------------------------------------------------ e2e
def test_tiny_survey_end_to_end(tmp_path):
    cfg = tiny_config(tmp_path / "survey")
    report = run_survey(cfg, factory=factory, progress_bar=False)
    assert report == cfg.outdir / "index.html"
    for fig in ("fig07a", "fig08", "fig09"):
        assert (cfg.outdir / f"{fig}.csv").stat().st_size > 0
        png = (cfg.outdir / f"{fig}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    page = report.read_text(encoding="utf-8")
    assert "Cnt_SGM has the smallest RMSE among shuffle counting protocols" in page
    assert "fig07a.png" in page and "skipped or partial points" in page and "numbers (RMSE" in page
    rows = {r["method"]: r for r in read_csv(cfg.outdir / "fig07a.csv")}
    # exact simulation path: RMSE of an unbiased estimator matches sqrt(variance) (chi-square band)
    r = rows["cnt_rr"]
    assert r["status"] == "ok" and r["rmse_how"] == "exact statistic simulation" and r["reps"] == 40
    ratio = r["rmse"] ** 2 / r["rmse_theory"] ** 2
    lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], 40) / 40
    assert lo < ratio < hi
    # timing measured on a bounded batch, scaled to n; communication measured
    assert r["timing_messages"] == 5_000 and "x4 messages at n" in r["analyzer_how"] and r["analyzer_s"] > 0
    assert r["messages_per_user"] == 1.0 and r["total_messages"] == 20_000
    # no exact simulation: full pipeline fallback
    assert rows["cnt_2m"]["rmse_how"] == "full pipeline runs" and rows["cnt_2m"]["reps"] == 3
    # baselines measured in their own models
    assert rows["ldp_rr"]["model"] == "local" and rows["cdp_laplace_count"]["model"] == "central"
    assert rows["cdp_laplace_count"]["rmse"] < rows["cnt_sgm"]["rmse"] < rows["cnt_rr"]["rmse"] < rows["ldp_rr"]["rmse"]
    # skipping with reasons
    huge = rows["cnt_huge"]
    assert huge["status"] == "skipped"
    assert "exceed the timing batch cap" in huge["reason"] and "no exact simulation" in huge["reason"]
    eps_rows = {(r["method"], r["x"]): r for r in read_csv(cfg.outdir / "fig08.csv")}
    assert eps_rows[("cnt_bn", 0.2)]["status"] == "skipped"
    assert "refuses eps_c=0.2" in eps_rows[("cnt_bn", 0.2)]["reason"]
    assert eps_rows[("cnt_bn", 0.9)]["status"] == "ok"
    # claims: computed from the data and written out
    with open(cfg.outdir / "claims.csv", newline="", encoding="utf-8") as fh:
        claims = {c["claim_id"]: c for c in csv.DictReader(fh)}
    assert claims["7a-sgm"]["verdict"] == "agree"  # ToyAccurate is the most accurate shuffle toy
    assert claims["8-err"]["verdict"] == "agree"  # every toy's flip falls with eps
    assert claims["9-ldp"]["verdict"] == "agree"  # the local toy's count error grows like sqrt(n)
    assert (cfg.outdir / "run.json").exists()
    assert "| fig07a | Cnt_SGM has the smallest RMSE" in (cfg.outdir / "claims.md").read_text(encoding="utf-8")


def test_verdicts_from_csv_equal_verdicts_from_rows(tmp_path):
    cfg = tiny_config(tmp_path / "s")
    cfg.figures = cfg.figures[:1]
    run_survey(cfg, factory=factory, progress_bar=False)
    rows = read_csv(cfg.outdir / "fig07a.csv")
    again = {v.claim_id: v.status for v in sc.evaluate_claims({"fig07a": rows})}
    with open(cfg.outdir / "claims.csv", newline="", encoding="utf-8") as fh:
        first = {c["claim_id"]: c["verdict"] for c in csv.DictReader(fh)}
    assert again == first


# ------------------------------------------------------------------------------- skipping
def test_build_protocol_skips_unknown_names_and_parameters():
    with pytest.raises(SkipPoint, match="not available"):
        build_protocol("no_such_protocol", 0.5, 1e-6, 1000, {})
    proto = build_protocol("cnt_rr", 0.5, 1e-6, 1000, {"ones_fraction": 0.3}, factory=factory)
    assert proto.ones_fraction == 0.3
    with pytest.raises(SkipPoint, match="refuses"):
        build_protocol("cnt_bn", 0.1, 1e-6, 1000, {}, factory=factory)
    # a parameter the registry's protocol does not take is named, never silently dropped
    with pytest.raises(SkipPoint, match="has no parameter 'd'"):
        build_protocol("cnt_rr", 0.5, 1e-6, 1000, {"d": 7})


def test_survey_params_are_parameters_each_protocol_takes():
    from shuffledp.shuffle.registry import protocol_parameters

    for cfg in (SurveyConfig.quick(Path("q")), SurveyConfig.full(Path("f"))):
        for fig in cfg.figures:
            for name in [*cfg.methods[fig.problem], *fig.extra, *cfg.baselines[fig.problem]]:
                alts = [{}] + cfg.fallback_params.get(name, [])
                for alt in alts:
                    params = {**cfg.params_for(name, fig.problem, cfg.base_d, cfg.base_n, cfg.base_q), **alt}
                    assert set(params) <= set(protocol_parameters(name)), (name, params)


def test_rmse_comes_from_the_pipeline(monkeypatch, rng):
    """Both RMSE paths (exact simulation and full runs) take their releases from the pipeline."""
    import shuffledp.experiments.survey as survey_mod
    from shuffledp import pipeline

    assert not hasattr(survey_mod, "_rmse_exact") and not hasattr(survey_mod, "_rmse_pipeline")
    assert not hasattr(survey_mod, "_memoize_privacy")
    calls = {"simulations": 0, "run": 0}
    real_sims, real_run = pipeline.simulations, pipeline.run

    def sims(*a, **k):
        calls["simulations"] += 1
        return real_sims(*a, **k)

    def run(*a, **k):
        calls["run"] += 1
        return real_run(*a, **k)

    monkeypatch.setattr(pipeline, "simulations", sims)
    monkeypatch.setattr(pipeline, "run", run)
    cfg = SurveyConfig(reps=7, min_reps=7, pipeline_reps=3, timing_max_messages=500, timing_repeats=1)
    x = make_data("counting", 1000, rng)
    truth = true_total("counting", x, 0)
    row = measure_point("cnt_rr", "counting", 0.5, 1000, x, truth, cfg, rng, factory=factory)
    assert row["rmse_how"] == "exact statistic simulation" and row["reps"] == 7
    assert calls == {"simulations": 1, "run": 0}
    row = measure_point("cnt_2m", "counting", 0.5, 1000, x, truth, cfg, rng, factory=factory)
    assert row["rmse_how"] == "full pipeline runs" and row["reps"] == 3
    assert calls == {"simulations": 2, "run": 3}


def test_measure_point_never_raises_on_protocol_failure(rng):
    class Broken(ToyRR):
        def simulate_statistic(self, data, rng):
            raise RuntimeError("boom")

    cfg = SurveyConfig(reps=5, min_reps=5, timing_max_messages=1000, timing_repeats=1)
    x = make_data("counting", 1000, rng)
    row = measure_point("broken", "counting", 0.5, 1000, x, true_total("counting", x, 0), cfg, rng,
                        factory=lambda name, **kw: Broken(**kw))
    assert row["status"] == "partial" and "RMSE failed: RuntimeError: boom" in row["reason"]
    assert row["analyzer_s"] > 0


def test_make_data_shapes_and_ranges(rng):
    b = make_data("counting", 10_000, rng, q=0.3)
    assert b.dtype == np.int8 and set(np.unique(b)) <= {0, 1} and abs(b.mean() - 0.3) < 0.02
    h = make_data("histogram", 10_000, rng, d=50)
    assert h.min() >= 0 and h.max() <= 49 and abs(h.mean() - 24.5) < 0.5
    assert true_total("histogram", h, 50).sum() == 10_000
    s = make_data("sum", 10_000, rng)
    assert s.min() >= 0 and s.max() <= 1 and abs(s.mean() - 0.5) < 0.02


def test_presets_cover_every_figure():
    for cfg in (SurveyConfig.quick(Path("q")), SurveyConfig.full(Path("f"))):
        ids = [f.fig_id for f in cfg.figures]
        assert ids == ["fig07a", "fig07b", "fig07c", "fig08", "fig09", "fig10", "fig11", "fig12", "fig13", "fig14",
                       "fig15"]
    full = SurveyConfig.full(Path("f"))
    assert max(next(f for f in full.figures if f.fig_id == "fig09").values) == 10**7
    assert full.delta == 1e-6


# ------------------------------------------------------------------------- claim logic
def _row(method, x, rmse=math.nan, t=math.nan, mpu=math.nan, bits=math.nan, total=math.nan):
    return {"method": method, "x": x, "status": "ok", "rmse": rmse, "analyzer_s": t, "messages_per_user": mpu,
            "bits_per_user": bits, "total_messages": total}


def _fig7a(sgm_rmse: float) -> list[dict]:
    return [_row("ldp_rr", "ldp_rr", 1000, 0.001, 1, 1), _row("cdp_laplace_count", "cdp_laplace_count", 1.6, 0.001, 1, 1),
            _row("cnt_rr", "cnt_rr", 24, 0.01, 1, 1), _row("cnt_2m", "cnt_2m", 30, 0.002, 1.5, 1.5),
            _row("cnt_sgm", "cnt_sgm", sgm_rmse, 0.05, 5, 100), _row("cnt_bn", "cnt_bn", 42, 0.003, 1.5, 1.5)]


def _verdicts(rows_by_fig):
    return {v.claim_id: v for v in sc.evaluate_claims(rows_by_fig)}


def test_claim_sgm_smallest_agree_and_disagree():
    assert _verdicts({"fig07a": _fig7a(2.0)})["7a-sgm"].status == "agree"
    v = _verdicts({"fig07a": _fig7a(50.0)})["7a-sgm"]
    assert v.status == "disagree" and "smallest is cnt_rr 24" in v.evidence


def test_claim_between_ldp_and_cdp_partly_and_disagree():
    v = _verdicts({"fig07a": _fig7a(2.0)})["7a-between"]
    assert v.status == "agree" and len(v.checks) == 4
    v = _verdicts({"fig07a": _fig7a(1.0)})["7a-between"]  # below CDP: one of four fails
    assert v.status == "partly" and sum(c for _, c in v.checks) == 3
    rows = [_row("ldp_rr", "a", 1.0), _row("cdp_laplace_count", "a", 2.0), _row("cnt_rr", "a", 5.0)]
    assert _verdicts({"fig07a": rows})["7a-between"].status == "disagree"


def test_claim_cost_and_cnt2m():
    v = _verdicts({"fig07a": _fig7a(2.0)})
    assert v["7a-time"].status == "agree"
    # Cnt_RR sends one bit, as LDP does: not strictly more communication
    assert v["7a-comm"].status == "partly"
    # Cnt_2M: not the largest error (Cnt_BN is), not the most messages (Cnt_SGM), lowest time -> partly
    assert v["7a-2m"].status == "partly" and [c for _, c in v["7a-2m"].checks] == [False, False, True]


def test_claims_na_when_methods_missing():
    rows = [_row("cnt_rr", "cnt_rr", 24, 0.01, 1, 1)]
    v = _verdicts({"fig07a": rows})
    assert v["7a-sgm"].status == "n/a" and v["7a-between"].status == "n/a"
    assert "not measured" in v["7a-sgm"].evidence
    assert "fig08" not in {x.figure for x in sc.evaluate_claims({"fig07a": rows})}


def test_claim_error_falls_with_eps_and_cost_flat():
    good = [_row(m, e, rmse=s / e, t=0.01 * (1 + 0.1 * e), mpu=1.0) for m, s in (("cnt_rr", 20), ("cnt_2m", 30))
            for e in (0.1, 0.5, 0.9)]
    v = _verdicts({"fig08": good})
    assert v["8-err"].status == "agree" and v["8-cost"].status == "agree"
    bad = [_row(m, e, rmse=10 * e, t=0.01 * e ** 3, mpu=e) for m in ("cnt_rr", "cnt_2m") for e in (0.1, 0.5, 0.9)]
    v = _verdicts({"fig08": bad})
    assert v["8-err"].status == "disagree" and v["8-cost"].status == "disagree"


def test_claim_n_sweep():
    ns = (1e4, 1e5, 1e6, 1e7)
    rows = [_row("ldp_rr", n, rmse=math.sqrt(n)) for n in ns]
    rows += [_row("cnt_rr", n, rmse=25, t=1e-9 * n, total=n) for n in ns]
    rows += [_row("cnt_sgm", n, rmse=2, t=2e-9 * n, total=5 * n) for n in ns]
    rows += [_row("cnt_2m", n, rmse=30, t=1e-10 * n ** 0.9, total=1.5 * n) for n in ns]
    v = _verdicts({"fig09": rows})
    assert v["9-ldp"].status == "agree" and v["9-flat"].status == "agree" and v["9-cost"].status == "agree"
    assert v["9-sgm"].status == "agree" and v["9-2m"].status == "agree" and v["all-ldp-09"].status == "agree"
    rows2 = [dict(r, rmse=r["rmse"] * (r["x"] / 1e4) if r["method"] == "cnt_sgm" else r["rmse"]) for r in rows]
    v = _verdicts({"fig09": rows2})
    assert v["9-flat"].status == "partly" and v["9-sgm"].status == "partly"


def test_claim_histogram_close_to_cdp_and_marked():
    rows = [_row("ldp_krr", "x", 3000, 0.001, 1, 7), _row("cdp_laplace_hist", "x", 3, 0.001, 1, 7),
            _row("hist_kr", "x", 16, 0.01, 1, 7), _row("hist_mm", "x", 60, 0.5, 100, 700),
            _row("slh", "x", 40, 0.01, 1, 11), _row("murs", "x", 16.5, 0.02, 1.01, 7)]
    v = _verdicts({"fig07b": rows})
    assert v["7b-kr"].status == "agree" and v["7b-cdp"].status == "agree" and v["7b-mm"].status == "agree"
    rows[2] = _row("hist_kr", "x", 2000, 0.01, 1, 7)
    v = _verdicts({"fig07b": rows})
    assert v["7b-kr"].status == "disagree" and v["7b-cdp"].status == "disagree"


def test_verdict_from_checks():
    assert sc.verdict_from_checks([]) == "n/a"
    assert sc.verdict_from_checks([("a", True), ("b", True)]) == "agree"
    assert sc.verdict_from_checks([("a", True), ("b", False)]) == "partly"
    assert sc.verdict_from_checks([("a", False)]) == "disagree"


def test_fallback_parameters_when_default_refuses(rng):
    class Strict(ToyRR):
        def __init__(self, epsilon, delta, n, *, mode="strict", **kw):
            if mode == "strict" and epsilon < 0.5:
                raise OutOfDomainError("strict mode needs epsilon >= 0.5", parameter="epsilon")
            super().__init__(epsilon, delta, n, **kw)
            self.mode = mode

    cfg = SurveyConfig(reps=5, min_reps=5, timing_max_messages=1000, timing_repeats=1)
    cfg.fallback_params = {"strict": [{"mode": "bogus_that_refuses"}, {"mode": "loose"}]}
    x = make_data("counting", 1000, rng)
    kw = dict(factory=lambda name, **k: (Strict(**k) if k.get("mode") != "bogus_that_refuses"
                                         else ToyRefuses(0.1, 1e-6, 1000)))
    row = measure_point("strict", "counting", 0.2, 1000, x, true_total("counting", x, 0), cfg, rng, **kw)
    assert row["status"] == "ok" and "mode=loose" in row["params"]
    assert "built with mode=loose because the default refused: refuses eps_c=0.2" in row["reason"]
    cfg.fallback_params = {"strict": [{"mode": "bogus_that_refuses"}]}
    row = measure_point("strict", "counting", 0.2, 1000, x, true_total("counting", x, 0), cfg, rng, **kw)
    assert row["status"] == "skipped" and "also refused with mode=bogus_that_refuses" in row["reason"]
    row = measure_point("strict", "counting", 0.9, 1000, x, true_total("counting", x, 0), cfg, rng, **kw)
    assert row["status"] == "ok" and row["reason"] == "" and "mode" not in row["params"]


def test_stopping_rule_after_budget():
    from shuffledp.experiments.survey import _precise_enough

    cfg = SurveyConfig(min_reps=10, target_rel_se=0.05)
    assert not _precise_enough([1.0, 1.0], cfg)  # never fewer than 3
    assert _precise_enough([1.0, 1.01, 0.99], cfg)  # averaged over many bins: precise
    assert not _precise_enough([0.1, 3.0, 0.5, 2.0], cfg)  # one squared error per rep: noisy
    assert _precise_enough([0.1, 3.0, 0.5, 2.0] * 3, cfg)  # min_reps reached


def test_analyzer_time_fit_separates_fixed_and_per_message_cost(rng, monkeypatch):
    import shuffledp.experiments.survey as survey_mod

    class Clock:  # deterministic clock: only the analyzer's work advances it
        t = 0.0

        def perf_counter(self):
            return self.t

    clock = Clock()
    monkeypatch.setattr(survey_mod, "time", clock)

    class Slow(ToyRR):
        def aggregate(self, messages):
            clock.t += 0.05 + 5e-6 * messages["y"].size  # fixed 50 ms + 5 us per message
            return super().aggregate(messages)

    cfg = SurveyConfig(reps=3, min_reps=3, timing_max_messages=8000, timing_repeats=2)
    x = make_data("counting", 100_000, rng)
    row = measure_point("slow", "counting", 0.5, 100_000, x, true_total("counting", x, 0), cfg, rng,
                        factory=lambda name, **kw: Slow(**kw))
    # truth: 0.05 + 5e-6 * 1e5 = 0.55 s; scaling the whole batch time linearly would give 1.125 s
    assert row["analyzer_s"] == pytest.approx(0.55, rel=1e-9), row["analyzer_how"]
    assert "fixed 0.05 s + 5e+03 ns/message" in row["analyzer_how"]
    assert "fitted on 2,000 and 8,000 messages" in row["analyzer_how"]


def test_rmse_orderings_allow_monte_carlo_ties_only():
    rows = _fig7a(1.55)  # below CDP's 1.6 ...
    for r in rows:
        r["rmse_se"] = 0.05  # ... but within 2 s.e.: a statistical tie
    assert _verdicts({"fig07a": rows})["7a-between"].status == "agree"
    for r in rows:
        r["rmse_se"] = 0.005  # now 1.55 is clearly below 1.6
    assert _verdicts({"fig07a": rows})["7a-between"].status == "partly"


def test_lowest_compute_allows_timer_ties_but_not_real_gaps():
    rows = _fig7a(2.0)
    rows[3] = _row("cnt_2m", "cnt_2m", 30, 0.0032, 1.5, 1.5)  # Cnt_BN 0.003: within x1.2, a tie
    assert [c for _, c in _verdicts({"fig07a": rows})["7a-2m"].checks][2] is True
    rows[3] = _row("cnt_2m", "cnt_2m", 30, 0.005, 1.5, 1.5)  # x1.67 slower: not the lowest
    assert [c for _, c in _verdicts({"fig07a": rows})["7a-2m"].checks][2] is False


def test_cli_is_registered_and_needs_exactly_one_mode():
    import typer
    from typer.testing import CliRunner

    from shuffledp.experiments import survey_cli

    app, exp = typer.Typer(), typer.Typer()
    app.add_typer(exp, name="experiment")
    survey_cli.register(app, exp)
    runner = CliRunner()
    assert "--quick" in runner.invoke(app, ["experiment", "survey", "--help"]).output
    for args in ([], ["--quick", "--full"]):
        res = runner.invoke(app, ["experiment", "survey", *args])
        assert res.exit_code == 2 and "exactly one of --quick or --full" in res.output


def test_cost_above_baselines_uses_the_measured_baseline_whichever_is_missing():
    # one baseline without a timing (e.g. a skipped point): the comparison uses the other one,
    # whether the missing one is LDP or CDP (max(nan, x) in Python depends on argument order)
    def fig(ldp_t, cdp_t):
        return [_row("ldp_rr", "ldp_rr", 1000, ldp_t, 1, 1), _row("cdp_laplace_count", "cdp_laplace_count", 1.6, cdp_t, 1, 1),
                _row("cnt_rr", "cnt_rr", 24, 0.01, 1, 1), _row("cnt_sgm", "cnt_sgm", 2, 0.0001, 5, 100)]

    for ldp_t, cdp_t in ((math.nan, 0.001), (0.001, math.nan)):
        v = _verdicts({"fig07a": fig(ldp_t, cdp_t)})["7a-time"]
        assert v.status == "partly", (ldp_t, cdp_t, v.evidence)
        assert [c for _, c in v.checks] == [True, False]
    v = _verdicts({"fig07a": fig(math.nan, math.nan)})["7a-time"]
    assert v.status == "n/a"
