"""CLI wiring: ``shuffledp experiment heavy-hitters [--quick|--full] [--out DIR]``."""

from __future__ import annotations

from pathlib import Path

import typer

from ..cli import count, experiment_outdir, fail


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add the ``heavy-hitters`` command to ``shuffledp experiment``."""

    @experiment_app.command("heavy-hitters")
    def heavy_hitters(
        quick: bool = typer.Option(False, "--quick", help="the default: n = 2*10^4, 2 local and 1 central eps "
                                                          "(< 1 min)"),
        full: bool = typer.Option(False, "--full", help="n in {10^5, 10^6}, 4 local and 3 central eps"),
        reps: int | None = typer.Option(None, parser=count(1), help="override the number of repetitions"),
        out: Path | None = typer.Option(None, "--out", help="output folder (CSV, PNG, index.html); default "
                                                            "results/heavy_hitters for --full, "
                                                            "results/heavy_hitters-quick otherwise"),
        seed: int = typer.Option(2026, help="simulation seed"),
        report_only: bool = typer.Option(False, "--report-only", help="re-render index.html, the PNGs and the "
                                                                      "papers' claims (claims.csv/.md) from an "
                                                                      "earlier run's results.csv; measures nothing"),
    ) -> None:
        """SFP, PEM and TreeHist: precision/recall/F1 of the top-k, NCR and count error vs eps and n."""
        from rich.console import Console

        from .heavy_hitters import HeavyHitterExperimentConfig, render_report_from_csv, run_heavy_hitter_experiment

        if report_only:
            from .report_html import report_only_dir

            folder = report_only_dir("heavy-hitters", "heavy_hitters", quick, full, out, "results.csv")
            make = HeavyHitterExperimentConfig.quick if quick else HeavyHitterExperimentConfig.full
            Console().print(f"report: {render_report_from_csv(make(folder))}")
            return
        if quick and full:
            fail("choose at most one of --quick (the default) or --full")
        folder = experiment_outdir("heavy-hitters", "heavy_hitters", not full, full, out)
        cfg = HeavyHitterExperimentConfig.full(folder) if full else HeavyHitterExperimentConfig.quick(folder)
        cfg.seed = seed
        if reps is not None:
            cfg.reps = reps
        report = run_heavy_hitter_experiment(cfg, Console())
        Console().print(f"report: {report}")
