"""Service hardening: retries after a release, fake-message times, health pushes, the central budget lock,
the SDK's time-precision floor, batch decoding, export file names, registration limits, start-up settings.

In-process shuffler and analyzer (the analyzer app behind Starlette's TestClient, an httpx client)
with an injected clock, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from shuffledp.service.analyzer import AnalyzerState, create_analyzer_app, estimates
from shuffledp.service.client import encode_protocol_messages, seal_many, user_markers
from shuffledp.service.config import create_task_config
from shuffledp.service.shuffler import ShufflerState, create_shuffler_app
from shuffledp.service.storage import shuffler_released
from shuffledp.service.wire import UPLOAD_MESSAGE, UPLOAD_USER, encode_upload_v2

from .conftest import Clock

pytestmark = pytest.mark.timeout(180)

HOUR = 3600
T0 = 1_800_000_000.0
TOKEN = "admin-token"
N_USERS = 100


class ProtocolWorld:
    """One Cnt_2M task (a multi-message protocol: users are counted by markers) in process."""

    def __init__(self, urls) -> None:
        self.clock = Clock(T0)
        self.an = AnalyzerState(urls[1], admin_token=TOKEN, collector_token="c", peer_secret=b"peer",
                                clock=self.clock, min_time_precision=1)
        self.sh = ShufflerState(urls[0], admin_token=TOKEN, peer_secret=b"peer", clock=self.clock, auto=False)
        self.sh.http = TestClient(create_analyzer_app(self.an))
        # 100 ln(2/delta)/eps^2 = 79.8 <= n: a small Cnt_2M deployment
        self.cfg = create_task_config(name="markers", protocol={"name": "cnt_2m", "epsilon": 1.0, "delta": 0.9,
                                                                "n": N_USERS},
                                      min_batch_size_floor=1, time_precision=1, min_time_precision=1,
                                      batch_window=HOUR, max_wait_windows=2, tolerable_clock_skew=60)
        self.an.add_task(self.cfg)
        self.sh.register(self.cfg, "http://testserver", [k.key_id for k in self.an.public_configs], None)
        self.key = self.an.public_configs[0]

    def upload_body(self, n: int) -> bytes:
        """One client request carrying ``n`` users' messages and markers (fixed bytes: a retry re-sends them)."""
        pts, _route, users = encode_protocol_messages(self.cfg, np.ones(n, dtype=np.int64), self.clock.t)
        envs = seal_many(self.cfg, self.key, pts, b"")
        return encode_upload_v2([(UPLOAD_MESSAGE, b"", e) for e in envs]
                                + [(UPLOAD_USER, b"", m) for m in user_markers(int(users[0]))])

    def close(self) -> None:
        self.sh.http.close()
        self.sh.engine.dispose()
        self.an.engine.dispose()


@pytest.fixture
def pworld(urls):
    w = ProtocolWorld(urls)
    yield w
    w.close()


def test_user_marker_resent_after_release_is_not_counted_twice(pworld):
    """A client whose acknowledgement was lost re-sends the same upload (same envelopes, same
    markers). If the shuffler released the pool in between, the markers are no longer pending:
    they must still be recognised, or every such user is counted again in the next batch (the
    analyzer cannot tell: it only receives the shuffler's user count), which inflates ``n`` and the
    stated guarantee ``protocol.privacy(n)``."""
    w = pworld
    body = w.upload_body(N_USERS)
    assert w.sh.ingest(w.cfg.task_id, body)["accepted"] > 0
    w.clock.t += 2 * HOUR
    assert w.sh.tick()["forwarded"] == 1                       # released and delivered: markers gone
    retried = w.sh.ingest(w.cfg.task_id, body)                 # the client's retry (its 200 was lost)
    second = w.upload_body(N_USERS)                            # N_USERS new users
    w.sh.ingest(w.cfg.task_id, second)
    w.clock.t += 2 * HOUR
    w.sh.tick()
    est = estimates(w.an, w.cfg.task_id)
    assert est["n"] == 2 * N_USERS, (est["n"], retried)
    assert retried["accepted"] == 0
    # the record of released members is bounded: gone once their window is past retention
    with w.sh.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(shuffler_released)).scalar_one() > 0
    w.sh._retention(w.clock.t + (w.cfg.retention_days + 1) * 86400)
    with w.sh.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(shuffler_released)).scalar_one() == 0


def _released_plaintexts(sh: ShufflerState, an: AnalyzerState, cfg) -> tuple[np.ndarray, np.ndarray]:
    """(message ids, times) of the one batch the shuffler formed, opened with the analyzer's keys."""
    from shuffledp.service.storage import shuffler_batch_items
    from shuffledp.service.wire import open_reports
    with sh.engine.connect() as c:
        envs = [bytes(r[0]) for r in c.execute(select(shuffler_batch_items.c.envelope))]
    pts, n_dec, n_fmt = open_reports(envs, an.private_keys, cfg.task_id, cfg.digest, b"")
    assert n_dec == n_fmt == 0
    rows = np.frombuffer(b"".join(pts), dtype=np.uint8).reshape(len(pts), -1)
    _fields, ids, times = cfg.report_schema.decode(rows)
    return ids, times


def test_shuffler_fakes_are_not_told_apart_by_their_time(urls):
    """MURS's guarantee rests on the analyzer seeing users' messages and the shufflers' uniform
    fakes as one indistinguishable multiset. The time inside each plaintext is a second channel:
    clients wrote ``now // time_precision`` and the shuffler the batch window's start for every
    fake, so with 60 s precision in 1 h windows (the defaults: 1 h in 1 day) a user reporting at
    any other time than the window's first slot was singled out as real, and the messages carrying
    the first slot's time were the fakes: the analyzer could subtract them exactly. Now clients of
    such a task write their window's start, and each fake takes the window of a random message of
    the pool, so a carried-over pool (two windows here) does not single out fakes either."""
    clock = Clock(T0)
    an = AnalyzerState(urls[1], admin_token=TOKEN, collector_token="c", peer_secret=b"peer", clock=clock,
                       min_time_precision=1)
    sh = ShufflerState(urls[0], admin_token=TOKEN, peer_secret=b"peer", clock=clock, auto=False)
    sh.http = TestClient(create_analyzer_app(an))
    n = 3000
    try:
        cfg = create_task_config(name="fakes", protocol={"name": "murs", "epsilon": 1.0, "delta": 1e-6, "n": n,
                                                         "params": {"d": 8, "mode": "chain"}},
                                 min_batch_size_floor=1, time_precision=60, batch_window=HOUR, min_time_precision=1)
        n_fakes = cfg.protocol_object().fake_total
        assert n_fakes >= 30
        an.add_task(cfg)
        sh.register(cfg, "http://testserver", [k.key_id for k in an.public_configs], None)
        key = an.public_configs[0]
        real: set[bytes] = set()
        for k in range(2):                                   # half the users in each of two windows
            clock.t = T0 + k * HOUR + 1800                   # in the middle of the window
            pts, _route, _users = encode_protocol_messages(cfg, np.arange(n // 2) % 8, clock.t)
            real |= {bytes(r[1:17]) for r in pts}
            envs = seal_many(cfg, key, pts, b"")
            assert sh.ingest(cfg.task_id, encode_upload_v2([(UPLOAD_MESSAGE, b"", e) for e in envs]))["accepted"] \
                == n // 2
            assert sh._form_batches(T0 + (k + 1) * HOUR + 60, False) == k   # released once the pool has n users
        ids, times = _released_plaintexts(sh, an, cfg)
        is_fake = np.array([bytes(i) not in real for i in ids])
        assert is_fake.sum() == n_fakes
        fake_t, real_t = sorted(set(times[is_fake].tolist())), sorted(set(times[~is_fake].tolist()))
        # every time value carries users' messages and fakes alike (P(all 30+ fakes in one window) < 2^-29)
        assert fake_t == real_t and len(real_t) == 2, (fake_t, real_t)
    finally:
        sh.http.close()
        sh.engine.dispose()
        an.engine.dispose()


@pytest.mark.parametrize("v2", [False, True])
def test_batch_body_of_empty_envelopes_is_refused(v2):
    """``decode_batch`` is documented total: a count with a zero envelope length passed the length
    check (``start + n * 0``) and built ``n`` empty envelopes, up to 2^32 - 1 from a 56-byte body
    (an endless loop / out of memory in the analyzer instead of one 400)."""
    import struct

    from shuffledp.service.wire import DecodeError, decode_batch
    head = (b"SDB2" if v2 else b"SDB1") + bytes(32) + b"\x00"
    tail = struct.pack(">QBIIH", 7, 0, 5, 10**6, 0) if v2 else struct.pack(">QIH", 7, 10**6, 0)
    with pytest.raises(DecodeError, match="envelope length"):
        decode_batch(head + tail)


@pytest.mark.parametrize("name", ["Zählung – 日本", 'a"b\\c;d'])
def test_dashboard_export_of_a_task_with_any_name(tmp_path, name):
    """A task name is any string of up to 200 characters, but the export put it verbatim into the
    ``Content-Disposition`` header, which HTTP encodes as Latin-1: a name outside Latin-1 made
    every export of the task fail with 500."""
    an = AnalyzerState(f"sqlite:///{tmp_path}/a.db", admin_token=TOKEN, collector_token="c", peer_secret=b"p")
    try:
        cfg = create_task_config(name=name, mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                       "params": {"d": 4}},
                                 target_central={"eps": 1.0, "delta": 1e-8})
        an.add_task(cfg)
        with TestClient(create_analyzer_app(an)) as http:
            for fmt in ("csv", "json"):
                r = http.get(f"/v1/dashboard/tasks/{cfg.task_id.hex()}/export?format={fmt}",
                             headers={"authorization": "Bearer c"})
                assert r.status_code == 200, (fmt, r.status_code, r.text)
                disp = r.headers["content-disposition"]
                assert disp.isascii() and disp.startswith("attachment; filename=") and disp.endswith(f'.{fmt}"')
                assert disp.count('"') == 2 and "\\" not in disp
    finally:
        an.engine.dispose()


def test_sdk_refuses_a_task_whose_time_precision_is_below_the_floor(tmp_path, monkeypatch):
    """The analyzer is the party the shuffle hides clients from, and it serves the task
    configuration the SDK seals reports under. The SDK already refuses a configuration whose
    ``min_batch_size`` is too small for its own target; it accepted any ``time_precision``, so an
    analyzer publishing ``time_precision = 1`` learned the second each report was made (linkable to
    the connection that carried it), which the services refuse at task creation (floor 60 s)."""
    import httpx

    from shuffledp.service.client import ConfigError, fetch_task
    from shuffledp.service.wire import encode_key_list
    an = AnalyzerState(f"sqlite:///{tmp_path}/a.db", admin_token=TOKEN, collector_token="c", peer_secret=b"p",
                       min_time_precision=1)
    try:
        cfgs = {tp: create_task_config(name=f"tp{tp}", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                                  "params": {"d": 4}},
                                       target_central={"eps": 1.0, "delta": 1e-8}, time_precision=tp,
                                       batch_window=3600, min_time_precision=1) for tp in (1, 60)}
        by_path = {f"/v1/tasks/{c.task_id.hex()}/config": {"config": c.to_json(), "config_digest": c.digest.hex()}
                   for c in cfgs.values()}

        def handler(req: httpx.Request) -> httpx.Response:
            if req.url.path == "/v1/hpke-keys":
                return httpx.Response(200, content=encode_key_list(an.public_configs))
            return httpx.Response(200, json=by_path[req.url.path])

        http = httpx.Client(transport=httpx.MockTransport(handler))
        monkeypatch.delenv("SHUFFLEDP_MIN_TIME_PRECISION", raising=False)   # production: no test override
        assert fetch_task(http, "http://analyzer", cfgs[60].task_id)[0].time_precision == 60
        with pytest.raises(ConfigError, match="time_precision"):
            fetch_task(http, "http://analyzer", cfgs[1].task_id)
        monkeypatch.setenv("SHUFFLEDP_MIN_TIME_PRECISION", "1")             # the test suites' override
        assert fetch_task(http, "http://analyzer", cfgs[1].task_id)[0].time_precision == 1
    finally:
        an.engine.dispose()


def test_health_push_does_not_tell_the_analyzer_how_many_messages_pending_users_sent(pworld):
    """Cnt_2M: a user holding x sends x + Ber(p) one-bit messages, so a user's message count is
    her value whenever it is 0 or 2; the shuffle exists to hide it. The shuffler pushed its pending
    envelope and user counts to the analyzer every 5 s: one user arriving in a quiet interval showed
    up as users +1, envelopes +2, i.e. x = 1, long before (or without) any release of n users.
    For tasks whose users are counted by markers, the push carries the pending users only."""
    w = pworld
    while True:   # one user who sends two messages (x = 1 and the Bernoulli bit 1)
        pts, _route, users = encode_protocol_messages(w.cfg, np.ones(1, dtype=np.int64), w.clock.t)
        if pts.shape[0] == 2:
            break
    envs = seal_many(w.cfg, w.key, pts, b"")
    body = encode_upload_v2([(UPLOAD_MESSAGE, b"", e) for e in envs] + [(UPLOAD_USER, b"", m) for m in user_markers(1)])
    assert w.sh.ingest(w.cfg.task_id, body)["accepted"] == 3
    (_url, (entry,)), = w.sh.health_report().items()
    assert entry["pending_users"] == 1
    assert entry["pending_envelopes"] is None, entry      # 2 here would say: this user holds x = 1
    # the analyzer keeps such a push (and the dashboard shows "–" for it)
    import json

    from shuffledp.service.http_common import sign_request
    doc = json.dumps({"tasks": [entry]}).encode()
    r = w.sh.http.put("/v1/shuffler-health", content=doc,
                      headers={"authorization": sign_request(b"peer", "PUT", "/v1/shuffler-health", doc)})
    assert r.status_code == 200 and r.json() == {"kept": 1, "dropped": 0}


def test_two_analyzer_processes_cannot_overspend_a_central_query_budget(urls, monkeypatch):
    """Central mode debits ``eps_per_query`` per answer and refuses past ``query_budget_eps``; the
    check (sum of the spent eps) and the debit share one transaction, but only an in-process lock
    kept two answers apart. On SQLite ``BEGIN IMMEDIATE`` also serializes other processes; on
    PostgreSQL (READ COMMITTED) two analyzer processes on one database (a restart overlapping the
    old process, a second replica) both read the old total and both answered: a budget of one
    query released two. The task row is now locked (``FOR UPDATE``) before the total is read."""
    import threading
    import time as _time

    import shuffledp.central as central
    from shuffledp.service.analyzer import _merge_statistic
    from shuffledp.service.http_common import Problem
    a = AnalyzerState(urls[1], admin_token=TOKEN, collector_token="c", peer_secret=b"p")
    b = AnalyzerState(urls[1], admin_token=TOKEN, collector_token="c", peer_secret=b"p")   # a second process
    try:
        cfg = create_task_config(name="central", mechanism={"kind": "central", "name": "histogram", "params": {"d": 4}},
                                 target_central={"eps": 1.0, "delta": 1e-6}, min_batch_size_floor=1,
                                 central_mode={"eps_per_query": 1.0, "query_budget_eps": 1.0})
        a.add_task(cfg)
        with a.engine.begin() as c:
            _merge_statistic(c, cfg.task_id, 0, b"", np.array([5, 0, 3, 2], dtype=np.int64), 10)
        release = central.DiscreteLaplaceMechanism.release

        def slow_release(self, *args, **kw):   # widen the window between the budget check and the debit
            _time.sleep(0.5)
            return release(self, *args, **kw)

        monkeypatch.setattr(central.DiscreteLaplaceMechanism, "release", slow_release)
        outcomes: list = []

        def query(state):
            try:
                outcomes.append(estimates(state, cfg.task_id)["budget"]["spent"])
            except Problem as e:
                outcomes.append(e.status)

        threads = [threading.Thread(target=query, args=(s,)) for s in (a, b)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert sorted(outcomes, key=str) == sorted([1.0, 403], key=str), outcomes
    finally:
        a.engine.dispose()
        b.engine.dispose()


def test_shuffler_task_registration_is_bounded_and_never_500(tmp_path):
    """``PUT /v1/tasks/{t}`` (admin) read its body without a size or time bound, and a deeply
    nested body (RecursionError) or a ``min_batch_size`` beyond the column (OverflowError on
    insert) was answered 500; now: 413 over 1 MiB, 4xx naming the problem otherwise."""
    import json

    sh = ShufflerState(f"sqlite:///{tmp_path}/s.db", admin_token=TOKEN, peer_secret=b"p", auto=False)
    try:
        cfg = create_task_config(name="g", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                      "params": {"d": 4}}, target_central={"eps": 1.0, "delta": 1e-6})
        path, h = f"/v1/tasks/{cfg.task_id.hex()}", {"authorization": f"Bearer {TOKEN}"}
        good = {"config": cfg.to_json(), "analyzer_url": "http://x", "key_ids": [1]}
        with TestClient(create_shuffler_app(sh)) as http:
            assert http.put(path, content=json.dumps(good), headers=h).status_code == 200
            r = http.put(path, content=b" " * (2 << 20), headers=h)
            assert r.status_code == 413, r.status_code
            r = http.put(path, content="[" * 100_000 + "]" * 100_000, headers=h)
            assert r.status_code in (400, 422), (r.status_code, r.text)
            huge = {**good, "config": {**cfg.to_json(), "min_batch_size": 10**30}}
            r = http.put(path, content=json.dumps(huge), headers=h)
            assert r.status_code == 422 and "min_batch_size" in r.json()["detail"], (r.status_code, r.text)
    finally:
        sh.engine.dispose()


@pytest.mark.parametrize("value", ["abc", "0", "-5"])
def test_serve_refuses_a_bad_min_time_precision_variable_in_one_line(tmp_path, monkeypatch, capsys, value,
                                                                      restore_logging):
    """``SHUFFLEDP_MIN_TIME_PRECISION`` was read with a bare ``int()``: a non-integer value ended
    ``serve`` with a ValueError traceback instead of the one-line error naming what to fix."""
    from shuffledp.service import serve
    monkeypatch.setenv("SHUFFLEDP_MIN_TIME_PRECISION", value)
    root_handlers = logging.getLogger().handlers[:]
    with pytest.raises(SystemExit) as ei:
        serve.main(["analyzer", "--db", f"sqlite:///{tmp_path}/a.db"])
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SHUFFLEDP_MIN_TIME_PRECISION" in err[0], err
    assert logging.getLogger().handlers == root_handlers, "a refused start must not configure logging"
