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
  (:func:`shuffledp.shuffle.shuffler.csprng_permutation`, from ``os.urandom``)
  and turned into a batch in one transaction (batch row + items inserted, pending rows deleted);
  otherwise rows older than ``max_wait_windows`` windows are expired (deleted, counted).
- Forwarder: ``PUT {analyzer}/v1/tasks/{t}/batches/{batch_id}`` with an HMAC-SHA256 request
  signature; the batch id is content-derived so a retry is idempotent. Items are deleted only
  after a 2xx; 5xx/timeouts/connection errors retry with exponential backoff and jitter;
  a 4xx marks the batch ``rejected`` (kept, never silently dropped).

- Retention (``tick`` every ``retention_every`` seconds, or ``POST /v1/admin/retention``): pending
  reports past both retention and ``max_wait_windows`` are deleted (counted), rejected batches lose
  their envelopes; batches the analyzer has not acknowledged are never deleted. Rules:
  ``service/retention.py``.

Multi-shuffler by attribute: each shuffler may be registered for a subset of a task's crowds
(``crowds`` in the registration); reports for other crowds are refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import secrets
import threading
import time
from typing import Any

import httpx
from fastapi import FastAPI, Request
from sqlalchemy import delete, func, select, update

from ..shuffle.shuffler import csprng_permutation
from .config import TaskConfig
from .http_common import Problem, check_bearer, install_problem_handlers, read_body, sign_request
from .storage import (insert_ignore, make_engine, shuffler_batch_items, shuffler_batches, shuffler_counters,
                      shuffler_pending, shuffler_tasks, upgrade)
from .wire import (ALLOWED_SUITES, MAX_UPLOAD_BYTES, MAX_UPLOAD_REPORTS, Batch, DecodeError, batch_id,
                   decode_upload, encode_batch, parse_header)

__all__ = ["ShufflerState", "create_shuffler_app"]

log = logging.getLogger("shuffledp.service.shuffler")

MAX_REPORTS_PER_REQUEST = MAX_UPLOAD_REPORTS
MAX_BODY_BYTES = MAX_UPLOAD_BYTES
COUNTER_NAME_LEN = shuffler_counters.c.name.type.length  # String(64) (storage.py, migration 0001)


def evaluated_counter_name(crowd: bytes) -> str:
    """Name of the counter holding the last closed window whose pool of ``crowd`` was evaluated.

    Fixed length (26 characters) whatever the crowd id's length (up to ``wire.MAX_CROWD_LEN`` = 64
    bytes): ``evaluated:`` + the first 16 hex characters of SHA-256(crowd). The crowd's hex id (up
    to 128 characters) would not fit the 64-character column (PostgreSQL refuses it with
    StringDataRightTruncation; SQLite stores it silently).
    """
    return "evaluated:" + hashlib.sha256(crowd).hexdigest()[:16]


class ShufflerState:
    def __init__(self, db_url: str, *, admin_token: str, peer_secret: bytes, tick_seconds: float = 1.0,
                 close_delay: float = 0.0, forward_timeout: float = 30.0, auto: bool = True,
                 drop_noise: Any = None, clock: Any = None, retention_every: float = 3600.0) -> None:
        self.engine = make_engine(db_url)
        upgrade(self.engine)
        self.admin_token, self.peer_secret = admin_token, peer_secret
        self.tick_seconds, self.close_delay, self.forward_timeout = tick_seconds, close_delay, forward_timeout
        self.write_lock = threading.Lock()
        self.work_lock = threading.Lock()
        self._tasks: dict[bytes, tuple[TaskConfig, str, set[int], set[bytes]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.auto = auto
        self.rng = secrets.SystemRandom()
        self.drop_noise = drop_noise  # optional callable(c) -> number of rows to drop (DP random drop)
        self.clock = clock or time.time   # injectable (tests); the only source of "now"
        self.retention_every = retention_every
        self._last_retention = -math.inf
        self.http = httpx.Client(timeout=forward_timeout, headers={"user-agent": "shuffledp-shuffler"})

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

    def register(self, cfg: TaskConfig, analyzer_url: str, key_ids: list[int], crowds: list[bytes] | None) -> None:
        reg = {"key_ids": sorted(set(int(k) for k in key_ids)),
               "crowds": [c.hex() for c in (crowds if crowds is not None else cfg.crowds)]}
        with self.write_lock, self.engine.begin() as c:
            c.execute(delete(shuffler_tasks).where(shuffler_tasks.c.task_id == cfg.task_id))
            c.execute(shuffler_tasks.insert().values(task_id=cfg.task_id, config=cfg.canonical().decode(),
                                                     analyzer_url=analyzer_url.rstrip("/"), key_ids=json.dumps(reg),
                                                     min_batch_size=cfg.min_batch_size))
        self._tasks.pop(cfg.task_id, None)

    def _bump(self, c, task_id: bytes, name: str, by: int) -> None:
        if by == 0:
            return
        r = c.execute(update(shuffler_counters).where(shuffler_counters.c.task_id == task_id,
                                                      shuffler_counters.c.name == name)
                      .values(value=shuffler_counters.c.value + by))
        if r.rowcount == 0:
            c.execute(shuffler_counters.insert().values(task_id=task_id, name=name, value=by))

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
        with self.engine.connect() as c:
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
    def ingest(self, task_id: bytes, body: bytes, now: float | None = None) -> dict:
        cfg, _url, key_ids, crowds = self.task(task_id)
        try:
            items = decode_upload(body, MAX_REPORTS_PER_REQUEST)
        except DecodeError as e:
            raise Problem(400, "invalidMessage", str(e), task_id) from e
        window = int((self.clock() if now is None else now) // cfg.batch_window)
        errors, rows, seen = [], {}, set()
        el = cfg.envelope_len
        for i, (crowd, env) in enumerate(items):
            if crowd not in crowds:
                errors.append({"i": i, "error": "unrecognizedCrowd"})
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
                       "envelope": env}
        with self.write_lock, self.engine.begin() as c:
            existing: set[bytes] = set()
            keys = list(rows)
            for s in range(0, len(keys), 5000):
                existing.update(r[0] for r in c.execute(select(shuffler_pending.c.envelope_digest).where(
                    shuffler_pending.c.task_id == task_id, shuffler_pending.c.envelope_digest.in_(keys[s:s + 5000]))))
            new = [rows[k] for k in keys if k not in existing]
            if new:
                c.execute(insert_ignore(self.engine, shuffler_pending), new)
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
        with self.engine.connect() as c:
            tids = {r[0] for r in c.execute(select(shuffler_pending.c.task_id).distinct())}
            tids |= {r[0] for r in c.execute(select(shuffler_batches.c.task_id).where(
                shuffler_batches.c.state.in_(("ready", "retrying", "rejected"))).distinct())}
        out = {"expired_retention": 0, "expired_retention_rejected": 0, "owed_batches_past_retention": 0}
        for task_id in sorted(tids):
            try:
                cfg, _u, _k, _c = self.task(task_id)
            except Problem:
                continue   # no configuration: nothing can be decided about its rows
            h_pending = shuffler_pending_horizon(cfg, now, self.close_delay)
            h = retention_horizon(cfg, now)
            with self.write_lock, self.engine.begin() as c:
                n_pending = c.execute(delete(shuffler_pending).where(
                    shuffler_pending.c.task_id == task_id, shuffler_pending.c.window < h_pending)).rowcount or 0
                rejected = c.execute(select(shuffler_batches.c.batch_id, shuffler_batches.c.n).where(
                    shuffler_batches.c.task_id == task_id, shuffler_batches.c.state == "rejected",
                    shuffler_batches.c.window < h)).all()
                for bid, _n in rejected:
                    c.execute(delete(shuffler_batch_items).where(shuffler_batch_items.c.batch_id == bid))
                    c.execute(update(shuffler_batches).where(shuffler_batches.c.batch_id == bid)
                              .values(state="expired"))
                n_rej = sum(int(n) for _b, n in rejected)
                owed = c.execute(select(func.count()).select_from(shuffler_batches).where(
                    shuffler_batches.c.task_id == task_id, shuffler_batches.c.state.in_(("ready", "retrying")),
                    shuffler_batches.c.window < h)).scalar_one()
                self._bump(c, task_id, "expired_retention", n_pending)
                self._bump(c, task_id, "expired_retention_rejected", n_rej)
            if owed:
                log.warning("%d undelivered batch(es) are past retention; kept until the analyzer acknowledges",
                            owed)
            out["expired_retention"] += n_pending
            out["expired_retention_rejected"] += n_rej
            out["owed_batches_past_retention"] += int(owed)
        return out

    def _form_batches(self, now: float, close_current: bool) -> int:
        made = 0
        with self.engine.connect() as c:
            groups = c.execute(select(shuffler_pending.c.task_id, shuffler_pending.c.crowd_id)
                               .group_by(shuffler_pending.c.task_id, shuffler_pending.c.crowd_id)).all()
        for task_id, crowd in groups:
            try:
                cfg, _u, _k, _c = self.task(task_id)
            except Problem:
                continue
            bw = cfg.batch_window
            closed = int((now - self.close_delay) // bw) - (0 if close_current else 1)
            with self.write_lock, self.engine.begin() as c:
                rows = c.execute(select(shuffler_pending.c.envelope_digest, shuffler_pending.c.window,
                                        shuffler_pending.c.envelope).where(
                    shuffler_pending.c.task_id == task_id, shuffler_pending.c.crowd_id == crowd,
                    shuffler_pending.c.window <= closed)).all()
                if not rows:
                    continue
                if cfg.drop_noise is not None:
                    # each evaluation of a pool is a DP release: at most once per closed window
                    if not self._claim_evaluation(c, task_id, crowd, closed):
                        continue
                drop = 0
                if cfg.drop_noise is not None:   # DP random drop (exact sampler, spec §6.7.4)
                    from .drop import sample_drop
                    drop = sample_drop(len(rows), cfg.drop_noise["eps"], cfg.drop_noise["delta"])
                elif self.drop_noise is not None:
                    drop = min(len(rows), max(0, int(self.drop_noise(len(rows)))))
                if len(rows) - drop >= cfg.min_batch_size:
                    rows = [rows[i] for i in csprng_permutation(len(rows))]  # the one CSPRNG permutation
                    dropped, kept = rows[:drop], rows[drop:]
                    envs = [r.envelope for r in kept]
                    window = max(r.window for r in kept)
                    bid = batch_id(task_id, crowd, window, envs)
                    c.execute(insert_ignore(self.engine, shuffler_batches), [{
                        "batch_id": bid, "task_id": task_id, "crowd_id": crowd, "window": window, "n": len(envs),
                        "state": "ready", "attempts": 0, "next_attempt_at": 0.0, "last_error": None}])
                    c.execute(insert_ignore(self.engine, shuffler_batch_items),
                              [{"batch_id": bid, "pos": i, "envelope": e} for i, e in enumerate(envs)])
                    self._delete_pending(c, task_id, [r.envelope_digest for r in rows])
                    self._bump(c, task_id, "released", len(envs))
                    self._bump(c, task_id, "dropped_noise", len(dropped))
                    made += 1
                else:
                    oldest_allowed = closed - cfg.max_wait_windows + 1
                    old = [r.envelope_digest for r in rows if r.window < oldest_allowed]
                    if old:
                        self._delete_pending(c, task_id, old)
                        self._bump(c, task_id, "expired", len(old))
        return made

    @staticmethod
    def _delete_pending(c, task_id: bytes, digests: list[bytes]) -> None:
        for s in range(0, len(digests), 5000):
            c.execute(delete(shuffler_pending).where(shuffler_pending.c.task_id == task_id,
                                                     shuffler_pending.c.envelope_digest.in_(digests[s:s + 5000])))

    def _forward_due(self, now: float | None = None) -> dict:
        now = self.clock() if now is None else now
        with self.engine.connect() as c:
            due = c.execute(select(shuffler_batches).where(shuffler_batches.c.state.in_(("ready", "retrying")),
                                                           shuffler_batches.c.next_attempt_at <= now)).all()
        ok = fail = 0
        for b in due:
            if self._forward_one(b):
                ok += 1
            else:
                fail += 1
        return {"forwarded": ok, "forward_failures": fail}

    def _forward_one(self, b: Any) -> bool:
        cfg, url, _k, _c = self.task(b.task_id)
        with self.engine.connect() as c:
            envs = [r[0] for r in c.execute(select(shuffler_batch_items.c.envelope).where(
                shuffler_batch_items.c.batch_id == b.batch_id).order_by(shuffler_batch_items.c.pos))]
        body = encode_batch(Batch(b.task_id, b.crowd_id, b.window, envs))
        path = f"/v1/tasks/{b.task_id.hex()}/batches/{b.batch_id.hex()}"
        err, rejected = None, False
        try:
            r = self.http.put(url + path, content=body, headers={
                "authorization": sign_request(self.peer_secret, "PUT", path, body),
                "content-type": "application/vnd.shuffledp.batch"})
            if 200 <= r.status_code < 300:
                with self.write_lock, self.engine.begin() as c:
                    c.execute(update(shuffler_batches).where(shuffler_batches.c.batch_id == b.batch_id)
                              .values(state="delivered", attempts=b.attempts + 1, last_error=None))
                    c.execute(delete(shuffler_batch_items).where(shuffler_batch_items.c.batch_id == b.batch_id))
                    self._bump(c, b.task_id, "forwarded_reports", b.n)
                return True
            err = f"HTTP {r.status_code}"
            rejected = 400 <= r.status_code < 500 and r.status_code not in (408, 409, 425, 429)
        except httpx.HTTPError as e:
            err = type(e).__name__
        backoff = min(60.0, 0.2 * 2 ** min(b.attempts, 10)) * (0.5 + self.rng.random())
        with self.write_lock, self.engine.begin() as c:
            c.execute(update(shuffler_batches).where(shuffler_batches.c.batch_id == b.batch_id).values(
                state="rejected" if rejected else "retrying", attempts=b.attempts + 1,
                next_attempt_at=self.clock() + backoff, last_error=err))
            self._bump(c, b.task_id, "forward_failures", 1)
        log.warning("forward of a batch failed: %s", err)
        return False

    # ------------------------------------------------------------------ background loop
    def start(self) -> None:
        if self.auto and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="shuffler-batcher", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_seconds):
            try:
                self.tick()
            except Exception as e:  # keep running; the state is in the DB
                log.error("batcher round failed: %s", type(e).__name__)


def create_shuffler_app(state: ShufflerState) -> FastAPI:
    app = FastAPI(title="shuffledp shuffler", docs_url=None, redoc_url=None,
                  on_startup=[state.start], on_shutdown=[state.stop])
    install_problem_handlers(app)
    app.state.shuffler = state

    def tid(task_hex: str) -> bytes:
        try:
            t = bytes.fromhex(task_hex)
        except ValueError as e:
            raise Problem(404, "unrecognizedTask", "task id must be 64 hex characters") from e
        if len(t) != 32:
            raise Problem(404, "unrecognizedTask", "task id must be 64 hex characters")
        return t

    @app.get("/healthz")
    def healthz() -> dict:
        return {"ok": True}

    @app.put("/v1/tasks/{task_hex}")
    async def register(task_hex: str, request: Request) -> dict:
        check_bearer(state.admin_token, request.headers.get("authorization"))
        try:
            spec = json.loads(await request.body())
            cfg = TaskConfig.from_json(spec["config"])
            url = str(spec["analyzer_url"])
            key_ids = [int(k) for k in spec["key_ids"]]
            crowds = [bytes.fromhex(c) for c in spec["crowds"]] if spec.get("crowds") is not None else None
        except (ValueError, KeyError, TypeError) as e:
            raise Problem(422, "invalidRequest", f"invalid task registration: {type(e).__name__}") from e
        if cfg.task_id != tid(task_hex):
            raise Problem(422, "invalidRequest", "task id in the URL differs from the configuration")
        state.register(cfg, url, key_ids, crowds)
        return {"task_id": task_hex, "min_batch_size": cfg.min_batch_size}

    @app.post("/v1/tasks/{task_hex}/reports")
    async def upload(task_hex: str, request: Request) -> dict:
        t = tid(task_hex)
        body = await read_body(request, MAX_BODY_BYTES, t)  # 413 over the cap, 408 past the read deadline
        from starlette.concurrency import run_in_threadpool
        return await run_in_threadpool(state.ingest, t, body)

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
