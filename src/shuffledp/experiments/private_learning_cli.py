"""CLI wiring: ``shuffledp experiment learning --quick|--full [--out DIR] [--dpsgd]``."""

from __future__ import annotations

from pathlib import Path

import typer

from ..cli import experiment_outdir, require_extras


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add the ``learning`` command to ``shuffledp experiment``."""

    @experiment_app.command("learning")
    def learning(
        quick: bool = typer.Option(False, "--quick", help="small grids (about half a minute on 2 cores)"),
        full: bool = typer.Option(False, "--full", help="the documented grids (2.5-6 minutes on 2 shared cores, most of it the GANs)"),
        out: Path | None = typer.Option(None, "--out", help="output folder (CSV, PNG, index.html); default "
                                                            "results/private_learning for --full, "
                                                            "results/private_learning-quick for --quick"),
        dpsgd: bool = typer.Option(False, "--dpsgd", help="include DP-SGD, DP-GAN and PATE-GAN (torch) in --quick (always in --full)"),
        seed: int = typer.Option(0, help="seed of the data splits and of the simulated noise"),
    ) -> None:
        """Private learning: DP-ERM vs diffprivlib, DP-SGD, PATE, DP-GAN and PATE-GAN, membership inference
        and the audit."""
        require_extras("experiment learning", "ml")
        out = experiment_outdir("learning", "private_learning", quick, full, out)
        from .private_learning import run

        res = run(out, quick=quick, seed=seed, with_dpsgd=True if dpsgd else None)
        typer.echo(f"report: {out / 'index.html'} ({res['seconds']:.1f} s)")
