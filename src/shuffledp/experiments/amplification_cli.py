"""CLI wiring: ``shuffledp experiment amplification-tables --quick|--full [--out DIR]``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table as RichTable

from ..cli import experiment_outdir


def _column_title(t: Any, n: int) -> str:
    return f"n={n:.0e}" + ("" if len(t.parts) == 1 else " (" + " / ".join(t.parts) + ")")


#: what each composition curve claims: an (eps, delta = 1e-5) statement for k Gaussian mechanisms
CURVE_PRIVACY = {
    "seed_advanced": "NOT a valid statement: the chapter's formula is not the advanced composition theorem "
                     "(see below)",
    "drv_advanced": "(eps, 1e-5)-DP by the Dwork-Rothblum-Vadhan advanced composition theorem, each of the k "
                    "mechanisms (eps_i, 1e-5 / 2k)-DP and delta' = 1e-5 / 2",
    "zcdp": "(eps, 1e-5)-DP from k/(2 sigma^2)-zCDP with the standard conversion",
    "rdp_alpha60": "(eps, 1e-5)-DP from Rényi DP of order 60 only (valid, not optimised over the order)",
    "rdp_alpha20": "(eps, 1e-5)-DP from Rényi DP of order 20 only (valid, not optimised over the order)",
    "rdp_grid_improved": "(eps, 1e-5)-DP from Rényi DP minimised over an order grid, improved conversion",
    "exact": "the tight (eps, 1e-5)-DP of the k-fold Gaussian (one Gaussian of sigma / sqrt(k)); no valid "
             "curve can lie below it",
}


def write_report(res: dict, outdir: Path, fmt: Any) -> Path:
    """``index.html`` in ``outdir``: the tables as printed, the composition figure, the sources' errors."""
    from .amplification import CURVE_LABELS, TABLE_DELTA
    from .report_html import SOURCES, esc, figure, table, write_page

    h = [f"<p>Privacy amplification by shuffling, as tabulated in {esc(SOURCES['survey'].split(', §')[0])} "
         f"(Tables 1-4), recomputed with this library's bounds at delta = {TABLE_DELTA:g}. Every number is an exact "
         "computation (no Monte Carlo).</p>",
         "<div class='howto'><b>How to read the tables</b>Each row is a privacy level, each column a number of "
         "users n. \u201ceps_c given eps_l\u201d tables give the central (eps_c, delta)-DP of the shuffled "
         "messages when every user runs an eps_l-LDP randomizer; \u201ceps_l given eps_c\u201d (converse) "
         "tables give the largest local eps_l that still guarantees the central target eps_c. Cells with several "
         "numbers list the bounds named in the column header, in that order. \u201c—\u201d: outside the bound's "
         "validity domain (the theorem says nothing there). Data: the <code>table_*.csv</code> files "
         "(<code>tables_long.csv</code> in long form).</div>"]
    for t in res["tables"]:
        h.append(f"<h2>{esc(t.key)}: {esc(t.title)}</h2>")
        h.append(table([t.row_name] + [_column_title(t, n) for n in t.cols],
                       [[f"{r:g}"] + [" / ".join("—" if v is None else fmt(v) for v in t.cells[(r, n)])
                                      for n in t.cols] for r in t.rows]))
    names = [k for k in res["curves"] if k != "k"]
    h.append("<h2>Gaussian composition: epsilon after k mechanisms (sigma = 200, delta = 1e-5)</h2>")
    h.append(figure(outdir, "composition_sigma200.png", "epsilon after k Gaussian compositions",
                    "Each curve is one way of accounting for k runs of the Gaussian mechanism (L2 sensitivity "
                    "1, sigma = 200): the y value is the epsilon it certifies at delta = 1e-5 after k runs. Lower "
                    "is tighter; the exact curve is the truth, every valid bound lies on or above it. The dashed "
                    "curves are the chapter's own (one of them not a valid bound). No Monte Carlo: exact "
                    "computations.",
                    caption=f"Source: {esc(SOURCES['dp_variants'])}. Data: "
                            "<a href='composition_sigma200.csv'>composition_sigma200.csv</a>.",
                    privacy=[(CURVE_LABELS.get(nm, nm), CURVE_PRIVACY.get(nm, "")) for nm in names]))
    h.append("<h2>Where the sources' own statements are wrong</h2><ul>")
    h.extend(f"<li>{esc(e)}</li>" for e in res["seed_errors"])
    h.append("</ul>")
    return write_page(outdir / "index.html", f"Shuffle amplification tables (delta = {TABLE_DELTA:g}) and Gaussian "
                      "composition", h)


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
        """Recompute the survey's amplification Tables 1-4 (delta = 1e-9) and the Gaussian composition figure."""
        from .amplification import NS, _fmt, run

        out = experiment_outdir("amplification-tables", "amplification", quick, full, out)
        console = Console()
        t0 = time.perf_counter()
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        # no per-step hook in run(): an indeterminate bar on stderr, gone when the tables print
        with Progress(SpinnerColumn(), TextColumn("computing the amplification tables"), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True):
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
        ft = RichTable(title="Gaussian composition figure: eps after k compositions (sigma=200, delta=1e-5)")
        names = [k for k in c if k != "k"]
        ft.add_column("k", justify="right")
        for nm in names:
            ft.add_column(nm, justify="right")
        for k in (1, 10, 50, 100, 200, 300, 400, 500):
            i = int(k) - int(c["k"][0])
            ft.add_row(str(k), *[f"{c[nm][i]:.5f}" for nm in names])
        console.print(ft)
        console.print("[bold]Where the sources' own statements are wrong:[/bold]")
        for e in res["seed_errors"]:
            console.print(f"- {e}", markup=False)
        console.print(f"Wrote {len(res['files'])} files to {out}; report: {out / 'index.html'}; "
                      f"elapsed {elapsed:.1f} s")
