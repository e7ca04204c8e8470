"""Known-answer and binding tests for the HPKE base mode and the report envelope."""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.service import hpke
from shuffledp.service.hpke import AEAD_AES_128_GCM, AEAD_CHACHA20_POLY1305, HpkeError, Suite
from shuffledp.service.wire import (DecodeError, KeyConfig, PlaintextSchema, decode_key_list, encode_key_list,
                                    open_report, seal_report)

pytestmark = pytest.mark.timeout(60)
h = bytes.fromhex

# RFC 9180 Appendix A.1.1: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, base mode
A11 = dict(
    info="4f6465206f6e2061204772656369616e2055726e",
    ikmE="7268600d403fce431561aef583ee1613527cff655c1343f29812e66706df3234",
    pkEm="37fda3567bdbd628e88668c3c8d7e97d1d1253b6d4ea6d44c150f741f1bf4431",
    skEm="52c4a758a802cd8b936eceea314432798d5baf2d7e9235dc084ab1b9cfa2f736",
    pkRm="3948cfe0ad1ddb695d780e59077195da6c56506b027329794ab02bca80815c4d",
    skRm="4612c550263fc8ad58375df3f557aac531d26850903e55a9f23f21d8534e8ac8",
    shared_secret="fe0e18c9f024ce43799ae393c7e8fe8fce9d218875e8227b0187c04e7d2ea1fc",
    key="4531685d41d65f03dc48f6b8302c05b0",
    base_nonce="56d890e5accaaf011cff4b7d",
    exporter_secret="45ff1c2e220db587171952c0592d5f5ebe103f1561a2614e38f2ffd47e99e3f8",
    pt="4265617574792069732074727574682c20747275746820626561757479",
    aad="436f756e742d30",
    ct="f938558b5d72f1a23810b4be2ab4f84331acc02fc97babc53a52ae8218a355a96d8770ac83d07bea87e13c512a",
)
# RFC 9180 Appendix A.2.1: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20Poly1305, base mode
A21 = dict(
    info="4f6465206f6e2061204772656369616e2055726e",
    ikmE="909a9b35d3dc4713a5e72a4da274b55d3d3821a37e5d099e74a647db583a904b",
    pkRm="4310ee97d88cc1f088a5576c77ab0cf5c3ac797f3d95139c6c84b5429c59662a",
    skRm="8057991eef8f1f1af18f4a9491d16a1ce333f695d4db8e38da75975c4478e0fb",
    enc="1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a",
    pt="4265617574792069732074727574682c20747275746820626561757479",
    aad="436f756e742d30",
    ct="1c5250d8034ec2b784ba2cfd69dbdb8af406cfe3ff938e131f0def8c8b60b4db21993c62ce81883d2dd1b51a28",
)
# RFC 9458 Appendix A (Oblivious HTTP request encapsulation)
OHTTP = dict(
    skR="3c168975674b2fa8e465970b79c8dcf09f1c741626480bd4c6162fc5b6a98e1a",
    key_config="01002031e1f05a740102115220e9af918f738674aec95f54db6e04eb705aae8e79815500080001000100010003",
    request="00034745540568747470730b6578616d706c652e636f6d012f",
    skE="bc51d5e930bda26589890ac7032f70ad12e4ecb37abb1b65b1256c9c48999c73",
    pkE="4b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad19dec96c208b472",
    info="6d6573736167652f626874747020726571756573740001002000010001",
    enc_request="010020000100014b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad19dec96c208b472"
                "6374e469135906992e1268c594d2a10c695d858c40a026e7965e7d86b83dd440b2c0185204b4d63525",
)


def test_rfc9180_a11_base_aes128gcm_known_answer():
    v = {k: h(x) for k, x in A11.items()}
    assert hpke.derive_key_pair(v["ikmE"]) == (v["skEm"], v["pkEm"])
    shared, enc = hpke.encap(v["pkRm"], _ikm_e=v["ikmE"])
    assert enc == v["pkEm"] and shared == v["shared_secret"]
    assert hpke.decap(enc, v["skRm"]) == v["shared_secret"]
    key, nonce, exporter = Suite(AEAD_AES_128_GCM).key_schedule_base(shared, v["info"])
    assert (key, nonce, exporter) == (v["key"], v["base_nonce"], v["exporter_secret"])
    enc2, ct = hpke.seal_base(Suite(AEAD_AES_128_GCM), v["pkRm"], v["info"], v["aad"], v["pt"], _ikm_e=v["ikmE"])
    assert enc2 == v["pkEm"] and ct == v["ct"]
    assert hpke.open_base(Suite(AEAD_AES_128_GCM), enc2, v["skRm"], v["info"], v["aad"], ct) == v["pt"]


def test_rfc9180_a21_base_chacha20poly1305_known_answer():
    v = {k: h(x) for k, x in A21.items()}
    s = Suite(AEAD_CHACHA20_POLY1305)
    enc, ct = hpke.seal_base(s, v["pkRm"], v["info"], v["aad"], v["pt"], _ikm_e=v["ikmE"])
    assert enc == v["enc"] and ct == v["ct"]
    assert hpke.open_base(s, enc, v["skRm"], v["info"], v["aad"], ct) == v["pt"]


def test_rfc9458_appendix_a_key_config_and_request():
    v = {k: h(x) for k, x in OHTTP.items()}
    # key config codec round-trips the RFC bytes (one entry of an application/ohttp-keys list)
    kl = decode_key_list(len(v["key_config"]).to_bytes(2, "big") + v["key_config"])
    assert len(kl) == 1 and kl[0].key_id == 1 and kl[0].suites == ((1, 1), (1, 3))
    assert kl[0].encode() == v["key_config"]
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    assert X25519PrivateKey.from_private_bytes(v["skR"]).public_key().public_bytes_raw() == kl[0].public_key
    # our OpenBase opens the RFC's encapsulated request
    hdr, enc, ct = v["enc_request"][:7], v["enc_request"][7:39], v["enc_request"][39:]
    assert enc == v["pkE"] and v["info"] == b"message/bhttp request\x00" + hdr
    assert hpke.open_base(Suite(AEAD_AES_128_GCM), enc, v["skR"], v["info"], b"", ct) == v["request"]


def test_rfc9458_request_reproduced_by_pyhpke_oracle():
    pyhpke = pytest.importorskip("pyhpke")
    from pyhpke import AEADId, CipherSuite, KDFId, KEMId, KEMKeyPair
    v = {k: h(x) for k, x in OHTTP.items()}
    cs = CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.AES128_GCM)
    skr = cs.kem.deserialize_private_key(v["skR"])
    pk_r = decode_key_list(len(v["key_config"]).to_bytes(2, "big") + v["key_config"])[0].public_key
    eks = KEMKeyPair(cs.kem.deserialize_private_key(v["skE"]), cs.kem.deserialize_public_key(v["pkE"]))
    enc, sender = cs.create_sender_context(cs.kem.deserialize_public_key(pk_r), v["info"], eks=eks)
    assert v["enc_request"][:7] + enc + sender.seal(v["request"], b"") == v["enc_request"]
    assert cs.create_recipient_context(v["pkE"], skr, info=v["info"]).open(v["enc_request"][39:], b"") == v["request"]
    _ = pyhpke


def _setup():
    sk, pk = hpke.generate_key_pair()
    key = KeyConfig(7, pk, ((1, AEAD_AES_128_GCM), (1, AEAD_CHACHA20_POLY1305)))
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    return key, {7: X25519PrivateKey.from_private_bytes(sk)}, sk


def test_our_envelope_opens_with_pyhpke_and_matches_golden():
    pytest.importorskip("pyhpke")
    from pyhpke import AEADId, CipherSuite, KDFId, KEMId
    key, sks, sk = _setup()
    task, dig, crowd, pt = b"T" * 32, b"D" * 32, b"crowd-a", b"plaintext-bytes"
    ikm = b"fixed ephemeral ikm for the golden vector"
    env = seal_report(key, task, dig, crowd, pt, _ikm_e=ikm)
    cs = CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.AES128_GCM)
    from shuffledp.service.wire import envelope_info
    info = envelope_info(env[:7], task, dig, crowd)
    rc = cs.create_recipient_context(env[7:39], cs.kem.deserialize_private_key(sk), info=info)
    assert rc.open(env[39:], b"") == pt
    # deterministic with a fixed ephemeral ikm (golden) and opens through the runtime path
    assert seal_report(key, task, dig, crowd, pt, _ikm_e=ikm) == env
    assert open_report(env, sks, task, dig, crowd) == pt
    assert len(env) == 7 + 32 + len(pt) + 16


@pytest.mark.parametrize("aead", [AEAD_AES_128_GCM, AEAD_CHACHA20_POLY1305])
def test_any_flipped_bit_or_moved_report_fails(aead):
    key, sks, _ = _setup()
    task, dig, crowd = b"\x01" * 32, b"\x02" * 32, b"c1"
    env = seal_report(key, task, dig, crowd, b"\x00" * 33, aead)
    assert open_report(env, sks, task, dig, crowd) == b"\x00" * 33
    for bit in range(len(env) * 8):
        bad = bytearray(env)
        bad[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises((HpkeError, DecodeError)):
            open_report(bytes(bad), sks, task, dig, crowd)
    for t, d, c in [(b"\x03" * 32, dig, crowd), (task, b"\x04" * 32, crowd), (task, dig, b"c2"), (task, dig, b"")]:
        with pytest.raises(HpkeError):
            open_report(env, sks, t, d, c)


def test_key_list_and_plaintext_schema_round_trip():
    keys = [KeyConfig(1, b"\x01" * 32), KeyConfig(2, b"\x02" * 32, ((1, 1), (1, 3)))]
    assert decode_key_list(encode_key_list(keys)) == keys
    schema = PlaintextSchema((("seed", "<u8", ()), ("y", "<i8", ()), ("v", "|u1", (5,))))
    n = 17
    rng = np.random.default_rng(3)
    reps = {"seed": rng.integers(0, 2**63, n).astype(np.uint64), "y": rng.integers(-5, 5, n),
            "v": rng.integers(0, 2, (n, 5)).astype(np.uint8)}
    ids = rng.integers(0, 256, (n, 16)).astype(np.uint8)
    times = rng.integers(0, 10**6, n)
    rows = schema.encode(reps, ids, times)
    out, ids2, t2 = schema.decode(rows)
    assert all(np.array_equal(out[k], reps[k]) for k in reps)
    assert np.array_equal(ids2, ids) and np.array_equal(t2, times)
    with pytest.raises(DecodeError):
        schema.decode(rows[:, :-1])


def test_client_encoding_refuses_a_seed():
    from shuffledp.core.errors import ValidationError as VE
    from shuffledp.service.client import encode_reports
    from shuffledp.service.config import create_task_config
    cfg = create_task_config(name="s", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                  "params": {"d": 4}}, target_central={"eps": 1, "delta": 1e-8})
    assert encode_reports(cfg, np.array([1, 2]), 0.0).shape == (2, cfg.report_schema.length)
    for bad in (1, np.random.default_rng(1)):
        with pytest.raises(VE):
            encode_reports(cfg, np.array([1]), 0.0, rng=bad)
