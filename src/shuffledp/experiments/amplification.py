"""Reproduction: the survey's amplification Tables 1–4 and the composition figure of the chapter
"Variants of differential privacy" (Near and Abuah, Programming Differential Privacy).

- Tables (delta = 1e-9, n in {1e4, 1e5, 1e6, 1e7}; grids chosen here
  because the survey's own grids were stripped): Thm 1 (EFMRTT19) forward and converse, Thm 1 next
  to the modern numeric clone bounds, Thm 2 via the BBGN19 Hoeffding/Bennett blanket bounds
  (converse), Thm 3 (Cheu et al.) converse and forward, both the exact and the eq. (7) form,
  Thm 4 (BBGN19 Thm 3.1) converse for k = 2, 10, 100 and forward for k = 2. "None" = outside the
  theorem's validity domain (the method raised OutOfDomainError).
- Figure (that chapter): epsilon after k Gaussian compositions (sigma = 200, L2 sensitivity 1,
  delta = 1e-5): the chapter's "advanced composition" curve, the real Dwork–Rothblum–Vadhan theorem with
  the delta split, zCDP, RDP at fixed alpha = 60 and 20 (the chapter's curves), RDP on our grid with the
  improved conversion, and the exact Gaussian composition (Balle–Wang).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..accounting import (GaussianEvent, RdpAccountant, advanced_composition, gaussian_epsilon_exact,
                          local_epsilon_for, shuffle_amplification, zcdp_to_epsilon)
from ..core.errors import OutOfDomainError

__all__ = ["CURVE_LABELS", "Table", "amplification_tables", "composition_curves", "seed_errors", "run", "TABLE_DELTA",
           "FIGURE_SIGMA", "FIGURE_DELTA"]

TABLE_DELTA = 1e-9
NS = (10_000, 100_000, 1_000_000, 10_000_000)
FIGURE_SIGMA = 200.0
FIGURE_DELTA = 1e-5
#: legend of each composition curve (the CSV column names stay as they are)
CURVE_LABELS = {
    "seed_advanced": "chapter's 'advanced composition' (not DRV)",
    "drv_advanced": "advanced composition (DRV, delta split)",
    "zcdp": "zCDP (rho + 2 sqrt(rho ln 1/delta))",
    "rdp_alpha60": "RDP, fixed alpha = 60 (chapter)",
    "rdp_alpha20": "RDP, fixed alpha = 20 (chapter)",
    "rdp_grid_improved": "RDP, order grid, improved conversion",
    "exact": "exact Gaussian composition (Balle–Wang)",
}


@dataclass
class Table:
    """One reproduced table: rows x columns (n) of floats, None = outside the validity domain."""

    key: str
    title: str
    row_name: str
    rows: list[float]
    cols: list[int]
    cells: dict[tuple[float, int], list[float | None]] = field(default_factory=dict)
    parts: tuple[str, ...] = ("value",)

    def value(self, row: float, n: int, part: int = 0) -> float | None:
        return self.cells[(row, n)][part]


def _safe(f: Callable[[], float]) -> float | None:
    try:
        return float(f())
    except OutOfDomainError:
        return None


def _survey_blanket_domain(eps_l: float | None, n: int, delta: float) -> float | None:
    """Survey eq. (4) domain eps_l <= ln(n / ln(1/delta)) / 2 (BBGN19 Cor. 5.3.1)."""
    if eps_l is None:
        return None
    return eps_l if eps_l <= math.log(n / math.log(1.0 / delta)) / 2.0 else None


def amplification_tables(ns: tuple[int, ...] = NS, delta: float = TABLE_DELTA) -> list[Table]:
    """Compute Tables 1–4 (and the forward companions) on the grids above."""
    ns = tuple(int(n) for n in ns)
    out: list[Table] = []
    eps_small = [0.05, 0.1, 0.2, 0.3, 0.4, 0.49]
    eps_c_grid = [round(0.1 * i, 1) for i in range(1, 11)]
    eps_fwd = [0.5, 1.0, 2.0, 3.0, 4.0, 5.0]

    def add(key: str, title: str, row_name: str, rows: list[float], fns: list[Callable[[float, int], float | None]],
            parts: tuple[str, ...] = ("value",)) -> None:
        t = Table(key, title, row_name, rows, list(ns), parts=parts)
        for r in rows:
            for n in ns:
                t.cells[(r, n)] = [fn(r, n) for fn in fns]
        out.append(t)

    add("T1", "Thm 1 (EFMRTT19): eps_c given eps_l", "eps_l", eps_small,
        [lambda e, n: _safe(lambda: shuffle_amplification(e, n, delta, "erlingsson2019"))])
    add("T1_conv", "Thm 1 converse: eps_l given eps_c (None = eps_l >= 0.5)", "eps_c", [0.1, 0.2, 0.3, 0.4, 0.5],
        [lambda e, n: _safe(lambda: local_epsilon_for(e, n, delta, "erlingsson2019"))])
    add("T1_modern", "eps_c given eps_l: Thm 1 / FMT21 clones numeric (generic) / clones p_c=2/(e^eps+1) (binary RR)",
        "eps_l", eps_small + [1.0, 2.0, 4.0],
        [lambda e, n: _safe(lambda: shuffle_amplification(e, n, delta, "erlingsson2019")),
         lambda e, n: shuffle_amplification(e, n, delta, "clones"),
         lambda e, n: shuffle_amplification(e, n, delta, "clones", randomizer="binary_rr")],
        parts=("thm1", "clones", "clones_rr"))
    add("T2a", "Thm 2 converse via BBGN19 Hoeffding (generic): eps_l given eps_c (None = eps_l > ln(n/ln(1/d))/2)",
        "eps_c", eps_c_grid,
        [lambda e, n: _survey_blanket_domain(_safe(lambda: local_epsilon_for(e, n, delta, "blanket")), n, delta)])
    add("T2b", "Thm 2 converse via BBGN19 Bennett (generic), survey domain enforced", "eps_c", eps_c_grid,
        [lambda e, n: _survey_blanket_domain(
            _safe(lambda: local_epsilon_for(e, n, delta, "blanket", bound="bennett")), n, delta)])
    add("T3", "Thm 3 converse (Cheu et al. 2019, binary RR): eps_l given eps_c", "eps_c", eps_c_grid,
        [lambda e, n: _safe(lambda: local_epsilon_for(e, n, delta, "cheu2019", form="exact"))])
    add("T3_eq7", "Thm 3 converse, survey eq. (7) form [R]", "eps_c", eps_c_grid,
        [lambda e, n: _safe(lambda: local_epsilon_for(e, n, delta, "cheu2019", form="eq7"))])
    for k in (2, 10, 100):
        add(f"T4_k{k}", f"Thm 4 converse (BBGN19 Thm 3.1, k={k}): eps_l given eps_c", "eps_c", eps_c_grid,
            [lambda e, n, k=k: _safe(lambda: local_epsilon_for(e, n, delta, "blanket", bound="closed_form",
                                                                randomizer="krr", k=k))])
    add("F3", "Thm 3 forward (binary RR): eps_c given eps_l", "eps_l", eps_fwd,
        [lambda e, n: _safe(lambda: shuffle_amplification(e, n, delta, "cheu2019", form="exact"))])
    add("F3_eq7", "Thm 3 forward, survey eq. (7) form [R]", "eps_l", eps_fwd,
        [lambda e, n: _safe(lambda: shuffle_amplification(e, n, delta, "cheu2019", form="eq7"))])
    add("F4", "Thm 4 forward (k=2): eps_c given eps_l", "eps_l", eps_fwd,
        [lambda e, n: _safe(lambda: shuffle_amplification(e, n, delta, "blanket", bound="closed_form",
                                                          randomizer="krr", k=2))])
    return out


def composition_curves(ks: np.ndarray | None = None, sigma: float = FIGURE_SIGMA,
                       delta: float = FIGURE_DELTA) -> dict[str, np.ndarray]:
    """Epsilon after k compositions of a Gaussian (L2 sensitivity 1) under each accounting method."""
    ks = np.arange(1, 501) if ks is None else np.asarray(ks, dtype=int)
    g = math.sqrt(2.0 * math.log(1.25 / delta)) / sigma          # classic per-query eps at delta
    rho = 1.0 / (2.0 * sigma**2)
    L = math.log(1.0 / delta)
    curves: dict[str, list[float]] = {name: [] for name in (
        "seed_advanced", "drv_advanced", "zcdp", "rdp_alpha60", "rdp_alpha20", "rdp_grid_improved", "exact")}
    for k in ks.tolist():
        curves["seed_advanced"].append(2 * g * math.sqrt(2 * k * L))
        gi = math.sqrt(2.0 * math.log(1.25 / (delta / (2 * k)))) / sigma   # delta_i = delta / 2k
        curves["drv_advanced"].append(advanced_composition([gi] * k, delta / 2))
        curves["zcdp"].append(zcdp_to_epsilon(k * rho, delta, conversion="naive"))
        curves["rdp_alpha60"].append(k * 60 * rho + L / 59)
        curves["rdp_alpha20"].append(k * 20 * rho + L / 19)
        curves["rdp_grid_improved"].append(RdpAccountant().compose(GaussianEvent(sigma), k).get_epsilon(delta))
        curves["exact"].append(gaussian_epsilon_exact(delta, math.sqrt(k) / sigma))
    out = {name: np.asarray(v) for name, v in curves.items()}
    out["k"] = ks
    return out


def seed_errors(sigma: float = FIGURE_SIGMA, delta: float = FIGURE_DELTA) -> list[str]:
    """The two statements of the composition chapter that the computation contradicts, with our numbers."""
    rho = 1.0 / (2.0 * sigma**2)
    L = math.log(1.0 / delta)
    touch = {a: L / (rho * (a - 1) ** 2) for a in (20, 60)}
    c = composition_curves(np.array([300, 500]), sigma, delta)
    return [
        "The chapter's 'advanced composition' curve (Near and Abuah, Variants of DP): it plots 2*g*sqrt(2k ln(1/delta)) with g the per-query "
        "classic Gaussian epsilon. That is not the Dwork–Rothblum–Vadhan theorem "
        "(sqrt(2k ln(1/delta'))*e0 + k*e0*(e^e0-1), total delta k*delta_i + delta') and it ignores the "
        f"delta blow-up. At k=500: chapter's curve {c['seed_advanced'][1]:.5f}, DRV with the delta split "
        f"(delta_i=delta/2k, delta'=delta/2) {c['drv_advanced'][1]:.5f}.",
        "The chapter's statement 'the RDP (alpha = 20) and zCDP curves cross near k = 300': a fixed-alpha RDP line "
        "never crosses the zCDP curve (zCDP's conversion is its minimum over alpha); it touches it at the "
        f"k where alpha is optimal, k = ln(1/delta)/(rho (alpha-1)^2): k = {touch[60]:.1f} for alpha = 60 "
        f"and k = {touch[20]:.0f} for alpha = 20. At k = 300: RDP alpha=20 {c['rdp_alpha20'][0]:.5f} vs "
        f"zCDP {c['zcdp'][0]:.5f}; RDP alpha=60 {c['rdp_alpha60'][0]:.5f}.",
    ]


def _fmt(v: float | None) -> str:
    return "None" if v is None else f"{v:.4f}"


def write_tables_csv(tables: list[Table], outdir: Path) -> list[Path]:
    paths = []
    long_rows = []
    for t in tables:
        p = outdir / f"table_{t.key}.csv"
        with p.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([t.row_name] + [f"n={n}" + ("" if len(t.parts) == 1 else f" {part}")
                                       for n in t.cols for part in t.parts])
            for r in t.rows:
                w.writerow([r] + ["" if v is None else f"{v:.10g}" for n in t.cols for v in t.cells[(r, n)]])
                for n in t.cols:
                    for part, v in zip(t.parts, t.cells[(r, n)]):
                        long_rows.append([t.key, t.row_name, r, n, part, "" if v is None else f"{v:.10g}"])
        paths.append(p)
    p = outdir / "tables_long.csv"
    with p.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["table", "row_name", "row", "n", "part", "value"])
        w.writerows(long_rows)
    paths.append(p)
    return paths


def write_figure(curves: dict[str, np.ndarray], outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report_html import save_figure

    csv_path = outdir / "composition_sigma200.csv"
    names = [k for k in curves if k != "k"]
    with csv_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["k"] + names)
        for i, k in enumerate(curves["k"].tolist()):
            w.writerow([k] + [f"{curves[nm][i]:.10g}" for nm in names])
    fig, ax = plt.subplots(figsize=(8, 5))
    for nm in names:
        ax.plot(curves["k"], curves[nm], label=CURVE_LABELS.get(nm, nm),
                linestyle="--" if nm in ("seed_advanced", "rdp_alpha60", "rdp_alpha20") else "-")
    ax.set_xlabel("number of Gaussian compositions k (sigma = 200, sensitivity 1)")
    ax.set_ylabel("epsilon at delta = 1e-5")
    ax.set_ylim(0, 3.0)
    ax.set_title("Gaussian composition (sigma = 200): epsilon at delta = 1e-5", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    png = outdir / "composition_sigma200.png"
    save_figure(fig, png, dpi=100)
    plt.close(fig)
    return [csv_path, png]


def run(outdir: str | Path = "out/amplification", ns: tuple[int, ...] = NS) -> dict:
    """Compute everything and write CSVs + the PNG into ``outdir``. Returns the results."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    tables = amplification_tables(ns)
    curves = composition_curves()
    files = write_tables_csv(tables, outdir) + write_figure(curves, outdir)
    errors = seed_errors()
    (outdir / "seed_errors.txt").write_text("\n\n".join(errors) + "\n")
    files.append(outdir / "seed_errors.txt")
    return {"tables": tables, "curves": curves, "seed_errors": errors, "files": files}
