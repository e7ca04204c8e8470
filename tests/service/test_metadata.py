"""Metadata stripping: no client address/User-Agent/headers at rest or in logs; uniform release order.

The at-rest scan runs on SQLite (every file in the deployment's directory: databases, WAL, logs)
and on PostgreSQL (every row of every table of both databases, plus the logs).
"""

from __future__ import annotations

import hashlib
import time
import struct

import httpx
import numpy as np
import pytest
from scipy import stats

from shuffledp.service.config import create_task_config
from shuffledp.service.harness import Deployment
from shuffledp.service.shuffler import ShufflerState
from shuffledp.service.storage import shuffler_pending
from shuffledp.service.wire import encode_upload

from .conftest import STORAGES, identity_task, sealed, storage_urls

pytestmark = pytest.mark.timeout(120)

CLIENT_IP = "127.0.0.77"
UA = "Distinctive-UA-9f27c1e4"
XFF = "203.0.113.199"
COOKIE = "session=cookie-7c1d5e3b"


NEEDLES = [CLIENT_IP.encode(), UA.encode(), XFF.encode(), b"cookie-7c1d5e3b", b"Distinctive"]


def _hits(where: str, data: bytes) -> list[str]:
    return [f"{where}: {n!r}" for n in NEEDLES if n in data or n.lower() in data.lower()]


def _scan(dep: Deployment) -> list[str]:
    found = []
    for p in sorted(dep.workdir.iterdir()):
        if p.is_file():
            found += _hits(p.name, p.read_bytes())
    for url in (dep.shuffler.db, dep.analyzer.db):
        if url.startswith("postgresql"):
            found += _scan_pg(url)
    return found


def _scan_pg(url: str) -> list[str]:
    """Every value of every table in the database's public schema."""
    import psycopg
    found = []
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        assert tables, "no tables to scan"
        for t in tables:
            for row in conn.execute(f'SELECT * FROM "{t}"'):
                for v in row:
                    b = bytes(v) if isinstance(v, (bytes, memoryview)) else str(v).encode()
                    found += _hits(f"{url.rsplit('/', 1)[1]}.{t}", b)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("storage", STORAGES)
def test_no_client_address_or_headers_at_rest_or_in_logs(tmp_path, storage):
    with storage_urls(storage, tmp_path) as (sdb, adb), \
            Deployment(tmp_path, shuffler_db=sdb, analyzer_db=adb, tick_seconds=3600) as dep:
        t = identity_task(dep, d=64, floor=10)
        _, _, _, envs = sealed(dep, t["task_id"], np.arange(40))
        transport = httpx.HTTPTransport(local_address=CLIENT_IP)
        with httpx.Client(transport=transport, timeout=30) as c:
            for s in range(0, 40, 10):
                r = c.post(f"{dep.shuffler.url}/v1/tasks/{t['task_id']}/reports",
                           content=encode_upload([(b"", e) for e in envs[s:s + 10]]),
                           headers={"user-agent": UA, "x-forwarded-for": XFF, "x-real-ip": XFF, "cookie": COOKIE})
                assert r.status_code == 200
            # error paths must not echo or log request data either
            c.post(f"{dep.shuffler.url}/v1/tasks/{t['task_id']}/reports", content=b"garbage" + UA.encode(),
                   headers={"user-agent": UA, "x-forwarded-for": XFF})
        assert _scan(dep) == []            # pending rows in the DB/WAL, logs
        dep.tick()
        assert dep.counters(t["task_id"])["batches_delivered"] == 1
        assert _scan(dep) == []            # after batching/forwarding/aggregation
    # ``users`` marks a protocol task's user markers (1) apart from messages (0): about the row, not the client
    assert {c.name for c in shuffler_pending.columns} == {"task_id", "envelope_digest", "crowd_id", "window",
                                                           "envelope", "users"}


def test_released_order_is_uniform(tmp_path):
    """Position of the first-uploaded report in the released batch, over repeated runs (chi-square)."""
    cfg = create_task_config(name="order", mechanism={"kind": "test", "name": "test_identity", "params": {"d": 4}},
                             target_central={"eps": 1, "delta": 1e-6}, min_batch_size_floor=8, time_precision=1,
                             batch_window=3600, min_time_precision=1)
    st = ShufflerState(f"sqlite:///{tmp_path / 's.db'}", admin_token="a", peer_secret=b"p", auto=False)
    st.register(cfg, "http://127.0.0.1:9", [1], None)
    k = 8
    # fixed envelopes: without a shuffle the release order would be the same every run
    envs = [bytes([1]) + struct.pack(">HHH", 0x20, 1, 1) + hashlib.sha256(bytes([i])).digest()
            + bytes(cfg.envelope_len - 39) for i in range(k)]
    envs = [e[:cfg.envelope_len] for e in envs]
    first = hashlib.sha256(envs[0]).digest()
    runs = 240
    pos = np.zeros(k, dtype=np.int64)
    from sqlalchemy import delete, select

    from shuffledp.service.storage import shuffler_batch_items, shuffler_batches
    for _ in range(runs):
        assert st.ingest(cfg.task_id, encode_upload([(b"", e) for e in envs]))["accepted"] == k
        assert st._form_batches(now=time.time(), close_current=True) == 1
        with st.engine.begin() as c:
            items = c.execute(select(shuffler_batch_items.c.envelope).order_by(shuffler_batch_items.c.pos)).all()
            order = [hashlib.sha256(r[0]).digest() for r in items]
            c.execute(delete(shuffler_batch_items))
            c.execute(delete(shuffler_batches))
        pos[order.index(first)] += 1
    p = stats.chisquare(pos).pvalue
    assert p > 1e-4, (pos, p)
    st.http.close()
