"""``shuffledp archive`` (simulate a protocol's batch into a Parquet archive) and
``shuffledp aggregate`` (estimate from archives on the local, Dask or Spark engine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..cli import count, fail

__all__ = ["register", "make_engine", "parse_params", "print_archive_line"]

ENGINE_HELP = "where partitions run: local (in process), dask (LocalCluster or --scheduler), spark (local[2] or --master)"


def parse_params(items: list[str]) -> dict[str, Any]:
    """``["d=1024", "oracle=olh", "inner_params={\\"d\\": 8}"]`` -> dict (values read as JSON, else text)."""
    out: dict[str, Any] = {}
    for it in items:
        key, sep, raw = it.partition("=")
        key = key.strip()
        if not sep or not key:
            fail(f"--param must be NAME=VALUE, got {it!r}")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def make_engine(engine: str, scheduler: str | None, master: str | None, workers: int) -> Any:
    """The engine named on the command line; one line (exit 2) when it cannot start."""
    from . import ENGINES, get_engine

    if engine not in ENGINES:
        fail(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if scheduler is not None and engine != "dask":
        fail("--scheduler applies to --engine dask")
    if master is not None and engine != "spark":
        fail("--master applies to --engine spark")
    opts: dict[str, Any] = {}
    if engine == "dask":
        opts = {"scheduler": scheduler} if scheduler else {"workers": workers}
    elif engine == "spark":
        opts = {"master": master or f"local[{workers}]"}
    try:
        return get_engine(engine, **opts)
    except ModuleNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001 - a cluster or JVM that does not start: one line
        hint = " (Spark needs a Java runtime: java on the PATH or JAVA_HOME)" if engine == "spark" else ""
        fail(f"--engine {engine} could not start: {type(e).__name__}: {' '.join(str(e).split())[:300]}{hint}")



def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    """Add the top-level ``archive`` and ``aggregate`` commands."""

    @app.command("archive")
    def archive(
        name: str = typer.Argument(..., help="registry protocol (local or shuffle model), e.g. slh, ldp_oracle"),
        out: Path = typer.Option(..., "--out", help="archive folder to create (must not exist)"),
        epsilon: float = typer.Option(1.0, "--epsilon", "--eps", help="central target eps_c"),
        delta: float = typer.Option(1e-6, help="central target delta (0 for local-model baselines)"),
        n: int = typer.Option(100_000, parser=count(1), help="number of simulated users (1e6 is accepted)"),
        param: list[str] = typer.Option([], "--param", help="protocol parameter NAME=VALUE (repeatable; JSON values)"),
        seed: int = typer.Option(1, help="simulation seed (the archive is a function of seed, partitions, n)"),
        partitions: int = typer.Option(1, parser=count(1), help="encoding partitions = output files"),
        row_group: int = typer.Option(1 << 20, "--row-group", parser=count(1), help="messages per Parquet row group"),
        zipf: float = typer.Option(1.1, help="Zipf exponent of the synthetic categorical data"),
        engine: str = typer.Option("local", help=ENGINE_HELP),
        scheduler: str | None = typer.Option(None, help="Dask scheduler address tcp://host:port"),
        master: str | None = typer.Option(None, help="Spark master URL (default local[WORKERS])"),
        workers: int = typer.Option(2, parser=count(1), help="local Dask workers / Spark local threads"),
    ) -> None:
        """Simulate one shuffled batch of a registry protocol on synthetic data into a Parquet archive."""
        from .archive import information_bits, simulate_archive

        from ..shuffle import protocol
        from .base import check_engine_protocol

        params = parse_params(param)
        if out.exists():
            fail(f"--out {str(out)!r} exists; an archive is written to a new folder")
        # refuse bad parameters before an engine starts
        check_engine_protocol(protocol(name, epsilon=epsilon, delta=delta, n=n, **params))
        with make_engine(engine, scheduler, master, workers) as eng:
            info = simulate_archive(name, out, epsilon=epsilon, delta=delta, n=n, params=params, seed=seed,
                                    partitions=partitions, engine=eng, row_group=row_group, zipf=zipf)
        print_archive_line(info, out, information_bits(info))

    @app.command("aggregate")
    def aggregate(
        paths: list[Path] = typer.Argument(..., help="archive folders or part files (all of one archive)"),
        engine: str = typer.Option("local", help=ENGINE_HELP),
        scheduler: str | None = typer.Option(None, help="Dask scheduler address tcp://host:port"),
        master: str | None = typer.Option(None, help="Spark master URL (default local[WORKERS])"),
        workers: int = typer.Option(2, parser=count(1), help="local Dask workers / Spark local threads"),
        as_json: bool = typer.Option(False, "--json", help="print the release as JSON on stdout"),
        out: Path | None = typer.Option(None, "--out", help="also write the JSON release to this file "
                                                            "(written whole or not at all)"),
        top: int = typer.Option(10, parser=count(1), help="rows to show (largest estimates)"),
        device: str = typer.Option("cpu", help="where olh, blh, hr, ss, cms and hcms archives are counted: cpu "
                                               "(numpy), torch-cpu or cuda[:N] (PyTorch, the gpu extra); same counts"),
        device_fallback: bool = typer.Option(False, "--device-fallback",
                                             help="with --device cuda and no GPU, count on the CPU instead of failing"),
        each: bool = typer.Option(False, "--each", help="every PATH is its own archive (e.g. the releases an "
                                                        "analyzer exported): one estimate per archive, one engine job"),
    ) -> None:
        """Estimate from report archives on an engine; prints the estimate and its privacy statement."""
        from .archive import estimate_opened, open_releases

        dev = None if device.strip().lower() == "cpu" and not device_fallback else device
        # every archive opened and checked (and the device with it) before any engine starts
        infos = open_releases([[p] for p in paths] if each else [paths], dev, device_fallback)
        with make_engine(engine, scheduler, master, workers) as eng:
            results = estimate_opened(infos, eng)
        if each:
            _print_each(paths, results, engine, as_json, out, top)
            return
        info, stat, est = results[0]
        release = _release_json(info, stat, est, engine)
        if out is not None:
            _write_atomic(out, json.dumps(release, indent=1) + "\n")
        if as_json:
            typer.echo(json.dumps(release))
            return
        _print_release(info, est, engine, top)


def _release_json(info: Any, stat: Any, est: Any, engine: str) -> dict:
    return {"protocol": info.meta["protocol"], "epsilon": info.meta["epsilon"], "delta": info.meta["delta"],
            "n": info.meta["n"], "params": info.meta["params"], "task": info.meta["task"],
            "users": info.users, "messages": info.messages, "files": info.files, "engine": engine,
            "device": getattr(getattr(info.protocol, "oracle", None), "device", "cpu"),
            "statistic": [x.item() for x in stat.reshape(-1)], "estimate": est.to_dict(),
            "privacy": str(est.privacy)}


def _print_each(paths: list[Path], results: list, engine: str, as_json: bool, out: Path | None, top: int) -> None:
    releases = [{"archive": str(p), **_release_json(info, stat, est, engine)}
                for p, (info, stat, est) in zip(paths, results)]
    if out is not None:
        _write_atomic(out, json.dumps(releases, indent=1) + "\n")
    if as_json:
        typer.echo(json.dumps(releases))
        return
    for p, (info, _stat, est) in zip(paths, results):
        typer.echo(f"== {p}")
        _print_release(info, est, engine, top)


def _write_atomic(path: Path, text: str) -> None:
    import os
    import tempfile

    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    except OSError as e:
        fail(f"--out {str(path)!r} cannot be written ({e.strerror or type(e).__name__})")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        fail(f"--out {str(path)!r} cannot be written ({e.strerror or type(e).__name__})")


def print_archive_line(info: Any, out: Path, info_bits: float) -> None:
    import os

    size = sum(os.path.getsize(f) for f in info.files)
    per = 8.0 * size / max(info.messages, 1)
    typer.echo(f"wrote {out}: {info.meta['protocol']} (task {info.meta['task']}), {info.users:,} users, "
               f"{info.messages:,} messages in {len(info.files)} file(s), {size:,} bytes "
               f"({per:.2f} bits/message; the protocol's bits_per_message is "
               f"{info.protocol.bits_per_message:g}, ratio {8.0 * size / max(info_bits, 1.0):.3f})")


def _print_release(info: Any, est: Any, engine: str, top: int) -> None:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    console = Console()
    v = np.asarray(est.values).reshape(-1)
    s = np.asarray(est.stderr, dtype=float).reshape(-1) * np.ones_like(v)
    lo, hi = est.ci(0.95)
    lo, hi = np.broadcast_to(lo, v.shape), np.broadcast_to(hi, v.shape)
    tab = Table(title=f"{info.meta['protocol']}: {info.users:,} users, {info.messages:,} messages, "
                      f"{len(info.partitions)} partition(s) on {engine}")
    for col in ("item", "estimate", "std err", "95% CI"):
        tab.add_column(col, justify="right")
    names = est._names()
    for i in np.argsort(-v, kind="stable")[:top]:
        tab.add_row(str(names[i]), f"{v[i]:.6g}", f"{s[i]:.4g}", f"[{lo[i]:.6g}, {hi[i]:.6g}]")
    console.print(tab)
    console.print(f"Privacy: {est.privacy}", markup=False)
    if v.size > top:
        console.print(f"({v.size - top} more rows: --json prints them all)", markup=False)
