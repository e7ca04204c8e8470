"""CLI wiring: ``shuffledp experiment keyvalue --quick|--full``."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add the ``keyvalue`` command to ``shuffledp experiment``."""

    @experiment_app.command("keyvalue")
    def keyvalue(
        quick: bool = typer.Option(False, "--quick", help="30 runs, 10^5-user synthetic sets (< 2 min)"),
        full: bool = typer.Option(False, "--full", help="500 runs, full-size datasets (< 15 min on 2 cores)"),
        runs: int = typer.Option(0, help="override the number of runs"),
        out: Path = typer.Option(Path("results/keyvalue"), help="output folder (CSV, PNG, report.html)"),
        seed: int = typer.Option(2026, help="simulation seed"),
    ) -> None:
        """Reproduce seed 004 (HISKV): MSE of frequencies/means vs eps and top-N relative error."""
        from rich.console import Console

        from .keyvalue import KeyValueExperimentConfig, run_keyvalue_experiment

        console = Console()
        if quick == full:
            console.print("[red]error:[/red] choose exactly one of --quick or --full")
            raise typer.Exit(2)
        cfg = KeyValueExperimentConfig.quick(out) if quick else KeyValueExperimentConfig.full(out)
        cfg.seed = seed
        if runs:
            if runs < 2:
                console.print("[red]error:[/red] --runs must be >= 2")
                raise typer.Exit(2)
            cfg.runs = runs
        report = run_keyvalue_experiment(cfg, console)
        console.print(f"report: {report}")
