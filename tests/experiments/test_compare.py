"""`shuffledp compare`: one row per method; bad arguments (problem, eps, delta, n, d, q, reps, methods) are refused."""

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


def test_unknown_or_unimplemented_method_is_refused_naming_methods():
    with pytest.raises(ValidationError, match="no_such_protocol") as e:
        compare_rows("sum", 1.0, 10_000, methods=["no_such_protocol"], reps=5)
    assert e.value.parameter == "methods"
    with pytest.raises(ValidationError, match="not implemented") as e:
        compare_rows("counting", 1.0, 10_000, methods=["cnt_pure"], reps=5)
    assert e.value.parameter == "methods"


@pytest.mark.parametrize("args, parameter", [
    (["counting", "--eps", "0"], "eps"), (["counting", "--eps", "-1"], "eps"), (["counting", "--n", "0"], "n"),
    (["counting", "--delta", "1.5"], "delta"), (["histogram", "--d", "1"], "d"),
    (["counting", "--methods", "foo"], "methods"), (["counting", "--reps", "0"], "reps"),
    (["counting", "--q", "2"], "q"),
])
def test_cli_bad_argument_is_one_line_exit_2(args, parameter):
    from shuffledp.cli import _register_commands, app

    _register_commands()
    res = CliRunner().invoke(app, ["compare", *args])
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert out.startswith("error:") and parameter in out and "Traceback" not in out
    assert "RuntimeWarning" not in out and "┃" not in out  # no table, no numpy warning spew


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
