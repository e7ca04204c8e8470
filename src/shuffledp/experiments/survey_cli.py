"""CLI wiring: ``shuffledp experiment survey --quick|--full [--out DIR] [--engine local|dask]``."""

from __future__ import annotations

from pathlib import Path

import typer

from ..cli import experiment_outdir


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add the ``survey`` command to ``shuffledp experiment``."""

    @experiment_app.command("survey")
    def survey(
        quick: bool = typer.Option(False, "--quick", help="short sweeps, 10^5-message timing batches (< 2 min)"),
        full: bool = typer.Option(False, "--full", help="the survey's sweeps, n up to 10^7 (< 15 min on 2 cores)"),
        out: Path | None = typer.Option(None, "--out", help="output folder (CSV, PNG, index.html); default "
                                                            "results/survey for --full, results/survey-quick for --quick"),
        report_only: bool = typer.Option(False, "--report-only", help="re-render index.html and the PNGs from the "
                                         "CSVs already in the output folder (no simulation)"),
        seed: int = typer.Option(2022, help="simulation seed"),
        engine: str = typer.Option("local", help="where the grid's points run: local (in this process, one after "
                                   "the other) or dask (a LocalCluster of --workers processes, or --scheduler); "
                                   "same seeds, same rows"),
        scheduler: str | None = typer.Option(None, help="with --engine dask: a running scheduler, tcp://host:port"),
        workers: int = typer.Option(2, help="with --engine dask: worker processes of the LocalCluster"),
        reps_from: Path | None = typer.Option(None, "--reps-from", help="take each point's repetition count from "
                                              "this earlier run's CSVs instead of the time budget (the same seed "
                                              "then reproduces its RMSE columns exactly)"),
    ) -> None:
        """Reproduce the ESA survey's §5 (Figs. 7-15): RMSE, analyzer time, communication; claims checked."""
        from ..cli import fail

        if engine not in ("local", "dask"):
            fail(f"--engine must be local or dask, got {engine!r}")
        if scheduler is not None and engine != "dask":
            fail("--scheduler applies to --engine dask")
        if report_only and (engine != "local" or reps_from is not None):
            fail("--report-only measures nothing: it takes no --engine or --reps-from")
        if report_only:
            from .report_html import report_only_dir
            from .survey import rebuild_report

            folder = report_only_dir("survey", "survey", quick, full, out, "run.json")
            typer.echo(f"report: {rebuild_report(folder)}")
            return
        import time

        from rich.console import Console
        from rich.table import Table

        from .survey import SurveyConfig, pinned_reps, run_survey

        console = Console()
        out = experiment_outdir("survey", "survey", quick, full, out)  # --quick never overwrites results/survey
        cfg = SurveyConfig.quick(out) if quick else SurveyConfig.full(out)
        cfg.seed = seed
        if reps_from is not None:
            try:
                cfg.pinned = pinned_reps(reps_from)
            except (OSError, ValueError, KeyError) as e:
                fail(f"--reps-from {reps_from}: {e}")
        t0 = time.perf_counter()
        if engine == "local":
            report = run_survey(cfg, console)
        else:
            from ..cli import require_extras
            from ..engines.cli import make_engine

            require_extras("experiment survey --engine dask", "dask")
            with make_engine(engine, scheduler, None, workers) as eng:
                report = run_survey(cfg, console, engine=eng)
        elapsed = time.perf_counter() - t0
        tab = Table(title="Survey claims vs this run")
        for col in ("figure", "claim", "verdict"):
            tab.add_column(col)
        import csv

        with open(cfg.outdir / "claims.csv", newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                color = {"agree": "green", "partly": "yellow", "disagree": "red"}.get(r["verdict"], "white")
                tab.add_row(r["figure"], r["claim"], f"[{color}]{r['verdict']}[/{color}] "
                            f"({r['checks_holding']}/{r['checks']})")
        console.print(tab)
        console.print(f"report: {report}  ({elapsed:.1f} s)")
