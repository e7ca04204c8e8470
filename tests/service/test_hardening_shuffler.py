"""Shuffler hardening: no acknowledged report lost to a 4xx, batch formation that does not block
ingestion, envelopes the wire format cannot carry, and client admission (tokens, rate limits).

The forwarding and formation tests run shuffler and analyzer in process (the analyzer app behind
Starlette's TestClient, an httpx client) with an injected clock, on SQLite and PostgreSQL; the
admission tests run ``shuffledp serve`` subprocesses on 127.0.0.1 (``harness.Deployment``).
"""

from __future__ import annotations

import os
import struct

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, func, select

import shuffledp.service.shuffler as shuffler_mod
from shuffledp.core.errors import ValidationError
from shuffledp.service.analyzer import AnalyzerState, create_analyzer_app, estimates
from shuffledp.service.client import encode_reports, seal_many
from shuffledp.service.config import create_task_config
from shuffledp.service.shuffler import ShufflerState, create_shuffler_app
from shuffledp.service.storage import shuffler_batch_items, shuffler_batches, shuffler_pending
from shuffledp.service.wire import MAX_ENVELOPE_LEN, EncodeError, decode_upload, encode_batch, encode_upload, Batch

from .conftest import STORAGES, Clock, storage_urls

pytestmark = pytest.mark.timeout(180)

HOUR = 3600
T0 = 1_800_000_000.0
TOKEN = "admin-token"


class World:
    """Shuffler + analyzer (in process, one clock); ``analyzer_knows_task=False`` leaves it unregistered."""

    def __init__(self, urls, *, peer_analyzer: bytes = b"peer", peer_shuffler: bytes = b"peer",
                 analyzer_knows_task: bool = True, floor: int = 10) -> None:
        self.clock = Clock(T0)
        self.an = AnalyzerState(urls[1], admin_token=TOKEN, collector_token="c", peer_secret=peer_analyzer,
                                clock=self.clock)
        self.sh = ShufflerState(urls[0], admin_token=TOKEN, peer_secret=peer_shuffler, clock=self.clock, auto=False)
        self.sh.http = TestClient(create_analyzer_app(self.an))
        self.cfg = create_task_config(
            name="hardening", mechanism={"kind": "test", "name": "test_identity", "params": {"d": 4096}},
            target_central={"eps": 1.0, "delta": 1e-6}, min_batch_size_floor=floor, time_precision=1,
            min_time_precision=1, batch_window=HOUR, max_wait_windows=2, tolerable_clock_skew=60)
        if analyzer_knows_task:
            self.an.add_task(self.cfg)
        self.sh.register(self.cfg, "http://testserver", [k.key_id for k in self.an.public_configs], None)
        self.key = self.an.public_configs[0]

    def upload(self, values) -> int:
        pts = encode_reports(self.cfg, np.asarray(values), self.clock.t)
        envs = seal_many(self.cfg, self.key, pts, b"")
        return self.sh.ingest(self.cfg.task_id, encode_upload([(b"", e) for e in envs]))["accepted"]

    def counts(self) -> np.ndarray:
        est = estimates(self.an, self.cfg.task_id)
        return np.rint(np.asarray(est["estimate"]) * est["n"]).astype(np.int64)

    def close(self) -> None:
        self.sh.http.close()
        self.sh.engine.dispose()
        self.an.engine.dispose()


@pytest.fixture
def make_world(urls):
    made = []

    def make(**kw) -> World:
        w = World(urls, **kw)
        made.append(w)
        return w
    yield make
    for w in made:
        w.close()


# ---------------------------------------------------------------------- item 5: no report lost to a 4xx
def test_wrong_peer_secret_loses_nothing_every_batch_arrives_once_fixed(make_world):
    w = make_world(peer_shuffler=b"random-secret-of-a-misconfigured-shuffler")
    for k in range(3):                                   # three windows, three batches
        w.clock.t = T0 + k * HOUR
        assert w.upload(np.arange(k * 20, k * 20 + 20)) == 20
        w.clock.t = T0 + (k + 1) * HOUR + 1
        w.sh.tick()
    for _ in range(3):                                   # retried (after the backoff), refused each time
        w.clock.t += 120
        w.sh.tick()
    c = w.sh.counters(w.cfg.task_id)
    assert c.get("batches_rejected", 0) == 0 and c["batches_retrying"] == 3
    assert c["forward_unauthorized"] >= 6 and c.get("forwarded_reports", 0) == 0
    h = TestClient(create_shuffler_app(w.sh)).get("/healthz").json()
    assert h["status"] == "degraded" and h["batches_held"]["unauthorized"] == 3
    assert any("SHUFFLEDP_PEER_SECRET" in p for p in h["problems"])
    w.sh.peer_secret = b"peer"                           # the operator fixes the secret
    w.clock.t += 120
    assert w.sh.tick()["forwarded"] == 3
    assert w.counts()[:60].tolist() == [1] * 60 and w.counts()[60:].sum() == 0
    c = w.sh.counters(w.cfg.task_id)
    assert c["batches_delivered"] == 3 and c["forwarded_reports"] == 60
    assert TestClient(create_shuffler_app(w.sh)).get("/healthz").json()["status"] == "ok"


def test_task_unknown_at_the_analyzer_is_retried_until_registered(make_world, caplog):
    w = make_world(analyzer_knows_task=False)
    w.upload(np.arange(15))
    w.clock.t = T0 + HOUR + 1
    with caplog.at_level("ERROR", logger="shuffledp.service.shuffler"):
        assert w.sh.tick()["forward_failures"] == 1
    assert any("does not know task" in r.getMessage() for r in caplog.records)
    assert w.sh.counters(w.cfg.task_id)["forward_task_unknown"] == 1
    assert w.sh.health()["batches_held"]["task_unknown"] == 1
    w.an.add_task(w.cfg)                                 # registered late
    w.clock.t += 120
    assert w.sh.tick()["forwarded"] == 1
    assert w.counts()[:15].tolist() == [1] * 15


@pytest.mark.parametrize("status,outcome", [(200, "delivered"), (204, "delivered"), (400, "rejected"),
                                            (413, "rejected"), (422, "rejected"), (401, "unauthorized"),
                                            (403, "unauthorized"), (404, "task_unknown"), (408, "retry"),
                                            (409, "retry"), (429, "retry"), (500, "retry"), (503, "retry"),
                                            (None, "retry")])
def test_forward_outcome_classification(status, outcome):
    assert shuffler_mod.forward_outcome(status) == outcome


def test_content_rejection_is_kept_and_the_requeue_command_delivers_it(make_world, urls):
    from typer.testing import CliRunner

    from shuffledp.cli import _register_commands, app
    w = make_world()
    w.upload(np.arange(12))
    real = w.sh.http
    w.sh.http = httpx.Client(transport=httpx.MockTransport(lambda req: httpx.Response(
        400, json={"title": "invalidMessage"}, headers={"content-type": "application/problem+json"})))
    w.clock.t = T0 + HOUR + 1
    w.sh.tick()
    c = w.sh.counters(w.cfg.task_id)
    assert c["batches_rejected"] == 1 and c["forward_rejected"] == 1
    assert w.sh.health()["status"] == "degraded"
    w.clock.t += 10 * HOUR
    w.sh.http = real
    assert w.sh.tick()["forwarded"] == 0                  # rejected: not retried on its own
    with w.sh.engine.connect() as conn:
        (bid,) = [bytes(r[0]) for r in conn.execute(select(shuffler_batches.c.batch_id))]
    _register_commands()
    run = CliRunner().invoke
    res = run(app, ["shuffler", "requeue", "--db", urls[0]])
    assert res.exit_code == 2 and "--all-rejected" in res.output
    res = run(app, ["shuffler", "requeue", "--db", urls[0], "--batch", "zz"])
    assert res.exit_code != 0 and "hex" in res.output
    res = run(app, ["shuffler", "requeue", "--db", urls[0], "--batch", bid.hex()])
    assert res.exit_code == 0, res.output
    assert "1 batch(es) requeued" in res.output
    assert w.sh.tick()["forwarded"] == 1
    assert w.counts()[:12].tolist() == [1] * 12
    c = w.sh.counters(w.cfg.task_id)
    assert c["batches_delivered"] == 1 and c["batches_requeued"] == 1
    res = run(app, ["shuffler", "requeue", "--db", urls[0], "--batch", bid.hex()])
    assert res.exit_code == 2 and "delivered" in res.output   # nothing to re-queue: said, not ignored


def test_discard_command_deletes_a_rejected_batch_explicitly(make_world, urls):
    from typer.testing import CliRunner

    from shuffledp.cli import _register_commands, app
    w = make_world()
    w.upload(np.arange(12))
    w.sh.http = httpx.Client(transport=httpx.MockTransport(lambda req: httpx.Response(400)))
    w.clock.t = T0 + HOUR + 1
    w.sh.tick()
    with w.sh.engine.connect() as conn:
        (bid,) = [bytes(r[0]) for r in conn.execute(select(shuffler_batches.c.batch_id))]
    _register_commands()
    res = CliRunner().invoke(app, ["shuffler", "discard", "--db", urls[0], "--batch", bid.hex()])
    assert res.exit_code == 0, res.output
    c = w.sh.counters(w.cfg.task_id)
    assert c["batches_discarded"] == 1 and c["discarded_reports"] == 12 and "batches_rejected" not in c
    with w.sh.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(shuffler_batch_items)).scalar_one() == 0


@pytest.mark.parametrize("command", [["requeue", "--all-rejected"], ["discard", "--batch", "ab" * 32]])
def test_operator_commands_refuse_a_missing_or_bad_database_in_one_line(tmp_path, command):
    """requeue/discard never create a database: a missing SQLite file, an unparsable URL, an
    unreachable server or a database without shuffler tables is one line on stderr, exit 2."""
    from typer.testing import CliRunner

    from shuffledp.cli import _register_commands, app
    from .conftest import pg_databases
    _register_commands()
    bad = [f"sqlite:///{tmp_path / 'absent.db'}", "notaurl", "postgresql://postgres@127.0.0.1:1/nothing"]
    for db in bad:
        res = CliRunner().invoke(app, ["shuffler", *command, "--db", db])
        assert res.exit_code == 2, (db, res.output)
        assert res.output.startswith("error: --db") and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1, res.output
    assert not (tmp_path / "absent.db").exists()
    with pg_databases("shuffledp_test_ops", ("empty",)) as (url,):   # reachable, but not a shuffler's
        res = CliRunner().invoke(app, ["shuffler", *command, "--db", url])
        assert res.exit_code == 2 and "holds no shuffler database" in res.output, res.output
        from sqlalchemy import create_engine, inspect
        eng = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            assert inspect(eng).get_table_names() == []      # nothing was created
        finally:
            eng.dispose()


# ---------------------------------------------------------------------- item 6: formation in bounded steps
def _pending_deletes_per_transaction(engine):
    """Track how many shuffler_pending rows each transaction deletes (list filled on commit)."""
    per_tx, cur = [], {"n": 0}

    @event.listens_for(engine, "after_cursor_execute")
    def _after(conn, cursor, statement, params, context, executemany):
        if statement.lstrip().upper().startswith("DELETE FROM SHUFFLER_PENDING"):
            cur["n"] += max(cursor.rowcount, 0)

    @event.listens_for(engine, "commit")
    def _commit(conn):
        per_tx.append(cur["n"])
        cur["n"] = 0

    @event.listens_for(engine, "rollback")
    def _rollback(conn):
        cur["n"] = 0
    return per_tx


def test_batch_formation_takes_the_pool_in_bounded_transactions(make_world):
    w = make_world()
    n = 3 * shuffler_mod.FORM_CHUNK + 17
    assert w.upload(np.arange(n) % 4096) == n            # duplicates of values, distinct envelopes
    per_tx = _pending_deletes_per_transaction(w.sh.engine)
    w.clock.t = T0 + HOUR + 1
    assert w.sh.tick()["forwarded"] == 1
    # the whole pool left pending, never more than one chunk per write transaction
    assert sum(per_tx) == n and max(per_tx) <= shuffler_mod.FORM_CHUNK
    assert w.counts().sum() == n
    c = w.sh.counters(w.cfg.task_id)
    assert c["released"] == n and c["pending"] == 0 and c["forwarded_reports"] == n


def test_an_interrupted_formation_is_finished_without_loss_or_duplicates(make_world, urls, monkeypatch):
    w = make_world()
    n = 2 * shuffler_mod.FORM_CHUNK + 31
    assert w.upload(np.arange(n)) == n
    calls = {"k": 0}
    real_move = shuffler_mod.move_pending_to_batch

    def crashing_move(*a, **kw):
        calls["k"] += 1
        if calls["k"] == 2:                               # the process dies after one chunk moved
            raise KeyboardInterrupt("simulated crash")
        return real_move(*a, **kw)
    monkeypatch.setattr(shuffler_mod, "move_pending_to_batch", crashing_move)
    w.clock.t = T0 + HOUR + 1
    with pytest.raises(KeyboardInterrupt):
        w.sh.tick()
    with w.sh.engine.connect() as conn:
        (state,) = conn.execute(select(shuffler_batches.c.state)).one()
        moved = conn.execute(select(func.count()).select_from(shuffler_batch_items)).scalar_one()
        still = conn.execute(select(func.count()).select_from(shuffler_pending)).scalar_one()
    assert state == "forming" and moved == shuffler_mod.FORM_CHUNK and moved + still == n
    monkeypatch.setattr(shuffler_mod, "move_pending_to_batch", real_move)
    # a restarted shuffler on the same database finishes the batch first
    sh2 = ShufflerState(urls[0], admin_token=TOKEN, peer_secret=b"peer", clock=w.clock, auto=False)
    sh2.http = w.sh.http
    try:
        r = sh2.tick()
        assert r["batches_formed"] == 1 and r["forwarded"] == 1
        assert w.counts()[:n].tolist() == [1] * n
        c = sh2.counters(w.cfg.task_id)
        assert c["released"] == n and c["pending"] == 0 and c["batches_delivered"] == 1
    finally:
        sh2.engine.dispose()


def test_formation_keeps_the_drop_and_threshold_semantics(make_world):
    # the DP random drop still removes exactly `drop` reports of the pool and the rest is released
    w = make_world()
    w.sh.drop_noise = lambda c: 5
    w.upload(np.arange(40))
    w.clock.t = T0 + HOUR + 1
    assert w.sh.tick()["forwarded"] == 1
    c = w.sh.counters(w.cfg.task_id)
    assert c["released"] == 35 and c["dropped_noise"] == 5 and c["pending"] == 0
    assert w.counts().sum() == 35 and set(np.unique(w.counts()[:40])) <= {0, 1}
    # below the threshold after the drop: nothing released, nothing deleted before max_wait
    w.sh.drop_noise = lambda c: c - 9
    w.upload(np.arange(100, 120))
    w.clock.t = T0 + 2 * HOUR + 1
    assert w.sh.tick()["batches_formed"] == 0
    assert w.sh.counters(w.cfg.task_id)["pending"] == 20


# ---------------------------------------------------------------------- item 6: envelope size
def test_task_with_envelopes_over_the_16_bit_length_is_refused_at_creation():
    with pytest.raises(ValidationError, match="65,535") as ei:
        create_task_config(name="big", mechanism={"kind": "frequency", "name": "oue", "epsilon": 2.0,
                                                  "params": {"d": 600_000}},
                           target_central={"eps": 1.0, "delta": 1e-8})
    assert ei.value.parameter == "mechanism" and "75,080" in str(ei.value)


def test_analyzer_answers_a_clear_4xx_for_an_oversized_task(tmp_path):
    an = AnalyzerState(f"sqlite:///{tmp_path / 'a.db'}", admin_token=TOKEN, collector_token="c", peer_secret=b"p")
    try:
        r = TestClient(create_analyzer_app(an)).post("/v1/tasks", headers={"authorization": f"Bearer {TOKEN}"}, json={
            "name": "big", "mechanism": {"kind": "frequency", "name": "oue", "epsilon": 2.0,
                                        "params": {"d": 600_000}},
            "target_central": {"eps": 1.0, "delta": 1e-8}})
        assert r.status_code == 422 and "mechanism" in r.json()["detail"] and "65,535" in r.json()["detail"]
    finally:
        an.engine.dispose()


def test_encoders_raise_a_typed_error_not_struct_error():
    big = bytes(7) + os.urandom(MAX_ENVELOPE_LEN - 6)
    with pytest.raises(EncodeError, match="16-bit"):
        encode_upload([(b"", big)])
    with pytest.raises(EncodeError):
        encode_batch(Batch(bytes(32), b"", 1, [big]))
    ok = bytes(7) + os.urandom(MAX_ENVELOPE_LEN - 7)       # exactly the limit still frames
    assert decode_upload(encode_upload([(b"", ok)]), 10) == [(b"", ok)]


def test_sdk_flush_never_raises_for_an_envelope_the_format_cannot_carry(tmp_path, make_world):
    from shuffledp.service.client import ShuffleDPClient
    w = make_world()
    an_http = w.sh.http
    cl = ShuffleDPClient("http://testserver", "http://testserver", w.cfg.task_id, tmp_path / "c.db",
                         allow_test_mechanisms=True, http=an_http)
    try:
        cl.http = TestClient(create_shuffler_app(w.sh))
        cl.report(3, now=T0)
        # an oversized envelope queued in the outbox (e.g. sealed for a task from an older analyzer)
        big = struct.pack(">BHHH", 1, 0x20, 1, 1) + os.urandom(75_080 - 7)
        cl.db.execute("INSERT INTO outbox(digest, task, crowd, envelope, plaintext) VALUES (?,?,?,?,?)",
                      (os.urandom(32), w.cfg.task_id, b"", big, b""))
        out = cl.flush(max_attempts=2, base_delay=0.0)
        assert out == {"sent": 1, "refused": 1, "left": 0}
        assert cl.stats()["refused:reportTooLarge"] == 1
    finally:
        cl.close()


# ---------------------------------------------------------------------- migration 0005
@pytest.fixture(params=STORAGES)
def shuffler_url(request, tmp_path):
    with storage_urls(request.param, tmp_path, roles=("shuffler",)) as (u,):
        yield u


def test_migration_0005_adds_members_keeping_batches_and_refuses_to_drop_a_forming_batch(shuffler_url):
    from alembic import command

    import shuffledp.service.storage as storage
    eng = storage.make_engine(shuffler_url)
    try:
        with eng.begin() as conn:
            command.upgrade(storage.alembic_config(conn), "0004")
        # a 0004 table has no members column: insert through driver SQL
        with eng.begin() as conn:
            ph = "%s" if eng.dialect.name == "postgresql" else "?"
            conn.exec_driver_sql(f"INSERT INTO shuffler_batches (batch_id, task_id, crowd_id, \"window\", n, state, "
                                 f"attempts, next_attempt_at, last_error) VALUES ({ph}, {ph}, {ph}, 5, 3, 'rejected', "
                                 f"1, 0.0, 'HTTP 400')", (b"\x01" * 32, b"\x02" * 32, b""))
        storage.upgrade(eng)
        with eng.connect() as conn:
            row = conn.execute(select(shuffler_batches)).one()
            assert row.state == "rejected" and row.n == 3 and row.members is None
        with eng.begin() as conn:
            conn.execute(shuffler_batches.update().values(state="forming", members=b"\x03" * 32))
        with pytest.raises(RuntimeError, match="still forming"):
            with eng.begin() as conn:
                command.downgrade(storage.alembic_config(conn), "0004")
        with eng.begin() as conn:
            conn.execute(shuffler_batches.update().values(state="ready", members=None))
        with eng.begin() as conn:
            command.downgrade(storage.alembic_config(conn), "0004")
        with eng.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM shuffler_batches").scalar_one() == 1
    finally:
        eng.dispose()
