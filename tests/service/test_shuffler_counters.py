"""Shuffler counter names fit the schema on every back end (counters.name is String(64)).

The DP drop marks each (task, crowd) pool "evaluated" once per closed window. The mark used to be
named ``evaluated:<crowd hex>``: up to 138 characters for a 64-byte crowd id, which SQLite stores
silently and PostgreSQL refuses (StringDataRightTruncation on every batcher round, so no report
was ever released). Run in-process against SQLite and a fresh PostgreSQL database.
"""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from shuffledp.service.client import encode_reports, seal_many
from shuffledp.service.config import create_task_config
from shuffledp.service.hpke import generate_key_pair
from shuffledp.service.shuffler import ShufflerState, evaluated_counter_name
from shuffledp.service.storage import shuffler_counters
from shuffledp.service.wire import MAX_CROWD_LEN, KeyConfig, encode_upload

from .conftest import STORAGES, storage_urls

pytestmark = pytest.mark.timeout(120)

NOW = 1_800_000_000.0  # an hour boundary
LONG_CROWD = b"C" * MAX_CROWD_LEN


@pytest.fixture(params=STORAGES)
def shuffler(request, tmp_path):
    with storage_urls(request.param, tmp_path, roles=("shuffler",)) as (url,):
        sh = ShufflerState(url, admin_token="a", peer_secret=b"p", auto=False)
        try:
            yield sh
        finally:
            sh.engine.dispose()
            sh.http.close()


def _drop_task(crowds):
    return create_task_config(name="x", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                   "params": {"d": 4}},
                              target_central={"eps": 1.9, "delta": 1e-6}, min_batch_size_floor=10,
                              time_precision=60, batch_window=3600, crowds=crowds,
                              drop_noise={"eps": 1.0, "delta": 1e-6})


def _ingest(sh, cfg, crowd, n, now):
    _sk, pk = generate_key_pair()
    envs = seal_many(cfg, KeyConfig(1, pk), encode_reports(cfg, np.arange(n) % 4, now), crowd)
    assert sh.ingest(cfg.task_id, encode_upload([(crowd, e) for e in envs]), now=now)["accepted"] == n


def test_evaluated_counter_name_is_short_and_distinct():
    names = {evaluated_counter_name(c) for c in (b"", b"a", b"b", LONG_CROWD, LONG_CROWD[:-1])}
    assert len(names) == 5 and {len(n) for n in names} == {26}
    assert len(f"evaluated:{LONG_CROWD.hex()}") > 64   # the old name did not fit


def test_long_crowd_with_drop_noise_releases_once_per_window(shuffler):
    sh = shuffler
    cfg = _drop_task([LONG_CROWD, b"short"])
    sh.register(cfg, "http://127.0.0.1:9", [1], None)
    n = cfg.min_batch_size + 60
    _ingest(sh, cfg, LONG_CROWD, n, NOW)
    assert sh._form_batches(NOW + 7200, False) == 1
    closed = int(NOW + 7200) // 3600 - 1
    c = sh.counters(cfg.task_id)
    assert c[evaluated_counter_name(LONG_CROWD)] == closed
    assert c["released"] + c.get("dropped_noise", 0) == n and c["pending"] == 0
    # same closed window again: the pool is not evaluated a second time (late reports wait)
    _ingest(sh, cfg, LONG_CROWD, n, NOW)
    assert sh._form_batches(NOW + 7200, False) == 0
    assert sh.counters(cfg.task_id)["pending"] == n
    assert sh._form_batches(NOW + 3 * 3600, False) == 1   # next window: evaluated again
    assert sh.counters(cfg.task_id)[evaluated_counter_name(LONG_CROWD)] == closed + 1
    assert all(len(k) <= 64 for k in sh.counters(cfg.task_id))


def test_legacy_evaluated_mark_is_honoured_and_replaced(shuffler):
    """A mark written by an older shuffler under ``evaluated:<crowd hex>`` still blocks a second
    evaluation in that window, and is replaced by the fixed-length name at the next one."""
    sh = shuffler
    crowd = b"eu"
    cfg = _drop_task([crowd])
    sh.register(cfg, "http://127.0.0.1:9", [1], None)
    closed = int(NOW + 7200) // 3600 - 1
    with sh.engine.begin() as c:
        c.execute(shuffler_counters.insert().values(task_id=cfg.task_id, name=f"evaluated:{crowd.hex()}",
                                                    value=closed))
    _ingest(sh, cfg, crowd, cfg.min_batch_size + 60, NOW)
    assert sh._form_batches(NOW + 7200, False) == 0
    assert sh._form_batches(NOW + 3 * 3600, False) == 1
    with sh.engine.connect() as c:
        names = dict(c.execute(select(shuffler_counters.c.name, shuffler_counters.c.value)
                               .where(shuffler_counters.c.task_id == cfg.task_id)).all())
    assert f"evaluated:{crowd.hex()}" not in names and names[evaluated_counter_name(crowd)] == closed + 1
