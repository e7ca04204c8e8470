"""CLI wiring: ``shuffledp experiment amplification-tables --quick|--full [--out DIR]``."""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table as RichTable

from ..cli import experiment_outdir


def _column_title(t: Any, n: int) -> str:
    return f"n={n:.0e}" + ("" if len(t.parts) == 1 else " (" + " / ".join(t.parts) + ")")


def write_report(res: dict, outdir: Path, fmt: Any) -> Path:
    """``index.html`` in ``outdir``: the tables as printed, the composition figure, the seeds' errors."""
    h = ["<!doctype html><html><head><meta charset='utf-8'><title>Shuffle amplification tables</title>",
         "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}td,th{padding:2px 8px;"
         "text-align:right}</style></head><body><h1>Shuffle amplification: survey Tables 1-4 (delta = 1e-9)</h1>",
         "<p>Empty cells: outside the bound's validity domain. Data: the <code>table_*.csv</code> files.</p>"]
    for t in res["tables"]:
        h.append(f"<h2>{html.escape(t.key)}: {html.escape(t.title)}</h2><table border=1><tr>"
                 f"<th>{html.escape(t.row_name)}</th>"
                 + "".join(f"<th>{html.escape(_column_title(t, n))}</th>" for n in t.cols) + "</tr>")
        for r in t.rows:
            h.append(f"<tr><td>{r:g}</td>" + "".join(
                f"<td>{html.escape(' / '.join(fmt(v) for v in t.cells[(r, n)]))}</td>" for n in t.cols) + "</tr>")
        h.append("</table>")
    h.append("<h2>Reference composition figure: eps after k Gaussian compositions (sigma = 200, delta = 1e-5)</h2>"
             "<img src='composition_sigma200.png' style='max-width:100%'>"
             "<p>Data: <a href='composition_sigma200.csv'>composition_sigma200.csv</a></p>"
             "<h2>Where the seeds' own statements are wrong</h2><ul>")
    h.extend(f"<li>{html.escape(e)}</li>" for e in res["seed_errors"])
    h.append("</ul></body></html>")
    path = outdir / "index.html"
    path.write_text("\n".join(h), encoding="utf-8")
    return path


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add ``amplification-tables`` to the ``experiment`` command group."""

    @experiment_app.command("amplification-tables")
    def amplification_tables(
        quick: bool = typer.Option(False, "--quick", help="only n = 1e4 and 1e5 (smoke run, seconds)"),
        full: bool = typer.Option(False, "--full", help="n = 1e4 ... 1e7, as in the survey (seconds)"),
        out: Path | None = typer.Option(None, "--out", help="output folder (CSV, PNG, index.html); default "
                                                            "results/amplification for --full, "
                                                            "results/amplification-quick for --quick"),
    ) -> None:
        """Recompute the survey's amplification Tables 1-4 (delta = 1e-9) and the reference composition figure."""
        from .amplification import NS, _fmt, run

        out = experiment_outdir("amplification-tables", "amplification", quick, full, out)
        console = Console()
        t0 = time.perf_counter()
        res = run(out, NS[:2] if quick else NS)
        res["files"].append(write_report(res, out, _fmt))
        elapsed = time.perf_counter() - t0
        for t in res["tables"]:
            rt = RichTable(title=f"{t.key}: {t.title}")
            rt.add_column(t.row_name, justify="right")
            for n in t.cols:
                rt.add_column(_column_title(t, n), justify="right")
            for r in t.rows:
                rt.add_row(f"{r:g}", *[" / ".join(_fmt(v) for v in t.cells[(r, n)]) for n in t.cols])
            console.print(rt)
        c = res["curves"]
        ft = RichTable(title="Reference composition figure: eps after k Gaussian compositions (sigma=200, delta=1e-5)")
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
        console.print(f"Wrote {len(res['files'])} files to {out}; report: {out / 'index.html'}; "
                      f"elapsed {elapsed:.1f} s")
