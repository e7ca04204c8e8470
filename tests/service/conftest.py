"""Fixtures for service tests: real subprocess deployments on 127.0.0.1 with SQLite in tmp dirs."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

from shuffledp.service.client import encode_reports, fetch_task, seal_many, upload
from shuffledp.service.harness import Deployment


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


def counts_from_estimate(est: dict) -> np.ndarray:
    return np.rint(np.asarray(est["estimate"]) * est["n"]).astype(np.int64)


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    d = Deployment(tmp_path_factory.mktemp("deploy"), tick_seconds=3600)  # batcher only via admin tick
    d.start()
    yield d
    d.stop()
