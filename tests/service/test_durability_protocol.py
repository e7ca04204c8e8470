"""Exactly-once delivery for a multi-message protocol (Cnt_2M) under kill -9 and network faults.

Each Cnt_2M user sends 0, 1 or 2 one-bit messages and one user marker. Exactly once means: the
analyzer's statistic counts every acknowledged message once (its total equals the messages sent)
and its releases hold every user once (``n`` equals the users sent, counted by their markers).
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time

import httpx
import numpy as np
import pytest

from shuffledp.service.client import encode_protocol_messages, fetch_task, seal_many, user_markers
from shuffledp.service.harness import Deployment

from .faultproxy import FaultProxy
from .test_durability import _drain, _ensure_up, _start_killer, _upload_until_acked

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

N = 1200   # Cnt_2M at eps = 1, delta = 1e-3 needs n >= 100 ln(2/delta) / eps^2 = 760


def _task(dep: Deployment, **kw) -> dict:
    spec = {"name": "cnt2m-exactly-once", "protocol": {"name": "cnt_2m", "epsilon": 1.0, "delta": 1e-3, "n": N},
            "min_batch_size_floor": 1, "time_precision": 1, **kw}
    return dep.create_task(spec)


def _chunks(dep: Deployment, task_hex: str, size: int = 40) -> tuple[list, int]:
    """Upload bodies' items, fixed once (a retried upload re-sends the same bytes), and the message count."""
    http = httpx.Client(timeout=60)
    cfg, key = fetch_task(http, dep.analyzer.url, bytes.fromhex(task_hex))
    http.close()
    x = (np.random.default_rng(3).random(N) < 0.4).astype(np.int64)
    chunks, n_msgs = [], 0
    for s in range(0, N, size):
        pts, _route, users = encode_protocol_messages(cfg, x[s:s + size], time.time())
        chunks.append(([(b"", e) for e in seal_many(cfg, key, pts, b"")], user_markers(int(users[0]))))
        n_msgs += pts.shape[0]
    return chunks, n_msgs


def _check_exactly_once(dep: Deployment, task_hex: str, n_msgs: int) -> None:
    db = sqlite3.connect(str(dep.workdir / "analyzer.db"))
    rows = db.execute("SELECT statistic, dtype, shape, n FROM analyzer_aggregates").fetchall()
    db.close()
    total = sum(int(np.frombuffer(s, dtype=dt).reshape(json.loads(sh)).sum()) for s, dt, sh, _n in rows)
    users = sum(int(r[3]) for r in rows)
    assert (total, users) == (n_msgs, N)   # no message or user lost or counted twice
    est = dep.estimates(task_hex).json()
    assert est["n"] == N and not est["waiting"]


def test_kill_9_with_a_multi_message_protocol(tmp_path):
    rng = random.Random(20261126)
    with Deployment(tmp_path, tick_seconds=0.2, fixed_ports=True, forward_timeout=5) as dep:
        t = _task(dep, batch_window=1, max_wait_windows=100, tolerable_clock_skew=100_000)
        chunks, n_msgs = _chunks(dep, t["task_id"])
        stop = threading.Event()
        kills = {"shuffler": 0, "analyzer": 0}
        th = _start_killer(dep, rng, kills, stop, 4)
        try:
            for items, markers in chunks:
                _upload_until_acked(dep, t["task_id"], items, markers=markers)
                time.sleep(0.1)
            th.join(timeout=60)
        finally:
            stop.set()
            th.join(timeout=30)
        _ensure_up(dep.analyzer)
        _ensure_up(dep.shuffler)
        _drain(dep, t["task_id"])
        assert sum(kills.values()) == 4, kills
        _check_exactly_once(dep, t["task_id"], n_msgs)


def test_fault_proxy_with_a_multi_message_protocol(tmp_path):
    rng = random.Random(11)
    faults = ("drop_request", "drop_response", "error_5xx", "timeout")
    with Deployment(tmp_path, tick_seconds=3600, forward_timeout=1.0) as dep:
        plan = [rng.choice(faults) if i < 16 and rng.random() < 0.6 else "pass" for i in range(10_000)]
        plan[:4] = list(faults)
        proxy = FaultProxy(dep.analyzer.url, lambda i: plan[i], timeout_hold=1.5)
        try:
            r = dep.http.post(f"{dep.analyzer.url}/v1/tasks", headers=dep.admin(), json={
                "name": "faults", "protocol": {"name": "cnt_2m", "epsilon": 1.0, "delta": 1e-3, "n": N},
                "min_batch_size_floor": 1, "time_precision": 1, "batch_window": 3600})
            created = r.json()
            dep.register(created, analyzer_url_for_shuffler=proxy.url)
            chunks, n_msgs = _chunks(dep, created["task_id"], size=120)
            for items, markers in chunks:   # the pool waits for the n users Cnt_2M is calibrated for
                _upload_until_acked(dep, created["task_id"], items, markers=markers)
                dep.tick(close_current=True)
            _drain(dep, created["task_id"])
            assert set(faults) <= set(proxy.log), proxy.log
            _check_exactly_once(dep, created["task_id"], n_msgs)
            assert dep.analyzer_stats(created["task_id"])["batches"] == 1   # one batch of N users
        finally:
            proxy.close()
