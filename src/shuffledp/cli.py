"""The ``shuffledp`` command line."""

from __future__ import annotations

import time

import numpy as np
import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="shuffledp: differential privacy in the Encode-Shuffle-Analyze model.")
console = Console()


def zipf_dataset(n: int, d: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """Built-in synthetic dataset: n users' items drawn from a Zipf(s) law over [0, d)."""
    w = 1.0 / np.arange(1, d + 1) ** s
    return rng.choice(d, size=n, p=w / w.sum())


@app.command()
def simulate(
    mechanism: str = typer.Option("olh", help="frequency oracle: grr, sue, oue, rappor, blh, olh, hr, ss, cms, hcms"),
    epsilon: float = typer.Option(1.0, "--epsilon", "--eps", help="local privacy parameter eps"),
    d: int = typer.Option(1024, help="domain size"),
    n: int = typer.Option(1_000_000, help="number of simulated users"),
    zipf: float = typer.Option(1.1, help="Zipf exponent of the synthetic data"),
    top: int = typer.Option(10, help="rows to show"),
    seed: int = typer.Option(1, help="simulation seed (simulation only; services never take a seed)"),
    chunk: int = typer.Option(200_000, help="users per chunk (bounds memory)"),
) -> None:
    """Simulate one collection round of a local frequency oracle on a synthetic Zipf dataset."""
    from .core.errors import ValidationError

    try:
        _simulate(mechanism, epsilon, d, n, zipf, top, seed, chunk)
    except ValidationError as e:  # bad parameters: one clear line and exit code 2, never a traceback
        console.print(f"[red]error:[/red] {e}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from e


def _simulate(mechanism: str, epsilon: float, d: int, n: int, zipf: float, top: int, seed: int,
              chunk: int) -> None:
    from .core.validation import check_domain_size, check_positive_int, check_real
    from .local import frequency_oracle
    from .local.registry import check_simulation_fits

    n = check_positive_int(n, "n")
    chunk = check_positive_int(chunk, "chunk")
    top = check_positive_int(top, "top")
    d = check_domain_size(d)
    zipf = check_real(zipf, "zipf")
    check_positive_int(seed, "seed", minimum=0)
    check_simulation_fits(mechanism, epsilon, d, n, chunk)  # refuse before allocating d- or n-sized arrays
    mech = frequency_oracle(mechanism, epsilon, d)
    rng = np.random.default_rng(seed)
    x = zipf_dataset(n, d, zipf, rng)
    true = np.bincount(x, minlength=d) / n
    stat = None
    t0 = time.perf_counter()
    with Progress(console=console, transient=True) as prog:
        task = prog.add_task(f"{mechanism}: encode + aggregate", total=n)
        for s in range(0, n, chunk):
            part = mech.aggregate(mech.randomize(x[s:s + chunk], rng))
            stat = part if stat is None else stat + part
            prog.advance(task, min(chunk, n - s))
    est = mech.estimate(stat, n)
    elapsed = time.perf_counter() - t0
    lo, hi = est.ci(0.95)
    tab = Table(title=f"{type(mech).__name__}: n={n:,}, d={d}, eps={epsilon:g}  ({elapsed:.2f} s)")
    for col in ("item", "true fraction", "estimate", "std err", "95% CI"):
        tab.add_column(col, justify="right")
    for i in np.argsort(-true)[:top]:
        tab.add_row(str(i), f"{true[i]:.5f}", f"{est.values[i]:.5f}", f"{est.stderr[i]:.5f}",
                    f"[{lo[i]:.5f}, {hi[i]:.5f}]")
    console.print(tab)
    mse = float(np.mean((est.values - true) ** 2))
    if hasattr(mech, "variances"):  # exact per-item variances (HR, CMS, HCMS: collisions / block mass)
        theory = float(np.mean(mech.variances(n, true)))
    else:
        theory = float(np.mean([mech.variance(n, f) for f in true]))
    console.print(f"MSE {mse:.3e}   closed-form mean variance {theory:.3e}   ratio {mse / theory:.3f}")
    console.print(f"Privacy: {est.privacy}", markup=False)


experiment_app = typer.Typer(no_args_is_help=True, help="Reproduce the source documents' experiments.")
app.add_typer(experiment_app, name="experiment")

#: Modules that add commands. Each defines ``register(app, experiment_app)``; a module that
#: is not present (its layer not built yet) is skipped. Order = order in ``--help``.
COMMAND_MODULES = (
    "shuffledp.experiments.amplification_cli",
    "shuffledp.experiments.survey_cli",
    "shuffledp.experiments.keyvalue_cli",
    "shuffledp.experiments.compare_cli",
    "shuffledp.service.cli",
)


def _register_commands() -> None:
    import importlib

    for mod in COMMAND_MODULES:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name is not None and mod.startswith(e.name):
                continue  # that layer is not present
            raise
        m.register(app, experiment_app)


def _default_demo() -> None:
    """The main job on embedded defaults (replaced by the service demo once it exists)."""
    simulate(mechanism="olh", epsilon=1.0, d=1024, n=1_000_000, zipf=1.1, top=10, seed=1, chunk=200_000)


def main() -> None:  # console-script entry point
    _register_commands()
    if not any((c.name or (c.callback.__name__ if c.callback else "")) == "demo" for c in app.registered_commands):
        app.command(name="demo")(_default_demo)
    app()


if __name__ == "__main__":
    main()
