"""Client admission at the shuffler over HTTP (``shuffledp serve`` subprocesses on 127.0.0.1):
per-client bearer tokens, in-memory rate limits, and the threshold-flooding attack they stop."""

from __future__ import annotations

import os
import struct

import httpx
import pytest

from shuffledp.service.client import ShuffleDPClient, fetch_task
from shuffledp.service.client_auth import ClientTokens, RateLimiter, issue_token, token_digest
from shuffledp.service.harness import Deployment
from shuffledp.service.http_common import Problem
from shuffledp.service.wire import encode_upload

from .conftest import identity_task

pytestmark = pytest.mark.timeout(180)


def _garbage(cfg, key_id: int, k: int) -> list[bytes]:
    """Envelopes that pass the shuffler's checks (length, suite, key id) but decrypt to nothing."""
    hdr = struct.pack(">BHHH", key_id, 0x20, 1, 1)
    return [hdr + os.urandom(cfg.envelope_len - 7) for _ in range(k)]


def _post(dep, task_id: str, envs, token: str | None = None) -> httpx.Response:
    h = {"content-type": "application/vnd.shuffledp.upload"}
    if token is not None:
        h["authorization"] = f"Bearer {token}"
    return dep.http.post(f"{dep.shuffler.url}/v1/tasks/{task_id}/reports",
                         content=encode_upload([(b"", e) for e in envs]), headers=h)


def test_client_tokens_stop_the_threshold_flood(tmp_path):
    tokens = tmp_path / "client-tokens"
    honest_token = issue_token(tokens, "device 1")
    assert honest_token not in tokens.read_text() and token_digest(honest_token).hex() in tokens.read_text()
    with Deployment(tmp_path, tick_seconds=3600, client_tokens_file=str(tokens)) as dep:
        created = identity_task(dep, 64, 50)
        tid = created["task_id"]
        cfg, key = fetch_task(dep.http, dep.analyzer.url, bytes.fromhex(tid), allow_test_mechanisms=True)
        # the attacker holds no token: refused before the body counts for anything
        for tok in (None, "guessed-token", honest_token + "x"):
            r = _post(dep, tid, _garbage(cfg, key.key_id, 531), tok)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["type"] == "urn:shuffledp:error:unauthorized"
        r = dep.http.post(f"{dep.shuffler.url}/v1/tasks/{tid}/reports", content=b"x" * 100,
                          headers={"authorization": "Basic abc"})
        assert r.status_code == 401
        # the honest client, through the SDK with its token
        cl = ShuffleDPClient(dep.analyzer.url, dep.shuffler.url, bytes.fromhex(tid), tmp_path / "c.db",
                             allow_test_mechanisms=True, client_token=honest_token)
        try:
            cl.report(7)
            assert cl.flush(base_delay=0.01)["sent"] == 1
        finally:
            cl.close()
        c = dep.counters(tid)
        assert c["accepted"] == 1 and c["pending"] == 1
        assert dep.tick(close_current=True)["batches_formed"] == 0   # 1 < min_batch_size: nothing released
        # the token is not stored anywhere in the shuffler's database
        db = (tmp_path / "shuffler.db").read_bytes() + b"".join(
            p.read_bytes() for p in tmp_path.glob("shuffler.db-*"))
        assert honest_token.encode() not in db and token_digest(honest_token) not in db


def test_without_client_auth_garbage_counts_toward_the_threshold(tmp_path):
    # the documented limit of a deployment without admission control (docs/services.md)
    with Deployment(tmp_path, tick_seconds=3600) as dep:
        created = identity_task(dep, 64, 50)
        tid = created["task_id"]
        cfg, key = fetch_task(dep.http, dep.analyzer.url, bytes.fromhex(tid), allow_test_mechanisms=True)
        assert _post(dep, tid, _garbage(cfg, key.key_id, 59)).json()["accepted"] == 59
        cl = ShuffleDPClient(dep.analyzer.url, dep.shuffler.url, bytes.fromhex(tid), tmp_path / "c.db",
                             allow_test_mechanisms=True)
        try:
            cl.report(7)
            assert cl.flush(base_delay=0.01)["sent"] == 1
        finally:
            cl.close()
        assert dep.tick(close_current=True)["batches_formed"] == 1     # 59 garbage + 1 honest >= 50
        (row,) = dep.http.get(f"{dep.analyzer.url}/v1/tasks/{tid}/privacy", headers=dep.collector()).json()["ledger"]
        assert row["n_released"] == 60 and row["n_valid"] == 1        # the honest report hid among nobody


def test_rate_limit_answers_429_with_retry_after_and_413_above_the_burst(tmp_path):
    with Deployment(tmp_path, tick_seconds=3600, client_rate=0.5, client_burst=5) as dep:
        created = identity_task(dep, 64, 50)
        tid = created["task_id"]
        cfg, key = fetch_task(dep.http, dep.analyzer.url, bytes.fromhex(tid), allow_test_mechanisms=True)
        assert _post(dep, tid, _garbage(cfg, key.key_id, 6)).status_code == 413      # above the burst
        assert _post(dep, tid, _garbage(cfg, key.key_id, 4)).status_code == 200
        r = _post(dep, tid, _garbage(cfg, key.key_id, 3))                            # 1 left, 3 asked
        assert r.status_code == 429 and r.json()["type"] == "urn:shuffledp:error:rateLimited"
        assert 1 <= int(r.headers["retry-after"]) <= 5
        assert dep.counters(tid)["accepted"] == 4                                    # nothing stored


def test_rate_limiter_buckets_refill_and_are_all_or_nothing():
    t = {"now": 0.0}
    rl = RateLimiter(2.0, 4, clock=lambda: t["now"])
    a, b = rl.address_key("192.0.2.1"), b"t" + bytes(32)
    assert a != rl.address_key("192.0.2.2") and b"192.0.2.1" not in a
    rl.take([a, b], 4)
    with pytest.raises(Problem) as ei:
        rl.take([a], 1)
    assert ei.value.status == 429 and ei.value.headers["Retry-After"] == "1"
    t["now"] = 1.0                                        # 2 reports refilled
    with pytest.raises(Problem):
        rl.take([a, b], 3)                                # refused as a whole: neither bucket charged
    rl.take([a, b], 2)
    with pytest.raises(Problem) as ei:
        rl.check([b])
    assert ei.value.status == 429
    with pytest.raises(ValueError):
        RateLimiter(0.0, 1)


def test_tokens_file_is_reloaded_and_validated(tmp_path):
    p = tmp_path / "t"
    tok = issue_token(p)
    ct = ClientTokens(p)
    assert ct.admit(f"Bearer {tok}") == token_digest(tok)
    p.write_text("# revoked everyone\n")
    os.utime(p, ns=(1, 10**18))
    with pytest.raises(Problem):
        ct.admit(f"Bearer {tok}")
    p.write_text("not-a-digest\n")
    with pytest.raises(ValueError, match="SHA-256"):
        ClientTokens(p)
