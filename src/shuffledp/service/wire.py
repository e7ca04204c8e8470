"""Wire formats: envelope (RFC 9458 encapsulation layout), key lists, plaintexts, bodies.

Every decoder here is total: any malformed input raises :class:`DecodeError` (never an
IndexError/struct.error), which the services turn into a typed problem+json response.

Formats (all integers big-endian unless noted):

- **key list** (``application/ohttp-keys``, RFC 9458 §3): repeated
  ``u16 len ‖ key_id u8 ‖ kem u16 ‖ pk (32) ‖ u16 suites_len ‖ (kdf u16 ‖ aead u16)*``.
- **envelope**: ``key_id u8 ‖ kem u16 ‖ kdf u16 ‖ aead u16 ‖ enc (32) ‖ ct (L + 16)``; HPKE
  ``info = LABEL ‖ 0x00 ‖ hdr ‖ task_id (32) ‖ config_digest (32) ‖ u8 len ‖ crowd_id`` binds
  the report to its task, configuration and crowd (no AAD).
- **plaintext** (fixed length per task): ``version u8 (=1) ‖ report_id (16) ‖ time u64 ‖
  fields``, fields in the task's ``report_schema`` order, little-endian numpy rows.
- **upload body** (client → shuffler, ``application/vnd.shuffledp.upload``):
  ``"SDU1" ‖ u32 count ‖ (u8 crowd_len ‖ crowd ‖ u16 env_len ‖ envelope)*``. Protocol tasks
  (several messages per user) upload ``"SDU2"``, whose items are
  ``u8 kind ‖ u8 crowd_len ‖ crowd ‖ u16 len ‖ payload``: kind 0 is a message envelope, kind 1 a
  **user marker** (payload: 16 random bytes chosen once per user report, so a re-sent upload is
  idempotent). A user sends one marker to each shuffler it sends messages to (even with no
  message: Cnt_2M users may send none); the shuffler counts users by markers, never by messages,
  and forwards only the count.
- **batch body** (shuffler → analyzer, ``application/vnd.shuffledp.batch``):
  ``"SDB1" ‖ task_id (32) ‖ u8 crowd_len ‖ crowd ‖ u64 window ‖ u32 count ‖ u16 env_len ‖
  envelopes (count × env_len)``; protocol tasks send ``"SDB2"``, which adds
  ``u8 shuffler ‖ u32 n_users`` after the window (the shuffler's index in the deployment and the
  users its batch holds).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from ..core.batch import row_layout
from ..core.errors import ShuffleDPError, ValidationError
from .hpke import (AEAD_AES_128_GCM, AEAD_CHACHA20_POLY1305, KDF_HKDF_SHA256, KEM_X25519_HKDF_SHA256, N_ENC,
                   N_TAG, HpkeError, Suite, open_base, open_base_many, seal_base)

__all__ = [
    "DecodeError", "KeyConfig", "encode_key_list", "decode_key_list", "REPORT_LABEL", "envelope_info",
    "seal_report", "open_report", "open_reports", "envelope_len", "HEADER_LEN", "PlaintextSchema", "encode_upload",
    "decode_upload", "encode_batch", "decode_batch", "batch_id", "batch_id_from_digests", "digest", "EncodeError",
    "MAX_ENVELOPE_LEN", "check_envelope_fits", "UPLOAD_MESSAGE", "UPLOAD_USER", "USER_MARKER_LEN",
    "encode_upload_v2", "marker_digest",
]

#: SDU2 item kinds: a sealed message, or a user marker (counts one user at the shuffler)
UPLOAD_MESSAGE, UPLOAD_USER = 0, 1
USER_MARKER_LEN = 16

REPORT_LABEL = b"application/vnd.shuffledp.report request"
HEADER_LEN = 7
MAX_CROWD_LEN = 64
#: limits of one upload request, enforced by the shuffler and respected by the client's outbox
MAX_UPLOAD_REPORTS = 10_000
MAX_UPLOAD_BYTES = 8 * 1024 * 1024

# Shuffler health push (shuffler -> analyzer, JSON, signed like a batch): its path, the most tasks
# one push carries, and the batch states it counts per task
HEALTH_PATH = "/v1/shuffler-health"
MAX_HEALTH_TASKS = 256
HEALTH_BATCH_STATES = ("forming", "ready", "retrying", "rejected", "delivered")
#: ``encode_upload`` framing: "SDU1" + u32 count, then per report u8 crowd length, crowd,
#: u16 envelope length, envelope
UPLOAD_HEADER_LEN = 8
#: the upload and batch bodies carry each envelope's length in 16 bits
MAX_ENVELOPE_LEN = 0xFFFF


def upload_item_len(crowd: bytes, envelope: bytes) -> int:
    """Bytes one report takes in an ``encode_upload`` body."""
    return 3 + len(crowd) + len(envelope)
PLAINTEXT_VERSION = 1
PLAINTEXT_HEADER = 1 + 16 + 8


class DecodeError(ShuffleDPError, ValueError):
    """Malformed bytes (frame, key list, plaintext)."""


class EncodeError(ShuffleDPError, ValueError):
    """A value that the wire format cannot carry (e.g. an envelope longer than its 16-bit length field)."""


def check_envelope_fits(plaintext_len: int, parameter: str = "mechanism") -> None:
    """Refuse a report layout whose envelopes the upload and batch formats cannot carry.

    An envelope is ``HEADER_LEN + N_ENC + plaintext_len + N_TAG`` bytes; both bodies frame it with a
    16-bit length, so it must be at most :data:`MAX_ENVELOPE_LEN` (65,535) bytes. Raises
    :class:`~shuffledp.core.errors.ValidationError` naming ``parameter`` otherwise.
    """
    el = envelope_len(int(plaintext_len))
    if el > MAX_ENVELOPE_LEN:
        raise ValidationError(
            f"{parameter} gives {int(plaintext_len):,}-byte reports, i.e. {el:,}-byte envelopes; the upload and "
            f"batch formats carry envelopes of at most {MAX_ENVELOPE_LEN:,} bytes (16-bit length): choose a smaller "
            f"domain ({parameter}.params.d) or a mechanism with shorter reports", parameter=parameter)


def digest(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


# ---------------------------------------------------------------------------- key lists
@dataclass(frozen=True)
class KeyConfig:
    """One HPKE key configuration as published by the analyzer."""

    key_id: int
    public_key: bytes
    suites: tuple[tuple[int, int], ...] = ((KDF_HKDF_SHA256, AEAD_AES_128_GCM),)
    kem_id: int = KEM_X25519_HKDF_SHA256

    def encode(self) -> bytes:
        sym = b"".join(struct.pack(">HH", k, a) for k, a in self.suites)
        return (struct.pack(">BH", self.key_id, self.kem_id) + self.public_key
                + struct.pack(">H", len(sym)) + sym)


def encode_key_list(keys: list[KeyConfig]) -> bytes:
    out = b""
    for k in keys:
        e = k.encode()
        out += struct.pack(">H", len(e)) + e
    return out


def decode_key_config(b: bytes) -> KeyConfig:
    if len(b) < 3 + N_ENC + 2:
        raise DecodeError("key config too short")
    key_id, kem = struct.unpack_from(">BH", b, 0)
    if kem != KEM_X25519_HKDF_SHA256:
        raise DecodeError(f"unsupported KEM {kem:#06x}")
    pk = b[3:3 + N_ENC]
    (slen,) = struct.unpack_from(">H", b, 3 + N_ENC)
    sym = b[5 + N_ENC:]
    if slen != len(sym) or slen == 0 or slen % 4:
        raise DecodeError("bad symmetric algorithms length")
    suites = tuple(struct.unpack_from(">HH", sym, i) for i in range(0, slen, 4))
    return KeyConfig(key_id, pk, suites, kem)


def decode_key_list(b: bytes) -> list[KeyConfig]:
    out, i = [], 0
    while i < len(b):
        if i + 2 > len(b):
            raise DecodeError("truncated key list")
        (n,) = struct.unpack_from(">H", b, i)
        if i + 2 + n > len(b):
            raise DecodeError("truncated key config")
        out.append(decode_key_config(b[i + 2:i + 2 + n]))
        i += 2 + n
    return out


# ---------------------------------------------------------------------------- envelope
def envelope_info(hdr: bytes, task_id: bytes, config_digest: bytes, crowd_id: bytes) -> bytes:
    return REPORT_LABEL + b"\x00" + hdr + task_id + config_digest + bytes([len(crowd_id)]) + crowd_id


def envelope_len(plaintext_len: int) -> int:
    return HEADER_LEN + N_ENC + plaintext_len + N_TAG


def seal_report(key: KeyConfig, task_id: bytes, config_digest: bytes, crowd_id: bytes, plaintext: bytes,
                aead_id: int = AEAD_AES_128_GCM, *, _ikm_e: bytes | None = None) -> bytes:
    """Seal one report plaintext to the analyzer key; returns the envelope bytes."""
    if (KDF_HKDF_SHA256, aead_id) not in key.suites:
        raise HpkeError(f"key {key.key_id} does not offer AEAD {aead_id:#06x}")
    hdr = struct.pack(">BHHH", key.key_id, KEM_X25519_HKDF_SHA256, KDF_HKDF_SHA256, aead_id)
    enc, ct = seal_base(_SUITES.get(aead_id) or Suite(aead_id), key.public_key, envelope_info(hdr, task_id, config_digest, crowd_id),
                        b"", plaintext, _ikm_e=_ikm_e)
    return hdr + enc + ct


def parse_header(envelope: bytes) -> tuple[int, int, int, int]:
    if len(envelope) < HEADER_LEN + N_ENC + N_TAG:
        raise DecodeError("envelope too short")
    return struct.unpack_from(">BHHH", envelope, 0)


_SUITES = {AEAD_AES_128_GCM: Suite(AEAD_AES_128_GCM), AEAD_CHACHA20_POLY1305: Suite(AEAD_CHACHA20_POLY1305)}
ALLOWED_SUITES = {(KEM_X25519_HKDF_SHA256, KDF_HKDF_SHA256, AEAD_AES_128_GCM),
                  (KEM_X25519_HKDF_SHA256, KDF_HKDF_SHA256, AEAD_CHACHA20_POLY1305)}


def open_report(envelope: bytes, private_keys: dict[int, object], task_id: bytes, config_digest: bytes,
                crowd_id: bytes) -> bytes:
    """Open one envelope; raises HpkeError (auth failure/unknown key) or DecodeError (framing)."""
    key_id, kem, kdf, aead = parse_header(envelope)
    if (kem, kdf, aead) not in ALLOWED_SUITES:
        raise DecodeError("unsupported suite in envelope header")
    entry = private_keys.get(key_id)
    if entry is None:
        raise HpkeError(f"unknown key id {key_id}")
    sk, pk = entry if isinstance(entry, tuple) else (entry, None)  # (private key, public bytes) or key
    hdr = envelope[:HEADER_LEN]
    enc = envelope[HEADER_LEN:HEADER_LEN + N_ENC]
    return open_base(_SUITES[aead], enc, sk, envelope_info(hdr, task_id, config_digest, crowd_id), b"",
                     envelope[HEADER_LEN + N_ENC:], pk)


def open_reports(envelopes: list[bytes], private_keys: dict[int, object], task_id: bytes, config_digest: bytes,
                 crowd_id: bytes, *, impl: str = "auto") -> tuple[list[bytes | None], int, int]:
    """Open many envelopes of one (task, configuration, crowd): what :func:`open_report` does for each.

    Envelopes are grouped by their 7-byte header (key id and suite); per group the HPKE info and
    the report-independent parts of the key schedule are built once (:func:`hpke.open_base_many`),
    while every envelope keeps its own HPKE context. Returns ``(plaintexts, n_decrypt_error,
    n_decode_error)`` with ``None`` in the list where an envelope failed.
    """
    out: list[bytes | None] = [None] * len(envelopes)
    groups: dict[bytes, list[int]] = {}
    n_dec = n_fmt = 0
    for i, env in enumerate(envelopes):
        if len(env) < HEADER_LEN + N_ENC + N_TAG:
            n_fmt += 1
            continue
        groups.setdefault(env[:HEADER_LEN], []).append(i)
    for hdr, idx in groups.items():
        key_id, kem, kdf, aead = struct.unpack(">BHHH", hdr)
        if (kem, kdf, aead) not in ALLOWED_SUITES:
            n_fmt += len(idx)
            continue
        entry = private_keys.get(key_id)
        if entry is None:
            n_dec += len(idx)
            continue
        sk, pk = entry if isinstance(entry, tuple) else (entry, None)
        if not isinstance(sk, X25519PrivateKey):
            sk = X25519PrivateKey.from_private_bytes(sk)
        if pk is None:
            pk = sk.public_key().public_bytes_raw()
        pts = open_base_many(_SUITES[aead], sk, pk, envelope_info(hdr, task_id, config_digest, crowd_id),
                             [envelopes[i][HEADER_LEN:] for i in idx], impl=impl)
        for i, pt in zip(idx, pts):
            if pt is None:
                n_dec += 1
            else:
                out[i] = pt
    return out, n_dec, n_fmt


# ---------------------------------------------------------------------------- plaintexts
@dataclass(frozen=True)
class PlaintextSchema:
    """Fixed-length binary layout of one report's columnar fields (one row per report).

    ``fields`` is a tuple of ``(name, dtype_str, row_shape)``; dtype strings are little-endian.
    """

    fields: tuple[tuple[str, str, tuple[int, ...]], ...]

    @classmethod
    def from_reports(cls, reports: dict[str, np.ndarray]) -> "PlaintextSchema":
        return cls(row_layout(reports))

    @classmethod
    def from_json(cls, obj: list) -> "PlaintextSchema":
        return cls(tuple((str(n), str(d), tuple(int(s) for s in sh)) for n, d, sh in obj))

    def to_json(self) -> list:
        return [[n, d, list(sh)] for n, d, sh in self.fields]

    def _row_bytes(self) -> list[int]:
        return [int(np.dtype(d).itemsize * int(np.prod(sh, dtype=np.int64))) for _, d, sh in self.fields]

    @property
    def length(self) -> int:
        return PLAINTEXT_HEADER + sum(self._row_bytes())

    def encode(self, reports: dict[str, np.ndarray], report_ids: np.ndarray, times: np.ndarray) -> np.ndarray:
        """Vectorized: an (n, length) uint8 array, one plaintext per row."""
        n = int(report_ids.shape[0])
        out = np.empty((n, self.length), dtype=np.uint8)
        if n == 0:   # e.g. a Cnt_2M user who sends no message
            return out
        out[:, 0] = PLAINTEXT_VERSION
        out[:, 1:17] = report_ids
        out[:, 17:25] = np.asarray(times, dtype=">u8").reshape(n, 1).view(np.uint8)
        pos = PLAINTEXT_HEADER
        for (name, dt, shape), nb in zip(self.fields, self._row_bytes()):
            a = np.ascontiguousarray(np.asarray(reports[name]).astype(dt, casting="same_kind"))
            if a.shape != (n, *shape):
                raise DecodeError(f"field {name!r} has shape {a.shape}, schema wants {(n, *shape)}")
            out[:, pos:pos + nb] = a.reshape(n, -1).view(np.uint8).reshape(n, nb)
            pos += nb
        return out

    def decode(self, rows: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """Inverse of :meth:`encode` for an (n, length) uint8 array: (reports, report_ids, times)."""
        if rows.ndim != 2 or rows.shape[1] != self.length:
            raise DecodeError("plaintext length does not match the task's schema")
        if rows.shape[0] and np.any(rows[:, 0] != PLAINTEXT_VERSION):
            raise DecodeError("unknown plaintext version")
        n = rows.shape[0]
        ids = np.ascontiguousarray(rows[:, 1:17])
        times = np.ascontiguousarray(rows[:, 17:25]).view(">u8").reshape(n).astype(np.int64)
        reports, pos = {}, PLAINTEXT_HEADER
        for (name, dt, shape), nb in zip(self.fields, self._row_bytes()):
            a = np.ascontiguousarray(rows[:, pos:pos + nb]).view(dt).reshape(n, *shape)
            reports[name] = a.astype(np.dtype(dt).newbyteorder("="))
            pos += nb
        return reports, ids, times


# ---------------------------------------------------------------------------- bodies
def _check_frame(crowd: bytes, env: bytes) -> None:
    if len(crowd) > MAX_CROWD_LEN:
        raise EncodeError(f"crowd id of {len(crowd)} bytes; at most {MAX_CROWD_LEN}")
    if len(env) > MAX_ENVELOPE_LEN:
        raise EncodeError(f"envelope of {len(env):,} bytes; the 16-bit length field carries at most "
                          f"{MAX_ENVELOPE_LEN:,}")


def encode_upload(items: list[tuple[bytes, bytes]]) -> bytes:
    """Upload body; raises :class:`EncodeError` (never ``struct.error``) for a frame it cannot carry."""
    parts = [b"SDU1", struct.pack(">I", len(items))]
    for crowd, env in items:
        _check_frame(crowd, env)
        parts.append(bytes([len(crowd)]) + crowd + struct.pack(">H", len(env)) + env)
    return b"".join(parts)


def encode_upload_v2(items: list[tuple[int, bytes, bytes]]) -> bytes:
    """SDU2 upload body of ``(kind, crowd, payload)`` items (kind :data:`UPLOAD_MESSAGE` or :data:`UPLOAD_USER`)."""
    parts = [b"SDU2", struct.pack(">I", len(items))]
    for kind, crowd, payload in items:
        if kind not in (UPLOAD_MESSAGE, UPLOAD_USER):
            raise EncodeError(f"unknown upload item kind {kind!r}")
        _check_frame(crowd, payload)
        parts.append(bytes([kind, len(crowd)]) + crowd + struct.pack(">H", len(payload)) + payload)
    return b"".join(parts)


def marker_digest(marker: bytes) -> bytes:
    """Storage key of a user marker (domain-separated from SHA-256 of an envelope)."""
    return hashlib.sha256(b"shuffledp user marker\x00" + marker).digest()


def decode_upload_v2(body: bytes, max_items: int) -> list[tuple[int, bytes, bytes]]:
    """Items ``(kind, crowd, payload)`` of an SDU1 or SDU2 body (SDU1 items are all messages)."""
    if len(body) < 8 or body[:4] not in (b"SDU1", b"SDU2"):
        raise DecodeError("upload body must start with 'SDU1' or 'SDU2' and a count")
    return _decode_frames(body, max_items, with_kind=body[:4] == b"SDU2")


def decode_upload(body: bytes, max_items: int) -> list[tuple[bytes, bytes]]:
    if len(body) < 8 or body[:4] != b"SDU1":
        raise DecodeError("upload body must start with 'SDU1' and a count")
    return [(crowd, env) for _kind, crowd, env in _decode_frames(body, max_items, with_kind=False)]


def _decode_frames(body: bytes, max_items: int, with_kind: bool) -> list[tuple[int, bytes, bytes]]:
    """The ``(kind, crowd, payload)`` frames after an upload body's 8-byte header.

    SDU1 frames are ``u8 crowd_len ‖ crowd ‖ u16 len ‖ envelope`` (kind :data:`UPLOAD_MESSAGE`);
    SDU2 frames (``with_kind``) start with their ``u8 kind``. Total: any malformed frame raises
    :class:`DecodeError`.
    """
    what, frame = ("items", "item") if with_kind else ("reports", "envelope")
    (n,) = struct.unpack_from(">I", body, 4)
    if n > max_items:
        raise DecodeError(f"at most {max_items} {what} per request, got {n}")
    out, i, k = [], 8, int(with_kind)
    mv = memoryview(body)
    for _ in range(n):
        if i + k >= len(body):
            raise DecodeError("truncated upload body")
        kind = body[i] if with_kind else UPLOAD_MESSAGE
        if kind not in (UPLOAD_MESSAGE, UPLOAD_USER):
            raise DecodeError(f"unknown upload item kind {kind}")
        cl = body[i + k]
        if cl > MAX_CROWD_LEN or i + k + 1 + cl + 2 > len(body):
            raise DecodeError("truncated or oversized crowd id")
        crowd = bytes(mv[i + k + 1:i + k + 1 + cl])
        (el,) = struct.unpack_from(">H", body, i + k + 1 + cl)
        j = i + k + 3 + cl
        if j + el > len(body):
            raise DecodeError(f"truncated {frame}")
        if kind == UPLOAD_USER and el != USER_MARKER_LEN:
            raise DecodeError(f"a user marker has {USER_MARKER_LEN} bytes, got {el}")
        out.append((kind, crowd, bytes(mv[j:j + el])))
        i = j + el
    if i != len(body):
        raise DecodeError(f"trailing bytes after the last {frame if with_kind else 'report'}")
    return out


@dataclass(frozen=True)
class Batch:
    task_id: bytes
    crowd_id: bytes
    window: int
    envelopes: list[bytes]
    #: protocol tasks (SDB2): the forwarding shuffler's index and the users its batch holds
    shuffler: int = 0
    n_users: int | None = None


def encode_batch(b: Batch) -> bytes:
    """Batch body; raises :class:`EncodeError` for envelopes it cannot carry (too long or of unequal length)."""
    el = len(b.envelopes[0]) if b.envelopes else 0
    _check_frame(b.crowd_id, b.envelopes[0] if b.envelopes else b"")
    if any(len(e) != el for e in b.envelopes):
        raise EncodeError("the envelopes of one batch must have equal lengths")
    if b.n_users is None:
        return b"".join([b"SDB1", b.task_id, bytes([len(b.crowd_id)]), b.crowd_id,
                         struct.pack(">QIH", b.window, len(b.envelopes), el), *b.envelopes])
    if not (0 <= b.shuffler <= 255 and 0 <= b.n_users < 2**32):
        raise EncodeError("shuffler must fit in u8 and n_users in u32")
    return b"".join([b"SDB2", b.task_id, bytes([len(b.crowd_id)]), b.crowd_id,
                     struct.pack(">QBIIH", b.window, b.shuffler, b.n_users, len(b.envelopes), el), *b.envelopes])


def decode_batch(body: bytes) -> Batch:
    if len(body) < 4 + 32 + 1 or body[:4] not in (b"SDB1", b"SDB2"):
        raise DecodeError("batch body must start with 'SDB1' or 'SDB2'")
    v2 = body[:4] == b"SDB2"
    task_id = body[4:36]
    cl = body[36]
    hl = 19 if v2 else 14
    if cl > MAX_CROWD_LEN or len(body) < 37 + cl + hl:
        raise DecodeError("truncated batch header")
    crowd = body[37:37 + cl]
    shuffler, n_users = 0, None
    if v2:
        window, shuffler, n_users, n, el = struct.unpack_from(">QBIIH", body, 37 + cl)
    else:
        window, n, el = struct.unpack_from(">QIH", body, 37 + cl)
    start = 37 + cl + hl
    if n and el < HEADER_LEN + N_ENC + N_TAG:
        # else n (up to 2^32 - 1) empty envelopes would be built from a header-only body
        raise DecodeError(f"envelope length {el} is below the smallest envelope ({HEADER_LEN + N_ENC + N_TAG} bytes)")
    if len(body) != start + n * el:
        raise DecodeError("batch body length does not match count × envelope length")
    mv = memoryview(body)
    envs = [bytes(mv[start + k * el:start + (k + 1) * el]) for k in range(n)]
    return Batch(task_id, crowd, window, envs, shuffler, n_users)


def batch_id(task_id: bytes, crowd_id: bytes, window: int, envelopes: list[bytes], shuffler: int = 0,
             n_users: int | None = None) -> bytes:
    """Content-derived batch identifier (order-sensitive), so a re-sent PUT is idempotent."""
    return batch_id_from_digests(task_id, crowd_id, window, b"".join(hashlib.sha256(e).digest() for e in envelopes),
                                 shuffler, n_users)


def batch_id_from_digests(task_id: bytes, crowd_id: bytes, window: int, digests: bytes, shuffler: int = 0,
                          n_users: int | None = None) -> bytes:
    """:func:`batch_id` from the concatenated SHA-256 digests (32 bytes each, in batch order) of the envelopes.

    A protocol batch (``n_users`` given) also binds the shuffler's index and its user count.
    """
    if len(digests) % 32:
        raise EncodeError("digests must be a concatenation of 32-byte SHA-256 digests")
    h = hashlib.sha256(b"shuffledp batch v1" + task_id + bytes([len(crowd_id)]) + crowd_id
                       + struct.pack(">QI", window, len(digests) // 32))
    if n_users is not None:
        h.update(b"protocol" + struct.pack(">BI", shuffler, n_users))
    h.update(digests)
    return h.digest()
