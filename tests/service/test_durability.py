"""Exactly-once aggregation under crashes (kill -9 of real processes) and network faults.

One-hot test mechanism: client i sends value i, so the final histogram must be all ones for
every acknowledged report (a 0 is a loss, a 2 a double count).
"""

from __future__ import annotations

import random
import threading
import time

import httpx
import numpy as np
import pytest

from shuffledp.service.client import upload
from shuffledp.service.harness import Deployment

from .conftest import counts_from_estimate, identity_task, sealed
from .faultproxy import FaultProxy

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


def _upload_until_acked(dep: Deployment, task_hex: str, items: list, tries: int = 400,
                        markers: list | None = None) -> None:
    http = httpx.Client(timeout=10)
    try:
        for _ in range(tries):
            try:
                upload(http, dep.shuffler.url, bytes.fromhex(task_hex), items, markers=markers)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("upload never acknowledged")
    finally:
        http.close()


def _drain(dep: Deployment, task_hex: str, timeout: float = 90.0, shufflers=None) -> None:
    t0 = time.monotonic()
    for sh in shufflers or [dep.shuffler]:
        while True:
            dep.tick(close_current=True, shuffler=sh)
            c = dep.counters(task_hex, shuffler=sh)
            if c["pending"] == 0 and c.get("batches_ready", 0) == 0 and c.get("batches_retrying", 0) == 0:
                break
            assert time.monotonic() - t0 < timeout, f"not drained: {c}"
            time.sleep(0.3)


def _ensure_up(proc) -> None:
    if proc.proc is None or proc.proc.poll() is not None:
        proc.start()


def _start_killer(dep: Deployment, rng: random.Random, kills: dict, stop: threading.Event,
                  target_kills: int) -> threading.Thread:
    """A thread that kill -9s the shuffler or the analyzer at random points and restarts it."""

    def killer() -> None:
        while sum(kills.values()) < target_kills and not stop.wait(rng.uniform(0.3, 1.0)):
            name = rng.choice(["shuffler", "analyzer"])
            p = getattr(dep, name)
            p.kill()
            kills[name] += 1
            time.sleep(rng.uniform(0.0, 0.3))
            p.start()

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    return th


def test_kill_9_shuffler_and_analyzer_at_random_points(tmp_path):
    rng = random.Random(20261122)
    n = 640
    with Deployment(tmp_path, tick_seconds=0.2, fixed_ports=True, forward_timeout=5) as dep:
        t = identity_task(dep, d=n, floor=20, batch_window=1, max_wait_windows=100,
                          tolerable_clock_skew=100_000)
        _, _, _, envs = sealed(dep, t["task_id"], np.arange(n))
        stop = threading.Event()
        kills = {"shuffler": 0, "analyzer": 0}
        target_kills = 4
        th = _start_killer(dep, rng, kills, stop, target_kills)
        try:
            for s in range(0, n, 40):
                _upload_until_acked(dep, t["task_id"], [(b"", e) for e in envs[s:s + 40]])
                time.sleep(0.1)  # spread uploads over the kills; the batcher forwards meanwhile
            th.join(timeout=60)   # remaining kills hit the batcher/forwarder/analyzer mid-work
        finally:
            stop.set()
            th.join(timeout=30)
        _ensure_up(dep.analyzer)
        _ensure_up(dep.shuffler)
        _drain(dep, t["task_id"])
        assert sum(kills.values()) == target_kills, kills
        c = counts_from_estimate(dep.estimates(t["task_id"]).json())
        assert c.min() == 1 and c.max() == 1, (np.flatnonzero(c != 1)[:10], kills)


@pytest.mark.parametrize("faults", [
    ("drop_request", "drop_response", "error_5xx", "timeout"),
])
def test_fault_proxy_between_shuffler_and_analyzer(tmp_path, faults):
    rng = random.Random(7)
    n = 300
    with Deployment(tmp_path, tick_seconds=3600, forward_timeout=1.0) as dep:
        plan = [rng.choice(faults) if i < 16 and rng.random() < 0.6 else "pass" for i in range(10_000)]
        plan[:4] = list(faults)  # every fault type at least once
        proxy = FaultProxy(dep.analyzer.url, lambda i: plan[i], timeout_hold=1.5)
        try:
            created = dep.http.post(f"{dep.analyzer.url}/v1/tasks", headers=dep.admin(), json={
                "name": "faults", "mechanism": {"kind": "test", "name": "test_identity", "params": {"d": n}},
                "target_central": {"eps": 1.0, "delta": 1e-6}, "min_batch_size_floor": 10, "time_precision": 1,
                "batch_window": 3600}).json()
            dep.register(created, analyzer_url_for_shuffler=proxy.url)
            _, _, _, envs = sealed(dep, created["task_id"], np.arange(n))
            for s in range(0, n, 30):   # 10 batches
                _upload_until_acked(dep, created["task_id"], [(b"", e) for e in envs[s:s + 30]])
                dep.tick(close_current=True)
            _drain(dep, created["task_id"])
            seen = set(proxy.log)
            assert set(faults) <= seen, proxy.log
            c = counts_from_estimate(dep.estimates(created["task_id"]).json())
            assert c.min() == 1 and c.max() == 1
            assert dep.analyzer_stats(created["task_id"])["batches"] == 10
        finally:
            proxy.close()


def test_shuffler_killed_after_analyzer_commit_mid_forward(tmp_path):
    n = 100
    with Deployment(tmp_path, tick_seconds=3600, fixed_ports=True, forward_timeout=5) as dep:
        fired = []

        def kill_shuffler() -> None:
            fired.append(1)
            dep.shuffler.kill()

        proxy = FaultProxy(dep.analyzer.url, lambda i: "hook_after_commit" if i == 0 else "pass",
                           on_commit=kill_shuffler)
        try:
            created = dep.http.post(f"{dep.analyzer.url}/v1/tasks", headers=dep.admin(), json={
                "name": "midforward", "mechanism": {"kind": "test", "name": "test_identity", "params": {"d": n}},
                "target_central": {"eps": 1.0, "delta": 1e-6}, "min_batch_size_floor": 10, "time_precision": 1,
                "batch_window": 3600}).json()
            dep.register(created, analyzer_url_for_shuffler=proxy.url)
            _, _, _, envs = sealed(dep, created["task_id"], np.arange(n))
            _upload_until_acked(dep, created["task_id"], [(b"", e) for e in envs])
            with pytest.raises(httpx.HTTPError):
                dep.tick(close_current=True)   # the shuffler dies while the analyzer has committed
            assert fired
            assert dep.analyzer_stats(created["task_id"])["batches"] == 1
            dep.shuffler.start()
            _drain(dep, created["task_id"])   # re-forwards the same batch id: idempotent
            c = counts_from_estimate(dep.estimates(created["task_id"]).json())
            assert c.min() == 1 and c.max() == 1
            assert dep.analyzer_stats(created["task_id"])["batches"] == 1
        finally:
            proxy.close()
