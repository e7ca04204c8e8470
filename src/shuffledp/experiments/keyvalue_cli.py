"""CLI wiring: ``shuffledp experiment keyvalue --quick|--full [--out DIR]``."""

from __future__ import annotations

from pathlib import Path

import typer

from ..cli import count, experiment_outdir


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add the ``keyvalue`` command to ``shuffledp experiment``."""

    @experiment_app.command("keyvalue")
    def keyvalue(
        quick: bool = typer.Option(False, "--quick", help="30 runs, 10^5-user synthetic sets (< 2 min)"),
        full: bool = typer.Option(False, "--full", help="500 runs, full-size datasets (< 15 min on 2 cores)"),
        runs: int | None = typer.Option(None, parser=count(2), help="override the number of runs (>= 2)"),
        out: Path | None = typer.Option(None, "--out", help="output folder (CSV, PNG, index.html); default "
                                                            "results/keyvalue for --full, results/keyvalue-quick "
                                                            "for --quick"),
        seed: int = typer.Option(2026, help="simulation seed"),
    ) -> None:
        """Reproduce the HISKV paper's experiments: MSE of frequencies/means vs eps and top-N relative error."""
        from rich.console import Console

        from .keyvalue import KeyValueExperimentConfig, run_keyvalue_experiment

        out = experiment_outdir("keyvalue", "keyvalue", quick, full, out)  # --quick never overwrites results/keyvalue
        cfg = KeyValueExperimentConfig.quick(out) if quick else KeyValueExperimentConfig.full(out)
        cfg.seed = seed
        if runs is not None:
            cfg.runs = runs
        report = run_keyvalue_experiment(cfg, Console())
        Console().print(f"report: {report}")
