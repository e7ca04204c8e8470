"""Client admission at the shuffler: optional per-client bearer tokens and in-memory rate limits.

Bearer tokens
    The operator issues one random token per client (:func:`issue_token`, or
    ``shuffledp shuffler issue-token``) and keeps only its SHA-256 in a tokens file, one
    lowercase hex digest per line (``#`` comments and a label after the digest allowed). With
    ``SHUFFLEDP_CLIENT_TOKENS_FILE`` set, the shuffler answers 401 to an upload whose
    ``Authorization: Bearer <token>`` does not hash to a listed digest, **before reading the body**.
    The token and its digest identify the client only for this check and the rate limit: neither
    is written to the database nor logged, and nothing links a stored report to the token it came
    with. The file is re-read when its modification time changes (revocation = delete the line).

    An anonymous-credential scheme slots in at :meth:`ClientTokens.admit`: with Privacy Pass
    (RFC 9576 architecture, RFC 9578 issuance protocols) the client presents
    ``Authorization: PrivateToken token=...``; the shuffler verifies the issuer's signature
    (publicly verifiable, blind RSA) or MAC (privately verifiable, VOPRF), refuses a token already
    spent (a spent-token set kept per issuer key epoch), and rate-limits per redemption rather than
    per client, because tokens are unlinkable to the issuance that authenticated the client.

Rate limits
    One token bucket per client **in memory only** — refilled at ``rate`` reports per second, holding
    at most ``burst`` — keyed by the client's token digest when tokens are on, and always by the
    peer address, which is first passed through a keyed hash with a per-process random key (no
    address is kept in clear, and the keys die with the process). An upload that the bucket cannot
    cover is answered 429 with ``Retry-After`` and nothing is stored; one larger than ``burst`` is
    answered 413 so the SDK splits it.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import threading
import time
from pathlib import Path

from .http_common import Problem

__all__ = ["ClientTokens", "RateLimiter", "issue_token", "token_digest"]


def token_digest(token: str) -> bytes:
    """SHA-256 of a client token (what the tokens file lists, hex encoded)."""
    return hashlib.sha256(token.encode()).digest()


def issue_token(tokens_file: str | Path, label: str = "") -> str:
    """Create a client token, append its SHA-256 (and ``label``) to ``tokens_file``; return the token.

    The token (256 random bits, URL-safe base64) is returned once and never stored in clear.
    """
    if any(c in label for c in "\r\n"):
        raise ValueError("label must be a single line")
    token = secrets.token_urlsafe(32)
    line = token_digest(token).hex() + (f" {label}" if label else "") + "\n"
    p = Path(tokens_file)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return token


class ClientTokens:
    """The set of accepted client-token digests, read from ``path`` (reloaded when it changes)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._mtime: float | None = None
        self._digests: frozenset[bytes] = frozenset()
        self._lock = threading.Lock()
        self._load()   # a missing or malformed file fails at start, not at the first upload

    def _load(self) -> None:
        st = self.path.stat()
        if st.st_mtime_ns == self._mtime:
            return
        out = set()
        for i, raw in enumerate(self.path.read_text().splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            h = line.split()[0].lower()
            if len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
                raise ValueError(f"{self.path}:{i}: expected a SHA-256 hex digest (64 hex characters)")
            out.add(bytes.fromhex(h))
        self._digests, self._mtime = frozenset(out), st.st_mtime_ns

    def __len__(self) -> int:
        return len(self._digests)

    def admit(self, authorization: str | None) -> bytes:
        """The digest of the bearer token in ``authorization``; :class:`Problem` 401 if it is not accepted."""
        with self._lock:
            try:
                self._load()
            except (OSError, ValueError):
                pass   # keep the last good set; an edit in progress must not lock every client out
        scheme, _, token = (authorization or "").partition(" ")
        d = token_digest(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        # set membership of a hash: no timing signal about the token beyond that of SHA-256
        if d is None or d not in self._digests:
            raise Problem(401, "unauthorized", "missing or unknown client token",
                          headers={"WWW-Authenticate": 'Bearer realm="shuffledp-reports"'})
        return d


class RateLimiter:
    """Token buckets (``rate`` reports/s, capacity ``burst``) per client key, in memory only."""

    def __init__(self, rate: float, burst: int, *, max_clients: int = 100_000, clock=time.monotonic) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be a finite number > 0 (reports per second), got {rate!r}")
        if int(burst) < 1:
            raise ValueError(f"burst must be >= 1 report, got {burst!r}")
        self.rate, self.burst, self.max_clients, self.clock = float(rate), int(burst), max_clients, clock
        self._buckets: dict[bytes, tuple[float, float]] = {}   # key -> (reports available, at time)
        self._lock = threading.Lock()
        self._addr_key = secrets.token_bytes(32)   # per process: addresses are never kept in clear

    def address_key(self, address: str) -> bytes:
        return b"a" + hmac.new(self._addr_key, address.encode(), hashlib.sha256).digest()[:16]

    def _level(self, key: bytes, now: float) -> float:
        have, at = self._buckets.get(key, (float(self.burst), now))
        return min(float(self.burst), have + (now - at) * self.rate)

    def take(self, keys: list[bytes], n: int) -> None:
        """Take ``n`` reports from every bucket of ``keys``, or none: :class:`Problem` 429/413 if they cannot."""
        if n > self.burst:
            raise Problem(413, "reportTooLarge", f"at most {self.burst} reports per request under this "
                                                 f"shuffler's rate limit")
        with self._lock:
            now = self.clock()
            levels = [self._level(k, now) for k in keys]
            short = max((n - lv for lv in levels), default=0.0)
            if short > 0:
                raise Problem(429, "rateLimited", f"rate limit of {self.rate:g} reports/s per client exceeded",
                              headers={"Retry-After": str(max(1, math.ceil(short / self.rate)))})
            for k, lv in zip(keys, levels):
                self._buckets[k] = (lv - n, now)
            if len(self._buckets) > self.max_clients:   # forget the buckets that are full again
                full = [k for k in self._buckets if self._level(k, now) >= self.burst]
                for k in full:
                    del self._buckets[k]
                while len(self._buckets) > self.max_clients:   # still too many: drop the oldest entries
                    del self._buckets[next(iter(self._buckets))]

    def check(self, keys: list[bytes]) -> None:
        """Refuse (429) before reading a body when a bucket of ``keys`` holds less than one report."""
        with self._lock:
            now = self.clock()
            short = max((1.0 - self._level(k, now) for k in keys), default=0.0)
        if short > 0:
            raise Problem(429, "rateLimited", f"rate limit of {self.rate:g} reports/s per client exceeded",
                          headers={"Retry-After": str(max(1, math.ceil(short / self.rate)))})
