"""Honest privacy statements: valid reports only, group privacy over windows, central sensitivity, SDK checks.

Regression tests for the review's repros (/tmp/rv/garbage.py, /tmp/rv/carry.py): shuffler and
analyzer in-process, batches handed over with ``ingest_batch`` exactly as the forwarder PUTs them.
"""

from __future__ import annotations

import json
import math
import secrets

import httpx
import numpy as np
import pytest
from sqlalchemy import select

from shuffledp.core.errors import ValidationError
from shuffledp.core.privacy import round_up
from shuffledp.accounting.shuffle import min_batch_for_target
from shuffledp.accounting.shuffle import shuffled_batch_epsilon as central_epsilon
from shuffledp.service.analyzer import (AnalyzerState, _ledger_windows, estimates, ingest_batch,
                                        max_reports_per_user)
from shuffledp.service.client import ConfigError, encode_reports, fetch_task, seal_many
from shuffledp.service.config import ClientPolicy, TaskConfig, create_task_config
from shuffledp.service.shuffler import ShufflerState
from shuffledp.service.storage import analyzer_ledger, make_engine, shuffler_batch_items, shuffler_batches
from shuffledp.service.wire import Batch, encode_batch, encode_key_list, encode_upload


pytestmark = pytest.mark.timeout(120)

HOUR = 3600
T0 = 1_800_000_000 - (1_800_000_000 % HOUR)
GRR = {"kind": "frequency", "name": "grr", "epsilon": 2.0, "params": {"d": 4}}
DELTA = 1e-6


def _world(tmp_path, **kw):
    an = AnalyzerState(f"sqlite:///{tmp_path}/a.db", admin_token="a", collector_token="c", peer_secret=b"p",
                       retention_every=0)
    spec = dict(name="x", mechanism=GRR, target_central={"eps": 1.0, "delta": DELTA}, min_batch_size_floor=10,
                time_precision=60, batch_window=HOUR, max_wait_windows=3)
    spec.update(kw)
    cfg = create_task_config(**spec)
    an.add_task(cfg)
    sh = ShufflerState(f"sqlite:///{tmp_path}/s.db", admin_token="a", peer_secret=b"p", auto=False)
    sh.register(cfg, "http://127.0.0.1:9", [k.key_id for k in an.public_configs], None)
    return an, sh, cfg, an.public_configs[0]


def _deliver(an, sh, cfg) -> list[dict]:
    """Hand every formed batch to the analyzer as the forwarder would (body + content-derived id)."""
    out = []
    with sh.engine.connect() as c:
        for row in c.execute(select(shuffler_batches).order_by(shuffler_batches.c.window)).all():
            envs = [r[0] for r in c.execute(select(shuffler_batch_items.c.envelope).where(
                shuffler_batch_items.c.batch_id == row.batch_id).order_by(shuffler_batch_items.c.pos))]
            out.append(ingest_batch(an, cfg.task_id, row.batch_id,
                                    encode_batch(Batch(cfg.task_id, row.crowd_id, row.window, envs))))
    return out


# ------------------------------------------------------------------ 1: garbage buys no amplification
def test_garbage_envelopes_buy_no_amplification(tmp_path):
    an, sh, cfg, key = _world(tmp_path)
    now = T0 + 10
    envs = seal_many(cfg, key, encode_reports(cfg, np.array([3]), now), b"")       # ONE honest report
    hdr = envs[0][:7]
    junk = [hdr + secrets.token_bytes(cfg.envelope_len - 7) for _ in range(cfg.min_batch_size)]
    assert sh.ingest(cfg.task_id, encode_upload([(b"", e) for e in envs + junk]), now=now)["accepted"] == 1 + cfg.min_batch_size
    assert sh._form_batches(now, True) == 1
    (res,) = _deliver(an, sh, cfg)
    assert res["received"] == 1 + cfg.min_batch_size and res["valid"] == 1
    assert res["rejected"]["decrypt_error"] == cfg.min_batch_size
    st = res["privacy_statement"]
    # only the local guarantee holds: the batch hides the one report among nobody
    assert st["eps"] == cfg.eps_local == 2.0 and st["delta"] == 0.0 and st["model"] == "local"
    assert "no amplification" in st["note"]
    with an.engine.connect() as c:
        led = c.execute(select(analyzer_ledger)).one()
    assert led.eps_central == 2.0 and led.delta == 0.0 and led.n_valid == 1 and led.n_released == 1 + cfg.min_batch_size
    # the acknowledged report is still counted, under the honest statement
    e = estimates(an, cfg.task_id)
    assert e["n"] == 1 and e["privacy_statement"]["eps"] == 2.0 and e["privacy_statement"]["delta"] == 0.0


def test_statement_uses_the_valid_count_not_the_envelope_count(tmp_path):
    an, sh, cfg, key = _world(tmp_path)
    now = T0 + 10
    m = cfg.min_batch_size + 40
    envs = seal_many(cfg, key, encode_reports(cfg, np.arange(m) % 4, now), b"")
    hdr = envs[0][:7]
    junk = [hdr + secrets.token_bytes(cfg.envelope_len - 7) for _ in range(500)]
    sh.ingest(cfg.task_id, encode_upload([(b"", e) for e in envs + junk]), now=now)
    sh._form_batches(now, True)
    (res,) = _deliver(an, sh, cfg)
    assert res["valid"] == m and res["received"] == m + 500
    want = central_epsilon(2.0, m, DELTA)[0]
    assert res["privacy_statement"]["eps"] == pytest.approx(want, rel=1e-12)
    assert want > central_epsilon(2.0, m + 500, DELTA)[0]   # the old statement was strictly too strong
    assert res["privacy_statement"]["model"] == "shuffle"


# ------------------------------------------------------------------ 2: pooled windows are charged per window
def test_batch_pooling_two_windows_is_charged_for_both(tmp_path):
    an, sh, cfg, key = _world(tmp_path)
    m = cfg.min_batch_size
    n_w = int(m * 0.6)                 # each window alone is below the threshold; two together are not
    for w in range(2):                 # the same population reports once per window
        now = T0 + w * HOUR + 10
        envs = seal_many(cfg, key, encode_reports(cfg, np.arange(n_w) % 4, now), b"")
        sh.ingest(cfg.task_id, encode_upload([(b"", e) for e in envs]), now=now)
        sh._form_batches(now, False)
    assert sh._form_batches(T0 + 2 * HOUR + 10, False) == 1
    (res,) = _deliver(an, sh, cfg)
    assert res["valid"] == 2 * n_w
    w0 = T0 // HOUR
    assert res["client_windows"] == [w0, w0 + 1]
    eps_c = central_epsilon(2.0, 2 * n_w, DELTA)[0]
    st = res["privacy_statement"]
    assert st["eps"] == round_up(2 * eps_c)   # k * windows = 2 reports/user (group_privacy rounds eps up)
    assert st["delta"] == pytest.approx(2 * math.exp(eps_c) * DELTA, rel=1e-12)
    assert res["privacy_statement_per_report"]["eps"] == pytest.approx(eps_c, rel=1e-12)
    with an.engine.connect() as c:
        assert json.loads(c.execute(select(analyzer_ledger.c.client_windows)).scalar_one()) == [w0, w0 + 1]
    e = estimates(an, cfg.task_id)
    assert e["client_windows"] == [w0, w0 + 1] and e["n"] == 2 * n_w
    assert e["privacy_statement"]["eps"] == pytest.approx(2 * eps_c, rel=1e-12)   # was 1 * eps_c
    assert e["privacy_statement"]["delta"] == pytest.approx(2 * math.exp(eps_c) * DELTA, rel=1e-12)


def test_k_reports_per_window_over_two_windows_and_single_window_unchanged(tmp_path):
    an, sh, cfg, key = _world(tmp_path, client_policy={"max_reports_per_window": 3, "max_reports_per_day": 24})
    n = cfg.min_batch_size + 5
    now = T0 + 10
    sh.ingest(cfg.task_id, encode_upload([(b"", e) for e in seal_many(
        cfg, key, encode_reports(cfg, np.arange(n) % 4, now), b"")]), now=now)
    sh._form_batches(now, True)
    (one,) = _deliver(an, sh, cfg)
    eps1 = central_epsilon(2.0, n, DELTA)[0]
    assert one["client_windows"] == [T0 // HOUR]
    assert one["privacy_statement"]["eps"] == round_up(3 * eps1)
    assert estimates(an, cfg.task_id)["privacy_statement"]["eps"] == pytest.approx(3 * eps1, rel=1e-12)
    # a second batch (next window, another n reports) composes: 3 reports in each of 2 client windows
    now2 = T0 + HOUR + 10
    sh.ingest(cfg.task_id, encode_upload([(b"", e) for e in seal_many(
        cfg, key, encode_reports(cfg, np.arange(n) % 4, now2), b"")]), now=now2)
    sh._form_batches(now2, True)
    _deliver(an, sh, cfg)
    e = estimates(an, cfg.task_id)
    assert e["privacy_statement"]["eps"] == pytest.approx(6 * eps1, rel=1e-12)
    # group privacy inside each batch (3 reports), basic composition over the two batches
    assert e["privacy_statement"]["delta"] == pytest.approx(6 * math.exp(2 * eps1) * DELTA, rel=1e-9)


def test_many_single_window_batches_compose_additively(tmp_path):
    an, sh, cfg, key = _world(tmp_path)
    n = cfg.min_batch_size
    for w in range(6):
        now = T0 + w * HOUR + 10
        sh.ingest(cfg.task_id, encode_upload([(b"", e) for e in seal_many(
            cfg, key, encode_reports(cfg, np.arange(n) % 4, now), b"")]), now=now)
        sh._form_batches(now, True)
    assert len(_deliver(an, sh, cfg)) == 6
    eps1 = central_epsilon(2.0, n, DELTA)[0]
    st = estimates(an, cfg.task_id)["privacy_statement"]
    assert st["eps"] == pytest.approx(6 * eps1, rel=1e-12) and st["delta"] == pytest.approx(6 * DELTA, rel=1e-12)


def test_delayed_reports_in_a_later_labelled_batch_are_charged_to_their_own_window(tmp_path):
    # reports made in window w but delivered (outbox retry) in window w+1 share a batch label with
    # window w+1's reports; the shuffler's label alone would charge one window
    an, sh, cfg, key = _world(tmp_path)
    n = cfg.min_batch_size
    late = seal_many(cfg, key, encode_reports(cfg, np.arange(n) % 4, T0 + 10), b"")
    fresh = seal_many(cfg, key, encode_reports(cfg, np.arange(n) % 4, T0 + HOUR + 10), b"")
    now = T0 + HOUR + 20
    sh.ingest(cfg.task_id, encode_upload([(b"", e) for e in late + fresh]), now=now)
    sh._form_batches(now, True)
    (res,) = _deliver(an, sh, cfg)
    assert res["valid"] == 2 * n and len(res["client_windows"]) == 2
    eps_c = central_epsilon(2.0, 2 * n, DELTA)[0]
    assert res["privacy_statement"]["eps"] == round_up(2 * eps_c)


def test_migration_0003_keeps_old_ledger_rows_and_assumes_their_widest_span(urls):  # noqa: F811
    from alembic import command

    from shuffledp.service.storage import alembic_config, upgrade
    eng = make_engine(urls[1])
    with eng.begin() as conn:
        command.upgrade(alembic_config(conn), "0002")
        conn.exec_driver_sql(
            "INSERT INTO analyzer_ledger (batch_id, task_id, \"window\", crowd_id, n_released, n_valid, eps_local, "
            "eps_central, delta, statement) VALUES (%s)" % ", ".join(["?"] * 10) if eng.dialect.name == "sqlite"
            else "INSERT INTO analyzer_ledger (batch_id, task_id, \"window\", crowd_id, n_released, n_valid, "
                 "eps_local, eps_central, delta, statement) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (b"b" * 32, b"t" * 32, 500, b"", 400, 400, 2.0, 0.9, 1e-6, "old"))
    upgrade(eng)
    with eng.connect() as conn:
        row = conn.execute(select(analyzer_ledger)).one()
        ver = conn.exec_driver_sql("SELECT version_num FROM shuffledp_alembic_version").scalar_one()
    assert ver >= "0003" and row.client_windows is None and row.n_valid == 400
    cfg = create_task_config(name="x", mechanism=GRR, target_central={"eps": 1.0, "delta": DELTA},
                             time_precision=60, batch_window=HOUR, max_wait_windows=3, tolerable_clock_skew=60)
    # every client window the batch's accepted time range allows: (500 - 3) .. 501, widened by the skew
    assert _ledger_windows(cfg, row) == [496, 497, 498, 499, 500, 501]
    with eng.begin() as conn:   # new rows carry the column
        conn.execute(analyzer_ledger.insert().values(
            batch_id=b"c" * 32, task_id=b"t" * 32, window=501, crowd_id=b"", n_released=1, n_valid=1,
            eps_local=2.0, eps_central=2.0, delta=0.0, statement="new", client_windows="[501]"))
    with eng.connect() as conn:
        new = conn.execute(select(analyzer_ledger).where(analyzer_ledger.c.batch_id == b"c" * 32)).one()
    assert _ledger_windows(cfg, new) == [501]
    eng.dispose()


# ------------------------------------------------------------------ 3: central-mode sensitivity
def test_max_reports_per_user_follows_the_client_policy():
    cfg = create_task_config(name="x", mechanism=GRR, target_central={"eps": 1.0, "delta": DELTA},
                             time_precision=60, batch_window=HOUR,
                             client_policy={"max_reports_per_window": 2, "max_reports_per_day": 5})
    assert max_reports_per_user(cfg, []) == 1
    assert max_reports_per_user(cfg, [10]) == 2
    assert max_reports_per_user(cfg, [10, 11]) == 4
    assert max_reports_per_user(cfg, list(range(24))) == 5           # 24 windows of one UTC day: day cap
    d0 = (T0 // 86400) * 86400 // HOUR
    assert max_reports_per_user(cfg, [d0 + 23, d0 + 24]) == 4        # across midnight: 2 days x 5 > 2 x 2


def test_central_mode_sensitivity_covers_all_of_a_users_reports(tmp_path):
    an, sh, cfg, key = _world(
        tmp_path, mechanism={"kind": "central", "name": "histogram", "params": {"d": 5}}, min_batch_size_floor=20,
        central_mode={"eps_per_query": 1.0, "query_budget_eps": 10.0},
        client_policy={"max_reports_per_window": 2, "max_reports_per_day": 48})
    for w in range(3):
        now = T0 + w * HOUR + 10
        sh.ingest(cfg.task_id, encode_upload([(b"", e) for e in seal_many(
            cfg, key, encode_reports(cfg, np.arange(30) % 5, now), b"")]), now=now)
        sh._form_batches(now, True)
    assert len(_deliver(an, sh, cfg)) == 3
    e = estimates(an, cfg.task_id)
    assert e["max_reports_per_user"] == 6 and e["sensitivity"] == 12      # 2 per window x 3 windows
    assert "sensitivity 12" in e["privacy_statement"]["note"]
    e1 = estimates(an, cfg.task_id, from_window=T0 // HOUR, to_window=T0 // HOUR)
    assert e1["sensitivity"] == 4 and e1["n"] == 30


# ------------------------------------------------------------------ 4: SDK recomputes min_batch_size
def _serve(cfg: TaskConfig, key) -> httpx.Client:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/config"):
            return httpx.Response(200, json={"config": cfg.to_json(), "config_digest": cfg.digest.hex()})
        return httpx.Response(200, content=encode_key_list([key]))
    return httpx.Client(transport=httpx.MockTransport(handler))


def test_sdk_refuses_an_advertised_min_batch_size_below_its_own_computation(tmp_path):
    an, _sh, cfg, key = _world(tmp_path)
    got, _ = fetch_task(_serve(cfg, key), "http://an", cfg.task_id)
    assert got.min_batch_size == cfg.min_batch_size
    forged = TaskConfig(**{**cfg.__dict__, "min_batch_size": cfg.min_batch_size - 1})   # digest recomputed
    assert forged.min_batch_size >= forged.min_batch_size_floor
    with pytest.raises(ConfigError, match=f"need at least {cfg.min_batch_size}"):
        fetch_task(_serve(forged, key), "http://an", cfg.task_id)
    # the honest-fraction division is part of the computation
    half = create_task_config(name="x", mechanism=GRR, target_central={"eps": 1.0, "delta": DELTA},
                              honest_fraction=0.5, min_batch_size_floor=10)
    assert half.min_batch_size == 2 * cfg.min_batch_size
    fetch_task(_serve(half, key), "http://an", half.task_id)
    with pytest.raises(ConfigError):
        fetch_task(_serve(TaskConfig(**{**half.__dict__, "min_batch_size": cfg.min_batch_size}), key),
                   "http://an", half.task_id)


# ------------------------------------------------------------------ 5: ClientPolicy types
@pytest.mark.parametrize("pol, param", [
    ({"max_reports_per_window": 1.5, "max_reports_per_day": 2}, "client_policy.max_reports_per_window"),
    ({"max_reports_per_window": True}, "client_policy.max_reports_per_window"),
    ({"max_reports_per_day": "3"}, "client_policy.max_reports_per_day"),
    ({"max_reports_per_window": 0}, "client_policy.max_reports_per_window"),
    ({"memoize": "no"}, "client_policy.memoize"),
    ({"memoize": 1}, "client_policy.memoize"),
    ({"max_reports": 2}, "client_policy"),
])
def test_client_policy_types_are_checked(pol, param):
    with pytest.raises(ValidationError) as e:
        create_task_config(name="x", mechanism=GRR, target_central={"eps": 1.0, "delta": DELTA}, client_policy=pol)
    assert e.value.parameter == param


def test_client_policy_accepts_valid_values_and_bad_stored_configs_are_refused():
    assert ClientPolicy(2, 5, False) == ClientPolicy(max_reports_per_window=2, max_reports_per_day=5, memoize=False)
    cfg = create_task_config(name="x", mechanism=GRR, target_central={"eps": 1.0, "delta": DELTA})
    o = cfg.to_json()
    o["client_policy"]["memoize"] = "no"
    with pytest.raises(ValidationError):
        TaskConfig.from_json(o)


# ------------------------------------------------------------------ 6: longitudinal tasks
def _irr_formula(eps_perm: float, eps_one: float) -> float:
    """The papers' IRR budget, computed here from its closed form (not from the mechanism)."""
    return math.log((math.exp(eps_perm + eps_one) - 1) / (math.exp(eps_perm) - math.exp(eps_one)))


@pytest.mark.parametrize("name, params", [("l_grr", {"d": 16, "epsilon_one": 1.0}),
                                          ("loloha", {"d": 64, "epsilon_one": 1.0, "g": 5}),
                                          ("l_grr", {"d": 4, "epsilon_one": 0.2})])
def test_longitudinal_batches_are_sized_and_amplified_from_the_fresh_layer(name, params):
    """L-GRR / LOLOHA tasks: eps0 = epsilon_irr (the fresh GRR's loss on the permanent symbol, below
    eps_perm here), not eps_perm (conservative) nor epsilon_one (not composable over batches that
    share permanent answers); batch size, batch statement and min batch follow it."""
    eps_perm = 2.0 if params["epsilon_one"] == 1.0 else 3.0
    spec = {"kind": "frequency", "name": name, "epsilon": eps_perm, "params": params}
    cfg = create_task_config(name="long", mechanism=spec, target_central={"eps": 1.0, "delta": DELTA},
                             min_batch_size_floor=10)
    irr = _irr_formula(eps_perm, params["epsilon_one"])
    assert irr < eps_perm
    # the realized loss of the calibrated (2^-53 grid, rounded down) fresh layer, rounded up
    assert irr - 1e-9 <= cfg.eps_local <= irr + 1e-12
    assert cfg.eps_local == cfg.mechanism_object().epsilon_irr
    assert cfg.min_batch_size == max(10, math.ceil(min_batch_for_target(cfg.eps_local, 1.0, DELTA)))
    assert cfg.min_batch_size < math.ceil(min_batch_for_target(eps_perm, 1.0, DELTA))
    st, _ = cfg.batch_privacy(cfg.min_batch_size)
    assert st.eps == central_epsilon(cfg.eps_local, cfg.min_batch_size, DELTA)[0] <= 1.0
    st, _ = cfg.batch_privacy(cfg.min_batch_size - 1)
    assert st.model == "local" and st.eps == cfg.eps_local


@pytest.mark.parametrize("name, params", [("l_oue", {"d": 16, "epsilon_one": 1.0}), ("dbitflip", {"d": 16}),
                                          ("l_grr", {"d": 16, "epsilon_one": 1.9})])
def test_longitudinal_batches_keep_eps_perm_without_a_smaller_fresh_layer_loss(name, params):
    """L-OUE (bit-vector answers) and dBitFlip (no fresh layer) have no single-symbol fresh layer;
    L-GRR with eps_1 near eps_perm has epsilon_irr > eps_perm: eps0 stays the task's epsilon."""
    spec = {"kind": "frequency", "name": name, "epsilon": 2.0, "params": params}
    cfg = create_task_config(name="long", mechanism=spec, target_central={"eps": 1.0, "delta": DELTA},
                             min_batch_size_floor=10)
    if name == "l_grr":
        assert _irr_formula(2.0, 1.9) > 2.0 and cfg.mechanism_object().epsilon_irr > 2.0
    assert cfg.eps_local == 2.0
    assert cfg.min_batch_size == max(10, math.ceil(min_batch_for_target(2.0, 1.0, DELTA)))


def test_sdk_accepts_the_longitudinal_min_batch_size(tmp_path):
    """The client recomputes the minimum batch from the same eps0: an L-GRR task is accepted, and a
    batch size one below it is refused."""
    spec = {"kind": "frequency", "name": "l_grr", "epsilon": 2.0, "params": {"d": 16, "epsilon_one": 1.0}}
    cfg = create_task_config(name="long", mechanism=spec, target_central={"eps": 1.0, "delta": DELTA},
                             min_batch_size_floor=10)
    from shuffledp.service.hpke import generate_key_pair
    from shuffledp.service.wire import KeyConfig
    key = KeyConfig(1, generate_key_pair()[1])
    got, _ = fetch_task(_serve(cfg, key), "http://an", cfg.task_id)
    assert got.min_batch_size == cfg.min_batch_size
    with pytest.raises(ConfigError, match=f"need at least {cfg.min_batch_size}"):
        fetch_task(_serve(TaskConfig(**{**cfg.__dict__, "min_batch_size": cfg.min_batch_size - 1}), key),
                   "http://an", cfg.task_id)
