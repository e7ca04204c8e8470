"""The survey's grid on an engine: same seeds, same rows as in process; pinned repetition counts.

Real registry protocols on a reduced grid (small n, few repetitions, every figure kind): the
rows a Dask LocalCluster gathers must equal the in-process rows in every column except the three
timing columns, which measure the machine, not the protocol.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from shuffledp.experiments.survey import FigureSpec, SurveyConfig, pinned_reps, run_survey

#: columns that measure the machine (wall-clock times), not the protocols
TIMING = {"analyzer_s", "analyzer_how", "point_s"}


def reduced_config(out: Path, *, budget_s: float = 60.0) -> SurveyConfig:
    """Every problem and kind of sweep, real protocols (one without an exact simulation), n <= 4000."""
    cfg = SurveyConfig(mode="reduced", outdir=out, base_n=3_000, base_d=16, base_epsilon=0.9, reps=12, min_reps=4,
                       pipeline_reps=2, timing_max_messages=2_000, pipeline_max_messages=100_000, timing_repeats=1,
                       point_budget_s=budget_s)
    cfg.methods = {"counting": ["cnt_rr", "cnt_2m"], "histogram": ["hist_kr", "slh"], "sum": ["rsum_kr"]}
    cfg.figures = [FigureSpec("fig07a", "counting", "method", [None], "7a reduced"),
                   FigureSpec("fig08", "counting", "epsilon", [0.5, 0.9], "8 reduced"),
                   FigureSpec("fig12", "histogram", "d", [8, 16], "12 reduced"),
                   FigureSpec("fig15", "sum", "n", [2_000, 4_000], "15 reduced")]
    return cfg


def rows_of(outdir: Path) -> dict[str, list[dict]]:
    out = {}
    for path in sorted(outdir.glob("fig*.csv")):
        with open(path, newline="", encoding="utf-8") as fh:
            out[path.stem] = [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(fh)]
    return out


@pytest.mark.engines
@pytest.mark.slow
def test_dask_grid_gives_the_local_rows(tmp_path, dask_engine):
    local = reduced_config(tmp_path / "local")
    run_survey(local, progress_bar=False)
    on_dask = reduced_config(tmp_path / "dask")
    run_survey(on_dask, progress_bar=False, engine=dask_engine)
    a, b = rows_of(local.outdir), rows_of(on_dask.outdir)
    assert list(a) == ["fig07a", "fig08", "fig12", "fig15"] and list(b) == list(a)
    n_rows = sum(len(v) for v in a.values())
    assert n_rows == 4 + 2 * 4 + 2 * 4 + 2 * 3  # every method at every point, baselines included
    ok = [r for rows in a.values() for r in rows if r["status"] == "ok"]
    assert len(ok) >= n_rows - 2 and all(r["rmse"] for r in ok)  # measured, not skipped
    assert {r["rmse_how"] for r in ok} == {"exact statistic simulation"}
    for fig in a:
        assert b[fig] == a[fig], fig  # same order, every non-timing column identical
    assert (on_dask.outdir / "run.json").read_text(encoding="utf-8").count('"engine": "dask (2 workers)"') == 1


def test_pinned_repetitions_reproduce_a_run_whose_budget_stopped_points(tmp_path):
    # a zero budget stops every exactly simulated point at min_reps (or when precise enough)
    first = reduced_config(tmp_path / "first", budget_s=0.0)
    first.figures = first.figures[:2]
    run_survey(first, progress_bar=False)
    pinned = pinned_reps(first.outdir)
    assert pinned[("fig07a", "cnt_rr", "cnt_rr")] < first.reps  # the budget stopped it early
    again = reduced_config(tmp_path / "again", budget_s=1e9)  # would take all 12 repetitions
    again.figures = again.figures[:2]
    again.pinned = pinned
    run_survey(again, progress_bar=False)
    assert rows_of(again.outdir) == rows_of(first.outdir)
    unpinned = reduced_config(tmp_path / "unpinned", budget_s=1e9)
    unpinned.figures = unpinned.figures[:2]
    run_survey(unpinned, progress_bar=False)
    assert rows_of(unpinned.outdir) != rows_of(first.outdir)  # the pin, not chance, made them equal


def test_pinned_reps_refuses_a_folder_without_csvs(tmp_path):
    with pytest.raises(ValueError, match="no figXX.csv"):
        pinned_reps(tmp_path)


def test_cli_refuses_bad_engine_options_in_one_line(tmp_path):
    import typer
    from typer.testing import CliRunner

    from shuffledp.experiments import survey_cli

    app, exp = typer.Typer(), typer.Typer()
    app.add_typer(exp, name="experiment")
    survey_cli.register(app, exp)
    runner = CliRunner()
    help_text = runner.invoke(app, ["experiment", "survey", "--help"]).output
    assert "--engine" in help_text and "--reps-from" in help_text and "--scheduler" in help_text
    cases = [(["--quick", "--engine", "spark"], "--engine must be local or dask"),
             (["--quick", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler applies to --engine dask"),
             (["--report-only", "--engine", "dask"], "takes no --engine or --reps-from"),
             (["--quick", "--out", str(tmp_path / "o"), "--reps-from", str(tmp_path)], "no figXX.csv")]
    for args, message in cases:
        res = runner.invoke(app, ["experiment", "survey", *args])
        assert res.exit_code == 2 and message in res.output, (args, res.output)
        assert not (tmp_path / "o" / "run.json").exists()  # refused before measuring anything
