"""Start shuffler + analyzer as real subprocesses on loopback (demo, tests, benchmark)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

__all__ = ["ServiceProcess", "Deployment", "free_port"]


def free_port() -> int:
    """A currently free loopback port (for services that must restart on the same port)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServiceProcess:
    role: str
    db: str
    workdir: Path
    env: dict
    tick: float = 1.0
    proc: subprocess.Popen | None = None
    port: int = 0
    log_path: Path | None = None
    extra_args: list = field(default_factory=list)
    #: file name stem of its port file and log (default: the role; "shuffler1", ... for more shufflers)
    name: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "ServiceProcess":
        stem = self.name or self.role
        pf = self.workdir / f"{stem}.port"
        pf.unlink(missing_ok=True)
        self.log_path = self.workdir / f"{stem}.log"
        args = [sys.executable, "-m", "shuffledp.service.serve", self.role, "--db", self.db, "--port",
                str(self.port), "--port-file", str(pf), "--tick", str(self.tick), *self.extra_args]
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, env=self.env, stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        t0 = time.monotonic()
        while not pf.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.role} exited early:\n{self.log_path.read_text()[-3000:]}")
            if time.monotonic() - t0 > timeout:
                self.kill()
                raise TimeoutError(f"{self.role} did not start in {timeout}s")
            time.sleep(0.05)
        self.port = int(pf.read_text())
        return self

    def kill(self) -> None:
        """SIGKILL (crash), no cleanup."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Deployment:
    """A shuffler and an analyzer on 127.0.0.1 with SQLite files in ``workdir``."""

    workdir: Path
    shuffler_db: str | None = None
    analyzer_db: str | None = None
    tick_seconds: float = 0.5
    fixed_ports: bool = False
    forward_timeout: float = 30.0
    admin_token: str = field(default_factory=lambda: secrets.token_hex(16))
    collector_token: str = field(default_factory=lambda: secrets.token_hex(16))
    peer_secret: str = field(default_factory=lambda: secrets.token_hex(32))
    #: shuffler client admission (service/client_auth.py); off when None
    client_tokens_file: str | None = None
    client_rate: float | None = None
    client_burst: int | None = None
    #: shuffler processes (a protocol with several shufflers, e.g. MURS in parallel mode or
    #: attribute fragmenting, registers shuffler j with index j)
    n_shufflers: int = 1
    #: database URLs of shufflers 1, 2, ... (default: SQLite files ``shuffler1.db``, ... in ``workdir``)
    extra_shuffler_dbs: list | None = None

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.update(SHUFFLEDP_ADMIN_TOKEN=self.admin_token, SHUFFLEDP_COLLECTOR_TOKEN=self.collector_token,
                   SHUFFLEDP_PEER_SECRET=self.peer_secret)
        for name, v in (("SHUFFLEDP_CLIENT_TOKENS_FILE", self.client_tokens_file),
                        ("SHUFFLEDP_CLIENT_RATE", self.client_rate), ("SHUFFLEDP_CLIENT_BURST", self.client_burst)):
            if v is not None:
                env[name] = str(v)
            else:
                env.pop(name, None)
        self.env = env
        self.analyzer = ServiceProcess("analyzer", self.analyzer_db or f"sqlite:///{self.workdir / 'analyzer.db'}",
                                       self.workdir, env)
        self.shufflers = [
            ServiceProcess("shuffler",
                           (self.shuffler_db or f"sqlite:///{self.workdir / 'shuffler.db'}") if j == 0
                           else (self.extra_shuffler_dbs[j - 1] if self.extra_shuffler_dbs
                                 else f"sqlite:///{self.workdir / f'shuffler{j}.db'}"),
                           self.workdir, env, tick=self.tick_seconds,
                           extra_args=["--forward-timeout", str(self.forward_timeout)],
                           name="shuffler" if j == 0 else f"shuffler{j}")
            for j in range(self.n_shufflers)]
        self.shuffler = self.shufflers[0]
        if self.fixed_ports:
            self.analyzer.port = free_port()
            for sp in self.shufflers:
                sp.port = free_port()
        self.http = httpx.Client(timeout=120.0)

    def start(self) -> "Deployment":
        self.analyzer.start()
        for sp in self.shufflers:
            sp.start()
        return self

    def stop(self) -> None:
        for sp in self.shufflers:
            sp.stop()
        self.analyzer.stop()
        self.http.close()

    def __enter__(self) -> "Deployment":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ admin helpers
    def admin(self) -> dict:
        return {"authorization": f"Bearer {self.admin_token}"}

    def collector(self) -> dict:
        return {"authorization": f"Bearer {self.collector_token}"}

    def create_task(self, spec: dict, analyzer_url_for_shuffler: str | None = None,
                    shuffler=None, crowds: list[bytes] | None = None) -> dict:
        r = self.http.post(f"{self.analyzer.url}/v1/tasks", json=spec, headers=self.admin())
        r.raise_for_status()
        created = r.json()
        if shuffler is None and "protocol" in created["config"]:
            for j, sp in enumerate(self.shufflers):   # every shuffler of the deployment, by index
                self.register(created, analyzer_url_for_shuffler, sp, crowds, index=j)
        else:
            self.register(created, analyzer_url_for_shuffler, shuffler, crowds)
        return created

    def register(self, created: dict, analyzer_url_for_shuffler: str | None = None, shuffler=None,
                 crowds: list[bytes] | None = None, index: int = 0) -> None:
        ids = self.http.get(f"{self.analyzer.url}/v1/hpke-key-ids").json()["accepting"]
        sh = shuffler or self.shuffler
        r = self.http.put(f"{sh.url}/v1/tasks/{created['task_id']}", headers=self.admin(), json={
            "config": created["config"], "analyzer_url": analyzer_url_for_shuffler or self.analyzer.url,
            "key_ids": ids, "crowds": None if crowds is None else [c.hex() for c in crowds], "shuffler": index})
        r.raise_for_status()

    @property
    def shuffler_urls(self) -> list[str]:
        return [sp.url for sp in self.shufflers]

    def tick(self, close_current: bool = True, shuffler=None) -> dict:
        """One batching round on ``shuffler`` (default: every shuffler; the first one's answer)."""
        out = None
        for sh in ([shuffler] if shuffler is not None else self.shufflers):
            r = self.http.post(f"{sh.url}/v1/admin/tick", params={"close_current": close_current},
                               headers=self.admin())
            r.raise_for_status()
            out = r.json() if out is None else out
        return out

    def counters(self, task_id: str, shuffler=None) -> dict:
        sh = shuffler or self.shuffler
        return self.http.get(f"{sh.url}/v1/admin/tasks/{task_id}/counters", headers=self.admin()).json()

    def estimates(self, task_id: str, **params) -> httpx.Response:
        return self.http.get(f"{self.analyzer.url}/v1/tasks/{task_id}/estimates", params=params,
                             headers=self.collector())

    def analyzer_stats(self, task_id: str) -> dict:
        return self.http.get(f"{self.analyzer.url}/v1/tasks/{task_id}/stats", headers=self.collector()).json()
