"""Bad input: fuzzed bodies give typed problem+json errors and change no state."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from starlette.testclient import TestClient

from shuffledp.service.analyzer import AnalyzerState, create_analyzer_app
from shuffledp.service.config import create_task_config
from shuffledp.service.http_common import sign_request
from shuffledp.service.shuffler import ShufflerState, create_shuffler_app
from shuffledp.service.storage import analyzer_batches, analyzer_tasks, shuffler_pending
from shuffledp.service.wire import DecodeError, decode_batch, decode_key_list, decode_upload

pytestmark = pytest.mark.timeout(120)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def apps(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    an = AnalyzerState(f"sqlite:///{d / 'a.db'}", admin_token="adm", collector_token="col", peer_secret=b"peer")
    sh = ShufflerState(f"sqlite:///{d / 's.db'}", admin_token="adm", peer_secret=b"peer", auto=False)
    cfg = create_task_config(name="fuzz", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                     "params": {"d": 8}},
                             target_central={"eps": 1.0, "delta": 1e-8})
    an.add_task(cfg)
    sh.register(cfg, "http://127.0.0.1:9", [k.key_id for k in an.public_configs], None)
    yield TestClient(create_analyzer_app(an)), TestClient(create_shuffler_app(sh)), an, sh, cfg
    sh.http.close()


def _count(engine, table) -> int:
    with engine.connect() as c:
        return c.execute(select(func.count()).select_from(table)).scalar_one()


def _is_problem(r) -> bool:
    return (r.headers["content-type"] == "application/problem+json"
            and r.json()["type"].startswith("urn:shuffledp:error:") and r.json()["status"] == r.status_code)


@FUZZ
@given(body=st.one_of(st.binary(max_size=600),
                      st.binary(max_size=400).map(lambda b: b"SDU1" + b),
                      st.tuples(st.integers(0, 3), st.binary(max_size=300)).map(
                          lambda t: b"SDU1" + struct.pack(">I", t[0]) + t[1])))
def test_shuffler_upload_fuzz(apps, body):
    _, shc, _, sh, cfg = apps
    before = _count(sh.engine, shuffler_pending)
    r = shc.post(f"/v1/tasks/{cfg.task_id.hex()}/reports", content=body)
    after = _count(sh.engine, shuffler_pending)
    assert r.status_code in (200, 400), r.text
    if r.status_code == 200:
        assert after - before == r.json()["accepted"]
    else:
        assert _is_problem(r) and after == before


@FUZZ
@given(body=st.one_of(st.binary(max_size=600), st.binary(max_size=300).map(lambda b: b"SDB1" + b)))
def test_analyzer_batch_fuzz_with_valid_signature(apps, body):
    anc, _, an, _, cfg = apps
    before = _count(an.engine, analyzer_batches)
    path = f"/v1/tasks/{cfg.task_id.hex()}/batches/{'ab' * 32}"
    r = anc.put(path, content=body, headers={"authorization": sign_request(b"peer", "PUT", path, body)})
    assert 400 <= r.status_code < 500 and _is_problem(r), r.text
    assert _count(an.engine, analyzer_batches) == before


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda ch: st.lists(ch, max_size=4) | st.dictionaries(st.text(max_size=8), ch, max_size=4),
                           max_leaves=12)


@FUZZ
@given(spec=st.one_of(json_values, st.fixed_dictionaries(
    {"name": st.text(max_size=5), "mechanism": json_values, "target_central": json_values})))
def test_task_creation_fuzz(apps, spec):
    anc, _, an, _, _ = apps
    before = _count(an.engine, analyzer_tasks)
    r = anc.post("/v1/tasks", content=json.dumps(spec), headers={"authorization": "Bearer adm"})
    assert 400 <= r.status_code < 500 and _is_problem(r), (r.status_code, r.text)
    assert _count(an.engine, analyzer_tasks) == before


@FUZZ
@given(b=st.binary(max_size=300))
def test_decoders_are_total(b):
    for f in (lambda x: decode_upload(x, 100), decode_batch, decode_key_list):
        try:
            f(b)
        except DecodeError:
            pass
