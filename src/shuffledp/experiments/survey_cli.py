"""CLI wiring: ``shuffledp experiment survey --quick|--full [--out DIR]``."""

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
    ) -> None:
        """Reproduce the ESA survey's §5 (Figs. 7-15): RMSE, analyzer time, communication; claims checked."""
        if report_only:
            from .report_html import report_only_dir
            from .survey import rebuild_report

            folder = report_only_dir("survey", "survey", quick, full, out, "run.json")
            typer.echo(f"report: {rebuild_report(folder)}")
            return
        import time

        from rich.console import Console
        from rich.table import Table

        from .survey import SurveyConfig, run_survey

        console = Console()
        out = experiment_outdir("survey", "survey", quick, full, out)  # --quick never overwrites results/survey
        cfg = SurveyConfig.quick(out) if quick else SurveyConfig.full(out)
        cfg.seed = seed
        t0 = time.perf_counter()
        report = run_survey(cfg, console)
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
