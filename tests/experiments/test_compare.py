"""`shuffledp compare`: one row per method, skips are explained, bad problem is refused."""

import math

import pytest
from typer.testing import CliRunner

from shuffledp.core.errors import ValidationError
from shuffledp.experiments.compare_cli import compare_rows


def test_counting_rows_have_measured_rmse_near_theory_for_cdp():
    rows = compare_rows("counting", 1.0, 100_000, methods=["cdp_laplace_count", "ldp_rr"], reps=40, seed=3)
    assert [r["method"] for r in rows] == ["cdp_laplace_count", "ldp_rr"]
    for r in rows:
        assert r["status"] == "ok", r["reason"]
        # RMSE from 40 reps: relative sd of an RMSE estimate ~ sqrt(kurtosis-ish / 4R) < 0.25 here
        assert 0.6 < r["rmse"] / r["rmse_theory"] < 1.5
    assert rows[0]["rmse"] < rows[1]["rmse"]  # CDP beats LDP at the same eps


def test_unknown_method_is_a_skipped_row_with_reason():
    rows = compare_rows("sum", 1.0, 10_000, methods=["no_such_protocol"], reps=5)
    assert rows[0]["status"] == "skipped" and "no_such_protocol" in rows[0]["reason"]
    assert math.isnan(rows[0]["rmse"])


def test_bad_problem_is_refused():
    with pytest.raises(ValidationError, match="problem"):
        compare_rows("median", 1.0, 1000)


def test_cli_prints_table():
    from shuffledp.cli import _register_commands, app

    _register_commands()
    res = CliRunner().invoke(app, ["compare", "histogram", "--n", "20000", "--d", "16", "--reps", "5",
                                   "--methods", "hist_kr,cdp_laplace_hist"])
    assert res.exit_code == 0, res.output
    assert "Hist_KR" in res.output and "CDP (Laplace)" in res.output
