"""Fixtures for service tests: real subprocess deployments on 127.0.0.1, SQLite in tmp dirs or PostgreSQL.

PostgreSQL: ``SHUFFLEDP_TEST_PG_URL`` or postgresql://postgres@127.0.0.1:5432/test (trust auth);
each fixture creates its own databases and drops them afterwards. When the server is unreachable
the PostgreSQL variants are skipped with the reason, unless ``SHUFFLEDP_REQUIRE_PG=1`` (set by
``.ci/run``), in which case they fail.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time

import httpx
import numpy as np
import pytest

from shuffledp.service.client import encode_reports, fetch_task, seal_many, upload
from shuffledp.service.harness import Deployment


# Service subprocesses started by these tests accept time_precision below the 60 s production
# floor (serve reads this; tests use 1 s windows to run quickly). Never set in a deployment.
os.environ.setdefault("SHUFFLEDP_MIN_TIME_PRECISION", "1")

PG_BASE = os.environ.get("SHUFFLEDP_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def pg_required() -> bool:
    return os.environ.get("SHUFFLEDP_REQUIRE_PG", "") == "1"


def pg_admin():
    """An autocommit admin connection to the test server, or skip (fail with SHUFFLEDP_REQUIRE_PG=1)."""
    try:
        import psycopg
        return psycopg.connect(PG_BASE.replace("postgresql+psycopg://", "postgresql://"), autocommit=True,
                               connect_timeout=3)
    except Exception as e:  # noqa: BLE001
        msg = f"PostgreSQL unreachable at {PG_BASE}: {type(e).__name__}: {e}"
        if pg_required():
            pytest.fail(f"{msg} (SHUFFLEDP_REQUIRE_PG=1: the PostgreSQL tests must run)", pytrace=False)
        pytest.skip(msg)


@contextlib.contextmanager
def pg_databases(prefix: str, roles=("shuffler", "analyzer")):
    """Fresh PostgreSQL databases (one per role) for the block; yields their URLs, drops them after."""
    conn = pg_admin()
    names = [f"{prefix}_{r}_{secrets.token_hex(4)}" for r in roles]
    try:
        for n in names:
            conn.execute(f'CREATE DATABASE "{n}"')
        base = PG_BASE.rsplit("/", 1)[0]
        yield [f"{base}/{n}" for n in names]
    finally:
        for n in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)')
        conn.close()


#: parameters for fixtures that run over both storage back ends
STORAGES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@contextlib.contextmanager
def storage_urls(kind: str, tmp, roles=("shuffler", "analyzer")):
    """Database URLs for ``roles`` on ``kind`` ("sqlite": files under ``tmp``; "postgresql": fresh DBs)."""
    if kind == "sqlite":
        yield [f"sqlite:///{tmp}/{r}.db" for r in roles]
    else:
        with pg_databases("shuffledp_test", roles) as urls:
            yield urls


def identity_task(dep: Deployment, d: int, floor: int, **kw) -> dict:
    spec = {"name": "exactly-once", "mechanism": {"kind": "test", "name": "test_identity", "params": {"d": d}},
            "target_central": {"eps": 1.0, "delta": 1e-6}, "min_batch_size_floor": floor,
            "time_precision": 1, "batch_window": kw.pop("batch_window", 3600), **kw}
    return dep.create_task(spec)


def grr_task(dep: Deployment, d: int = 8, eps: float = 2.0, **kw) -> dict:
    spec = {"name": "grr", "mechanism": {"kind": "frequency", "name": "grr", "epsilon": eps, "params": {"d": d}},
            "target_central": {"eps": 1.0, "delta": 1e-8}, "time_precision": 3600, "batch_window": 3600, **kw}
    return dep.create_task(spec)


def sealed(dep: Deployment, task_hex: str, values, crowd: bytes = b"", now: float | None = None):
    http = httpx.Client(timeout=60)
    cfg, key = fetch_task(http, dep.analyzer.url, bytes.fromhex(task_hex), allow_test_mechanisms=True)
    pts = encode_reports(cfg, np.asarray(values), time.time() if now is None else now)
    http.close()
    return cfg, key, pts, seal_many(cfg, key, pts, crowd)


def send(dep: Deployment, task_hex: str, envs, crowd: bytes = b"", chunk: int = 2000, shuffler=None) -> int:
    http = httpx.Client(timeout=60)
    acked = 0
    for s in range(0, len(envs), chunk):
        acked += upload(http, (shuffler or dep.shuffler).url, bytes.fromhex(task_hex),
                        [(crowd, e) for e in envs[s:s + chunk]])["accepted"]
    http.close()
    return acked


def released_estimates(dep: Deployment, task_hex: str, timeout: float = 120.0) -> dict:
    """The task's estimates once the analyzer answers 200 (polled every 0.3 s for ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        r = dep.estimates(task_hex)
        if r.status_code == 200:
            return r.json()
        assert time.monotonic() < deadline, (r.status_code, r.text, dep.counters(task_hex))
        time.sleep(0.3)


def stored_statistics(dep: Deployment) -> list[tuple[np.ndarray, int]]:
    """Every ``(statistic, n)`` row of the analyzer's aggregates table, read from its database."""
    import json

    from sqlalchemy import text

    from shuffledp.service.storage import make_engine
    eng = make_engine(dep.analyzer.db)
    with eng.connect() as c:
        rows = [tuple(r) for r in c.execute(text("SELECT statistic, dtype, shape, n FROM analyzer_aggregates"))]
    eng.dispose()
    return [(np.frombuffer(s, dtype=dt).reshape(json.loads(sh)), int(n)) for s, dt, sh, n in rows]


def counts_from_estimate(est: dict) -> np.ndarray:
    return np.rint(np.asarray(est["estimate"]) * est["n"]).astype(np.int64)


@pytest.fixture(scope="module", params=STORAGES)
def dep(request, tmp_path_factory):
    """One deployment per test module and storage back end (SQLite files, fresh PostgreSQL databases)."""
    tmp = tmp_path_factory.mktemp("deploy")
    with storage_urls(request.param, tmp) as (shuffler_db, analyzer_db):
        d = Deployment(tmp, shuffler_db=shuffler_db, analyzer_db=analyzer_db,
                       tick_seconds=3600)  # batcher only via admin tick
        d.start()
        try:
            yield d
        finally:
            d.stop()


class Clock:
    """A settable clock for in-process services (``state.clock``): ``clock.t`` is the time now."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(params=STORAGES)
def urls(request, tmp_path):
    """(shuffler, analyzer) database URLs on each storage back end (SQLite, then PostgreSQL)."""
    with storage_urls(request.param, tmp_path) as u:
        yield tuple(u)
