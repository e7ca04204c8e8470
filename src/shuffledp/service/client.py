"""Client SDK: encode (same mechanism code, n = 1), seal to the analyzer, durable outbox, budgets.

- Configuration and HPKE keys are fetched from the **analyzer** origin (never the shuffler: a
  shuffler serving keys could substitute its own and read every report). The configuration's
  digest is recomputed and checked; test-only mechanisms are refused unless explicitly allowed.
- Randomness comes from :func:`shuffledp.core.rng.secure_rng`: a cryptographic bit generator
  (AES-128-CTR or ChaCha20) keyed from ``os.urandom``, a fresh one per report; the SDK takes no seed.
- Per-client budget (Apple-style caps): at most ``max_reports_per_window`` reports per batch window
  and ``max_reports_per_day`` per UTC day, per task, recorded in a local SQLite ledger **before**
  the report is queued; exceeding raises :class:`BudgetExceededError`. With ``memoize`` the
  randomized message for a given value is drawn once and reused (repeated reports of one value
  reveal nothing new: the same eps-LDP output is re-sent under a fresh report id).
- Longitudinal oracles (:mod:`shuffledp.local.longitudinal`: L-GRR, L-OUE, LOLOHA, dBitFlip):
  the client's setup (hash seed, sampled buckets) and the **permanent answer** of each memo key are
  drawn once and reused; every report applies a fresh instantaneous randomization to it. They are
  written in the same transaction that queues the report, so a report never leaves with an
  answer that a restart could redraw (a redraw would spend another eps_perm).
- Memo entries are **encrypted at rest** (AES-256-GCM, a fresh 96-bit nonce per write, the task and
  the entry's slot as associated data) under a key the client holds (``memo_key``, or a 0600 key
  file beside the store); an entry's slot is an HMAC of the value, so neither the values nor the
  answers are stored in the clear (``PRAGMA secure_delete`` overwrites replaced entries). A store
  whose entries the key cannot open is refused, never silently redrawn.
- Privacy ledger (:meth:`ShuffleDPClient.privacy_spent`): the eps this client's reports have cost.
  Where the longitudinal guarantee applies, the reports about one memo key cost ``eps_1`` for one
  report and at most ``eps_perm`` however many they are (``min(eps_perm, r eps_irr)`` where the fresh
  layer acts on one permanent symbol: :func:`shuffledp.local.longitudinal.key_epsilon`); a memoized
  message costs its eps once; otherwise every report costs its eps. ``max_epsilon`` caps it.
- Outbox: each sealed envelope is stored (SQLite, WAL, synchronous=FULL) before upload; ``flush``
  uploads oldest first in requests sized to fit the shuffler's body limit, deletes on 200
  (accepted or duplicate), splits a request refused with 413, and keeps and retries (jittered
  exponential backoff) on network errors, 5xx, 404 (task not registered at the shuffler yet),
  401 (client token refused), 408/429 and other 4xx. Only reports the shuffler says are
  themselves invalid, and reports the upload format cannot carry (envelope over 65,535 bytes),
  are dropped (counted per reason in ``stats()`` and logged); ``flush`` never raises for them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import ShuffleDPError, ValidationError
from ..core.rng import as_generator, secure_rng
from .config import TaskConfig
from .hpke import AEAD_AES_128_GCM, KDF_HKDF_SHA256
from .wire import (MAX_CROWD_LEN, MAX_ENVELOPE_LEN, MAX_UPLOAD_BYTES, MAX_UPLOAD_REPORTS, UPLOAD_HEADER_LEN,
                   UPLOAD_MESSAGE, UPLOAD_USER, USER_MARKER_LEN, KeyConfig, check_envelope_fits, decode_key_list,
                   encode_upload, encode_upload_v2, marker_digest, seal_report, upload_item_len)

if TYPE_CHECKING:  # httpx (with its CLI dependencies) is imported when a client is constructed
    import httpx

__all__ = ["ShuffleDPClient", "BudgetExceededError", "ConfigError", "fetch_task", "encode_reports",
           "seal_many", "upload", "encode_protocol_messages", "upload_protocol_users", "user_markers"]

SDK_USER_AGENT = "shuffledp-sdk/1"
#: the shuffler's limits per upload request (``wire.MAX_UPLOAD_BYTES``, ``wire.MAX_UPLOAD_REPORTS``);
#: a shuffler with smaller ones answers 413 and the client halves its requests
UPLOAD_MAX_BYTES = MAX_UPLOAD_BYTES
UPLOAD_MAX_REPORTS = MAX_UPLOAD_REPORTS

log = logging.getLogger("shuffledp.client")


class BudgetExceededError(ValidationError):
    """The client policy's per-window/per-day report cap would be exceeded."""


class ConfigError(ShuffleDPError):
    """The task configuration or key list fetched from the analyzer is not acceptable."""


def fetch_task(http: httpx.Client, analyzer_url: str, task_id: bytes,
               allow_test_mechanisms: bool = False) -> tuple[TaskConfig, KeyConfig]:
    """Fetch and verify the task configuration and the preferred analyzer key (from the analyzer)."""
    r = http.get(f"{analyzer_url}/v1/tasks/{task_id.hex()}/config")
    r.raise_for_status()
    o = r.json()
    cfg = TaskConfig.from_json(o["config"])
    if cfg.digest.hex() != o["config_digest"] or cfg.task_id != task_id:
        raise ConfigError("task configuration digest or id mismatch")
    if cfg.test_only and not allow_test_mechanisms:
        raise ConfigError("task uses a test-only mechanism (no privacy); refused")
    if cfg.min_batch_size < cfg.min_batch_size_floor:
        raise ConfigError("task minimum batch size below its own floor")
    floor = min_time_precision()
    if cfg.time_precision < floor:
        # the analyzer serves this configuration and is the party the shuffle hides clients from: a
        # finer report time would tell it when each report was made (linkable to its connection)
        raise ConfigError(f"task's time_precision is {cfg.time_precision} s, below the floor of {floor} s: report "
                          f"times that fine link reports to their arrival; refused")
    try:   # reports the upload format cannot carry would never leave the outbox
        check_envelope_fits(cfg.report_schema.length)
    except ValidationError as e:
        raise ConfigError(f"task's reports are too large to upload: {e}") from e
    _check_min_batch_size(cfg)
    kr = http.get(f"{analyzer_url}/v1/hpke-keys")
    kr.raise_for_status()
    keys = [k for k in decode_key_list(kr.content) if (KDF_HKDF_SHA256, AEAD_AES_128_GCM) in k.suites]
    if not keys:
        raise ConfigError("analyzer offers no supported HPKE key")
    return cfg, keys[0]


def min_time_precision() -> int:
    """The finest report time the SDK accepts (seconds): :data:`~shuffledp.service.config.MIN_TIME_PRECISION`,
    lowered only by ``SHUFFLEDP_MIN_TIME_PRECISION`` (tests, as for the services' ``serve``)."""
    from .config import MIN_TIME_PRECISION
    v = os.environ.get("SHUFFLEDP_MIN_TIME_PRECISION", "")
    return int(v) if v.isdigit() and int(v) >= 1 else MIN_TIME_PRECISION


def _check_min_batch_size(cfg: TaskConfig) -> None:
    """Recompute the minimum batch size locally (same accountant as the analyzer) and refuse a smaller one.

    The analyzer advertises ``min_batch_size``; a smaller value than the task's own eps0 and
    central target require would let batches too small for the advertised guarantee through.
    """
    if cfg.protocol is not None:
        from .config import protocol_min_batch_size
        try:
            need_users = protocol_min_batch_size(cfg.protocol_object(), cfg.min_batch_size_floor)
        except ValidationError as e:
            raise ConfigError(f"task's protocol cannot be built: {e}") from e
        if cfg.min_batch_size < need_users:
            raise ConfigError(f"task advertises min_batch_size {cfg.min_batch_size}, but its protocol "
                              f"{cfg.protocol['name']!r} is calibrated for {need_users} users per batch; refused")
        return
    if cfg.mechanism.get("kind") in ("test", "central"):
        return   # no amplification claimed: the floor is the threshold (checked above)
    import math

    from ..accounting.shuffle import min_batch_for_target as min_batch_size
    try:
        need = min_batch_size(float(cfg.eps_local), float(cfg.target_central["eps"]),
                              float(cfg.target_central["delta"]))
    except (ValidationError, KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"task's central target cannot be reached from its mechanism: {e}") from e
    need = max(cfg.min_batch_size_floor, math.ceil(need / cfg.honest_fraction))
    if cfg.min_batch_size < need:
        raise ConfigError(f"task advertises min_batch_size {cfg.min_batch_size}, but eps0={cfg.eps_local:g} and "
                          f"target central eps={cfg.target_central['eps']:g}, delta={cfg.target_central['delta']:g} "
                          f"(honest fraction {cfg.honest_fraction:g}) need at least {need} reports per batch; refused")


def encode_reports(cfg: TaskConfig, values: Any, now: float, rng: None = None, mech: Any = None) -> np.ndarray:
    """Vectorized encode of many clients' values: an (n, plaintext_len) uint8 array.

    Each row is one client's report: the mechanism's eps-LDP output, a fresh 16-byte random
    report id, and the client time truncated to ``time_precision``.

    For encoding **many simulated clients in one process** (the demo, benchmarks): one
    cryptographic generator (:func:`shuffledp.core.rng.secure_rng`, keyed from ``os.urandom``)
    covers the whole vectorized call. A real client encodes through :class:`ShuffleDPClient`,
    which draws a fresh one for every report.
    """
    mech = mech or cfg.mechanism_object()
    rng = as_generator(rng, production=True)  # secure_rng(): CSPRNG keyed from os.urandom; no seed accepted
    reports = mech.randomize(values, rng)
    n = next(iter(reports.values())).shape[0]
    ids = np.frombuffer(secrets.token_bytes(16 * n), dtype=np.uint8).reshape(n, 16)
    times = np.full(n, int(now) // cfg.time_precision, dtype=np.int64)
    return cfg.report_schema.encode(reports, ids, times)


def encode_protocol_messages(cfg: TaskConfig, values: Any, now: float, rng: None = None
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized encode of many clients of a protocol task (simulated clients: demo, benchmarks).

    Returns ``(plaintexts, route, users)``: one plaintext row per message (the protocol's message,
    a fresh random 16-byte message id, the client time truncated to ``time_precision``), the
    shuffler each message goes to, and the number of users each shuffler serves (one user marker
    each, unless the protocol sends one message per user: then the messages count the users). As
    :func:`encode_reports`, one cryptographic generator covers the whole call.
    """
    p = cfg.protocol_object()
    rng = as_generator(rng, production=True)
    values = np.asarray(values)
    n = int(values.shape[0])
    msgs = dict(p.encode(values, rng))
    route = np.asarray(msgs.pop("shuffler", np.zeros(_rows(msgs), dtype=np.int64)), dtype=np.int64)
    m = _rows(msgs)
    ids = np.frombuffer(secrets.token_bytes(16 * m), dtype=np.uint8).reshape(m, 16)
    times = np.full(m, cfg.report_time(now), dtype=np.int64)   # a window's start if shufflers add fakes
    pts = cfg.report_schema.encode(msgs, ids, times)
    s = p.n_shufflers
    if s == 1:
        users = np.array([n], dtype=np.int64)
    elif p.user_routing == "every":
        users = np.full(s, n, dtype=np.int64)
    elif m == n:   # one message per user: a user is served by its message's shuffler
        users = np.bincount(route, minlength=s).astype(np.int64)
    else:
        raise ValidationError(f"{p.name}: users spread over shufflers with several messages each cannot be "
                              "encoded in bulk; use ShuffleDPClient per user", parameter="protocol")
    return pts, route, users


def upload_protocol_users(http: httpx.Client, cfg: TaskConfig, key: KeyConfig, shuffler_urls: list[str],
                          values: Any, now: float, crowd: bytes = b"", chunk: int = 5000
                          ) -> tuple[np.ndarray, np.ndarray, int]:
    """Simulated clients of a protocol task in bulk: encode, seal each message, upload with markers.

    Every message goes to its shuffler (``shuffler_urls`` in the deployment's order) in requests
    of at most ``chunk`` items; each shuffler also gets one user marker per user it serves.
    Returns ``(plaintexts, route, acknowledged)`` (the plaintexts the analyzer will open, the
    shuffler of each, and the number of items the shufflers accepted).
    """
    pts, route, users = encode_protocol_messages(cfg, values, now)
    envs = seal_many(cfg, key, pts, crowd)
    acked = 0
    by_message = cfg.protocol_object().one_message_per_user   # a message counts its user: no markers
    for j, url in enumerate(shuffler_urls):
        mine = [(crowd, envs[i]) for i in np.flatnonzero(route == j)]
        marks = [] if by_message else user_markers(int(users[j]))
        for s in range(0, max(len(mine), len(marks), 1), chunk):
            r = upload(http, url, cfg.task_id, mine[s:s + chunk], markers=marks[s:s + chunk], marker_crowd=crowd)
            acked += int(r["accepted"])
    return pts, route, acked


def _rows(msgs: dict) -> int:
    return int(next(iter(msgs.values())).shape[0]) if msgs else 0


def user_markers(k: int) -> list[bytes]:
    """``k`` fresh user markers (16 random bytes each; one per user per shuffler it reaches)."""
    return [secrets.token_bytes(USER_MARKER_LEN) for _ in range(k)]


def seal_many(cfg: TaskConfig, key: KeyConfig, plaintexts: np.ndarray, crowd: bytes) -> list[bytes]:
    """Seal each plaintext row individually (one HPKE encapsulation per report)."""
    return [seal_report(key, cfg.task_id, cfg.digest, crowd, row.tobytes()) for row in plaintexts]


def upload(http: httpx.Client, shuffler_url: str, task_id: bytes, items: list[tuple[bytes, bytes]],
           client_token: str | None = None, markers: list[bytes] | None = None, marker_crowd: bytes = b"") -> dict:
    """Upload ``(crowd, envelope)`` items; with ``markers`` (protocol tasks) an SDU2 body that also
    carries those user markers (in crowd ``marker_crowd``)."""
    headers = {"content-type": "application/vnd.shuffledp.upload"}
    if client_token is not None:
        headers["authorization"] = f"Bearer {client_token}"
    if markers is None:
        body = encode_upload(items)
    else:
        body = encode_upload_v2([(UPLOAD_MESSAGE, c, e) for c, e in items]
                                + [(UPLOAD_USER, marker_crowd, mk) for mk in markers])
    r = http.post(f"{shuffler_url}/v1/tasks/{task_id.hex()}/reports", content=body, headers=headers)
    r.raise_for_status()
    return r.json()


def _fitting(rows: list, max_bytes: int) -> int:
    """How many of ``rows`` (outbox rows, oldest first) one upload body of ``max_bytes`` holds (>= 1)."""
    size, k = UPLOAD_HEADER_LEN, 0
    for row in rows:
        size += upload_item_len(row[1], row[2])
        if size > max_bytes:
            break
        k += 1
    return max(k, 1)


class ShuffleDPClient:
    """One client device's SDK instance for one task.

    Parameters
    ----------
    analyzer_url, shuffler_url : str
        Origins. ``shuffler_url`` may be a ``{crowd_hex: url}`` mapping (multi-shuffler by attribute).
    task_id : bytes
    state_path : str or Path
        SQLite file for the outbox, ledger and memo table.
    crowd : bytes
        This client's crowd (attribute) id; must be one of the task's crowds.
    client_token : str, optional
        Bearer token the shuffler's operator issued to this client (sent as ``Authorization:
        Bearer`` with uploads only, never to the analyzer); needed when the shuffler checks tokens.
    memo_key : bytes, optional
        32-byte key that encrypts the memo entries at rest (from the platform's key store). By
        default a random key is created once in ``<state_path>.memo-key`` (mode 0600) and read back.
    max_epsilon : float, optional
        Cap on :meth:`privacy_spent` (local eps this client's reports cost, longitudinal guarantee
        applied); a report that would exceed it raises :class:`BudgetExceededError`.
    """

    def __init__(self, analyzer_url: str, shuffler_url: str | dict[str, str], task_id: bytes,
                 state_path: str | Path, crowd: bytes = b"", *, allow_test_mechanisms: bool = False,
                 http: httpx.Client | None = None, max_outbox: int = 10_000,
                 client_token: str | None = None, memo_key: bytes | None = None,
                 max_epsilon: float | None = None) -> None:
        self.client_token = client_token
        if http is None:
            import httpx

            http = httpx.Client(timeout=30.0, headers={"user-agent": SDK_USER_AGENT})
        self.http = http
        self.analyzer_url = analyzer_url.rstrip("/")
        self.cfg, self.key = fetch_task(self.http, self.analyzer_url, task_id, allow_test_mechanisms)
        if crowd not in self.cfg.crowds:
            raise ValidationError(f"crowd {crowd.hex()!r} is not one of the task's crowds", parameter="crowd")
        self.crowd = crowd
        if isinstance(shuffler_url, dict):
            shuffler_url = shuffler_url[crowd.hex()]
        urls = [shuffler_url] if isinstance(shuffler_url, str) else list(shuffler_url)
        if len(urls) != self.cfg.n_shufflers or not all(isinstance(u, str) for u in urls):
            raise ValidationError(f"the task's protocol uses {self.cfg.n_shufflers} shuffler(s): give shuffler_url as "
                                  f"a list of {self.cfg.n_shufflers} URL(s) in the deployment's shuffler order",
                                  parameter="shuffler_url")
        self.shuffler_urls = [u.rstrip("/") for u in urls]
        self.shuffler_url = self.shuffler_urls[0]
        self.protocol = self.cfg.protocol_object() if self.cfg.protocol is not None else None
        self.mech = self.cfg.mechanism_object() if self.protocol is None else None
        self.max_outbox = max_outbox
        self.upload_max_bytes = UPLOAD_MAX_BYTES
        self.upload_max_reports = UPLOAD_MAX_REPORTS
        if max_epsilon is not None:
            from ..core.validation import check_epsilon
            max_epsilon = check_epsilon(max_epsilon, "max_epsilon")
        self.max_epsilon = max_epsilon
        self.db = sqlite3.connect(str(state_path), isolation_level=None, check_same_thread=False)
        for p in ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA secure_delete=ON"):
            self.db.execute(p)
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS outbox(digest BLOB PRIMARY KEY, task BLOB, crowd BLOB, envelope BLOB,
                                              plaintext BLOB, attempts INTEGER DEFAULT 0);
            CREATE TABLE IF NOT EXISTS ledger(task BLOB, period TEXT, count INTEGER, PRIMARY KEY(task, period));
            CREATE TABLE IF NOT EXISTS stats(name TEXT PRIMARY KEY, value INTEGER);""")
        cols = {r[1] for r in self.db.execute("PRAGMA table_info(outbox)")}
        if "shuffler" not in cols:   # outboxes written before protocol tasks: all messages, shuffler 0
            self.db.execute("ALTER TABLE outbox ADD COLUMN shuffler INTEGER NOT NULL DEFAULT 0")
            self.db.execute("ALTER TABLE outbox ADD COLUMN kind INTEGER NOT NULL DEFAULT 0")
        self.memo = _SealedMemo(self.db, _memo_key(state_path, memo_key), self.cfg.task_id)
        #: the message of this process's last queued report, ``{field: [rows, dtype]}`` (the user's
        #: own randomized output, kept in memory only; ``None`` before the first report)
        self.last_message: dict | None = None
        self._longitudinal = self.mech is not None and _is_longitudinal(self.mech)
        #: the longitudinal view of the mechanism (RAPPOR through an adapter: cohort as setup, PRR as
        #: the permanent answer, IRR fresh per report)
        self._long = (_RapporLongitudinal(self.mech) if type(self.mech).__name__ == "Rappor" else self.mech) \
            if self._longitudinal else None

    # ------------------------------------------------------------------ budget
    def _periods(self, now: float) -> tuple[str, str]:
        return f"w{int(now) // self.cfg.batch_window}", f"d{int(now) // 86400}"

    def remaining(self, now: float | None = None) -> int:
        """Reports this client may still send now (min of the window and day caps)."""
        now = time.time() if now is None else now
        pw, pd = self._periods(now)
        get = lambda p: (self.db.execute("SELECT count FROM ledger WHERE task=? AND period=?",  # noqa: E731
                                         (self.cfg.task_id, p)).fetchone() or (0,))[0]
        pol = self.cfg.client_policy
        return max(0, min(pol.max_reports_per_window - get(pw), pol.max_reports_per_day - get(pd)))

    # ------------------------------------------------------------------ report
    def _message(self, value: Any) -> tuple[dict[str, np.ndarray], float]:
        """One report's message and the eps it adds to :meth:`privacy_spent` (inside the caller's
        transaction: the memo entries it draws are committed with the queued report)."""
        rng = secure_rng()
        if self._longitudinal:
            return self._longitudinal_message(value, rng)
        eps = self._report_epsilon()
        memoize = self.cfg.client_policy.memoize
        if memoize:
            slot = self.memo.slot(b"msg", json.dumps(np.asarray(value).tolist()).encode())
            entry = self.memo.get(slot)
            if entry is not None:
                return _decode_message(entry["message"]), 0.0   # the same eps-LDP output again: no new loss
        if self.protocol is not None:   # one user's messages (several for a multi-message protocol)
            rep = dict(self.protocol.encode(np.asarray([value]), rng))
        else:
            rep = self.mech.randomize(np.asarray([value]), rng)
        if memoize:
            self.memo.put(slot, {"message": _encode_message(rep)})
        return rep, eps

    def _report_epsilon(self) -> float:
        """The local eps one fresh report costs: the task's eps0 (``inf`` where it has no local
        guarantee: test and central-mode mechanisms, protocols without a local randomizer)."""
        return float(self.cfg.eps_local)

    def _longitudinal_message(self, value: Any, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], float]:
        """Memoized setup and permanent answer, fresh instantaneous randomization."""
        mech = self._long
        x = mech.check_values(np.asarray([value]))
        setup_slot = self.memo.slot(b"setup")
        entry = self.memo.get(setup_slot)
        if entry is None:
            setup = np.asarray(mech.setup(1, rng), dtype=np.int64)
            self.memo.put(setup_slot, {"setup": setup.tolist()})
        else:
            setup = np.asarray(entry["setup"], dtype=np.int64).reshape(1, mech.setup_width)
        key = int(mech.memo_keys(x, setup)[0])
        perm_slot = self.memo.slot(b"perm", str(key).encode())
        entry = self.memo.get(perm_slot)
        if entry is None:
            answer = np.asarray(mech.permanent(np.array([key], dtype=np.int64), setup, rng))
            reports = 0
        else:
            answer = np.asarray(entry["answer"], dtype=entry["dtype"]).reshape(1, mech.answer_width)
            reports = int(entry["reports"])
        self.memo.put(perm_slot, {"answer": answer.tolist(), "dtype": answer.dtype.str, "reports": reports + 1})
        from ..local.longitudinal import key_epsilon
        loss = key_epsilon([reports, reports + 1], float(mech.epsilon_perm), float(mech.epsilon_one),
                           getattr(mech, "epsilon_irr", None))
        added = float(loss[1] - loss[0])
        return mech.instantaneous(answer, setup, rng), added

    def permanent_answer(self, value: Any) -> np.ndarray | None:
        """The memoized permanent answer this client holds for ``value`` (decrypted), or ``None``
        (not reported yet, or not a longitudinal task)."""
        if not self._longitudinal:
            return None
        setup = self.memo.get(self.memo.slot(b"setup"))
        if setup is None:
            return None
        mech = self._long
        s = np.asarray(setup["setup"], dtype=np.int64).reshape(1, mech.setup_width)
        key = int(mech.memo_keys(mech.check_values(np.asarray([value])), s)[0])
        entry = self.memo.get(self.memo.slot(b"perm", str(key).encode()))
        return None if entry is None else np.asarray(entry["answer"], dtype=entry["dtype"])

    def memoized_message(self, value: Any) -> dict | None:
        """The memoized message of ``value`` as ``{field: [rows, dtype]}`` (decrypted), or ``None``."""
        entry = self.memo.get(self.memo.slot(b"msg", json.dumps(np.asarray(value).tolist()).encode()))
        return None if entry is None else entry["message"]

    def privacy_spent(self) -> float:
        """Local eps this client's reports of this task have cost so far (see the module docstring)."""
        row = self.db.execute("SELECT epsilon FROM privacy_ledger WHERE task=?", (self.cfg.task_id,)).fetchone()
        return float(row[0]) if row else 0.0

    def report(self, value: Any, now: float | None = None) -> bytes:
        """Encode, seal and queue one report; returns its envelope digest (the receipt).

        Raises BudgetExceededError (nothing queued, nothing recorded) when the task's client
        policy cap for the current window or day is reached.
        """
        now = time.time() if now is None else now
        pw, pd = self._periods(now)
        pol = self.cfg.client_policy
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for p, cap in ((pw, pol.max_reports_per_window), (pd, pol.max_reports_per_day)):
                used = (self.db.execute("SELECT count FROM ledger WHERE task=? AND period=?",
                                        (self.cfg.task_id, p)).fetchone() or (0,))[0]
                if used >= cap:
                    raise BudgetExceededError(
                        f"client policy allows at most {cap} report(s) per {'window' if p == pw else 'day'} for "
                        f"task {self.cfg.name!r}; {used} already sent", parameter="client_policy")
            rep, added = self._message(value)
            spent = self.privacy_spent()
            if self.max_epsilon is not None and added > 0 and spent + added > self.max_epsilon * (1 + 1e-12):
                raise BudgetExceededError(
                    f"this report would bring the local eps spent on task {self.cfg.name!r} to {spent + added:.6g}, "
                    f"above max_epsilon={self.max_epsilon:g}", parameter="max_epsilon")
            if added > 0:
                self.db.execute("INSERT INTO privacy_ledger VALUES (?, ?) ON CONFLICT(task) DO UPDATE "
                                "SET epsilon = epsilon + excluded.epsilon", (self.cfg.task_id, added))
            rows = self._sealed_rows(rep, now)
            d = rows[0][0]
            for p in (pw, pd):
                self.db.execute("INSERT INTO ledger VALUES (?,?,1) ON CONFLICT(task, period) DO UPDATE "
                                "SET count = count + 1", (self.cfg.task_id, p))
            n_out = self.db.execute("SELECT count(*) FROM outbox").fetchone()[0]
            if n_out + len(rows) > self.max_outbox:
                k = n_out + len(rows) - self.max_outbox
                self.db.execute("DELETE FROM outbox WHERE rowid IN (SELECT rowid FROM outbox ORDER BY rowid LIMIT ?)",
                                (k,))
                self._stat("outbox_dropped", k)
            # the plaintext (an eps-LDP output + random id) is kept so a report refused with
            # outdatedConfig can be re-sealed once under the analyzer's new key
            self.db.executemany("INSERT INTO outbox(digest, task, crowd, envelope, plaintext, shuffler, kind) "
                                "VALUES (?,?,?,?,?,?,?)",
                                [(dg, self.cfg.task_id, self.crowd, env, pt, j, kind) for dg, env, pt, j, kind in rows])
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.last_message = _encode_message(rep)
        return d

    def _sealed_rows(self, rep: dict[str, np.ndarray], now: float) -> list[tuple[bytes, bytes, bytes | None, int, int]]:
        """Outbox rows ``(digest, envelope, plaintext, shuffler, kind)`` for one report.

        Each message is sealed separately under a fresh random id (multi-message protocols send
        several envelopes, unlinkable to one another); a protocol report adds one user marker for
        every shuffler its messages go to (shuffler 0 when it has none), which is how the shufflers
        count users without linking messages. The first row's digest is the report's receipt.
        """
        rep = dict(rep)
        route = np.asarray(rep.pop("shuffler", np.zeros(_rows(rep), dtype=np.int64)), dtype=np.int64)
        m = _rows(rep)
        ids = np.frombuffer(secrets.token_bytes(16 * m), dtype=np.uint8).reshape(m, 16)
        pts = self.cfg.report_schema.encode(rep, ids, np.full(m, self.cfg.report_time(now)))
        rows = []
        for i in range(m):   # one HPKE encapsulation per message (a handful per user)
            env = seal_report(self.key, self.cfg.task_id, self.cfg.digest, self.crowd, pts[i].tobytes())
            rows.append((hashlib.sha256(env).digest(), env, pts[i].tobytes(), int(route[i]), UPLOAD_MESSAGE))
        if self.protocol is not None and not self.protocol.one_message_per_user:
            reached = sorted(set(route.tolist())) or [0]
            if self.protocol.user_routing == "one" and len(reached) > 1:
                raise ValidationError(f"{self.protocol.name} routes one user's messages to several shufflers but "
                                      "counts each user at one of them", parameter="protocol")
            for j in reached:
                mk = secrets.token_bytes(USER_MARKER_LEN)
                rows.append((marker_digest(mk), mk, None, int(j), UPLOAD_USER))
        return rows

    def _stat(self, name: str, by: int) -> None:
        self.db.execute("INSERT INTO stats VALUES (?,?) ON CONFLICT(name) DO UPDATE SET value = value + ?",
                        (name, by, by))

    def pending(self) -> int:
        return self.db.execute("SELECT count(*) FROM outbox").fetchone()[0]

    def _count_refused(self, reason: str, k: int) -> None:
        """Count ``k`` reports refused as invalid (inside the caller's transaction)."""
        self._stat("refused", k)
        self._stat(f"refused:{reason}", k)

    def _warn_refused(self, reason: str, k: int) -> None:
        log.warning("shuffler refused %d report(s) of task %s as invalid (%s); dropped from the outbox",
                    k, self.cfg.task_id.hex()[:16], reason)

    def _refuse(self, rows: list, reason: str) -> None:
        """Delete reports the shuffler said are themselves invalid; counted per reason and logged."""
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("DELETE FROM outbox WHERE digest=?", [(row[0],) for row in rows])
        self._count_refused(reason, len(rows))
        self.db.execute("COMMIT")
        self._warn_refused(reason, len(rows))

    def stats(self) -> dict[str, int]:
        """The outbox's counters: ``refused`` (and ``refused:<reason>``), ``outbox_dropped``."""
        return dict(self.db.execute("SELECT name, value FROM stats").fetchall())

    def flush(self, max_attempts: int = 8, batch: int = 1000, base_delay: float = 0.1) -> dict:
        """Upload the outbox (oldest first); returns {"sent": n, "refused": m, "left": k}.

        Each request holds at most ``batch`` reports and is sized from the reports' lengths to fit
        ``upload_max_bytes`` (the shuffler's body limit). Reports leave the outbox only when
        acknowledged (200: accepted or duplicate) or when the shuffler says the report itself is
        invalid (a per-report error in a 200, or 400/413 for a request holding that one report);
        those are counted in :meth:`stats` (``refused:<reason>``) and logged. A 413 or 400 for a
        request of several reports halves the request size (until the offending report is alone).
        Everything else keeps the reports and retries with jittered exponential backoff
        (``Retry-After`` honoured): network errors, 5xx, 408/425/429, 404 (a task the analyzer
        announced but the shuffler has not registered yet) and other 4xx. After ``max_attempts``
        consecutive failures ``flush`` returns; the reports stay queued for the next call.
        """
        out = {"sent": 0, "refused": 0}
        for j, url in enumerate(self.shuffler_urls):   # each shuffler gets the messages routed to it
            r = self._flush_to(j, url, max_attempts, batch, base_delay)
            out["sent"] += r["sent"]
            out["refused"] += r["refused"]
        return {**out, "left": self.pending()}

    def _acknowledged(self, rows: list, errors: list, shuffler: int) -> tuple[int, int]:
        """A 200 for ``rows``: drop them from the outbox, re-seal once under the analyzer's current key
        the messages refused as ``outdatedConfig``, count the others refused; returns (sent, refused)."""
        errs = {e["i"]: e["error"] for e in errors}
        outdated = [i for i, err in errs.items()
                    if err == "outdatedConfig" and rows[i][4] == 0 and rows[i][5] == UPLOAD_MESSAGE]
        if outdated:  # refetch the analyzer's keys (from the analyzer) and re-seal once
            self.cfg, self.key = fetch_task(self.http, self.analyzer_url, self.cfg.task_id,
                                            self.cfg.test_only)
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("DELETE FROM outbox WHERE digest=?", [(row[0],) for row in rows])
        for i in outdated:
            pt = rows[i][3]
            env = seal_report(self.key, self.cfg.task_id, self.cfg.digest, rows[i][1], pt)
            self.db.execute("INSERT OR IGNORE INTO outbox(digest, task, crowd, envelope, plaintext, attempts, "
                            "shuffler, kind) VALUES (?,?,?,?,?,1,?,?)",
                            (hashlib.sha256(env).digest(), self.cfg.task_id, rows[i][1], env, pt, shuffler,
                             UPLOAD_MESSAGE))
        reasons: dict[str, int] = {}
        for i, err in errs.items():
            if i not in outdated:
                reasons[err] = reasons.get(err, 0) + 1
        for reason, k in reasons.items():
            self._count_refused(reason, k)
        self.db.execute("COMMIT")
        for reason, k in reasons.items():
            self._warn_refused(reason, k)
        return len(rows) - len(errs), len(errs) - len(outdated)

    def _flush_to(self, shuffler: int, url: str, max_attempts: int, batch: int, base_delay: float) -> dict:
        """:meth:`flush` for the outbox rows routed to shuffler ``shuffler`` at ``url``."""
        import httpx

        sent = refused = 0
        attempt = 0
        isolate: int | None = None   # request size while isolating a report refused with 400
        v2 = self.protocol is not None
        while True:
            cap = min(batch, self.upload_max_reports, isolate or batch)
            rows = self.db.execute("SELECT digest, crowd, envelope, plaintext, attempts, kind FROM outbox "
                                   "WHERE shuffler = ? ORDER BY rowid LIMIT ?", (shuffler, cap)).fetchall()
            if not rows:
                break
            unframeable = [row for row in rows if len(row[2]) > MAX_ENVELOPE_LEN or len(row[1]) > MAX_CROWD_LEN]
            if unframeable:   # the upload format cannot carry them: refused here, never sent
                self._refuse(unframeable, "reportTooLarge")
                refused += len(unframeable)
                continue
            rows = rows[:_fitting(rows, self.upload_max_bytes - (len(rows) if v2 else 0))]
            r = None
            headers = {"content-type": "application/vnd.shuffledp.upload"}
            if self.client_token is not None:
                headers["authorization"] = f"Bearer {self.client_token}"
            body = (encode_upload_v2([(k, c, e) for _d, c, e, _p, _a, k in rows]) if v2
                    else encode_upload([(c, e) for _d, c, e, _p, _a, _k in rows]))
            try:
                r = self.http.post(f"{url}/v1/tasks/{self.cfg.task_id.hex()}/reports", content=body,
                                   headers=headers)
                status = r.status_code
            except httpx.HTTPError:
                status = None
            if status == 401:
                log.warning("shuffler refused this client's token (401); reports kept, retrying")
            if status == 200:
                ok, bad = self._acknowledged(rows, r.json().get("errors", []), shuffler)
                sent += ok
                refused += bad
                attempt = 0
                continue
            if status in (400, 413):
                if len(rows) > 1:   # too large, or one frame is bad: split until it is alone
                    if status == 413:
                        self.upload_max_reports = max(1, len(rows) // 2)
                    else:
                        isolate = max(1, len(rows) // 2)
                    continue
                self._refuse(rows, "reportTooLarge" if status == 413 else "invalidMessage")
                refused += 1
                isolate = None
                attempt = 0
                continue
            attempt += 1
            if attempt >= max_attempts:
                break
            delay = base_delay * 2 ** attempt * (0.5 + secrets.randbelow(1000) / 1000)
            retry_after = r.headers.get("retry-after", "") if r is not None else ""
            if retry_after.isdigit():
                delay = max(delay, float(retry_after))
            time.sleep(min(delay, 30.0))
        return {"sent": sent, "refused": refused}

    def close(self) -> None:
        self.db.close()


def _is_longitudinal(mech: Any) -> bool:
    from ..local.longitudinal import LongitudinalMixin
    return isinstance(mech, LongitudinalMixin) or type(mech).__name__ == "Rappor"


class _RapporLongitudinal:
    """RAPPOR (:class:`shuffledp.local.rappor.Rappor`) in the longitudinal client contract: the
    cohort is the setup, the memoized PRR bits of a value its permanent answer (``eps_inf``), the
    IRR is drawn fresh for every report (one report: ``eps_1``)."""

    setup_width = 1

    def __init__(self, mech: Any) -> None:
        self.mech = mech
        self.answer_width = mech.n_bytes
        self.epsilon_perm, self.epsilon_one = float(mech.epsilon_inf), float(mech.epsilon_one)
        self.check_values = mech.check_values

    def setup(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, self.mech.m, size=(n, 1), dtype=np.int64)

    def memo_keys(self, x: np.ndarray, setup: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.int64)

    def permanent(self, keys: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.mech.permanent(keys, rng, np.asarray(setup)[:, 0])

    def instantaneous(self, answers: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> dict:
        return {"cohort": np.asarray(setup)[:, 0].astype(np.int64), "bits": self.mech._irr(answers, rng)}


def _encode_message(rep: dict[str, np.ndarray]) -> dict:
    return {k: (np.asarray(v).tolist(), np.asarray(v).dtype.str) for k, v in rep.items()}


def _decode_message(msg: dict) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=dt) for k, (v, dt) in msg.items()}


#: length of the memo encryption key (AES-256-GCM)
MEMO_KEY_LEN = 32


def _memo_key(state_path: str | Path, key: bytes | None) -> bytes:
    """The client's memo key: the one given, or the 0600 key file beside the store (created once)."""
    if key is not None:
        if not isinstance(key, (bytes, bytearray)) or len(key) != MEMO_KEY_LEN:
            raise ValidationError(f"memo_key must be {MEMO_KEY_LEN} bytes", parameter="memo_key")
        return bytes(key)
    path = Path(f"{state_path}.memo-key")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        data = path.read_bytes()
        if len(data) != MEMO_KEY_LEN:
            raise ValidationError(f"memo key file {path} is not {MEMO_KEY_LEN} bytes", parameter="memo_key")
        return data
    data = secrets.token_bytes(MEMO_KEY_LEN)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return data


class _SealedMemo:
    """The client's memo entries, AES-256-GCM encrypted in the ``memo_sealed`` table.

    ``slot(kind, data)`` = HMAC-SHA256(slot key, task || kind || data): the look-up key, which does not
    reveal the value. An entry is ``nonce || AESGCM(enc key, nonce, json payload, aad = task || slot)``;
    a fresh random nonce per write. The enc and slot keys are HMAC-SHA256 derivations of the client's
    key. A check value written with the first key is verified on open: a store the key cannot open
    is refused (:class:`ConfigError`), so answers are never silently redrawn. Entries of the former
    plaintext ``memo`` table are sealed and their rows deleted (secure_delete overwrites them).
    """

    _CHECK = b"shuffledp client memo v1"

    def __init__(self, db: sqlite3.Connection, key: bytes, task: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.db, self.task = db, task
        self._aead = AESGCM(hmac.new(key, b"shuffledp memo enc", hashlib.sha256).digest())
        self._slot_key = hmac.new(key, b"shuffledp memo slot", hashlib.sha256).digest()
        db.executescript("""
            CREATE TABLE IF NOT EXISTS memo_sealed(task BLOB, slot BLOB, sealed BLOB, PRIMARY KEY(task, slot));
            CREATE TABLE IF NOT EXISTS client_meta(name TEXT PRIMARY KEY, value BLOB);
            CREATE TABLE IF NOT EXISTS privacy_ledger(task BLOB PRIMARY KEY, epsilon REAL);""")
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT value FROM client_meta WHERE name='memo_check'").fetchone()
            if row is None:
                db.execute("INSERT INTO client_meta VALUES ('memo_check', ?)", (self._seal(b"check", self._CHECK),))
            elif self._open(b"check", row[0]) != self._CHECK:
                raise ConfigError("the client store's memo entries were sealed with another key: refusing to "
                                  "redraw permanent answers (pass the original memo_key)")
            migrated = self._migrate_plaintext()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if migrated:   # write the zeroed pages back to the main file now: no plaintext left there
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _migrate_plaintext(self) -> bool:
        if not self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='memo'").fetchone():
            return False
        for task, value, message in self.db.execute("SELECT task, value, message FROM memo").fetchall():
            slot = self._slot(task, b"msg", value.encode())
            payload = json.dumps({"message": json.loads(message)}).encode()
            self.db.execute("INSERT OR IGNORE INTO memo_sealed VALUES (?,?,?)",
                            (task, slot, self._seal(task + slot, payload)))
        self.db.execute("DELETE FROM memo")
        self.db.execute("DROP TABLE memo")
        return True

    def _slot(self, task: bytes, kind: bytes, data: bytes = b"") -> bytes:
        return hmac.new(self._slot_key, len(task).to_bytes(2, "big") + task + kind + b"\x00" + data,
                        hashlib.sha256).digest()

    def slot(self, kind: bytes, data: bytes = b"") -> bytes:
        return self._slot(self.task, kind, data)

    def _seal(self, aad: bytes, plaintext: bytes) -> bytes:
        nonce = secrets.token_bytes(12)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def _open(self, aad: bytes, sealed: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag
        try:
            return self._aead.decrypt(sealed[:12], sealed[12:], aad)
        except InvalidTag:
            raise ConfigError("a memo entry of the client store does not authenticate under this client's key "
                              "(tampered, or another key): refusing to redraw it") from None

    def get(self, slot: bytes) -> dict | None:
        row = self.db.execute("SELECT sealed FROM memo_sealed WHERE task=? AND slot=?", (self.task, slot)).fetchone()
        return None if row is None else json.loads(self._open(self.task + slot, row[0]))

    def put(self, slot: bytes, payload: dict) -> None:
        self.db.execute("INSERT OR REPLACE INTO memo_sealed VALUES (?,?,?)",
                        (self.task, slot, self._seal(self.task + slot, json.dumps(payload).encode())))

    def entries(self) -> int:
        return self.db.execute("SELECT count(*) FROM memo_sealed WHERE task=?", (self.task,)).fetchone()[0]
