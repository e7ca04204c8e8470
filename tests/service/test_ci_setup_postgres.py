"""``.ci/setup-postgres`` on a simulated fresh machine (stubbed apt-get/pg_ctlcluster/psql in a sandbox).

The real machine is never touched: PATH holds only the sandbox's stubs and a few coreutils, and
``PG_ETC`` points the script at a sandbox ``pg_hba.conf``. Checks the install → start → trust rule
first → reload → ``CREATE DATABASE test`` path, and that a second run changes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "setup-postgres"
TOOLS = ["bash", "sh", "ls", "sort", "tail", "seq", "sleep", "grep", "cat", "cp", "rm", "mktemp", "id", "env",
         "echo", "sed", "chmod", "touch"]


def _sandbox(tmp: Path) -> dict:
    b, etc, st = tmp / "bin", tmp / "etc" / "15" / "main", tmp / "state"
    for d in (b, etc, st):
        d.mkdir(parents=True)
    (etc / "pg_hba.conf").write_text("local all postgres peer\nhost all all 127.0.0.1/32 scram-sha-256\n")
    for t in TOOLS:
        p = shutil.which(t)
        if p is None:
            pytest.skip(f"{t} not available")
        (b / t).symlink_to(p)
    stubs = {
        "pg_isready": f'#!/bin/sh\n[ -f {st}/started ]\n',
        "pg_ctlcluster": f'#!/bin/sh\necho "pg_ctlcluster $*" >> {st}/log; touch {st}/started\n',
        "psql": (f'#!/bin/sh\necho "psql $*" >> {st}/log\n'
                 f"grep -q '^host    all    all    127.0.0.1/32    trust' {etc}/pg_hba.conf || exit 2\n"
                 f'case "$*" in *"CREATE DATABASE"*) touch {st}/db;; *datname*) [ -f {st}/db ] && echo 1;; '
                 f'*) echo 1;; esac\n'),
    }
    inst = "".join(f"cat > {b}/{n} <<'X'\n{body}X\nchmod +x {b}/{n}\n" for n, body in stubs.items())
    (b / "apt-get").write_text(f'#!/bin/sh\necho "apt-get $*" >> {st}/log\n[ "$1" = install ] || exit 0\n{inst}')
    (b / "apt-get").chmod(0o755)
    return {"PATH": str(b), "PG_ETC": str(tmp / "etc"), "HOME": str(tmp)}


def test_fresh_machine_then_idempotent(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the sandbox stubs cover the root path only (CI runs as root)")
    env = _sandbox(tmp_path)
    log, hba = tmp_path / "state" / "log", tmp_path / "etc" / "15" / "main" / "pg_hba.conf"
    r = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert calls[:2] == ["apt-get update -q", "apt-get install -y -q --no-install-recommends postgresql"]
    assert "pg_ctlcluster --skip-systemctl-redirect 15 main start" in calls
    assert "pg_ctlcluster --skip-systemctl-redirect 15 main reload" in calls
    assert calls[-1] == "psql -h 127.0.0.1 -U postgres -w -qc CREATE DATABASE test"
    lines = hba.read_text().splitlines()
    assert lines[0].startswith("host    all    all    127.0.0.1/32    trust") and len(lines) == 3
    log.write_text("")
    before = hba.read_text()
    r = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert hba.read_text() == before
    assert not any(c.startswith(("apt-get", "pg_ctlcluster")) or "CREATE" in c for c in log.read_text().splitlines())


def test_user_url_short_circuits(tmp_path):
    env = {"PATH": os.environ["PATH"], "SHUFFLEDP_TEST_PG_URL": "postgresql://x@127.0.0.1:1/y"}
    r = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "using it as is" in r.stdout


# ---------------------------------------------------------------- SHUFFLEDP_REQUIRE_PG
PG_TEST = "tests/service/test_shuffler_counters.py::test_long_crowd_with_drop_noise_releases_once_per_window"
ROOT = SCRIPT.parents[1]


def _run_pg_test(require: str | None) -> subprocess.CompletedProcess:
    import sys
    env = dict(os.environ, SHUFFLEDP_TEST_PG_URL="postgresql://postgres@127.0.0.1:1/test")  # nothing listens
    env.pop("SHUFFLEDP_REQUIRE_PG", None)
    if require is not None:
        env["SHUFFLEDP_REQUIRE_PG"] = require
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfEs",
                           f"{PG_TEST}[postgresql]"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_unreachable_postgres_skips_with_the_reason_by_default():
    r = _run_pg_test(None)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "1 skipped" in r.stdout and "PostgreSQL unreachable at postgresql://postgres@127.0.0.1:1/test" in r.stdout


def test_unreachable_postgres_fails_when_required():
    r = _run_pg_test("1")
    assert r.returncode == 1, r.stdout[-2000:]
    assert "1 error" in r.stdout and "SHUFFLEDP_REQUIRE_PG=1" in r.stdout, r.stdout[-2000:]


def test_ci_run_requires_postgres():
    text = (ROOT / ".ci" / "run").read_text()
    lines = [ln.strip() for ln in text.splitlines()]
    assert "export SHUFFLEDP_REQUIRE_PG=1" in lines
    assert lines.index("export SHUFFLEDP_REQUIRE_PG=1") < lines.index("make test")
