"""``GET estimates`` returns values, std errors, CIs and the privacy statement (issue #6).

In process (FastAPI TestClient, no subprocesses; SQLite in a tmp dir and a fresh PostgreSQL database): one batch of sealed GRR
reports is ingested, then the endpoint's fields are checked against the mechanism's own estimator
on the same reports, the 95 % normal interval, and the per-batch shuffle bound of the accountant.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from starlette.testclient import TestClient

from shuffledp.accounting import shuffle_amplification
from shuffledp.service.analyzer import AnalyzerState, create_analyzer_app, ingest_batch
from shuffledp.service.client import encode_reports
from shuffledp.service.config import create_task_config
from shuffledp.service.wire import Batch, KeyConfig, batch_id, encode_batch, seal_report

from .conftest import STORAGES, storage_urls

pytestmark = pytest.mark.timeout(120)

N, D, EPS0, DELTA = 1500, 8, 2.0, 1e-8


@pytest.fixture(scope="module", params=STORAGES)
def ingested(request, tmp_path_factory):
    with storage_urls(request.param, tmp_path_factory.mktemp("est"), roles=("analyzer",)) as (url,):
        yield from _ingested(url)


def _ingested(url):
    an = AnalyzerState(url, admin_token="adm", collector_token="col", peer_secret=b"p")
    cfg = create_task_config(name="est", mechanism={"kind": "frequency", "name": "grr", "epsilon": EPS0,
                                                    "params": {"d": D}},
                             target_central={"eps": 1.0, "delta": DELTA})
    an.add_task(cfg)
    assert cfg.min_batch_size <= N
    x = np.random.default_rng(5).integers(0, D, N)
    pts = encode_reports(cfg, x, time.time())
    k = an.public_configs[0]
    envs = [seal_report(KeyConfig(k.key_id, k.public_key), cfg.task_id, cfg.digest, b"", p.tobytes()) for p in pts]
    window = int(time.time()) // cfg.batch_window
    res = ingest_batch(an, cfg.task_id, batch_id(cfg.task_id, b"", window, envs),
                       encode_batch(Batch(cfg.task_id, b"", window, envs)))
    assert res["valid"] == N
    yield TestClient(create_analyzer_app(an)), cfg, pts
    an.engine.dispose()


def test_estimate_fields_match_the_in_process_estimator(ingested):
    client, cfg, pts = ingested
    r = client.get(f"/v1/tasks/{cfg.task_id.hex()}/estimates", headers={"authorization": "Bearer col"})
    assert r.status_code == 200, r.text
    j = r.json()
    mech = cfg.mechanism_object()
    local = mech.estimate(mech.aggregate(cfg.report_schema.decode(pts)[0]), N)
    assert j["n"] == N and j["batches"] == 1
    np.testing.assert_array_equal(j["estimate"], local.values)
    np.testing.assert_allclose(j["std_error"], local.stderr, rtol=1e-12)
    se = np.asarray(j["std_error"])
    assert np.all(se > 0)
    est = np.asarray(j["estimate"])
    assert j["ci_level"] == 0.95
    np.testing.assert_allclose(j["ci_low"], est - 1.959963984540054 * se, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(j["ci_high"], est + 1.959963984540054 * se, rtol=1e-9, atol=1e-12)


def test_estimate_carries_the_accountants_statement(ingested):
    client, cfg, _ = ingested
    j = client.get(f"/v1/tasks/{cfg.task_id.hex()}/estimates", headers={"authorization": "Bearer col"}).json()
    st = j["privacy_statement"]
    assert st["model"] == "shuffle" and st["neighbouring"] == "replace_one"
    k = cfg.client_policy.max_reports_per_window
    eps_batch = shuffle_amplification(EPS0, math.floor(N * cfg.honest_fraction), DELTA, method="clones")
    assert st["eps"] == pytest.approx(k * eps_batch, rel=1e-12)
    assert st["eps"] < k * EPS0  # amplification is claimed at this batch size
    assert st["delta"] == pytest.approx(k * math.exp((k - 1) * eps_batch) * DELTA, rel=1e-12)


def test_estimates_need_the_collector_token(ingested):
    client, cfg, _ = ingested
    for h in ({}, {"authorization": "Bearer adm"}, {"authorization": "Bearer wrong"}):
        r = client.get(f"/v1/tasks/{cfg.task_id.hex()}/estimates", headers=h)
        assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
