"""The storage-dependent service tests against a real PostgreSQL server.

Uses 127.0.0.1:5432 (user postgres, trust auth) or ``SHUFFLEDP_TEST_PG_URL``; each test module
creates its own databases and drops them afterwards. Skipped (with the reason) only when the
server is unreachable, and failed instead when ``SHUFFLEDP_REQUIRE_PG=1`` (as in CI). The main
deployment fixture (``conftest.dep``) also runs every test of test_services.py over PostgreSQL.
"""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

from shuffledp.service.harness import Deployment
from shuffledp.service.wire import encode_upload, seal_report

from .conftest import counts_from_estimate, identity_task, pg_databases, sealed, send
from .faultproxy import FaultProxy

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]

@pytest.fixture(scope="module")
def pg_urls():
    with pg_databases("shuffledp_test") as urls:
        yield urls


@pytest.fixture(scope="module")
def pgdep(pg_urls, tmp_path_factory):
    d = Deployment(tmp_path_factory.mktemp("pg"), shuffler_db=pg_urls[0], analyzer_db=pg_urls[1],
                   tick_seconds=3600, fixed_ports=True, forward_timeout=5)
    d.start()
    yield d
    d.stop()


def test_pg_idempotency_replay_and_exactly_once(pgdep):
    dep = pgdep
    t = identity_task(dep, d=300, floor=20)
    cfg, key, pts, envs = sealed(dep, t["task_id"], np.arange(200))
    assert send(dep, t["task_id"], envs) == 200
    r = httpx.post(f"{dep.shuffler.url}/v1/tasks/{t['task_id']}/reports",
                   content=encode_upload([(b"", e) for e in envs[:10]])).json()
    assert r["accepted"] == 0 and r["duplicate"] == 10
    replay = seal_report(key, cfg.task_id, cfg.digest, b"", pts[5].tobytes())
    send(dep, t["task_id"], [replay])
    assert dep.tick()["forwarded"] == 1
    c = counts_from_estimate(dep.estimates(t["task_id"]).json())
    assert c[:200].tolist() == [1] * 200 and c[200:].sum() == 0
    led = httpx.get(f"{dep.analyzer.url}/v1/tasks/{t['task_id']}/privacy", headers=dep.collector()).json()["ledger"]
    assert led[0]["n_released"] == 201 and led[0]["n_valid"] == 200


def test_pg_below_threshold_and_expiry(pgdep):
    dep = pgdep
    t = identity_task(dep, d=30, floor=25, batch_window=1, max_wait_windows=1, tolerable_clock_skew=5)
    _, _, _, envs = sealed(dep, t["task_id"], np.arange(10))
    send(dep, t["task_id"], envs)
    assert dep.tick(close_current=True)["batches_formed"] == 0
    time.sleep(2.2)
    dep.tick(close_current=False)
    c = dep.counters(t["task_id"])
    assert c["expired"] == 10 and c["pending"] == 0 and dep.analyzer_stats(t["task_id"])["batches"] == 0


@pytest.mark.slow
def test_pg_kill_9_after_analyzer_commit_and_network_faults(pgdep):
    dep = pgdep
    n = 300
    plan = ["drop_response", "error_5xx", "drop_request", "hook_after_commit"] + ["pass"] * 1000
    proxy = FaultProxy(dep.analyzer.url, lambda i: plan[i], on_commit=dep.shuffler.kill)
    try:
        created = dep.http.post(f"{dep.analyzer.url}/v1/tasks", headers=dep.admin(), json={
            "name": "pgfaults", "mechanism": {"kind": "test", "name": "test_identity", "params": {"d": n}},
            "target_central": {"eps": 1.0, "delta": 1e-6}, "min_batch_size_floor": 10, "time_precision": 1,
            "batch_window": 3600}).json()
        dep.register(created, analyzer_url_for_shuffler=proxy.url)
        _, _, _, envs = sealed(dep, created["task_id"], np.arange(n))
        send(dep, created["task_id"], envs)
        deadline = time.monotonic() + 90
        while True:
            if dep.shuffler.proc.poll() is not None:
                dep.shuffler.start()
            try:
                dep.tick(close_current=True)
                c = dep.counters(created["task_id"])
                if c["pending"] == 0 and c.get("batches_delivered", 0) == 1:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert proxy.log[:4] == plan[:4]
        counts = counts_from_estimate(dep.estimates(created["task_id"]).json())
        assert counts.min() == 1 and counts.max() == 1
        assert dep.analyzer_stats(created["task_id"])["batches"] == 1
    finally:
        proxy.close()
