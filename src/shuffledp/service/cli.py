"""``shuffledp serve`` and ``shuffledp demo`` (the README's main job)."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    @app.command(name="serve")
    def serve(role: str = typer.Argument(..., help="shuffler or analyzer"),
              db: str = typer.Option(..., "--db", help="SQLAlchemy URL: sqlite:///path.db or postgresql://..."),
              host: str = typer.Option("127.0.0.1", help="bind address"),
              port: int = typer.Option(8080, help="port (0 = ephemeral)"),
              port_file: str = typer.Option(None, help="write the bound port here once listening"),
              tick: float = typer.Option(60.0, help="shuffler: batcher period in seconds"),
              close_delay: float = typer.Option(300.0, help="shuffler: seconds after a window ends before it closes"),
              forward_timeout: float = typer.Option(30.0, help="shuffler: seconds to wait for the analyzer per forward"),
              retention_every: float = typer.Option(3600.0, help="seconds between retention rounds "
                                                                 "(deletes data older than the task's retention_days)"),
              ) -> None:
        """Run the shuffler or the analyzer service (secrets from SHUFFLEDP_* environment variables)."""
        from .serve import run
        if role not in ("shuffler", "analyzer"):
            raise typer.BadParameter("role must be 'shuffler' or 'analyzer'")
        run(role, db, host, port, port_file, tick, close_delay, forward_timeout, retention_every)

    @app.command(name="demo")  # explicit name: shuffledp.cli checks it to skip its fallback demo
    def demo(n: int = typer.Option(100_000, help="simulated clients"),
             d: int = typer.Option(16, help="domain size"),
             epsilon: float = typer.Option(2.0, "--epsilon", "--eps", help="local eps0 of each report"),
             mechanism: str = typer.Option("grr", help="frequency oracle (registry name)"),
             eps_central: float = typer.Option(1.0, help="target central eps of a released batch"),
             delta: float = typer.Option(1e-8, help="target central delta"),
             out: str = typer.Option("out/demo", help="directory for the HTML report"),
             ) -> None:
        """End to end: shuffler + analyzer on loopback, n clients through the SDK, estimates vs truth."""
        from rich.console import Console
        from rich.table import Table

        from .demo import run_demo

        con = Console()
        res = run_demo(n=n, d=d, epsilon=epsilon, mechanism=mechanism, eps_central=eps_central, delta=delta,
                       out_dir=out, progress=lambda m: con.print(m, markup=False))
        tab = Table(title=f"{mechanism.upper()} eps0={epsilon:g}, n={n:,}: service estimates vs truth")
        for col in ("item", "true fraction", "estimate", "std err", "95% CI"):
            tab.add_column(col, justify="right")
        for i in range(d):
            tab.add_row(str(i), f"{res['truth'][i]:.5f}", f"{res['estimate'][i]:.5f}", f"{res['std_error'][i]:.5f}",
                        f"[{res['ci_low'][i]:.5f}, {res['ci_high'][i]:.5f}]")
        con.print(tab)
        con.print(f"Privacy: {res['privacy_statement']['text']}", markup=False)
        con.print(f"max |service - in-process| = {res['max_abs_diff_in_process']:.3g}; shuffler counters "
                  f"{res['counters']}", markup=False)
        con.print("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in res["timings"].items())
                  + f"; total {res['total_s']:.1f}s", markup=False)
        con.print(f"report: {res['report']}", markup=False)
