"""`shuffledp compare` output: legend and notes, 80-column fit, --json / --csv, theory-vs-RMSE notes."""

import csv
import io
import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from shuffledp.experiments.compare_cli import OUTPUT_FIELDS, compare_rows, render_table

SMALL = ["--n", "20000", "--reps", "5"]


@pytest.fixture(scope="module")
def app():
    from shuffledp.cli import _register_commands, app

    _register_commands()
    return app


def invoke(app, args, columns=None):
    env = {"COLUMNS": str(columns)} if columns else {}
    return CliRunner().invoke(app, ["compare", *args], env=env)


@pytest.mark.parametrize("problem", ["counting", "histogram", "sum"])
def test_table_fits_80_columns_with_legend_and_notes(app, problem):
    res = invoke(app, [problem, *SMALL, "--d", "16"], columns=80)
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "Columns" in res.output and "RMSE" in res.output and "theory" in res.output
    assert "CDP (Laplace)" in res.output


def test_wide_terminal_shows_every_column(app):
    res = invoke(app, ["counting", *SMALL, "--methods", "cnt_rr,cdp_laplace_count"], columns=160)
    assert res.exit_code == 0, res.output
    header = next(line for line in res.output.splitlines() if line.startswith("method"))
    for col in ("model", "RMSE", "theory", "eps_l", "eps", "delta", "msg/u", "bit/u", "ms", "note"):
        assert col in header
    assert "not shown at this width" not in res.output


def test_notes_are_complete_sentences_not_cut(app):
    # Hist_MM at n=2e4 truncates every bin: the note explains it in full below the table
    res = invoke(app, ["histogram", *SMALL, "--d", "16", "--methods", "hist_mm,hist_kr"], columns=80)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "[1]" in text and "truncation" in text
    assert "leaves this bias out." in text  # the end of the note is printed


def test_json_rows_parse_and_have_the_documented_fields(app):
    res = CliRunner().invoke(app, ["compare", "counting", *SMALL, "--methods", "cnt_rr,ldp_rr", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["method"] for r in rows] == ["cnt_rr", "ldp_rr"]
    for r in rows:
        assert list(r) == OUTPUT_FIELDS
        assert r["rmse"] > 0 and r["theory"] > 0 and r["delta_achieved"] is not None
    assert rows[1]["model"] == "local" and rows[1]["eps_local"] == 1.0


def test_csv_has_header_and_one_row_per_method(app):
    res = CliRunner().invoke(app, ["compare", "sum", *SMALL, "--methods", "rsum_kr,cdp_laplace_sum", "--csv"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert res.stdout.splitlines()[0].split(",") == OUTPUT_FIELDS
    assert [r["method"] for r in rows] == ["rsum_kr", "cdp_laplace_sum"]
    assert all(float(r["rmse"]) > 0 for r in rows)


@pytest.mark.parametrize("args, needle", [
    (["counting", "--json", "--csv"], "--json or --csv"),
    (["median", "--json"], "problem"),
    (["counting", "--eps", "0", "--csv"], "eps"),
])
def test_bad_combinations_are_one_line_exit_2(app, args, needle):
    res = CliRunner().invoke(app, ["compare", *args])
    assert res.exit_code == 2
    out = res.output.strip()
    assert out.startswith("error:") and needle in out and "\n" not in out and "Traceback" not in out


def test_machine_output_has_no_progress_or_markup_on_stdout(app):
    res = CliRunner().invoke(app, ["compare", "counting", *SMALL, "--methods", "cnt_rr", "--json"])
    assert res.exit_code == 0
    json.loads(res.stdout)  # nothing but the JSON document on stdout


def test_histogram_theory_is_at_the_data_and_agrees_with_rmse():
    """The closed form at the true counts matches the measured RMSE for Hist_KR, whose variance
    grows with the count; the variance of an empty bin (the survey's ``rmse_theory``) is too small."""
    rows = compare_rows("histogram", 1.0, 100_000, methods=["hist_kr"], reps=40, seed=5)
    r = rows[0]
    assert r["theory_how"].startswith("mean over bins")
    assert r["theory"] > 1.2 * r["theory_at_zero"]
    # 40 reps, averaged over 100 bins: the RMSE estimate is within a few percent
    assert abs(r["rmse"] / r["theory"] - 1.0) < 0.1
    assert r["note"] == ""


def test_hist_mm_truncation_bias_is_explained():
    rows = compare_rows("histogram", 1.0, 100_000, methods=["hist_mm"], reps=5, seed=5)
    r = rows[0]
    assert r["rmse"] > 5 * r["theory"]
    assert "truncation" in r["note"] and "bins are below it" in r["note"]


def test_render_table_drops_columns_rather_than_wrapping():
    from rich.console import Console

    rows = compare_rows("counting", 1.0, 10_000, methods=["cnt_rr", "cdp_laplace_count"], reps=3)
    for width in (60, 80, 120):
        buf = io.StringIO()
        Console(file=buf, width=width).print(render_table(rows, "t", width))
        lines = buf.getvalue().splitlines()
        assert max(len(line) for line in lines) <= width
        table_rows = [line for line in lines if line.startswith(("Cnt_RR", "CDP"))]
        assert len(table_rows) == 2  # one line per method: no cell wrapped


def test_json_nan_becomes_null():
    from shuffledp.experiments.compare_cli import rows_json

    row = {k: float("nan") for k in OUTPUT_FIELDS} | {"method": "x", "reps": np.int64(3)}
    out = json.loads(rows_json([row]))
    assert out[0]["rmse"] is None and out[0]["reps"] == 3 and not any(
        isinstance(v, float) and math.isnan(v) for v in out[0].values())


@pytest.mark.parametrize("args, bar_text", [
    (["compare", "counting", "--n", "20000", "--reps", "5", "--methods", "cnt_rr,ldp_rr", "--json"], "measuring"),
    (["simulate", "--n", "20000", "--d", "16", "--mechanism", "grr"], "encode + aggregate"),
])
def test_progress_bar_goes_to_stderr_only(args, bar_text):
    """With rich forced to draw (as on a terminal), the bar is on stderr and stdout stays clean."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ, TTY_COMPATIBLE="1", TTY_INTERACTIVE="1", COLUMNS="100",
               PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-m", "shuffledp", *args], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert bar_text in res.stderr
    assert bar_text not in res.stdout and "\x1b[?25l" not in res.stdout  # no bar, no cursor control
    if "--json" in args:
        assert [r["method"] for r in json.loads(res.stdout)] == ["cnt_rr", "ldp_rr"]
