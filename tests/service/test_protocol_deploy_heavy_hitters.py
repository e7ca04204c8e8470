"""A heavy-hitter protocol deployed over HTTP: the analyzer names the items it found.

A discovery's estimates are counts of the items found, which differ from release to release, so
the analyzer finds the items once on the releases' pooled statistics (one local randomizer, no
fakes: the statistics add) and returns them with their labels. Over HTTP (one release) and with
two releases given to :func:`protocol_estimates` directly.
"""

from __future__ import annotations

import json
import time

import httpx
import numpy as np
import pytest

from shuffledp.service.client import fetch_task, upload_protocol_users
from shuffledp.service.harness import Deployment

from .conftest import released_estimates, stored_statistics


def _values(rng: np.random.Generator, n: int, planted: np.ndarray) -> np.ndarray:
    """80 % of the users hold one of the planted items, the others a uniform item of [0, 4096)."""
    return np.where(rng.random(n) < 0.8, rng.choice(planted, size=n), rng.integers(0, 4096, size=n))


@pytest.mark.slow
def test_heavy_hitters_over_http_name_their_items(tmp_path) -> None:
    n_per_window = 8000
    spec = {"name": "hh_treehist", "epsilon": 1.0, "delta": 1e-6, "n": n_per_window, "params": {"d": 4096}}
    rng = np.random.default_rng(3)
    planted = np.array([17, 901, 2048, 4000])
    with Deployment(tmp_path, tick_seconds=3600) as dep:
        created = dep.create_task({"name": "hh", "protocol": spec, "time_precision": 60, "batch_window": 3600,
                                   "min_batch_size_floor": 1})
        http = httpx.Client(timeout=60.0)
        cfg, key = fetch_task(http, dep.analyzer.url, bytes.fromhex(created["task_id"]))
        p = cfg.protocol_object()
        assert p.mechanism.hash_seed == cfg.protocol["params"]["hash_seed"]   # drawn by the analyzer
        x = _values(rng, n_per_window, planted)
        upload_protocol_users(http, cfg, key, dep.shuffler_urls, x, time.time())
        dep.tick(close_current=True)
        est = released_estimates(dep, created["task_id"])
        stored = stored_statistics(dep)
        http.close()
    (stat, n), = stored
    assert est["n"] == n == n_per_window
    want = p.estimate(stat, n)
    assert est["labels"] == [int(v) for v in want.labels]
    np.testing.assert_array_equal(np.asarray(est["estimate"]), want.values)   # exactly: difference 0
    np.testing.assert_array_equal(np.asarray(est["std_error"]), want.stderr)
    assert set(planted.tolist()) <= set(est["labels"])   # 1,600 holders each of 8,000: found


def test_discoveries_of_two_releases_are_found_on_their_pooled_statistics() -> None:
    from types import SimpleNamespace

    from shuffledp.service.analyzer import protocol_estimates
    from shuffledp.service.config import create_task_config

    spec = {"name": "hh_treehist", "epsilon": 1.0, "delta": 1e-6, "n": 3000,
            "params": {"d": 4096, "hash_seed": 11}}
    cfg = create_task_config(name="hh", protocol=spec, time_precision=60, batch_window=3600, min_batch_size_floor=1)
    p = cfg.protocol_object()
    rng = np.random.default_rng(5)
    planted = np.array([3, 77, 1500, 4095])
    rows, ledger, stats = [], [], []
    for w, n in ((10, 3000), (11, 2000)):   # two windows: two releases of different sizes
        stat = p.aggregate(p.encode(_values(rng, n, planted), rng))
        stats.append(stat)
        rows.append(SimpleNamespace(window=w, crowd_id=b"", statistic=stat.tobytes(), dtype=str(stat.dtype),
                                    shape=json.dumps(list(stat.shape))))
        ledger.append(SimpleNamespace(window=w, crowd_id=b"", shuffler=0, n_users=n, n_released=n, n_valid=n,
                                      client_windows=json.dumps([w])))
    out = protocol_estimates(cfg, rows, ledger, 0.95)
    want = p.estimate(stats[0] + stats[1], 5000)
    assert out["n"] == 5000 and len(out["releases"]) == 2
    assert out["labels"] == [int(v) for v in want.labels]
    np.testing.assert_array_equal(np.asarray(out["estimate"]), want.values)
    np.testing.assert_array_equal(np.asarray(out["std_error"]), want.stderr)
    assert set(planted.tolist()) <= set(out["labels"])


def test_counting_protocols_still_add_release_estimates() -> None:
    from types import SimpleNamespace

    from shuffledp.service.analyzer import protocol_estimates
    from shuffledp.service.config import create_task_config

    cfg = create_task_config(name="c", protocol={"name": "hist_kr", "epsilon": 1.0, "delta": 1e-6, "n": 3000,
                                                 "params": {"d": 8}},
                             time_precision=60, batch_window=3600, min_batch_size_floor=1)
    p = cfg.protocol_object()
    rng = np.random.default_rng(6)
    rows, ledger, ests = [], [], []
    for w, n in ((10, 3000), (11, 2000)):
        stat = p.aggregate(p.encode(rng.integers(0, 8, size=n), rng))
        ests.append(p.estimate(stat, n))
        rows.append(SimpleNamespace(window=w, crowd_id=b"", statistic=stat.tobytes(), dtype=str(stat.dtype),
                                    shape=json.dumps(list(stat.shape))))
        ledger.append(SimpleNamespace(window=w, crowd_id=b"", shuffler=0, n_users=n, n_released=n, n_valid=n,
                                      client_windows=json.dumps([w])))
    out = protocol_estimates(cfg, rows, ledger, 0.95)
    assert "labels" not in out
    np.testing.assert_array_equal(np.asarray(out["estimate"]), ests[0].values + ests[1].values)


def test_dashboard_rows_name_discovered_items() -> None:
    from shuffledp.service.dashboard import export_rows

    st = {"eps": 1.0, "delta": 1e-6, "text": "(1, 1e-06)-DP"}
    est = {"estimate": [50.0, 20.0], "std_error": [3.0, 2.0], "ci_low": [44.0, 16.0], "ci_high": [56.0, 24.0],
           "n": 100, "privacy_statement": st, "labels": [901, 17]}
    rows = export_rows({"name": "hh", "estimate": est, "series": [{"window": 5, **est, "labels": [17]}]})
    assert [(r["window"], r["item"]) for r in rows] == [("all", 901), ("all", 17), ("5", 17)]
