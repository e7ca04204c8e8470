"""The SDK's durable outbox: nothing is dropped unless the shuffler says the report itself is invalid.

Two parts: a scripted shuffler (``httpx.MockTransport``, no server) for each status the outbox must
handle, and a real deployment for the two cases a reviewer reproduced (a task not yet registered
at the shuffler answers 404; 700 OUE d = 120000 reports are larger than the shuffler's body limit).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time

import httpx
import numpy as np
import pytest

from shuffledp.service import client as client_mod
from shuffledp.service.client import UPLOAD_MAX_BYTES, UPLOAD_MAX_REPORTS, ShuffleDPClient
from shuffledp.service.config import ClientPolicy, create_task_config
from shuffledp.service.hpke import generate_key_pair
from shuffledp.service.wire import KeyConfig, decode_upload, encode_key_list

pytestmark = pytest.mark.timeout(180)

ANALYZER, SHUFFLER = "http://analyzer.test", "http://shuffler.test"


class ScriptedShuffler:
    """Serves the analyzer's config/keys; answers uploads with ``script(call_no, items)``."""

    def __init__(self, script) -> None:
        # the SDK's caps must not interfere: 1000 reports per window, a policy the analyzer refuses at
        # task creation (vacuous group privacy), so it is set on an otherwise valid configuration
        self.cfg = dataclasses.replace(create_task_config(
            name="outbox", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0, "params": {"d": 8}},
            target_central={"eps": 1.9, "delta": 1e-6}, min_batch_size_floor=10),
            client_policy=ClientPolicy(max_reports_per_window=1000, max_reports_per_day=1000, memoize=False))
        _sk, pk = generate_key_pair()
        self.keys = encode_key_list([KeyConfig(1, pk)])
        self.script = script
        self.uploads: list[list[bytes]] = []     # envelopes of each upload request
        self.statuses: list[int | None] = []
        self.accepted: set[bytes] = set()

    def handler(self, req: httpx.Request) -> httpx.Response:
        if req.url.host == "analyzer.test":
            if req.url.path == "/v1/hpke-keys":
                return httpx.Response(200, content=self.keys)
            return httpx.Response(200, json={"config": self.cfg.to_json(), "config_digest": self.cfg.digest.hex()})
        items = decode_upload(req.content, 10**6)
        envs = [e for _c, e in items]
        self.uploads.append(envs)
        out = self.script(len(self.uploads) - 1, envs)
        if isinstance(out, Exception):
            self.statuses.append(None)
            raise out
        self.statuses.append(out.status_code)
        if out.status_code == 200:
            bad = {e["i"] for e in out.json().get("errors", [])} if out.content else set()
            self.accepted.update(hashlib.sha256(e).digest() for i, e in enumerate(envs) if i not in bad)
        return out

    def client(self, tmp_path) -> ShuffleDPClient:
        http = httpx.Client(transport=httpx.MockTransport(self.handler))
        return ShuffleDPClient(ANALYZER, SHUFFLER, self.cfg.task_id, tmp_path / "client.db", http=http)


def ok(envs, errors=()):
    return httpx.Response(200, json={"accepted": len(envs) - len(errors), "duplicate": 0,
                                     "errors": [{"i": i, "error": e} for i, e in errors]})


@pytest.mark.parametrize("failure", [404, 408, 425, 429, 500, 502, 503, 401, "network"])
def test_transient_failures_keep_reports_and_retry(tmp_path, failure):
    def script(k, envs):
        if k < 2:
            if failure == "network":
                return httpx.ConnectError("refused")
            return httpx.Response(failure, headers={"retry-after": "0"}, json={"type": "x"})
        return ok(envs)
    sh = ScriptedShuffler(script)
    c = sh.client(tmp_path)
    receipts = {c.report(v) for v in range(5)}
    # gives up after max_attempts consecutive failures: nothing lost, nothing counted as refused
    assert c.flush(max_attempts=1, base_delay=0.001) == {"sent": 0, "refused": 0, "left": 5}
    assert c.flush(max_attempts=5, base_delay=0.001) == {"sent": 5, "refused": 0, "left": 0}
    assert sh.statuses == [None if failure == "network" else failure] * 2 + [200]
    assert sh.uploads[0] == sh.uploads[1] == sh.uploads[2]          # the same reports, resent
    assert sh.accepted == receipts and c.stats().get("refused", 0) == 0


def test_request_sized_from_envelope_length(tmp_path):
    sh = ScriptedShuffler(lambda k, envs: ok(envs))
    c = sh.client(tmp_path)
    for v in range(50):
        c.report(v % 8)
    per_report = 3 + len(c.crowd) + c.cfg.envelope_len
    c.upload_max_bytes = 8 + 7 * per_report + per_report // 2      # room for 7.5 reports
    assert c.flush(base_delay=0.001) == {"sent": 50, "refused": 0, "left": 0}
    assert [len(u) for u in sh.uploads] == [7] * 7 + [1]            # never a 413 round trip
    assert UPLOAD_MAX_BYTES == __import__("shuffledp.service.shuffler", fromlist=["x"]).MAX_BODY_BYTES
    assert UPLOAD_MAX_REPORTS == __import__("shuffledp.service.shuffler", fromlist=["x"]).MAX_REPORTS_PER_REQUEST


def test_413_splits_the_request_until_it_fits(tmp_path):
    """A shuffler with a smaller body limit than the SDK assumes: 413 halves the request size."""
    limit = 6                                                         # reports per request it takes
    sh = ScriptedShuffler(lambda k, envs: ok(envs) if len(envs) <= limit else httpx.Response(413, json={}))
    c = sh.client(tmp_path)
    receipts = {c.report(v % 8) for v in range(40)}
    assert c.flush(batch=40, base_delay=0.001) == {"sent": 40, "refused": 0, "left": 0}
    assert sh.accepted == receipts
    assert [len(u) for u in sh.uploads][:4] == [40, 20, 10, 5] and sh.statuses.count(413) == 3
    assert c.flush(batch=40) == {"sent": 0, "refused": 0, "left": 0}


def test_only_reports_refused_as_invalid_are_dropped_and_counted(tmp_path, caplog):
    """A request holding a bad report is refused whole (400); the outbox halves the request until
    the bad report is alone, drops only it (400: invalid; 413 alone: too large) and sends the rest."""
    too_large: set[bytes] = set()
    invalid: set[bytes] = set()

    def script(k, envs):
        d = {hashlib.sha256(e).digest() for e in envs}
        if len(envs) == 1 and d <= too_large:
            return httpx.Response(413, json={})
        if d & (too_large | invalid):
            return httpx.Response(400, json={"type": "urn:shuffledp:error:invalidMessage"})
        return ok(envs)
    sh = ScriptedShuffler(script)
    c = sh.client(tmp_path)
    receipts = [c.report(v % 8) for v in range(20)]
    too_large.add(receipts[5])
    invalid.add(receipts[13])
    with caplog.at_level(logging.WARNING, logger="shuffledp.client"):
        assert c.flush(base_delay=0.001) == {"sent": 18, "refused": 2, "left": 0}
    assert sh.accepted == set(receipts) - too_large - invalid
    assert c.stats() == {"refused": 2, "refused:invalidMessage": 1, "refused:reportTooLarge": 1}
    assert caplog.text.count("dropped from the outbox") == 2
    assert max(len(u) for u in sh.uploads[-3:]) < 20       # after isolating, requests grew again
    assert len(sh.uploads[-1]) == 6 and sh.statuses[-1] == 200


def test_per_report_errors_in_a_200_are_counted_by_reason(tmp_path):
    sh = ScriptedShuffler(lambda k, envs: ok(envs, [(1, "invalidMessage"), (2, "unrecognizedCrowd")]))
    c = sh.client(tmp_path)
    for v in range(4):
        c.report(v)
    assert c.flush() == {"sent": 2, "refused": 2, "left": 0}
    assert c.stats() == {"refused": 2, "refused:invalidMessage": 1, "refused:unrecognizedCrowd": 1}


def test_fitting_counts_frames():
    rows = [(b"d", b"cc", b"e" * 100, b"", 0)] * 5
    assert client_mod._fitting(rows, 8 + 3 * 105) == 3
    assert client_mod._fitting(rows, 8 + 3 * 105 - 1) == 2
    assert client_mod._fitting(rows, 10) == 1                       # one always goes (413 decides)


# ---------------------------------------------------------------- real deployment
def test_task_not_yet_registered_at_the_shuffler_keeps_the_report(dep):
    r = dep.http.post(f"{dep.analyzer.url}/v1/tasks", headers=dep.admin(), json={
        "name": "unreg", "mechanism": {"kind": "frequency", "name": "grr", "epsilon": 2.0, "params": {"d": 8}},
        "target_central": {"eps": 1.0, "delta": 1e-8}})
    created = r.json()
    c = ShuffleDPClient(dep.analyzer.url, dep.shuffler.url, bytes.fromhex(created["task_id"]),
                        dep.workdir / "c-unreg.db")
    receipt = c.report(3)
    assert c.flush(max_attempts=2, base_delay=0.01) == {"sent": 0, "refused": 0, "left": 1}
    dep.register(created)
    assert c.flush(max_attempts=2, base_delay=0.01) == {"sent": 1, "refused": 0, "left": 0}
    assert dep.counters(created["task_id"])["accepted"] == 1 and receipt
    c.close()


@pytest.mark.parametrize("client_limit", [None, 4 * UPLOAD_MAX_BYTES])
def test_large_reports_are_uploaded_in_requests_under_the_body_limit(dep, client_limit):
    """OUE d = 120000: 15,080-byte envelopes, 700 of them are 10.5 MB > the shuffler's 8 MiB limit.
    Sized from the envelope length no request is refused; a client that assumes a larger limit
    gets 413 and splits. Either way all 700 are accepted and none is dropped."""
    created = dep.create_task({"name": "big", "mechanism": {"kind": "frequency", "name": "oue", "epsilon": 2.0,
                                                            "params": {"d": 120000}},
                               "target_central": {"eps": 1.9, "delta": 1e-6},
                               "time_precision": 60, "batch_window": 60,
                               # one report per window (700 per window is a vacuous policy, refused at
                               # creation): the 700 reports are dated in 700 consecutive windows
                               "client_policy": {"max_reports_per_window": 1, "max_reports_per_day": 700,
                                                 "memoize": False}})
    seen: list[tuple[int, int]] = []
    http = httpx.Client(timeout=60, event_hooks={"response": [
        lambda resp: seen.append((resp.status_code, len(resp.request.content)))
        if resp.request.method == "POST" else None]})
    c = ShuffleDPClient(dep.analyzer.url, dep.shuffler.url, bytes.fromhex(created["task_id"]),
                        dep.workdir / f"c-big-{client_limit}.db", http=http)
    assert c.cfg.envelope_len == 15080
    if client_limit:
        c.upload_max_bytes = client_limit
    t0 = time.time()
    for i in range(700):
        c.report(1, now=t0 + 60 * i)
    assert c.flush(max_attempts=2, base_delay=0.01) == {"sent": 700, "refused": 0, "left": 0}
    assert dep.counters(created["task_id"])["pending"] == 700
    from shuffledp.service.shuffler import MAX_BODY_BYTES
    assert all(size <= MAX_BODY_BYTES for st, size in seen if st == 200)
    assert [st for st, _ in seen].count(413) == (0 if client_limit is None else 1)
    c.close()
    http.close()


def test_upload_framing_sizes_match_encode_upload():
    """The client sizes requests with the wire module's framing lengths: they must be exact."""
    from shuffledp.service.wire import UPLOAD_HEADER_LEN, encode_upload, upload_item_len

    items = [(b"", b"e" * 88), (b"crowd-id", b"x" * 15080), (b"c" * 64, b"")]
    assert len(encode_upload(items)) == UPLOAD_HEADER_LEN + sum(upload_item_len(c, e) for c, e in items)
