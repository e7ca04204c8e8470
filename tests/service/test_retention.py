"""Retention (``retention_days``) in both services, on SQLite and PostgreSQL, with an injected clock.

Shuffler and analyzer run in-process (their FastAPI apps behind Starlette's TestClient, which is
an httpx client, so the shuffler's forwarder talks to the analyzer app without sockets). Time
moves only through the injected clock: no sleeps. Rules under test: ``service/retention.py``.
"""

from __future__ import annotations

import os

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from shuffledp.service.analyzer import AnalyzerState, create_analyzer_app, estimates, ingest_batch
from shuffledp.service.client import encode_reports, seal_many
from shuffledp.service.config import create_task_config
from shuffledp.service.retention import analyzer_purge_before, refused_time_limit, shuffler_pending_horizon
from shuffledp.service.shuffler import ShufflerState, create_shuffler_app
from shuffledp.service.storage import analyzer_aggregates, analyzer_ledger, analyzer_report_ids, make_engine
from shuffledp.service.wire import Batch, batch_id, encode_batch, encode_upload

from .conftest import Clock

pytestmark = pytest.mark.timeout(120)

DAY, HOUR = 86400, 3600
T0 = 1_800_000_000.0           # an hour boundary (1.8e9 % 3600 == 0)
TOKEN = "admin-token"


class World:
    """Shuffler + analyzer sharing one injected clock; the forwarder reaches the analyzer in-process."""

    def __init__(self, urls, **task_kw) -> None:
        self.clock = Clock(T0)
        self.peer = b"peer-secret"
        self.an = AnalyzerState(urls[1], admin_token=TOKEN, collector_token="c", peer_secret=self.peer,
                                clock=self.clock)
        self.sh = ShufflerState(urls[0], admin_token=TOKEN, peer_secret=self.peer, clock=self.clock, auto=False)
        self.an_client = TestClient(create_analyzer_app(self.an))
        self.sh.http = self.an_client
        spec = {"name": "retention", "mechanism": {"kind": "test", "name": "test_identity", "params": {"d": 64}},
                "target_central": {"eps": 1.0, "delta": 1e-6}, "min_batch_size_floor": 10, "time_precision": 1,
                "batch_window": HOUR, "max_wait_windows": 2, "tolerable_clock_skew": 60, "retention_days": 1}
        spec.update(task_kw)
        self.cfg = create_task_config(**spec, min_time_precision=1)  # test-only floor (time_precision 1 s)
        self.an.add_task(self.cfg)
        self.sh.register(self.cfg, "http://testserver", [k.key_id for k in self.an.public_configs], None)
        self.key = self.an.public_configs[0]

    def envelopes(self, values, t: float | None = None) -> tuple[np.ndarray, list[bytes]]:
        pts = encode_reports(self.cfg, np.asarray(values), self.clock.t if t is None else t)
        return pts, seal_many(self.cfg, self.key, pts, b"")

    def upload(self, envs) -> int:
        return self.sh.ingest(self.cfg.task_id, encode_upload([(b"", e) for e in envs]))["accepted"]

    def counts(self) -> np.ndarray:
        est = estimates(self.an, self.cfg.task_id)
        return np.rint(np.asarray(est["estimate"]) * est["n"]).astype(np.int64)

    def n_report_ids(self) -> int:
        with self.an.engine.connect() as c:
            return c.execute(select(func.count()).select_from(analyzer_report_ids)).scalar_one()

    def close(self) -> None:
        self.an_client.close()
        self.sh.engine.dispose()
        self.an.engine.dispose()


@pytest.fixture
def world(urls):
    w = World(urls)
    yield w
    w.close()


def test_shuffler_keeps_owed_pending_until_past_max_wait(urls):
    # retention (1 day) shorter than max_wait (48 one-hour windows): a pending report below the
    # threshold is owed until max_wait passes, so retention must not delete it before that
    w = World(urls, max_wait_windows=48)
    try:
        _, envs = w.envelopes(np.arange(5))                 # below the threshold of 10
        assert w.upload(envs) == 5
        w.clock.t = T0 + 1 * DAY + 2 * HOUR                 # past retention, within max_wait
        r = w.sh.enforce_retention()
        assert r["expired_retention"] == 0 and w.sh.counters(w.cfg.task_id)["pending"] == 5
        # the backstop itself (no batching round first): still nothing, the rows are owed
        assert w.sh._retention(w.clock.t)["expired_retention"] == 0
        w.clock.t = T0 + 3 * DAY                             # past both: deletable, counted
        assert w.cfg.batch_window * shuffler_pending_horizon(w.cfg, w.clock.t) > T0
        assert w.sh._retention(w.clock.t)["expired_retention"] == 5
        c = w.sh.counters(w.cfg.task_id)
        assert c["pending"] == 0 and c["expired_retention"] == 5 and c.get("released", 0) == 0
    finally:
        w.close()


def test_releasable_pool_is_released_not_deleted(world):
    w = world
    _, envs = w.envelopes(np.arange(12))                    # above the threshold of 10
    w.upload(envs)
    w.clock.t = T0 + 5 * DAY                                 # long past retention and max_wait
    w.sh.http = httpx.Client(transport=httpx.MockTransport(lambda req: httpx.Response(503)))
    r = w.sh.enforce_retention()
    # the new batch carries its reports' (old) window: owed to the analyzer, kept and reported
    assert r == {"expired_retention": 0, "owed_batches_past_retention": 1, "rejected_batches_past_retention": 0}
    c = w.sh.counters(w.cfg.task_id)
    assert c["pending"] == 0 and c["released"] == 12 and c.get("expired_retention", 0) == 0
    assert c["batches_ready"] == 1


def test_owed_batch_survives_retention_and_is_aggregated_once(world):
    w = world
    _, envs = w.envelopes(np.arange(20))
    w.upload(envs)
    down = httpx.Client(transport=httpx.MockTransport(lambda req: httpx.Response(503)))
    w.sh.http = down
    w.clock.t = T0 + HOUR + 1
    assert w.sh.tick()["forward_failures"] == 1              # analyzer unavailable: retrying
    w.clock.t = T0 + 10 * DAY
    r = w.sh.enforce_retention()
    assert r["owed_batches_past_retention"] == 1 and r["rejected_batches_past_retention"] == 0
    assert w.sh.counters(w.cfg.task_id)["batches_retrying"] == 1
    w.sh.http = w.an_client                                  # analyzer back (it has not run retention)
    assert w.sh.tick()["forwarded"] == 1
    assert w.counts()[:20].tolist() == [1] * 20 and w.counts()[20:].sum() == 0
    c = w.sh.counters(w.cfg.task_id)
    assert c["batches_delivered"] == 1 and c["forwarded_reports"] == 20


def test_rejected_batch_is_kept_past_retention_until_the_operator_decides(world):
    from shuffledp.service.shuffler import discard_batches, requeue_batches
    from shuffledp.service.storage import shuffler_batch_items
    w = world
    _, envs = w.envelopes(np.arange(15))
    w.upload(envs)
    # the analyzer refuses the batch's content (a permanent rejection): kept as 'rejected'
    w.sh.http = httpx.Client(transport=httpx.MockTransport(lambda req: httpx.Response(
        400, json={"title": "invalidMessage"}, headers={"content-type": "application/problem+json"})))
    w.clock.t = T0 + HOUR + 1
    w.sh.tick()
    assert w.sh.counters(w.cfg.task_id)["batches_rejected"] == 1
    w.clock.t = T0 + HOUR + 30 * DAY                         # long past retention
    assert w.sh.enforce_retention()["rejected_batches_past_retention"] == 1
    c = w.sh.counters(w.cfg.task_id)
    assert c["batches_rejected"] == 1 and "expired_retention" not in c
    with w.sh.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(shuffler_batch_items)).scalar_one() == 15
    # the operator re-queues it once the analyzer accepts it: every report is aggregated once
    w.sh.http = w.an_client
    (bid,) = [bytes.fromhex(r["batch_id"]) for r in requeue_batches(w.sh.engine)]
    assert w.sh.tick()["forwarded"] == 1
    assert w.counts()[:15].tolist() == [1] * 15
    with pytest.raises(ValueError, match="delivered"):
        discard_batches(w.sh.engine, [bid])                  # only rejected batches can be discarded


def _forged_batch(w: World, window: int, envs: list[bytes]) -> dict:
    """What a malicious (or very late) shuffler could send: any window label, authenticated."""
    bid = batch_id(w.cfg.task_id, b"", window, envs)
    return ingest_batch(w.an, w.cfg.task_id, bid, encode_batch(Batch(w.cfg.task_id, b"", window, envs)))


def test_analyzer_purges_replay_rows_keeps_statistic_and_refuses_old_reports(world):
    w = world
    pts, envs = w.envelopes(np.arange(30))
    w.upload(envs)
    w.clock.t = T0 + HOUR + 1
    assert w.sh.tick()["forwarded"] == 1
    assert w.n_report_ids() == 30
    before = w.counts()
    with w.an.engine.connect() as c:
        ledger_before = c.execute(select(analyzer_ledger)).all()
    # within retention nothing is purged
    w.clock.t = T0 + 12 * HOUR
    assert w.an.enforce_retention()["tasks"][w.cfg.task_id.hex()]["report_ids_deleted"] == 0
    assert w.n_report_ids() == 30
    # past retention: replay rows gone, statistic, ledger and batch rows kept
    w.clock.t = T0 + 1 * DAY + 6 * HOUR
    wm = analyzer_purge_before(w.cfg, w.clock.t)
    assert wm * HOUR > T0                                    # the first batch's window is below the mark
    res = w.an.enforce_retention()["tasks"][w.cfg.task_id.hex()]
    assert res == {"purged_before_window": wm, "report_ids_deleted": 30}
    assert w.n_report_ids() == 0
    assert (w.counts() == before).all()
    with w.an.engine.connect() as c:
        assert c.execute(select(analyzer_ledger)).all() == ledger_before
        assert c.execute(select(func.count()).select_from(analyzer_aggregates)).scalar_one() == 1
    # an old report replayed under its own (old) window label: refused as expired, not counted twice
    from shuffledp.service.wire import seal_report
    replays = [seal_report(w.key, w.cfg.task_id, w.cfg.digest, b"", pts[i].tobytes()) for i in range(10)]
    r = _forged_batch(w, int(T0 // HOUR), replays)
    assert r["valid"] == 0 and r["rejected"]["expired"] == 10
    # ... or under the current window label: outside the batch's time window
    r = _forged_batch(w, int(w.clock.t // HOUR), [seal_report(w.key, w.cfg.task_id, w.cfg.digest, b"",
                                                              pts[i].tobytes()) for i in range(10, 20)])
    assert r["valid"] == 0 and r["rejected"]["out_of_window"] == 10
    assert (w.counts() == before).all()
    # fresh reports are still accepted, and the re-delivery of the first batch stays idempotent
    _, fresh = w.envelopes(np.arange(40, 52))
    r = _forged_batch(w, int(w.clock.t // HOUR), fresh)
    assert r["valid"] == 12 and r["rejected"]["expired"] == 0
    assert w.counts()[:30].tolist() == [1] * 30 and w.counts()[40:52].tolist() == [1] * 12
    assert _forged_batch(w, int(w.clock.t // HOUR), fresh)["valid"] == 12   # stored result (batch rows kept)
    r = _forged_batch(w, int(T0 // HOUR), envs)          # the first batch's reports in another order
    assert r["valid"] == 0 and r["rejected"]["expired"] == 30
    assert w.counts()[:30].tolist() == [1] * 30
    # the watermark never moves back (a clock stepped backwards cannot re-open the purged period)
    w.clock.t = T0
    w.an.enforce_retention()
    with w.an.engine.connect() as c:
        from shuffledp.service.storage import analyzer_retention
        assert c.execute(select(analyzer_retention.c.purged_before_window)).scalar_one() == wm
    late = [seal_report(w.key, w.cfg.task_id, w.cfg.digest, b"", pts[i].tobytes()) for i in range(20, 30)]
    assert _forged_batch(w, int(T0 // HOUR), late)["rejected"]["expired"] == 10


def test_purge_never_reaches_reports_a_current_batch_may_hold(world):
    # guard: the watermark stays below current - max_wait - 1 - ceil(2 skew / bw) even with a tiny
    # retention relative to the window, so a prompt batch's oldest legitimate report is never refused
    w = world
    for now in (T0, T0 + 7 * DAY + 1234.5):
        W = analyzer_purge_before(w.cfg, now)
        cur = int(now // HOUR)
        oldest_legit = ((cur - w.cfg.max_wait_windows) * HOUR - w.cfg.tolerable_clock_skew) // 1
        assert refused_time_limit(w.cfg, W) < oldest_legit


def test_admin_endpoints_require_the_token(world):
    w = world
    sh_client = TestClient(create_shuffler_app(w.sh))
    try:
        for client in (w.an_client, sh_client):
            assert client.post("/v1/admin/retention").status_code == 401
            r = client.post("/v1/admin/retention", headers={"authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 200, r.text
        assert "tasks" in w.an_client.post("/v1/admin/retention",
                                           headers={"authorization": f"Bearer {TOKEN}"}).json()
    finally:
        sh_client.close()


def test_migration_0002_upgrades_a_0001_database(urls):
    from alembic import command

    from shuffledp.service.storage import upgrade
    url = urls[1]
    eng = make_engine(url)
    from shuffledp.service.storage import alembic_config
    with eng.begin() as conn:
        command.upgrade(alembic_config(conn), "0001")
    with eng.begin() as conn:
        conn.execute(analyzer_report_ids.insert().values(task_id=b"t" * 32, report_id=b"r" * 16, batch_id=b"b" * 32))
    upgrade(eng)
    with eng.connect() as conn:
        assert conn.execute(select(func.count()).select_from(analyzer_report_ids)).scalar_one() == 1
        ver = conn.exec_driver_sql("SELECT version_num FROM shuffledp_alembic_version").scalar_one()
    from alembic.script import ScriptDirectory
    assert ver == ScriptDirectory.from_config(alembic_config()).get_current_head()  # 0002 and every later revision
    eng.dispose()


def test_replay_row_helpers_split_the_id_blob_in_the_database(urls):
    # the analyzer's hot-path SQL (one statement per batch, ids as one blob) on both backends
    from shuffledp.service.storage import existing_report_ids, insert_report_ids, upgrade
    eng = make_engine(urls[1])
    upgrade(eng)
    ids = [os.urandom(16) for _ in range(7000)]          # more than SQLite's old 5000-variable chunks
    t, other, bid = b"t" * 32, b"u" * 32, b"b" * 32
    with eng.begin() as c:
        assert existing_report_ids(c, t, b"".join(ids)) == set()
        insert_report_ids(c, t, bid, b"".join(ids[:5000]))
        insert_report_ids(c, t, bid, b"".join(ids[4990:5010]))      # overlaps are ignored
        insert_report_ids(c, other, bid, b"".join(ids[6000:]))
        insert_report_ids(c, t, bid, b"")
    with eng.connect() as c:
        assert c.execute(select(func.count()).select_from(analyzer_report_ids)
                         .where(analyzer_report_ids.c.task_id == t)).scalar_one() == 5010
        assert existing_report_ids(c, t, b"".join(ids[4000:7000])) == set(ids[4000:5010])
        assert existing_report_ids(c, other, b"".join(ids[:6001])) == {ids[6000]}
        stored = {bytes(r[0]) for r in c.execute(select(analyzer_report_ids.c.report_id)
                                                 .where(analyzer_report_ids.c.task_id == t))}
    assert stored == set(ids[:5010])
    eng.dispose()
