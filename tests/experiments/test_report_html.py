"""The shared report style: standard errors, legends outside the data, the --report-only path, no
unexplained internal ids in the reports."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from shuffledp.experiments import report_html

ROOT = Path(__file__).resolve().parents[2]


def test_mse_and_se_match_the_delta_method():
    rng = np.random.default_rng(3)
    s = rng.chisquare(1, size=(400, 5))
    mse, se = report_html.mse_and_se(s)
    assert np.allclose(mse, s.mean(axis=0))
    assert np.allclose(se, s.std(axis=0, ddof=1) / math.sqrt(400))
    # coverage: the MSE of N(0, 1) errors is 1; +-3 s.e. covers it for (almost) every column
    errs = rng.normal(size=(200, 2000)) ** 2
    mse, se = report_html.mse_and_se(errs)
    assert np.mean(np.abs(mse - 1.0) <= 3 * se) > 0.99
    assert np.isnan(report_html.mse_and_se(np.ones((1, 3)))[1]).all()


def _fig(legend_kw):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    for k in range(6):
        ax.plot(np.arange(10), np.arange(10) * (k + 1), label=f"series {k}")
    ax.legend(**legend_kw)
    return fig, plt


def test_legend_overlap_is_detected_and_outside_placement_passes(tmp_path):
    fig, plt = _fig({"loc": "center"})
    assert report_html.legend_overlaps(fig)
    with pytest.warns(report_html.LegendOverlapWarning):
        report_html.save_figure(fig, tmp_path / "bad.png")
    plt.close(fig)
    fig, plt = _fig({"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)})
    assert report_html.legend_overlaps(fig) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", report_html.LegendOverlapWarning)
        report_html.save_figure(fig, tmp_path / "ok.png")
    plt.close(fig)
    assert report_html.png_size(tmp_path / "ok.png")[0] > 400  # the legend outside the axes is kept


def test_keyvalue_errors_keep_the_published_estimates_and_add_their_standard_errors():
    from shuffledp.experiments.keyvalue import TOPS, _errors

    rng = np.random.default_rng(11)
    R, d = 37, 60
    f = rng.uniform(0.01, 0.5, d)
    m = rng.uniform(-1, 1, d)
    f_hat = f + rng.normal(0, 0.05, (R, d))
    m_hat = np.clip(m + rng.normal(0, 0.2, (R, d)), -1, 1)
    order = np.argsort(-f)
    out = _errors(f_hat, m_hat, f, m, order)
    for N in TOPS:
        X = order[:N]
        # the three estimates are bit-for-bit the formulas the committed results were produced with
        assert out[N][:3] == (float(np.mean((f_hat[:, X] - f[X]) ** 2)), float(np.mean((m_hat[:, X] - m[X]) ** 2)),
                              float(np.mean(np.abs(f_hat[:, X] - f[X]) / f[X])))
        per_run = ((f_hat[:, X] - f[X]) ** 2).mean(axis=1)
        assert out[N][3] == pytest.approx(per_run.std(ddof=1) / math.sqrt(R))
        assert all(v > 0 for v in out[N][3:])


@pytest.mark.filterwarnings("error::shuffledp.experiments.report_html.LegendOverlapWarning")
def test_survey_panels_have_error_bars_and_no_legend_over_data(tmp_path):
    from shuffledp.experiments.survey import FigureSpec, figure_files, plot_figure

    nan = float("nan")
    rows = []
    for m, base in (("cnt_rr", 100.0), ("ldp_rr", 1000.0)):
        for x in (0.2, 0.5, 0.9):
            rows.append({"method": m, "x": x, "rmse": base / x, "rmse_se": base / x / 20, "analyzer_s": 1e-3,
                         "messages_per_user": 1.0, "bits_per_user": 1.0, "reps": 60.0})
    fig = FigureSpec("fig08", "counting", "epsilon", [0.2, 0.5, 0.9], "Fig. 8 toy")
    assert plot_figure(fig, rows, tmp_path / "fig08.png")
    assert [p.name for p in sorted(tmp_path.glob("*.png"))] == sorted(figure_files("fig08"))
    rows[0]["rmse_se"] = nan  # a point without a recorded s.e. is drawn without a band, no failure
    assert plot_figure(fig, rows, tmp_path / "fig08.png")


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "shuffledp.cli", "experiment", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_report_only_rebuilds_the_committed_keyvalue_report_without_touching_its_data(tmp_path):
    src = ROOT / "results" / "keyvalue"
    if not (src / "all_results.csv").exists():
        pytest.skip("no committed keyvalue results")
    out = tmp_path / "kv"
    shutil.copytree(src, out)
    (out / "index.html").unlink()
    before = (out / "all_results.csv").read_bytes()
    res = _cli("keyvalue", "--report-only", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert (out / "all_results.csv").read_bytes() == before
    page = (out / "index.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "How to read this" in page and "Privacy statement" in page


def test_report_only_refusals_are_one_line(tmp_path):
    res = _cli("survey", "--report-only", "--full", "--out", str(tmp_path))
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "--full" in res.stderr
    res = _cli("keyvalue", "--report-only", "--out", str(tmp_path / "nothing"))
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "all_results.csv" in res.stderr


@pytest.mark.parametrize("name", ["survey", "keyvalue", "amplification"])
def test_committed_reports_use_the_shared_style_and_name_their_sources(name):
    page = (ROOT / "results" / name / "index.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "<meta charset='utf-8'>" in page
    assert report_html.CSS.strip()[:40] in page
    low = page.lower()
    for jargon in ("seed 000", "seed 001", "seed 004", "seed 00"):
        assert jargon not in low
    assert page.count("How to read this") >= 1
    assert "max-width:880px" not in page.replace(" ", "")
