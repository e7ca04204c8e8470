"""Production randomness: a cryptographic bit generator keyed from os.urandom, one per encode call."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from randomgen import AESCounter, ChaCha

from shuffledp.core import ValidationError, as_generator
from shuffledp.core import rng as rng_mod


def _key_bytes(bitgen) -> bytes:
    """The cipher key inside a randomgen bit generator's state, as little-endian bytes."""
    st = bitgen.state
    if isinstance(bitgen, AESCounter):
        return np.asarray(st["s"]["seed"][:2], dtype="<u8").tobytes()
    return np.asarray(st["state"]["keysetup"], dtype="<u4").tobytes()


@pytest.fixture(params=[True, False], ids=["aes-ni", "no-aes-ni"])
def cpu(request, monkeypatch):
    """Run a test on both branches of secure_rng (AES-128-CTR with AES instructions, else ChaCha20)."""
    if request.param and not rng_mod.AES_HARDWARE:
        pytest.skip("this CPU has no AES instructions")
    monkeypatch.setattr(rng_mod, "AES_HARDWARE", request.param)
    return request.param


def test_secure_rng_is_a_cryptographic_bit_generator(cpu):
    g = rng_mod.secure_rng()
    assert isinstance(g, np.random.Generator)
    if cpu:
        assert type(g.bit_generator) is AESCounter and g.bit_generator.use_aesni
    else:
        assert type(g.bit_generator) is ChaCha and g.bit_generator.state["state"]["rounds"] == 20
    assert isinstance(g.bit_generator, rng_mod.SECURE_BIT_GENERATORS)
    assert not isinstance(g.bit_generator, np.random.PCG64)


def test_secure_rng_is_keyed_with_fresh_os_urandom_bytes_on_every_call(cpu, monkeypatch):
    calls: list[bytes] = []
    counter = iter(range(1, 1000))

    def fake_urandom(k: int) -> bytes:
        out = bytes((next(counter) * 37 + i) % 256 for i in range(k))
        calls.append(out)
        return out

    monkeypatch.setattr(rng_mod.os, "urandom", fake_urandom)
    x, y = rng_mod.secure_rng(), rng_mod.secure_rng()
    key_len = 16 if cpu else 32  # AES-128's key; ChaCha20's 256-bit key
    assert [len(c) for c in calls] == [key_len, key_len]  # each call reads the OS once
    # the key is the OS bytes themselves (no seeding PRNG in between), counter at 0
    assert _key_bytes(x.bit_generator) == calls[0] and _key_bytes(y.bit_generator) == calls[1]
    assert not np.array_equal(x.integers(0, 2**63, 8), y.integers(0, 2**63, 8))
    # the stream is a function of the key only: same OS bytes, same stream
    monkeypatch.setattr(rng_mod.os, "urandom", lambda k: calls[0])
    z = rng_mod.secure_rng()
    monkeypatch.setattr(rng_mod.os, "urandom", lambda k: calls[0])
    x2 = rng_mod.secure_rng()
    np.testing.assert_array_equal(z.integers(0, 2**63, 8), x2.integers(0, 2**63, 8))


def test_secure_rng_streams_differ_between_calls():
    a, b = rng_mod.secure_rng(), rng_mod.secure_rng()
    assert not np.array_equal(a.integers(0, 2**63, 8), b.integers(0, 2**63, 8))


def test_secure_uniforms_are_on_the_2_pow_minus_53_grid(cpu):
    """The local samplers' exactness (rng.random() < t with t on the 2^-53 grid) holds for them."""
    u = rng_mod.secure_rng().random(20_000)
    k = u * 2.0**53
    assert np.all(k == np.floor(k)) and np.all((u >= 0) & (u < 1))


def test_packed_sampler_uses_full_64_bit_raw_words():
    from shuffledp.local.packed import random_words

    for g in (np.random.Generator(AESCounter(key=5)), np.random.Generator(ChaCha(key=5, rounds=20))):
        assert random_words(g) == g.bit_generator.random_raw  # bound methods compare equal


def test_production_paths_use_the_secure_generator(monkeypatch):
    made = []
    real = rng_mod.secure_rng

    def recording():
        g = real()
        made.append(g)
        return g

    monkeypatch.setattr(rng_mod, "secure_rng", recording)
    g1, g2 = as_generator(None, production=True), as_generator(None, production=True)
    assert g1 is made[0] and g2 is made[1] and g1 is not g2  # a fresh generator per call
    assert isinstance(g1.bit_generator, rng_mod.SECURE_BIT_GENERATORS)
    for bad in (5, np.random.default_rng(1)):
        with pytest.raises(ValidationError):
            as_generator(bad, production=True)

    # pipeline.run(production=True): the encoder gets the secure generator
    from shuffledp import pipeline
    from shuffledp.shuffle.baselines import LdpKRR

    proto = LdpKRR(2.0, n=50, d=4)
    seen = []
    orig = proto.encode

    def spy_encode(values, rng):
        seen.append(rng)
        return orig(values, rng)

    proto.encode = spy_encode
    pipeline.run(proto, np.arange(50) % 4, production=True)
    assert len(seen) == 1 and isinstance(seen[0].bit_generator, rng_mod.SECURE_BIT_GENERATORS)


def test_client_encoders_use_the_secure_generator():
    pytest.importorskip("httpx")
    from shuffledp.service import client
    from shuffledp.service.config import create_task_config

    cfg = create_task_config(name="s", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                  "params": {"d": 4}}, target_central={"eps": 1, "delta": 1e-8})
    mech = cfg.mechanism_object()
    seen = []

    class Spy:
        def randomize(self, values, rng):
            seen.append(rng)
            return mech.randomize(values, rng)

    # encode_reports: one secure generator for the whole vectorized call
    assert client.encode_reports(cfg, np.array([1, 2, 3]), 0.0, mech=Spy()).shape[0] == 3
    # the SDK's one-report encode: a fresh secure generator per report
    sdk = SimpleNamespace(cfg=SimpleNamespace(client_policy=SimpleNamespace(memoize=False), eps_local=2.0),
                          mech=Spy(), protocol=None, _longitudinal=False)
    sdk._report_epsilon = lambda: client.ShuffleDPClient._report_epsilon(sdk)
    client.ShuffleDPClient._message(sdk, 2)
    client.ShuffleDPClient._message(sdk, 2)
    assert len(seen) == 3 and len({id(g) for g in seen}) == 3
    assert all(isinstance(g.bit_generator, rng_mod.SECURE_BIT_GENERATORS) for g in seen)
