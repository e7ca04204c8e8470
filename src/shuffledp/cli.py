"""The ``shuffledp`` command line.

Every command refuses a bad argument before it starts anything, with one line on stderr naming
the parameter and its valid range (``error: --n must be ...``) and exit code 2; a missing optional
dependency is one line naming the extra to install. :class:`OneLineErrorsGroup` gives click's own
usage errors (unknown option, ``--n abc``) the same one-line form.
"""

from __future__ import annotations

import importlib
import sys
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from typer.core import TyperGroup

# typer >= 0.26 ships its own copy of click (typer._click); older versions use click itself. The
# exception classes are found from typer.BadParameter so both work.
_CLICK_EXC = {c.__name__: c for c in typer.BadParameter.__mro__}
ClickException = _CLICK_EXC["ClickException"]
_NoArgsIsHelpError = getattr(sys.modules[ClickException.__module__], "NoArgsIsHelpError", None)

#: The optional dependencies of each extra (``pip install 'shuffledp[<extra>]'``) that commands need.
EXTRAS: dict[str, tuple[str, ...]] = {
    "service": ("fastapi", "uvicorn", "httpx", "sqlalchemy", "alembic", "cryptography"),
    "plots": ("matplotlib",),
    "dask": ("dask", "distributed"),
    "spark": ("pyspark",),
    "archive": ("pyarrow",),
    "ml": ("torch", "opacus", "sklearn"),
    "gpu": ("torch",),
}
_MODULE_EXTRA = {m: extra for extra, mods in EXTRAS.items() for m in mods} | {"psycopg": "service"}


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` as one line on stderr and exit with code 2 (a usage error)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _extra_message(command: str, module: str) -> str:
    extra = _MODULE_EXTRA[module]
    return (f"`shuffledp {command}` needs the optional dependency {module}: "
            f"pip install 'shuffledp[{extra}]'")


def require_extras(command: str, *extras: str) -> None:
    """Refuse (one line, exit 2) unless every module of each named extra imports.

    Imports them (a command that needs them imports them anyway), so a broken install is caught
    as well as a missing one.
    """
    for extra in extras:
        for mod in EXTRAS[extra]:
            try:
                importlib.import_module(mod)
            except ImportError:
                fail(_extra_message(command, mod))


def writable_dir(path: str | Path, option: str = "--out") -> Path:
    """Create ``path`` (with parents) and check a file can be written in it; else fail naming ``option``."""
    import tempfile

    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".shuffledp-write-test-"):
            pass
    except OSError as e:
        fail(f"{option} must be a folder that can be created and written, got {str(p)!r} "
             f"({e.strerror or type(e).__name__})")
    return p


def experiment_outdir(command: str, folder: str, quick: bool, full: bool, out: Path | None) -> Path:
    """The output folder of an experiment run, checked before the run starts.

    Every experiment takes exactly one of ``--quick`` (a smoke run) or ``--full`` (the documented
    run). Without ``--out``, ``--quick`` writes to ``results/<folder>-quick/`` and ``--full`` to
    ``results/<folder>/``, the committed results that ``--full`` reproduces: a quick run never
    overwrites them. Refuses (one line, exit 2) without matplotlib (``plots`` extra: every
    experiment's report shows its figures) or when the folder cannot be created and written.
    """
    if quick == full:
        fail("choose exactly one of --quick or --full (--quick: a smoke run; --full: the documented run)")
    require_extras(f"experiment {command}", "plots")
    if out is None:
        out = Path("results") / (f"{folder}-quick" if quick else folder)
    return writable_dir(out, "--out")


def parse_count(value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer from ``1000000``, ``1_000_000`` or ``1e6`` (integral floats exactly); ValueError otherwise.

    The text is read as an exact decimal, so ``1e6`` is accepted while ``1.5e0`` and ``1e-3`` (not
    whole numbers) are refused, and ``1e30`` is exact (no float rounding). The range is
    ``[minimum, maximum]`` (``maximum=None``: unbounded).
    """
    rng = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    if isinstance(value, bool):
        raise ValueError(f"must be an integer {rng}, got {value!r}")
    if isinstance(value, int):
        k = value
    else:
        try:
            x = Decimal(str(value).strip().replace("_", ""))
        except InvalidOperation:
            raise ValueError(f"must be an integer {rng} (e.g. 1000000 or 1e6), got {value!r}") from None
        if not x.is_finite() or x != x.to_integral_value():
            raise ValueError(f"must be an integer {rng} (e.g. 1000000 or 1e6), got {value!r}")
        k = int(x)
    if k < minimum or (maximum is not None and k > maximum):
        raise ValueError(f"must be an integer {rng}, got {k}")
    return k


def count(minimum: int = 1, maximum: int | None = None) -> Any:
    """An option parser for counts (``typer.Option(..., parser=count(1))``): :func:`parse_count`."""

    def integer(value: Any) -> int:
        return parse_count(value, minimum, maximum)

    return integer


def _param_name(e: Any) -> str:
    if e.param_hint is not None:
        return e.param_hint if isinstance(e.param_hint, str) else "/".join(e.param_hint)
    p = e.param
    if p is not None:
        opts = [o for o in getattr(p, "opts", []) if o.startswith("-")]
        return "/".join(opts) if opts else str(getattr(p, "human_readable_name", p.name)).lower()
    return ""


def one_line(e: Any) -> str:
    """The one-line form of a click usage error: ``--n must be ...`` / ``--eps: 'x' is not a valid float.``"""
    if isinstance(e, typer.BadParameter):
        msg = e.message.removeprefix("Value error, ")  # typer's pydantic coercion prefixes parser errors
        name = _param_name(e)
        if name:
            msg = f"{name} {msg}" if msg.startswith("must") else f"{name}: {msg}"
    else:
        msg = e.format_message()
    return " ".join(msg.split())


class OneLineErrorsGroup(TyperGroup):
    """Typer's group whose errors are one line on stderr: no usage box, no traceback.

    Usage errors (unknown option, unparsable value), a :class:`~shuffledp.core.errors.ValidationError`
    escaping a command and a missing optional dependency all print ``error: ...`` and exit 2.
    """

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        from .core.errors import ValidationError

        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as e:
            if _NoArgsIsHelpError is not None and isinstance(e, _NoArgsIsHelpError):
                typer.echo(e.format_message())
                sys.exit(0)
            typer.echo(f"error: {one_line(e)}", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except ValidationError as e:
            typer.echo(f"error: {e}", err=True)
            sys.exit(2)
        except ModuleNotFoundError as e:
            top = (e.name or "").split(".")[0]
            if top not in _MODULE_EXTRA:
                raise
            command = " ".join(a for a in argv[:2] if not a.startswith("-")) or "this command"
            typer.echo(f"error: {_extra_message(command, top)}", err=True)
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(cls=OneLineErrorsGroup, add_completion=False, no_args_is_help=True,
                  help="shuffledp: differential privacy in the Encode-Shuffle-Analyze model.")
console = Console()


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"shuffledp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="print the version and exit")) -> None:
    """shuffledp: differential privacy in the Encode-Shuffle-Analyze model."""


def zipf_dataset(n: int, d: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """Built-in synthetic dataset: n users' items drawn from a Zipf(s) law over [0, d)."""
    w = 1.0 / np.arange(1, d + 1) ** s
    return rng.choice(d, size=n, p=w / w.sum())


@app.command()
def simulate(
    mechanism: str = typer.Option("olh", help="frequency oracle: grr, sue, oue, rappor, blh, olh, hr, ss, cms, hcms"),
    epsilon: float = typer.Option(1.0, "--epsilon", "--eps", help="local privacy parameter eps"),
    d: int = typer.Option(1024, parser=count(minimum=2), help="domain size"),
    n: int = typer.Option(1_000_000, parser=count(minimum=1), help="number of simulated users (1e6 works)"),
    zipf: float = typer.Option(1.1, help="Zipf exponent of the synthetic data"),
    top: int = typer.Option(10, parser=count(minimum=1), help="rows to show"),
    seed: int = typer.Option(1, help="simulation seed (simulation only; services never take a seed)"),
    chunk: int = typer.Option(200_000, parser=count(minimum=1), help="users per chunk (bounds memory)"),
    out: Path | None = typer.Option(None, "--out", help="write the round's reports as a Parquet archive folder "
                                                        "(one file per chunk) instead; estimate it with "
                                                        "`shuffledp aggregate`"),
    device: str = typer.Option("cpu", help="where olh, blh, hr, ss, cms and hcms aggregate and estimate: cpu "
                                           "(numpy), torch-cpu, cuda or cuda:N (PyTorch; extra shuffledp[gpu])"),
    device_fallback: bool = typer.Option(False, "--device-fallback",
                                         help="with --device cuda and no GPU, aggregate on the CPU instead of failing"),
) -> None:
    """Simulate one collection round of a local frequency oracle on a synthetic Zipf dataset."""
    from .core.errors import ValidationError

    try:
        if device.strip().lower() != "cpu" or device_fallback:
            from .local.registry import device_oracles

            if mechanism not in device_oracles():
                fail(f"--device applies to the oracles {', '.join(device_oracles())}, not {mechanism!r}")
            if out is not None:
                fail("--device applies to aggregation; --out only writes reports (aggregate them later)")
        if out is not None:
            _simulate_archive(mechanism, epsilon, d, n, zipf, seed, chunk, out)
            return
        _simulate(mechanism, epsilon, d, n, zipf, top, seed, chunk, device, device_fallback)
    except ValidationError as e:  # bad parameters: one clear line and exit code 2, never a traceback
        fail(str(e))


def _simulate_archive(mechanism: str, epsilon: float, d: int, n: int, zipf: float, seed: int, chunk: int,
                      out: Path) -> None:
    """The round's reports (registry protocol ``ldp_oracle``) archived with :func:`simulate_archive`."""
    import math

    from .core.validation import check_positive_int
    from .engines.archive import information_bits, simulate_archive
    from .engines.cli import print_archive_line

    check_positive_int(seed, "seed", minimum=0)
    if out.exists():
        fail(f"--out {str(out)!r} exists; an archive is written to a new folder")
    params: dict[str, Any] = {"d": d, "oracle": mechanism}
    if mechanism in ("cms", "hcms"):
        params["oracle_params"] = {"hash_seed": seed}
    info = simulate_archive("ldp_oracle", out, epsilon=epsilon, delta=0.0, n=n, params=params, seed=seed,
                            partitions=math.ceil(n / chunk), zipf=zipf)
    print_archive_line(info, out, information_bits(info))


def _simulate(mechanism: str, epsilon: float, d: int, n: int, zipf: float, top: int, seed: int,
              chunk: int, device: str = "cpu", device_fallback: bool = False) -> None:
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
    # the sketches draw their hash family per construction unless given one: a simulation takes it
    # from --seed so the same command gives the same numbers
    family: dict[str, Any] = {"hash_seed": seed} if mechanism in ("cms", "hcms") else {}
    if device.strip().lower() != "cpu" or device_fallback:  # an oracle of device_oracles(), checked above
        family.update(device=device, device_fallback=device_fallback)
    mech = frequency_oracle(mechanism, epsilon, d, **family)
    rng = np.random.default_rng(seed)
    x = zipf_dataset(n, d, zipf, rng)
    true = np.bincount(x, minlength=d) / n
    stat = None
    t0 = time.perf_counter()
    # the bar goes to stderr: stdout carries only the results
    with Progress(console=Console(stderr=True), transient=True) as prog:
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
    "shuffledp.experiments.heavy_hitters_cli",
    "shuffledp.experiments.compare_cli",
    "shuffledp.experiments.private_learning_cli",
    "shuffledp.engines.cli",
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
    simulate(mechanism="olh", epsilon=1.0, d=1024, n=1_000_000, zipf=1.1, top=10, seed=1, chunk=200_000, out=None)


def main() -> None:  # console-script entry point
    _register_commands()
    if not any((c.name or (c.callback.__name__ if c.callback else "")) == "demo" for c in app.registered_commands):
        app.command(name="demo")(_default_demo)
    app()


if __name__ == "__main__":
    main()
