"""``shuffledp serve shuffler|analyzer`` (issue #6 CLI) starts real services on loopback.

The other service tests start processes through ``python -m shuffledp.service.serve`` (the
harness); this one goes through the public ``shuffledp`` command group (``shuffledp.cli``), so a
broken registration of ``serve`` in the CLI would be caught.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict:
    env = dict(os.environ, SHUFFLEDP_ADMIN_TOKEN="adm", SHUFFLEDP_COLLECTOR_TOKEN="col",
               SHUFFLEDP_PEER_SECRET="peer")
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _start(role: str, tmp: Path) -> tuple[subprocess.Popen, int]:
    pf = tmp / f"{role}.port"
    log = open(tmp / f"{role}.log", "wb")
    p = subprocess.Popen([sys.executable, "-m", "shuffledp.cli", "serve", role, "--db",
                          f"sqlite:///{tmp / (role + '.db')}", "--port", "0", "--port-file", str(pf),
                          "--tick", "3600"], env=_env(), stdout=log, stderr=subprocess.STDOUT)
    log.close()
    t0 = time.monotonic()
    while not pf.exists():
        if p.poll() is not None:
            raise AssertionError(f"{role} exited early: {(tmp / f'{role}.log').read_text()[-2000:]}")
        if time.monotonic() - t0 > 60:
            p.kill()
            raise AssertionError(f"{role} did not start in 60 s")
        time.sleep(0.05)
    return p, int(pf.read_text())


def _stop(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=10)


def test_serve_analyzer_and_shuffler(tmp_path):
    an, an_port = _start("analyzer", tmp_path)
    try:
        sh, sh_port = _start("shuffler", tmp_path)
        try:
            with httpx.Client(timeout=10) as c:
                assert c.get(f"http://127.0.0.1:{an_port}/healthz").status_code == 200
                keys = c.get(f"http://127.0.0.1:{an_port}/v1/hpke-keys")
                assert keys.status_code == 200 and keys.headers["content-type"] == "application/ohttp-keys"
                assert len(keys.content) > 32
                assert c.get(f"http://127.0.0.1:{sh_port}/healthz").status_code == 200
                # the admin token from the environment is the one the service uses
                r = c.post(f"http://127.0.0.1:{an_port}/v1/tasks", json={}, headers={"authorization": "Bearer x"})
                assert r.status_code == 401
        finally:
            _stop(sh)
    finally:
        _stop(an)
    assert (tmp_path / "analyzer.db").exists() and (tmp_path / "shuffler.db").exists()


def test_serve_rejects_an_unknown_role(tmp_path):
    r = subprocess.run([sys.executable, "-m", "shuffledp.cli", "serve", "collector", "--db",
                        f"sqlite:///{tmp_path / 'x.db'}"], env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "shuffler" in (r.stdout + r.stderr) and "analyzer" in (r.stdout + r.stderr)
