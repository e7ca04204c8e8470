"""A fault-injecting HTTP/1.1 proxy between shuffler and analyzer (test only).

Per request it applies the next fault from a schedule:
``pass`` (relay), ``drop_request`` (close without forwarding), ``drop_response`` (forward, let the
analyzer commit, then close without answering), ``error_5xx`` (answer 503 without forwarding),
``timeout`` (hold the connection past the client's timeout, then close; not forwarded),
``hook_after_commit`` (forward, then call ``on_commit`` — e.g. kill -9 the shuffler — then close).
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable

import httpx


class FaultProxy:
    def __init__(self, upstream: str, schedule: Callable[[int], str], timeout_hold: float = 3.0,
                 on_commit: Callable[[], None] | None = None) -> None:
        self.upstream, self.schedule, self.timeout_hold, self.on_commit = upstream, schedule, timeout_hold, on_commit
        self.log: list[str] = []
        self._n = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    proxy._handle(self.rfile, self.connection)
                except (OSError, ValueError):
                    pass

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.http = httpx.Client(timeout=60)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handle(self, rfile, conn: socket.socket) -> None:
        line = rfile.readline(65536).decode("latin-1")
        if not line:
            return
        method, path, _ = line.split(" ", 2)
        headers = {}
        while True:
            h = rfile.readline(65536).decode("latin-1")
            if h in ("\r\n", "\n", ""):
                break
            k, v = h.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        body = rfile.read(int(headers.get("content-length", "0")))
        with self._lock:
            mode = self.schedule(self._n)
            self._n += 1
            self.log.append(mode)
        if mode == "drop_request":
            return
        if mode == "error_5xx":
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            return
        if mode == "timeout":
            time.sleep(self.timeout_hold)
            return
        fwd = {k: v for k, v in headers.items() if k in ("authorization", "content-type")}
        r = self.http.request(method, self.upstream + path, content=body, headers=fwd)
        if mode == "drop_response":
            return
        if mode == "hook_after_commit":
            if self.on_commit is not None:
                self.on_commit()
            return
        head = f"HTTP/1.1 {r.status_code} X\r\ncontent-length: {len(r.content)}\r\n" \
               f"content-type: {r.headers.get('content-type', 'application/json')}\r\nconnection: close\r\n\r\n"
        conn.sendall(head.encode() + r.content)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.http.close()
