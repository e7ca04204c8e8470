"""Hardening of the analyzer's HTTP surface, the shared body reader, logs and task validation.

Over real HTTP (subprocess services on 127.0.0.1, raw sockets where the test needs to control
what the client has sent when the server answers):

- a batch PUT is authenticated from its header before the body is read: 401 while the client has
  sent only part of a 400 MiB body, no growth of the analyzer's memory; 413 for a signed length
  above ``MAX_BATCH_BODY``; a body that differs from the signed one is refused;
- a body that stalls is answered 408 and its connection closed within the read deadline
  (analyzer batch PUT and shuffler upload, the same reader);
- a client abort, a 500 and a malformed request each log exactly one line, without a traceback;
- task creation refuses non-finite numbers, unknown fields (``task_id``), booleans as integers,
  absurd ranges and a ``time_precision`` below the 60 s floor with a 4xx naming the field; the
  estimate window bounds are validated.

In process, on SQLite and PostgreSQL: group privacy of many reports per user (``k = 1000``) no
longer overflows at ingest or in the estimates; such a policy is refused at task creation.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import socket
import sqlite3
import threading
import time

import httpx
import numpy as np
import pytest
from starlette.testclient import TestClient

from shuffledp.accounting import group_privacy, group_privacy_log_delta
from shuffledp.core.errors import ValidationError
from shuffledp.service.analyzer import (MAX_BATCH_BODY, AnalyzerState, create_analyzer_app, estimates,
                                        ingest_batch)
from shuffledp.service.client import encode_reports
from shuffledp.service.config import ClientPolicy, create_task_config
from shuffledp.service.harness import Deployment
from shuffledp.service.http_common import OneLineLogs, sign_digest, sign_request
from shuffledp.service.wire import Batch, KeyConfig, batch_id, encode_batch, seal_report

from .conftest import STORAGES, storage_urls

pytestmark = pytest.mark.timeout(120)

GRR = {"kind": "frequency", "name": "grr", "epsilon": 2.0, "params": {"d": 8}}
BODY_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def prod(tmp_path_factory):
    """Shuffler + analyzer on SQLite with the production time_precision floor (the test override
    removed from their environment) and a 1 s body read timeout."""
    d = Deployment(tmp_path_factory.mktemp("hardening"), tick_seconds=3600)
    d.env.pop("SHUFFLEDP_MIN_TIME_PRECISION", None)   # the same dict is both processes' environment
    for p in (d.analyzer, d.shuffler):
        p.extra_args = [*p.extra_args, "--body-timeout", str(BODY_TIMEOUT)]
    d.start()
    try:
        yield d
    finally:
        d.stop()


# ------------------------------------------------------------------ raw HTTP helpers
def _open(port: int, head: str, body_part: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head.encode() + b"\r\n" + body_part)
    return s


def _response(s: socket.socket, timeout: float) -> tuple[int | None, bytes, bool]:
    """(status, bytes read, closed by the server) after reading until close or ``timeout``."""
    s.settimeout(0.2)
    buf, closed, t_end = b"", False, time.monotonic() + timeout
    while time.monotonic() < t_end:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        buf += chunk
    status = int(buf.split(b" ", 2)[1]) if buf.startswith(b"HTTP/1.1 ") else None
    return status, buf, closed


def _put_head(path: str, length: int, auth: str | None) -> str:
    h = f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n" \
        f"Content-Length: {length}\r\n"
    if auth is not None:
        h += f"Authorization: {auth}\r\n"
    return h


def _batch_path() -> str:
    return f"/v1/tasks/{os.urandom(32).hex()}/batches/{os.urandom(32).hex()}"


def _log_lines(dep_proc) -> list[str]:
    return dep_proc.log_path.read_text(errors="replace").splitlines()


def _wait_for_new_lines(dep_proc, before: int, n: int = 1, timeout: float = 5.0) -> list[str]:
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        lines = _log_lines(dep_proc)
        if len(lines) >= before + n:
            time.sleep(0.5)  # let anything that follows (a traceback) arrive too
            return _log_lines(dep_proc)[before:]
        time.sleep(0.05)
    return _log_lines(dep_proc)[before:]


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


# ------------------------------------------------------------------ 3: authenticate before reading a body
@pytest.mark.parametrize("auth", [None, "SDP-HMAC-SHA256 len=419430400,sha256=" + "00" * 32 + ",mac=" + "00" * 32,
                                  "Bearer nope"])
def test_unauthenticated_batch_put_is_refused_before_the_body(prod, auth):
    """401 arrives while only 64 KiB of a declared 400 MiB body were sent (the old handler awaited
    the whole body before checking the signature: no answer at all here), and the connection closes."""
    s = _open(prod.analyzer.port, _put_head(_batch_path(), 400 << 20, auth), b"\0" * 65536)
    status, buf, closed = _response(s, timeout=5)
    s.close()
    assert status == 401, buf[:200]
    assert b"application/problem+json" in buf and b"urn:shuffledp:error:unauthorized" in buf
    assert closed


def test_unauthenticated_large_body_does_not_grow_the_analyzer(prod):
    """Audit repro: a 400 MiB unauthenticated PUT raised the analyzer from 300 to 1041 MiB. Now the
    server answers and closes after the head; the client's writes fail and the peak RSS stays put."""
    pid = prod.analyzer.proc.pid
    hwm0 = _status_kib(pid, "VmHWM")
    chunk = b"\x5a" * (1 << 20)
    sent = []

    def flood() -> None:
        s = _open(prod.analyzer.port, _put_head(_batch_path(), 400 << 20, None))
        n = 0
        try:
            for _ in range(400):
                s.sendall(chunk)
                n += len(chunk)
        except OSError:  # reset by the server after its 401
            pass
        finally:
            sent.append(n)
            s.close()
    threads = [threading.Thread(target=flood) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(n < (400 << 20) for n in sent), sent       # the server stopped taking the bodies
    assert _status_kib(pid, "VmHWM") - hwm0 < 64 * 1024     # peak RSS grew by < 64 MiB (was +741 MiB)
    assert httpx.get(prod.analyzer.url + "/healthz").status_code == 200


def test_signed_length_above_the_cap_is_413_before_the_body(prod):
    path = _batch_path()
    n = MAX_BATCH_BODY + 1
    auth = sign_digest(prod.peer_secret.encode(), "PUT", path, n, os.urandom(32))
    s = _open(prod.analyzer.port, _put_head(path, n, auth), b"\0" * 65536)
    status, buf, closed = _response(s, timeout=5)
    s.close()
    assert status == 413 and b"urn:shuffledp:error:batchTooLarge" in buf and closed


def test_body_must_match_the_signed_length_and_digest(prod):
    path = _batch_path()
    body = os.urandom(1000)
    auth = sign_request(prod.peer_secret.encode(), "PUT", path, body)
    other = bytes(b ^ 1 for b in body)
    r = httpx.put(prod.analyzer.url + path, content=other, headers={"authorization": auth})
    assert r.status_code == 401 and r.json()["type"] == "urn:shuffledp:error:unauthorized"
    r = httpx.put(prod.analyzer.url + path, content=body + b"x", headers={"authorization": auth})
    assert r.status_code == 413                                  # longer than the signed length
    # the signature binds method and path: the same header on another path is refused
    r = httpx.put(prod.analyzer.url + _batch_path(), content=body, headers={"authorization": auth})
    assert r.status_code == 401


# ------------------------------------------------------------------ 6: stalled bodies
@pytest.mark.parametrize("role", ["analyzer", "shuffler"])
def test_stalled_body_is_answered_408_and_closed_within_the_deadline(prod, role):
    """Part of a body, then nothing: the old handlers waited forever (holding the bytes); now the
    connection gets 408 after ``--body-timeout`` (1 s here) and is closed."""
    if role == "analyzer":
        path = _batch_path()
        auth = sign_digest(prod.peer_secret.encode(), "PUT", path, 1 << 20, os.urandom(32))
        head, port = _put_head(path, 1 << 20, auth), prod.analyzer.port
    else:
        head = (f"POST /v1/tasks/{os.urandom(32).hex()}/reports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Length: {1 << 20}\r\n")
        port = prod.shuffler.port
    t0 = time.monotonic()
    s = _open(port, head, b"\1" * 4096)
    status, buf, closed = _response(s, timeout=10)
    elapsed = time.monotonic() - t0
    s.close()
    assert status == 408 and b"urn:shuffledp:error:requestTimeout" in buf, buf[:200]
    assert closed and BODY_TIMEOUT * 0.9 <= elapsed < BODY_TIMEOUT + 4


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """A shuffler allowing 4 concurrent connections + requests and 1 s to deliver a request head."""
    d = Deployment(tmp_path_factory.mktemp("limited"), tick_seconds=3600)
    d.shuffler.extra_args = [*d.shuffler.extra_args, "--limit-concurrency", "4", "--head-timeout", "1"]
    d.shuffler.start()
    try:
        yield d
    finally:
        d.shuffler.stop()
        d.http.close()


@pytest.mark.parametrize("sent", [b"", b"POST /v1/tasks/00/reports HTTP/1.1\r\nHost: 127.0"])
def test_connection_without_a_complete_head_is_closed(limited, sent):
    """uvicorn alone keeps a silent connection, or one stuck in its headers, open forever."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", limited.shuffler.port), timeout=10)
    s.sendall(sent)
    status, buf, closed = _response(s, timeout=8)
    s.close()
    assert closed and status is None and 0.9 <= time.monotonic() - t0 < 5, buf


def test_connection_limit_answers_503_and_recovers(limited):
    url = limited.shuffler.url + "/healthz"
    assert httpx.get(url).status_code == 200
    idle = [socket.create_connection(("127.0.0.1", limited.shuffler.port), timeout=10) for _ in range(4)]
    try:
        time.sleep(0.2)
        assert httpx.get(url).status_code == 503
    finally:
        for s in idle:
            s.close()
    time.sleep(0.3)
    assert httpx.get(url).status_code == 200
    # and the idle ones would have been dropped by the head timeout anyway
    idle = [socket.create_connection(("127.0.0.1", limited.shuffler.port), timeout=10) for _ in range(4)]
    time.sleep(1.8)
    try:
        assert httpx.get(url).status_code == 200
    finally:
        for s in idle:
            s.close()


# ------------------------------------------------------------------ 8: one line per event
def test_client_abort_logs_one_line(prod):
    before = len(_log_lines(prod.analyzer))
    path = _batch_path()
    auth = sign_digest(prod.peer_secret.encode(), "PUT", path, 1 << 20, os.urandom(32))
    s = _open(prod.analyzer.port, _put_head(path, 1 << 20, auth), b"\1" * 4096)
    time.sleep(0.2)
    s.close()                                     # abort mid-body
    new = _wait_for_new_lines(prod.analyzer, before)
    assert len(new) == 1, new
    assert "client disconnected" in new[0] and "Traceback" not in new[0]


def test_internal_error_logs_one_line_without_traceback(prod):
    """A 500 (here: a corrupt stored task configuration) is one log line naming the exception type;
    uvicorn's "Exception in ASGI application" and the ~50-line traceback are gone."""
    tid = os.urandom(32)
    con = sqlite3.connect(prod.analyzer.db.removeprefix("sqlite:///"))
    with con:
        con.execute("INSERT INTO analyzer_tasks (task_id, config, config_digest, active) VALUES (?, ?, ?, 1)",
                    (tid, "{not json", b"\0" * 32))
    con.close()
    before = len(_log_lines(prod.analyzer))
    r = httpx.get(f"{prod.analyzer.url}/v1/tasks/{tid.hex()}/config")
    assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"] == "urn:shuffledp:error:internal"
    new = _wait_for_new_lines(prod.analyzer, before)
    assert len(new) == 1, new
    assert "internal error: JSONDecodeError" in new[0]


def test_malformed_request_logs_one_line(prod):
    before = len(_log_lines(prod.shuffler))
    s = _open(prod.shuffler.port, "GARBAGE\x01 / HTTP/9\r\nX: " + "y" * 100 + "\r\n")
    status, buf, closed = _response(s, timeout=5)
    s.close()
    assert status == 400 and closed
    new = _wait_for_new_lines(prod.shuffler, before)
    assert len(new) <= 1 and not any("Traceback" in ln or "y" * 20 in ln for ln in new), new


def test_one_line_filter_drops_tracebacks_and_request_text():
    rec = None
    try:
        raise ValueError("secret request data")
    except ValueError:
        import sys
        rec = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application\nmore",
                                None, sys.exc_info())
    assert OneLineLogs().filter(rec)
    line = logging.Formatter("%(message)s").format(rec)
    assert line == "Exception in ASGI application (ValueError)"


def test_unhandled_exception_is_answered_and_not_reraised(tmp_path, caplog):
    """In process: the app answers 500 problem+json and logs one record without exc_info; the
    exception no longer escapes to the server (Starlette re-raised it, so uvicorn printed it)."""
    an = AnalyzerState(f"sqlite:///{tmp_path / 'a.db'}", admin_token="a", collector_token="c", peer_secret=b"p",
                       retention_every=0)
    app = create_analyzer_app(an)

    @app.get("/boom")
    def boom() -> dict:
        raise RuntimeError("do not log me")

    with caplog.at_level(logging.WARNING):
        r = TestClient(app, raise_server_exceptions=True).get("/boom")
    assert r.status_code == 500 and r.json()["type"] == "urn:shuffledp:error:internal"
    recs = [x for x in caplog.records if x.name.startswith("shuffledp")]
    assert [x.getMessage() for x in recs] == ["internal error: RuntimeError"] and recs[0].exc_info is None


# ------------------------------------------------------------------ 8: typed task validation over HTTP
def _create(prod, body) -> httpx.Response:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(f"{prod.analyzer.url}/v1/tasks", content=content, headers=prod.admin())


BASE = {"name": "v", "mechanism": GRR, "target_central": {"eps": 1.0, "delta": 1e-8}}


@pytest.mark.parametrize("body,field", [
    ('{"name": "v", "mechanism": {"kind": "frequency", "name": "grr", "epsilon": 2.0, "params": {"d": 8}}, '
     '"target_central": {"eps": Infinity, "delta": 1e-8}}', "target_central.eps"),
    ('{"name": "v", "mechanism": {"kind": "frequency", "name": "grr", "epsilon": NaN, "params": {"d": 8}}, '
     '"target_central": {"eps": 1.0, "delta": 1e-8}}', "mechanism.epsilon"),
    ({**BASE, "task_id": "00" * 32}, "task_id"),
    ({**BASE, "min_time_precision": 1}, "min_time_precision"),
    ({**BASE, "time_precision": True}, "time_precision"),
    ({**BASE, "batch_window": 3600 * 10**26}, "batch_window"),       # a multiple of time_precision
    ({**BASE, "tolerable_clock_skew": 10**30}, "tolerable_clock_skew"),
    ({**BASE, "max_wait_windows": True}, "max_wait_windows"),
    ({**BASE, "retention_days": 10**30}, "retention_days"),
    ({**BASE, "min_batch_size_floor": 10**30}, "min_batch_size_floor"),
    ({**BASE, "honest_fraction": True}, "honest_fraction"),
    ({**BASE, "time_precision": 1, "batch_window": 1}, "time_precision"),
    ({**BASE, "time_precision": 30, "batch_window": 3600}, "time_precision"),
    ({**BASE, "mechanism": {**GRR, "params": {"d": True}}}, "mechanism.params.d"),
    ({**BASE, "target_central": {"eps": 1.0, "delta": 1e-8, "x": 1}}, "target_central"),
    ({**BASE, "client_policy": {"max_reports_per_window": 1000, "max_reports_per_day": 1000}},
     "client_policy.max_reports_per_window"),
])
def test_task_creation_refuses_bad_fields_naming_them(prod, body, field):
    r = _create(prod, body)
    assert r.status_code == 422, (r.status_code, r.text)
    assert r.headers["content-type"] == "application/problem+json"
    assert field in r.json()["detail"]


def test_unparseable_task_bodies_are_400_not_500(prod):
    for body in ("[" * 100_000 + "]" * 100_000, '{"a": ' + "[" * 5000 + "]" * 5000 + "}", "[1, 2]", "{"):
        r = _create(prod, body)
        assert r.status_code == 400 and r.json()["type"] == "urn:shuffledp:error:invalidRequest", r.text


def test_task_creation_accepts_the_floor_and_estimate_windows_are_bounded(prod):
    r = _create(prod, {**BASE, "time_precision": 60, "batch_window": 3600})
    assert r.status_code == 200, r.text
    t = r.json()["task_id"]
    for v in ("1e20", str(10**20), "-1", "true"):
        r = prod.estimates(t, from_window=v)
        assert r.status_code == 422 and "from_window" in r.json()["detail"], (v, r.text)
    r = prod.estimates(t, to_window=str(10**20))
    assert r.status_code == 422 and "to_window" in r.json()["detail"]
    assert prod.estimates(t, from_window="0").status_code == 404   # valid query, no data yet


def test_time_precision_floor_is_a_parameter():
    kw = dict(name="x", mechanism=GRR, target_central={"eps": 1.0, "delta": 1e-8}, time_precision=1, batch_window=60)
    with pytest.raises(ValidationError) as e:
        create_task_config(**kw)
    assert e.value.parameter == "time_precision"
    assert create_task_config(**kw, min_time_precision=1).time_precision == 1
    assert AnalyzerState.__init__.__kwdefaults__["min_time_precision"] == 60


# ------------------------------------------------------------------ 4: group privacy without overflow
def test_group_privacy_log_delta_matches_and_never_overflows():
    for eps, delta, k in [(0.5, 1e-8, 3), (1.0, 1e-6, 10), (0.01, 1e-9, 200)]:
        g = group_privacy((eps, delta), k)
        assert math.exp(group_privacy_log_delta(eps, delta, k)) == pytest.approx(g.delta, rel=1e-9)
        assert g.delta >= k * math.exp((k - 1) * eps) * delta
    assert group_privacy_log_delta(0.93, 1e-8, 6000) == pytest.approx(math.log(6000) + 5999 * 0.93 + math.log(1e-8))
    assert group_privacy_log_delta(5.0, 0.0, 10**6) == -math.inf
    with pytest.raises(ValidationError):
        group_privacy((0.93, 1e-8), 1000)          # vacuous: refused, not capped at 0.999999


def test_vacuous_policy_is_refused_and_a_useful_one_accepted():
    kw = dict(name="x", mechanism=GRR, target_central={"eps": 1.0, "delta": 1e-8})
    with pytest.raises(ValidationError) as e:
        create_task_config(**kw, client_policy={"max_reports_per_window": 1000, "max_reports_per_day": 1000})
    assert e.value.parameter == "client_policy.max_reports_per_window"
    # k = 3: 3 e^2 1e-8 < 1, a real guarantee
    assert create_task_config(**kw, client_policy={"max_reports_per_window": 3, "max_reports_per_day": 3})


@pytest.mark.parametrize("kind", STORAGES)
def test_thousand_reports_per_window_ingest_and_estimate(tmp_path, kind):
    """Audit repro: max_reports_per_window = 1000, one batch of 600 GRR reports (eps_c = 0.93 > 0)
    made every PUT fail with 500 (OverflowError in e^{999 eps}) and the estimates 404. A task
    stored before the creation check (built here by replacing the policy of a valid one) now
    ingests: the amplified group bound is vacuous, so the statement is the pure local group bound
    (1000 eps0, 0); the estimates answer with the same."""
    with storage_urls(kind, tmp_path, roles=("analyzer",)) as (url,):
        an = AnalyzerState(url, admin_token="a", collector_token="c", peer_secret=b"p", retention_every=0)
        try:
            base = create_task_config(name="k1000", mechanism=GRR, target_central={"eps": 1.0, "delta": 1e-8},
                                      time_precision=3600, batch_window=3600)
            cfg = dataclasses.replace(base, client_policy=ClientPolicy(1000, 1000, False))
            an.add_task(cfg)
            assert cfg.min_batch_size <= 600
            now = time.time()
            pts = encode_reports(cfg, np.arange(600) % 8, now)
            k = an.public_configs[0]
            envs = [seal_report(KeyConfig(k.key_id, k.public_key), cfg.task_id, cfg.digest, b"", p.tobytes())
                    for p in pts]
            window = int(now) // cfg.batch_window
            body = encode_batch(Batch(cfg.task_id, b"", window, envs))
            res = ingest_batch(an, cfg.task_id, batch_id(cfg.task_id, b"", window, envs), body)
            assert res["valid"] == 600
            per = res["privacy_statement_per_report"]
            assert per["model"] == "shuffle" and 0.7 < per["eps"] < 1.0 and per["delta"] == 1e-8
            st = res["privacy_statement"]
            assert st["model"] == "local" and st["delta"] == 0.0 and "vacuous" in st["note"]
            assert st["eps"] == group_privacy((2.0, 0.0), 1000).eps
            client = TestClient(create_analyzer_app(an))
            r = client.get(f"/v1/tasks/{cfg.task_id.hex()}/estimates", headers={"authorization": "Bearer c"})
            assert r.status_code == 200, r.text
            e = r.json()
            assert e["n"] == 600 and e["privacy_statement"]["delta"] == 0.0
            assert e["privacy_statement"]["eps"] == group_privacy((2.0, 0.0), 1000).eps
            assert estimates(an, cfg.task_id)["privacy_statement"] == e["privacy_statement"]
        finally:
            an.engine.dispose()
