"""Run a service under uvicorn: ``python -m shuffledp.service.serve shuffler|analyzer --db URL``.

Hardening: access log off, proxy headers ignored, no Server/Date headers, warnings-only logging.
Secrets come from the environment (``SHUFFLEDP_ADMIN_TOKEN``, ``SHUFFLEDP_PEER_SECRET``,
``SHUFFLEDP_COLLECTOR_TOKEN``), never from the command line (visible in ``ps``).
With ``--port 0`` an ephemeral port is bound and written to ``--port-file`` once listening.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import socket
import sys
from pathlib import Path

__all__ = ["build_app", "run", "main"]


def _secret(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        v = secrets.token_hex(16)
        print(f"{name} not set; generated a random one for this process", file=sys.stderr)
    return v


def build_app(role: str, db: str, *, tick: float = 1.0, close_delay: float = 0.0, forward_timeout: float = 30.0,
              retention_every: float = 3600.0):
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
                           peer_secret=_secret("SHUFFLEDP_PEER_SECRET").encode(), retention_every=retention_every)
        return create_analyzer_app(st)
    raise SystemExit(f"role must be 'shuffler' or 'analyzer', got {role!r}")


def run(role: str, db: str, host: str = "127.0.0.1", port: int = 0, port_file: str | None = None,
        tick: float = 1.0, close_delay: float = 0.0, forward_timeout: float = 30.0,
        retention_every: float = 3600.0) -> None:
    import uvicorn

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app = build_app(role, db, tick=tick, close_delay=close_delay, forward_timeout=forward_timeout,
                    retention_every=retention_every)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    bound = sock.getsockname()[1]
    cfg = uvicorn.Config(app, log_level="warning", access_log=False, proxy_headers=False, server_header=False,
                         date_header=False, timeout_keep_alive=30, lifespan="on")
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
    a = p.parse_args(argv)
    run(a.role, a.db, a.host, a.port, a.port_file, a.tick, a.close_delay, a.forward_timeout, a.retention_every)


if __name__ == "__main__":
    main()
