"""The batched opener (``hpke.open_base_many`` / ``wire.open_reports``) against the one-report path.

``open_report`` is the reference checked against RFC 9180 / RFC 9458 vectors in
``test_envelope.py``; the batched path (both its implementations) must give the same plaintexts
and fail on exactly the same envelopes: flipped bits anywhere, moved task / configuration / crowd,
unknown key id, unsupported suite, a low-order ephemeral key.
"""

from __future__ import annotations

import os

import pytest

from shuffledp.service import hpke
from shuffledp.service.hpke import AEAD_AES_128_GCM, AEAD_CHACHA20_POLY1305, HpkeError, generate_key_pair
from shuffledp.service.wire import DecodeError, KeyConfig, open_report, open_reports, seal_report

pytestmark = pytest.mark.timeout(60)

IMPLS = ["python"] + (["rust"] if hpke._RUST_SUITES else [])


def _reference(env, keys, task, dig, crowd):
    try:
        return open_report(env, keys, task, dig, crowd), None
    except HpkeError:
        return None, "decrypt"
    except DecodeError:
        return None, "decode"


@pytest.mark.parametrize("impl", IMPLS)
def test_batch_open_equals_single_open_including_failures(impl):
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    rng = __import__("random").Random(7)
    (sk1, pk1), (sk2, pk2) = generate_key_pair(), generate_key_pair()
    keys = {1: (X25519PrivateKey.from_private_bytes(sk1), pk1), 2: sk2}   # tuple form and raw-bytes form
    task, dig, crowd = os.urandom(32), os.urandom(32), b"c1"
    k1 = KeyConfig(1, pk1, ((1, AEAD_AES_128_GCM), (1, AEAD_CHACHA20_POLY1305)))
    k2 = KeyConfig(2, pk2, ((1, AEAD_AES_128_GCM),))
    envs = []
    for i in range(60):
        aead = AEAD_CHACHA20_POLY1305 if i % 3 == 0 else AEAD_AES_128_GCM
        envs.append(seal_report(k1, task, dig, crowd, os.urandom(41), aead))
    envs += [seal_report(k2, task, dig, crowd, os.urandom(41)) for _ in range(10)]
    bad = []
    for e in envs[:25]:                                     # one flipped bit after the key id
        j = rng.randrange(7, len(e))
        bad.append(e[:j] + bytes([e[j] ^ (1 << rng.randrange(8))]) + e[j + 1:])
    bad.append(seal_report(k1, os.urandom(32), dig, crowd, b"x" * 41))    # other task
    bad.append(seal_report(k1, task, os.urandom(32), crowd, b"x" * 41))   # other configuration
    bad.append(seal_report(k1, task, dig, b"c2", b"x" * 41))              # other crowd
    bad.append(bytes([9]) + envs[0][1:])                                   # unknown key id
    bad.append(envs[1][:1] + b"\x00\x21" + envs[1][3:])                    # unsupported KEM
    bad.append(envs[2][:7] + b"\x00" * 32 + envs[2][39:])                  # low-order (all-zero) enc
    bad.append(envs[3][:20])                                               # truncated
    allenv = envs + bad
    rng.shuffle(allenv)
    pts, n_dec, n_fmt = open_reports(allenv, keys, task, dig, crowd, impl=impl)
    ref = [_reference(e, keys, task, dig, crowd) for e in allenv]
    assert pts == [r[0] for r in ref]
    assert n_dec == sum(r[1] == "decrypt" for r in ref) and n_fmt == sum(r[1] == "decode" for r in ref)
    assert sum(p is not None for p in pts) == 70 and n_dec + n_fmt == len(bad)


def test_unknown_impl_is_refused():
    sk, pk = generate_key_pair()
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    with pytest.raises(ValueError):
        hpke.open_base_many(hpke.Suite(), X25519PrivateKey.from_private_bytes(sk), pk, b"", [], impl="fast")
