"""CLI wiring: ``shuffledp experiment amplification-tables``."""

from __future__ import annotations

import time

import typer
from rich.console import Console
from rich.table import Table as RichTable


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add ``amplification-tables`` to the ``experiment`` command group."""

    @experiment_app.command("amplification-tables")
    def amplification_tables(
        out: str = typer.Option("out/amplification", "--out", help="output directory for CSV and PNG files"),
        quick: bool = typer.Option(False, help="only n = 1e4 and 1e5 (fast smoke run)"),
    ) -> None:
        """Recompute the survey's amplification Tables 1-4 (delta = 1e-9) and seed 001's composition figure."""
        from .amplification import NS, _fmt, run

        console = Console()
        t0 = time.perf_counter()
        res = run(out, NS[:2] if quick else NS)
        elapsed = time.perf_counter() - t0
        for t in res["tables"]:
            rt = RichTable(title=f"{t.key}: {t.title}")
            rt.add_column(t.row_name, justify="right")
            for n in t.cols:
                rt.add_column(f"n={n:.0e}" + ("" if len(t.parts) == 1 else " (" + " / ".join(t.parts) + ")"),
                              justify="right")
            for r in t.rows:
                rt.add_row(f"{r:g}", *[" / ".join(_fmt(v) for v in t.cells[(r, n)]) for n in t.cols])
            console.print(rt)
        c = res["curves"]
        ft = RichTable(title="Seed 001 figure: eps after k Gaussian compositions (sigma=200, delta=1e-5)")
        names = [k for k in c if k != "k"]
        ft.add_column("k", justify="right")
        for nm in names:
            ft.add_column(nm, justify="right")
        for k in (1, 10, 50, 100, 200, 300, 400, 500):
            i = int(k) - int(c["k"][0])
            ft.add_row(str(k), *[f"{c[nm][i]:.5f}" for nm in names])
        console.print(ft)
        console.print("[bold]Where the seeds' own statements are wrong:[/bold]")
        for e in res["seed_errors"]:
            console.print(f"- {e}", markup=False)
        console.print(f"Wrote {len(res['files'])} files to {out}; elapsed {elapsed:.1f} s")
