"""CLI: ``shuffledp compare counting|histogram|sum`` — choose a protocol for one setting.

Runs every shuffle protocol of the problem plus its LDP and CDP baselines at the same central
target ``(eps_c, delta)`` and ``n`` on the survey's synthetic data, and prints one table: RMSE
(exact statistic simulation where the protocol has it, so ``n = 10^7`` takes seconds), the
closed-form RMSE, the local eps each user's randomizer satisfies, the achieved central
statement, messages and bits per user, and analyzer time. The measurement code is the survey
reproduction's (:func:`shuffledp.experiments.survey.measure_point`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import typer

from ..cli import count

PROBLEMS = ("counting", "histogram", "sum")


def check_arguments(epsilon: float, n: int, *, delta: float, d: int, q: float, methods: list[str] | None,
                    reps: int) -> None:
    """Refuse a setting no method can run (``ValidationError`` naming the parameter and its range).

    The central target must be a real ``eps > 0`` and ``0 < delta < 1``; ``n >= 1`` users, a domain
    ``d >= 2``, a fraction ``q`` in [0, 1], ``reps >= 1`` and registry protocol names.
    """
    from ..core.errors import ValidationError
    from ..core.validation import check_delta, check_epsilon, check_positive_int, check_probability
    from ..shuffle.registry import protocol_class

    check_epsilon(epsilon, "eps")
    check_delta(delta, "delta")
    check_positive_int(n, "n")
    check_positive_int(d, "d", minimum=2)
    check_probability(q, "q")
    check_positive_int(reps, "reps")
    for m in methods or ():
        try:
            protocol_class(m)
        except ValidationError as e:  # unknown name, or a registered protocol that is not implemented
            raise ValidationError(f"methods: {e}", parameter="methods") from e


def compare_rows(problem: str, epsilon: float, n: int, *, delta: float = 1e-6, d: int = 100, q: float = 0.5,
                 methods: list[str] | None = None, reps: int = 50, seed: int = 1,
                 progress: Any = None) -> list[dict[str, Any]]:
    """One :func:`~shuffledp.experiments.survey.measure_point` row per method (skips are rows too)."""
    from ..core.errors import ValidationError
    from .survey import BASELINES, METHODS, SurveyConfig, make_data, measure_point, true_total

    if problem not in PROBLEMS:
        raise ValidationError(f"problem must be one of {PROBLEMS}, got {problem!r}", parameter="problem")
    check_arguments(epsilon, n, delta=delta, d=d, q=q, methods=methods, reps=reps)
    cfg = SurveyConfig(delta=delta, reps=reps, min_reps=min(10, reps), point_budget_s=5.0,
                       timing_max_messages=100_000, timing_repeats=1)
    names = list(methods) if methods else [*METHODS[problem], *BASELINES[problem]]
    rng = np.random.default_rng(seed)
    values = make_data(problem, n, rng, q=q, d=d)
    truth = true_total(problem, values, d)
    rows = []
    for name in names:
        if progress is not None:
            progress(name)
        rows.append(measure_point(name, problem, epsilon, n, values, truth, cfg, rng, q=q,
                                  d=d if problem == "histogram" else 0))
    return rows


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add the top-level ``compare`` command."""

    @app.command("compare")
    def compare(
        problem: str = typer.Argument(..., help="counting (bits), histogram (ints in [0, d)) or sum (reals in [0, 1])"),
        epsilon: float = typer.Option(1.0, "--epsilon", "--eps", help="central target eps_c"),
        delta: float = typer.Option(1e-6, help="central target delta"),
        n: int = typer.Option(1_000_000, parser=count(1), help="number of users (1e6 is accepted)"),
        d: int = typer.Option(100, parser=count(1), help="domain size (histograms)"),
        q: float = typer.Option(0.5, help="fraction of ones (counting data)"),
        methods: str = typer.Option("", help="comma-separated registry names (default: the problem's protocols "
                                             "and its LDP/CDP baselines)"),
        reps: int = typer.Option(50, parser=count(1), help="RMSE repetitions per method"),
        seed: int = typer.Option(1, help="simulation seed"),
    ) -> None:
        """Compare shuffle protocols with the LDP and CDP baselines at one central (eps, delta) and n."""
        from rich.console import Console
        from rich.table import Table

        from ..core.errors import ShuffleDPError

        console = Console(width=max(150, Console().width))
        chosen = [m.strip() for m in methods.split(",") if m.strip()] or None
        try:
            with console.status("measuring ...") as status:
                rows = compare_rows(problem, epsilon, n, delta=delta, d=d, q=q, methods=chosen, reps=reps,
                                    seed=seed, progress=lambda name: status.update(f"measuring {name} ..."))
        except ShuffleDPError as e:
            console.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from e

        def f(v: Any, fmt: str) -> str:
            return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

        tab = Table(title=f"{problem}: eps_c={epsilon:g}, delta={delta:g}, n={n:,}"
                          + (f", d={d}" if problem == "histogram" else "") + " (RMSE of totals)")
        for col in ("method", "model", "RMSE", "theory", "eps_l", "achieved (eps, delta)", "msgs/user",
                    "bits/user", "analyzer s", "note"):
            tab.add_column(col, justify="left" if col in ("method", "model", "note") else "right")
        for r in rows:
            achieved = (f"({f(r['eps_achieved'], '.4g')}, {f(r['delta_achieved'], '.2g')})"
                        if not math.isnan(r.get("eps_achieved", float("nan"))) else "-")
            note = r["reason"] if r["status"] != "ok" else ""
            tab.add_row(r["label"], r["model"] or "-", f(r["rmse"], ".4g"), f(r["rmse_theory"], ".4g"),
                        f(r["eps_local"], ".4g"), achieved, f(r["messages_per_user"], ".3g"),
                        f(r["bits_per_user"], ".3g"), f(r["analyzer_s"], ".3g"), note[:100])
        console.print(tab)
