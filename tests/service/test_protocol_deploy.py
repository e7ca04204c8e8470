"""Registry protocols deployed over HTTP: client SDK -> N shufflers -> analyzer, real storage.

For every protocol the analyzer's estimate must be ``protocol.estimate`` of the statistic of the
messages it received, exactly (difference 0), its statistic the protocol's ``aggregate`` of the
messages the clients sent (plus the shufflers' fakes, or the curator's noise), and the stated
guarantee ``protocol.privacy(n)`` for the n users of the release.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from shuffledp.service.client import ShuffleDPClient, fetch_task, upload_protocol_users
from shuffledp.service.harness import Deployment
from shuffledp.shuffle import protocol as make_protocol

from .conftest import released_estimates, stored_statistics

#: (name, params, n users, values generator)
CASES = {
    "ldp_oracle": ({"d": 8, "oracle": "olh"}, 3000, "categorical"),
    "hist_kr": ({"d": 8}, 3000, "categorical"),
    "cnt_2m": ({}, 3000, "bit"),
    "rsum_rm": ({}, 3000, "unit"),
    "cnt_sgm": ({}, 3000, "bit"),
    "murs": ({"d": 8, "mode": "parallel", "shufflers": 2}, 3000, "categorical"),
    "fragmenting": ({"d": [4, 6]}, 5000, "multi"),
    "cdp_laplace_hist": ({"d": 8}, 3000, "categorical"),
}
SDK_USERS = 5


def _values(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "categorical":
        return rng.integers(0, 8, size=n)
    if kind == "bit":
        return (rng.random(n) < 0.3).astype(np.int64)
    if kind == "unit":
        return rng.random(n)
    return np.stack([rng.integers(0, 4, size=n), rng.integers(0, 6, size=n)], axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_protocol_over_http_equals_pipeline(name: str, tmp_path, monkeypatch) -> None:
    """... and the analyzer's opt-in report archive gives the same estimate through ``shuffledp aggregate``."""
    monkeypatch.setenv("SHUFFLEDP_ANALYZER_EXPORT_DIR", str(tmp_path / "export"))
    est = _deploy_and_check(name, tmp_path, {})
    _check_export(name, tmp_path / "export", est)


def _check_export(name: str, root, est: dict) -> None:
    from shuffledp.engines.archive import aggregate_archives
    if name == "cdp_laplace_hist":      # the curator's raw input is never written out
        assert not root.exists() or not any(root.rglob("*.parquet"))
        return
    (task,) = list(root.iterdir())
    (release,) = list(task.iterdir())   # one window, one crowd (and one batch per shuffler)
    info, _stat, e = aggregate_archives([release])
    assert info.users == est["n"]
    np.testing.assert_array_equal(e.values, np.asarray(est["estimate"]))   # exactly: difference 0
    np.testing.assert_array_equal(e.stderr, np.asarray(est["std_error"]))


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("name", ["cnt_2m", "murs"])
def test_protocol_over_http_on_postgresql(name: str, tmp_path) -> None:
    """The same checks with every service on its own PostgreSQL database (murs: 2 shufflers)."""
    from .conftest import storage_urls
    with storage_urls("postgresql", tmp_path, roles=("shuffler", "shuffler1", "analyzer")) as (s0, s1, a):
        _deploy_and_check(name, tmp_path, {"shuffler_db": s0, "analyzer_db": a, "extra_shuffler_dbs": [s1]})


def _deploy_and_check(name: str, tmp_path, storage: dict) -> None:
    params, n, kind = CASES[name]
    spec = {"name": name, "epsilon": 1.0, "delta": 1e-4, "n": n, "params": params}
    p = make_protocol(name, epsilon=1.0, delta=1e-4, n=n, **params)
    rng = np.random.default_rng(7)
    x = _values(kind, n, rng)
    with Deployment(tmp_path, n_shufflers=p.n_shufflers, tick_seconds=3600, **storage) as dep:
        created = dep.create_task({"name": name, "protocol": spec, "time_precision": 60, "batch_window": 3600,
                                   "min_batch_size_floor": 1})
        task_id = bytes.fromhex(created["task_id"])
        import httpx
        http = httpx.Client(timeout=60.0)
        cfg, key = fetch_task(http, dep.analyzer.url, task_id)
        now = time.time()
        # a few users through the full SDK (outbox, ledger, one envelope per message, markers)
        sdk_msgs = []
        for i in range(SDK_USERS):
            c = ShuffleDPClient(dep.analyzer.url, dep.shuffler_urls, task_id, tmp_path / f"c{i}.db", http=http)
            v = x[i].tolist() if kind == "multi" else x[i].item()
            c.report(v, now=now)
            assert c.flush()["left"] == 0
            sdk_msgs.append(c.last_message)
            c.close()
        pts, _route, _acked = upload_protocol_users(http, cfg, key, dep.shuffler_urls, x[SDK_USERS:], now)
        dep.tick(close_current=True)
        est = released_estimates(dep, created["task_id"])
        stored = stored_statistics(dep)
        assert len(stored) == 1, "one window, one crowd: one release"
        (stat, n_stored), = stored
        counters = [dep.counters(created["task_id"], shuffler=sp) for sp in dep.shufflers]
        http.close()
    # the messages the clients sent, as the analyzer decodes them
    sent = cfg.report_schema.decode(pts)[0]
    for m in sdk_msgs:
        for k in sent:
            sent[k] = np.concatenate([sent[k], np.asarray(m[k][0], dtype=m[k][1])])
    assert est["n"] == n
    want = p.estimate(stat, n)
    np.testing.assert_array_equal(np.asarray(est["estimate"]), want.values)   # exactly: difference 0
    np.testing.assert_array_equal(np.asarray(est["std_error"]), want.stderr)
    st = p.privacy(n)
    assert est["privacy_statement"]["eps"] == st.eps and est["privacy_statement"]["delta"] == st.delta
    assert est["privacy_statement"]["model"] == p.model
    fakes = sum(c.get("fake_messages", 0) for c in counters)
    if p.n_shufflers > 1:
        sent["shuffler"] = np.zeros(0)   # routing is per message; compare per-shuffler totals below
    if name == "cdp_laplace_hist":
        exact = np.bincount(sent["x"], minlength=8)
        assert np.all(np.abs(stat - exact) < 40)   # discrete Laplace(2/eps) noise per item, sd ~ 2.8
    elif name == "murs":
        sent.pop("shuffler", None)
        assert fakes == p.fake_total   # each shuffler added its share of the fakes, sealed to the analyzer
        assert np.all(stat - p.aggregate(sent) >= 0) and (stat - p.aggregate(sent)).sum() > 0
    elif name == "fragmenting":
        assert stat.sum() == 2 * n
    else:
        sent.pop("shuffler", None)
        np.testing.assert_array_equal(stat, p.aggregate(sent))
        # the pipeline on the same messages gives the same estimate, exactly
        np.testing.assert_array_equal(p.analyze(sent, n).values, np.asarray(est["estimate"]))
    return est
