"""Shuffler + analyzer as real subprocesses: thresholds, idempotency, replay, budgets, end to end."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

from shuffledp.service.client import BudgetExceededError, ShuffleDPClient
from shuffledp.service.http_common import sign_request
from shuffledp.service.wire import Batch, batch_id, encode_batch, encode_upload

from .conftest import counts_from_estimate, grr_task, identity_task, sealed, send

pytestmark = pytest.mark.timeout(120)


def test_upload_is_idempotent_and_duplicates_are_reported(dep):
    t = identity_task(dep, d=50, floor=10)
    _, _, _, envs = sealed(dep, t["task_id"], np.arange(20))
    assert send(dep, t["task_id"], envs) == 20
    r = httpx.post(f"{dep.shuffler.url}/v1/tasks/{t['task_id']}/reports",
                   content=encode_upload([(b"", e) for e in envs[:5]])).json()
    assert r == {"accepted": 0, "duplicate": 5, "errors": []}
    assert dep.counters(t["task_id"])["pending"] == 20
    dep.tick()
    est = dep.estimates(t["task_id"]).json()
    c = counts_from_estimate(est)
    assert c[:20].tolist() == [1] * 20 and c[20:].sum() == 0


def test_frames_validated_without_decryption(dep):
    t = identity_task(dep, d=10, floor=5)
    _, _, _, envs = sealed(dep, t["task_id"], [1, 2])
    bad_len = envs[0][:-1]
    bad_key = bytes([envs[1][0] ^ 0x55]) + envs[1][1:]
    r = httpx.post(f"{dep.shuffler.url}/v1/tasks/{t['task_id']}/reports",
                   content=encode_upload([(b"", bad_len), (b"", bad_key), (b"nocrowd", envs[0]), (b"", envs[0])]))
    assert r.status_code == 200
    assert r.json()["accepted"] == 1
    assert [e["error"] for e in r.json()["errors"]] == ["invalidMessage", "outdatedConfig", "unrecognizedCrowd"]
    r = httpx.post(f"{dep.shuffler.url}/v1/tasks/{'00' * 32}/reports", content=encode_upload([]))
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"] == "urn:shuffledp:error:unrecognizedTask"


def test_below_threshold_never_leaves_and_expiry_is_counted(dep):
    t = identity_task(dep, d=30, floor=25, batch_window=1, max_wait_windows=1, tolerable_clock_skew=5)
    _, _, _, envs = sealed(dep, t["task_id"], np.arange(10))
    send(dep, t["task_id"], envs)
    for _ in range(3):
        assert dep.tick(close_current=True)["batches_formed"] == 0
    assert dep.analyzer_stats(t["task_id"])["batches"] == 0
    assert dep.estimates(t["task_id"]).status_code == 404
    time.sleep(2.2)  # the window closes and max_wait_windows = 1 passes
    dep.tick(close_current=False)
    c = dep.counters(t["task_id"])
    assert c["expired"] == 10 and c["pending"] == 0 and c.get("released", 0) == 0
    assert dep.analyzer_stats(t["task_id"])["batches"] == 0


def test_replayed_report_counted_once(dep):
    t = identity_task(dep, d=40, floor=5)
    cfg, key, pts, envs = sealed(dep, t["task_id"], np.arange(10))
    from shuffledp.service.wire import seal_report
    again = seal_report(key, cfg.task_id, cfg.digest, b"", pts[3].tobytes())  # same report id, new envelope
    assert again != envs[3]
    send(dep, t["task_id"], envs + [again])
    dep.tick()
    res = httpx.get(f"{dep.analyzer.url}/v1/tasks/{t['task_id']}/privacy", headers=dep.collector()).json()
    assert len(res["ledger"]) == 1 and res["ledger"][0]["n_released"] == 11 and res["ledger"][0]["n_valid"] == 10
    c = counts_from_estimate(dep.estimates(t["task_id"]).json())
    assert c[:10].tolist() == [1] * 10
    # the same report in a later batch is also a replay
    _, _, _, more = sealed(dep, t["task_id"], np.arange(20, 25))
    send(dep, t["task_id"], more + [seal_report(key, cfg.task_id, cfg.digest, b"", pts[0].tobytes())])
    dep.tick()
    c = counts_from_estimate(dep.estimates(t["task_id"]).json())
    assert c[0] == 1 and c[20:25].tolist() == [1] * 5


def _signed_put(dep, task_hex, body, bid=None, secret=None):
    from shuffledp.service.wire import decode_batch
    bb = decode_batch(body)
    bid = bid or batch_id(bb.task_id, bb.crowd_id, bb.window, bb.envelopes)
    path = f"/v1/tasks/{task_hex}/batches/{bid.hex()}"
    return httpx.put(dep.analyzer.url + path, content=body, timeout=60, headers={
        "authorization": sign_request((secret or dep.peer_secret).encode(), "PUT", path, body)})


def test_batch_put_idempotent_tampered_and_unauthorized(dep):
    t = identity_task(dep, d=20, floor=5)
    cfg, _, _, envs = sealed(dep, t["task_id"], np.arange(8))
    tampered = bytearray(envs[7])
    tampered[50] ^= 1
    body = encode_batch(Batch(cfg.task_id, b"", int(time.time()) // 3600, envs[:7] + [bytes(tampered)]))
    r1 = _signed_put(dep, t["task_id"], body)
    assert r1.status_code == 200, r1.text
    assert r1.json()["valid"] == 7 and r1.json()["rejected"]["decrypt_error"] == 1
    r2 = _signed_put(dep, t["task_id"], body)
    assert r2.json() == r1.json()
    c = counts_from_estimate(dep.estimates(t["task_id"]).json())
    assert c.tolist() == [1] * 7 + [0] * 13
    r3 = _signed_put(dep, t["task_id"], body, secret="wrong")
    assert r3.status_code == 401 and r3.json()["type"] == "urn:shuffledp:error:unauthorized"
    r4 = _signed_put(dep, t["task_id"], body, bid=b"\x00" * 32)
    assert r4.status_code == 400 and r4.json()["type"] == "urn:shuffledp:error:batchMismatch"
    assert dep.analyzer_stats(t["task_id"])["batches"] == 1


def test_task_creation_fails_when_target_unreachable(dep):
    r = dep.http.post(f"{dep.analyzer.url}/v1/tasks", headers=dep.admin(), json={
        "name": "x", "mechanism": {"kind": "frequency", "name": "grr", "epsilon": 2.0, "params": {"d": 8}},
        "target_central": {"eps": 0.001, "delta": 1e-8}})
    assert r.status_code == 422 and "unreachable" in r.json()["detail"]
    r = dep.http.post(f"{dep.analyzer.url}/v1/tasks", json={"name": "x"})
    assert r.status_code == 401


def test_sdk_budget_memoization_and_test_mechanism_refusal(dep, tmp_path):
    t = grr_task(dep, client_policy={"max_reports_per_window": 1, "max_reports_per_day": 1, "memoize": True})
    tid = bytes.fromhex(t["task_id"])
    c = ShuffleDPClient(dep.analyzer.url, dep.shuffler.url, tid, tmp_path / "c.db")
    now = 1_700_000_000.0
    c.report(3, now=now)
    with pytest.raises(BudgetExceededError, match="per window"):
        c.report(3, now=now)
    assert c.pending() == 1
    m1 = c.memoized_message(3)
    assert m1 is not None and c.memo.entries() == 1
    assert c.flush() == {"sent": 1, "refused": 0, "left": 0}
    c.report(3, now=now + 86400)   # next window and day: allowed, same memoized message
    assert c.memo.entries() == 1 and c.memoized_message(3) == m1
    ti = identity_task(dep, d=4, floor=2)
    from shuffledp.service.client import ConfigError
    with pytest.raises(ConfigError, match="test-only"):
        ShuffleDPClient(dep.analyzer.url, dep.shuffler.url, bytes.fromhex(ti["task_id"]), tmp_path / "d.db")


def test_sdk_outbox_survives_shuffler_outage(dep, tmp_path):
    t = grr_task(dep)
    c = ShuffleDPClient(dep.analyzer.url, "http://127.0.0.1:9", bytes.fromhex(t["task_id"]), tmp_path / "o.db")
    c.report(1)
    assert c.flush(max_attempts=2, base_delay=0.01)["left"] == 1   # nothing listens on port 9
    c.close()
    c2 = ShuffleDPClient(dep.analyzer.url, dep.shuffler.url, bytes.fromhex(t["task_id"]), tmp_path / "o.db")
    assert c2.pending() == 1 and c2.flush()["sent"] == 1


@pytest.mark.slow
def test_end_to_end_matches_in_process_pipeline(tmp_path):
    from shuffledp.service.demo import run_demo
    res = run_demo(n=2000, d=8, epsilon=2.0, eps_central=1.0, delta=1e-6, sdk_clients=5, out_dir=tmp_path / "demo")
    assert res["n_aggregated"] == 2000
    assert res["max_abs_diff_in_process"] == 0.0
    assert res["privacy_statement"]["model"] == "shuffle" and res["privacy_statement"]["eps"] < 2.0
    assert (tmp_path / "demo" / "index.html").exists() and (tmp_path / "demo" / "demo.png").exists()


def test_multi_shuffler_by_attribute(dep, tmp_path):
    """Two shufflers, each registered for one crowd; the SDK routes by its crowd."""
    from shuffledp.service.harness import ServiceProcess
    sh2 = ServiceProcess("shuffler", f"sqlite:///{tmp_path / 'sh2.db'}", tmp_path, dep.env, tick=3600).start()
    try:
        r = dep.http.post(f"{dep.analyzer.url}/v1/tasks", headers=dep.admin(), json={
            "name": "crowds", "mechanism": {"kind": "frequency", "name": "grr", "epsilon": 2.0, "params": {"d": 4}},
            "target_central": {"eps": 1.0, "delta": 1e-6}, "crowds": ["aa", "bb"], "min_batch_size_floor": 2,
            "client_policy": {"max_reports_per_window": 1, "max_reports_per_day": 1, "memoize": False}})
        created = r.json()
        n_min = created["config"]["min_batch_size"]
        dep.register(created, crowds=[b"\xaa"])
        dep.register(created, shuffler=sh2, crowds=[b"\xbb"])
        routes = {"aa": dep.shuffler.url, "bb": sh2.url}
        tid = bytes.fromhex(created["task_id"])
        c = ShuffleDPClient(dep.analyzer.url, routes, tid, tmp_path / "cb.db", crowd=b"\xbb")
        c.report(1)
        assert c.flush()["sent"] == 1 and c.shuffler_url == sh2.url
        # a report for crowd bb sent to the crowd-aa shuffler is refused there
        _, _, _, envs = sealed(dep, created["task_id"], [0], crowd=b"\xbb")
        r = httpx.post(f"{dep.shuffler.url}/v1/tasks/{created['task_id']}/reports",
                       content=encode_upload([(b"\xbb", envs[0])])).json()
        assert r["errors"] == [{"i": 0, "error": "unrecognizedCrowd"}]
        for crowd, sh in ((b"\xaa", dep.shuffler), (b"\xbb", sh2)):
            _, _, _, e = sealed(dep, created["task_id"], np.zeros(n_min, dtype=int), crowd=crowd)
            send(dep, created["task_id"], e, crowd=crowd, shuffler=sh)
            dep.tick(shuffler=sh)
        led = dep.http.get(f"{dep.analyzer.url}/v1/tasks/{created['task_id']}/privacy",
                           headers=dep.collector()).json()["ledger"]
        assert sorted((x["crowd"], x["n_valid"]) for x in led) == [("aa", n_min), ("bb", n_min + 1)]
        per_crowd = dep.estimates(created["task_id"], crowd="bb").json()
        assert per_crowd["n"] == n_min + 1
    finally:
        sh2.stop()


def test_key_rotation_old_key_still_decrypts(dep):
    t = identity_task(dep, d=20, floor=4)
    cfg, old_key, pts, envs = sealed(dep, t["task_id"], np.arange(5))
    new_id = dep.http.post(f"{dep.analyzer.url}/v1/admin/keys:rotate", headers=dep.admin()).json()["active_key_id"]
    assert new_id != old_key.key_id
    from shuffledp.service.client import fetch_task
    _, new_key = fetch_task(dep.http, dep.analyzer.url, cfg.task_id, allow_test_mechanisms=True)
    assert new_key.key_id == new_id
    from shuffledp.service.wire import seal_report
    fresh = seal_report(new_key, cfg.task_id, cfg.digest, b"", pts[0].tobytes())
    r = httpx.post(f"{dep.shuffler.url}/v1/tasks/{t['task_id']}/reports", content=encode_upload([(b"", fresh)]))
    assert r.json()["errors"] == [{"i": 0, "error": "outdatedConfig"}]   # shuffler not yet told the new id
    dep.register(t)   # operator mirrors the analyzer's key list (old + new ids)
    send(dep, t["task_id"], envs[1:] + [fresh])
    dep.tick()
    c = counts_from_estimate(dep.estimates(t["task_id"]).json())
    assert c[:5].tolist() == [1] * 5


def test_sdk_reseals_once_after_outdated_config(dep, tmp_path):
    t = grr_task(dep)
    tid = bytes.fromhex(t["task_id"])
    c = ShuffleDPClient(dep.analyzer.url, dep.shuffler.url, tid, tmp_path / "r.db")
    old = c.key.key_id
    new = dep.http.post(f"{dep.analyzer.url}/v1/admin/keys:rotate", headers=dep.admin()).json()["active_key_id"]
    r = dep.http.put(f"{dep.shuffler.url}/v1/tasks/{t['task_id']}", headers=dep.admin(), json={
        "config": t["config"], "analyzer_url": dep.analyzer.url, "key_ids": [new], "crowds": None})
    assert r.status_code == 200
    c.report(2)                      # sealed under the old key
    assert c.key.key_id == old
    assert c.flush() == {"sent": 1, "refused": 0, "left": 0}
    assert c.key.key_id == new       # keys were re-fetched from the analyzer
    assert dep.counters(t["task_id"])["pending"] == 1
