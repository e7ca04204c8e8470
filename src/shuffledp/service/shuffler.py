"""Shuffler service: durable queue + data-independent batcher + idempotent forwarder.

- ``POST /v1/tasks/{t}/reports`` (``application/vnd.shuffledp.upload``): validates each frame
  without decrypting (task known, crowd allowed, envelope length, key id, suite), then in one
  transaction inserts new rows keyed by SHA-256(envelope) and commits — the 200 response (the
  acknowledgement) is sent only after the commit is durable. Nothing about the request (client
  address, headers, arrival time) is stored or logged; the only time information kept is the
  batch window index.
- Batcher (background thread, or ``POST /v1/admin/tick``): for every (task, crowd) it pools the
  pending rows of closed windows (carry-over allowed); if the pool holds at least
  ``min_batch_size`` reports it is shuffled with a CSPRNG permutation
  (:func:`shuffledp.shuffle.shuffler.csprng_permutation`, from ``os.urandom``) and turned into a
  batch; otherwise rows older than ``max_wait_windows`` windows are expired (deleted, counted).
  Formation never holds the write lock for the whole pool: the pool is read (digests and windows
  only) from a read-only snapshot, one short transaction records the batch as ``forming`` with its
  member list (the permuted digests), each chunk of :data:`FORM_CHUNK` members then moves from
  pending to the batch's items in its own transaction, and a last one marks the batch ``ready``.
  A batch left ``forming`` by a crash is finished from its member list first thing in the next round.
- Forwarder: ``PUT {analyzer}/v1/tasks/{t}/batches/{batch_id}`` with an HMAC-SHA256 request
  signature; the batch id is content-derived so a retry is idempotent. Items are deleted only
  after a 2xx. Everything else retries with capped exponential backoff and jitter — 5xx,
  timeouts, connection errors, and also 401/403 (peer secrets differ) and 404 (the analyzer does
  not know the task), which are counted, logged and make ``/healthz`` report ``degraded`` —
  except the content rejections of :data:`PERMANENT_STATUSES` (the analyzer says the batch itself
  is malformed): those mark the batch ``rejected``, kept with its envelopes until the operator
  re-queues (``shuffledp shuffler requeue``) or discards it (``shuffledp shuffler discard``).
- Client admission (optional, ``service/client_auth.py``): per-client bearer tokens checked before
  the body is read, and per-client token-bucket rate limits kept in memory only.

- Retention (``tick`` every ``retention_every`` seconds, or ``POST /v1/admin/retention``): pending
  reports past both retention and ``max_wait_windows`` are deleted (counted); batches the analyzer
  has not acknowledged — ``rejected`` ones included — are never deleted by retention. Rules:
  ``service/retention.py``.

Multi-shuffler by attribute: each shuffler may be registered for a subset of a task's crowds
(``crowds`` in the registration); reports for other crowds are refused.

Protocol tasks (a registry protocol, ``TaskConfig.protocol``): the shuffler runs the protocol's
shuffler side. Its registration names its index ``shuffler`` in the deployment (0 ..
``n_shufflers - 1``). Clients upload message envelopes and one **user marker** per user (SDU2);
the pool is released once it holds ``min_batch_size`` users (markers), at which point the
shuffler adds ``protocol.shuffler_messages(index)`` (e.g. MURS's uniform fakes), each sealed to
the analyzer's HPKE key like a client message, permutes messages and fakes together with one
CSPRNG permutation, and forwards an SDB2 batch carrying its index and user count. Markers are
deleted, never forwarded. The fakes are written to the pending table in the same transaction that
records the batch as ``forming``, so a crash neither loses nor duplicates them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import secrets
import threading
import time
from typing import Any

import numpy as np

import httpx
from fastapi import FastAPI, Request
from sqlalchemy import delete, func, select, update

from ..shuffle.shuffler import csprng_permutation
from .config import TaskConfig
from .client_auth import ClientTokens, RateLimiter
from .http_common import Problem, check_bearer, service_app, task_id_from_hex, read_body, sign_request
from .periodic import PeriodicThread
from .storage import (delete_pending_digests, insert_ignore, make_engine, move_pending_to_batch, read_connection,
                      shuffler_batch_items, shuffler_batches, shuffler_counters, shuffler_pending, shuffler_released,
                      shuffler_tasks, upgrade)
from .wire import (ALLOWED_SUITES, HEALTH_BATCH_STATES, HEALTH_PATH, MAX_HEALTH_TASKS, MAX_UPLOAD_BYTES,
                   MAX_UPLOAD_REPORTS, UPLOAD_USER, Batch, DecodeError, batch_id_from_digests, decode_upload_v2,
                   encode_batch, marker_digest, parse_header)

__all__ = ["ShufflerState", "create_shuffler_app", "requeue_batches", "discard_batches", "forward_outcome",
           "FORM_CHUNK", "PERMANENT_STATUSES"]

log = logging.getLogger("shuffledp.service.shuffler")

MAX_REPORTS_PER_REQUEST = MAX_UPLOAD_REPORTS
MAX_BODY_BYTES = MAX_UPLOAD_BYTES
COUNTER_NAME_LEN = shuffler_counters.c.name.type.length  # String(64) (storage.py, migration 0001)
#: reports moved from pending to a batch (or deleted) per write transaction: bounds how long
#: batch formation, expiry and retention hold the database's write lock
FORM_CHUNK = 500
#: pause between two such transactions, so an upload waiting for the write lock gets it (a
#: threading.Lock is not fair: without the pause the batcher re-takes it at once)
FORM_YIELD_SECONDS = 0.002
DIGEST_LEN = 32
#: largest task registration body (bytes; admin)
MAX_REGISTRATION_BODY = 1 << 20
#: analyzer answers that refuse the batch's content (malformed body, id/content mismatch, fewer
#: reports than the task's minimum, body too large): re-sending the same bytes cannot succeed
PERMANENT_STATUSES = frozenset({400, 413, 415, 422})
#: analyzer answers that mean the peers are misconfigured, not that the batch is bad: retried
AUTH_STATUSES = frozenset({401, 403, 407})
NOT_FOUND_STATUSES = frozenset({404, 410})


def forward_outcome(status: int | None) -> str:
    """What a forward attempt's HTTP status means for the batch.

    ``"delivered"`` (2xx); ``"rejected"`` (:data:`PERMANENT_STATUSES`: kept as ``rejected``);
    ``"unauthorized"`` (401/403/407) and ``"task_unknown"`` (404/410): retried, counted, health
    degraded; ``"retry"`` for everything else (``None`` = no response, 5xx, other 4xx).
    """
    if status is None:
        return "retry"
    if 200 <= status < 300:
        return "delivered"
    if status in PERMANENT_STATUSES:
        return "rejected"
    if status in AUTH_STATUSES:
        return "unauthorized"
    if status in NOT_FOUND_STATUSES:
        return "task_unknown"
    return "retry"


def _status_of(last_error: str | None) -> int | None:
    """The HTTP status recorded in a batch's ``last_error`` ("HTTP 401 unauthorized"), if any."""
    parts = (last_error or "").split()
    return int(parts[1]) if len(parts) >= 2 and parts[0] == "HTTP" and parts[1].isdigit() else None


def evaluated_counter_name(crowd: bytes) -> str:
    """Name of the counter holding the last closed window whose pool of ``crowd`` was evaluated.

    Fixed length (26 characters) whatever the crowd id's length (up to ``wire.MAX_CROWD_LEN`` = 64
    bytes): ``evaluated:`` + the first 16 hex characters of SHA-256(crowd). The crowd's hex id (up
    to 128 characters) would not fit the 64-character column (PostgreSQL refuses it with
    StringDataRightTruncation; SQLite stores it silently).
    """
    return "evaluated:" + hashlib.sha256(crowd).hexdigest()[:16]


#: seconds between two health pushes to the analyzer (on a batching round)
HEALTH_EVERY = 5.0


class ShufflerState:
    def __init__(self, db_url: str, *, admin_token: str, peer_secret: bytes, tick_seconds: float = 1.0,
                 close_delay: float = 0.0, forward_timeout: float = 30.0, auto: bool = True,
                 drop_noise: Any = None, clock: Any = None, retention_every: float = 3600.0,
                 client_tokens_file: str | None = None, client_rate: float | None = None,
                 client_burst: int | None = None, health_every: float = HEALTH_EVERY) -> None:
        """Shuffler state over the database at ``db_url``.

        Every ``health_every`` seconds (on a batching round) the shuffler pushes its per-task counts
        (:meth:`health_report`) to each analyzer it forwards to, signed like a batch; the analyzer's
        dashboard shows them with the time of the last contact. ``health_every=math.inf`` turns it off.

        ``client_tokens_file`` (default: ``SHUFFLEDP_CLIENT_TOKENS_FILE``) turns on client bearer
        tokens; ``client_rate`` reports/s with bucket ``client_burst`` (defaults:
        ``SHUFFLEDP_CLIENT_RATE``, ``SHUFFLEDP_CLIENT_BURST`` or ``max(1, ceil(10 * rate))``) turns
        on the per-client rate limit (``service/client_auth.py``). Both are off when unset.
        """
        self.engine = make_engine(db_url)
        upgrade(self.engine)
        self.admin_token, self.peer_secret = admin_token, peer_secret
        self.tick_seconds, self.close_delay, self.forward_timeout = tick_seconds, close_delay, forward_timeout
        self.write_lock = threading.Lock()
        self.work_lock = threading.Lock()
        self._tasks: dict[bytes, tuple[TaskConfig, str, set[int], set[bytes]]] = {}
        self._indices: dict[bytes, int] = {}
        self._analyzer_keys: dict[tuple[str, tuple[int, ...]], Any] = {}
        self._batcher = PeriodicThread("shuffler-batcher", tick_seconds if auto else 0.0, self.tick, log, "batcher")
        self.auto = auto
        self.rng = secrets.SystemRandom()
        self.drop_noise = drop_noise  # optional callable(c) -> number of rows to drop (DP random drop)
        self.clock = clock or time.time   # injectable (tests); the only source of "now"
        self.retention_every = retention_every
        self._last_retention = -math.inf
        self.health_every = health_every
        self._last_health = -math.inf
        self.http = httpx.Client(timeout=forward_timeout, headers={"user-agent": "shuffledp-shuffler"})
        tokens_file = client_tokens_file or os.environ.get("SHUFFLEDP_CLIENT_TOKENS_FILE") or None
        self.client_tokens = ClientTokens(tokens_file) if tokens_file else None
        rate = client_rate if client_rate is not None else float(os.environ.get("SHUFFLEDP_CLIENT_RATE") or 0)
        burst = client_burst if client_burst is not None else int(os.environ.get("SHUFFLEDP_CLIENT_BURST") or 0)
        self.rate_limiter = RateLimiter(rate, burst or max(1, math.ceil(10 * rate))) if rate > 0 else None
        # forward outcomes since start (the per-task history is in the counters table)
        self.forward_events = {"unauthorized": 0, "task_unknown": 0, "rejected": 0, "retry": 0, "delivered": 0}

    # ------------------------------------------------------------------ tasks
    def task(self, task_id: bytes) -> tuple[TaskConfig, str, set[int], set[bytes]]:
        t = self._tasks.get(task_id)
        if t is None:
            with self.engine.connect() as c:
                row = c.execute(select(shuffler_tasks).where(shuffler_tasks.c.task_id == task_id)).first()
            if row is None:
                raise Problem(404, "unrecognizedTask", "unknown task", task_id)
            reg = json.loads(row.key_ids)
            cfg = TaskConfig.from_json(json.loads(row.config))
            crowds = {bytes.fromhex(c) for c in reg.get("crowds", [c.hex() for c in cfg.crowds])}
            t = (cfg, row.analyzer_url, set(reg["key_ids"]), crowds)
            self._tasks[task_id] = t
        return t

    def register(self, cfg: TaskConfig, analyzer_url: str, key_ids: list[int], crowds: list[bytes] | None,
                 shuffler: int = 0) -> None:
        if not 0 <= shuffler < cfg.n_shufflers:
            raise Problem(422, "invalidRequest", f"shuffler must be in [0, {cfg.n_shufflers}) for this task "
                          f"(its protocol has {cfg.n_shufflers} shuffler(s)), got {shuffler}")
        reg = {"key_ids": sorted(set(int(k) for k in key_ids)),
               "crowds": [c.hex() for c in (crowds if crowds is not None else cfg.crowds)], "shuffler": int(shuffler)}
        with self.write_lock, self.engine.begin() as c:
            c.execute(delete(shuffler_tasks).where(shuffler_tasks.c.task_id == cfg.task_id))
            c.execute(shuffler_tasks.insert().values(task_id=cfg.task_id, config=cfg.canonical().decode(),
                                                     analyzer_url=analyzer_url.rstrip("/"), key_ids=json.dumps(reg),
                                                     min_batch_size=cfg.min_batch_size))
        self._tasks.pop(cfg.task_id, None)
        self._indices.pop(cfg.task_id, None)

    def shuffler_index(self, task_id: bytes) -> int:
        """This shuffler's index in the task's deployment (its registration's ``shuffler``)."""
        j = self._indices.get(task_id)
        if j is None:
            with read_connection(self.engine) as c:
                row = c.execute(select(shuffler_tasks.c.key_ids).where(shuffler_tasks.c.task_id == task_id)).first()
            j = int(json.loads(row[0]).get("shuffler", 0)) if row is not None else 0
            self._indices[task_id] = j
        return j

    def _bump(self, c, task_id: bytes, name: str, by: int) -> None:
        if by:
            _bump_counter(c, task_id, name, by)

    def _claim_evaluation(self, c, task_id: bytes, crowd: bytes, closed: int) -> bool:
        """Record that the pool of (task, crowd) is evaluated for closed window ``closed``; False if it was.

        The mark is the counter :func:`evaluated_counter_name`; a mark written under the legacy
        name ``evaluated:<crowd hex>`` (only ever storable for crowds of at most 27 bytes) is read
        too and replaced, so an upgrade never lets a pool be evaluated twice in one window.
        """
        name, legacy = evaluated_counter_name(crowd), f"evaluated:{crowd.hex()}"
        names = [name] + ([legacy] if len(legacy) <= COUNTER_NAME_LEN else [])
        vals = {r.name: int(r.value) for r in c.execute(select(shuffler_counters.c.name, shuffler_counters.c.value)
                                                          .where(shuffler_counters.c.task_id == task_id,
                                                                 shuffler_counters.c.name.in_(names)))}
        if vals and max(vals.values()) >= closed:
            return False
        self._bump(c, task_id, name, closed - vals.get(name, 0))
        if legacy in vals:
            c.execute(delete(shuffler_counters).where(shuffler_counters.c.task_id == task_id,
                                                      shuffler_counters.c.name == legacy))
        return True

    def counters(self, task_id: bytes) -> dict[str, int]:
        with read_connection(self.engine) as c:
            rows = c.execute(select(shuffler_counters).where(shuffler_counters.c.task_id == task_id)).all()
            pending = c.execute(select(func.count()).select_from(shuffler_pending)
                                .where(shuffler_pending.c.task_id == task_id)).scalar_one()
            states = c.execute(select(shuffler_batches.c.state, func.count()).where(
                shuffler_batches.c.task_id == task_id).group_by(shuffler_batches.c.state)).all()
        out = {r.name: int(r.value) for r in rows}
        out["pending"] = int(pending)
        out.update({f"batches_{s}": int(n) for s, n in states})
        return out

    # ------------------------------------------------------------------ ingest
    def admit_upload(self, authorization: str | None, address: str) -> list[bytes]:
        """Client admission before the upload body is read: the client's rate-limit keys.

        Raises :class:`Problem` 401 when client tokens are on and ``authorization`` holds no
        accepted token, 429 when a bucket is empty. The keys (token digest, keyed hash of the
        peer address) live in memory only and are never stored with the reports.
        """
        keys: list[bytes] = []
        if self.client_tokens is not None:
            keys.append(b"t" + self.client_tokens.admit(authorization))
        if self.rate_limiter is not None:
            keys.append(self.rate_limiter.address_key(address))
            self.rate_limiter.check(keys)
        return keys

    def ingest(self, task_id: bytes, body: bytes, now: float | None = None,
               client_keys: list[bytes] | None = None) -> dict:
        cfg, _url, key_ids, crowds = self.task(task_id)
        try:
            items = decode_upload_v2(body, MAX_REPORTS_PER_REQUEST)
        except DecodeError as e:
            raise Problem(400, "invalidMessage", str(e), task_id) from e
        if self.rate_limiter is not None and client_keys:
            self.rate_limiter.take(client_keys, len(items))   # every frame counts, valid or not
        window = int((self.clock() if now is None else now) // cfg.batch_window)
        errors, rows, seen = [], {}, set()
        el = cfg.envelope_len
        for i, (kind, crowd, env) in enumerate(items):
            if crowd not in crowds:
                errors.append({"i": i, "error": "unrecognizedCrowd"})
                continue
            if kind == UPLOAD_USER:
                # a local-oracle task counts reports, and a one-message protocol counts its messages
                if cfg.protocol is None or cfg.protocol_object().one_message_per_user:
                    errors.append({"i": i, "error": "invalidMessage"})
                    continue
                d = marker_digest(env)
                if d not in seen:
                    seen.add(d)
                    rows[d] = {"task_id": task_id, "envelope_digest": d, "crowd_id": crowd, "window": window,
                               "envelope": b"", "users": 1}
                continue
            if len(env) != el:
                errors.append({"i": i, "error": "invalidMessage"})
                continue
            kid, kem, kdf, aead = parse_header(env)
            if (kem, kdf, aead) not in ALLOWED_SUITES:
                errors.append({"i": i, "error": "invalidMessage"})
                continue
            if kid not in key_ids:
                errors.append({"i": i, "error": "outdatedConfig"})
                continue
            d = hashlib.sha256(env).digest()
            if d in seen:
                continue
            seen.add(d)
            rows[d] = {"task_id": task_id, "envelope_digest": d, "crowd_id": crowd, "window": window,
                       "envelope": env}   # users: the column's default 0 (a message)
        with self.write_lock, self.engine.begin() as c:
            existing: set[bytes] = set()
            keys = list(rows)
            for s in range(0, len(keys), 5000):
                existing.update(r[0] for r in c.execute(select(shuffler_pending.c.envelope_digest).where(
                    shuffler_pending.c.task_id == task_id, shuffler_pending.c.envelope_digest.in_(keys[s:s + 5000]))))
                if cfg.protocol is not None:
                    # already released (a re-sent upload whose acknowledgement was lost): the
                    # analyzer only gets the user count, so the shuffler must not count it again
                    existing.update(r[0] for r in c.execute(select(shuffler_released.c.envelope_digest).where(
                        shuffler_released.c.task_id == task_id,
                        shuffler_released.c.envelope_digest.in_(keys[s:s + 5000]))))
            new = [rows[k] for k in keys if k not in existing]
            for part in ([r for r in new if "users" not in r], [r for r in new if "users" in r]):
                if part:   # messages, then user markers (one executemany per row shape)
                    c.execute(insert_ignore(self.engine, shuffler_pending), part)
            self._bump(c, task_id, "accepted", len(new))
            self._bump(c, task_id, "rejected", len(errors))
        # committed (durable) -> acknowledge
        return {"accepted": len(new), "duplicate": len(items) - len(errors) - len(new), "errors": errors}

    # ------------------------------------------------------------------ batching
    def tick(self, now: float | None = None, close_current: bool = False) -> dict:
        """Run one batching + forwarding round. ``close_current`` treats the current window as closed."""
        now = self.clock() if now is None else now
        with self.work_lock:
            made = self._form_batches(now, close_current)
            sent = self._forward_due(now)
            out = {"batches_formed": made, **sent}
            if now - self._last_retention >= self.retention_every:
                out["retention"] = self._retention(now)
            if close_current or now - self._last_health >= self.health_every:
                self._last_health = now
                out["health_pushed"] = self._push_health()
        return out

    # ------------------------------------------------------------------ retention
    def enforce_retention(self, now: float | None = None) -> dict:
        """Run a batching round, then retention (rules in ``service/retention.py``).

        Batching first means a pool that can still be released is released, not deleted.
        """
        now = self.clock() if now is None else now
        with self.work_lock:
            self._form_batches(now, False)
            return self._retention(now)

    def _retention(self, now: float) -> dict:
        from .retention import retention_horizon, shuffler_pending_horizon
        self._last_retention = now
        with read_connection(self.engine) as c:
            tids = {r[0] for r in c.execute(select(shuffler_pending.c.task_id).distinct())}
            tids |= {r[0] for r in c.execute(select(shuffler_batches.c.task_id).where(
                shuffler_batches.c.state.in_(("ready", "retrying", "rejected"))).distinct())}
            tids |= {r[0] for r in c.execute(select(shuffler_released.c.task_id).distinct())}
        out = {"expired_retention": 0, "owed_batches_past_retention": 0, "rejected_batches_past_retention": 0}
        for task_id in sorted(tids):
            try:
                cfg, _u, _k, _c = self.task(task_id)
            except Problem:
                continue   # no configuration: nothing can be decided about its rows
            h_pending = shuffler_pending_horizon(cfg, now, self.close_delay)
            h = retention_horizon(cfg, now)
            with read_connection(self.engine) as c:
                old = [bytes(r[0]) for r in c.execute(select(shuffler_pending.c.envelope_digest).where(
                    shuffler_pending.c.task_id == task_id, shuffler_pending.c.window < h_pending))]
                owed = dict(c.execute(select(shuffler_batches.c.state, func.count()).where(
                    shuffler_batches.c.task_id == task_id,
                    shuffler_batches.c.state.in_(("ready", "retrying", "rejected")),
                    shuffler_batches.c.window < h).group_by(shuffler_batches.c.state)).all())
            n_pending = self._delete_pending_chunked(task_id, b"".join(old), "expired_retention")
            with self.write_lock, self.engine.begin() as c:   # released members' digests past retention
                c.execute(delete(shuffler_released).where(shuffler_released.c.task_id == task_id,
                                                          shuffler_released.c.window < h))
            n_owed, n_rej = int(owed.get("ready", 0)) + int(owed.get("retrying", 0)), int(owed.get("rejected", 0))
            if n_owed:
                log.warning("%d undelivered batch(es) are past retention; kept until the analyzer acknowledges",
                            n_owed)
            if n_rej:
                log.error("%d batch(es) rejected by the analyzer are past retention; kept until the operator "
                          "re-queues or discards them (shuffledp shuffler requeue|discard)", n_rej)
            out["expired_retention"] += n_pending
            out["owed_batches_past_retention"] += n_owed
            out["rejected_batches_past_retention"] += n_rej
        return out

    def _form_batches(self, now: float, close_current: bool) -> int:
        """One batching round; see the module docstring. Returns the number of batches formed."""
        made = self._finish_forming()          # batches a crash left half-formed come first
        with read_connection(self.engine) as c:
            groups = c.execute(select(shuffler_pending.c.task_id, shuffler_pending.c.crowd_id)
                               .group_by(shuffler_pending.c.task_id, shuffler_pending.c.crowd_id)).all()
        for task_id, crowd in groups:
            task_id, crowd = bytes(task_id), bytes(crowd)
            try:
                cfg, _u, _k, _c = self.task(task_id)
            except Problem:
                continue
            made += self._form_pool(cfg, task_id, crowd, now, close_current)
        return made

    def _form_pool(self, cfg: TaskConfig, task_id: bytes, crowd: bytes, now: float, close_current: bool) -> int:
        """The pool of one (task, crowd) over its closed windows: released as one batch when it is
        large enough, else its reports that waited past ``max_wait_windows`` expire. Returns the
        batches formed (0 or 1)."""
        closed = int((now - self.close_delay) // cfg.batch_window) - (0 if close_current else 1)
        pool = self._read_pool(cfg, task_id, crowd, closed)
        if pool is None:
            return 0
        release, drop, digests, windows, markers = pool
        if not release:
            self._delete_pending_chunked(task_id, digests.tobytes(), "expired")
            return 0
        if cfg.protocol is not None:
            return self._form_protocol_batch(cfg, task_id, crowd, digests, windows, markers)
        return self._form_oracle_batch(task_id, crowd, digests, windows, drop)

    def _read_pool(self, cfg: TaskConfig, task_id: bytes, crowd: bytes,
                   closed: int) -> tuple[bool, int, np.ndarray, np.ndarray, np.ndarray] | None:
        """Evaluate a pool once: ``(release, drop, digests, windows, markers)``, or None when it is
        empty or (DP random drop) was already evaluated for this closed window.

        The pool is read from one snapshot without any write lock: first its size, then (only to
        release it) its digests and windows. Only the batching thread, under ``work_lock``, deletes
        pending rows, so the snapshot's rows are all still pending when the batch takes them. When
        the pool is not released, the rows returned are those that waited too long.
        """
        in_pool = (shuffler_pending.c.task_id == task_id, shuffler_pending.c.crowd_id == crowd,
                   shuffler_pending.c.window <= closed)
        with read_connection(self.engine, snapshot=True) as rc:
            n = int(rc.execute(select(func.count()).select_from(shuffler_pending).where(*in_pool)).scalar_one())
            if n == 0:
                return None
            drop = 0
            if cfg.drop_noise is not None:
                # each evaluation of a pool is a DP release: at most once per closed window
                # (claimed and committed first; a crash before the batch is recorded only
                # delays the pool to the next window)
                with self.write_lock, self.engine.begin() as c:
                    if not self._claim_evaluation(c, task_id, crowd, closed):
                        return None
                from .drop import sample_drop   # DP random drop (exact discrete Laplace sampler)
                drop = sample_drop(n, cfg.drop_noise["eps"], cfg.drop_noise["delta"])
            elif self.drop_noise is not None and cfg.protocol is None:
                drop = min(n, max(0, int(self.drop_noise(n))))
            if cfg.protocol is not None and not cfg.protocol_object().one_message_per_user:
                # a protocol pool is sized in users (markers)
                release = int(rc.execute(select(func.coalesce(func.sum(shuffler_pending.c.users), 0))
                                         .where(*in_pool)).scalar_one()) >= cfg.min_batch_size
            else:
                release = n - drop >= cfg.min_batch_size
            cols = (shuffler_pending.c.envelope_digest, shuffler_pending.c.window, shuffler_pending.c.users)
            if release:
                rows = rc.execute(select(*cols).where(*in_pool)).all()
            else:
                oldest_allowed = closed - cfg.max_wait_windows + 1
                rows = rc.execute(select(*cols).where(*in_pool[:2], shuffler_pending.c.window < oldest_allowed)).all()
        m = len(rows)
        if release and m != n:   # cannot happen with one snapshot; refuse to release something else than evaluated
            raise RuntimeError(f"pool snapshot changed between count ({n}) and read ({m})")
        digests = np.frombuffer(b"".join(bytes(r[0]) for r in rows), dtype=np.uint8).reshape(m, DIGEST_LEN)
        windows = np.fromiter((int(r[1]) for r in rows), dtype=np.int64, count=m)
        markers = np.fromiter((int(r[2]) for r in rows), dtype=np.int64, count=m) > 0
        return release, drop, digests, windows, markers

    def _form_oracle_batch(self, task_id: bytes, crowd: bytes, digests: np.ndarray, windows: np.ndarray,
                           drop: int) -> int:
        """A local-oracle task's batch: one CSPRNG permutation; its first ``drop`` reports are
        dropped (DP random drop), the rest recorded as the batch (members: kept, then dropped)."""
        perm = csprng_permutation(len(digests))   # the one CSPRNG permutation
        dropped, kept = perm[:drop], perm[drop:]
        kept_digests = digests[kept].tobytes()
        window = int(windows[kept].max())
        bid = batch_id_from_digests(task_id, crowd, window, kept_digests)
        with self.write_lock, self.engine.begin() as c:
            c.execute(insert_ignore(self.engine, shuffler_batches), [{
                "batch_id": bid, "task_id": task_id, "crowd_id": crowd, "window": window,
                "n": len(kept), "state": "forming", "attempts": 0, "next_attempt_at": 0.0,
                "last_error": None, "members": kept_digests + digests[dropped].tobytes()}])
        self._finish_batch(bid)
        return 1

    def _form_protocol_batch(self, cfg: TaskConfig, task_id: bytes, crowd: bytes, digests: np.ndarray,
                             windows: np.ndarray, markers: np.ndarray) -> int:
        """Release a protocol pool: messages plus this shuffler's fakes, one CSPRNG permutation.

        The member list is the permuted messages and fakes (positions ``0..n-1``, forwarded)
        followed by the user markers (deleted with the batch's last chunk, never forwarded).
        """
        j = self.shuffler_index(task_id)
        window = int(windows.max())
        # users: the markers, or the messages themselves when every user sends exactly one
        n_users = int(markers.size) if cfg.protocol_object().one_message_per_user else int(markers.sum())
        try:
            fakes = self._fake_envelopes(cfg, j, crowd, window, windows[~markers])
        except (httpx.HTTPError, ValueError) as e:
            log.error("cannot seal shuffler %d's fake messages for task %s (analyzer keys unavailable: %s); pool "
                      "kept for the next round", j, task_id.hex()[:16], type(e).__name__)
            return 0
        fake_digests = np.frombuffer(b"".join(hashlib.sha256(e).digest() for e in fakes),
                                     dtype=np.uint8).reshape(len(fakes), DIGEST_LEN)
        released = np.concatenate([digests[~markers], fake_digests])
        perm = csprng_permutation(released.shape[0])   # the one CSPRNG permutation (messages and fakes)
        kept_digests = released[perm].tobytes()
        bid = batch_id_from_digests(task_id, crowd, window, kept_digests, j, n_users)
        with self.write_lock, self.engine.begin() as c:
            if fakes:
                c.execute(insert_ignore(self.engine, shuffler_pending), [
                    {"task_id": task_id, "envelope_digest": bytes(fake_digests[i]), "crowd_id": crowd,
                     "window": window, "envelope": env, "users": 0} for i, env in enumerate(fakes)])
                self._bump(c, task_id, "fake_messages", len(fakes))
            c.execute(insert_ignore(self.engine, shuffler_batches), [{
                "batch_id": bid, "task_id": task_id, "crowd_id": crowd, "window": window,
                "n": int(released.shape[0]), "n_users": n_users, "state": "forming", "attempts": 0,
                "next_attempt_at": 0.0, "last_error": None, "members": kept_digests + digests[markers].tobytes()}])
        self._finish_batch(bid)
        return 1

    def _analyzer_key(self, url: str, key_ids: set[int]) -> Any:
        """The analyzer's HPKE key a shuffler seals its fake messages to (fetched from the analyzer)."""
        from .hpke import AEAD_AES_128_GCM, KDF_HKDF_SHA256
        from .wire import decode_key_list
        ck = (url, tuple(sorted(key_ids)))
        key = self._analyzer_keys.get(ck)
        if key is None:
            r = self.http.get(f"{url}/v1/hpke-keys")
            r.raise_for_status()
            keys = [k for k in decode_key_list(r.content)
                    if k.key_id in key_ids and (KDF_HKDF_SHA256, AEAD_AES_128_GCM) in k.suites]
            if not keys:
                raise ValueError("the analyzer offers no key this shuffler accepts")
            key = self._analyzer_keys[ck] = keys[0]
        return key

    def _fake_envelopes(self, cfg: TaskConfig, shuffler: int, crowd: bytes, window: int,
                        message_windows: np.ndarray | None = None) -> list[bytes]:
        """``protocol.shuffler_messages(shuffler)``, each sealed to the analyzer like a client message.

        Randomness from :func:`~shuffledp.core.rng.secure_rng` (a CSPRNG keyed from the OS); each
        fake has a fresh random message id and, as its time, the start of the window of a uniformly
        drawn (CSPRNG) message of the pool (``message_windows``; the batch's ``window`` when it has
        none). Clients of such a task write their window's start too (``TaskConfig.report_time``),
        so a fake's time does not tell it from users' messages, carried-over pools included.
        """
        from ..core.rng import secure_rng
        from .wire import seal_report
        msgs = cfg.protocol_object().shuffler_messages(shuffler, secure_rng())
        msgs = {k: v for k, v in msgs.items() if k != "shuffler"}
        if not msgs:
            return []
        m = int(next(iter(msgs.values())).shape[0])
        if m == 0:
            return []
        _cfg, url, key_ids, _crowds = self.task(cfg.task_id)
        key = self._analyzer_key(url, key_ids)
        ids = np.frombuffer(secrets.token_bytes(16 * m), dtype=np.uint8).reshape(m, 16)
        mw = np.asarray(message_windows if message_windows is not None and len(message_windows) else [window],
                        dtype=np.int64)
        drawn = mw[np.fromiter((secrets.randbelow(len(mw)) for _ in range(m)), dtype=np.int64, count=m)]
        times = (drawn * cfg.batch_window) // cfg.time_precision
        pts = cfg.report_schema.encode(msgs, ids, times)
        return [seal_report(key, cfg.task_id, cfg.digest, crowd, row.tobytes()) for row in pts]

    def _finish_forming(self) -> int:
        with read_connection(self.engine) as c:
            forming = [bytes(r[0]) for r in c.execute(select(shuffler_batches.c.batch_id).where(
                shuffler_batches.c.state == "forming"))]
        for bid in forming:
            log.warning("finishing a batch whose formation was interrupted")
            self._finish_batch(bid)
        return len(forming)

    def _finish_batch(self, bid: bytes) -> None:
        """Move a ``forming`` batch's members from pending to its items, FORM_CHUNK per transaction.

        Positions ``0..n-1`` of the member list are the released reports in batch order, the rest
        the noise-dropped ones (deleted). Each chunk's insert and delete commit together, so every
        member is at every moment either pending or in the batch; positions already in the batch
        (a previous, interrupted run) are kept as they are. The last transaction marks the batch
        ``ready`` and clears the member list.
        """
        with read_connection(self.engine) as c:
            b = c.execute(select(shuffler_batches.c.task_id, shuffler_batches.c.n, shuffler_batches.c.state,
                                 shuffler_batches.c.members, shuffler_batches.c.n_users, shuffler_batches.c.window)
                          .where(shuffler_batches.c.batch_id == bid)).first()
            if b is None or b.state != "forming":
                return
        task_id, n, members = bytes(b.task_id), int(b.n), bytes(b.members)
        n_users = b.n_users   # protocol batches: the members after position n are user markers (no drop)
        total = len(members) // DIGEST_LEN
        for s in range(0, total, FORM_CHUNK):
            e = min(s + FORM_CHUNK, total)
            chunk = members[s * DIGEST_LEN:e * DIGEST_LEN]
            with self.write_lock, self.engine.begin() as c:
                if s < n:
                    kept = chunk[:(min(e, n) - s) * DIGEST_LEN]
                    if move_pending_to_batch(c, task_id, bid, s, kept) < len(kept) // DIGEST_LEN:
                        # some positions were moved by an interrupted run; every one must be there now
                        have = int(c.execute(select(func.count()).select_from(shuffler_batch_items).where(
                            shuffler_batch_items.c.batch_id == bid, shuffler_batch_items.c.pos >= s,
                            shuffler_batch_items.c.pos < min(e, n))).scalar_one())
                        if have != min(e, n) - s:
                            # only this thread deletes pending rows: a member can be neither pending
                            # nor in the batch only if the database was changed behind the shuffler
                            raise RuntimeError(f"{min(e, n) - s - have} member(s) of a forming batch are "
                                               "neither pending nor in the batch")
                if n_users is not None:   # protocol batch: remember what was released (exactly-once users)
                    c.execute(insert_ignore(self.engine, shuffler_released), [
                        {"task_id": task_id, "envelope_digest": chunk[i:i + DIGEST_LEN], "window": int(b.window)}
                        for i in range(0, len(chunk), DIGEST_LEN)])
                delete_pending_digests(c, task_id, chunk)
            time.sleep(FORM_YIELD_SECONDS)
        with self.write_lock, self.engine.begin() as c:
            r = c.execute(update(shuffler_batches).where(shuffler_batches.c.batch_id == bid,
                                                         shuffler_batches.c.state == "forming")
                          .values(state="ready", members=None))
            if r.rowcount:
                self._bump(c, task_id, "released", n)
                if n_users is None:
                    self._bump(c, task_id, "dropped_noise", total - n)
                else:
                    self._bump(c, task_id, "released_users", int(n_users))

    def _delete_pending_chunked(self, task_id: bytes, digests: bytes, counter: str) -> int:
        """Delete pending rows (concatenated digests) FORM_CHUNK per transaction, each chunk counted."""
        deleted = 0
        for s in range(0, len(digests), FORM_CHUNK * DIGEST_LEN):
            with self.write_lock, self.engine.begin() as c:
                k = delete_pending_digests(c, task_id, digests[s:s + FORM_CHUNK * DIGEST_LEN])
                self._bump(c, task_id, counter, k)
            deleted += k
            time.sleep(FORM_YIELD_SECONDS)
        return deleted

    def _forward_due(self, now: float | None = None) -> dict:
        now = self.clock() if now is None else now
        with read_connection(self.engine) as c:
            due = c.execute(select(shuffler_batches.c.batch_id, shuffler_batches.c.task_id,
                                   shuffler_batches.c.crowd_id, shuffler_batches.c.window, shuffler_batches.c.n,
                                   shuffler_batches.c.attempts, shuffler_batches.c.n_users).where(
                shuffler_batches.c.state.in_(("ready", "retrying")), shuffler_batches.c.next_attempt_at <= now)).all()
        ok = fail = 0
        for b in due:
            if self._forward_one(b):
                ok += 1
            else:
                fail += 1
        return {"forwarded": ok, "forward_failures": fail}

    def _forward_one(self, b: Any) -> bool:
        cfg, url, _k, _c = self.task(b.task_id)
        with read_connection(self.engine) as c:
            envs = [bytes(r[0]) for r in c.execute(select(shuffler_batch_items.c.envelope).where(
                shuffler_batch_items.c.batch_id == b.batch_id).order_by(shuffler_batch_items.c.pos))]
        n_users = getattr(b, "n_users", None)
        body = encode_batch(Batch(b.task_id, b.crowd_id, b.window, envs,
                                  self.shuffler_index(b.task_id) if n_users is not None else 0, n_users))
        del envs
        path = f"/v1/tasks/{b.task_id.hex()}/batches/{b.batch_id.hex()}"
        status, err = None, None
        try:
            r = self.http.put(url + path, content=body, headers={
                "authorization": sign_request(self.peer_secret, "PUT", path, body),
                "content-type": "application/vnd.shuffledp.batch"})
            status = r.status_code
            err = f"HTTP {status}"
            if not 200 <= status < 300:
                try:
                    title = r.json().get("title") if "json" in r.headers.get("content-type", "") else None
                except ValueError:
                    title = None
                if isinstance(title, str) and title.isidentifier():
                    err += f" {title}"
        except httpx.HTTPError as e:
            err = type(e).__name__
        outcome = forward_outcome(status)
        self.forward_events[outcome] += 1
        if outcome == "delivered":
            with self.write_lock, self.engine.begin() as c:
                c.execute(update(shuffler_batches).where(shuffler_batches.c.batch_id == b.batch_id)
                          .values(state="delivered", attempts=b.attempts + 1, last_error=None))
                c.execute(delete(shuffler_batch_items).where(shuffler_batch_items.c.batch_id == b.batch_id))
                self._bump(c, b.task_id, "forwarded_reports", b.n)
            return True
        backoff = min(60.0, 0.2 * 2 ** min(b.attempts, 10)) * (0.5 + self.rng.random())
        with self.write_lock, self.engine.begin() as c:
            c.execute(update(shuffler_batches).where(shuffler_batches.c.batch_id == b.batch_id).values(
                state="rejected" if outcome == "rejected" else "retrying", attempts=b.attempts + 1,
                next_attempt_at=self.clock() + backoff, last_error=err))
            self._bump(c, b.task_id, "forward_failures", 1)
            if outcome != "retry":
                self._bump(c, b.task_id, f"forward_{outcome}", 1)
        short = b.batch_id.hex()[:16]
        if outcome == "unauthorized":
            log.error("analyzer refused batch %s of %d report(s) with %s: the services' SHUFFLEDP_PEER_SECRET "
                      "differ; batch kept, retrying in %.0f s", short, b.n, err, backoff)
        elif outcome == "task_unknown":
            log.error("analyzer does not know task %s (%s) for batch %s of %d report(s): register the task at the "
                      "analyzer; batch kept, retrying in %.0f s", b.task_id.hex()[:16], err, short, b.n, backoff)
        elif outcome == "rejected":
            log.error("analyzer rejected the content of batch %s of %d report(s) (%s); kept as 'rejected' until "
                      "an operator runs `shuffledp shuffler requeue --batch %s` or `... discard`",
                      short, b.n, err, b.batch_id.hex())
        else:
            log.warning("forward of batch %s failed: %s; retrying in %.0f s", short, err, backoff)
        return False

    # ------------------------------------------------------------------ health
    def health(self) -> dict:
        """Service status: ``degraded`` while a batch is held back by the peers' configuration
        (analyzer answered 401/403/407 or 404/410 on the last attempt) or rejected, with the counts."""
        with read_connection(self.engine) as c:
            rows = c.execute(select(shuffler_batches.c.state, shuffler_batches.c.last_error, func.count()).where(
                shuffler_batches.c.state.in_(("forming", "ready", "retrying", "rejected"))).group_by(
                shuffler_batches.c.state, shuffler_batches.c.last_error)).all()
        batches = {"forming": 0, "ready": 0, "retrying": 0, "rejected": 0}
        held = {"unauthorized": 0, "task_unknown": 0}
        for st, err, k in rows:
            batches[st] += int(k)
            if st == "retrying":
                o = forward_outcome(_status_of(err))
                if o in held:
                    held[o] += int(k)
        problems = []
        if held["unauthorized"]:
            problems.append(f"{held['unauthorized']} batch(es) refused by the analyzer's authentication "
                            "(SHUFFLEDP_PEER_SECRET differs): kept and retried")
        if held["task_unknown"]:
            problems.append(f"{held['task_unknown']} batch(es) for a task the analyzer does not know: kept and "
                            "retried")
        if batches["rejected"]:
            problems.append(f"{batches['rejected']} batch(es) rejected by the analyzer: kept; re-queue or discard "
                            "them (shuffledp shuffler requeue|discard)")
        return {"ok": True, "status": "degraded" if problems else "ok", "problems": problems,
                "batches": batches, "batches_held": held, "forward_events": dict(self.forward_events)}

    def health_report(self) -> dict[str, list[dict]]:
        """Per analyzer URL, this shuffler's counts for each task it serves there.

        One entry per task: its index in the deployment, pending envelopes (``None`` for a task whose
        users are counted by markers: the number of messages pending users sent can be their values,
        e.g. Cnt_2M) and (protocol tasks) user markers not yet batched, and batches by state (``forming``, ``ready``, ``retrying``,
        ``rejected``, ``delivered``). Counts only: no envelope, digest, client or time finer than
        the push itself leaves the shuffler.
        """
        with read_connection(self.engine) as c:
            tasks = c.execute(select(shuffler_tasks.c.task_id, shuffler_tasks.c.analyzer_url)).all()
            pending = {bytes(t): (int(n) - int(u or 0), int(u or 0)) for t, n, u in c.execute(
                select(shuffler_pending.c.task_id, func.count(), func.sum(shuffler_pending.c.users))
                .group_by(shuffler_pending.c.task_id))}
            states: dict[bytes, dict[str, int]] = {}
            for t, st, k in c.execute(select(shuffler_batches.c.task_id, shuffler_batches.c.state, func.count())
                                      .group_by(shuffler_batches.c.task_id, shuffler_batches.c.state)):
                states.setdefault(bytes(t), {})[str(st)] = int(k)
        out: dict[str, list[dict]] = {}
        for t, url in tasks:
            t = bytes(t)
            envs, users = pending.get(t, (0, 0))
            st = states.get(t, {})
            try:
                cfg = self.task(t)[0]
                by_markers = cfg.protocol is not None and not cfg.protocol_object().one_message_per_user
            except Exception:  # noqa: BLE001 - a task that cannot be read: say nothing about its messages
                by_markers = True
            out.setdefault(url, []).append({
                # users counted by markers (multi-message protocols): how many messages the pending
                # users sent is what the shuffle hides (Cnt_2M: x + Ber(p) messages), so only users
                "task_id": t.hex(), "shuffler": self.shuffler_index(t), "pending_envelopes": None if by_markers else envs,
                "pending_users": users, "batches": {k: st.get(k, 0) for k in HEALTH_BATCH_STATES}})
        return out

    def _push_health(self) -> int:
        """Send :meth:`health_report` to each analyzer (``PUT /v1/shuffler-health``, signed); returns
        how many analyzers acknowledged. A failure is logged and retried on a later round."""
        ok = 0
        try:
            report = self.health_report()
        except Exception as e:  # noqa: BLE001 - health must never stop batching
            log.warning("health report failed: %s", type(e).__name__)
            return 0
        for url, entries in report.items():
            for i in range(0, len(entries), MAX_HEALTH_TASKS):
                body = json.dumps({"tasks": entries[i:i + MAX_HEALTH_TASKS]}, separators=(",", ":")).encode()
                try:
                    r = self.http.put(url + HEALTH_PATH, content=body, timeout=min(5.0, self.forward_timeout), headers={
                        "authorization": sign_request(self.peer_secret, "PUT", HEALTH_PATH, body),
                        "content-type": "application/json"})
                    ok += int(200 <= r.status_code < 300)
                    if not 200 <= r.status_code < 300:
                        log.info("analyzer %s answered %d to the health report", url, r.status_code)
                except httpx.HTTPError as e:
                    log.info("health report to %s failed: %s", url, type(e).__name__)
        return ok

    # ------------------------------------------------------------------ background loop
    def start(self) -> None:
        self._batcher.start()

    def stop(self) -> None:
        self._batcher.stop()


# ---------------------------------------------------------------------- operator commands
def _select_batches(c, batch_ids: list[bytes] | None, states: tuple[str, ...]) -> list[Any]:
    q = select(shuffler_batches.c.batch_id, shuffler_batches.c.task_id, shuffler_batches.c.state,
               shuffler_batches.c.n)
    q = q.where(shuffler_batches.c.batch_id.in_(batch_ids)) if batch_ids is not None else \
        q.where(shuffler_batches.c.state.in_(states))
    return c.execute(q).all()


def requeue_batches(engine: Any, batch_ids: list[bytes] | None = None) -> list[dict]:
    """Put batches back in the forwarder's queue: ``rejected`` ones (all when ``batch_ids`` is None).

    A named ``rejected`` batch becomes ``ready``; a named ``retrying`` one keeps its state but its
    backoff is reset (attempted at the next round). Any other named batch (unknown, delivered,
    discarded, or expired before migration 0005, whose envelopes are gone) raises ``ValueError``
    and nothing is changed. Counted per task as ``batches_requeued``. Safe while the shuffler runs:
    its forwarder reads the queue from the database every round.
    """
    with engine.begin() as c:
        rows = _select_batches(c, batch_ids, ("rejected",))
        found = {bytes(r.batch_id): r for r in rows}
        if batch_ids is not None:
            bad = [f"{b.hex()} ({found[b].state if b in found else 'unknown'})" for b in batch_ids
                   if b not in found or found[b].state not in ("rejected", "retrying")]
            if bad:
                raise ValueError("only rejected or retrying batches can be re-queued: " + ", ".join(bad))
        out = []
        for r in rows:
            c.execute(update(shuffler_batches).where(shuffler_batches.c.batch_id == r.batch_id).values(
                state="ready" if r.state == "rejected" else r.state, attempts=0, next_attempt_at=0.0))
            _bump_counter(c, bytes(r.task_id), "batches_requeued", 1)
            out.append({"batch_id": bytes(r.batch_id).hex(), "task_id": bytes(r.task_id).hex(), "n": int(r.n),
                        "was": r.state})
    return out


def discard_batches(engine: Any, batch_ids: list[bytes]) -> list[dict]:
    """Delete the envelopes of named ``rejected`` batches (state ``discarded``, counted ``discarded_reports``).

    The operator's explicit decision that the analyzer will never take these reports; any named
    batch that is not ``rejected`` raises ``ValueError`` and nothing is changed.
    """
    with engine.begin() as c:
        rows = _select_batches(c, batch_ids, ())
        found = {bytes(r.batch_id): r for r in rows}
        bad = [f"{b.hex()} ({found[b].state if b in found else 'unknown'})" for b in batch_ids
               if b not in found or found[b].state != "rejected"]
        if bad:
            raise ValueError("only rejected batches can be discarded: " + ", ".join(bad))
        out = []
        for r in rows:
            c.execute(delete(shuffler_batch_items).where(shuffler_batch_items.c.batch_id == r.batch_id))
            c.execute(update(shuffler_batches).where(shuffler_batches.c.batch_id == r.batch_id)
                      .values(state="discarded"))
            _bump_counter(c, bytes(r.task_id), "discarded_reports", int(r.n))
            out.append({"batch_id": bytes(r.batch_id).hex(), "task_id": bytes(r.task_id).hex(), "n": int(r.n)})
    return out


def _bump_counter(c, task_id: bytes, name: str, by: int) -> None:
    r = c.execute(update(shuffler_counters).where(shuffler_counters.c.task_id == task_id,
                                                  shuffler_counters.c.name == name)
                  .values(value=shuffler_counters.c.value + by))
    if r.rowcount == 0:
        c.execute(shuffler_counters.insert().values(task_id=task_id, name=name, value=by))


def create_shuffler_app(state: ShufflerState) -> FastAPI:
    app = service_app("shuffledp shuffler", state, "shuffler")
    tid = task_id_from_hex

    @app.get("/healthz")
    def healthz() -> dict:
        return state.health()

    @app.put("/v1/tasks/{task_hex}")
    async def register(task_hex: str, request: Request) -> dict:
        check_bearer(state.admin_token, request.headers.get("authorization"))
        body = await read_body(request, MAX_REGISTRATION_BODY, too_large="invalidRequest")
        try:
            spec = json.loads(body)
            cfg = TaskConfig.from_json(spec["config"])
            url = str(spec["analyzer_url"])
            key_ids = [int(k) for k in spec["key_ids"]]
            crowds = [bytes.fromhex(c) for c in spec["crowds"]] if spec.get("crowds") is not None else None
            index = spec.get("shuffler", 0)
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError("shuffler must be an integer")
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise Problem(422, "invalidRequest", f"invalid task registration: {type(e).__name__}") from e
        if not 1 <= cfg.min_batch_size < 2**31:   # stored in a 32-bit column (OverflowError: 500)
            raise Problem(422, "invalidRequest", f"config.min_batch_size must be in [1, 2^31), got {cfg.min_batch_size}")
        if cfg.task_id != tid(task_hex):
            raise Problem(422, "invalidRequest", "task id in the URL differs from the configuration")
        state.register(cfg, url, key_ids, crowds, index)
        return {"task_id": task_hex, "min_batch_size": cfg.min_batch_size, "shuffler": index}

    @app.post("/v1/tasks/{task_hex}/reports")
    async def upload(task_hex: str, request: Request) -> dict:
        t = tid(task_hex)
        keys = state.admit_upload(request.headers.get("authorization"), request.client.host if request.client else "")
        body = await read_body(request, MAX_BODY_BYTES, t)  # 413 over the cap, 408 past the read deadline
        from starlette.concurrency import run_in_threadpool
        return await run_in_threadpool(state.ingest, t, body, client_keys=keys)

    @app.post("/v1/admin/tick")
    def admin_tick(request: Request, close_current: bool = False) -> dict:
        check_bearer(state.admin_token, request.headers.get("authorization"))
        return state.tick(close_current=close_current)

    @app.post("/v1/admin/retention")
    def admin_retention(request: Request) -> dict:
        check_bearer(state.admin_token, request.headers.get("authorization"))
        return state.enforce_retention()

    @app.get("/v1/admin/tasks/{task_hex}/counters")
    def counters(task_hex: str, request: Request) -> dict:
        check_bearer(state.admin_token, request.headers.get("authorization"))
        return state.counters(tid(task_hex))

    _ = math
    return app
