"""The SDK's memoized permanent answers: durable across SIGKILL, encrypted at rest, budgeted with the
longitudinal guarantee."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from shuffledp.service.client import BudgetExceededError, ConfigError, ShuffleDPClient
from shuffledp.service.config import ClientPolicy, create_task_config
from shuffledp.service.hpke import generate_key_pair
from shuffledp.service.wire import KeyConfig, encode_key_list

pytestmark = pytest.mark.timeout(240)

ANALYZER, SHUFFLER = "http://analyzer.test", "http://shuffler.test"
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _task(name: str, params: dict, eps: float = 2.0, memoize: bool = True):
    cfg = create_task_config(name="memo", mechanism={"kind": "frequency", "name": name, "epsilon": eps,
                                                     "params": params},
                             target_central={"eps": 1.9, "delta": 1e-6}, min_batch_size_floor=10)
    # many reports per window so that only the privacy ledger limits the client here
    return dataclasses.replace(cfg, client_policy=ClientPolicy(max_reports_per_window=1000, max_reports_per_day=1000,
                                                               memoize=memoize))


def _keys() -> bytes:
    _sk, pk = generate_key_pair()
    return encode_key_list([KeyConfig(1, pk)])


def _handler(cfg_json: dict, digest: str, keys: bytes):
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.host == "analyzer.test":
            if req.url.path == "/v1/hpke-keys":
                return httpx.Response(200, content=keys)
            return httpx.Response(200, json={"config": cfg_json, "config_digest": digest})
        return httpx.Response(200, json={"accepted": 1, "duplicate": 0, "errors": []})
    return handler


def _client(cfg, keys, path, **kw) -> ShuffleDPClient:
    http = httpx.Client(transport=httpx.MockTransport(_handler(cfg.to_json(), cfg.digest.hex(), keys)))
    return ShuffleDPClient(ANALYZER, SHUFFLER, cfg.task_id, path, http=http, **kw)


#: a client device: report one value in a loop, print the permanent answer after each committed report
CHILD = r"""
import json, sys, time
import httpx
sys.path.insert(0, sys.argv[1])
from shuffledp.service.client import ShuffleDPClient
spec = json.load(open(sys.argv[2]))
keys = bytes.fromhex(spec["keys"])

def handler(req):
    if req.url.host == "analyzer.test":
        if req.url.path == "/v1/hpke-keys":
            return httpx.Response(200, content=keys)
        return httpx.Response(200, json={"config": spec["config"], "config_digest": spec["digest"]})
    return httpx.Response(200, json={"accepted": 1, "duplicate": 0, "errors": []})

c = ShuffleDPClient("http://analyzer.test", "http://shuffler.test", bytes.fromhex(spec["task"]), sys.argv[3],
                    http=httpx.Client(transport=httpx.MockTransport(handler)))
value = int(sys.argv[4])
for i in range(10_000):
    c.report(value, now=1_700_000_000.0 + i)
    print(json.dumps({"answer": c.permanent_answer(value).tobytes().hex(), "pending": c.pending()}), flush=True)
    time.sleep(0.01)
"""


def _spawn(tmp_path, spec_path, db, value):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return subprocess.Popen([sys.executable, str(script), SRC, str(spec_path), str(db), str(value)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _read_answers(proc, k):
    out = []
    while len(out) < k:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"client exited early: {proc.stderr.read()}")
        out.append(json.loads(line))
    return out


@pytest.mark.parametrize("name,params", [("l_oue", {"d": 128, "epsilon_one": 1.0}),
                                         ("loloha", {"d": 128, "epsilon_one": 1.0, "g": 64})])
def test_sigkill_between_reports_keeps_the_permanent_answer(tmp_path, name, params):
    """A client killed with SIGKILL (between reports, and at random points) and restarted from the
    same store re-sends the same permanent answer: a redraw would spend another eps_perm."""
    cfg, keys = _task(name, params), _keys()
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"config": cfg.to_json(), "digest": cfg.digest.hex(), "keys": keys.hex(),
                                "task": cfg.task_id.hex()}))
    db = tmp_path / "client.db"
    answers = []
    rng = np.random.default_rng(0)
    for life in range(4):
        proc = _spawn(tmp_path, spec, db, 77)
        try:
            answers += [r["answer"] for r in _read_answers(proc, 2)]
            if life % 2:   # a random point: possibly inside a report's transaction
                time.sleep(float(rng.uniform(0, 0.03)))
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert len(answers) == 8 and len(set(answers)) == 1, answers
    # an honest redraw would differ: the answer has enough entropy for this test to fail
    c = _client(cfg, keys, db)
    assert c.permanent_answer(77).tobytes().hex() == answers[0]
    assert c.permanent_answer(5) is None
    assert c.pending() >= 8   # every printed report was queued (durably) with its answer (nothing flushed)
    # one value, r reports: the longitudinal bound of one memo key, never more than eps_perm
    assert c.privacy_spent() == pytest.approx(c.mech.transcript_epsilon([c.pending()]))
    assert c.privacy_spent() <= c.mech.epsilon_perm
    c.close()
    # at rest: no plaintext answer, no payload field names, key file private
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("client.db*") if p.suffix != ".memo-key"
                   and not p.name.endswith(".memo-key"))
    answer = bytes.fromhex(answers[0])
    assert b'"answer"' not in raw and b'"setup"' not in raw and b'"reports"' not in raw
    if name == "l_oue":   # 128 random bits: their presence in the store could not be a coincidence
        assert answer not in raw
        assert json.dumps(np.frombuffer(answer, dtype=np.uint8).tolist()).encode() not in raw
    key_file = Path(f"{db}.memo-key")
    assert key_file.exists() and stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_another_key_or_a_tampered_entry_is_refused_not_redrawn(tmp_path):
    cfg, keys = _task("l_grr", {"d": 16, "epsilon_one": 1.0}), _keys()
    key = os.urandom(32)
    c = _client(cfg, keys, tmp_path / "c.db", memo_key=key)
    c.report(3, now=1_700_000_000.0)
    before = c.permanent_answer(3)
    c.close()
    with pytest.raises(ConfigError, match="another key"):
        _client(cfg, keys, tmp_path / "c.db", memo_key=os.urandom(32))
    db = sqlite3.connect(tmp_path / "c.db")
    sealed = db.execute("SELECT slot, sealed FROM memo_sealed").fetchall()
    assert len(sealed) == 2   # the setup row and one permanent answer
    slot, blob = sealed[-1]
    db.execute("UPDATE memo_sealed SET sealed=? WHERE slot=?", (blob[:-1] + bytes([blob[-1] ^ 1]), slot))
    db.commit()
    db.close()
    c = _client(cfg, keys, tmp_path / "c.db", memo_key=key)
    with pytest.raises(ConfigError, match="does not authenticate"):
        c.report(3, now=1_700_000_100.0)
    with pytest.raises(ConfigError):
        c.permanent_answer(3)
    c.close()
    with pytest.raises(Exception) as e:
        _client(cfg, keys, tmp_path / "d.db", memo_key=b"short")
    assert getattr(e.value, "parameter", None) == "memo_key"
    assert before is not None


def test_privacy_ledger_uses_the_longitudinal_guarantee(tmp_path):
    cfg, keys = _task("l_grr", {"d": 16, "epsilon_one": 0.5}), _keys()
    c = _client(cfg, keys, tmp_path / "c.db", max_epsilon=2.0)
    e_perm, e_one = c.mech.epsilon_perm, c.mech.epsilon_one
    t = 1_700_000_000.0
    c.report(4, now=t)
    assert c.privacy_spent() == pytest.approx(e_one)
    c.report(4, now=t + 1)   # two reports share the permanent answer: min(eps_perm, 2 eps_irr), not 2 eps_1
    assert c.privacy_spent() == pytest.approx(min(e_perm, 2 * c.mech.epsilon_irr))
    for i in range(20):   # unbounded reports of one value: capped at eps_perm
        c.report(4, now=t + 2 + i)
    assert c.privacy_spent() == pytest.approx(e_perm) and e_perm <= 2.0
    pending = c.pending()
    with pytest.raises(BudgetExceededError) as info:   # a new value would add eps_1 beyond max_epsilon
        c.report(9, now=t + 100)
    assert info.value.parameter == "max_epsilon" and c.pending() == pending and c.permanent_answer(9) is None
    c.report(4, now=t + 200)   # the memoized value is still free
    assert c.privacy_spent() == pytest.approx(e_perm) and c.pending() == pending + 1
    c.close()


@pytest.mark.parametrize("memoize", [True, False])
def test_privacy_ledger_of_a_one_shot_oracle(tmp_path, memoize):
    cfg, keys = _task("grr", {"d": 8}, memoize=memoize), _keys()
    c = _client(cfg, keys, tmp_path / "c.db")
    eps = c.mech.privacy().eps
    for i in range(3):
        c.report(2, now=1_700_000_000.0 + i)
    c.report(5, now=1_700_000_010.0)
    assert c.privacy_spent() == pytest.approx(2 * eps if memoize else 4 * eps)
    assert (c.memoized_message(2) is not None) == memoize
    c.close()


def test_plaintext_memo_of_an_older_store_is_sealed_on_open(tmp_path):
    cfg, keys = _task("grr", {"d": 8}), _keys()
    db = sqlite3.connect(tmp_path / "c.db")
    db.execute("CREATE TABLE memo(task BLOB, value TEXT, message TEXT, PRIMARY KEY(task, value))")
    message = json.dumps({"y": [[6], "<i8"]})
    db.execute("INSERT INTO memo VALUES (?,?,?)", (cfg.task_id, "5", message))
    db.commit()
    db.close()
    c = _client(cfg, keys, tmp_path / "c.db")
    raw_open = b"".join(p.read_bytes() for p in tmp_path.glob("c.db*") if not p.name.endswith(".memo-key"))
    assert message.encode() not in raw_open   # already gone while the client is open (checkpointed)
    assert c.memoized_message(5) == {"y": [[6], "<i8"]}
    assert not c.db.execute("SELECT 1 FROM sqlite_master WHERE name='memo'").fetchone()
    c.report(5, now=1_700_000_000.0)   # the migrated message is reused
    assert c.memo.entries() == 1
    c.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("c.db*") if not p.name.endswith(".memo-key"))
    assert message.encode() not in raw


def test_rappor_task_memoizes_the_prr_and_draws_the_irr_fresh(tmp_path):
    """RAPPOR in the SDK: the PRR of a value (and the cohort) survive a restart; each report's IRR is
    fresh, so reports of one value differ while their permanent answer does not."""
    cfg, keys = _task("rappor", {"d": 32, "k": 64, "m": 4}, eps=4.0), _keys()
    key = os.urandom(32)
    c = _client(cfg, keys, tmp_path / "c.db", memo_key=key)
    for i in range(6):
        c.report(7, now=1_700_000_000.0 + i)
    prr = c.permanent_answer(7)
    pts = [row[0] for row in c.db.execute("SELECT plaintext FROM outbox WHERE kind=0").fetchall()]
    assert len(set(pts)) == 6
    reports = cfg.report_schema.decode(np.frombuffer(b"".join(pts), dtype=np.uint8).reshape(6, -1))[0]
    assert len({b.tobytes() for b in reports["bits"]}) > 1   # the IRR is redrawn (p = 0.5, q = 0.75, 64 bits)
    assert len(set(reports["cohort"].tolist())) == 1          # one cohort per client, kept
    m = c.mech
    assert c.privacy_spent() == pytest.approx(m.epsilon_inf)   # r >= 2 reports of a bit-vector PRR: eps_inf
    c.close()
    c = _client(cfg, keys, tmp_path / "c.db", memo_key=key)
    np.testing.assert_array_equal(c.permanent_answer(7), prr)
    c.close()
