"""Run a service under uvicorn: ``python -m shuffledp.service.serve shuffler|analyzer --db URL``.

Hardening: access log off, proxy headers ignored, no Server/Date headers, warnings-only logging with
one line per event (no tracebacks, no request data: ``http_common.OneLineLogs``); idle keep-alive
connections closed after ``--keep-alive`` s; a request head must arrive within ``--head-timeout`` s
(:func:`head_timeout_protocol`) and is capped at 16 KiB (h11); at most
``--limit-concurrency`` connections and requests at once (503 beyond); request bodies bounded in size
and time (``--body-timeout``, ``--body-min-rate``: ``http_common.read_body``).
Secrets come from the environment (``SHUFFLEDP_ADMIN_TOKEN``, ``SHUFFLEDP_PEER_SECRET``,
``SHUFFLEDP_COLLECTOR_TOKEN``), never from the command line (visible in ``ps``). The analyzer's floor
on a task's ``time_precision`` is 60 s; ``--min-time-precision`` (or ``SHUFFLEDP_MIN_TIME_PRECISION``)
lowers it for tests only.
With ``--port 0`` an ephemeral port is bound and written to ``--port-file`` once listening.
"""

from __future__ import annotations

import argparse
import logging
import logging.config
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

__all__ = ["build_app", "run", "main", "StartupError", "check_database", "check_port", "KEEP_ALIVE", "MAX_HEAD_BYTES", "LIMIT_CONCURRENCY", "HEAD_TIMEOUT",
           "head_timeout_protocol"]

#: seconds an idle keep-alive connection is kept open
KEEP_ALIVE = 5
#: largest request line + headers (h11's incomplete-event buffer)
MAX_HEAD_BYTES = 16 * 1024
#: most concurrent connections + requests; beyond it uvicorn answers 503 (bounds the memory that
#: bodies in flight can hold: shuffler 8 MiB cap each, held at most for the body deadline)
LIMIT_CONCURRENCY = 256
#: seconds a connection may take to deliver a request head (from opening, or from its previous
#: response); uvicorn has no such timer, and with a connection limit, idle sockets would lock others out
HEAD_TIMEOUT = 10.0


def head_timeout_protocol(head_timeout: float) -> type:
    """uvicorn's h11 protocol, closing connections whose request head does not arrive in time.

    uvicorn arms no timer on a new connection, and its keep-alive timer is cancelled by the first
    byte of the next request: a client that connects and sends nothing, or part of a request line
    or headers, holds the connection (and a ``limit_concurrency`` slot) forever. Here a timer is
    armed when the connection opens and after every response, and cancelled once a complete head
    starts a request (whose body is then bounded by ``http_common.read_body``).
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimeoutH11Protocol(H11Protocol):
        _head_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm_head_timer()

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(head_timeout, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._cancel_head_timer()

        def on_response_complete(self) -> None:
            self._arm_head_timer()              # before a pipelined request may start in super()
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

    return HeadTimeoutH11Protocol


class StartupError(ValueError):
    """A service cannot start with these arguments; the message is one line naming the argument."""


def check_port(port: int) -> int:
    """``port`` as a TCP port number in [0, 65535] (0: an ephemeral port); StartupError otherwise."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise StartupError(f"--port must be an integer in [0, 65535] (0 = ephemeral), got {port!r}")
    return port


def check_database(db: str) -> None:
    """Refuse a ``--db`` the services cannot use, before anything starts (StartupError, one line).

    The URL must parse, name SQLite (``sqlite:///PATH``) or PostgreSQL (``postgresql://...``), and
    a connection must open (a SQLite file is created if its folder exists, as the service would).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from .storage import make_engine

    shape = "sqlite:///PATH or postgresql://USER@HOST/DB"
    try:
        url = make_url(db)
    except ArgumentError:
        raise StartupError(f"--db must be a database URL, {shape}; got {db!r}") from None
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql") or (backend == "postgresql" and url.drivername not in (
            "postgresql", "postgresql+psycopg")):
        raise StartupError(f"--db must be a database URL, {shape}; got the unsupported scheme {url.drivername!r}")
    if backend == "sqlite" and url.database in (None, "", ":memory:"):
        raise StartupError(f"--db must name a SQLite file ({shape}); an in-memory database would lose every "
                           f"report at exit, got {db!r}")
    try:
        eng = make_engine(db)
    except ArgumentError as e:
        raise StartupError(f"--db: {e}") from None
    except ModuleNotFoundError as e:
        raise StartupError(f"--db {url.drivername}:// needs the optional dependency {e.name}: "
                           f"pip install 'shuffledp[service]'") from None
    try:
        with eng.connect():
            pass
    except SQLAlchemyError as e:
        why = str(getattr(e, "orig", None) or e).strip().splitlines()
        raise StartupError(f"--db: cannot open the database {url.render_as_string(hide_password=True)!r} "
                           f"({why[0] if why else type(e).__name__})") from None
    finally:
        eng.dispose()


def _secret(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        v = secrets.token_hex(16)
        print(f"{name} not set; generated a random one for this process", file=sys.stderr)
    return v


def build_app(role: str, db: str, *, tick: float = 1.0, close_delay: float = 0.0, forward_timeout: float = 30.0,
              retention_every: float = 3600.0, min_time_precision: int | None = None):
    if role == "shuffler":
        from .shuffler import ShufflerState, create_shuffler_app
        st = ShufflerState(db, admin_token=_secret("SHUFFLEDP_ADMIN_TOKEN"),
                           peer_secret=_secret("SHUFFLEDP_PEER_SECRET").encode(), tick_seconds=tick,
                           close_delay=close_delay, forward_timeout=forward_timeout,
                           retention_every=retention_every)
        return create_shuffler_app(st)
    if role == "analyzer":
        from .analyzer import AnalyzerState, create_analyzer_app
        st = AnalyzerState(db, admin_token=_secret("SHUFFLEDP_ADMIN_TOKEN"),
                           collector_token=_secret("SHUFFLEDP_COLLECTOR_TOKEN"),
                           peer_secret=_secret("SHUFFLEDP_PEER_SECRET").encode(), retention_every=retention_every,
                           **({} if min_time_precision is None else {"min_time_precision": min_time_precision}))
        return create_analyzer_app(st)
    raise SystemExit(f"role must be 'shuffler' or 'analyzer', got {role!r}")


def run(role: str, db: str, host: str = "127.0.0.1", port: int = 0, port_file: str | None = None,
        tick: float = 1.0, close_delay: float = 0.0, forward_timeout: float = 30.0,
        retention_every: float = 3600.0, *, body_timeout: float | None = None, body_min_rate: float | None = None,
        limit_concurrency: int = LIMIT_CONCURRENCY, keep_alive: int = KEEP_ALIVE,
        min_time_precision: int | None = None, head_timeout: float = HEAD_TIMEOUT) -> None:
    import uvicorn

    from .http_common import logging_config
    check_port(port)
    check_database(db)
    if min_time_precision is None and os.environ.get("SHUFFLEDP_MIN_TIME_PRECISION"):
        v = os.environ["SHUFFLEDP_MIN_TIME_PRECISION"].strip()
        if not (v.isascii() and v.isdigit()):
            raise StartupError(f"SHUFFLEDP_MIN_TIME_PRECISION must be an integer number of seconds >= 1, got {v!r}")
        min_time_precision = int(v)
    if min_time_precision is not None and (isinstance(min_time_precision, bool) or
                                           not isinstance(min_time_precision, int) or min_time_precision < 1):
        raise StartupError("--min-time-precision (or SHUFFLEDP_MIN_TIME_PRECISION) must be an integer number of "
                           f"seconds >= 1, got {min_time_precision!r}")
    # every setting is checked before the process's logging is configured: a refused start changes nothing
    logging.config.dictConfig(logging_config("WARNING"))
    app = build_app(role, db, tick=tick, close_delay=close_delay, forward_timeout=forward_timeout,
                    retention_every=retention_every, min_time_precision=min_time_precision)
    if body_timeout is not None:
        app.state.body_timeout = body_timeout
    if body_min_rate is not None:
        app.state.body_min_rate = body_min_rate
    if min_time_precision is not None and min_time_precision < 60:
        logging.getLogger("shuffledp.service").warning(
            "time_precision floor lowered to %d s (tests only: reports become linkable to their arrival)",
            min_time_precision)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise StartupError(f"--host/--port: cannot listen on {host}:{port} ({e.strerror or e})") from None
    sock.listen(2048)
    bound = sock.getsockname()[1]
    cfg = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, proxy_headers=False,
                         server_header=False, date_header=False, timeout_keep_alive=keep_alive,
                         h11_max_incomplete_event_size=MAX_HEAD_BYTES, limit_concurrency=limit_concurrency,
                         http=head_timeout_protocol(head_timeout), lifespan="on")
    server = uvicorn.Server(cfg)
    if port_file:
        # uvicorn serves on the already-listening socket; write the port once the app started
        orig_startup = server.startup

        async def startup(sockets=None):
            await orig_startup(sockets=sockets)
            tmp = Path(port_file + ".tmp")
            tmp.write_text(str(bound))
            tmp.replace(port_file)

        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m shuffledp.service.serve")
    p.add_argument("role", choices=["shuffler", "analyzer"])
    p.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. sqlite:////var/lib/x.db or postgresql://...")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--tick", type=float, default=1.0, help="shuffler batcher period in seconds")
    p.add_argument("--close-delay", type=float, default=0.0, help="seconds after a window ends before it closes")
    p.add_argument("--forward-timeout", type=float, default=30.0, help="shuffler: analyzer request timeout (s)")
    p.add_argument("--retention-every", type=float, default=3600.0,
                   help="seconds between retention rounds (shuffler: inside the batcher loop; analyzer: own thread)")
    p.add_argument("--body-timeout", type=float, default=None,
                   help="seconds a request body may stall (no byte received) and base of its deadline (default 30)")
    p.add_argument("--body-min-rate", type=float, default=None,
                   help="bytes/s: a body's deadline is body-timeout + length / rate (default 1 MiB/s)")
    p.add_argument("--limit-concurrency", type=int, default=LIMIT_CONCURRENCY,
                   help="most concurrent connections + requests (503 beyond)")
    p.add_argument("--keep-alive", type=int, default=KEEP_ALIVE, help="seconds an idle keep-alive connection stays")
    p.add_argument("--head-timeout", type=float, default=HEAD_TIMEOUT,
                   help="seconds a connection may take to send a request head (closed otherwise)")
    p.add_argument("--min-time-precision", type=int, default=None,
                   help="analyzer: floor on a new task's time_precision in s (default 60; lower values are for "
                        "tests only; also SHUFFLEDP_MIN_TIME_PRECISION)")
    a = p.parse_args(argv)
    try:
        check_port(a.port)
    except StartupError as e:
        p.error(str(e))
    try:
        _run_from_args(a)
    except StartupError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def _run_from_args(a: argparse.Namespace) -> None:
    run(a.role, a.db, a.host, a.port, a.port_file, a.tick, a.close_delay, a.forward_timeout, a.retention_every,
        body_timeout=a.body_timeout, body_min_rate=a.body_min_rate, limit_concurrency=a.limit_concurrency,
        keep_alive=a.keep_alive, min_time_precision=a.min_time_precision, head_timeout=a.head_timeout)


if __name__ == "__main__":
    main()
