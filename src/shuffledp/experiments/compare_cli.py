"""CLI: ``shuffledp compare counting|histogram|sum`` — choose a protocol for one setting.

Runs every shuffle protocol of the problem plus its LDP and CDP baselines at the same central
target ``(eps_c, delta)`` and ``n`` on the survey's synthetic data, and prints one table: RMSE
(exact statistic simulation where the protocol has it, so ``n = 10^7`` takes seconds), the
closed-form RMSE at the same data, the local eps each user's randomizer satisfies, the achieved
central statement, messages and bits per user, and analyzer time. A legend explaining every
column and a numbered list of notes follow the table; ``--json`` / ``--csv`` print the rows
instead. The measurement code is the survey reproduction's
(:func:`shuffledp.experiments.survey.measure_point`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from typing import Any

import numpy as np
import typer

from ..cli import count, fail

PROBLEMS = ("counting", "histogram", "sum")

#: The machine-readable columns of ``--json`` / ``--csv``, in order.
OUTPUT_FIELDS = ["method", "label", "model", "problem", "epsilon", "delta", "n", "d", "q", "status",
                 "eps_achieved", "delta_achieved", "eps_local", "rmse", "rmse_se", "reps", "rmse_how",
                 "theory", "theory_how", "theory_at_zero", "messages_per_user", "bits_per_user",
                 "analyzer_s", "note"]

#: One line per table column (printed under the table and in docs/cli.md).
LEGEND = [
    ("method", "the protocol (survey label); registry name in --json/--csv"),
    ("model", "shuf = shuffle model, LDP = local, CDP = central (trusted curator)"),
    ("RMSE", "measured root mean squared error of the released total(s) over the repetitions "
             "(histograms: averaged over the d bins)"),
    ("theory", "closed-form RMSE at the same data (histograms: mean of the per-bin variance at the "
               "true counts; sums: the variance at the values), where the method's closed form takes data"),
    ("eps_l", "the local eps each user's randomizer satisfies ('-': no local guarantee)"),
    ("eps, delta", "the central (eps, delta) the protocol achieves at this n"),
    ("msg/u", "messages each user sends (expected)"),
    ("bit/u", "bits each user sends (expected)"),
    ("ms", "analyzer time in milliseconds (aggregate + estimate)"),
    ("note", "[k] refers to the numbered notes below the legend"),
]


def _short_label(label: str) -> str:
    return label.replace(" (not in survey)", "")


def _z_apart(row: dict[str, Any]) -> float:
    """|RMSE - theory| in standard errors of the RMSE estimate.

    The standard error is the larger of the sample one and ``theory / sqrt(2 reps)`` (the standard
    error of an RMSE over ``reps`` normal errors whose RMSE is ``theory``): with few repetitions the
    sample standard error is itself noisy and would flag chance low values.
    """
    rmse, theory, se, reps = row["rmse"], row["theory"], row["rmse_se"], row.get("reps") or 0
    if not (math.isfinite(rmse) and math.isfinite(theory)) or reps < 1:
        return float("nan")
    se = se if math.isfinite(se) else 0.0
    se = max(se, theory / math.sqrt(2.0 * reps), 1e-12)
    return abs(rmse - theory) / se


def disagreement_note(row: dict[str, Any], proto: Any, truth: np.ndarray) -> str:
    """Why the measured RMSE and the closed form disagree, or "" when they agree.

    They disagree when they are more than 4 standard errors of the RMSE estimate and more than
    10 % apart. The explanation names the cause where it is known (Hist_MM's truncation of small
    counts, a stated error bound rather than a variance); otherwise it says by how much.
    """
    rmse, theory = row["rmse"], row["theory"]
    if not (math.isfinite(rmse) and math.isfinite(theory)) or theory <= 0:
        return ""
    if not _z_apart(row) > 4.0 or abs(rmse / theory - 1.0) <= 0.10:
        return ""
    ratio = rmse / theory
    head = f"RMSE is {ratio:.3g}x theory"
    n = int(row["n"])
    if row["method"] == "hist_mm" and proto is not None and hasattr(proto, "one_minus_p"):
        cut = n * float(proto.one_minus_p)
        below = int(np.count_nonzero(truth < cut))
        return (f"{head}: the analyzer zeroes bin j when its message count |y_j| <= n (truncation), "
                f"so true counts below about n(1-p) = {cut:.4g} are estimated near 0; {below} of "
                f"{truth.size} bins are below it here. The closed form n p (1-p) is the variance above "
                f"the truncation and leaves this bias out.")
    doc = (getattr(getattr(proto, "variance", None), "__doc__", "") or "").strip().split("\n")[0]
    if "bound" in doc.lower():
        return f"{head}: theory is a stated error bound, not a variance ({doc})"
    if row.get("theory_how") == NO_DATA:
        what = "bin" if row["problem"] == "histogram" else "user"
        return (f"{head}: this method's closed form takes no data (it is the variance of an empty bin, or "
                f"the worst case over a {what}'s value), while the error depends on the data")
    return (f"{head} ({_z_apart(row):.0f} standard errors apart): the closed form "
            f"does not describe this estimator at this setting" + (f" ({doc})" if doc else ""))


def _theory(problem: str, proto: Any, n: int, values: np.ndarray, truth: np.ndarray,
            fallback: float) -> tuple[float, str]:
    """Closed-form RMSE at the data, and how it was computed.

    Histograms: the root of the mean over the bins of ``variance(n, c_j)`` at each true count
    ``c_j`` (a bin's variance grows with its count). Sums: ``variance(n, values)`` (the rounding
    variance depends on the values; without them a protocol states the worst case). Counting, and
    any method whose closed form takes no data: ``variance(n)`` (``fallback``).
    """
    if proto is not None and problem in ("histogram", "sum"):
        try:
            if problem == "histogram":
                var = float(np.mean([float(proto.variance(n, float(c))) for c in truth]))
                return math.sqrt(var), "mean over bins of variance(n, true count)"
            return math.sqrt(float(proto.variance(n, values))), "variance(n, values)"
        except TypeError:  # a closed form that takes no data
            pass
    return fallback, "variance(n)" if problem == "counting" else NO_DATA


NO_DATA = "variance(n): this closed form takes no data"


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
    """One :func:`~shuffledp.experiments.survey.measure_point` row per method (skips are rows too).

    Each row also has ``theory`` (closed-form RMSE at the data, see :func:`_theory`; the survey's
    ``rmse_theory`` is the variance at count 0 for histograms and stays as ``theory_at_zero``),
    ``theory_how`` and ``note`` (why the method was skipped, and why RMSE and theory disagree;
    see :func:`disagreement_note`). ``progress(name)`` is called before each method.
    """
    from ..core.errors import ValidationError
    from .survey import BASELINES, METHODS, SurveyConfig, _default_factory, make_data, measure_point, true_total

    if problem not in PROBLEMS:
        raise ValidationError(f"problem must be one of {PROBLEMS}, got {problem!r}", parameter="problem")
    check_arguments(epsilon, n, delta=delta, d=d, q=q, methods=methods, reps=reps)
    cfg = SurveyConfig(delta=delta, reps=reps, min_reps=min(10, reps), point_budget_s=5.0,
                       timing_max_messages=100_000, timing_repeats=1)
    names = list(methods) if methods else [*METHODS[problem], *BASELINES[problem]]
    rng = np.random.default_rng(seed)
    values = make_data(problem, n, rng, q=q, d=d)
    truth = true_total(problem, values, d)
    built: dict[str, Any] = {}

    def factory(name: str, **kw: Any) -> Any:
        built[name] = proto = _default_factory(name, **kw)
        return proto

    rows = []
    for name in names:
        if progress is not None:
            progress(name)
        row = measure_point(name, problem, epsilon, n, values, truth, cfg, rng, q=q,
                            d=d if problem == "histogram" else 0, factory=factory)
        proto = built.get(name)
        row["theory_at_zero"] = row["rmse_theory"]
        row["theory"], row["theory_how"] = _theory(problem, proto, n, values, truth, row["rmse_theory"])
        notes = [row["reason"]] if row["reason"] else []
        why = disagreement_note(row, proto, truth)
        if why:
            notes.append(why)
        row["note"] = "; ".join(notes)
        rows.append(row)
    return rows


def _num(v: Any, sig: int = 3) -> str:
    """Compact number: 3 significant digits, exponent without '+' and leading zeros (1.3e3)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    s = format(float(v), f".{sig}g")
    if "e" in s:
        m, e = s.split("e")
        s = f"{m}e{int(e)}"
    return s


_MODEL = {"shuffle": "shuf", "local": "LDP", "central": "CDP"}
#: columns dropped, in this order, when the table does not fit the terminal
_DROPPABLE = ("ms", "bit/u", "msg/u", "model")


def render_table(rows: list[dict[str, Any]], title: str, width: int) -> Any:
    """The rich renderables of the human output (title, table, legend, notes), fitted to ``width``.

    The table never wraps a cell: columns are dropped (analyzer time, bits, messages, model; the
    legend says which) until it fits; notes are a numbered list below, wrapped by rich.
    """
    from rich import box
    from rich.console import Console, Group
    from rich.table import Table
    from rich.text import Text

    notes: list[str] = []
    cells = []
    for r in rows:
        mark = ""
        if r.get("note"):
            notes.append(r["note"])
            mark = f"[{len(notes)}]"
        cells.append({
            "method": _short_label(r["label"]), "model": _MODEL.get(r["model"], r["model"] or "-"),
            "RMSE": _num(r["rmse"]), "theory": _num(r["theory"]), "eps_l": _num(r["eps_local"]),
            "eps": _num(r["eps_achieved"], 4) if not math.isnan(r["eps_achieved"]) else "-",
            "delta": _num(r["delta_achieved"], 2), "msg/u": _num(r["messages_per_user"]),
            "bit/u": _num(r["bits_per_user"]),
            "ms": _num(r["analyzer_s"] * 1e3 if isinstance(r["analyzer_s"], float) else r["analyzer_s"]),
            "note": mark,
        })
    cols = ["method", "model", "RMSE", "theory", "eps_l", "eps", "delta", "msg/u", "bit/u", "ms", "note"]

    def build(columns: list[str]) -> Table:
        tab = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)
        for c in columns:
            tab.add_column(c, justify="left" if c in ("method", "model", "note") else "right", no_wrap=True)
        for row in cells:
            tab.add_row(*[Text(row[c]) for c in columns])
        return tab

    measure = Console(width=10_000, file=io.StringIO())
    dropped: list[str] = []
    while True:
        tab = build(cols)
        if measure.measure(tab).maximum <= width or not any(c in cols for c in _DROPPABLE):
            break
        c = next(c for c in _DROPPABLE if c in cols)
        cols.remove(c)
        dropped.append(c)
    legend = Table.grid(padding=(0, 1))
    legend.add_column(no_wrap=True, style="bold")
    legend.add_column(overflow="fold")
    for name, text in LEGEND:
        if not any(part in cols for part in name.split(", ")):
            continue
        legend.add_row(Text(f"  {name}"), Text(text))
    if dropped:
        legend.add_row("", f"(not shown at this width: {', '.join(dropped)}; widen the terminal or use --json)")
    parts: list[Any] = [Text(title, style="bold"), tab, Text("Columns", style="bold"), legend]
    if notes:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for i, nt in enumerate(notes, 1):
            grid.add_row(Text(f"  [{i}]"), Text(nt))
        parts += [Text(""), Text("Notes", style="bold"), grid]
    return Group(*parts)


def rows_json(rows: list[dict[str, Any]]) -> str:
    """The rows as a JSON array of objects with :data:`OUTPUT_FIELDS` (NaN and inf become null)."""
    def clean(v: Any) -> Any:
        if isinstance(v, (float, np.floating)):
            v = float(v)
            return v if math.isfinite(v) else None
        if isinstance(v, np.integer):
            return int(v)
        return v

    return json.dumps([{k: clean(r.get(k)) for k in OUTPUT_FIELDS} for r in rows], indent=2, allow_nan=False)


def rows_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV with a header of :data:`OUTPUT_FIELDS` (NaN is an empty cell)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=OUTPUT_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v)
                    for k, v in ((k, r.get(k)) for k in OUTPUT_FIELDS)})
    return buf.getvalue()


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
        as_json: bool = typer.Option(False, "--json", help="print the rows as a JSON array on stdout "
                                                          "(redirect to save: > rows.json)"),
        as_csv: bool = typer.Option(False, "--csv", help="print the rows as CSV on stdout"),
    ) -> None:
        """Compare shuffle protocols with the LDP and CDP baselines at one central (eps, delta) and n."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from ..core.errors import ShuffleDPError

        if as_json and as_csv:
            fail("choose at most one of --json or --csv")
        chosen = [m.strip() for m in methods.split(",") if m.strip()] or None
        try:  # refuse before the bar starts
            if problem not in PROBLEMS:
                from ..core.errors import ValidationError

                raise ValidationError(f"problem must be one of {PROBLEMS}, got {problem!r}", parameter="problem")
            check_arguments(epsilon, n, delta=delta, d=d, q=q, methods=chosen, reps=reps)
        except ShuffleDPError as e:
            fail(str(e))
        from .survey import BASELINES, METHODS

        total = len(chosen) if chosen else len(METHODS[problem]) + len(BASELINES[problem])
        # the bar goes to stderr (stdout stays the table, or clean JSON/CSV), and disappears when done
        with Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as prog:
            task = prog.add_task("measuring", total=total)
            started = [False]

            def step(name: str) -> None:
                if started[0]:
                    prog.advance(task)
                started[0] = True
                prog.update(task, description=f"measuring {name}")

            try:
                rows = compare_rows(problem, epsilon, n, delta=delta, d=d, q=q, methods=chosen, reps=reps,
                                    seed=seed, progress=step)
            except ShuffleDPError as e:
                fail(str(e))
        if as_json:
            sys.stdout.write(rows_json(rows) + "\n")
            return
        if as_csv:
            sys.stdout.write(rows_csv(rows))
            return
        console = Console()
        title = (f"{problem}: eps_c={epsilon:g}, delta={delta:g}, n={n:,}"
                 + (f", d={d}" if problem == "histogram" else "") + " (RMSE of totals)")
        console.print(render_table(rows, title, console.width))
