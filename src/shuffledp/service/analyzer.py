"""Analyzer service: idempotent batch ingest → decrypt → validate → replay check → aggregate.

Endpoints (FastAPI):

- ``GET /v1/hpke-keys`` — ``application/ohttp-keys`` (public, cacheable).
- ``POST /v1/tasks`` (admin bearer) — create a task; the minimum batch size is computed from the
  target central (eps, delta) by the accountant and creation fails (422) when unreachable.
- ``GET /v1/tasks/{t}/config`` — the canonical configuration and its digest (public).
- ``PUT /v1/tasks/{t}/batches/{batch_id}`` (shuffler HMAC) — ingest a shuffled batch. The signature
  header (it carries the body's length and SHA-256 under the MAC) is checked before the body is
  read (401), the signed length against ``MAX_BATCH_BODY`` (413), then the body is read with a
  deadline and checked against the signed length and digest (``http_common.read_signed_body``). The batch id
  is recomputed from the body; a known batch returns its stored result (idempotent). Decryption
  and validation happen outside the transaction; one transaction then stores the batch row,
  the report ids (replay protection), the merged statistic and the ledger row; the response
  (the acknowledgement) is sent only after commit.
- ``GET /v1/tasks/{t}/estimates`` (collector bearer) — estimates, standard errors, 95% CIs and
  the privacy statement. In central mode exact integer noise is added per query and the query
  budget is debited (refused when exhausted).
- ``GET /v1/tasks/{t}/privacy`` — the ledger.
- ``POST /v1/admin/retention`` (admin bearer) — delete per-report replay rows past retention
  (also run every ``retention_every`` seconds by a background thread); the aggregates, the ledger
  and the batch rows are kept. Rules: ``service/retention.py``.

Privacy: the analyzer sees shuffled batches only; every query over them is post-processing of
the batches' shuffle-model guarantee (recorded per batch in the ledger).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import threading
import time
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from fastapi import FastAPI, Query, Request, Response
from sqlalchemy import func, select, update

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..local.base import take_reports
from ..accounting.composition import group_privacy_log_delta as group_log_delta
from ..accounting.composition import group_privacy_or_none as group_bound
from .config import MIN_TIME_PRECISION, TASK_FIELDS, TaskConfig, create_task_config
from .dashboard import install_dashboard
from .hpke import AEAD_AES_128_GCM, AEAD_CHACHA20_POLY1305, KDF_HKDF_SHA256, generate_key_pair
from .http_common import Problem, check_bearer, service_app, task_id_from_hex, read_body, read_signed_body
from .periodic import PeriodicThread
from .retention import analyzer_purge_before, refused_time_limit
from .storage import (analyzer_aggregates, analyzer_batches, analyzer_keys, analyzer_ledger, analyzer_queries,
                      analyzer_report_ids, analyzer_retention, analyzer_tasks, existing_report_ids, insert_report_ids,
                      make_engine, upgrade)
from .wire import (HEALTH_BATCH_STATES, HEALTH_PATH, DecodeError, KeyConfig, batch_id, decode_batch, encode_key_list,
                   open_reports)

__all__ = ["AnalyzerState", "create_analyzer_app", "ingest_batch"]

#: largest batch body the analyzer reads (bytes); a larger signed length is refused before reading
MAX_BATCH_BODY = 512 * 1024 * 1024
#: largest task creation body (bytes)
MAX_TASK_BODY = 1 << 20
#: window indices accepted in estimate queries (``from_window``/``to_window``): stored as int64
MAX_WINDOW = 2**62
#: largest shuffler health push (bytes; the shuffler sends at most 256 tasks per push)
MAX_HEALTH_BODY = 128 * 1024
#: the counts a shuffler health entry carries (each a non-negative integer)
HEALTH_COUNTS = ("pending_envelopes", "pending_users")

log = logging.getLogger("shuffledp.service.analyzer")


class AnalyzerState:
    """Everything the analyzer app holds: engine, secrets, caches of tasks and keys."""

    def __init__(self, db_url: str, *, admin_token: str, collector_token: str, peer_secret: bytes,
                 clock: Any = None, retention_every: float = 3600.0,
                 min_time_precision: int = MIN_TIME_PRECISION, export_dir: str | None = None) -> None:
        """Analyzer state over the database at ``db_url``.

        ``export_dir`` (default: ``SHUFFLEDP_ANALYZER_EXPORT_DIR``; off when unset) turns on the
        report archive: every accepted batch of a protocol task is also written, as the shuffler
        delivered it (anonymous, shuffled), to a Parquet archive that ``shuffledp aggregate`` reads
        (:func:`export_batch`).
        """
        self.engine = make_engine(db_url)
        self.export_dir = export_dir or os.environ.get("SHUFFLEDP_ANALYZER_EXPORT_DIR") or None
        # floor on a new task's time_precision (config.MIN_TIME_PRECISION); lower only in tests
        self.min_time_precision = min_time_precision
        self.clock = clock or time.time      # injectable (tests); retention and shuffler last contact
        self.retention_every = retention_every
        self._retention = PeriodicThread("analyzer-retention", retention_every, self.enforce_retention, log,
                                         "retention")
        upgrade(self.engine)
        self.admin_token, self.collector_token, self.peer_secret = admin_token, collector_token, peer_secret
        self.write_lock = threading.Lock()   # one writer (SQLite); PostgreSQL relies on constraints too
        self._tasks: dict[bytes, TaskConfig] = {}
        # the last health push per (task, shuffler index): bounded by the tasks times their shufflers
        self.shuffler_health: dict[tuple[bytes, int], dict] = {}
        self._ensure_key()
        self._load_keys()

    # ------------------------------------------------------------------ shuffler health
    def record_shuffler_health(self, body: bytes) -> dict:
        """Keep a shuffler's (authenticated) health push: ``{"tasks": [{"task_id", "shuffler",
        "pending_envelopes", "pending_users", "batches": {state: count}}, ...]}``.

        Entries for an unknown task or a shuffler index outside the task's deployment are counted
        and dropped, so what is held stays bounded by the tasks times their shufflers. A malformed
        body is refused as a whole (400) and changes nothing.
        """
        try:
            doc = json.loads(body)
            entries = doc["tasks"]
            if not isinstance(entries, list) or len(entries) > 1024:
                raise ValueError("tasks must be a list of at most 1024 entries")
            parsed = []
            for e in entries:
                t = bytes.fromhex(e["task_id"])
                j = e["shuffler"]
                counts = {k: e[k] for k in HEALTH_COUNTS}
                batches = {k: e["batches"].get(k, 0) for k in HEALTH_BATCH_STATES}
                if counts["pending_envelopes"] is None:   # not reported (tasks counted by user markers)
                    counts.pop("pending_envelopes")
                for v in (j, *counts.values(), *batches.values()):
                    if type(v) is not int or not 0 <= v < 2**63:
                        raise ValueError("counts and shuffler must be non-negative integers")
                parsed.append((t, j, counts, batches))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise Problem(400, "invalidRequest", f"health report must be {{'tasks': [{{'task_id', 'shuffler', "
                          f"{', '.join(repr(k) for k in HEALTH_COUNTS)}, 'batches'}}]}} ({type(e).__name__})") from e
        now, kept, dropped = self.clock(), 0, 0
        for t, j, counts, batches in parsed:
            try:
                cfg = self.task(t)
            except Problem:
                dropped += 1
                continue
            if j >= (cfg.n_shufflers if cfg.protocol is not None else 1):
                dropped += 1
                continue
            self.shuffler_health[(t, j)] = {"pending_envelopes": None, **counts, "batches": batches, "received_at": now}
            kept += 1
        return {"kept": kept, "dropped": dropped}

    # ------------------------------------------------------------------ keys
    def _ensure_key(self) -> None:
        with self.engine.begin() as c:
            if c.execute(select(func.count()).select_from(analyzer_keys)
                         .where(analyzer_keys.c.state == "active")).scalar_one() == 0:
                used = {r[0] for r in c.execute(select(analyzer_keys.c.key_id))}
                kid = next(i for i in range(1, 256) if i not in used)
                sk, pk = generate_key_pair()
                c.execute(analyzer_keys.insert().values(key_id=kid, public_key=pk, private_key=sk, state="active"))

    def _load_keys(self) -> None:
        with self.engine.connect() as c:
            rows = c.execute(select(analyzer_keys)).all()
        self.private_keys = {r.key_id: (X25519PrivateKey.from_private_bytes(r.private_key), r.public_key)
                             for r in rows}
        self.public_configs = [KeyConfig(r.key_id, r.public_key,
                                         ((KDF_HKDF_SHA256, AEAD_AES_128_GCM), (KDF_HKDF_SHA256, AEAD_CHACHA20_POLY1305)))
                               for r in rows if r.state == "active"]

    def rotate_key(self) -> int:
        with self.engine.begin() as c:
            c.execute(update(analyzer_keys).values(state="expired"))
        self._ensure_key()
        self._load_keys()
        return self.public_configs[0].key_id

    # ------------------------------------------------------------------ tasks
    def task(self, task_id: bytes) -> TaskConfig:
        t = self._tasks.get(task_id)
        if t is None:
            with self.engine.connect() as c:
                row = c.execute(select(analyzer_tasks.c.config).where(analyzer_tasks.c.task_id == task_id)).first()
            if row is None:
                raise Problem(404, "unrecognizedTask", "unknown task", task_id)
            t = TaskConfig.from_json(json.loads(row[0]))
            self._tasks[task_id] = t
        return t

    def add_task(self, cfg: TaskConfig) -> None:
        with self.engine.begin() as c:
            c.execute(analyzer_tasks.insert().values(task_id=cfg.task_id, config=cfg.canonical().decode(),
                                                     config_digest=cfg.digest, active=1))

    # ------------------------------------------------------------------ retention
    def enforce_retention(self, now: float | None = None) -> dict:
        """Delete the replay-check rows of batches past retention, per task; keep statistics and ledger.

        For each task the watermark ``W = analyzer_purge_before(cfg, now)`` (only ever raised) is
        committed in the same transaction as the deletion; from then on ingest refuses reports whose
        time could belong to a purged batch (counted ``expired``), so a replay cannot slip through.
        """
        now = self.clock() if now is None else now
        with self.engine.connect() as c:
            tids = [r[0] for r in c.execute(select(analyzer_tasks.c.task_id))]
        out: dict[str, dict] = {}
        for task_id in tids:
            cfg = self.task(task_id)
            w = analyzer_purge_before(cfg, now)
            with self.write_lock, self.engine.begin() as c:
                row = c.execute(select(analyzer_retention).where(analyzer_retention.c.task_id == task_id)).first()
                if row is not None and row.purged_before_window >= w:
                    continue
                old_batches = select(analyzer_batches.c.batch_id).where(
                    analyzer_batches.c.task_id == task_id, analyzer_batches.c.window < w)
                n = c.execute(analyzer_report_ids.delete().where(
                    analyzer_report_ids.c.task_id == task_id,
                    analyzer_report_ids.c.batch_id.in_(old_batches.scalar_subquery()))).rowcount or 0
                if row is None:
                    c.execute(analyzer_retention.insert().values(task_id=task_id, purged_before_window=w,
                                                                 report_ids_deleted=n))
                else:
                    c.execute(update(analyzer_retention).where(analyzer_retention.c.task_id == task_id).values(
                        purged_before_window=w, report_ids_deleted=analyzer_retention.c.report_ids_deleted + n))
            out[task_id.hex()] = {"purged_before_window": w, "report_ids_deleted": int(n)}
        return {"tasks": out}

    def start(self) -> None:
        self._retention.start()

    def stop(self) -> None:
        self._retention.stop()


def _statement_json(st: PrivacyStatement) -> dict:
    d = st.to_dict()
    d["text"] = str(st)
    if math.isinf(d["eps"]):
        d["eps"] = None  # JSON has no infinity; null = no guarantee
    return d


def client_windows(cfg: TaskConfig, times: np.ndarray) -> np.ndarray:
    """Client-clock window of each report time (``time`` is in ``time_precision`` units).

    ``batch_window`` is a multiple of ``time_precision``, so this is exactly the SDK's
    ``int(now) // batch_window``, the window its per-window cap counts in.
    """
    return np.asarray(times, dtype=np.int64) // (cfg.batch_window // cfg.time_precision)


def group_statement(st: PrivacyStatement, c: int, why: str, eps_local: float = math.inf) -> PrivacyStatement:
    """Group privacy of a per-report statement over ``c`` reports of one user in the same release.

    ``(c eps, c e^{(c-1) eps} delta)`` from ``shuffledp.accounting.group_privacy`` (log space: no
    overflow for any ``c``); ``c = 0`` (no valid report) keeps the per-report statement. When that
    delta is >= 1 the amplified bound says nothing; every report is also ``eps_local``-LDP (the
    batch is a post-processing of the reports), so the statement is then the pure group bound of
    the local guarantee, ``(c eps_local, 0)`` (no guarantee when ``eps_local`` is infinite).
    """
    if c <= 1 or math.isinf(st.eps):
        return st
    g = group_bound(st.eps, st.delta, c)
    if g is not None:
        return PrivacyStatement(g[0], g[1], st.model, st.neighbouring, gamma=st.gamma,
                                note=f"group privacy over {c} report(s) per user ({why}); per report: {st.note}")
    note = (f"group privacy over {c} report(s) per user ({why}): the amplified bound is vacuous (delta >= 1), "
            f"local guarantee eps0={eps_local:g} per report")
    if not math.isfinite(eps_local):
        return PrivacyStatement(math.inf, 0.0, "local", note=note)
    g = group_bound(eps_local, 0.0, c)
    assert g is not None  # pure DP: delta stays 0
    return PrivacyStatement(g[0], 0.0, "local", "replace_one", note=note)


def _ledger_windows(cfg: TaskConfig, r: Any) -> list[int]:
    """The client windows a ledger row's valid reports may come from.

    Rows written before migration 0003 have none recorded: then every client window the batch's
    accepted time range allows (``ingest_batch``'s ``lo``..``hi``) is assumed (never an undercount).
    """
    cw = getattr(r, "client_windows", None)
    if cw is not None:
        return [int(w) for w in json.loads(cw)]
    if r.n_valid == 0:
        return []
    lo, hi = client_windows(cfg, np.array(accepted_time_range(cfg, r.window)))
    return list(range(int(lo), int(hi) + 1))


def accepted_time_range(cfg: TaskConfig, window: int) -> tuple[int, int]:
    """Client times (in ``time_precision`` units) a batch labelled ``window`` may hold: its window
    and the ``max_wait_windows`` before it, widened by the tolerable clock skew."""
    tp, bw = cfg.time_precision, cfg.batch_window
    return (((window - cfg.max_wait_windows) * bw - cfg.tolerable_clock_skew) // tp,
            ((window + 1) * bw + cfg.tolerable_clock_skew) // tp)


def _validate_rows(mech: Any, reports: dict[str, np.ndarray]) -> np.ndarray:
    """Boolean mask of reports that pass ``mechanism.validate_reports`` (vectorized, bisect on failure)."""
    n = next(iter(reports.values())).shape[0] if reports else 0
    ok = np.ones(n, dtype=bool)

    def rec(lo: int, hi: int) -> None:
        if lo >= hi:
            return
        try:
            mech.validate_reports(take_reports(reports, slice(lo, hi)))
        except (ValidationError, ValueError, TypeError):
            if hi - lo == 1:
                ok[lo] = False
                return
            mid = (lo + hi) // 2
            rec(lo, mid)
            rec(mid, hi)

    rec(0, n)
    return ok


def ingest_batch(state: AnalyzerState, task_id: bytes, bid: bytes, body: bytes) -> dict:
    """Process one batch PUT (after authentication). Returns the stored/new result dict."""
    try:
        b = decode_batch(body)
    except DecodeError as e:
        raise Problem(400, "invalidMessage", str(e), task_id) from e
    if b.task_id != task_id:
        raise Problem(400, "batchMismatch", "task id in body differs from the URL", task_id)
    if batch_id(b.task_id, b.crowd_id, b.window, b.envelopes, b.shuffler, b.n_users) != bid:
        raise Problem(400, "batchMismatch", "batch id does not match the body's content digest", task_id)
    cfg = state.task(task_id)
    with state.engine.connect() as c:
        prev = c.execute(select(analyzer_batches.c.result).where(analyzer_batches.c.batch_id == bid)).first()
    if prev is not None:
        return json.loads(prev[0])
    if b.crowd_id not in cfg.crowds:
        raise Problem(400, "invalidMessage", "crowd not allowed for this task", task_id)
    if (cfg.protocol is None) != (b.n_users is None):
        raise Problem(400, "invalidMessage", "a protocol task takes SDB2 batches (shuffler index and user count), "
                      "a local-oracle task SDB1 batches", task_id)
    if cfg.protocol is not None:
        return ingest_protocol_batch(state, cfg, bid, b)
    if len(b.envelopes) < cfg.min_batch_size:
        raise Problem(400, "insufficientReports", f"batch has {len(b.envelopes)} reports, the task's minimum "
                      f"batch size is {cfg.min_batch_size}", task_id)

    # decrypt outside any transaction (CPU-bound); one HPKE context per report, the report-independent
    # parts computed once per batch (wire.open_reports)
    reports, ids, times, counts = _open_batch(state, cfg, b)
    mech = cfg.mechanism_object(shared=True)
    valid = _check_messages(cfg, b.window, mech, reports, ids, times, counts)

    with state.write_lock, state.engine.begin() as c:
        if c.execute(select(analyzer_batches.c.result).where(analyzer_batches.c.batch_id == bid)).first():
            # raced with an identical PUT that committed first
            return json.loads(c.execute(select(analyzer_batches.c.result)
                                        .where(analyzer_batches.c.batch_id == bid)).scalar_one())
        # replay rows of purged batches are gone: reports that could belong to them are refused
        cand = _unreplayed(c, cfg, bid, ids, times, valid, counts)
        n_valid = int(len(cand))
        if n_valid:
            _merge_statistic(c, task_id, b.window, b.crowd_id, np.asarray(mech.aggregate(take_reports(reports, cand))),
                             n_valid)
        # privacy: only VALID reports hide anyone (garbage, replays and out-of-window envelopes do
        # not); below min_batch_size the batch is still aggregated (it was acknowledged) but only
        # the local guarantee is claimed. A client may have up to k reports per client window in
        # this batch, for every client window its valid reports come from (report times are inside
        # the HPKE ciphertext: authenticated, and the clock the SDK's per-window cap counts with).
        st, _method = cfg.batch_privacy(n_valid)
        cw = np.unique(client_windows(cfg, times[cand])).tolist()
        group = cfg.client_policy.max_reports_per_window * len(cw)
        st_group = group_statement(st, group, f"{cfg.client_policy.max_reports_per_window} report(s)/window x "
                                              f"{len(cw)} client window(s) in this batch", cfg.eps_local)
        result = {"batch_id": bid.hex(), "received": len(b.envelopes), "valid": n_valid, "rejected": counts,
                  "client_windows": cw, "privacy_statement": _statement_json(st_group),
                  "privacy_statement_per_report": _statement_json(st)}
        c.execute(analyzer_ledger.insert().values(
            batch_id=bid, task_id=task_id, window=b.window, crowd_id=b.crowd_id, n_released=len(b.envelopes),
            n_valid=n_valid, eps_local=cfg.eps_local if math.isfinite(cfg.eps_local) else -1.0,
            eps_central=st.eps if math.isfinite(st.eps) else -1.0, delta=st.delta, statement=str(st_group),
            client_windows=json.dumps(cw)))
        c.execute(analyzer_batches.insert().values(
            batch_id=bid, task_id=task_id, crowd_id=b.crowd_id, window=b.window, n_received=len(b.envelopes),
            n_valid=n_valid, result=json.dumps(result)))
    return result


def _open_batch(state: AnalyzerState, cfg: TaskConfig, b: Any) -> tuple[dict, np.ndarray, np.ndarray, dict]:
    """Decrypt and decode a batch's envelopes: (fields, message ids, times, rejection counts)."""
    L = cfg.report_schema.length
    counts = {"decrypt_error": 0, "decode_error": 0, "replayed": 0, "out_of_window": 0, "invalid_value": 0,
              "expired": 0}
    opened, n_dec, n_fmt = open_reports(b.envelopes, state.private_keys, cfg.task_id, cfg.digest, b.crowd_id)
    counts["decrypt_error"] += n_dec
    counts["decode_error"] += n_fmt
    pts = [pt for pt in opened if pt is not None]
    if any(len(pt) != L for pt in pts):
        counts["decode_error"] += sum(len(pt) != L for pt in pts)
        pts = [pt for pt in pts if len(pt) == L]
    rows = np.frombuffer(b"".join(pts), dtype=np.uint8).reshape(len(pts), L)
    version_ok = rows[:, 0] == 1 if len(pts) else np.zeros(0, bool)
    counts["decode_error"] += int((~version_ok).sum())
    fields, ids, times = cfg.report_schema.decode(rows[version_ok])
    return fields, ids, times, counts


def _check_messages(cfg: TaskConfig, window: int, validator: Any, fields: dict, ids: np.ndarray, times: np.ndarray,
                    counts: dict) -> np.ndarray:
    """Mask of the messages a batch labelled ``window`` may hold: client time in the windows the
    batch may cover, value accepted by ``validator.validate_reports``, first copy of an id within
    the batch (rejections counted in ``counts``)."""
    lo, hi = accepted_time_range(cfg, window)
    in_win = (times >= lo) & (times <= hi)
    counts["out_of_window"] = int((~in_win).sum())
    value_ok = _validate_rows(validator, fields)
    valid = value_ok & in_win
    counts["invalid_value"] = int((~value_ok & in_win).sum())
    id_view = np.ascontiguousarray(ids).view("V16").reshape(-1)
    _, first = np.unique(id_view, return_index=True)
    uniq = np.zeros(len(id_view), bool)
    uniq[first] = True
    counts["replayed"] += int((valid & ~uniq).sum())
    return valid & uniq


class _AggregateValidator:
    """A protocol's ``aggregate`` as the row validator of :func:`_validate_rows` (it refuses a
    batch holding any message outside the protocol's message space)."""

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol

    def validate_reports(self, messages: dict) -> None:
        self.protocol.aggregate(messages)


def protocol_statement(cfg: TaskConfig, p: Any, n_users: int, n_bad: int) -> PrivacyStatement:
    """The guarantee of one release of protocol ``p`` that ``n_users`` users sent.

    Envelopes that failed a check (``n_bad``) may each have been some user's only message, so
    ``n_users - n_bad`` users at least hide every user, and a ``honest_fraction`` of them is
    trusted: ``p.privacy(floor((n_users - n_bad) * honest_fraction))``. Where the protocol states
    nothing for so few users (or none are left), or where its clients re-send memoized messages
    (:attr:`TaskConfig.reports_repeat`), the local guarantee of its randomizer is stated (no
    guarantee without one). Local- and central-model guarantees do not depend on n.
    """
    n_eff = int(math.floor(max(0, n_users - n_bad) * cfg.honest_fraction))
    if p.model != "shuffle":
        return p.privacy(max(1, n_eff))
    if not cfg.reports_repeat and n_eff >= 1:   # re-sent memoized messages: batches can be differenced
        try:
            return p.privacy(n_eff)
        except (ValidationError, ValueError, ArithmeticError):
            pass
    why = (f"{p.name}: memoized messages repeat across batches (batches can be differenced)" if cfg.reports_repeat
           else f"{p.name} states no shuffle guarantee for {n_eff} user(s) (of {n_users}, {n_bad} bad envelope(s))")
    if math.isfinite(cfg.eps_local):
        return PrivacyStatement(cfg.eps_local, 0.0, "local", "replace_one", note=why + "; local guarantee only")
    return PrivacyStatement(math.inf, 0.0, "local", note=why + "; no local randomizer: no guarantee")


def ingest_protocol_batch(state: AnalyzerState, cfg: TaskConfig, bid: bytes, b: Any) -> dict:
    """Ingest one SDB2 batch of a protocol task: open, check, ``protocol.aggregate``, store.

    The steps of :func:`ingest_batch` (decrypt outside the transaction; replay, retention and the
    statistic's merge in one transaction), with the protocol in place of a local oracle: the
    statistic is ``protocol.aggregate`` of the valid messages (with the ``"shuffler"`` column set
    to the forwarding shuffler for a multi-shuffler protocol), the window's user count grows by
    the batch's ``n_users``, and the ledger records the shuffler and its users.
    """
    p = cfg.protocol_object()
    task_id = cfg.task_id
    if not 0 <= b.shuffler < p.n_shufflers:
        raise Problem(400, "invalidMessage", f"shuffler index {b.shuffler} is not in [0, {p.n_shufflers})", task_id)
    if b.n_users < cfg.min_batch_size:
        raise Problem(400, "insufficientReports", f"batch holds {b.n_users} users, the task's minimum batch size is "
                      f"{cfg.min_batch_size}", task_id)
    fields, ids, times, counts = _open_batch(state, cfg, b)
    if p.n_shufflers > 1:
        fields["shuffler"] = np.full(ids.shape[0], b.shuffler, dtype=np.int64)
    valid = _check_messages(cfg, b.window, _AggregateValidator(p), fields, ids, times, counts)
    with state.write_lock, state.engine.begin() as c:
        prev = c.execute(select(analyzer_batches.c.result).where(analyzer_batches.c.batch_id == bid)).first()
        if prev is not None:   # raced with an identical PUT that committed first
            return json.loads(prev[0])
        cand = _unreplayed(c, cfg, bid, ids, times, valid, counts)
        n_valid = int(len(cand))
        stat = np.asarray(p.aggregate(take_reports(fields, cand)))
        _merge_statistic(c, task_id, b.window, b.crowd_id, stat, int(b.n_users))
        n_bad = len(b.envelopes) - n_valid
        if state.export_dir and p.model != "central":
            # before the commit: an acknowledged batch is always in the archive. A central-model
            # protocol's messages are the curator's raw input: never written out
            export_batch(state.export_dir, cfg, bid, b, take_reports(fields, cand))
        st = protocol_statement(cfg, p, int(b.n_users), n_bad)
        cw = np.unique(client_windows(cfg, times[cand])).tolist()
        result = {"batch_id": bid.hex(), "received": len(b.envelopes), "valid": n_valid, "rejected": counts,
                  "users": int(b.n_users), "shuffler": int(b.shuffler), "client_windows": cw,
                  "privacy_statement_batch": _statement_json(st)}
        c.execute(analyzer_ledger.insert().values(
            batch_id=bid, task_id=task_id, window=b.window, crowd_id=b.crowd_id, n_released=len(b.envelopes),
            n_valid=n_valid, eps_local=cfg.eps_local if math.isfinite(cfg.eps_local) else -1.0,
            eps_central=st.eps if math.isfinite(st.eps) else -1.0, delta=st.delta, statement=str(st),
            client_windows=json.dumps(cw), n_users=int(b.n_users), shuffler=int(b.shuffler)))
        c.execute(analyzer_batches.insert().values(
            batch_id=bid, task_id=task_id, crowd_id=b.crowd_id, window=b.window, n_received=len(b.envelopes),
            n_valid=n_valid, result=json.dumps(result)))
    return result


def export_batch(root: str, cfg: TaskConfig, bid: bytes, b: Any, messages: dict) -> str:
    """Write one accepted batch's valid messages to the report archive under ``root``.

    Layout: ``<root>/<task id>/w<window>-c<crowd>-b<batch id prefix>/part-00000.parquet`` for a
    single-shuffler protocol (each batch a complete archive), and
    ``<root>/<task id>/w<window>-c<crowd>/part-<shuffler>.parquet`` for a multi-shuffler one (the
    window's release is complete when every shuffler's part is there). Written under a temporary
    name and renamed (see :func:`shuffledp.engines.archive.export_release_part`), inside the
    ingest transaction: a failure refuses the batch (500; the shuffler retries), so every
    acknowledged batch is archived, and a retried batch rewrites the same file. Returns the path.
    Central-model tasks (``cdp_*``) are not exported: their messages are the curator's raw input.
    """
    from pathlib import Path

    from ..engines.archive import export_release_part
    p = cfg.protocol_object()
    crowd = b.crowd_id.hex() or "all"
    base = Path(root) / cfg.task_id.hex()
    if p.n_shufflers > 1:
        out, part, parts = base / f"w{b.window}-c{crowd}", int(b.shuffler), p.n_shufflers
    else:
        out, part, parts = base / f"w{b.window}-c{crowd}-b{bid.hex()[:16]}", 0, 1
    # ``messages`` carries the "shuffler" column exactly when the protocol has several shufflers
    return str(export_release_part(out, spec=cfg.protocol, task=cfg.task_id.hex(), messages=messages,
                                   users=int(b.n_users), part=part, parts=parts))


def _unreplayed(c: Any, cfg: TaskConfig, bid: bytes, ids: np.ndarray, times: np.ndarray, valid: np.ndarray,
                counts: dict) -> np.ndarray:
    """Indices of the valid messages that are neither expired nor replayed; records their ids.

    Inside the ingest transaction: messages whose time could belong to a batch past retention are
    refused (``expired``), ids already stored are replays; the rest's ids are stored.
    """
    wm = c.execute(select(analyzer_retention.c.purged_before_window).where(
        analyzer_retention.c.task_id == cfg.task_id)).scalar()
    if wm is not None:
        too_old = valid & (times <= refused_time_limit(cfg, int(wm)))
        counts["expired"] = int(too_old.sum())
        valid = valid & ~too_old
    cand = np.flatnonzero(valid)
    seen = existing_report_ids(c, cfg.task_id, np.ascontiguousarray(ids[cand]).tobytes())
    if seen:
        keep = np.array([bytes(ids[i]) not in seen for i in cand], dtype=bool)
        counts["replayed"] += int((~keep).sum())
        cand = cand[keep]
    insert_report_ids(c, cfg.task_id, bid, np.ascontiguousarray(ids[cand]).tobytes())
    return cand


def _merge_statistic(c: Any, task_id: bytes, window: int, crowd: bytes, stat: np.ndarray, n: int) -> None:
    """Add a batch's statistic (and its ``n``) to its (window, crowd) aggregate: statistics are mergeable."""
    row = c.execute(select(analyzer_aggregates).where(
        analyzer_aggregates.c.task_id == task_id, analyzer_aggregates.c.window == window,
        analyzer_aggregates.c.crowd_id == crowd)).first()
    if row is None:
        c.execute(analyzer_aggregates.insert().values(
            task_id=task_id, window=window, crowd_id=crowd, statistic=stat.tobytes(),
            dtype=stat.dtype.str, shape=json.dumps(list(stat.shape)), n=n))
    else:
        old = np.frombuffer(row.statistic, dtype=row.dtype).reshape(json.loads(row.shape))
        new = old + stat
        c.execute(update(analyzer_aggregates).where(
            analyzer_aggregates.c.task_id == task_id, analyzer_aggregates.c.window == window,
            analyzer_aggregates.c.crowd_id == crowd).values(
            statistic=new.tobytes(), dtype=new.dtype.str, shape=json.dumps(list(new.shape)), n=row.n + n))


def compose_over_client_windows(cfg: TaskConfig, releases: list[tuple[list[int], float, float]],
                                unit: str) -> tuple[PrivacyStatement, dict[int, float]]:
    """The guarantee of everything released from ``releases``: ``(client windows, eps, delta)`` each.

    A ``unit`` of release is a batch (local-oracle tasks: each batch is amplified on its own) or a
    window's release (protocol tasks: all shufflers' batches of one window together). Returns the
    statement and the weakest eps per client window.
    """
    # privacy (see docs/services.md, "Privacy statements"): a client sends at most k reports per
    # client window; each report lies in one batch b (holding reports of the client windows W_b),
    # so a user has c_b <= min(k |W_b|, K) reports in b, K = k |W| over all client windows W.
    # Group privacy per batch + basic composition over batches:
    #   eps   = sum_b c_b eps_b <= k * sum_w eps_w   (eps_w: weakest batch holding reports of w,
    #                                                 whatever its label or crowd)
    #   delta = sum_b c_b e^{(c_b-1) eps_b} delta_b <= K * max_b e^{(min(k|W_b|, K)-1) eps_b} delta_b
    # (sum_b c_b <= K); computed in log space with accounting.group_privacy_log_delta. When that delta
    # is >= 1, the pure bound of the local guarantee, (K eps0, 0), is stated instead.
    k = cfg.client_policy.max_reports_per_window
    per_cw: dict[int, float] = {}
    spans: list[tuple[int, float, float]] = []
    for ws, e, d in releases:
        if ws:
            spans.append((len(ws), e, d))
        for w in ws:
            per_cw[w] = max(per_cw.get(w, 0.0), e)
    n_reports = k * len(per_cw)
    eps_tot = k * math.fsum(per_cw.values())
    log_delta = -math.inf
    if math.isfinite(eps_tot):
        for nw, e, d in spans:
            if d > 0:
                c = min(k * nw, n_reports)
                log_delta = max(log_delta, group_log_delta(e, d, c) - math.log(c))
        log_delta += math.log(n_reports) if n_reports else 0.0
    if math.isinf(eps_tot):
        st = PrivacyStatement(math.inf, 0.0, "local", note="test mechanism: no privacy")
    elif log_delta >= 0:
        g = group_bound(cfg.eps_local, 0.0, n_reports)
        st = PrivacyStatement(g[0] if g else math.inf, 0.0, "local", "replace_one",
                              note=f"{len(per_cw)} client window(s) x {k} report(s)/window: the amplified bound "
                                   f"is vacuous (delta >= 1); pure group bound of the local guarantee "
                                   f"eps0={cfg.eps_local:g} over {n_reports} report(s)")
    else:
        delta_tot = math.exp(log_delta)  # 0.0 for -inf (no batch has delta > 0)
        model = "shuffle" if delta_tot > 0 else "local"
        st = PrivacyStatement(eps_tot, delta_tot, model, "replace_one",
                              gamma=cfg.honest_fraction if model == "shuffle" else 1.0,
                              note=f"{len(per_cw)} client window(s) x {k} report(s)/window: group privacy per "
                                   f"{unit} + basic composition over {unit}{'es' if unit.endswith('ch') else 's'} (weakest {unit} "
                                   f"per client window); "
                                   f"eps0={cfg.eps_local:g}")
    return st, per_cw


def protocol_estimates(cfg: TaskConfig, rows: list, ledger: list, level: float) -> dict:
    """Estimates of a protocol task: one release per (window, crowd), summed over releases.

    A window's release is every shuffler's batch of that window: its users are
    ``protocol.count_users`` of the users each shuffler delivered, its estimate
    ``protocol.estimate(statistic, n_w)`` and its guarantee :func:`protocol_statement`. Releases
    are independent runs of the protocol on different users' reports, so their estimated totals
    add (variances add) and their guarantees compose over client windows
    (:func:`compose_over_client_windows`). A multi-shuffler window is used only once every shuffler
    has delivered its batch (the protocol's estimate assumes all of them, e.g. all of MURS's fakes);
    until then it is listed in ``waiting``.
    """
    p = cfg.protocol_object()
    by_key: dict[tuple[int, bytes], list] = {}
    for r in ledger:
        by_key.setdefault((int(r.window), bytes(r.crowd_id)), []).append(r)
    values = var = pooled = None
    labels: tuple | None = None
    kind, n_total, releases, items, waiting = "count", 0, [], [], []
    models: set[str] = set()
    for r in sorted(rows, key=lambda r: (int(r.window), bytes(r.crowd_id))):
        key = (int(r.window), bytes(r.crowd_id))
        parts = by_key.get(key, [])
        users = np.zeros(p.n_shufflers, dtype=np.int64)
        for b in parts:
            users[int(b.shuffler or 0)] += int(b.n_users or 0)
        present = sorted({int(b.shuffler or 0) for b in parts})
        n_w = p.count_users(users)
        info = {"window": key[0], "crowd": key[1].hex(), "users": n_w, "users_per_shuffler": users.tolist(),
                "shufflers_delivered": present}
        if len(present) < p.n_shufflers or n_w < 1:
            waiting.append(info)
            continue
        stat = np.frombuffer(r.statistic, dtype=r.dtype).reshape(json.loads(r.shape))
        est = p.estimate(stat, n_w)
        n_bad = int(sum(int(b.n_released) - int(b.n_valid) for b in parts))
        st = single = protocol_statement(cfg, p, n_w, n_bad)
        models.add(st.model)
        cws = sorted({w for b in parts for w in _ledger_windows(cfg, b)})
        items.append((cws, st.eps, st.delta))
        info["privacy_statement"] = _statement_json(st)
        releases.append(info)
        kind, n_total, labels = est.kind, n_total + n_w, est.labels
        if labels is None:
            v, se = np.asarray(est.values, dtype=np.float64), np.asarray(est.stderr, dtype=np.float64)
            values = v.copy() if values is None else values + v
            var = se**2 if var is None else var + se**2
        else:   # a discovery: its releases' statistics are pooled (below)
            pooled = stat.astype(np.int64) if pooled is None else pooled + stat
    if labels is not None and releases:
        # a discovery (heavy hitters): the items found differ between releases, so totals cannot be
        # added position by position; the releases' statistics add (one local randomizer, no fakes)
        # and the items are found once on all of them
        from ..shuffle.base import Protocol
        if type(p).shuffler_messages is not Protocol.shuffler_messages:
            raise Problem(500, "internal", f"{p.name}: cannot combine discoveries from releases with fakes",
                          cfg.task_id)
        est = p.estimate(pooled, n_total)
        values, var, labels = np.asarray(est.values, dtype=np.float64), np.asarray(est.stderr) ** 2, est.labels
    if values is None:
        raise Problem(404, "noData", f"no complete release yet: {len(waiting)} window(s) wait for shufflers "
                      f"{sorted(set(range(p.n_shufflers)) - set(waiting[0]['shufflers_delivered'])) if waiting else []}",
                      cfg.task_id)
    st, per_cw = compose_over_client_windows(cfg, items, "release")
    k = cfg.client_policy.max_reports_per_window
    if len(releases) == 1 and k * len(items[0][0]) <= 1:
        st = single   # one release, one report per user in it: exactly protocol.privacy(n)
    elif len(models) == 1 and math.isfinite(st.eps) and "vacuous" not in st.note:
        st = dataclasses.replace(st, model=models.pop())   # e.g. "central" for a cdp_* protocol
    est = Estimate(values, np.sqrt(var), n_total, st, kind, labels=labels)
    lo, hi = est.ci(level)
    meets = bool(len(releases) == 1 and st.eps <= p.epsilon and st.delta <= p.delta)
    return {"task_id": cfg.task_id.hex(), "protocol": cfg.protocol, "n": n_total, "kind": est.kind,
            **({"labels": [_json_label(x) for x in labels]} if labels is not None else {}),
            "estimate": est.values.tolist(), "std_error": est.stderr.tolist(), "ci_level": level,
            "ci_low": lo.tolist(), "ci_high": hi.tolist(), "privacy_statement": _statement_json(st),
            "meets_target": meets, "windows": sorted({r["window"] for r in releases}),
            "client_windows": sorted(per_cw), "batches": len(ledger), "releases": releases, "waiting": waiting}


def _json_label(x: Any) -> Any:
    """An estimate's item label as JSON: numpy scalars become Python numbers, words stay strings."""
    return x.item() if isinstance(x, np.generic) else x


def estimates(state: AnalyzerState, task_id: bytes, crowd: bytes | None = None, from_window: int | None = None,
              to_window: int | None = None, level: float = 0.95) -> dict:
    """Merged estimate over windows/crowds with its privacy statement (composition over windows)."""
    cfg = state.task(task_id)
    q = select(analyzer_aggregates).where(analyzer_aggregates.c.task_id == task_id)
    lq = select(analyzer_ledger).where(analyzer_ledger.c.task_id == task_id)
    if crowd is not None:
        q, lq = q.where(analyzer_aggregates.c.crowd_id == crowd), lq.where(analyzer_ledger.c.crowd_id == crowd)
    if from_window is not None:
        q, lq = q.where(analyzer_aggregates.c.window >= from_window), lq.where(analyzer_ledger.c.window >= from_window)
    if to_window is not None:
        q, lq = q.where(analyzer_aggregates.c.window <= to_window), lq.where(analyzer_ledger.c.window <= to_window)
    with state.engine.connect() as c:
        rows = c.execute(q).all()
        ledger = c.execute(lq).all()
    if not rows:
        raise Problem(404, "noData", "no aggregated reports for this selection", task_id)
    if cfg.protocol is not None:
        return protocol_estimates(cfg, rows, ledger, level)
    stat = sum(np.frombuffer(r.statistic, dtype=r.dtype).reshape(json.loads(r.shape)) for r in rows)
    n = int(sum(r.n for r in rows))
    mech = cfg.mechanism_object(shared=True)
    est = mech.estimate(stat, n)
    st, per_cw = compose_over_client_windows(
        cfg, [(_ledger_windows(cfg, r), math.inf if r.eps_central < 0 else r.eps_central, r.delta) for r in ledger],
        "batch")
    out = {"task_id": task_id.hex(), "n": n, "windows": sorted({int(r.window) for r in rows}),
           "client_windows": sorted(per_cw), "batches": len(ledger)}
    if cfg.central_mode:
        out.update(_central_release(state, cfg, stat, n, max_reports_per_user(cfg, sorted(per_cw))))
        out["privacy_statement_shuffle"] = _statement_json(st)
        return out
    lo, hi = est.ci(level)
    out.update({"kind": est.kind, "estimate": est.values.tolist(), "std_error": est.stderr.tolist(),
                "ci_level": level, "ci_low": lo.tolist(), "ci_high": hi.tolist(),
                "privacy_statement": _statement_json(st)})
    return out


def max_reports_per_user(cfg: TaskConfig, windows: list[int]) -> int:
    """Most reports one client may have among reports from the given client windows (its policy).

    ``k = max_reports_per_window`` per window and ``max_reports_per_day`` per UTC day (the SDK's
    ledger periods): ``min(k * |windows|, day cap * |days the windows touch|)``, at least 1.
    """
    pol, bw = cfg.client_policy, cfg.batch_window
    if not windows:
        return 1
    days = set()
    for w in windows:
        days.update(range((w * bw) // 86400, ((w + 1) * bw - 1) // 86400 + 1))
    return max(1, min(pol.max_reports_per_window * len(windows), pol.max_reports_per_day * len(days)))


def _central_release(state: AnalyzerState, cfg: TaskConfig, stat: np.ndarray, n: int, m: int) -> dict:
    """Central mode: exact discrete-Laplace noise on the histogram counts; query budget enforced.

    Replace-one neighbouring of USERS: a user has at most ``m`` reports over the queried client
    windows (``max_reports_per_user``, from the task's client policy); replacing them changes at
    most ``2m`` counts by one each: L1 sensitivity ``2m`` (stated in the answer). Each query spends
    ``eps_per_query`` (basic composition); the debit is committed before the answer is returned,
    and a query that would exceed ``query_budget_eps`` is refused (403 budgetExhausted).
    """
    try:
        from ..central import DiscreteLaplaceMechanism  # type: ignore[attr-defined]
    except ImportError as e:
        raise Problem(501, "notReady", "central mode needs shuffledp.central (exact discrete Laplace)") from e
    import secrets as _secrets
    eps_q = float(cfg.central_mode["eps_per_query"])
    budget = float(cfg.central_mode["query_budget_eps"])
    sens = 2 * int(m)
    mech = DiscreteLaplaceMechanism(eps_q, sensitivity=sens, neighbouring="replace_one")
    with state.write_lock, state.engine.begin() as c:
        # the write lock serializes this process only: lock the task's row so that another analyzer
        # process on the same PostgreSQL database waits here and then reads the total this debit adds
        # to (SQLite: BEGIN IMMEDIATE already serializes writers; FOR UPDATE is omitted there)
        c.execute(select(analyzer_tasks.c.task_id).where(analyzer_tasks.c.task_id == cfg.task_id).with_for_update())
        spent = float(c.execute(select(func.coalesce(func.sum(analyzer_queries.c.eps), 0.0)).where(
            analyzer_queries.c.task_id == cfg.task_id)).scalar_one())
        if spent + eps_q > budget * (1 + 1e-12):
            raise Problem(403, "budgetExhausted", f"query budget exhausted: spent {spent:g} of {budget:g}, a query "
                          f"costs {eps_q:g}", cfg.task_id)
        noisy = np.asarray(mech.release(np.asarray(stat, dtype=np.int64)), dtype=np.int64)
        sd = math.sqrt(mech.variance())
        est = noisy / max(n, 1)
        se = np.full(est.shape, sd / max(n, 1))
        st = PrivacyStatement(eps_q, 0.0, "central", "replace_one",
                              note=f"discrete Laplace on histogram counts (L1 sensitivity {sens} = 2 x {m} "
                                   f"report(s) per user at most over the queried windows, client policy); budget "
                                   f"{spent + eps_q:g}/{budget:g} spent after this query")
        out = {"kind": "frequency", "noisy_counts": noisy.tolist(), "estimate": est.tolist(),
               "std_error": se.tolist(), "ci_level": 0.95, "ci_low": (est - 1.959963984540054 * se).tolist(),
               "ci_high": (est + 1.959963984540054 * se).tolist(), "privacy_statement": _statement_json(st),
               "sensitivity": sens, "max_reports_per_user": int(m),
               "budget": {"spent": spent + eps_q, "total": budget}}
        c.execute(analyzer_queries.insert().values(query_id=_secrets.token_bytes(16), task_id=cfg.task_id, eps=eps_q,
                                                   result=json.dumps(out)))
    return out


def _non_finite_path(obj: Any, path: str = "") -> str | None:
    """Dotted path of the first NaN/Infinity in parsed JSON (Python's json accepts them), or None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return path or "body"
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list):
        items = ((f"[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for key, v in items:
        sub = f"{path}{key}" if str(key).startswith("[") else (f"{path}.{key}" if path else str(key))
        found = _non_finite_path(v, sub)
        if found is not None:
            return found
    return None


def create_task_from_body(state: AnalyzerState, body: bytes) -> dict:
    """``POST /v1/tasks`` after authentication: parse, validate (422 naming the field), store."""
    try:
        spec = json.loads(body)
        if not isinstance(spec, dict):
            raise ValueError("body must be a JSON object")
        bad = _non_finite_path(spec)
    except (ValueError, RecursionError) as e:
        raise Problem(400, "invalidRequest", f"body is not a JSON object: {type(e).__name__}") from e
    unknown = sorted(set(spec) - TASK_FIELDS)
    if unknown:
        raise Problem(422, "invalidRequest", f"unknown task field(s) {unknown}: the fields are "
                      f"{sorted(TASK_FIELDS)} (the analyzer chooses task_id)")
    if bad is not None:
        raise Problem(422, "invalidRequest", f"{bad} must be a finite number (NaN/Infinity are not JSON)")
    if "crowds" in spec:
        if not isinstance(spec["crowds"], list) or not all(isinstance(c, str) for c in spec["crowds"]):
            raise Problem(422, "invalidRequest", "crowds must be a list of hex strings")
        try:
            spec["crowds"] = [bytes.fromhex(c) for c in spec["crowds"]]
        except ValueError as e:
            raise Problem(422, "invalidRequest", "crowds must be a list of hex strings") from e
    try:
        cfg = create_task_config(**spec, min_time_precision=state.min_time_precision)
    except TypeError as e:
        raise Problem(422, "invalidRequest", f"missing task fields (name, and protocol or mechanism with "
                      f"target_central, are required): {type(e).__name__}") from e
    except ValueError as e:  # ValidationError: names the parameter
        raise Problem(422, "invalidRequest", str(e)) from e
    state.add_task(cfg)
    return {"task_id": cfg.task_id.hex(), "config": cfg.to_json(), "config_digest": cfg.digest.hex()}


def create_analyzer_app(state: AnalyzerState) -> FastAPI:
    """The analyzer's HTTP app: keys (public), tasks (admin), batches and shuffler health (signed
    by a shuffler), estimates and statistics (collector), the dashboard."""
    app = service_app("shuffledp analyzer", state, "analyzer")
    _install_key_routes(app, state)
    _install_task_routes(app, state)
    _install_shuffler_routes(app, state)
    _install_collector_routes(app, state)
    install_dashboard(app, state)
    return app


def _install_key_routes(app: FastAPI, state: AnalyzerState) -> None:
    @app.get("/healthz")
    def healthz() -> dict:
        return {"ok": True}

    @app.get("/v1/hpke-keys")
    def keys() -> Response:
        return Response(encode_key_list(state.public_configs), media_type="application/ohttp-keys",
                        headers={"Cache-Control": "max-age=86400"})

    @app.get("/v1/hpke-key-ids")
    def key_ids() -> dict:
        """Key ids the analyzer still decrypts (active + expired-not-deleted): the shuffler mirrors these."""
        return {"active": [k.key_id for k in state.public_configs], "accepting": sorted(state.private_keys)}

    @app.post("/v1/admin/keys:rotate")
    def rotate(request: Request) -> dict:
        check_bearer(state.admin_token, request.headers.get("authorization"))
        return {"active_key_id": state.rotate_key()}


def _install_task_routes(app: FastAPI, state: AnalyzerState) -> None:
    @app.post("/v1/admin/retention")
    def admin_retention(request: Request) -> dict:
        check_bearer(state.admin_token, request.headers.get("authorization"))
        return state.enforce_retention()

    @app.post("/v1/tasks")
    async def create_task(request: Request) -> dict:
        check_bearer(state.admin_token, request.headers.get("authorization"))
        body = await read_body(request, MAX_TASK_BODY, too_large="invalidRequest")
        return create_task_from_body(state, body)

    @app.get("/v1/tasks/{task_hex}/config")
    def get_config(task_hex: str) -> dict:
        cfg = state.task(task_id_from_hex(task_hex))
        return {"config": cfg.to_json(), "config_digest": cfg.digest.hex()}


def _install_shuffler_routes(app: FastAPI, state: AnalyzerState) -> None:
    @app.put("/v1/tasks/{task_hex}/batches/{batch_hex}")
    async def put_batch(task_hex: str, batch_hex: str, request: Request) -> dict:
        # authenticated from the header (401) and size-checked (413) before any body byte is read
        body = await read_signed_body(request, state.peer_secret, MAX_BATCH_BODY)
        t = task_id_from_hex(task_hex)
        try:
            bid = bytes.fromhex(batch_hex)
        except ValueError as e:
            raise Problem(400, "batchMismatch", "batch id must be hex") from e
        from starlette.concurrency import run_in_threadpool
        return await run_in_threadpool(ingest_batch, state, t, bid, body)

    @app.put(HEALTH_PATH)
    async def shuffler_health(request: Request) -> dict:
        # signed by a shuffler like a batch (401 before the body is read; at most MAX_HEALTH_BODY bytes)
        body = await read_signed_body(request, state.peer_secret, MAX_HEALTH_BODY)
        return state.record_shuffler_health(body)


def _install_collector_routes(app: FastAPI, state: AnalyzerState) -> None:
    tid = task_id_from_hex

    @app.get("/v1/tasks/{task_hex}/estimates")
    def get_estimates(task_hex: str, request: Request, crowd: str | None = None,
                      from_window: int | None = Query(None, ge=0, le=MAX_WINDOW),
                      to_window: int | None = Query(None, ge=0, le=MAX_WINDOW)) -> dict:
        check_bearer(state.collector_token, request.headers.get("authorization"))
        try:
            cb = bytes.fromhex(crowd) if crowd is not None else None
        except ValueError as e:
            raise Problem(400, "invalidRequest", "crowd must be hex") from e
        return estimates(state, tid(task_hex), cb, from_window, to_window)

    @app.get("/v1/tasks/{task_hex}/privacy")
    def get_privacy(task_hex: str, request: Request) -> dict:
        check_bearer(state.collector_token, request.headers.get("authorization"))
        t = tid(task_hex)
        state.task(t)
        with state.engine.connect() as c:
            rows = c.execute(select(analyzer_ledger).where(analyzer_ledger.c.task_id == t)).all()
        return {"ledger": [{"batch_id": r.batch_id.hex(), "window": r.window, "crowd": r.crowd_id.hex(),
                            "n_released": r.n_released, "n_valid": r.n_valid, "statement": r.statement,
                            "client_windows": _ledger_windows(state.task(t), r)}
                           for r in rows]}

    @app.get("/v1/tasks/{task_hex}/stats")
    def stats(task_hex: str, request: Request) -> dict:
        check_bearer(state.collector_token, request.headers.get("authorization"))
        t = tid(task_hex)
        with state.engine.connect() as c:
            nb = c.execute(select(func.count()).select_from(analyzer_batches)
                           .where(analyzer_batches.c.task_id == t)).scalar_one()
            nv = c.execute(select(func.coalesce(func.sum(analyzer_batches.c.n_valid), 0))
                           .where(analyzer_batches.c.task_id == t)).scalar_one()
            nr = c.execute(select(func.coalesce(func.sum(analyzer_batches.c.n_received), 0))
                           .where(analyzer_batches.c.task_id == t)).scalar_one()
        return {"batches": int(nb), "valid": int(nv), "received": int(nr)}
