"""``shuffledp serve`` and ``shuffledp demo`` (the README's main job)."""

from __future__ import annotations

import typer

from ..cli import count, fail, require_extras, writable_dir

__all__ = ["register"]


def register(app: typer.Typer, experiment_app: typer.Typer) -> None:
    @app.command(name="serve")
    def serve(role: str = typer.Argument(..., help="shuffler or analyzer"),
              db: str = typer.Option(..., "--db", help="SQLAlchemy URL: sqlite:///path.db or postgresql://..."),
              host: str = typer.Option("127.0.0.1", help="bind address"),
              port: int = typer.Option(8080, parser=count(0, 65535), help="port in [0, 65535] (0 = ephemeral)"),
              port_file: str = typer.Option(None, help="write the bound port here once listening"),
              tick: float = typer.Option(60.0, help="shuffler: batcher period in seconds"),
              close_delay: float = typer.Option(300.0, help="shuffler: seconds after a window ends before it closes"),
              forward_timeout: float = typer.Option(30.0, help="shuffler: seconds to wait for the analyzer per forward"),
              retention_every: float = typer.Option(3600.0, help="seconds between retention rounds "
                                                                 "(deletes data older than the task's retention_days)"),
              ) -> None:
        """Run the shuffler or the analyzer service (secrets from SHUFFLEDP_* environment variables)."""
        import math

        if role not in ("shuffler", "analyzer"):
            fail(f"ROLE must be 'shuffler' or 'analyzer', got {role!r}")
        for name, value, low in (("--tick", tick, 0.0), ("--forward-timeout", forward_timeout, 0.0),
                                 ("--retention-every", retention_every, 0.0)):
            if not (math.isfinite(value) and value > low):
                fail(f"{name} must be a finite number of seconds > 0, got {value:g}")
        if not (math.isfinite(close_delay) and close_delay >= 0):
            fail(f"--close-delay must be a finite number of seconds >= 0, got {close_delay:g}")
        require_extras(f"serve {role}", "service")
        from .serve import StartupError, run
        try:  # run() checks --port and --db (URL, scheme, connection) before it builds the app
            run(role, db, host, port, port_file, tick, close_delay, forward_timeout, retention_every)
        except StartupError as e:
            fail(str(e))

    shuffler_app = typer.Typer(no_args_is_help=True, help="Shuffler operator commands (run against its database).")
    app.add_typer(shuffler_app, name="shuffler")

    def _batch_ids(batch: list[str]) -> list[bytes]:
        try:
            out = [bytes.fromhex(b) for b in batch]
        except ValueError as e:
            raise typer.BadParameter("--batch must be a batch id in hex (64 characters)", param_hint="--batch") from e
        if any(len(b) != 32 for b in out):
            raise typer.BadParameter("--batch must be a batch id in hex (64 characters)", param_hint="--batch")
        return out

    def _on_shuffler_db(db: str, action):  # noqa: ANN001, ANN202 - typer-internal helper
        """Run ``action(engine)`` on an existing shuffler database; one-line error and exit 2 otherwise.

        An operator command never creates a database: a SQLite path that does not exist, a URL
        SQLAlchemy cannot parse or a server it cannot reach is refused before anything is written.
        """
        import os

        from sqlalchemy import inspect
        from sqlalchemy.exc import ArgumentError, SQLAlchemyError

        from .storage import make_engine, upgrade
        if db.startswith("sqlite"):
            path = db.split(":///", 1)[1] if ":///" in db else ""
            if not path or not os.path.isfile(path):
                typer.echo(f"error: --db: no shuffler database at {path or db!r}", err=True)
                raise typer.Exit(2)
        elif not db.startswith(("postgresql://", "postgresql+psycopg://")):
            typer.echo(f"error: --db must be sqlite:///PATH or postgresql://..., got {db!r}", err=True)
            raise typer.Exit(2)
        try:
            eng = make_engine(db)
        except ArgumentError as e:
            typer.echo(f"error: --db: {e}", err=True)
            raise typer.Exit(2) from None
        try:
            if not inspect(eng).has_table("shuffler_batches"):
                typer.echo(f"error: --db: {db!r} holds no shuffler database", err=True)
                raise typer.Exit(2)
            upgrade(eng)
            return action(eng)
        except ValueError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except SQLAlchemyError as e:
            typer.echo(f"error: --db: cannot use the shuffler database ({type(e).__name__})", err=True)
            raise typer.Exit(2) from None
        finally:
            eng.dispose()

    @shuffler_app.command(name="requeue")
    def requeue(db: str = typer.Option(..., "--db", help="the shuffler's SQLAlchemy URL"),
                batch: list[str] = typer.Option(None, "--batch", help="batch id (hex); repeatable"),
                all_rejected: bool = typer.Option(False, "--all-rejected", help="every rejected batch"),
                ) -> None:
        """Send rejected batches to the analyzer again (and retry named retrying batches now)."""
        from .shuffler import requeue_batches
        if bool(batch) == all_rejected:
            raise typer.BadParameter("give --batch ID (repeatable) or --all-rejected, not both",
                                     param_hint="--batch/--all-rejected")
        ids = _batch_ids(batch) if batch else None
        done = _on_shuffler_db(db, lambda eng: requeue_batches(eng, ids))
        for r in done:
            typer.echo(f"requeued batch {r['batch_id']} ({r['n']} reports, was {r['was']}) of task {r['task_id']}")
        typer.echo(f"{len(done)} batch(es) requeued; the running shuffler forwards them at its next round")

    @shuffler_app.command(name="discard")
    def discard(db: str = typer.Option(..., "--db", help="the shuffler's SQLAlchemy URL"),
                batch: list[str] = typer.Option(..., "--batch", help="rejected batch id (hex); repeatable"),
                ) -> None:
        """Delete the envelopes of rejected batches the analyzer will never take (counted, logged)."""
        from .shuffler import discard_batches
        ids = _batch_ids(batch)
        done = _on_shuffler_db(db, lambda eng: discard_batches(eng, ids))
        for r in done:
            typer.echo(f"discarded batch {r['batch_id']} ({r['n']} reports) of task {r['task_id']}")

    @shuffler_app.command(name="issue-token")
    def issue_client_token(tokens_file: str = typer.Option(..., "--tokens-file",
                                                           help="the file SHUFFLEDP_CLIENT_TOKENS_FILE names"),
                           label: str = typer.Option("", help="operator's note kept next to the digest"),
                           ) -> None:
        """Create a client bearer token: prints it once, appends only its SHA-256 to the tokens file."""
        from .client_auth import issue_token
        try:
            typer.echo(issue_token(tokens_file, label))
        except (OSError, ValueError) as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None

    def _parse_params(items: list[str]) -> dict:
        import json as _json
        out: dict = {}
        for it in items:
            key, sep, val = it.partition("=")
            if not sep or not key:
                fail(f"--param must be KEY=VALUE, got {it!r}")
            try:
                out[key] = _json.loads(val)
            except ValueError:
                out[key] = val   # a bare word is a string
        return out

    def _check_protocol_demo(name: str, eps: float, delta: float, n: int, params: dict, d: int,
                             label: str = "") -> None:
        from ..core.errors import ValidationError
        from .config import build_protocol
        from .demo import protocol_demo_params
        try:
            params = protocol_demo_params(name, params, d)
            p = build_protocol({"name": name, "epsilon": eps, "delta": delta, "n": n, "params": params})
            p.message_schema()
        except ValidationError as e:
            fail(f"{label or '--protocol ' + name}: {e}")
        except NotImplementedError as e:
            fail(f"{label or '--protocol ' + name}: has no client side to deploy ({e})")

    def _print_protocol_demo(con, results: list) -> None:
        from rich.table import Table
        tab = Table(title="deployed over HTTP: service vs in-process pipeline")
        for col in ("protocol", "msg/user", "shufflers", "n", "max error", "svc-pipe", "privacy", "s"):
            tab.add_column(col, overflow="fold")
        for r in results:
            diff = r.get("max_abs_diff_in_process")
            err = r.get("max_abs_error")
            tab.add_row(str(r["protocol"]), f"{r['messages_per_user']:.3g}", str(r["n_shufflers"]), f"{r['n']:,}",
                        "-" if err is None else f"{err:.4g}",
                        ("n/a" if diff is None else f"{diff:.3g}"),
                        r["privacy_statement"]["text"].split(" [")[0], f"{r['total_s']:.0f}")
        con.print(tab)
        con.print("max error: of the estimated totals (counts, sums); svc-pipe: max |service estimate - in-process "
                  "pipeline on the same messages| (n/a where shufflers add fakes or the curator adds noise)",
                  markup=False)

    @app.command(name="demo")  # explicit name: shuffledp.cli checks it to skip its fallback demo
    def demo(n: int = typer.Option(100_000, parser=count(1), help="simulated clients (1e5 works)"),
             d: int = typer.Option(16, parser=count(2), help="domain size"),
             epsilon: float = typer.Option(2.0, "--epsilon", "--eps", help="local eps0 of each report"),
             mechanism: str = typer.Option("grr", help="frequency oracle (registry name)"),
             eps_central: float = typer.Option(1.0, help="target central eps of a released batch"),
             delta: float = typer.Option(1e-8, help="target central delta"),
             out: str = typer.Option("out/demo", help="directory for the HTML report"),
             protocol: str = typer.Option("", "--protocol", help="deploy this registry protocol instead (its "
                                          "target is --eps-central/--delta for n users; see `shuffledp protocols`)"),
             param: list[str] = typer.Option([], "--param", help="a protocol parameter as KEY=VALUE (JSON value), "
                                             "repeatable, e.g. --param mode='\"parallel\"'"),
             serve: bool = typer.Option(False, "--serve", help="leave the services up after the demo and print the "
                                        "analyzer dashboard's address until interrupted (Ctrl-C)"),
             port: int = typer.Option(None, "--port", parser=count(1, 65535),
                                      help="with --serve: the analyzer's loopback port (default: a free one)"),
             ) -> None:
        """End to end: shuffler + analyzer on loopback, n clients through the SDK, estimates vs truth.

        Without --protocol: a single-message local-oracle task (--mechanism) and, beside it, the
        multi-message protocol Cnt_2M (each user sends 0, 1 or 2 one-bit messages) on "holds item 0".
        """
        from rich.console import Console

        from ..core.errors import ValidationError

        require_extras("demo", "service", "plots")
        from .demo import DEFAULT_MULTI_MESSAGE, check_demo_arguments
        params = _parse_params(param)
        if protocol:
            _check_protocol_demo(protocol, eps_central, delta, n, params, d)
        else:
            try:  # everything is checked before any service starts
                check_demo_arguments(n, d, epsilon, mechanism, eps_central, delta)
            except ValidationError as e:
                fail(str(e))
            _check_protocol_demo(DEFAULT_MULTI_MESSAGE, min(eps_central, 1.0), delta, n, {}, d,
                                 label=f"--n/--delta (the multi-message demo, {DEFAULT_MULTI_MESSAGE})")
        if port is not None and not serve:
            fail("--port only applies with --serve (without it the demo's services stop when it ends)")
        if port is not None:
            _check_port_free(port)
        writable_dir(out, "--out")

        con = Console()
        dep = _start_serving(protocol, eps_central, delta, n, params, d, port) if serve else None
        try:
            _run_demos(con, dep, n, d, epsilon, mechanism, eps_central, delta, out, protocol, params)
            if dep is not None:
                _serve_until_interrupted(con, dep)
        finally:
            if dep is not None:
                import shutil
                dep.stop()
                shutil.rmtree(dep.workdir, ignore_errors=True)

    def _check_port_free(port: int) -> None:
        import socket
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as e:
                fail(f"--port {port}: cannot listen on 127.0.0.1:{port} ({e.strerror or e})")

    def _start_serving(protocol: str, eps: float, delta: float, n: int, params: dict, d: int,
                       port: int | None):  # noqa: ANN202
        """Services for ``--serve``: one deployment every demo task runs on, left up afterwards."""
        import tempfile
        from pathlib import Path

        from .config import build_protocol
        from .demo import protocol_demo_params
        from .harness import Deployment
        n_shufflers = 1
        if protocol:
            full = protocol_demo_params(protocol, params, d)
            n_shufflers = build_protocol({"name": protocol, "epsilon": eps, "delta": delta, "n": n,
                                          "params": full}).n_shufflers
        dep = Deployment(Path(tempfile.mkdtemp(prefix="shuffledp-demo-serve-")), forward_timeout=600.0,
                         n_shufflers=n_shufflers)
        if port is not None:
            dep.analyzer.port = port
        try:
            return dep.start()
        except (RuntimeError, TimeoutError) as e:
            dep.stop()
            fail(f"--serve: the services did not start: {str(e).splitlines()[0]}")

    def _serve_until_interrupted(con, dep) -> None:  # noqa: ANN001
        import signal
        import time

        def interrupted(signum, frame):  # noqa: ANN001, ANN202
            raise KeyboardInterrupt

        # Ctrl-C and a plain kill both stop the services (a shell may start a background job with
        # SIGINT ignored; asking to serve until interrupted re-enables it)
        signal.signal(signal.SIGINT, interrupted)
        signal.signal(signal.SIGTERM, interrupted)
        url = f"{dep.analyzer.url}/dashboard/#token={dep.collector_token}"
        con.print(f"dashboard: {url}", markup=False, soft_wrap=True)
        con.print(f"(collector token {dep.collector_token}; analyzer {dep.analyzer.url}, shuffler(s) "
                  f"{', '.join(dep.shuffler_urls)}); serving until interrupted (Ctrl-C)", markup=False, soft_wrap=True)
        try:
            while all(sp.proc is not None and sp.proc.poll() is None for sp in [dep.analyzer, *dep.shufflers]):
                time.sleep(1.0)
            fail("--serve: a service exited; logs in " + str(dep.workdir))
        except KeyboardInterrupt:
            con.print("interrupted: stopping the services", markup=False)

    def _run_demos(con, dep, n, d, epsilon, mechanism, eps_central, delta, out, protocol, params) -> None:  # noqa: ANN001
        from rich.table import Table

        from .demo import DEFAULT_MULTI_MESSAGE, run_demo, run_protocol_demo
        if protocol:
            with con.status(f"deploying {protocol} over HTTP ..."):   # a live spinner; stage lines above it
                res = run_protocol_demo(protocol, n=n, epsilon=eps_central, delta=delta, params=params, d=d,
                                        out_dir=out, progress=lambda m: con.print(m, markup=False), deployment=dep)
            _print_protocol_demo(con, [res])
            return
        with con.status(f"{mechanism} task: {n:,} clients through the services ..."):
            res = run_demo(n=n, d=d, epsilon=epsilon, mechanism=mechanism, eps_central=eps_central, delta=delta,
                           out_dir=out, progress=lambda m: con.print(m, markup=False), deployment=dep)
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
        with con.status(f"{DEFAULT_MULTI_MESSAGE}: {n:,} users, multi-message, through the services ..."):
            multi = run_protocol_demo(DEFAULT_MULTI_MESSAGE, n=n, epsilon=min(eps_central, 1.0), delta=delta, d=d,
                                      out_dir=out, progress=lambda m: con.print(m, markup=False), deployment=dep)
        single = {"protocol": f"{mechanism} (local oracle task)", "messages_per_user": 1.0, "n_shufflers": 1,
                  "n": n, "max_abs_error": res["max_abs_error"] * n, "privacy_statement": res["privacy_statement"],
                  "max_abs_diff_in_process": res["max_abs_diff_in_process"], "total_s": res["total_s"],
                  "fake_messages": 0}
        _print_protocol_demo(con, [single, multi])
